"""The store conformance suite (kvzarr.testing) over the checksum transformer, as users
get it (default options), on every store backend. (Small blocks, where values span many
of them, are the business of the other checksum tests.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kvzarr.stores.base import Store
from kvzarr.stores.memory import MemoryStore
from kvzarr.testing import StoreConformance
from kvzarr.transformers import Checksum, build_stack

from .conftest import StoreFactory


class TestChecksumConformance(StoreConformance):
    @pytest.fixture
    def store(self, store_factory: StoreFactory) -> Iterator[Store]:
        self.factory = store_factory
        stack = build_stack(store_factory.make(), [Checksum()])
        yield stack
        stack.close()

    def reopen(self, store: Store, *, read_only: bool) -> Store | None:
        base = self.factory.reopen(read_only)
        return None if base is None else build_stack(base, [Checksum()])

    def _read_only_handle(self, store: Store) -> tuple[Store, dict[str, bytes]]:
        if self.factory.persistent:
            return super()._read_only_handle(store)
        # the data lives in the closed handle: a read-only stack over a new, empty
        # store, as the suite does for such stores itself
        self.populate(store)
        store.close()
        return build_stack(MemoryStore(read_only=True), [Checksum()]), {}
