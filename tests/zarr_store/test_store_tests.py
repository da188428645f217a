"""zarr-python's own store conformance tests (``zarr.testing.store.StoreTests``) run on
a ZarrStore over every backend of kvzarr's test suite."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

pytest.importorskip("zarr")

from zarr.core.buffer import cpu  # noqa: E402
from zarr.core.sync import sync  # noqa: E402
from zarr.testing.store import StoreTests  # noqa: E402

from kvzarr.errors import NotPicklableError  # noqa: E402
from kvzarr.stores.base import Store  # noqa: E402
from kvzarr.stores.memory import MemoryStore  # noqa: E402
from kvzarr.zarr_store import ZarrStore  # noqa: E402

from .conftest import BACKEND_NAMES, empty_target  # noqa: E402


class TestZarrStoreConformance(StoreTests[ZarrStore, cpu.Buffer]):
    store_cls = ZarrStore
    buffer_cls = cpu.Buffer

    @pytest.fixture(params=BACKEND_NAMES)
    def store_kwargs(self, request: pytest.FixtureRequest,
                     reused_locations: dict[str, Any]) -> dict[str, Any]:
        return {"target": empty_target(request.param, reused_locations)}

    @pytest.fixture
    def store(self, open_kwargs: dict[str, Any]) -> Any:
        store = sync(ZarrStore.open(**open_kwargs))
        yield store
        store.close()

    @pytest.fixture
    def store_not_open(self, store_kwargs: dict[str, Any]) -> Any:
        store = ZarrStore(**store_kwargs)
        yield store
        store.close()

    # the test's own access to the data, past the adapter: the kvzarr store under it
    async def set(self, store: ZarrStore, key: str, value: cpu.Buffer) -> None:
        store.store.set(key, value.to_bytes())

    async def get(self, store: ZarrStore, key: str) -> cpu.Buffer:
        return self.buffer_cls.from_bytes(store.store.get(key))

    def test_store_repr(self, store: ZarrStore) -> None:
        assert repr(store).startswith("ZarrStore(")
        assert repr(store._target) in repr(store)

    def test_store_supports_writes(self, store: ZarrStore) -> None:
        assert store.supports_writes
        assert store.supports_deletes

    def test_store_supports_listing(self, store: ZarrStore) -> None:
        assert store.supports_listing

    async def test_serializable_store(self, store: ZarrStore) -> None:
        target = store._target
        if isinstance(target, MemoryStore):
            with pytest.raises(NotPicklableError, match="MemoryStore"):
                pickle.dumps(store)
            return
        if isinstance(target, Store) and not hasattr(Store, "_reopen_args"):
            pytest.skip("kvzarr Store objects pickle once stores cross processes "
                        "(issue 14, item 3)")
        await super().test_serializable_store(store)
