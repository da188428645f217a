"""The shipped store conformance suite (kvzarr.testing) over every store backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kvzarr.stores.base import Store
from kvzarr.testing import StoreConformance

from .conftest import StoreFactory


class TestStoreConformance(StoreConformance):
    @pytest.fixture
    def store(self, store_factory: StoreFactory) -> Iterator[Store]:
        self.factory = store_factory
        yield store_factory.make()

    def reopen(self, store: Store, *, read_only: bool) -> Store | None:
        return self.factory.reopen(read_only)
