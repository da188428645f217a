"""Write the golden Zarr v1 arrays under ``tests/golden/v1/`` with zarr 1.1.0, the last
release of the only library that wrote Zarr v1 (no maintained library writes v1).

Run it in its own virtual environment, never the test one::

    python3 -m venv zarr1-venv
    zarr1-venv/bin/pip install "zarr==1.1.0" numcodecs
    zarr1-venv/bin/python tests/golden/make_v1.py

zarr 1.1.0 installs from its source distribution on current Pythons but needs two shims,
both applied below before it is imported:

* ``collections.MutableMapping`` (moved to ``collections.abc`` in Python 3.10).
* ``zarr.blosc``: its Cython Blosc extension no longer compiles, so the build leaves it
  out. The stand-in does what ``zarr/blosc.pyx`` did, through numcodecs' Blosc (the same
  c-blosc library): compress the chunk's buffer as it lies in memory (so order F chunks
  are column-major) with ``typesize`` = the buffer's item size and an automatic block
  size; decompress into the destination's memory.

Everything else (the ``meta`` and ``attrs`` documents, chunk keys, which chunks exist,
how each compressor serialises a chunk) is zarr 1.1.0's own code. Note what that code
does with order F: only Blosc sees the column-major memory; its zlib, bz2, lzma and
no-compression paths call ``ndarray.tobytes()``, which is row-major (the spec says
column-major). The ``f_order_bytes`` member of each manifest entry records which.

Output: one directory per array (a zarr 1.1.0 DirectoryStore: ``meta``, ``attrs``, one
file per chunk), ``<name>.npy`` with what zarr 1.1.0 reads back (checked equal to the
data written, with the fill value where no chunk was written), and ``manifest.json``.
The script deletes and rewrites ``tests/golden/v1/``.
"""

from __future__ import annotations

import collections
import collections.abc
import json
import shutil
import sys
import types
from pathlib import Path

import numcodecs
import numcodecs.blosc
import numpy as np

collections.MutableMapping = collections.abc.MutableMapping  # type: ignore[attr-defined]

_CNAMES = ["blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"]


def _blosc_module() -> types.ModuleType:
    mod = types.ModuleType("zarr.blosc")

    def compname_to_compcode(cname):
        cname = cname.decode() if isinstance(cname, bytes) else cname
        return _CNAMES.index(cname) if cname in numcodecs.blosc.list_compressors() else -1

    def compress(source, cname, clevel, shuffle):
        # zarr/blosc.pyx: PyObject_GetBuffer(ANY_CONTIGUOUS), typesize = buffer itemsize,
        # blosc_compress_ctx(..., blocksize=0, numinternalthreads=1)
        view = memoryview(source)
        cname = cname if isinstance(cname, bytes) else cname.encode()
        return numcodecs.blosc.compress(source, cname, clevel, shuffle, 0,
                                        typesize=view.itemsize)

    def decompress(source, dest):
        data = numcodecs.blosc.decompress(bytes(source))
        flat = dest.reshape(-1, order="A").view("u1")  # the destination's memory order
        flat[:] = np.frombuffer(data, dtype="u1")

    # the library's own setup (zarr/__init__.py calls these); numcodecs sets up its own
    mod.init = mod.destroy = lambda: None
    mod.set_nthreads = lambda n: None
    mod.compname_to_compcode = compname_to_compcode
    mod.compress = compress
    mod.decompress = decompress
    return mod


sys.modules["zarr.blosc"] = _blosc_module()

import zarr  # noqa: E402  (after the shims)

assert zarr.__version__ == "1.1.0", zarr.__version__

OUT = Path(__file__).resolve().parent / "v1"
BLOSC = "blosc"


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.fields is not None:
        out = np.zeros(n, dtype=dtype)
        for name in dtype.names:
            out[name] = _data((n,), dtype.fields[name][0], seed + 1)
        return out.reshape(shape)
    if dtype.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), n).astype(dtype).reshape(shape)
    if dtype.kind == "f":
        return rng.normal(size=n).astype(dtype).reshape(shape)
    if dtype.kind == "c":
        return (rng.normal(size=n) + 1j * rng.normal(size=n)).astype(dtype).reshape(shape)
    if dtype.kind == "M":
        return rng.integers(0, 2 ** 40, n).astype(dtype).reshape(shape)
    if dtype.kind in "SU":
        words = ["", "a", "ab", "abc", "abcd", "zz", "x y"]
        return np.array([words[i] for i in rng.integers(0, len(words), n)],
                        dtype=dtype).reshape(shape)
    raise ValueError(dtype)


#: name -> (shape, chunks, dtype, compression, compression_opts, fill_value, order,
#:          region written (None = everything), attributes)
ARRAYS = {
    # the spec's example array: zlib level 1, fill 42, two of four chunks written
    "i4_zlib_C_spec_example": ((20, 20), (10, 10), "<i4", "zlib", 1, 42, "C",
                               (slice(0, 10), slice(0, 20)), {"foo": 42, "bar": "apples",
                                                              "baz": [1, 2, 3, 4]}),
    "f8_blosc_lz4_C_nan_fill": ((13, 7), (5, 3), "<f8", BLOSC,
                                {"cname": "lz4", "clevel": 5, "shuffle": 1}, float("nan"), "C",
                                (slice(2, 11), slice(0, 5)), {}),
    "f4_blosc_zstd_F_3d": ((6, 5, 4), (4, 3, 2), "<f4", BLOSC,
                           {"cname": "zstd", "clevel": 3, "shuffle": 2}, 0.5, "F", None,
                           {"units": "m"}),
    "f8_be_blosc_blosclz_F": ((7, 9), (3, 4), ">f8", BLOSC,
                              {"cname": "blosclz", "clevel": 9, "shuffle": 0}, -1.0, "F",
                              (slice(0, 6), slice(0, 9)), {}),
    "i2_be_zlib_F": ((9, 8), (4, 3), ">i2", "zlib", 6, -7, "F", (slice(1, 9), slice(2, 8)),
                     {}),
    "u1_bz2_C_1d": ((100,), (30,), "|u1", "bz2", 9, 7, "C", slice(10, 75), {}),
    "b1_none_F": ((5, 6), (2, 4), "|b1", "none", None, True, "F", None, {}),
    "u8_none_C": ((11, 3), (4, 3), "<u8", "none", None, 3, "C", (slice(0, 8),), {}),
    "struct_blosc_lz4hc_C": ((10,), (4,), [("r", "|u1"), ("g", "<i2"), ("b", "<f4")], BLOSC,
                             {"cname": "lz4hc", "clevel": 1, "shuffle": 1}, None, "C", None, {}),
    "U5_zlib_C": ((4, 4), (3, 3), "<U5", "zlib", 1, "", "C", None, {}),
    "S4_bz2_C": ((9,), (4,), "|S4", "bz2", 1, None, "C", None, {}),
    "c16_lzma_F": ((4, 6), (3, 4), "<c16", "lzma", None, None, "F", None, {}),
    "M8s_zlib_C": ((8,), (3,), "<M8[s]", "zlib", 1, None, "C", None, {}),
}


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    manifest = {"writer": f"zarr {zarr.__version__} (Blosc through numcodecs "
                          f"{numcodecs.__version__}, c-blosc "
                          f"{numcodecs.blosc.VERSION_STRING})",
                "numpy": np.__version__, "arrays": {}}
    for name, (shape, chunks, dtype, compression, opts, fill, order, region,
               attrs) in ARRAYS.items():
        (OUT / name).mkdir()
        store = zarr.DirectoryStore(str(OUT / name))
        z = zarr.create(shape=shape, chunks=chunks, dtype=dtype, compression=compression,
                        compression_opts=opts, fill_value=fill, order=order, store=store)
        for k, v in attrs.items():
            z.attrs[k] = v
        data = _data(shape, z.dtype, seed=len(name))
        written = region if region is not None else Ellipsis
        z[written] = data[written]
        # what was meant: the data where written, the fill value elsewhere
        intended = np.empty(shape, dtype=z.dtype)
        if fill is not None:
            intended[...] = fill
        intended[written] = data[written]
        back = z[:]
        same = (np.array_equal(back, intended, equal_nan=True)
                if z.dtype.kind in "fc" else np.array_equal(back, intended))
        assert same, name
        np.save(OUT / f"{name}.npy", back, allow_pickle=False)
        f_order_bytes = None
        if order == "F" and len(shape) > 1:
            f_order_bytes = "column-major" if compression == BLOSC else "row-major"
        manifest["arrays"][name] = {
            "dtype": json.loads(store["meta"])["dtype"], "compression": compression,
            "order": order, "shape": list(shape), "chunks": list(chunks),
            "f_order_bytes": f_order_bytes,
            "chunk_keys": sorted(k for k in store if k not in ("meta", "attrs")),
        }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
