"""TensorStore's ``zarr3`` driver over the ``file``, ``ocdbt`` (on file) and ``zip``
kvstores, with default context (no chunk cache, so repeated reads go to storage; the
file kvstore syncs each file it writes and its directory, ``file_io_sync``), or the
context resources the system names (``ts-file-nosync``: ``file_io_sync=false``).

TensorStore's zip kvstore is read-only: for read workloads its archive is built by
writing the array through the file kvstore and storing that directory in a zip (members
uncompressed), untimed; write metrics are "n/a". TensorStore has no group or attribute
API, so the hierarchy workload is "n/a" for all three.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from typing import Any

import numpy as np

from .base import Handle, System


def codecs_of(codec: dict[str, Any], itemsize: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if codec["id"] == "blosc-zstd":
        out.append({"name": "blosc", "configuration": {
            "cname": "zstd", "clevel": codec["clevel"], "shuffle": "shuffle",
            "typesize": itemsize, "blocksize": 0}})
    elif codec["id"] == "gzip":
        out.append({"name": "gzip", "configuration": {"level": codec["level"]}})
    elif codec["id"] != "none":
        raise ValueError(codec)
    return out


class TSHandle(Handle):
    def read(self, selection):
        return self.array[selection].read().result()

    def write(self, selection, value):
        self.array[selection].write(value).result()

    def points(self, coords):
        return self.array.vindex[coords].read().result()

    def element(self, index):
        return self.array[index].read().result()[()]


class TensorStoreSystem(System):
    def __init__(self, info: Any, root: Any) -> None:
        super().__init__(info, root)
        import tensorstore as ts
        self.ts = ts
        self.kind = info.kwargs["kvstore"]
        self.suffix = ".zip" if self.kind == "zip" else ""
        #: context resources, e.g. {"file_io_sync": False} (the default syncs each file)
        self.context = ts.Context(info.kwargs.get("context", {}))
        self.missing = {"groups": "TensorStore has no group or attribute API"}
        if self.kind == "zip":
            self.missing.update(
                write="TensorStore's zip kvstore is read-only",
                multiprocess="TensorStore's zip kvstore is read-only",
                **{"shared-writes": "TensorStore's zip kvstore is read-only"})
        self.shared_writes = (
            "promised: filesystem locks make each chunk write atomic"
            if self.kind == "file" else
            "optimistic concurrency on the manifest (no coordinator server here)")

    def _kvstore(self, loc: str, name: str) -> dict[str, Any]:
        if self.kind == "file":
            return {"driver": "file", "path": os.path.join(loc, name) + "/"}
        if self.kind == "ocdbt":
            return {"driver": "ocdbt", "base": {"driver": "file", "path": loc + "/"},
                    "path": name + "/"}
        return {"driver": "zip", "base": {"driver": "file", "path": loc}, "path": name + "/"}

    def create(self, loc, name, shape, dtype, chunks, codec, shards=None) -> Handle:
        itemsize = np.dtype(dtype).itemsize
        codecs = codecs_of(codec, itemsize)
        grid = chunks
        if shards is not None:
            grid = shards
            codecs = [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": list(chunks), "codecs": codecs,
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}],
                "index_location": "end"}}]
        spec = {"driver": "zarr3", "kvstore": self._kvstore(loc, name),
                "metadata": {"shape": list(shape), "data_type": np.dtype(dtype).name,
                             "chunk_grid": {"name": "regular",
                                            "configuration": {"chunk_shape": list(grid)}},
                             "chunk_key_encoding": {"name": "default"},
                             "fill_value": 0, "codecs": codecs},
                "create": True, "delete_existing": True}
        return TSHandle(self.ts.open(spec, context=self.context).result())

    def open(self, loc, name, write=False) -> Handle:
        spec = {"driver": "zarr3", "kvstore": self._kvstore(loc, name), "open": True}
        mode = {"read": True, "write": write}
        return TSHandle(self.ts.open(spec, context=self.context, **mode).result())

    def load(self, loc, name, data, chunks, codec, shards=None) -> None:
        """Put ``data`` at ``loc`` untimed; for zip: written through the file kvstore
        into a directory that is then stored in the archive."""
        if self.kind != "zip":
            super().load(loc, name, data, chunks, codec, shards)
            return
        tmp = tempfile.mkdtemp(dir=self.root)
        try:
            saved, self.kind = self.kind, "file"
            try:
                h = self.create(tmp, name, data.shape, data.dtype.name, chunks, codec, shards)
                h.write(Ellipsis, data)
            finally:
                self.kind = saved
            with zipfile.ZipFile(loc, "w", zipfile.ZIP_STORED) as zf:
                for dirpath, _, files in os.walk(tmp):
                    for f in sorted(files):
                        full = os.path.join(dirpath, f)
                        zf.write(full, os.path.relpath(full, tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
