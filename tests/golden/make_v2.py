"""Write the Zarr v2 golden files under ``tests/golden/v2/`` with zarr-python 2.18.

This script needs zarr-python 2.18 (``zarr>=2.18,<3``), which kvzarr's own environment
does not have (kvzarr tests against zarr-python 3). Run it from a separate environment:

    python3 -m venv .venv-zarr2 && .venv-zarr2/bin/pip install "zarr>=2.18,<3" lmdb msgpack
    .venv-zarr2/bin/python tests/golden/make_v2.py

and then, with kvzarr's test environment (zarr-python 3), ``make_v2_zarr3.py`` for the
one hierarchy that zarr-python 3 writes. Both rewrite only their own store files, their
own expected files and their own entries of ``v2/expected/manifest.json``.

What it writes: the same catalogue of arrays and groups (``catalogue()`` below, listed in
README.md: dtypes, orders, compressors, filters, fill values, object codecs, shapes, chunk
key separators, nested groups and attributes) into one store of each kind zarr-python 2 has: ``LMDBStore``,
``SQLiteStore``, ``DirectoryStore``, ``NestedDirectoryStore``, ``ZipStore``, and a
``DirectoryStore`` with consolidated metadata (``.zmetadata``). Each array's contents, as
zarr-python 2 reads them back, go to ``v2/expected/<array path>.npy`` (or ``.json`` for
object arrays), and ``manifest.json`` lists every array of every store.

Deterministic: the values come from generators seeded by each array's path, keys are
written in a fixed order, LMDB pages are zero-filled (``meminit=True``), and zip entries
and gzip headers carry a fixed timestamp, so running it twice writes identical bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sys
import time
import types
import warnings
import zlib
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import zarr
from numcodecs import (
    BZ2,
    JSON,
    LZ4,
    LZMA,
    AsType,
    BitRound,
    Blosc,
    Categorize,
    Delta,
    FixedScaleOffset,
    GZip,
    MsgPack,
    PackBits,
    Pickle,
    Quantize,
    Shuffle,
    VLenArray,
    VLenBytes,
    VLenUTF8,
    Zlib,
    Zstd,
)

# goldenlib.py sits beside this script (helpers shared with make_v2_zarr3.py and the test)
from goldenlib import EXPECTED, expected_object_json, same, store_digest, update_manifest
from goldenlib import V2 as OUT

WRITER = f"zarr-python {zarr.__version__} (numcodecs {numcodecs.__version__})"
# zip entries and gzip headers carry this time instead of the time of the run
# (2024-01-01 00:00:00 UTC)
FIXED_TIME = 1704067200.0

# Arrays zarr-python 3 cannot read, and why (zarr-python 3.1; ``test_golden_v2_files.py``
# checks that each still fails, so that this list stays true).
_NESTED = ("zarr-python 3.1 has no data type for structured dtypes with nested fields or "
           "sub-array fields (No Zarr data type found that matches ...)")
_OBJECT = ("zarr-python 3.1 reads object arrays only with the vlen-utf8 or vlen-bytes object "
           "codec; it has no data type for '|O' with object codec {}")
# a store-level note: zarr-python 3 parses every document of .zmetadata when it opens the
# group, so one array it has no data type for makes the whole consolidated group unreadable
ZARR3_CONSOLIDATED = ("zarr-python 3.1 cannot open this group with use_consolidated=True: "
                      "it fails on the first .zmetadata document it has no data type for "
                      "(the nested structured dtype); it reads each array with "
                      "use_consolidated=False")
ZARR3_CANNOT_READ = {
    "dtypes/structured": _NESTED,
    "fill/structured": _NESTED,
    "order/F_structured": _NESTED,
    "filters/categorize_object": _OBJECT.format("None (the Categorize filter decodes to "
                                                "objects)"),
    "objects/json": _OBJECT.format("json2"),
    "objects/msgpack": _OBJECT.format("msgpack2"),
    "objects/pickle": _OBJECT.format("pickle"),
    "objects/vlen_array_i4": _OBJECT.format("vlen-array"),
    "objects/vlen_bytes": ("zarr-python 3.1 refuses the fill_value 0 that zarr-python 2 "
                           "writes by default for object arrays, when the codec is vlen-bytes "
                           "(TypeError: Invalid type: 0. Expected a string.)"),
}


@dataclasses.dataclass
class Spec:
    """One array of the catalogue: how to create it, what to write into it."""

    path: str
    shape: tuple
    chunks: tuple
    dtype: Any
    values: Any  # the full array of values (numpy array), or a callable(rng) -> it
    compressor: Any = "default"
    filters: list | None = None
    fill_value: Any = 0
    order: str = "C"
    object_codec: Any = None
    dimension_separator: str | None = None
    # None: write the whole array at once; else a list of chunk-aligned regions (tuples of
    # slices), each written once, so that the other chunks are never written
    regions: list | None = None
    attrs: dict | None = None
    lossy: bool = False  # the filters round values, so read-back differs from ``values``
    skip_stores: tuple = ()  # store files this array is left out of (see ``STORES``)


def _rng(path: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(path.encode()))


def _ints(path, dtype, shape):
    info = np.iinfo(dtype)
    v = _rng(path).integers(info.min, info.max, size=shape, endpoint=True,
                            dtype=np.dtype(dtype).newbyteorder("="))
    flat = v.reshape(-1)
    flat[0], flat[-1] = info.min, info.max
    return v.astype(dtype)


def _floats(path, dtype, shape):
    v = _rng(path).normal(0, 1000, size=shape)
    flat = v.reshape(-1)
    specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-7]
    flat[: len(specials)] = specials
    return v.astype(dtype)


def _complex(path, dtype, shape):
    rng = _rng(path)
    v = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    flat = v.reshape(-1)
    flat[0] = complex(np.nan, 1.0)
    flat[1] = complex(-np.inf, -0.0)
    return v.astype(dtype)


def _text(path, n, width, alphabet="abcdefghij ñé€🙂"):
    rng = _rng(path)
    out = ["", alphabet[-1] * min(width, 1)]
    while len(out) < n:
        out.append("".join(rng.choice(list(alphabet), size=rng.integers(0, width + 1))))
    return out[:n]


def _bytes(path, n, width):
    rng = _rng(path)
    out = [b"", b"a\x00b"[:width]]
    while len(out) < n:
        out.append(bytes(rng.integers(1, 256, size=rng.integers(0, width + 1), dtype=np.uint8)))
    return out[:n]


def _datetimes(path, dtype, shape):
    rng = _rng(path)
    unit = np.datetime_data(np.dtype(dtype))[0]
    span = {"ns": 10**18, "D": 10**5, "s": 10**9}[unit]
    v = rng.integers(-span, span, size=shape, dtype=np.int64)
    flat = v.reshape(-1)
    flat[0] = np.iinfo(np.int64).min  # NaT
    flat[1] = 0
    return v.view(np.dtype(dtype).newbyteorder("=")).astype(dtype)


STRUCT = np.dtype([("id", "<i2"),
                   ("pos", [("x", "<f4"), ("y", ">f8")]),
                   ("grid", "<u2", (2, 3)),
                   ("tag", "S3")])


def _struct(path, shape):
    rng = _rng(path)
    v = np.zeros(shape, dtype=STRUCT)
    v["id"] = rng.integers(-1000, 1000, size=shape)
    v["pos"]["x"] = rng.normal(size=shape)
    v["pos"]["y"] = rng.normal(size=shape)
    v["grid"] = rng.integers(0, 65535, size=shape + (2, 3))
    v["tag"] = rng.choice([b"", b"ab", b"xyz"], size=shape)
    return v


def _smooth(path, dtype, shape):
    """Values that compress (a ramp with noise), so compressors do real work."""
    rng = _rng(path)
    ramp = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    return (ramp * 0.25 + rng.normal(0, 0.01, size=shape)).astype(dtype)


def _objects(values, shape):
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):  # one by one: numpy would make equal-length lists an axis
        out[i] = v
    return out.reshape(shape)


MIXED = ["text", 1, 2.5, [1, "two", None], {"k": "v", "n": [1, 2]}, None, True, "", -7, "ñ🙂"]


def catalogue() -> list[Spec]:
    """Every array the golden hierarchies hold, in the order they are written."""
    specs: list[Spec] = []
    add = specs.append
    shape, chunks = (7, 5), (3, 2)  # chunks do not divide the shape

    # --- one array per dtype (default compressor: Blosc lz4 with byte shuffle)
    for name, dt in [("i1", "<i1"), ("u1", "|u1"), ("i2_le", "<i2"), ("i2_be", ">i2"),
                     ("u4_le", "<u4"), ("u8_be", ">u8")]:
        add(Spec(f"dtypes/{name}", shape, chunks, dt, _ints(f"dtypes/{name}", dt, shape)))
    for name, dt in [("f2_le", "<f2"), ("f4_le", "<f4"), ("f8_be", ">f8")]:
        add(Spec(f"dtypes/{name}", shape, chunks, dt, _floats(f"dtypes/{name}", dt, shape)))
    for name, dt in [("c8_le", "<c8"), ("c16_be", ">c16")]:
        add(Spec(f"dtypes/{name}", shape, chunks, dt, _complex(f"dtypes/{name}", dt, shape)))
    add(Spec("dtypes/b1", shape, chunks, "|b1", _rng("b1").random(shape) < 0.5))
    for name, dt in [("M8_ns", "<M8[ns]"), ("M8_D", "<M8[D]"), ("m8_s", "<m8[s]")]:
        add(Spec(f"dtypes/{name}", shape, chunks, dt, _datetimes(f"dtypes/{name}", dt, shape)))
    add(Spec("dtypes/S5", shape, chunks, "|S5",
             np.array(_bytes("dtypes/S5", 35, 5), dtype="|S5").reshape(shape)))
    add(Spec("dtypes/U4_le", shape, chunks, "<U4",
             np.array(_text("dtypes/U4_le", 35, 4), dtype="<U4").reshape(shape)))
    add(Spec("dtypes/U3_be", shape, chunks, ">U3",
             np.array(_text("dtypes/U3_be", 35, 3), dtype=">U3").reshape(shape)))
    add(Spec("dtypes/V4", shape, chunks, "|V4",
             _rng("dtypes/V4").integers(0, 256, size=shape + (4,), dtype=np.uint8)
             .view("|V4").reshape(shape)))
    add(Spec("dtypes/structured", (5,), (2,), STRUCT, _struct("dtypes/structured", (5,))))
    flat = np.dtype([("a", "<i2"), ("b", ">f8"), ("c", "|S2")])
    add(Spec("dtypes/structured_flat", (5,), (2,), flat,
             np.array([(i - 2, i / 4, b"xy"[: i % 3]) for i in range(5)], dtype=flat)))

    # --- memory order
    shape3, chunks3 = (5, 6, 7), (2, 3, 4)
    add(Spec("order/C_i4", shape3, chunks3, "<i4", _ints("order/C_i4", "<i4", shape3)))
    add(Spec("order/F_i4", shape3, chunks3, "<i4", _ints("order/F_i4", "<i4", shape3),
             order="F"))
    add(Spec("order/F_f8_be_zlib", shape, chunks, ">f8",
             _floats("order/F_f8_be_zlib", ">f8", shape), order="F", compressor=Zlib(1)))
    add(Spec("order/F_U3", shape, chunks, "<U3",
             np.array(_text("order/F_U3", 35, 3), dtype="<U3").reshape(shape), order="F",
             compressor=None,
             # zarr-python 2's LMDBStore refuses the uncompressed chunk of an order F array
             # ("ndarray is not C-contiguous"), so no such file exists
             skip_stores=("zarr2-lmdb.lmdb",)))
    add(Spec("order/F_structured", (3, 4), (2, 3), STRUCT, _struct("order/F_structured", (3, 4)),
             order="F", compressor=Zstd(level=1)))

    # --- compressors
    cshape, cchunks = (12, 10), (5, 4)
    for name, comp, dt in [
        ("blosc_lz4_shuffle", Blosc("lz4", 5, Blosc.SHUFFLE), "<f8"),
        ("blosc_zstd_bitshuffle", Blosc("zstd", 3, Blosc.BITSHUFFLE), "<i4"),
        ("blosc_blosclz_noshuffle", Blosc("blosclz", 9, Blosc.NOSHUFFLE), "<u2"),
        ("blosc_lz4hc_blocksize", Blosc("lz4hc", 4, Blosc.SHUFFLE, blocksize=256), "<f4"),
        ("blosc_zlib_shuffle", Blosc("zlib", 1, Blosc.SHUFFLE), ">i8"),
        ("blosc_autoshuffle_f8", Blosc("lz4", 5, Blosc.AUTOSHUFFLE), "<f8"),
        ("blosc_autoshuffle_u1", Blosc("zstd", 5, Blosc.AUTOSHUFFLE), "|u1"),
        ("zlib", Zlib(level=6), "<f8"),
        ("gzip", GZip(level=5), "<i2"),
        ("bz2", BZ2(level=9), ">f4"),
        ("lzma", LZMA(preset=1), "<u4"),
        ("zstd", Zstd(level=3), "<f8"),
        ("lz4", LZ4(acceleration=1), "<i8"),
        ("none", None, "<f8"),
    ]:
        add(Spec(f"compressors/{name}", cshape, cchunks, dt,
                 _smooth(f"compressors/{name}", dt, cshape), compressor=comp))

    # --- filters (compressor zlib unless said)
    fshape, fchunks = (40,), (16,)
    ramp = _smooth("filters", "<f8", fshape) * 4 + 100
    add(Spec("filters/delta_i4", fshape, fchunks, "<i4",
             np.cumsum(_rng("delta").integers(-3, 4, size=fshape)).astype("<i4"),
             filters=[Delta(dtype="<i4")], compressor=Zlib(1)))
    add(Spec("filters/fixedscaleoffset_f8", fshape, fchunks, "<f8", ramp,
             filters=[FixedScaleOffset(offset=100, scale=10, dtype="<f8", astype="<u2")],
             compressor=Zlib(1), lossy=True))
    add(Spec("filters/quantize_f8", fshape, fchunks, "<f8", ramp,
             filters=[Quantize(digits=2, dtype="<f8")], compressor=Zlib(1), lossy=True))
    add(Spec("filters/astype_f8_as_f4", fshape, fchunks, "<f8", ramp,
             filters=[AsType(encode_dtype="<f4", decode_dtype="<f8")], compressor=Zlib(1),
             lossy=True))
    add(Spec("filters/bitround_f4", fshape, fchunks, "<f4", ramp.astype("<f4"),
             filters=[BitRound(keepbits=6)], compressor=Zlib(1), lossy=True))
    add(Spec("filters/shuffle_i8", fshape, fchunks, "<i8",
             _ints("filters/shuffle_i8", "<i8", fshape), filters=[Shuffle(elementsize=8)],
             compressor=Zlib(1)))
    add(Spec("filters/packbits_b1", (37,), (16,), "|b1", _rng("packbits").random(37) < 0.3,
             filters=[PackBits()], compressor=None))
    labels = ["apple", "kiwi", "fig"]
    add(Spec("filters/categorize_U5", (30,), (8,), "<U5",
             np.array(_rng("cat").choice(labels + [""], size=30), dtype="<U5"),
             filters=[Categorize(labels, dtype="<U5", astype="|u1")], compressor=Zlib(1)))
    add(Spec("filters/categorize_object", (30,), (8,), object,
             _objects([str(v) for v in _rng("cato").choice(labels, size=30)], (30,)),
             filters=[Categorize(labels, dtype=object, astype="|u1")], compressor=Zlib(1)))
    add(Spec("filters/fixedscaleoffset_delta_f8", fshape, fchunks, "<f8", ramp,
             filters=[FixedScaleOffset(offset=0, scale=100, dtype="<f8", astype="<i4"),
                      Delta(dtype="<i4")], compressor=Blosc("zstd", 1, Blosc.SHUFFLE),
             lossy=True))

    # --- fill values; each array has chunks never written, which read as the fill
    sshape, schunks = (6, 6), (3, 3)
    written = [(slice(0, 3), slice(0, 3)), (slice(3, 6), slice(3, 6))]

    def sparse(name, dt, fill, values):
        add(Spec(f"fill/{name}", sshape, schunks, dt, values, fill_value=fill,
                 regions=written))

    add(Spec("fill/null_f8", sshape, schunks, "<f8", _floats("fill/null_f8", "<f8", sshape),
             fill_value=None))  # zarr-python 2 leaves null-fill chunks it never wrote undefined
    sparse("zero_i4", "<i4", 0, _ints("fill/zero_i4", "<i4", sshape))
    sparse("seven_u2", "<u2", 7, _ints("fill/seven_u2", "<u2", sshape))
    sparse("nan_f4", "<f4", np.nan, _floats("fill/nan_f4", "<f4", sshape))
    sparse("inf_f8", ">f8", np.inf, _floats("fill/inf_f8", ">f8", sshape))
    sparse("neginf_f2", "<f2", -np.inf, _floats("fill/neginf_f2", "<f2", sshape))
    sparse("negzero_f8", "<f8", -0.0, _floats("fill/negzero_f8", "<f8", sshape))
    sparse("complex_c8", "<c8", 1.5 - 2j, _complex("fill/complex_c8", "<c8", sshape))
    sparse("true_b1", "|b1", True, _rng("fill/true_b1").random(sshape) < 0.5)
    sparse("nat_M8_ns", "<M8[ns]", np.datetime64("NaT", "ns"),
           _datetimes("fill/nat_M8_ns", "<M8[ns]", sshape))
    sparse("bytes_S5", "|S5", b"ab\x00c",
           np.array(_bytes("fill/bytes_S5", 36, 5), dtype="|S5").reshape(sshape))
    sparse("unicode_U4", "<U4", "ñé🙂",
           np.array(_text("fill/unicode_U4", 36, 4), dtype="<U4").reshape(sshape))
    sparse("void_V4", "|V4", b"\x01\x02\x03\xff",
           _rng("fill/void_V4").integers(0, 256, size=sshape + (4,), dtype=np.uint8)
           .view("|V4").reshape(sshape))
    struct_fill = np.zeros((), dtype=STRUCT)
    struct_fill["id"] = -5
    struct_fill["pos"]["y"] = 2.5
    struct_fill["grid"] = [[1, 2, 3], [4, 5, 6]]
    struct_fill["tag"] = b"fv"
    sparse("structured", STRUCT, struct_fill[()], _struct("fill/structured", sshape))

    # --- object arrays, one per object codec zarr-python 2 writes
    texts = _text("objects/vlen_utf8", 20, 6)
    add(Spec("objects/vlen_utf8", (4, 5), (3, 2), object, _objects(texts, (4, 5)),
             object_codec=VLenUTF8()))
    add(Spec("objects/vlen_utf8_sparse", (10,), (4,), object,
             _objects(_text("objects/vlen_utf8_sparse", 10, 5), (10,)),
             object_codec=VLenUTF8(), fill_value="", regions=[(slice(0, 4),)]))
    add(Spec("objects/vlen_bytes", (9,), (4,), object,
             _objects(_bytes("objects/vlen_bytes", 9, 7), (9,)), object_codec=VLenBytes()))
    ragged = [np.arange(k, dtype="<i4") * (-1) ** k for k in range(8)]
    add(Spec("objects/vlen_array_i4", (8,), (3,), object, _objects(ragged, (8,)),
             object_codec=VLenArray("<i4")))
    for name, codec in [("json", JSON()), ("msgpack", MsgPack()), ("pickle", Pickle())]:
        add(Spec(f"objects/{name}", (10,), (4,), object, _objects(MIXED, (10,)),
                 object_codec=codec, compressor=None if name == "pickle" else "default"))

    # --- shapes
    add(Spec("shapes/zero_d_f8", (), (), "<f8", np.array(3.5)))
    add(Spec("shapes/zero_d_unwritten_i2", (), (), "<i2", np.array(7, dtype="<i2"),
             fill_value=7, regions=[]))
    add(Spec("shapes/not_multiple_i2", (7, 11), (3, 4), "<i2",
             _ints("shapes/not_multiple_i2", "<i2", (7, 11))))
    add(Spec("shapes/chunk_larger_than_shape_u1", (3,), (10,), "|u1",
             np.array([1, 2, 3], dtype="|u1")))
    add(Spec("shapes/empty_f4", (0, 4), (2, 2), "<f4", np.zeros((0, 4), dtype="<f4")))
    add(Spec("shapes/sparse_u1", (9, 9), (3, 3), "|u1", _ints("shapes/sparse_u1", "|u1", (9, 9)),
             fill_value=7, regions=[(slice(0, 3), slice(0, 3)), (slice(3, 6), slice(6, 9)),
                                    (slice(6, 9), slice(3, 6))]))
    add(Spec("shapes/long_i8", (300,), (64,), "<i8", np.arange(300, dtype="<i8") ** 2))

    # --- chunk key separators given explicitly (the store's default elsewhere)
    add(Spec("separators/slash_i4", (5, 4), (2, 2), "<i4",
             _ints("separators/slash_i4", "<i4", (5, 4)), dimension_separator="/"))
    add(Spec("separators/dot_i4", (5, 4), (2, 2), "<i4",
             _ints("separators/dot_i4", "<i4", (5, 4)), dimension_separator=".",
             skip_stores=("zarr2-nested.zarr",)))  # NestedDirectoryStore nests every key

    # --- nested groups with attributes
    add(Spec("nested/inner/deepest/leaf", (4, 3), (2, 2), "<u2",
             _ints("nested/inner/deepest/leaf", "<u2", (4, 3)),
             attrs={"units": "m", "scale": [1.0, 0.5], "ok": True, "label": "ñ🙂"}))
    for s in specs:
        if s.attrs is None:
            s.attrs = {"golden": s.path}
    return specs


# group path -> attributes (every group the catalogue implies gets {} unless named here)
GROUP_ATTRS = {
    "": {"title": "kvzarr golden v2", "writer": "zarr-python 2", "nested": {"a": [1, 2, None]}},
    "nested": {"level": 1},
    "nested/inner": {"level": 2, "unicode": "ñé🙂"},
    "nested/empty": {"note": "a group with no members"},
}

# store file -> store kind, consolidated?
STORES = {
    "zarr2-lmdb.lmdb": ("LMDBStore", False),
    "zarr2-sqlite.sqlite": ("SQLiteStore", False),
    "zarr2-dir.zarr": ("DirectoryStore", False),
    "zarr2-nested.zarr": ("NestedDirectoryStore", False),
    "zarr2-zip.zip": ("ZipStore", False),
    "zarr2-consolidated.zarr": ("DirectoryStore", True),
}


@contextlib.contextmanager
def _fixed_clock():
    """Pin the two clocks whose readings land in the files: ZipStore stamps each entry with
    the local time, numcodecs' GZip writes the time into each gzip header."""
    import gzip

    import zarr.storage as zs

    real_zs, real_gzip = zs.time, gzip.time
    zs.time = types.SimpleNamespace(time=lambda: FIXED_TIME, localtime=time.gmtime)
    gzip.time = types.SimpleNamespace(time=lambda: FIXED_TIME)
    try:
        yield
    finally:
        zs.time, gzip.time = real_zs, real_gzip


def _open_store(name: str, path: Path):
    kind = STORES[name][0]
    if kind == "LMDBStore":
        # zarr-python 2's defaults except: pages zero-filled (meminit, so no stray memory
        # lands in the file) and no writemap (writemap grows the file to map_size, 1 TiB)
        return zarr.LMDBStore(str(path), meminit=True, writemap=False)
    if kind == "SQLiteStore":
        return zarr.SQLiteStore(str(path))
    if kind == "DirectoryStore":
        return zarr.DirectoryStore(str(path))
    if kind == "NestedDirectoryStore":
        return zarr.NestedDirectoryStore(str(path))
    if kind == "ZipStore":
        return zarr.ZipStore(str(path), mode="w")
    raise ValueError(kind)


def _groups(specs) -> list[str]:
    paths = set(GROUP_ATTRS)
    for s in specs:
        parts = s.path.split("/")[:-1]
        paths.update("/".join(parts[:i]) for i in range(len(parts) + 1))
    return sorted(paths)


def write_store(name: str, specs: list[Spec]) -> None:
    path = OUT / name
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    store = _open_store(name, path)
    with _fixed_clock():
        root = zarr.group(store=store)
        for gpath in _groups(specs):
            g = root if gpath == "" else root.require_group(gpath)
            attrs = GROUP_ATTRS.get(gpath)
            if attrs:
                g.attrs.put(attrs)
        for s in specs:
            if name in s.skip_stores:
                continue
            kwargs = dict(shape=s.shape, chunks=s.chunks, dtype=s.dtype,
                          compressor=s.compressor, filters=s.filters,
                          fill_value=s.fill_value, order=s.order)
            if s.object_codec is not None:
                kwargs["object_codec"] = s.object_codec
            if s.dimension_separator is not None:
                kwargs["dimension_separator"] = s.dimension_separator
            a = root.create_dataset(s.path, **kwargs)
            a.attrs.put(s.attrs)
            if s.regions is None:
                a[...] = s.values
            else:
                for region in s.regions:
                    a[region] = s.values[region]
        if STORES[name][1]:
            zarr.consolidate_metadata(store)
    store.close()
    if STORES[name][0] == "LMDBStore":
        # the lock file holds the reader table of the process that wrote it, not data
        (path / "lock.mdb").unlink()


def write_expected(name: str, specs: list[Spec]) -> dict[str, Any]:
    """Write each array's contents as zarr-python 2 reads them back; return path -> file."""
    store = _open_store_read(name)
    root = zarr.open_group(store=store, mode="r")
    files = {}
    for s in specs:
        a = root[s.path]
        got = a[...]
        want = np.asarray(s.values, dtype=a.dtype) if not a.dtype.hasobject else s.values
        if s.regions is None and not s.lossy:
            assert same(got, want), s.path
        if a.dtype.hasobject:
            rel = f"{s.path}.json"
            doc = expected_object_json(got)
            (EXPECTED / rel).parent.mkdir(parents=True, exist_ok=True)
            (EXPECTED / rel).write_text(json.dumps(doc, indent=1, sort_keys=True,
                                                   ensure_ascii=False) + "\n")
        else:
            rel = f"{s.path}.npy"
            (EXPECTED / rel).parent.mkdir(parents=True, exist_ok=True)
            np.save(EXPECTED / rel, got, allow_pickle=False)
        files[s.path] = rel
    store.close()
    return files


def _open_store_read(name: str):
    path = OUT / name
    kind = STORES[name][0]
    if kind == "LMDBStore":
        return zarr.LMDBStore(str(path), readonly=True, lock=False)
    if kind == "ZipStore":
        return zarr.ZipStore(str(path), mode="r")
    return _open_store(name, path)


def check_store(name: str, specs: list[Spec]) -> None:
    """Every store reads back the same contents as the expected files."""
    store = _open_store_read(name)
    root = (zarr.open_consolidated(store, mode="r") if STORES[name][1]
            else zarr.open_group(store=store, mode="r"))
    for s in specs:
        if name in s.skip_stores:
            continue
        got = root[s.path][...]
        if got.dtype.hasobject:
            doc = json.loads((EXPECTED / f"{s.path}.json").read_text())
            assert expected_object_json(got) == doc, (name, s.path)
        else:
            assert same(got, np.load(EXPECTED / f"{s.path}.npy")), (name, s.path)
    store.close()


def raw_document(name: str, key: str) -> dict:
    store = _open_store_read(name)
    try:
        return json.loads(bytes(store[key]).decode())
    finally:
        store.close()


def manifest_entries(name: str, specs: list[Spec], files: dict[str, str]) -> list[dict]:
    kind, consolidated = STORES[name]
    out = []
    for s in specs:
        if name in s.skip_stores:
            continue
        meta = raw_document(name, f"{s.path}/.zarray")
        reason = ZARR3_CANNOT_READ.get(s.path)
        out.append({
            "store_file": name,
            "store_kind": kind,
            "writer": WRITER,
            "path": s.path,
            "dtype": meta["dtype"],
            "shape": meta["shape"],
            "chunks": meta["chunks"],
            "order": meta["order"],
            "compressor": meta["compressor"],
            "filters": meta["filters"],
            "fill_value": meta["fill_value"],
            # null: the key is absent from .zarray, which means "."
            "dimension_separator": meta.get("dimension_separator"),
            "attributes": s.attrs,
            "chunks_written": "all" if s.regions is None else
            ("none" if not s.regions else "some"),
            "expected": files[s.path],
            "zarr3_reads": reason is None,
            "zarr3_note": reason,
        })
    return out


def main() -> None:
    if not zarr.__version__.startswith("2.18"):
        sys.exit(f"make_v2.py needs zarr-python 2.18, found {zarr.__version__}")
    warnings.simplefilter("ignore", FutureWarning)  # the stores' "removed in v3" notices
    warnings.simplefilter("ignore", DeprecationWarning)
    # numcodecs refuses to unpickle unless told to; these are the script's own values
    numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE = True
    specs = catalogue()
    OUT.mkdir(parents=True, exist_ok=True)
    EXPECTED.mkdir(parents=True, exist_ok=True)
    for old in EXPECTED.iterdir():  # this writer's expected files: all but zarr-python 3's
        if old.name not in ("manifest.json", "zarr3-v2"):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    for name in STORES:
        write_store(name, specs)
    # the expected files come from the store that holds every array; the others must agree
    files = write_expected("zarr2-dir.zarr", specs)
    stores, entries, groups = [], [], []
    for name, (kind, consolidated) in STORES.items():
        check_store(name, specs)
        stores.append({"store_file": name, "store_kind": kind, "writer": WRITER,
                       "consolidated": consolidated, "sha256": store_digest(OUT / name),
                       "zarr3_note": ZARR3_CONSOLIDATED if consolidated else None})
        entries += manifest_entries(name, specs, files)
        for gpath in _groups(specs):
            groups.append({"store_file": name, "path": gpath,
                           "attributes": GROUP_ATTRS.get(gpath, {})})
    update_manifest(stores, entries, groups)
    print(f"wrote {len(entries)} entries for {len(stores)} stores under {OUT}")


if __name__ == "__main__":
    main()
