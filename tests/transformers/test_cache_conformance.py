"""The store conformance suite over a Cache on every store backend (memory, directory,
zip, LMDB, SQLite, and PostgreSQL when KVZARR_TEST_POSTGRES_URL names a server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kvzarr.stores.base import Store
from kvzarr.testing import StoreConformance
from kvzarr.transformers import Cache, stack_layers

from ..stores.conftest import StoreFactory, store_factory  # noqa: F401  (the fixture)


class TestCacheConformance(StoreConformance):
    @pytest.fixture
    def store(self, store_factory: StoreFactory) -> Iterator[Store]:  # noqa: F811
        self.factory = store_factory
        yield Cache(store_factory.make(), max_bytes=1 << 20)

    def reopen(self, store: Store, *, read_only: bool) -> Store | None:
        base = self.factory.reopen(read_only)
        return None if base is None else Cache(base, max_bytes=1 << 20)

    def new_read_only(self, store: Store) -> Store:
        return Cache(type(stack_layers(store)[-1])(read_only=True), max_bytes=1 << 20)
