"""kvzarr on each of its stores: FilesystemStore, LMDBStore, SQLStore (SQLite, and
PostgreSQL when KVZARR_BENCH_POSTGRES_URL names a server: a table per location),
ZipStore and MemoryStore, each with its default options (the durability a user gets
without asking), optionally under storage transformers. Everything goes through the
public Array API, never the store directly.

W4 creates its hierarchy the way kvzarr's documentation tells a user to create many
nodes: inside one ``with store.transaction():``, so the creates share one commit (one
fsync on LMDB and SQLite) instead of each being its own durable transaction. The
transaction begins after the root group is made and commits in ``finish()``, which the
workload times with the creates. zarr-python 2 has no transactions: its LMDBStore runs
with sync off and never syncs (its ``flush()`` in ``finish()`` is timed but skips the
sync); its SQLiteStore commits every key on its own. The ``-nosync`` variant matches
that: ``durability="none"`` and no ``flush()``.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from typing import Any

from .base import Handle, System
from .postgres import POSTGRES_URL, drop_pg_tables, pg_table

_SUFFIX = {"fs": "", "lmdb": ".lmdb", "sql": ".db", "zip": ".zip", "memory": "", "pg": ""}


def v2_compressor_of(codec: dict[str, Any]) -> dict[str, Any] | None:
    """The workload's codec as a Zarr v2 compressor (numcodecs' config)."""
    if codec["id"] == "none":
        return None
    if codec["id"] == "blosc-zstd":
        return {"id": "blosc", "cname": "zstd", "clevel": codec["clevel"], "shuffle": 1,
                "blocksize": 0}
    if codec["id"] == "gzip":
        return {"id": "gzip", "level": codec["level"]}
    raise ValueError(codec)


def codecs_of(codec: dict[str, Any], itemsize: int) -> list[dict[str, Any]] | None:
    if codec["id"] == "none":
        return None
    if codec["id"] == "blosc-zstd":
        return [{"name": "blosc", "configuration": {
            "cname": "zstd", "clevel": codec["clevel"], "shuffle": "shuffle",
            "typesize": itemsize, "blocksize": 0}}]
    if codec["id"] == "gzip":
        return [{"name": "gzip", "configuration": {"level": codec["level"]}}]
    raise ValueError(codec)


def _writes_through_map(options: dict[str, Any]) -> bool:
    """Whether an LMDBStore with ``options`` writes through LMDB's map (on Linux)."""
    from kvzarr.stores.lmdb.env import default_write_map
    return default_write_map(options.get("durability", "full"), options.get("write_map"))


def _store_class(kind: str) -> Any:
    """The kvzarr store class of a system's ``store`` kind."""
    if kind == "memory":
        from kvzarr import MemoryStore
        return MemoryStore
    if kind == "fs":
        from kvzarr import FilesystemStore
        return FilesystemStore
    if kind == "lmdb":
        from kvzarr.stores.lmdb import LMDBStore
        return LMDBStore
    if kind in ("sql", "pg"):
        from kvzarr.stores.sql import SQLStore
        return SQLStore
    from kvzarr.stores.zip import ZipStore
    return ZipStore


class KvzarrSystem(System):
    def __init__(self, info: Any, root: Any) -> None:
        super().__init__(info, root)
        import kvzarr
        self.kvzarr = kvzarr
        self.kind = info.kwargs["store"]
        self.options = info.kwargs.get("options", {})
        #: storage transformers stacked on each store (kvzarr.open_store's transformers=)
        self.transformers = info.kwargs.get("transformers", [])
        self.suffix = _SUFFIX[self.kind]
        # imported now, untimed, as the peers import theirs: kvzarr.stores.sql imports
        # SQLAlchemy (~150 ms), which the first timed write of every job paid before
        self.store_class = _store_class(self.kind)
        #: the Zarr format of the arrays and groups it creates (2: v2 documents)
        self.zarr_format = info.kwargs.get("zarr_format", 3)
        self._stores: dict[str, Any] = {}
        #: location -> the open transaction W4 creates its hierarchy in
        self._batches: dict[str, ExitStack] = {}
        if self.kind == "memory":
            self.missing = {"multiprocess": "a MemoryStore lives in one process",
                            "shared-writes": "a MemoryStore lives in one process",
                            "bytes-written": "a MemoryStore writes no files"}
        if self.kind == "lmdb" and sys.platform.startswith("linux") and \
                _writes_through_map(self.options):
            self.missing = {"bytes-written": "LMDBStore writes through a writable memory "
                                             "map, which the write counter cannot see"}
        # what the store documents about writers sharing a chunk (W6 measures it)
        self.shared_writes = (
            "promised: each write is one transaction" if self.kind != "fs" else
            "promised: a key lock (flock) around each read-modify-write"
            if self.options.get("key_locks", True) else
            "not promised: key_locks=False, no lock around a read-modify-write")
        if self.options.get("directory") == "close":
            self.missing = {"multiprocess": "directory='close': one writing handle holds "
                                            "the archive's lock until it closes"}
        if self.kind == "pg":
            self.url = os.environ.get(POSTGRES_URL)
            if not self.url:
                #: why this system cannot run here (the worker reports n/a with it)
                self.unavailable = f"set {POSTGRES_URL} to a PostgreSQL server's URL"
            self.missing = {"bytes-written": "the server process writes, not this one"}

    def location(self, tag: str) -> str:
        if self.kind == "pg":
            return pg_table(tag)        # a table on the server
        return super().location(tag)

    def store(self, loc: str) -> Any:
        st = self._stores.get(loc)
        if st is None:
            if self.kind == "memory":
                st = self.store_class()
            elif self.kind == "pg":
                st = self.store_class(self.url, table=loc, **self.options)
            else:
                st = self.store_class(loc, **self.options)
            if self.transformers:
                st = self.kvzarr.open_store(st, transformers=self.transformers)
            self._stores[loc] = st
        return st

    def finish(self, loc: str) -> None:
        batch = self._batches.pop(loc, None)
        if batch is not None:
            batch.close()   # commits the creates
        st = self._stores.get(loc)
        if st is not None and self.options.get("directory") == "close":
            st.flush()      # the zip directory of the held commits, as the peers' close

    def close(self, loc: str) -> None:
        batch = self._batches.pop(loc, None)
        if batch is not None:   # a run that failed half way: roll its creates back
            batch.__exit__(RuntimeError, RuntimeError("abandoned"), None)
        if self.kind == "memory":
            return   # the data lives in the store object: drop() lets it go
        st = self._stores.pop(loc, None)
        if st is not None and hasattr(st, "close"):
            st.close()

    def drop(self, loc: str) -> None:
        if self.kind == "pg":
            self.close(loc)
            drop_pg_tables(self.url, [loc, f"{loc}_version", f"{loc}_info"])
            return
        super().drop(loc)
        self._stores.pop(loc, None)

    def create(self, loc, name, shape, dtype, chunks, codec, shards=None) -> Handle:
        import numpy as np
        if self.zarr_format == 2:
            a = self.kvzarr.create_array(
                self.store(loc), name=name, shape=shape, dtype=dtype, chunks=chunks,
                compressors=v2_compressor_of(codec), fill_value=0, overwrite=True,
                zarr_format=2)
            return Handle(a)
        a = self.kvzarr.create_array(
            self.store(loc), name=name, shape=shape, dtype=dtype, chunks=chunks,
            shards=shards, compressors=codecs_of(codec, np.dtype(dtype).itemsize),
            fill_value=0, overwrite=True)
        return Handle(a)

    def open(self, loc, name, write=False) -> Handle:
        return Handle(self.kvzarr.open_array(self.store(loc), path=name,
                                             mode="r+" if write else "r"))

    # -- hierarchy -----------------------------------------------------------------------

    def h_root(self, loc):
        root = self.kvzarr.open_group(self.store(loc), mode="w",
                                      zarr_format=self.zarr_format)
        batch = ExitStack()
        batch.enter_context(root.store.transaction())
        self._batches[loc] = batch
        return root

    def h_group(self, parent, name):
        return parent.create_group(name)

    def h_array(self, group, name, attrs):
        group.create_array(name, shape=(16,), chunks=(16,), dtype="int32", fill_value=0,
                           attributes=attrs)

    def h_attrs(self, loc, path):
        return self.kvzarr.open_array(self.store(loc), path=path, mode="r").attrs.asdict()

    def h_children(self, loc, path):
        return list(self.kvzarr.open_group(self.store(loc), path=path, mode="r").keys())
