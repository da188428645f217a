"""The raw limit: the same byte work as a Zarr array with no Zarr at all. An array is a
regular grid of chunks, each chunk's bytes (numcodecs-encoded when the workload
compresses) under one key of a raw engine (:mod:`.raw_engines`); encoding and decoding
run in a thread pool as the Zarr engines do.

What it does not do, it refuses (n/a): sharding (its unsharded tile numbers bound the
sharded ones), writes that cover part of a chunk (no read-modify-write, so no chunk is
ever shared by writers), and several processes on an in-memory dict.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from typing import Any

import numpy as np

from ..harness import Unsupported
from .base import Handle, System, numcodecs_compressor
from .postgres import POSTGRES_URL, drop_pg_tables, pg_table
from .raw_engines import KV, open_kv, parallel_map


def _dim_pieces(sel: Any, n: int, c: int) -> list[tuple[int, Any, Any]] | tuple[int, int]:
    """For one dimension: an int -> (chunk, offset); a slice -> [(chunk, slice inside
    the chunk, slice of the output)]."""
    if isinstance(sel, (int, np.integer)):
        i = int(sel) + (n if sel < 0 else 0)
        return i // c, i % c
    start, stop, step = sel.indices(n)
    if step <= 0:
        raise Unsupported("negative steps")
    pieces = []
    if start >= stop:
        return pieces
    for k in range(start // c, (stop - 1) // c + 1):
        lo, hi = k * c, min((k + 1) * c, stop)
        first = start + -(-(max(start, lo) - start) // step) * step
        if first >= hi:
            continue
        count = -(-(hi - first) // step)
        o = (first - start) // step
        pieces.append((k, slice(first - lo, hi - lo, step), slice(o, o + count)))
    return pieces


class RawArray(Handle):
    def __init__(self, kv: KV, name: str, shape, dtype, chunks, codec) -> None:
        self.kv, self.name = kv, name
        self.shape, self.chunks = tuple(shape), tuple(chunks)
        self.dtype = np.dtype(dtype)
        self.codec_spec = codec
        self.codec = numcodecs_compressor(codec)
        self.grid = tuple(math.ceil(s / c) for s, c in zip(self.shape, self.chunks))

    def meta(self) -> bytes:
        return json.dumps({"shape": self.shape, "dtype": self.dtype.str,
                           "chunks": self.chunks, "codec": self.codec_spec}).encode()

    def key(self, coords) -> str:
        return self.name + "/c/" + "/".join(map(str, coords))

    def chunk_shape(self, coords) -> tuple[int, ...]:
        return tuple(min(c, s - k * c) for k, c, s in zip(coords, self.chunks, self.shape))

    def _encode(self, block: np.ndarray) -> bytes:
        block = np.ascontiguousarray(block)
        return block.tobytes() if self.codec is None else self.codec.encode(block)

    def _decode(self, data: bytes, coords) -> np.ndarray:
        if self.codec is not None:
            data = self.codec.decode(data)
        return np.frombuffer(data, dtype=self.dtype).reshape(self.chunk_shape(coords))

    # -- writing whole chunks ----------------------------------------------------------

    def write(self, selection, value):
        sel = (slice(None),) * len(self.shape) if selection is Ellipsis else selection
        sel = tuple(sel) + (slice(None),) * (len(self.shape) - len(sel))
        ranges = []
        for s, n, c in zip(sel, self.shape, self.chunks):
            start, stop, step = s.indices(n) if isinstance(s, slice) else (None, None, 0)
            if step != 1 or start % c or (stop % c and stop != n):
                raise Unsupported("a raw engine writes whole chunks only")
            ranges.append(range(start // c, -(-stop // c)))
        value = np.asarray(value, dtype=self.dtype)
        origin = [r.start * c for r, c in zip(ranges, self.chunks)]
        coords = list(itertools.product(*ranges))

        def encode(cc):
            part = tuple(slice(k * c - o, k * c - o + e) for k, c, o, e in
                         zip(cc, self.chunks, origin, self.chunk_shape(cc)))
            return self.key(cc), self._encode(value[part])

        self.kv.put_many(parallel_map(encode, coords, value.nbytes))

    # -- reading ---------------------------------------------------------------------------

    def read(self, selection):
        sel = (slice(None),) * len(self.shape) if selection is Ellipsis else selection
        sel = tuple(sel) if isinstance(sel, tuple) else (sel,)
        sel = sel + (slice(None),) * (len(self.shape) - len(sel))
        dims = [_dim_pieces(s, n, c) for s, n, c in zip(sel, self.shape, self.chunks)]
        out_shape = [sum(p[2].stop - p[2].start for p in d) for d in dims
                     if isinstance(d, list)]
        out = np.empty(out_shape, dtype=self.dtype)
        per_dim = [[(d[0], d[1], None)] if isinstance(d, tuple) else d for d in dims]
        jobs = []
        for pieces in itertools.product(*per_dim):
            coords = tuple(p[0] for p in pieces)
            inner = tuple(p[1] for p in pieces)
            outer = tuple(p[2] for p in pieces if p[2] is not None)
            jobs.append((coords, inner, outer))
        values = self.kv.get_many([self.key(j[0]) for j in jobs])

        def decode(item):
            (coords, inner, outer), data = item
            if data is None:
                out[outer] = 0
            else:
                out[outer] = self._decode(data, coords)[inner]

        parallel_map(decode, list(zip(jobs, values)), sum(len(v or b"") for v in values))
        return out

    def element(self, index):
        coords = tuple(i // c for i, c in zip(index, self.chunks))
        data = self.kv.get(self.key(coords))
        inner = tuple(i % c for i, c in zip(index, self.chunks))
        return self._decode(data, coords)[inner]

    def points(self, coords):
        idx = np.stack([np.asarray(c) for c in coords], axis=1)
        chunk_idx = idx // np.asarray(self.chunks)
        uniq, inverse = np.unique(chunk_idx, axis=0, return_inverse=True)
        values = self.kv.get_many([self.key(tuple(u)) for u in uniq.tolist()])
        out = np.empty(len(idx), dtype=self.dtype)
        order = np.argsort(inverse.ravel(), kind="stable")
        bounds = np.searchsorted(inverse.ravel()[order], np.arange(len(uniq) + 1))
        for u, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            which = order[lo:hi]
            block = self._decode(values[u], tuple(uniq[u]))
            local = idx[which] - uniq[u] * np.asarray(self.chunks)
            out[which] = block[tuple(local.T)]
        return out


class RawSystem(System):
    def __init__(self, info: Any, root: Any) -> None:
        super().__init__(info, root)
        self.engine = info.kwargs["engine"]
        self.suffix = {"lmdb": ".lmdb", "sqlite": ".sqlite"}.get(self.engine, "")
        self._kvs: dict[str, KV] = {}
        self.missing = {
            "shards": "raw engines store no shards; their unsharded tile numbers are the "
                      "limit for the sharded ones",
            "shared-writes": "a raw engine has no read-modify-write, so writers never "
                             "share a chunk"}
        if self.engine == "memory":
            self.missing.update(multiprocess="an in-memory dict lives in one process",
                                **{"bytes-written": "in memory: no files written"})
        if self.engine == "postgresql":
            self.url = os.environ.get(POSTGRES_URL)
            if not self.url:
                #: why this system cannot run here (the worker reports n/a with it)
                self.unavailable = f"set {POSTGRES_URL} to a PostgreSQL server's URL"
            self.missing["bytes-written"] = "the server process writes, not this one"

    def location(self, tag: str) -> str:
        if self.engine == "postgresql":
            return pg_table(tag)        # a table on the server
        return super().location(tag)

    def kv(self, loc: str) -> KV:
        kv = self._kvs.get(loc)
        if kv is None:
            kv = self._kvs[loc] = open_kv(self.engine, loc, getattr(self, "url", None))
        return kv

    def close(self, loc):
        if self.engine == "memory":
            return   # the data lives in the dict: drop() lets it go
        kv = self._kvs.pop(loc, None)
        if kv is not None:
            kv.close()

    def drop(self, loc):
        if self.engine == "postgresql":
            self.close(loc)
            drop_pg_tables(self.url, [loc])
            return
        super().drop(loc)
        self._kvs.pop(loc, None)

    def create(self, loc, name, shape, dtype, chunks, codec, shards=None):
        if shards is not None:
            raise Unsupported(self.missing["shards"])
        arr = RawArray(self.kv(loc), name, shape, dtype, chunks, codec)
        arr.kv.put(name + "/meta", arr.meta())
        return arr

    def open(self, loc, name, write=False):
        kv = self.kv(loc)
        meta = json.loads(kv.get(name + "/meta"))
        return RawArray(kv, name, meta["shape"], meta["dtype"], meta["chunks"], meta["codec"])

    # -- hierarchy: one JSON document per node, as Zarr keeps it ---------------------------

    def h_root(self, loc):
        kv = self.kv(loc)
        kv.put("zarr.json", b'{"zarr_format": 3, "node_type": "group"}')
        return (kv, "")

    def h_group(self, parent, name):
        kv, path = parent
        path = f"{path}{name}/"
        kv.put(path + "zarr.json", b'{"zarr_format": 3, "node_type": "group"}')
        return (kv, path)

    def h_array(self, group, name, attrs):
        kv, path = group
        doc = {"zarr_format": 3, "node_type": "array", "shape": [16], "data_type": "int32",
               "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16]}},
               "fill_value": 0, "attributes": attrs}
        kv.put(f"{path}{name}/zarr.json", json.dumps(doc).encode())

    def h_attrs(self, loc, path):
        return json.loads(self.kv(loc).get(path + "/zarr.json"))["attributes"]

    def h_children(self, loc, path):
        return self.kv(loc).children(path + "/")
