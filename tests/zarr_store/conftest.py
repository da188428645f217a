"""Fixtures of the ZarrStore tests.

``zarr_target(backend)``: a location of every backend the store tests build
(``tests/stores/conftest.py``: memory, filesystem, zip, LMDB, SQLite, and PostgreSQL
when ``KVZARR_TEST_POSTGRES_URL`` names a server) as a ZarrStore takes it: a path or
URL, or a Store object where a location cannot be named by one (a MemoryStore, a
PostgreSQL table of its own). The location exists (created empty), so that it can be
opened read-only.

zarr-python's ``StoreTests`` are coroutines (zarr's own suite runs them with
pytest-asyncio, which kvzarr does not depend on): ``pytest_pyfunc_call`` runs each
``async def`` test of this directory in a fresh event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvzarr.stores import open_store
from tests.stores.conftest import BACKENDS

BACKEND_NAMES = sorted(BACKENDS)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True


@pytest.fixture(scope="session")
def reused_locations(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One location per backend for the whole session, emptied for each test that takes
    it (creating a SQLite file or a PostgreSQL table per test would cost most of the
    run): backend -> target."""
    return {"_root": tmp_path_factory.mktemp("zarr-store-locations")}


def empty_target(backend: str, reused: dict[str, Any]) -> Any:
    """The session's location of ``backend`` (see ``reused_locations``), emptied."""
    if backend == "memory":
        from kvzarr.stores.memory import MemoryStore
        return MemoryStore()
    target = reused.get(backend)
    if target is None:
        target = reused[backend] = make_target(backend, reused["_root"])
    close_zarr_stores_under(reused["_root"])     # what the last test left open
    store = target if not isinstance(target, (str, Path)) else open_store(target)
    store.erase_prefix("")
    if store is not target:
        store.close()
    return target


def make_target(backend: str, tmp: Path) -> Any:
    """A new, empty location of ``backend`` under ``tmp``, as a ZarrStore target."""
    if backend == "memory":
        from kvzarr.stores.memory import MemoryStore
        return MemoryStore()
    if backend == "postgresql":
        from kvzarr.stores.sql import SQLStore
        return SQLStore(os.environ["KVZARR_TEST_POSTGRES_URL"],
                        table=f"t_{uuid.uuid4().hex[:12]}")
    target = {"filesystem": str(tmp / "data"), "zip": str(tmp / "x.zip"),
              "lmdb": str(tmp / "x.lmdb"), "sql": f"sqlite:///{tmp / 'x.sqlite'}"}[backend]
    store = open_store(target)
    store.set("made", b"")       # the location exists from the first commit on
    store.erase("made")
    store.close()
    return target


@pytest.fixture(autouse=True)
def _close_zarr_stores(tmp_path: Path) -> Iterator[None]:
    """Close the kvzarr stores the test's ZarrStores opened under its tmp_path (zarr's
    tests leave stores open): an LMDB environment would outlive its files."""
    yield
    close_zarr_stores_under(tmp_path)


def close_zarr_stores_under(root: Path) -> None:
    import sys
    module = sys.modules.get("kvzarr.zarr_store.sharing")
    if module is None:
        return
    places = (str(root), os.path.realpath(root))
    for origin in list(module._origins.values()):
        if any(p in origin.token for p in places) and origin.store is not None:
            store, origin.store, origin.refs = origin.store, None, 0
            store.close()
