"""The store conformance suite (kvzarr.testing) over the checksum transformer on every
store backend, with a block size smaller than most test values (so values span many
blocks and ranges cut through them) and with the default one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kvzarr.stores.base import Store
from kvzarr.stores.memory import MemoryStore
from kvzarr.testing import StoreConformance
from kvzarr.transformers import Checksum, build_stack

from .conftest import StoreFactory


@pytest.fixture(params=[64, None], ids=["blocks64", "default"])
def block_size(request: pytest.FixtureRequest) -> int | None:
    return request.param


def _checksum(block_size: int | None) -> Checksum:
    return Checksum() if block_size is None else Checksum(block_size=block_size)


class TestChecksumConformance(StoreConformance):
    @pytest.fixture
    def store(self, store_factory: StoreFactory, block_size: int | None) -> Iterator[Store]:
        self.factory, self.block_size = store_factory, block_size
        stack = build_stack(store_factory.make(), [_checksum(block_size)])
        yield stack
        stack.close()

    def reopen(self, store: Store, *, read_only: bool) -> Store | None:
        base = self.factory.reopen(read_only)
        return None if base is None else build_stack(base, [_checksum(self.block_size)])

    def _read_only_handle(self, store: Store) -> tuple[Store, dict[str, bytes]]:
        if self.factory.persistent:
            return super()._read_only_handle(store)
        # the data lives in the closed handle: a read-only stack over a new, empty
        # store, as the suite does for such stores itself
        self.populate(store)
        store.close()
        return build_stack(MemoryStore(read_only=True), [_checksum(self.block_size)]), {}
