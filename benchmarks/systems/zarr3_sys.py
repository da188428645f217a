"""zarr-python 3 on LocalStore, ZipStore and MemoryStore, with default options, and on
kvzarr's stores through ``kvzarr.ZarrStore`` (kind ``"kvzarr"``: the file suffix names
the backend).

A ZipStore is written in mode "w" (or "a" to change an existing archive) and must be
closed before a reader sees the central directory; that close is part of the timed write.
"""

from __future__ import annotations

from typing import Any

from .base import Handle
from .zarr_python import ZarrPythonSystem


def codecs_of(codec: dict[str, Any], itemsize: int) -> list[Any] | None:
    from zarr.codecs import BloscCodec, GzipCodec
    if codec["id"] == "none":
        return None
    if codec["id"] == "blosc-zstd":
        return [BloscCodec(cname="zstd", clevel=codec["clevel"], shuffle="shuffle",
                           typesize=itemsize)]
    if codec["id"] == "gzip":
        return [GzipCodec(level=codec["level"])]
    raise ValueError(codec)


class Zarr3System(ZarrPythonSystem):
    def __init__(self, info: Any, root: Any) -> None:
        super().__init__(info, root)
        import zarr
        self.zarr = zarr
        self.kind = info.kwargs["store"]
        self.suffix = ".zip" if self.kind == "zip" else info.kwargs.get("suffix", "")
        self._stores: dict[str, tuple[Any, str]] = {}
        self._owned: dict[str, Any] = {}      # kvzarr stores opened with options
        self.shared_writes = "not promised: no lock around a read-modify-write"
        if self.kind == "kvzarr":
            # imported now, untimed: the SQLite store's module imports SQLAlchemy
            import kvzarr.stores.lmdb  # noqa: F401
            import kvzarr.stores.sql  # noqa: F401
        if self.kind == "memory":
            self.missing = {"multiprocess": "a MemoryStore lives in one process",
                            "bytes-written": "a MemoryStore writes no files"}
        elif self.kind == "zip":
            self.missing = {"multiprocess": "ZipStore appends to one open archive: one "
                            "writing process only"}

    def store(self, loc: str, write: bool) -> Any:
        if self.kind == "zip":
            return self.zip_store(loc, write)
        st, _ = self._stores.get(loc, (None, ""))
        if st is None:
            if self.kind == "kvzarr":
                import kvzarr
                options = self.info.kwargs.get("options")
                if not options:
                    st = kvzarr.ZarrStore(loc)
                else:       # a Store object the ZarrStore leaves open: close() does
                    opener = kvzarr.LMDBStore if loc.endswith(".lmdb") else kvzarr.SQLStore
                    self._owned[loc] = opener(loc, **options)
                    st = kvzarr.ZarrStore(self._owned[loc])
                if "offload_bytes" in self.info.kwargs:
                    st.offload_bytes = self.info.kwargs["offload_bytes"]
            elif self.kind == "memory":
                st = self.zarr.storage.MemoryStore()
            else:
                st = self.zarr.storage.LocalStore(loc)
            self._stores[loc] = (st, "a")
        return st

    def finish(self, loc: str) -> None:
        if self.kind == "zip":
            self.close(loc)

    def close(self, loc: str) -> None:
        st, _ = self._stores.get(loc, (None, ""))
        if st is not None and self.kind != "memory":
            self._stores.pop(loc)
            st.close()
            if loc in self._owned:
                self._owned.pop(loc).close()

    def drop(self, loc: str) -> None:
        super().drop(loc)
        self._stores.pop(loc, None)

    def create(self, loc, name, shape, dtype, chunks, codec, shards=None) -> Handle:
        import numpy as np
        a = self.zarr.create_array(
            self.store(loc, True), name=name, shape=shape, dtype=dtype, chunks=chunks,
            shards=shards, compressors=codecs_of(codec, np.dtype(dtype).itemsize),
            fill_value=0, overwrite=True)
        return Handle(a)

    # -- hierarchy -----------------------------------------------------------------------

    def h_array(self, group, name, attrs):
        group.create_array(name, shape=(16,), chunks=(16,), dtype="int32", fill_value=0,
                           attributes=attrs)
