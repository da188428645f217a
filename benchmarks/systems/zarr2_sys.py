"""zarr-python 2 (format v2) on LMDBStore, SQLiteStore, DirectoryStore and ZipStore, with
their default options. Runs in its own environment: zarr-python 2 and 3 are both
``import zarr``.

zarr-python 2 has no sharding (W3's sharded parts are "n/a"). Its LMDBStore runs with
sync off and never syncs: its ``flush()`` calls ``env.sync()`` without ``force``, which
LMDB skips for an environment opened without sync, and ``close()`` does not sync either
(strace shows no fsync, fdatasync or msync). Its SQLiteStore commits each key on its
own, its ZipStore must be closed before the archive is readable: each of those is part
of the timed write, as a user has to do it.
"""

from __future__ import annotations

import warnings
from typing import Any

from .base import Handle, numcodecs_compressor
from .zarr_python import ZarrPythonSystem

warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=UserWarning)   # duplicate zip members


class Zarr2System(ZarrPythonSystem):
    def __init__(self, info: Any, root: Any) -> None:
        super().__init__(info, root)
        import zarr
        self.zarr = zarr
        self.kind = info.kwargs["store"]
        self.suffix = {"lmdb": ".lmdb", "sqlite": ".sqlite", "zip": ".zip"}.get(self.kind, "")
        self._stores: dict[str, tuple[Any, str]] = {}
        self.missing = {"shards": "zarr-python 2 has no sharding"}
        if self.kind == "lmdb":
            self.missing["bytes-written"] = ("LMDBStore writes through a writable memory "
                                             "map, which the write counter cannot see")
        if self.kind == "zip":
            self.missing["multiprocess"] = ("ZipStore appends to one open archive: one "
                                            "writing process only")
        self.shared_writes = "not promised: no lock around a read-modify-write"

    def store(self, loc: str, write: bool) -> Any:
        if self.kind == "zip":
            return self.zip_store(loc, write)
        st, _ = self._stores.get(loc, (None, ""))
        storage = self.zarr.storage
        if st is None:
            st = {"lmdb": storage.LMDBStore, "sqlite": storage.SQLiteStore,
                  "directory": storage.DirectoryStore}[self.kind](loc)
            self._stores[loc] = (st, "a")
        return st

    def finish(self, loc: str) -> None:
        st, _ = self._stores.get(loc, (None, ""))
        if self.kind == "zip":
            self.close(loc)
        elif self.kind == "lmdb" and st is not None:
            st.flush()

    def close(self, loc: str) -> None:
        st, _ = self._stores.pop(loc, (None, ""))
        if st is not None and hasattr(st, "close"):
            st.close()

    def create(self, loc, name, shape, dtype, chunks, codec, shards=None) -> Handle:
        a = self.zarr.create(shape=shape, chunks=chunks, dtype=dtype,
                             compressor=numcodecs_compressor(codec),
                             fill_value=0, store=self.store(loc, True), path=name,
                             overwrite=True)
        return Handle(a)

    # -- hierarchy -----------------------------------------------------------------------

    def h_array(self, group, name, attrs):
        a = group.create_dataset(name, shape=(16,), chunks=(16,), dtype="int32",
                                 fill_value=0)
        a.attrs.put(attrs)
