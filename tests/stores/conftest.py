"""Fixtures that build every store backend for the store tests.

``store_factory`` is parametrised over every backend: MemoryStore, FilesystemStore,
ZipStore, LMDBStore, SQLStore on SQLite, and SQLStore on PostgreSQL when
``KVZARR_TEST_POSTGRES_URL`` names a server (CI starts one). A factory opens one location: ``make()`` a writable handle, ``reopen(read_only=...)`` a new
handle on the same data (None for MemoryStore, whose data lives in its handle).
"""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvzarr.stores.base import Store


def _backend(module: str, cls: str) -> type[Store]:
    # Imported on use, so a backend that fails to import fails only its own tests.
    return getattr(importlib.import_module(f"kvzarr.stores.{module}"), cls)


class StoreFactory:
    """Opens stores of one backend at one location."""

    def __init__(self, name: str, opener: Callable[[bool], Store], persistent: bool) -> None:
        self.name = name
        self._opener = opener
        self.persistent = persistent
        self.opened: list[Store] = []

    def make(self, read_only: bool = False) -> Store:
        store = self._opener(read_only)
        self.opened.append(store)
        return store

    def reopen(self, read_only: bool = False) -> Store | None:
        return self.make(read_only) if self.persistent else None

    def close_all(self) -> None:
        for store in self.opened:
            store.close()

    def __repr__(self) -> str:
        return f"StoreFactory({self.name})"


def _memory(tmp: Path) -> StoreFactory:
    from kvzarr.stores.memory import MemoryStore
    return StoreFactory("memory", lambda ro: MemoryStore(read_only=ro), persistent=False)


def _filesystem(tmp: Path) -> StoreFactory:
    from kvzarr.stores.filesystem import FilesystemStore
    return StoreFactory("filesystem", lambda ro: FilesystemStore(tmp / "data", read_only=ro),
                        persistent=True)


def _zip(tmp: Path) -> StoreFactory:
    cls = _backend("zip", "ZipStore")
    return StoreFactory("zip", lambda ro: cls(tmp / "x.zip", read_only=ro), persistent=True)


def _lmdb(tmp: Path) -> StoreFactory:
    cls = _backend("lmdb", "LMDBStore")
    return StoreFactory("lmdb", lambda ro: cls(tmp / "x.lmdb", read_only=ro), persistent=True)


def _sql(tmp: Path) -> StoreFactory:
    cls = _backend("sql", "SQLStore")
    return StoreFactory("sql", lambda ro: cls(f"sqlite:///{tmp / 'x.sqlite'}", read_only=ro),
                        persistent=True)


def _postgresql(tmp: Path) -> StoreFactory:
    cls = _backend("sql", "SQLStore")
    table = f"t_{uuid.uuid4().hex[:12]}"  # a fresh, empty store per test on one server
    url = os.environ["KVZARR_TEST_POSTGRES_URL"]
    return StoreFactory("postgresql", lambda ro: cls(url, table=table, read_only=ro),
                        persistent=True)


BACKENDS: dict[str, Callable[[Path], StoreFactory]] = {
    "memory": _memory, "filesystem": _filesystem, "zip": _zip, "lmdb": _lmdb, "sql": _sql}
if os.environ.get("KVZARR_TEST_POSTGRES_URL"):
    BACKENDS["postgresql"] = _postgresql


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    factory = BACKENDS[request.param](tmp_path)
    try:
        yield factory
    finally:
        factory.close_all()
