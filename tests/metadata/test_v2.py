"""Zarr v2 metadata (kvzarr.metadata.v2) against zarr-python 3 writing ``zarr_format=2``.

zarr-python 3 writes v2 chunks with the same numcodecs calls as zarr-python 2 (its
``V2Codec``: the chunk in ``order``, the filters, the compressor), so its bytes are
zarr-python 2's. Each case: zarr-python writes an array; kvzarr parses the documents,
decodes every stored chunk with its codec chain and compares element by element with
zarr-python's read, then encodes the decoded chunk and compares the bytes.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import warnings
from typing import Any

import numcodecs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvzarr.codecs.base import ChunkArraySpec
from kvzarr.codecs.pipeline import CodecPipeline
from kvzarr.errors import MetadataError, UnsupportedExtensionError
from kvzarr.metadata.v2 import (ZARRAY, ZATTRS, ZGROUP, build_v2_array_metadata,
                                build_v2_group_metadata, parse_v2_array, parse_v2_group,
                                v2_array_documents, v2_group_documents, v2_group_to_v3,
                                v2_to_v3)
from kvzarr.metadata.v3 import ArrayMetadata, GroupMetadata, parse_node_metadata

zarr = pytest.importorskip("zarr")
from zarr.storage import LocalStore, MemoryStore  # noqa: E402

SHAPE = (7, 5)
CHUNKS = (3, 2)


# -- helpers ---------------------------------------------------------------------------------

def sample(dtype: Any, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Values of every kind, edge values included, for a numpy dtype or ``str``."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype is str:
        words = ["", "a", "héllo", "ünï", "x" * 20, "\u2603"]
        return np.array([words[i % len(words)] + str(i) for i in range(n)],
                        dtype=object).reshape(shape)
    npd = np.dtype(dtype)
    if npd.fields is not None:
        out = np.zeros(n, dtype=npd)
        for name in npd.names:
            out[name] = sample(npd.fields[name][0], (n,), seed + 1)
        return out.reshape(shape)
    kind = npd.kind
    if kind == "b":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if kind in "iu":
        info = np.iinfo(npd)
        return rng.integers(info.min, info.max, n, dtype=npd.newbyteorder("="),
                            endpoint=True).astype(npd).reshape(shape)
    if kind == "f":
        vals = rng.normal(0, 1000, n).astype(npd)
        vals[:3] = [np.nan, np.inf, -0.0][: min(3, n)]
        return vals.reshape(shape)
    if kind == "c":
        return (rng.normal(0, 10, n) + 1j * rng.normal(0, 10, n)).astype(npd).reshape(shape)
    if kind in "mM":
        vals = rng.integers(-10**12, 10**12, n).astype(np.int64)
        vals[0] = np.iinfo(np.int64).min       # NaT
        return vals.view(npd.newbyteorder("=")).astype(npd).reshape(shape)
    if kind == "S":
        return np.array([bytes([97 + i % 26]) * (i % (npd.itemsize + 1)) for i in range(n)],
                        dtype=npd).reshape(shape)
    if kind == "U":
        return np.array([("é" + chr(0x1F600 + i % 5)) * (i % 3) for i in range(n)],
                        dtype=npd).reshape(shape)
    if kind == "V":
        return np.frombuffer(rng.bytes(n * npd.itemsize), dtype=npd).reshape(shape)
    raise AssertionError(npd)


def write_zarr(dtype: Any, *, order: str = "C", compressor: Any = "auto",
               filters: Any = None, separator: str = ".", fill_value: Any = "unset",
               shape: tuple[int, ...] = SHAPE, chunks: tuple[int, ...] = CHUNKS,
               data: np.ndarray | None = None, store: Any = None,
               attributes: dict | None = None) -> tuple[Any, dict[str, bytes], np.ndarray]:
    store = MemoryStore() if store is None else store
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fill = {} if isinstance(fill_value, str) and fill_value == "unset" else {
            "fill_value": fill_value}
        if filters is not None:     # (None: no filters, not even an object codec)
            fill["filters"] = filters
        a = zarr.create_array(store, shape=shape, chunks=chunks, dtype=dtype, zarr_format=2,
                              order=order, compressors=compressor,
                              chunk_key_encoding={"name": "v2", "separator": separator},
                              attributes=attributes, **fill)
        if data is None:
            data = sample(dtype, shape)
        if data.size:
            a[...] = data
        expected = a[...]
    items = {}
    if isinstance(store, MemoryStore):
        items = {k: v.to_bytes() for k, v in store._store_dict.items()}
    return a, items, expected


def pipeline_of(m: ArrayMetadata) -> tuple[CodecPipeline, ChunkArraySpec]:
    """What the array layer does: the chain evolved for the (one) chunk shape."""
    chunks = tuple(m.chunk_grid.dimensions[i].unique_edge_lengths[0]
                   for i in range(len(m.shape))) if m.shape else ()
    spec = ChunkArraySpec(chunks, m.data_type, m.fill_value)
    return CodecPipeline(m.codecs).evolve(spec), spec


def as_comparable(values: np.ndarray) -> np.ndarray:
    """Element values as Python objects that compare exactly (NaN payloads as bits)."""
    arr = np.asarray(values)
    if arr.dtype.kind == "T" or arr.dtype == object:
        return np.array([str(v) if not isinstance(v, bytes) else v for v in arr.ravel()],
                        dtype=object)
    if arr.dtype.kind == "S":   # raw-bytes data type: compare the padded bytes
        arr = arr.view(f"V{arr.dtype.itemsize}")
    arr = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("=")))
    return arr.view(np.uint8).reshape(arr.size, -1) if arr.dtype.itemsize else arr


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    got_c, want_c = as_comparable(got), as_comparable(want)
    assert got_c.shape == want_c.shape
    assert np.array_equal(got_c, want_c), (got, want)


def check_chunks(items: dict[str, bytes], expected: np.ndarray, *, exact_bytes: bool = True,
                 some_chunk: bool = True) -> ArrayMetadata:
    """Parse, decode every chunk and compare with zarr-python, re-encode and compare bytes."""
    m = parse_v2_array(items[ZARRAY], items.get(ZATTRS), "arr")
    pipeline, spec = pipeline_of(m)
    chunk_keys = [k for k in items if not k.startswith(".")]
    assert chunk_keys or not some_chunk, "the case stores no chunk"
    for key in chunk_keys:
        coords = m.chunk_key_encoding.decode(key, len(m.shape))
        assert coords is not None, key
        chunk = pipeline.decode(items[key], spec, key)
        region = tuple(slice(c * n, min((c + 1) * n, s))
                       for c, n, s in zip(coords, spec.shape, m.shape))
        inside = tuple(slice(0, r.stop - r.start) for r in region)
        assert_same(chunk[inside], expected[region])
        again = pipeline.encode(chunk, spec)
        if exact_bytes:
            assert again == items[key], key
        else:       # a gzip member: only the header's modification time differs
            assert again[:4] == items[key][:4] and again[8:] == items[key][8:], key
    return m


# -- dtypes x orders x compressors -------------------------------------------------------------

DTYPES = ["|b1", "|i1", "<i2", ">i2", "<i4", ">i8", "|u1", "<u2", ">u4", "<u8", "<f2", ">f2",
          "<f4", ">f4", "<f8", ">f8", "<c8", ">c16", "<M8[ns]", ">M8[10us]", "<m8[s]",
          "|S3", "<U4", ">U4", "|V4", [("a", "<i4"), ("b", "<f8")],
          [("a", ">i4"), ("b", ">f8"), ("c", "|u1")],
          [("p", [("x", "<f4"), ("y", "<i2")]), ("q", "<u2")], [("s", "|S3"), ("t", ">U2")],
          [("a", "<i2"), ("b", ">f8"), ("c", "|S2")], str]


def _id(value: Any) -> str:
    return value.__name__ if isinstance(value, type) else str(value)


@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("order", ["C", "F"])
def test_every_dtype_decodes_and_encodes_as_zarr_python(dtype: Any, order: str) -> None:
    compressor = numcodecs.Blosc("lz4", 5, shuffle=-1)
    _, items, expected = write_zarr(dtype, order=order, compressor=compressor,
                                    fill_value=None)
    m = check_chunks(items, expected)
    assert m.zarr_format == 2
    assert m.chunk_key_encoding.name == "v2"


COMPRESSORS = [None, "auto", numcodecs.Blosc("lz4", 5, shuffle=-1),
               numcodecs.Blosc("zstd", 3, shuffle=0), numcodecs.Blosc("blosclz", 9, shuffle=1),
               numcodecs.Blosc("zlib", 1, shuffle=2, blocksize=256), numcodecs.Zlib(4),
               numcodecs.BZ2(3), numcodecs.LZMA(), numcodecs.LZ4(2), numcodecs.Zstd(3),
               numcodecs.Zstd(5, checksum=True), numcodecs.CRC32(), numcodecs.Adler32(),
               numcodecs.Fletcher32(), numcodecs.JenkinsLookup3()]


@pytest.mark.parametrize("compressor", COMPRESSORS, ids=repr)
@pytest.mark.parametrize("dtype", ["<f8", "|u1", ">i4", str])
def test_every_compressor_gives_zarr_python_bytes(compressor: Any, dtype: Any) -> None:
    _, items, expected = write_zarr(dtype, compressor=compressor)
    check_chunks(items, expected)


def test_shuffle_as_compressor_gives_zarr_python_bytes() -> None:
    _, items, expected = write_zarr("<f8", compressor=numcodecs.Shuffle(elementsize=8))
    check_chunks(items, expected)


def test_gzip_bytes_equal_but_for_the_header_time() -> None:
    _, items, expected = write_zarr("<i4", compressor=numcodecs.GZip(6))
    check_chunks(items, expected, exact_bytes=False)


FILTERS = [
    ("<i4", [numcodecs.Delta("<i4")]),
    ("<i8", [numcodecs.Delta("<i8", astype="<i2")]),
    (">i2", [numcodecs.Delta(">i2", astype=">i2")]),
    ("<f8", [numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<i4")]),
    ("<f8", [numcodecs.Quantize(3, dtype="<f8")]),
    ("<f4", [numcodecs.BitRound(5)]),
    ("<f8", [numcodecs.AsType("<f4", "<f8")]),
    ("|b1", [numcodecs.PackBits()]),
    ("<U5", [numcodecs.Categorize(["apple", "kiwi", "fig"], "<U5", astype="|u1")]),
    ("<i4", [numcodecs.Delta("<i4"), numcodecs.Shuffle(elementsize=4)]),
    ("<i4", [numcodecs.Delta("<i4"), numcodecs.Zlib(1)]),
]


@pytest.mark.parametrize("dtype, filters", FILTERS, ids=lambda v: repr(v))
@pytest.mark.parametrize("order", ["C", "F"])
def test_filters_give_zarr_python_bytes(dtype: str, filters: list, order: str) -> None:
    data = sample(dtype, SHAPE)
    if dtype in ("<f8",) and isinstance(filters[0], numcodecs.FixedScaleOffset):
        data = np.linspace(-50, 50, math.prod(SHAPE)).reshape(SHAPE)
    if np.dtype(dtype).kind == "f":
        data = np.where(np.isfinite(data), data, 1.5)
    if dtype == "<i8":
        data = np.arange(math.prod(SHAPE), dtype="<i8").reshape(SHAPE) * 3
    _, items, expected = write_zarr(dtype, order=order, filters=filters, data=data,
                                    compressor=numcodecs.Blosc("lz4", shuffle=-1))
    check_chunks(items, expected)


def test_vlen_bytes_object_array_reads_and_writes_as_numcodecs() -> None:
    # zarr-python 3 writes no vlen-bytes v2 array: the chunk is numcodecs' own encoding
    values = np.array([b"", b"ab", b"\x00\xff", b"xyz"], dtype=object)
    zarray = {"shape": [4], "chunks": [4], "dtype": "|O", "fill_value": "AQI=",
              "order": "C", "filters": [{"id": "vlen-bytes"}], "dimension_separator": ".",
              "compressor": {"id": "zlib", "level": 1}, "zarr_format": 2}
    stored = numcodecs.Zlib(1).encode(numcodecs.VLenBytes().encode(values))
    m = parse_v2_array(json.dumps(zarray).encode(), None)
    assert m.data_type.name == "bytes" and m.fill_value == b"\x01\x02"
    pipeline, spec = pipeline_of(m)
    assert list(pipeline.decode(stored, spec)) == list(values)
    assert pipeline.encode(values, spec) == stored


@pytest.mark.parametrize("order", ["C", "F"])
def test_structured_sub_array_fields_read_and_write_the_numpy_bytes(order) -> None:
    # zarr-python 3 refuses sub-array fields; zarr-python 2 stores the numpy bytes
    stored_dtype = np.dtype([("a", ">i4", (2, 3)), ("b", [("c", ">f4")], (2,)), ("d", "|u1")])
    shape = (3, 4)
    values = np.zeros(shape, dtype=stored_dtype)
    values["a"] = np.arange(math.prod(shape) * 6).reshape(*shape, 2, 3) - 30
    values["b"]["c"] = np.linspace(-1, 1, math.prod(shape) * 2).reshape(*shape, 2)
    values["d"] = 7
    fill = np.zeros((), dtype=stored_dtype)
    fill["a"] = 5
    zarray = {"shape": list(shape), "chunks": list(shape),
              "dtype": [["a", ">i4", [2, 3]], ["b", [["c", ">f4"]], [2]], ["d", "|u1"]],
              "fill_value": base64.standard_b64encode(fill.tobytes()).decode(),
              "order": order, "filters": None, "compressor": {"id": "zlib", "level": 1},
              "zarr_format": 2}
    stored = numcodecs.Zlib(1).encode(np.asarray(values, order=order).tobytes(order="A"))
    m = parse_v2_array(zarray, None, "s")
    assert (m.fill_value["a"] == 5).all() and m.fill_value["d"] == 0
    pipeline, spec = pipeline_of(m)
    got = pipeline.decode(stored, spec)
    assert_same(got, values)
    assert pipeline.encode(got, spec) == stored
    assert json.loads(v2_array_documents(m)[0])["fill_value"] == zarray["fill_value"]
    with pytest.raises(UnsupportedExtensionError):
        v2_to_v3(m)


OBJECT_VALUES = [None, 1, "a", 2.5, [1, 2], {"k": "v"}, True, "ü"]


@pytest.mark.parametrize("codec", [numcodecs.JSON(), numcodecs.MsgPack(), numcodecs.Pickle(),
                                   numcodecs.VLenArray("<i4")], ids=repr)
@pytest.mark.parametrize("order", ["C", "F"])
def test_other_object_codecs_read_and_write_as_zarr_python_2(monkeypatch, codec, order) -> None:
    # zarr-python 3 writes none of these: the chunks are made as zarr-python 2 makes them,
    # the chunk in ``order`` through the object codec, then the compressor
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True)
    shape = (3, 2)
    values = np.empty(shape, dtype=object, order=order)
    if isinstance(codec, numcodecs.VLenArray):
        for i, idx in enumerate(np.ndindex(shape)):
            values[idx] = np.arange(i, dtype="<i4")
    else:
        for i, idx in enumerate(np.ndindex(shape)):
            values[idx] = OBJECT_VALUES[i % len(OBJECT_VALUES)]
    compressor = numcodecs.Zlib(1)
    config = codec.get_config()
    zarray = {"shape": list(shape), "chunks": list(shape), "dtype": "|O", "fill_value": None,
              "order": order, "filters": [json.loads(json.dumps(config))],
              "dimension_separator": ".", "compressor": compressor.get_config(),
              "zarr_format": 2}
    if order == "F" and not isinstance(codec, numcodecs.VLenArray):
        with pytest.raises(UnsupportedExtensionError) as info:
            parse_v2_array(zarray, None, "o")
        assert info.value.field == "order"
        return
    stored = compressor.encode(codec.encode(values))
    m = parse_v2_array(zarray, None, "o")
    assert m.fill_value is None
    pipeline, spec = pipeline_of(m)
    got = pipeline.decode(stored, spec)
    assert got.shape == shape and got.dtype == object
    for idx in np.ndindex(shape):
        assert np.array_equal(got[idx], values[idx]) if isinstance(values[idx], np.ndarray) \
            else got[idx] == values[idx] and type(got[idx]) is type(values[idx]), idx
    assert pipeline.encode(got, spec) == stored
    with pytest.raises(UnsupportedExtensionError):
        v2_to_v3(m)


def test_pickle_chunks_are_not_unpickled_unless_numcodecs_allows_it(monkeypatch) -> None:
    from kvzarr.errors import CodecError
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", False)
    zarray = {"shape": [1], "chunks": [1], "dtype": "|O", "fill_value": None, "order": "C",
              "filters": [{"id": "pickle", "protocol": 5}], "compressor": None,
              "zarr_format": 2}
    m = parse_v2_array(zarray, None, "o")
    pipeline, spec = pipeline_of(m)
    with pytest.raises(CodecError, match="unpickling"):
        pipeline.decode(numcodecs.Pickle().encode(np.array([1], dtype=object)), spec)


@pytest.mark.parametrize("separator", [".", "/"])
def test_dimension_separator_names_the_chunk_keys(separator: str) -> None:
    _, items, expected = write_zarr("<i2", separator=separator)
    m = check_chunks(items, expected)
    assert m.chunk_key_encoding.separator == separator
    assert any(separator in k for k in items if not k.startswith("."))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(DTYPES), order=st.sampled_from("CF"),
       compressor=st.sampled_from(COMPRESSORS), separator=st.sampled_from("./"),
       shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       data=st.data())
def test_random_combinations_match_zarr_python(dtype, order, compressor, separator, shape,
                                                data) -> None:
    chunks = tuple(data.draw(st.integers(1, n + 1)) for n in shape)
    _, items, expected = write_zarr(dtype, order=order, compressor=compressor,
                                    separator=separator, shape=tuple(shape), chunks=chunks)
    # (a one-element array may hold just the fill value, so no chunk)
    check_chunks(items, expected, some_chunk=False)


# -- fill values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, fill, want", [
    ("<f4", float("nan"), "NaN"), ("<f8", float("inf"), "Infinity"),
    ("<f8", float("-inf"), "-Infinity"), ("<i2", -3, -3), ("|b1", True, True),
    ("<c8", 1 + 2j, [1.0, 2.0]), ("|S3", b"ab", "YWI="), ("<U3", "ab", "ab"),
    ("|V2", b"\x01\x02", "AQI="), ("<M8[ns]", np.datetime64("NaT"), -2**63),
    ([("a", "<i4"), ("b", "<f8")], (1, 2.0), "AQAAAAAAAAAAAABA"), (str, "x", "x"),
    ([("a", ">i4"), ("b", ">f8")], (1, 2.0), "AAAAAUAAAAAAAAAA"), (">f8", 0.1, 0.1),
    (">U2", "é", "é"),
    ("<f8", None, None), ("<M8[s]", None, None), (str, None, None),
])
def test_fill_values_read_as_zarr_python_reads_them(dtype, fill, want) -> None:
    a, items, _ = write_zarr(dtype, fill_value=fill, data=np.zeros(0))
    assert json.loads(items[ZARRAY])["fill_value"] == want
    m = parse_v2_array(items[ZARRAY], items[ZATTRS])
    # a missing chunk reads as the fill value, as zarr-python reads it
    pipeline, spec = pipeline_of(m)
    missing = np.full(spec.shape, m.fill_value, dtype=m.data_type.numpy_dtype)
    assert_same(missing[: SHAPE[0], : SHAPE[1]][:3, :2], a[:3, :2])
    # and the document written back keeps the member as it was
    assert json.loads(v2_array_documents(m)[0])["fill_value"] == want


def test_null_fill_reads_as_the_type_default_and_is_written_back_null() -> None:
    doc = {"shape": [2], "chunks": [2], "dtype": "<M8[ns]", "fill_value": None,
           "order": "C", "filters": None, "compressor": None, "zarr_format": 2}
    m = parse_v2_array(doc, None)
    assert np.isnat(m.fill_value)
    assert json.loads(v2_array_documents(m)[0])["fill_value"] is None
    v3, notes = v2_to_v3(m)
    assert v3.to_json()["fill_value"] == -2**63
    assert "fill_value null -> -9223372036854775808" in notes


def test_zarr_python_2_style_documents_keep_their_form() -> None:
    # zarr-python 2: sorted members, indent 4, no dimension_separator (before 2.8)
    doc = {"chunks": [2], "compressor": {"blocksize": 0, "clevel": 5, "cname": "lz4",
                                          "id": "blosc", "shuffle": 1},
           "dtype": "<i4", "fill_value": 0, "filters": None, "order": "C", "shape": [5],
           "zarr_format": 2}
    raw = json.dumps(doc, indent=4, sort_keys=True).encode()
    m = parse_v2_array(raw, None, "g/a")
    assert m.chunk_key_encoding.separator == "."
    zarray, zattrs = v2_array_documents(dataclasses.replace(m, shape=(9,)))
    assert zattrs is None
    written = json.loads(zarray)
    assert list(written) == sorted(written)
    assert written == {**doc, "shape": [9], "dimension_separator": "."}
    assert zarray.startswith(b'{\n    "chunks"')
    # its attributes are sorted too, as zarr-python 2 writes them
    _, zattrs = v2_array_documents(m.with_attributes({"b": 1, "a": 2}))
    assert zattrs == b'{\n    "a": 2,\n    "b": 1\n}'


def test_attributes_follow_the_metadata_and_resize_writes_the_shape() -> None:
    _, items, _ = write_zarr("<f8", attributes={"units": "m", "nan": float("nan")})
    m = parse_v2_array(items[ZARRAY], items[ZATTRS], "x")
    assert m.attributes["units"] == "m"
    grown = m.with_shape((10, 5)).with_attributes({"units": "km"})
    zarray, zattrs = v2_array_documents(grown)
    assert json.loads(zarray)["shape"] == [10, 5]
    assert json.loads(zattrs) == {"units": "km"}
    # zarr-python reads what was written back
    store = {ZARRAY: zarray, ZATTRS: zattrs}
    a = _zarr_from_documents(store)
    assert a.shape == (10, 5) and a.attrs["units"] == "km"
    # the member order is zarr-python 3's, unchanged
    assert list(json.loads(zarray)) == list(json.loads(items[ZARRAY]))


def _zarr_from_documents(docs: dict[str, bytes]) -> Any:
    import asyncio
    from zarr.core.buffer import default_buffer_prototype
    store = MemoryStore()
    for key, value in docs.items():
        asyncio.run(store.set(key, default_buffer_prototype().buffer.from_bytes(value)))
    return zarr.open_array(store, mode="r", zarr_format=2)


def test_v2_metadata_is_never_written_as_zarr_json() -> None:
    m = build_v2_array_metadata(shape=(3,), dtype="<i4", chunks=(2,))
    for node in (m, build_v2_group_metadata()):
        with pytest.raises(MetadataError, match="kvzarr.metadata.v2"):
            node.to_bytes()
        with pytest.raises(MetadataError, match="kvzarr.metadata.v2"):
            node.to_json()
    # v3 metadata is unchanged and replace() keeps the format
    v3 = parse_node_metadata(v2_to_v3(m)[0].to_bytes())
    assert v3.zarr_format == 3 and v3.legacy is None
    assert dataclasses.replace(m, attributes={"a": 1}).zarr_format == 2


# -- new arrays as zarr-python 3 writes them -------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    dict(dtype="<f8"), dict(dtype=">i2", fill_value=7), dict(dtype="f4", fill_value=None),
    dict(dtype=str), dict(dtype="U5"), dict(dtype="S3", fill_value=b"ab"), dict(dtype="V4"),
    dict(dtype="M8[10us]"), dict(dtype="c16", fill_value=1 + 2j), dict(dtype="?"),
    dict(dtype=[("a", "<i4"), ("b", "<f8")]),
    dict(dtype="<i2", order="F", filters=[numcodecs.Delta("<i2")],
         compressor=numcodecs.Blosc(shuffle=-1), dimension_separator="/"),
    dict(dtype="<u1", compressor=None), dict(dtype="<i4", compressor=numcodecs.Zstd(3)),
])
def test_new_arrays_have_zarr_python_documents(kwargs: dict) -> None:
    kw = dict(kwargs)
    compressor = kw.get("compressor", "default")
    zkw = {k: v for k, v in kw.items() if k not in ("compressor", "dimension_separator")}
    _, items, _ = write_zarr(compressor="auto" if compressor == "default" else compressor,
                             separator=kw.get("dimension_separator", "."), data=np.zeros(0),
                             **zkw)
    m = build_v2_array_metadata(shape=SHAPE, chunks=CHUNKS, attributes={}, **kw)
    zarray, zattrs = v2_array_documents(m)
    assert json.loads(zarray) == json.loads(items[ZARRAY])
    assert zarray == items[ZARRAY]          # byte for byte: order and indentation too
    assert zattrs == items[ZATTRS]


def test_new_groups_have_zarr_python_documents() -> None:
    store = MemoryStore()
    zarr.create_group(store, zarr_format=2, attributes={"a": [1, 2]})
    items = {k: v.to_bytes() for k, v in store._store_dict.items()}
    zgroup, zattrs = v2_group_documents(build_v2_group_metadata({"a": [1, 2]}))
    assert (zgroup, zattrs) == (items[ZGROUP], items[ZATTRS])
    g = parse_v2_group(items[ZGROUP], items[ZATTRS], "g")
    assert g.zarr_format == 2 and g.attributes == {"a": [1, 2]}
    assert v2_group_documents(g) == (zgroup, zattrs)
    bare = parse_v2_group(b'{"zarr_format": 2}', None)
    assert v2_group_documents(bare) == (b'{"zarr_format": 2}', None)
    v3, notes = v2_group_to_v3(g)
    assert isinstance(v3, GroupMetadata) and v3.attributes == {"a": [1, 2]} and not notes


# -- v2 -> v3 ----------------------------------------------------------------------------------

CONVERT_CASES = [
    ("<f8", "C", numcodecs.Blosc("lz4", 5, shuffle=-1), None, "."),
    ("|u1", "F", numcodecs.Blosc("zstd", 3, shuffle=-1), None, "/"),
    (">i2", "F", numcodecs.Blosc("lz4", 5, shuffle=1), [numcodecs.Delta(">i2")], "/"),
    ("<i4", "C", numcodecs.Zstd(3), None, "."),
    ("<i8", "F", numcodecs.GZip(5), None, "."),
    ("<f4", "C", numcodecs.Zlib(2), None, "."),
    ("<c16", "C", None, None, "/"),
    ("|b1", "C", "auto", None, "."),
    (">f8", "F", "auto", None, "."),
    ("<M8[ns]", "C", numcodecs.Blosc(shuffle=-1), None, "."),
    ("|S4", "F", numcodecs.Blosc(shuffle=-1), None, "."),
    (">U3", "C", numcodecs.Zstd(1), None, "/"),
]

#: the data types TensorStore's zarr3 driver implements (of those these cases use)
TENSORSTORE_TYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                     "uint64", "float16", "float32", "float64", "complex64", "complex128"}


@pytest.mark.parametrize("dtype, order, compressor, filters, separator", CONVERT_CASES,
                         ids=lambda v: repr(v))
def test_v2_to_v3_reads_the_same_chunks_in_zarr_python_and_tensorstore(
        tmp_path, dtype, order, compressor, filters, separator) -> None:
    store = LocalStore(tmp_path)
    _, _, expected = write_zarr(dtype, order=order, compressor=compressor, filters=filters,
                                separator=separator, store=store, fill_value=None,
                                shape=(7, 5, 3), chunks=(3, 2, 2),
                                data=sample(dtype, (7, 5, 3)))
    m = parse_v2_array((tmp_path / ZARRAY).read_bytes(), (tmp_path / ZATTRS).read_bytes())
    v3, notes = v2_to_v3(m)
    assert notes
    (tmp_path / "zarr.json").write_bytes(v3.to_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # zarr-python's warning about numcodecs.*
        got = zarr.open_array(LocalStore(tmp_path, read_only=True), mode="r",
                              zarr_format=3)[...]
    assert_same(got, expected)
    # TensorStore implements the core codecs and numeric data types only
    if (not any(c.name.startswith("numcodecs.") for c in v3.codecs)
            and v3.data_type.name in TENSORSTORE_TYPES):
        import tensorstore as ts
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path) + "/"}}
        got_ts = ts.open(spec, open=True, read=True).result().read().result()
        assert_same(got_ts, expected)
    # new chunks written through the v3 metadata are the v2 chunks' bytes
    pipeline, spec = pipeline_of(v3)
    v2_pipeline, _ = pipeline_of(m)
    chunk_files = [p for p in tmp_path.rglob("*")
                   if p.is_file() and not p.name.startswith(".") and p.name != "zarr.json"]
    assert chunk_files
    for path in chunk_files:
        raw = path.read_bytes()
        chunk = v2_pipeline.decode(raw, spec)
        assert_same(pipeline.decode(raw, spec), chunk)
        if not isinstance(compressor, numcodecs.GZip):
            assert pipeline.encode(chunk, spec) == raw


def test_v2_to_v3_of_strings_uses_the_string_type_and_vlen_utf8(tmp_path) -> None:
    store = LocalStore(tmp_path)
    _, _, expected = write_zarr(str, store=store, fill_value=None)
    m = parse_v2_array((tmp_path / ZARRAY).read_bytes(), None)
    v3, notes = v2_to_v3(m)
    doc = v3.to_json()
    assert doc["data_type"] == "string"
    assert doc["codecs"][0] == {"name": "vlen-utf8", "configuration": {}}
    assert doc["fill_value"] == ""
    assert any("vlen-utf8" in n for n in notes)
    (tmp_path / "zarr.json").write_bytes(v3.to_bytes())
    got = zarr.open_array(LocalStore(tmp_path, read_only=True), mode="r", zarr_format=3)[...]
    assert_same(got, expected)


def test_v2_to_v3_blosc_autoshuffle_note_names_the_choice() -> None:
    _, items, _ = write_zarr("|u1", compressor=numcodecs.Blosc(shuffle=-1))
    v3, notes = v2_to_v3(parse_v2_array(items[ZARRAY], None))
    blosc = v3.to_json()["codecs"][-1]
    assert blosc["name"] == "blosc"
    assert blosc["configuration"]["shuffle"] == "bitshuffle"
    assert blosc["configuration"]["typesize"] == 1
    assert any("blosc shuffle -1" in n and "bitshuffle" in n for n in notes)


# -- bad input ----------------------------------------------------------------------------------

GOOD = {"shape": [4, 4], "chunks": [2, 2], "dtype": "<i4", "fill_value": 0, "order": "C",
        "filters": None, "dimension_separator": ".", "compressor": None, "zarr_format": 2}


@pytest.mark.parametrize("change, field, error", [
    ({"shape": "4"}, "shape", MetadataError),
    ({"shape": [4, -1]}, "shape", MetadataError),
    ({"chunks": [2]}, "chunks", MetadataError),
    ({"chunks": [2, 0]}, "chunks", MetadataError),
    ({"chunks": [2, True]}, "chunks", MetadataError),
    ({"dtype": "<q9"}, "dtype", MetadataError),
    ({"dtype": "i4"}, "dtype", MetadataError),
    ({"dtype": "<i3"}, "dtype", MetadataError),
    ({"dtype": "|S0"}, "dtype", MetadataError),
    ({"dtype": 4}, "dtype", MetadataError),
    ({"dtype": [["a"]]}, "dtype", MetadataError),
    ({"dtype": [["a", "<i4", [-2]]]}, "dtype", MetadataError),
    ({"dtype": [["a", "<i4"], ["a", ">i4"]]}, "dtype", MetadataError),
    ({"dtype": [["a", "<i4"]], "fill_value": 1}, "fill_value", MetadataError),
    ({"dtype": "|O"}, "dtype", MetadataError),
    ({"dtype": "|O", "filters": [{"id": "pickle"}], "order": "F"}, "order",
     UnsupportedExtensionError),
    ({"dtype": "|O", "filters": [{"id": "json2", "bogus": 1}]}, "filters", MetadataError),
    ({"dtype": "|O", "filters": [{"id": "zlib"}, {"id": "vlen-utf8"}]}, "filters",
     UnsupportedExtensionError),
    ({"compressor": {"id": "nosuchcodec"}}, "compressor", UnsupportedExtensionError),
    ({"compressor": {"id": "zlib", "nosuch": 1}}, "compressor", MetadataError),
    ({"compressor": {"id": "blosc", "shuffle": 7}}, "compressor.shuffle", MetadataError),
    ({"compressor": "zlib"}, "compressor", MetadataError),
    ({"filters": [{"id": "nosuchfilter"}]}, "filters[0]", UnsupportedExtensionError),
    ({"filters": {"id": "delta"}}, "filters", MetadataError),
    ({"filters": [{"id": "packbits"}]}, None, MetadataError),
    ({"dimension_separator": "-"}, "dimension_separator", MetadataError),
    ({"order": "K"}, "order", MetadataError),
    ({"fill_value": "zero"}, "fill_value", MetadataError),
    ({"fill_value": 2**40}, "fill_value", MetadataError),
    ({"zarr_format": 3}, "zarr_format", MetadataError),
    ({"zarr_format": None}, "zarr_format", MetadataError),
    ({"shape": [2**63, 1]}, "shape", MetadataError),
    ({"shape": [2**40, 2**40], "chunks": [2**31, 2**31], "dtype": "<f8"}, "chunk_grid",
     MetadataError),
    ({"shape": [1] * 65, "chunks": [1] * 65}, "shape", MetadataError),
])
def test_bad_zarray_names_the_document_and_field(change, field, error) -> None:
    doc = {**GOOD, **change}
    with pytest.raises(error) as info:
        parse_v2_array(json.dumps(doc).encode(), None, "grp/arr")
    assert info.value.path == "grp/arr/.zarray"
    assert "grp/arr/.zarray" in str(info.value)
    if field is not None:
        assert info.value.field == field


@pytest.mark.parametrize("missing", ["shape", "chunks", "dtype", "compressor", "fill_value",
                                     "order", "filters", "zarr_format"])
def test_zarray_without_a_required_member(missing: str) -> None:
    doc = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(MetadataError) as info:
        parse_v2_array(doc, None, "a")
    assert info.value.field == missing


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b"\xff\xfe", b"[" * 100000])
def test_zarray_that_is_not_a_json_object(raw: bytes) -> None:
    with pytest.raises(MetadataError) as info:
        parse_v2_array(raw, None, "a")
    assert info.value.path == "a/.zarray"


def test_bad_zattrs_and_zgroup() -> None:
    with pytest.raises(MetadataError) as info:
        parse_v2_array(GOOD, b"[1]", "a")
    assert info.value.path == "a/.zattrs"
    with pytest.raises(MetadataError) as info:
        parse_v2_group(b'{"zarr_format": 2, "extra": 1}', None, "g")
    assert info.value.path == "g/.zgroup" and info.value.field == "extra"
    with pytest.raises(MetadataError) as info:
        parse_v2_group(b'{"zarr_format": 3}', None, "g")
    assert info.value.field == "zarr_format"
    with pytest.raises(MetadataError):
        parse_v2_group(b"{", None, "g")


def test_unknown_members_are_ignored_and_kept() -> None:
    doc = {**GOOD, "custom": {"x": 1}}
    m = parse_v2_array(doc, None)
    assert json.loads(v2_array_documents(m)[0])["custom"] == {"x": 1}


# -- through kvzarr's chunk engine ----------------------------------------------------------------

@pytest.mark.parametrize("dtype, order, compressor, filters", [
    (">f8", "F", numcodecs.Blosc(shuffle=-1), [numcodecs.Delta(">f8")]),
    ("<i2", "C", "auto", None),
    (str, "F", numcodecs.Zlib(1), None),
    ("<U3", "C", numcodecs.Blosc("zstd", shuffle=2), None),
])
def test_kvzarr_array_over_v2_metadata_reads_and_writes_zarr_python_chunks(
        dtype, order, compressor, filters) -> None:
    import kvzarr
    from kvzarr.array import Array
    shape, chunks = (7, 5, 3), (3, 2, 2)
    data = sample(dtype, shape, seed=3)
    za, _, _ = write_zarr(dtype, order=order, compressor=compressor, filters=filters,
                          shape=shape, chunks=chunks, separator="/", fill_value=None,
                          data=np.zeros(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        za[1:6, :, 1:] = data[1:6, :, 1:]       # chunk 0/0/0 stays missing
    zstore = za.store
    items = {k: v.to_bytes() for k, v in zstore._store_dict.items()}
    store = kvzarr.open_store("memory://", mode="w")
    with store.transaction():
        for key, value in items.items():
            store.set("arr/" + key, value)
    a = Array(store, "arr", parse_v2_array(items[ZARRAY], items[ZATTRS], "arr"))
    assert_same(a[...], za[...])
    assert_same(a.oindex[[0, 6], :, [2]], za.oindex[[0, 6], :, [2]])
    patch = sample(dtype, (2, 2, 2), seed=9)
    a[0:2, 0:2, 0:2] = patch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        za[0:2, 0:2, 0:2] = patch
    mine = {k[len("arr/"):]: store.get(k) for k in store.list_prefix("arr/")}
    theirs = {k: v.to_bytes() for k, v in zstore._store_dict.items()}
    assert mine.keys() == theirs.keys()
    for key in theirs:
        if not key.startswith("."):
            assert mine[key] == theirs[key], key


@pytest.mark.parametrize("dtype, want, object_codec", [
    ("string", "|O", "vlen-utf8"), (str, "|O", "vlen-utf8"), ("bytes", "|O", "vlen-bytes"),
    (bytes, "|O", "vlen-bytes"), ("float32", "<f4", None), (">u2", ">u2", None),
    ("M8[10us]", "<M8[10us]", None), ("U3", "<U3", None),
    (np.dtype([("a", "<i4"), ("b", "<f4", (2,))]), [["a", "<i4"], ["b", "<f4", [2]]], None),
])
def test_new_array_dtype_spellings(dtype, want, object_codec) -> None:
    from kvzarr.metadata.dtypes import data_type_from_numpy
    m = build_v2_array_metadata(shape=(4,), chunks=(2,), dtype=dtype)
    doc = json.loads(v2_array_documents(m)[0])
    assert doc["dtype"] == want
    assert (doc["filters"] or [{}])[0].get("id") == object_codec
    # a kvzarr data type gives the same document as its spelling
    if not isinstance(dtype, np.dtype) and dtype not in (">u2",):
        again = build_v2_array_metadata(shape=(4,), chunks=(2,),
                                        dtype=data_type_from_numpy(dtype)
                                        if dtype not in ("bytes", bytes) else m.data_type)
        assert v2_array_documents(again) == v2_array_documents(m)


@pytest.mark.parametrize("change, field", [
    ({"dtype": [["a", "<i2"], ["b", ">f8"]], "fill_value": None}, "dtype"),
    ({"dtype": [["a", "<i2", [2]]], "fill_value": None}, "dtype"),
    ({"dtype": "<U5", "fill_value": "", "filters": [
        {"id": "categorize", "labels": ["a"], "dtype": "<U5", "astype": "|u1"}]}, "filters"),
    ({"dtype": "|O", "fill_value": None, "filters": [{"id": "json2"}]}, "dtype"),
])
def test_v2_to_v3_refuses_what_v3_cannot_say(change, field) -> None:
    m = parse_v2_array({**GOOD, **change}, None, "a")
    with pytest.raises(UnsupportedExtensionError) as info:
        v2_to_v3(m)
    assert info.value.field == field
