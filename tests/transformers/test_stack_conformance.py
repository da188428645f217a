"""The store conformance suite (kvzarr.testing) over every transformer alone and all
three stacked in every order, on every store backend: a stack keeps every promise of the
store under it, and tests skip by capability only.

A read-only handle leaves out AppendShards (it writes, and a stack refuses it over a
read-only store); what it wrote reads the same without it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kvzarr.stores.base import Store
from kvzarr.stores.memory import MemoryStore
from kvzarr.testing import StoreConformance
from kvzarr.transformers import stack_layers

from .conftest import StackFactory


class TestStackConformance(StoreConformance):
    @pytest.fixture
    def store(self, stack_factory: StackFactory) -> Iterator[Store]:
        self.factory = stack_factory
        stack = stack_factory.make()
        assert len(stack_layers(stack)) == len(stack_factory.stack) + 1
        yield stack

    def reopen(self, store: Store, *, read_only: bool) -> Store | None:
        return self.factory.reopen(read_only)

    def new_read_only(self, store: Store) -> Store:
        # a MemoryStore's data lives in its handle: a new, empty one under the stack
        return self.factory.over(MemoryStore(read_only=True))
