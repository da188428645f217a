"""Fixtures of the transformer tests.

``store_factory``: every store backend, as the store tests build them (memory,
filesystem, zip, LMDB, SQLite, and PostgreSQL when ``KVZARR_TEST_POSTGRES_URL`` names a
server). ``stack_factory``: every backend under every transformer stack of ``STACKS``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvzarr.stores.base import Store
from kvzarr.transformers import build_stack
from kvzarr.transformers.stack import transformer_class
from tests.stores.conftest import BACKENDS, StoreFactory, store_factory  # noqa: F401

#: every storage transformer by name
TRANSFORMER_NAMES = ("cache", "checksum", "append_shards")
#: each transformer alone, then all three stacked in every order (listed from the array
#: down to the store, as ``transformers=[...]`` takes them)
STACKS: list[tuple[str, ...]] = ([(name,) for name in TRANSFORMER_NAMES]
                                 + list(itertools.permutations(TRANSFORMER_NAMES)))
#: the options the stacks are built with: a small cache, so that the suite's large values
#: pass by it and evict; everything else as users get it
OPTIONS = {"cache": {"max_bytes": 1 << 20}}


def stack_id(stack: tuple[str, ...]) -> str:
    return "+".join(stack)


class StackFactory(StoreFactory):
    """Opens one backend's store under a transformer stack. A read-only handle leaves out
    the transformers that must write (``needs_write``: a stack refuses them over a
    read-only store), as a user reopening the data read-only would."""

    def __init__(self, inner: StoreFactory, stack: tuple[str, ...]) -> None:
        super().__init__(f"{inner.name}+{stack_id(stack)}", self._open, inner.persistent)
        self.inner = inner
        self.stack = stack

    def over(self, store: Store) -> Store:
        """``store`` under this factory's stack (the read-only one for a read-only store)."""
        items = [{"name": name, **OPTIONS.get(name, {})} for name in self.stack
                 if not (store.read_only and transformer_class(name).needs_write)]
        return build_stack(store, items)

    def _open(self, read_only: bool) -> Store:
        return self.over(self.inner.make(read_only))


@pytest.fixture(params=[(b, s) for b in sorted(BACKENDS) for s in STACKS],
                ids=lambda p: f"{p[0]}-{stack_id(p[1])}")
def stack_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StackFactory]:
    backend, stack = request.param
    factory = StackFactory(BACKENDS[backend](tmp_path), stack)
    try:
        yield factory
    finally:
        factory.close_all()
