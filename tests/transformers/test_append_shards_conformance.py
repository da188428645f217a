"""The store conformance suite over an AppendShards stack on every backend: the
transformer delegates every store operation unchanged (append included), so a stack
keeps every promise of the store under it.

A read-only handle is the bare store: AppendShards writes (``needs_write``) and refuses a
read-only base, and what it wrote must read the same without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kvzarr.stores.base import Store
from kvzarr.testing import StoreConformance
from kvzarr.transformers import AppendShards

from ..stores.conftest import BACKENDS, StoreFactory


@pytest.fixture(params=sorted(BACKENDS))
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    f = BACKENDS[request.param](tmp_path)
    try:
        yield f
    finally:
        f.close_all()


class TestAppendShardsConformance(StoreConformance):
    @pytest.fixture
    def store(self, factory: StoreFactory) -> Iterator[Store]:
        self.factory = factory
        stack = AppendShards(factory.make(), max_garbage=0.25)
        yield stack
        stack.close()

    def _read_only_handle(self, store: Store):
        if not self.factory.persistent:
            pytest.skip("a MemoryStore's data lives in its handle, which is not read-only")
        return super()._read_only_handle(store)

    def reopen(self, store: Store, *, read_only: bool) -> Store | None:
        plain = self.factory.reopen(read_only)
        if plain is None or read_only:
            return plain
        return AppendShards(plain)
