"""Cases and helpers of the interoperability suite: kvzarr, zarr-python 3.1 and TensorStore
share one directory (kvzarr FilesystemStore, zarr-python LocalStore, TensorStore "file"
kvstore with the "zarr3" driver).

A :class:`Case` names a data type, a fill value, a codec chain, a sharding layout and a
chunk key encoding. The writers below turn one case into each implementation's own
creation call and write the same two regions of a ``(13, 7)`` array with ``(4, 3)``
chunks, so that boundary chunks are written and several chunks stay missing (they read
as the fill value). Expected arrays and chunk keys are computed here with numpy, never by
the implementation under test, and compared bit for bit (floats as their IEEE bits, so
NaN payloads and -0.0 count).

The case tables are a covering design, not the full cross product: every data type with
the default codecs and several fill values; every codec chain with two or three data
types; every sharding layout with every chunk key encoding and two codec chains.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SHAPE = (13, 7)
CHUNKS = (4, 3)
SHARDS = (8, 6)
#: the array's path inside the store
NAME = "arr"
#: written regions: the rest of the array keeps the fill value, and the chunks (or shards)
#: that no region touches are never stored
REGIONS = ((slice(0, 9), slice(0, 5)), (slice(12, 13), slice(3, 7)))

NUMERIC = ("bool", "int8", "uint16", "int32", "int64", "uint64", "float16", "float32",
           "float64", "complex64", "complex128")
STRING = np.dtypes.StringDType()

# ---------------------------------------------------------------------------- codecs


def _itemsize(dtype: str) -> int:
    return 1 if dtype in ("string", "bytes") else numpy_dtype(dtype).itemsize


def bytes_codec(dtype: str, endian: str = "little") -> dict[str, Any]:
    """zarr-python's spelling: no endian for single-byte types, byte strings (``S``) and
    packed structs."""
    if dtype == "string":
        return {"name": "vlen-utf8", "configuration": {}}
    if dtype == "bytes":
        return {"name": "vlen-bytes", "configuration": {}}
    if _itemsize(dtype) == 1 or numpy_dtype(dtype).names or numpy_dtype(dtype).kind == "S":
        return {"name": "bytes"}
    return {"name": "bytes", "configuration": {"endian": endian}}


def _blosc(dtype: str, cname: str, shuffle: str) -> dict[str, Any]:
    return {"name": "blosc", "configuration": {"typesize": _itemsize(dtype), "cname": cname,
                                               "clevel": 5, "shuffle": shuffle,
                                               "blocksize": 0}}


_GZIP = {"name": "gzip", "configuration": {"level": 5}}
_ZSTD = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
_ZSTD_SUM = {"name": "zstd", "configuration": {"level": 5, "checksum": True}}
_CRC = {"name": "crc32c"}
_TRANSPOSE = {"name": "transpose", "configuration": {"order": [1, 0]}}

CODEC_CHAINS: dict[str, Any] = {
    "none": lambda d: [bytes_codec(d)],
    "gzip": lambda d: [bytes_codec(d), _GZIP],
    "zstd": lambda d: [bytes_codec(d), _ZSTD],
    "zstd-checksum": lambda d: [bytes_codec(d), _ZSTD_SUM],
    "blosc-lz4-shuffle": lambda d: [bytes_codec(d), _blosc(d, "lz4", "shuffle")],
    "blosc-zstd-bitshuffle": lambda d: [bytes_codec(d), _blosc(d, "zstd", "bitshuffle")],
    "blosc-blosclz-noshuffle": lambda d: [bytes_codec(d), _blosc(d, "blosclz", "noshuffle")],
    "zstd-crc32c": lambda d: [bytes_codec(d), _ZSTD, _CRC],
    "transpose-gzip": lambda d: [_TRANSPOSE, bytes_codec(d), _GZIP],
    "big-endian": lambda d: [bytes_codec(d, "big"), _ZSTD],
    "transpose-big-blosc-crc32c": lambda d: [_TRANSPOSE, bytes_codec(d, "big"),
                                             _blosc(d, "lz4", "shuffle"), _CRC],
}


def default_chain(dtype: str) -> list[dict[str, Any]]:
    """What kvzarr and zarr-python write when no codec is given."""
    return [bytes_codec(dtype), {"name": "zstd", "configuration": {"level": 0,
                                                                   "checksum": False}}]


KEY_ENCODINGS = {"default/": ("default", "/"), "default.": ("default", "."),
                 "v2.": ("v2", "."), "v2/": ("v2", "/")}
SHARD_LAYOUTS = ("none", "end", "start", "end-index-be")

# ---------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    dtype: str
    fill: str = "zero"          # zero | nonzero | nan | inf | nan-payload
    codecs: str = "default"     # "default" or a key of CODEC_CHAINS
    shard: str = "none"         # one of SHARD_LAYOUTS
    keys: str = "default/"      # a key of KEY_ENCODINGS

    def __str__(self) -> str:
        label = "structured" if self.dtype.startswith("[") else self.dtype
        return f"{label}-{self.fill}-{self.codecs}-{self.shard}-{self.keys}"

    @property
    def chain(self) -> list[dict[str, Any]] | None:
        return None if self.codecs == "default" else CODEC_CHAINS[self.codecs](self.dtype)

    @property
    def grid(self) -> tuple[int, ...]:
        return CHUNKS if self.shard == "none" else SHARDS

    @property
    def seed(self) -> int:
        return zlib.crc32(str(self).encode())


def _dtype_cases() -> list[Case]:
    cases = []
    for d in NUMERIC:
        cases += [Case(d, "zero"), Case(d, "nonzero")]
        if d.startswith(("float", "complex")):
            cases.append(Case(d, "nan"))
    cases += [Case("float32", "nan-payload"), Case("float64", "nan-payload"),
              Case("float64", "inf")]
    return cases


_CODEC_DTYPES = {
    "none": ("int32", "float64", "bool"),
    "gzip": ("uint16", "float32"),
    "zstd": ("int64", "complex64"),
    "zstd-checksum": ("float64", "int8"),
    "blosc-lz4-shuffle": ("float32", "uint64", "complex128"),
    "blosc-zstd-bitshuffle": ("float64", "int32", "uint16"),
    "blosc-blosclz-noshuffle": ("int8", "float16"),
    "zstd-crc32c": ("float32", "uint16"),
    "transpose-gzip": ("float64", "int32"),
    "big-endian": ("float32", "complex128", "uint16"),
    "transpose-big-blosc-crc32c": ("float64", "int64"),
}


def _codec_cases() -> list[Case]:
    fills = ("nonzero", "zero", "nan")
    cases = []
    for codecs, dtypes in _CODEC_DTYPES.items():
        for i, d in enumerate(dtypes):
            fill = fills[i % 3]
            if fill == "nan" and not d.startswith(("float", "complex")):
                fill = "nonzero"
            cases.append(Case(d, fill, codecs))
    return cases


def _layout_cases() -> list[Case]:
    cases = []
    for shard in SHARD_LAYOUTS:
        for j, keys in enumerate(KEY_ENCODINGS):
            if shard == "end-index-be" and j:
                continue  # the index codec variant needs one key encoding only
            for codecs, dtype, fill in (("none", "uint16", "nonzero"),
                                        ("transpose-big-blosc-crc32c", "float32", "nan")):
                cases.append(Case(dtype, fill, codecs, shard, keys))
    # every codec chain inside shards, on the first data type it was paired with above
    for i, (codecs, dtypes) in enumerate(_CODEC_DTYPES.items()):
        cases.append(Case(dtypes[0], ("nonzero", "zero")[i % 2], codecs,
                          ("end", "start")[i % 2]))
    cases += [Case("bool", "nonzero", "default", "start", "v2/"),
              Case("complex128", "nan", "default", "end", "default.")]
    return cases


#: data types both peers implement
NUMERIC_CASES = _dtype_cases() + _codec_cases() + _layout_cases()
#: data types only zarr-python 3.1 implements
SPECIAL_CASES = [
    Case("string"), Case("string", "nonzero"), Case("string", "zero", "gzip"),
    Case("string", "nonzero", "default", "end"),
    Case("bytes"), Case("bytes", "nonzero"), Case("bytes", "zero", "zstd", keys="v2."),
    Case("<U6"), Case("<U6", "nonzero"), Case("<U6", "nonzero", "big-endian"),
    Case("|S6"), Case("|S6", "nonzero"), Case("|S6", "nonzero", "blosc-lz4-shuffle"),
    Case("|S6", "zero", "transpose-gzip", "end"),
    Case("datetime64[ns]"), Case("datetime64[ns]", "nan"),
    Case("datetime64[ns]", "nonzero", "blosc-lz4-shuffle"),
    Case("timedelta64[s]", "nan"), Case("timedelta64[s]", "nonzero", "transpose-gzip"),
    Case("datetime64[10us]", "nonzero"),
]
STRUCT_DTYPE = "[('id', '<i4'), ('score', '<f8'), ('flag', 'u1')]"
#: zarr-python 3.1 writes the legacy "structured" type; kvzarr must read it
STRUCT_CASES = [Case(STRUCT_DTYPE), Case(STRUCT_DTYPE, "nonzero"),
                Case(STRUCT_DTYPE, "nonzero", "gzip", keys="default.")]

# ---------------------------------------------------------------------------- values


def numpy_dtype(dtype: str) -> np.dtype:
    if dtype == "string":
        return STRING
    if dtype == "bytes":
        return np.dtype(object)
    if dtype.startswith("["):
        return np.dtype(eval(dtype))  # noqa: S307 - a literal from this file
    return np.dtype(dtype)


_FLOAT_SPECIALS = {  # IEEE bit patterns: NaN, NaN payload, -NaN, signalling NaN, inf,
    # -inf, -0.0, smallest subnormal, max, lowest
    2: [0x7E00, 0x7E01, 0xFE00, 0x7D00, 0x7C00, 0xFC00, 0x8000, 0x0001, 0x7BFF, 0xFBFF],
    4: [0x7FC00000, 0x7FC00001, 0xFFC00000, 0x7FA00000, 0x7F800000, 0xFF800000,
        0x80000000, 0x00000001, 0x7F7FFFFF, 0xFF7FFFFF],
    8: [0x7FF8000000000000, 0x7FF8000000000001, 0xFFF8000000000000, 0x7FF4000000000000,
        0x7FF0000000000000, 0xFFF0000000000000, 0x8000000000000000, 0x0000000000000001,
        0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF],
}
_WORDS = ["", "a", "héllo", "日本語", "🙂 ok", "tab\tnew\nline", "x" * 40, "nul\x00in"]
_SHORT_WORDS = ["", "a", "héllo", "日本語", "🙂🙂🙂", "abcdef", "Zz"]
#: positions of special values: inside the first written region
_SPECIAL_AT = [(r, c) for r in range(2) for c in range(5)]


def _floats(rng: np.random.Generator, dtype: np.dtype, size: int
            ) -> tuple[np.ndarray, np.ndarray]:
    values = (rng.standard_normal(size) * 1000).astype(dtype)
    bits = np.array(_FLOAT_SPECIALS[dtype.itemsize], dtype=f"u{dtype.itemsize}")
    return values, bits.view(dtype)


def sample(dtype: str, seed: int) -> np.ndarray:
    """A deterministic ``SHAPE`` array of ``dtype`` with the type's edge values
    (extremes, NaN payloads, infinities, -0.0, NaT, empty and non-ASCII strings)."""
    dt = numpy_dtype(dtype)
    rng = np.random.default_rng(seed)
    n = math.prod(SHAPE)
    if dtype == "string":
        return np.array([_WORDS[i] for i in rng.integers(0, len(_WORDS), n)],
                        dtype=STRING).reshape(SHAPE)
    if dtype == "bytes":
        out = np.empty(n, dtype=object)
        out[:] = [rng.bytes(int(k)) for k in rng.integers(0, 10, n)]
        out[:3] = [b"", b"\x00", b"\xff\x00\x01"]
        return out.reshape(SHAPE)
    if dt.kind == "U":
        return np.array([_SHORT_WORDS[i] for i in rng.integers(0, len(_SHORT_WORDS), n)],
                        dtype=dt).reshape(SHAPE)
    if dt.kind == "S":  # any bytes, NULs inside and at the end (padding) included
        out = np.array([rng.bytes(int(k)) for k in rng.integers(0, dt.itemsize + 1, n)],
                       dtype=dt)
        out[:4] = [b"", b"\x00", b"a\x00b", b"\xff" * dt.itemsize]
        return out.reshape(SHAPE)
    if dt.names:
        out = np.zeros(n, dtype=dt)
        out["id"] = rng.integers(-2**31, 2**31, n)
        out["score"] = rng.standard_normal(n)
        out["score"][:2] = [np.nan, -0.0]
        out["flag"] = rng.integers(0, 256, n)
        return out.reshape(SHAPE)
    if dt.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(SHAPE)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        out = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True).reshape(SHAPE)
        out[0, :3] = [info.min, info.max, 0]
        return out
    if dt.kind in "mM":
        out = rng.integers(-2**62, 2**62, n, dtype=np.int64).reshape(SHAPE)
        out[0, :2] = [np.iinfo(np.int64).min, 0]  # NaT, epoch
        out[12, 6] = np.iinfo(np.int64).min
        return out.view(dt)
    if dt.kind == "f":
        out, specials = _floats(rng, dt, n)
        out = out.reshape(SHAPE)
        for (r, c), v in zip(_SPECIAL_AT, specials):
            out[r, c] = v
        out[12, 6] = specials[6]  # -0.0 alone in the corner boundary chunk
        return out
    if dt.kind == "c":
        part = np.dtype(f"f{dt.itemsize // 2}")
        re, specials = _floats(rng, part, n)
        im, _ = _floats(rng, part, n)
        out = np.empty(SHAPE, dtype=dt)
        pv = out.view(part).reshape(SHAPE + (2,))
        pv[..., 0], pv[..., 1] = re.reshape(SHAPE), im.reshape(SHAPE)
        for (r, c), v in zip(_SPECIAL_AT, specials):
            pv[r, c, 0] = v
            pv[r + 2, c, 1] = v
        return out
    raise AssertionError(f"no sample for {dtype}")


def _hex_nan(dtype: np.dtype) -> Any:
    bits = {4: 0x7FC00001, 8: 0x7FF8000000000001}[dtype.itemsize]
    return np.array(bits, dtype=f"u{dtype.itemsize}").view(dtype)[()]


def fill_scalar(dtype: str, kind: str) -> Any:
    """The fill value as a numpy scalar (str/bytes for the variable-length types)."""
    dt = numpy_dtype(dtype)
    if dtype == "string":
        return {"zero": "", "nonzero": "fill ✓"}[kind]
    if dtype == "bytes":
        # no trailing NUL: zarr-python 3.1 drops trailing NULs of a bytes fill
        return {"zero": b"", "nonzero": b"\x00\xff\x01"}[kind]
    if dt.kind == "U":
        return np.str_({"zero": "", "nonzero": "ab"}[kind])
    if dt.kind == "S":
        return np.bytes_({"zero": b"", "nonzero": b"\x00\xffa"}[kind])
    if dt.names:
        value = (0, 0.0, 0) if kind == "zero" else (-1, np.nan, 7)
        return np.array(value, dtype=dt)[()]
    if dt.kind in "mM":
        raw = {"zero": 0, "nonzero": 123456789, "nan": np.iinfo(np.int64).min}[kind]
        return np.array(raw, dtype=np.int64).view(dt)[()]
    if kind == "zero":
        return dt.type(0)
    if kind == "nonzero":
        if dt.kind == "b":
            return np.True_
        if dt.kind == "i":
            return np.iinfo(dt).min
        if dt.kind == "u":
            return np.iinfo(dt).max
        return dt.type(-2.5) if dt.kind == "f" else dt.type(complex(1.5, -2.5))
    if kind == "nan":
        return dt.type(np.nan) if dt.kind == "f" else dt.type(complex(np.nan, 0.0))
    if kind == "inf":
        return dt.type(-np.inf)
    if kind == "nan-payload":
        return _hex_nan(dt)
    raise AssertionError(kind)


def _float_json(value: Any) -> Any:
    if np.isnan(value):
        bits = np.array(value).view(f"u{value.dtype.itemsize}")[()]
        canonical = np.array(np.nan, dtype=value.dtype).view(f"u{value.dtype.itemsize}")[()]
        return "NaN" if bits == canonical else f"0x{int(bits):0{2 * value.dtype.itemsize}x}"
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float(value)


def fill_json(dtype: str, kind: str) -> Any:
    """The fill value in its v3 JSON form (numeric types)."""
    value = fill_scalar(dtype, kind)
    dt = numpy_dtype(dtype)
    if dt.kind == "b":
        return bool(value)
    if dt.kind in "iu":
        return int(value)
    if dt.kind == "f":
        return _float_json(value)
    parts = np.array(value).reshape(1).view(f"f{dt.itemsize // 2}")
    return [_float_json(parts[0]), _float_json(parts[1])]


def filled(dtype: str, fill: Any) -> np.ndarray:
    out = np.empty(SHAPE, dtype=numpy_dtype(dtype))
    out[...] = fill  # a same-type scalar is copied bit for bit (NaN payloads survive)
    return out


def expected_array(case: Case, data: np.ndarray) -> np.ndarray:
    out = filled(case.dtype, fill_scalar(case.dtype, case.fill))
    for region in REGIONS:
        out[region] = data[region]
    return out

# ---------------------------------------------------------------------------- comparison


def bits(a: np.ndarray) -> np.ndarray:
    """An integer view of fixed-size data that compares bit patterns."""
    a = np.ascontiguousarray(a)  # at least 1-d, so that views may change the item size
    if a.dtype.names or a.dtype.kind == "S":  # S: the padding NULs count too
        return a.view(np.uint8).reshape(a.shape + (-1,))
    if a.dtype.kind == "f":
        return a.view(f"u{a.dtype.itemsize}")
    if a.dtype.kind == "c":
        return a.view(f"u{a.dtype.itemsize // 2}")
    if a.dtype.kind in "mM":
        return a.view(np.int64)
    return a


def assert_bit_equal(actual: Any, expected: np.ndarray) -> None:
    """Same shape, same data type, same values; floats compared as their IEEE bits."""
    actual = np.asarray(actual)
    assert actual.shape == expected.shape
    if expected.dtype.kind in "OT":
        assert actual.dtype.kind == expected.dtype.kind, (actual.dtype, expected.dtype)
        got, want = actual.tolist(), expected.tolist()
        assert [type(v) for v in np.ravel(got)] == [type(v) for v in np.ravel(want)]
        assert got == want
        return
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(bits(actual), bits(expected))


def _all_fill(block: np.ndarray, fill: Any) -> bool:
    """Zarr's empty-chunk rule: every element equals the fill, NaN matching any NaN."""
    if block.dtype.kind in "fc":
        part = np.dtype(f"f{block.dtype.itemsize // (2 if block.dtype.kind == 'c' else 1)}")
        values = np.ascontiguousarray(block).view(part).reshape(block.shape + (-1,))
        fills = np.array(fill, dtype=block.dtype).reshape(1).view(part)
        same = bits(values) == bits(fills)
        return bool(np.all(same | (np.isnan(values) & np.isnan(fills))))
    if block.dtype.kind in "mM":  # NaT is a bit pattern here, equal to itself
        return bool(np.all(bits(block) == bits(np.array(fill, dtype=block.dtype))))
    return bool(np.all(block == fill))


def chunk_key(case: Case, coords: tuple[int, ...]) -> str:
    name, sep = KEY_ENCODINGS[case.keys]
    joined = sep.join(str(c) for c in coords)
    return f"c{sep}{joined}" if name == "default" else joined


def expected_chunk_keys(case: Case, expected: np.ndarray) -> set[str]:
    """Keys of the grid cells (chunks or shards) holding anything but the fill value."""
    fill = fill_scalar(case.dtype, case.fill)
    keys = set()
    grid = case.grid
    for i in range(-(-SHAPE[0] // grid[0])):
        for j in range(-(-SHAPE[1] // grid[1])):
            block = expected[i * grid[0]:(i + 1) * grid[0], j * grid[1]:(j + 1) * grid[1]]
            if not _all_fill(block, fill):
                keys.add(chunk_key(case, (i, j)))
    return keys


def stored_keys(array_dir: Path) -> set[str]:
    """Every stored key under an array's directory except its metadata."""
    keys = set()
    for dirpath, _, files in os.walk(array_dir):
        for f in files:
            rel = Path(dirpath, f).relative_to(array_dir).as_posix()
            if rel != "zarr.json" and not f.startswith("."):
                keys.add(rel)
    return keys


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())

# ---------------------------------------------------------------------------- creation


def key_encoding_json(case: Case) -> dict[str, Any]:
    name, sep = KEY_ENCODINGS[case.keys]
    return {"name": name, "configuration": {"separator": sep}}


def sharding_json(case: Case) -> dict[str, Any]:
    inner = case.chain or default_chain(case.dtype)
    endian = "big" if case.shard == "end-index-be" else "little"
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(CHUNKS), "codecs": inner,
        "index_codecs": [{"name": "bytes", "configuration": {"endian": endian}}, _CRC],
        "index_location": "start" if case.shard == "start" else "end"}}


def full_codecs(case: Case) -> list[dict[str, Any]]:
    """The ``codecs`` member as the metadata should spell it."""
    if case.shard == "none":
        return case.chain or default_chain(case.dtype)
    return [sharding_json(case)]


def split_chain(chain: list[dict[str, Any]]) -> dict[str, Any]:
    """filters / serializer / compressors arguments for a codec chain."""
    i = next(k for k, c in enumerate(chain)
             if c["name"] in ("bytes", "vlen-utf8", "vlen-bytes", "sharding_indexed"))
    return {"filters": chain[:i], "serializer": chain[i], "compressors": chain[i + 1:]}


def creation_kwargs(case: Case, peer: str) -> dict[str, Any]:
    """``create_array`` arguments, which kvzarr and zarr-python spell alike. ``peer`` is
    "kvzarr" or "zarr"; they differ only in how a few data types and fills are named."""
    kw: dict[str, Any] = {"shape": SHAPE, "fill_value": fill_scalar(case.dtype, case.fill)}
    if case.dtype == "bytes":
        if peer == "zarr":
            from zarr.core.dtype import VariableLengthBytes
            kw["dtype"] = VariableLengthBytes()
        else:
            kw["dtype"] = "bytes"
    else:
        kw["dtype"] = numpy_dtype(case.dtype)
    if case.fill == "nan-payload" and peer == "kvzarr":
        kw["fill_value"] = fill_json(case.dtype, case.fill)  # the hex form
    if case.keys != "default/":
        kw["chunk_key_encoding"] = key_encoding_json(case)
    if case.shard in ("none", "end"):
        kw["chunks"] = CHUNKS
        if case.shard == "end":
            kw["shards"] = SHARDS
        if case.chain is not None:
            kw.update(split_chain(case.chain))
    else:  # sharding options create_array has no argument for: a sharding serializer
        kw.update(chunks=SHARDS, serializer=sharding_json(case), compressors=[], filters=[])
    return kw


def _write_regions(target: Any, data: np.ndarray) -> None:
    for region in REGIONS:
        target[region] = data[region]


def write_kvzarr(case: Case, root: Path) -> np.ndarray:
    import kvzarr
    arr = kvzarr.create_array(kvzarr.FilesystemStore(root), name=NAME,
                              **creation_kwargs(case, "kvzarr"))
    data = sample(case.dtype, case.seed)
    _write_regions(arr, data)
    return expected_array(case, data)


def write_zarr_python(case: Case, root: Path) -> np.ndarray:
    import zarr
    from zarr.storage import LocalStore
    store = LocalStore(root)
    arr = zarr.create_array(store, name=NAME, **creation_kwargs(case, "zarr"))
    if case.fill == "nan-payload":
        # zarr-python writes every NaN fill as "NaN"; give it the hex form by hand
        meta_path = root / NAME / "zarr.json"
        doc = read_json(meta_path)
        doc["fill_value"] = fill_json(case.dtype, case.fill)
        meta_path.write_text(json.dumps(doc))
        arr = zarr.open_array(store, path=NAME, mode="r+")
    data = sample(case.dtype, case.seed)
    _write_regions(arr, data)
    return expected_array(case, data)


def tensorstore_spec(case: Case, root: Path) -> dict[str, Any]:
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / NAME) + "/"},
            "metadata": {
                "shape": list(SHAPE), "data_type": case.dtype,
                "chunk_grid": {"name": "regular",
                               "configuration": {"chunk_shape": list(case.grid)}},
                "chunk_key_encoding": key_encoding_json(case),
                "fill_value": fill_json(case.dtype, case.fill),
                "codecs": full_codecs(case)}}


def write_tensorstore(case: Case, root: Path) -> np.ndarray:
    import tensorstore as ts
    arr = ts.open(tensorstore_spec(case, root), create=True).result()
    data = sample(case.dtype, case.seed)
    for region in REGIONS:
        arr[region].write(data[region]).result()
    return expected_array(case, data)


def read_kvzarr(root: Path, selection: Any = Ellipsis) -> np.ndarray:
    import kvzarr
    return kvzarr.open_array(str(root), path=NAME, mode="r")[selection]


def read_zarr_python(root: Path) -> np.ndarray:
    import zarr
    from zarr.storage import LocalStore
    return zarr.open_array(LocalStore(root, read_only=True), path=NAME, mode="r")[...]


def read_tensorstore(root: Path) -> np.ndarray:
    import tensorstore as ts
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / NAME) + "/"}}
    return ts.open(spec, open=True, read=True).result().read().result()
