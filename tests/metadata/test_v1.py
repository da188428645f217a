"""Zarr v1 metadata (:mod:`kvzarr.metadata.v1`): the golden arrays zarr 1.1.0 wrote
(``tests/golden/v1``, see ``tests/golden/make_v1.py``) decode through kvzarr's codec
pipeline to what zarr 1.1.0 read back; generated v1 arrays encoded here with numpy and
the standard library (an independent model of the spec) decode to their data and
re-encode to the same bytes; ``v1_to_v3`` output written next to the v1 chunks is read
bit-exactly by kvzarr, zarr-python 3 and TensorStore; every kind of bad ``meta``
raises a MetadataError naming the key and the field."""

from __future__ import annotations

import bz2
import itertools
import json
import lzma
import math
import shutil
import zlib
from pathlib import Path

import numcodecs.blosc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvzarr.array import build_pipeline
from kvzarr.codecs.base import ChunkArraySpec
from kvzarr.engine.config import ArrayConfig
from kvzarr.errors import MetadataError
from kvzarr.metadata import data_type_from_numpy
from kvzarr.metadata.v1 import (ATTRS, META, V1_CHUNK_KEYS, V1Legacy, parse_v1_array,
                                parse_v1_dtype, v1_to_v3)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "v1"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())["arrays"]


def _supported(npd: np.dtype) -> bool:
    try:
        data_type_from_numpy(npd)
    except MetadataError:
        return False
    return True


#: sized ``S`` is the null_terminated_bytes data type, which kvzarr may not have yet
S_SUPPORTED = _supported(np.dtype("S4"))


# --- helpers ----------------------------------------------------------------------------

def read_chunks(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()
            if p.name not in (META, ATTRS, "zarr.json")}


def decode_all(metadata, chunks: dict[str, bytes]) -> np.ndarray:
    """The whole array, decoded chunk by chunk the way the array layer does: the codec
    pipeline from ``build_pipeline``, keys from the chunk key encoding, missing chunks
    as the fill value, edge chunks cut to the array."""
    pipeline = build_pipeline(metadata, ArrayConfig())
    edges = [d.size for d in metadata.chunk_grid.dimensions]
    dt = metadata.data_type
    out = np.full(metadata.shape, metadata.fill_value, dtype=dt.numpy_dtype)
    counts = [math.ceil(n / c) for n, c in zip(metadata.shape, edges)]
    spec = ChunkArraySpec(tuple(edges), dt, metadata.fill_value)
    for coords in itertools.product(*map(range, counts)):
        key = metadata.chunk_key_encoding.encode(coords)
        if key not in chunks:
            continue
        chunk = pipeline.decode(chunks[key], spec, key)
        region = tuple(slice(i * c, min((i + 1) * c, n))
                       for i, c, n in zip(coords, edges, metadata.shape))
        out[region] = chunk[tuple(slice(0, r.stop - r.start) for r in region)]
    return out


def assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    assert actual.dtype.newbyteorder("=") == expected.dtype.newbyteorder("=")
    native = expected.dtype.newbyteorder("=")
    a = np.ascontiguousarray(actual.astype(native))
    b = np.ascontiguousarray(expected.astype(native))
    assert a.tobytes() == b.tobytes()


def is_s_dtype(entry) -> bool:
    return isinstance(entry["dtype"], str) and entry["dtype"].startswith("|S")


def golden_case(name: str):
    directory = GOLDEN / name
    meta = (directory / META).read_bytes()
    attrs = (directory / ATTRS).read_bytes()
    expected = np.load(GOLDEN / f"{name}.npy", allow_pickle=False)
    return directory, meta, attrs, expected


def meta_doc(**changes):
    doc = {"zarr_format": 1, "shape": [20, 20], "chunks": [10, 10], "dtype": "<i4",
           "compression": "zlib", "compression_opts": 1, "fill_value": 42, "order": "C"}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not _DROP}


_DROP = object()


# --- golden arrays from zarr 1.1.0 --------------------------------------------------------

@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_golden_array_decodes_to_what_zarr1_read(name):
    directory, meta, attrs, expected = golden_case(name)
    entry = MANIFEST[name]
    if is_s_dtype(entry) and not S_SUPPORTED:
        with pytest.raises(MetadataError) as err:
            parse_v1_array(meta, attrs, name)
        assert err.value.field == "dtype" and err.value.key == f"{name}/meta"
        return
    metadata = parse_v1_array(meta, attrs, name)
    assert metadata.zarr_format == 1
    assert metadata.shape == tuple(entry["shape"])
    assert metadata.attributes == json.loads(attrs)
    chunks = read_chunks(directory)
    assert sorted(chunks) == entry["chunk_keys"]
    assert_same_bits(decode_all(metadata, chunks), expected)


def test_spec_example_array_metadata():
    _, meta, attrs, expected = golden_case("i4_zlib_C_spec_example")
    m = parse_v1_array(meta, attrs, "example.zarr")
    assert m.shape == (20, 20)
    assert m.data_type.to_json() == "int32"
    assert [d.size for d in m.chunk_grid.dimensions] == [10, 10]
    assert m.fill_value == 42
    assert m.attributes == {"foo": 42, "bar": "apples", "baz": [1, 2, 3, 4]}
    assert [c.to_json() for c in m.codecs] == [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "numcodecs.zlib", "configuration": {"level": 1}}]
    assert isinstance(m.legacy, V1Legacy) and m.legacy.meta == json.loads(meta)
    # two chunks written, two read as the fill value
    assert (expected[10:, :] == 42).all() and not (expected[:10, :] == 42).all()


def test_order_f_under_zlib_is_row_major_as_zarr1_wrote_it():
    """zarr 1.x serialised non-Blosc chunks with ndarray.tobytes() (row-major) whatever
    the order; the spec text says column-major. The golden array shows the difference:
    only the default reading gives back what zarr 1.1.0 wrote."""
    directory, meta, attrs, expected = golden_case("i2_be_zlib_F")
    chunks = read_chunks(directory)
    as_written = parse_v1_array(meta, attrs)
    assert [c.name for c in as_written.codecs] == ["bytes", "numcodecs.zlib"]
    assert_same_bits(decode_all(as_written, chunks), expected)
    spec_text = parse_v1_array(meta, attrs, as_written_by_zarr1=False)
    assert [c.name for c in spec_text.codecs] == ["transpose", "bytes", "numcodecs.zlib"]
    assert not np.array_equal(decode_all(spec_text, chunks), expected)


def test_order_f_under_blosc_is_column_major():
    _, meta, attrs, _ = golden_case("f4_blosc_zstd_F_3d")
    for as_written in (True, False):
        m = parse_v1_array(meta, attrs, as_written_by_zarr1=as_written)
        assert m.codecs[0].to_json() == {"name": "transpose",
                                         "configuration": {"order": [2, 1, 0]}}


def test_nan_fill_is_read_from_bare_json_nan():
    _, meta, attrs, _ = golden_case("f8_blosc_lz4_C_nan_fill")
    assert b"NaN" in meta
    assert np.isnan(parse_v1_array(meta, attrs).fill_value)


def test_null_fill_reads_as_the_default_and_says_so():
    m = parse_v1_array(meta_doc(fill_value=None), b"{}")
    assert m.fill_value == 0
    assert any("fill_value null" in n for n in m.legacy.notes)


# --- chunk keys ---------------------------------------------------------------------------

@pytest.mark.parametrize("coords", [(0,), (7,), (123,), (0, 0), (2, 4), (10, 0, 3),
                                    (1, 2, 3, 4)])
def test_v1_chunk_keys_are_the_v2_encoding_with_dot(coords):
    # the spec: "the indices are converted to strings and concatenated with the period
    # character ('.') separating each index"
    v1_key = ".".join(str(i) for i in coords)
    assert V1_CHUNK_KEYS.encode(coords) == v1_key
    assert V1_CHUNK_KEYS.decode(v1_key, len(coords)) == coords
    assert V1_CHUNK_KEYS.encode_grid([[i] for i in coords]) == [v1_key]


def test_zero_dimensional_v1_array_is_refused():
    # its one chunk key is "" (zarr 1.1.0 stores it so), which no key encoding names
    with pytest.raises(MetadataError) as err:
        parse_v1_array(meta_doc(shape=[], chunks=[]), b"{}", "x")
    assert err.value.field == "shape" and err.value.key == "x/meta"


# --- generated arrays: an independent encoder following the spec --------------------------

DTYPES = ["<i4", ">i4", "<f8", ">f8", "|u1", "|i1", "|b1", "<c8", ">u2", "<U3", ">U2",
          "<M8[ms]", "|V3", [["r", "|u1"], ["g", "<i2"]], [["x", ">f4"], ["y", ">u8"]],
          [["a", [["b", ">i2"], ["c", "|u1"]]], ["d", ">f8"]],
          *(["|S3"] if S_SUPPORTED else [])]


def _sample(npd: np.dtype, shape, rng) -> np.ndarray:
    raw = rng.integers(0, 256, size=math.prod(shape) * npd.itemsize, dtype=np.uint8)
    out = raw.view(npd).reshape(shape).copy()
    if npd.kind == "b":
        out = raw[:math.prod(shape)].reshape(shape) % 2 == 1
    elif npd.kind == "U":
        out = np.array(["".join(chr(97 + (b % 26)) for b in raw[i:i + npd.itemsize // 4])
                        for i in range(0, raw.size, npd.itemsize)], dtype=npd).reshape(shape)
    elif npd.kind == "S":
        out = (raw.reshape(-1, npd.itemsize) % 26 + 97).view(npd).reshape(shape)
    elif npd.kind == "M":
        out = (raw.view(np.int64) % 2 ** 50).view(npd).reshape(shape)
    return out


def _compress(kind, opts, data: bytes, itemsize: int) -> bytes:
    if kind == "zlib":
        return zlib.compress(data, opts)
    if kind == "bz2":
        return bz2.compress(data, opts)
    if kind == "lzma":
        return lzma.compress(data, format=opts["format"], check=opts["check"],
                             preset=opts["preset"], filters=opts["filters"])
    if kind == "blosc":
        return numcodecs.blosc.compress(data, opts["cname"].encode(), opts["clevel"],
                                        opts["shuffle"], 0, itemsize)
    return data


COMPRESSION = st.one_of(
    st.tuples(st.just("none"), st.none()),
    st.tuples(st.just("zlib"), st.integers(0, 9)),
    st.tuples(st.just("bz2"), st.integers(1, 9)),
    st.tuples(st.just("lzma"), st.fixed_dictionaries({
        "format": st.just(lzma.FORMAT_XZ), "check": st.sampled_from([0, 1]),
        "preset": st.integers(0, 3), "filters": st.none()})),
    st.tuples(st.just("blosc"), st.fixed_dictionaries({
        "cname": st.sampled_from(["lz4", "zstd", "blosclz", "zlib", "lz4hc"]),
        "clevel": st.integers(0, 9), "shuffle": st.sampled_from([0, 1, 2])})),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(DTYPES), order=st.sampled_from("CF"), compression=COMPRESSION,
       shape_chunks=st.lists(st.tuples(st.integers(1, 9), st.integers(1, 5)), min_size=1,
                             max_size=3),
       as_written=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_generated_v1_arrays_decode_and_reencode_bit_exactly(dtype, order, compression,
                                                            shape_chunks, as_written, seed):
    kind, opts = compression
    shape = tuple(s for s, _ in shape_chunks)
    edges = tuple(c for _, c in shape_chunks)
    npd = parse_v1_dtype(dtype)
    data = _sample(npd, shape, np.random.default_rng(seed))
    # the model: each chunk padded to full size, laid out in `order` (column-major only
    # under Blosc when reading as zarr 1.x wrote it), in the dtype's byte order
    column_major = order == "F" and (kind == "blosc" or not as_written)
    chunks = {}
    grid = [range(math.ceil(n / c)) for n, c in zip(shape, edges)]
    for coords in itertools.product(*grid):
        block = np.zeros(edges, dtype=npd)
        region = tuple(slice(i * c, min((i + 1) * c, n))
                       for i, c, n in zip(coords, edges, shape))
        block[tuple(slice(0, r.stop - r.start) for r in region)] = data[region]
        raw = block.tobytes(order="F" if column_major else "C")
        chunks[".".join(map(str, coords))] = _compress(kind, opts, raw, npd.itemsize)
    meta = {"zarr_format": 1, "shape": list(shape), "chunks": list(edges), "dtype": dtype,
            "compression": kind, "compression_opts": opts, "fill_value": None,
            "order": order}
    metadata = parse_v1_array(json.dumps(meta).encode(), b"{}",
                              as_written_by_zarr1=as_written)
    assert_same_bits(decode_all(metadata, chunks), data)
    # writing through the same pipeline gives the v1 writer's bytes (lzma and zlib are
    # deterministic; Blosc is the same library with the same parameters)
    pipeline = build_pipeline(metadata, ArrayConfig(write_empty_chunks=True))
    spec = ChunkArraySpec(edges, metadata.data_type, metadata.fill_value, True)
    key = next(iter(chunks))
    decoded = pipeline.decode(chunks[key], spec, key)
    assert pipeline.encode(decoded, spec) == chunks[key]


# --- v1_to_v3: read by kvzarr, zarr-python 3 and TensorStore -------------------------------

def _converted_copy(name: str, tmp_path: Path):
    directory, meta, attrs, expected = golden_case(name)
    target = tmp_path / name
    shutil.copytree(directory, target)
    v3, notes = v1_to_v3(parse_v1_array(meta, attrs, name))
    (target / "zarr.json").write_bytes(v3.to_bytes())
    return target, v3, notes, expected


#: arrays kvzarr reads after conversion: all but |S without null_terminated_bytes
CONVERTIBLE = sorted(n for n in MANIFEST if not is_s_dtype(MANIFEST[n]) or S_SUPPORTED)
#: zarr-python 3.1 reads all those but the struct data type (only its legacy spelling)
ZARR_PYTHON = [n for n in CONVERTIBLE if isinstance(MANIFEST[n]["dtype"], str)]
#: TensorStore has no zlib, bz2 or lzma codec, and no struct, fixed_length_utf32 or
#: datetime data type: these are the converted arrays it can read
TENSORSTORE = sorted(n for n, e in MANIFEST.items()
                     if e["compression"] in ("blosc", "none") and isinstance(e["dtype"], str)
                     and e["dtype"][1] in "biufc")


def test_v1_to_v3_document_and_notes():
    _, meta, attrs, _ = golden_case("f8_be_blosc_blosclz_F")
    v1 = parse_v1_array(meta, attrs)
    v3, notes = v1_to_v3(v1)
    assert v3.zarr_format == 3 and v3.legacy is None
    doc = json.loads(v3.to_bytes())
    assert doc["chunk_key_encoding"] == {"name": "v2", "configuration": {"separator": "."}}
    assert doc["data_type"] == "float64" and doc["fill_value"] == -1.0
    assert doc["codecs"] == [
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        {"name": "bytes", "configuration": {"endian": "big"}},
        {"name": "blosc", "configuration": {"typesize": 8, "cname": "blosclz", "clevel": 9,
                                            "shuffle": "noshuffle", "blocksize": 0}}]
    joined = "\n".join(notes)
    for word in ("order F", "blosc", "chunk keys", "endian 'big'", "attrs"):
        assert word in joined
    _, meta, attrs, _ = golden_case("struct_blosc_lz4hc_C")
    assert any("zarr-python 3.1 reads only" in n
               for n in v1_to_v3(parse_v1_array(meta, attrs))[1])
    with pytest.raises(MetadataError):
        v1_to_v3(v3)  # already v3


@pytest.mark.parametrize("name", CONVERTIBLE)
def test_v1_to_v3_in_place_read_by_kvzarr(name, tmp_path):
    import kvzarr
    target, v3, notes, expected = _converted_copy(name, tmp_path)
    # the v1 documents are still there: say which format to read
    arr = kvzarr.open_array(str(target), mode="r", zarr_format=3)
    assert_same_bits(arr[...], expected)
    assert dict(arr.attrs) == v3.attributes


@pytest.mark.parametrize("name", ZARR_PYTHON)
@pytest.mark.filterwarnings("ignore:Numcodecs codecs are not in the Zarr version 3")
@pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3 specification")
def test_v1_to_v3_in_place_read_by_zarr_python(name, tmp_path):
    import zarr
    from zarr.storage import LocalStore
    target, v3, notes, expected = _converted_copy(name, tmp_path)
    z = zarr.open_array(LocalStore(target, read_only=True), mode="r")
    assert_same_bits(z[...], expected)
    assert dict(z.attrs) == v3.attributes


@pytest.mark.parametrize("name", TENSORSTORE)
def test_v1_to_v3_in_place_read_by_tensorstore(name, tmp_path):
    import tensorstore as ts
    target, _, notes, expected = _converted_copy(name, tmp_path)
    assert not any("TensorStore" in n for n in notes)
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(target) + "/"}}
    got = ts.open(spec, open=True, read=True).result().read().result()
    assert_same_bits(got, expected)


def test_v1_to_v3_notes_say_tensorstore_lacks_zlib():
    _, meta, attrs, _ = golden_case("i2_be_zlib_F")
    _, notes = v1_to_v3(parse_v1_array(meta, attrs))
    assert any("TensorStore has no such codec" in n for n in notes)
    assert any("row-major" in n for n in notes)


# --- bad input ----------------------------------------------------------------------------

BAD_META = [
    # (changes to a valid meta, field named)
    ({"zarr_format": 2}, "zarr_format"),
    ({"zarr_format": "1"}, "zarr_format"),
    ({"zarr_format": True}, "zarr_format"),
    ({"shape": "20"}, "shape"),
    ({"shape": [20, -1]}, "shape"),
    ({"shape": [20, 1.5]}, "shape"),
    ({"shape": [20, True]}, "shape"),
    ({"chunks": [10, 0]}, "chunks"),
    ({"chunks": [10]}, "chunks"),
    ({"chunks": [10, 10, 10]}, "chunks"),
    ({"chunks": None}, "chunks"),
    ({"shape": [1] * 70, "chunks": [1] * 70}, "shape"),
    ({"shape": [2 ** 40, 2 ** 40], "chunks": [2 ** 40, 2 ** 40]}, "chunks"),
    ({"dtype": "<i3"}, "dtype"),
    ({"dtype": "i4"}, "dtype"),
    ({"dtype": "|i4"}, "dtype"),
    ({"dtype": "int32"}, "dtype"),
    ({"dtype": "|O"}, "dtype"),
    ({"dtype": "<f8[ns]"}, "dtype"),
    ({"dtype": "<M8"}, "dtype"),
    ({"dtype": "<U0"}, "dtype"),
    ({"dtype": "|S" + "9" * 30}, "dtype"),
    ({"dtype": "<M8[xyz]"}, "dtype"),
    ({"dtype": "<f16"}, "dtype"),
    ({"dtype": 4}, "dtype"),
    ({"dtype": []}, "dtype"),
    ({"dtype": [["a"]]}, "dtype"),
    ({"dtype": [["", "<i4"]]}, "dtype"),
    ({"dtype": [["a", "<i4"], ["a", "<i2"]]}, "dtype"),
    ({"dtype": [["a", "<i4", [2]]]}, "dtype"),
    ({"dtype": [["a", "<i4"], ["b", ">i2"]]}, "dtype"),
    ({"compression": "lz4"}, "compression"),
    ({"compression": 3}, "compression"),
    ({"compression_opts": "1"}, "compression_opts"),
    ({"compression_opts": 10}, "compression_opts"),
    ({"compression_opts": None}, "compression_opts"),
    ({"compression": "bz2", "compression_opts": 0}, "compression_opts"),
    ({"compression": "none", "compression_opts": 1}, "compression_opts"),
    ({"compression": "blosc", "compression_opts": 5}, "compression_opts"),
    ({"compression": "blosc", "compression_opts": {"cname": "lz4", "clevel": 5}},
     "compression_opts.shuffle"),
    ({"compression": "blosc",
      "compression_opts": {"cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}},
     "compression_opts.blocksize"),
    ({"compression": "blosc", "compression_opts": {"cname": "lzf", "clevel": 5, "shuffle": 1}},
     "compression_opts.cname"),
    ({"compression": "blosc", "compression_opts": {"cname": "lz4", "clevel": 10, "shuffle": 1}},
     "compression_opts.clevel"),
    ({"compression": "blosc", "compression_opts": {"cname": "lz4", "clevel": 5, "shuffle": 3}},
     "compression_opts.shuffle"),
    ({"compression": "blosc",
      "compression_opts": {"cname": "lz4", "clevel": 5, "shuffle": True}},
     "compression_opts.shuffle"),
    ({"compression": "lzma", "compression_opts": {"preset": 1}}, "compression_opts"),
    ({"compression": "lzma",
      "compression_opts": {"format": "xz", "check": 0, "preset": 1, "filters": None}},
     "compression_opts.format"),
    ({"compression": "lzma",
      "compression_opts": {"format": 1, "check": 0, "preset": 12, "filters": None}},
     "compression_opts.preset"),
    ({"compression": "lzma",
      "compression_opts": {"format": 7, "check": 0, "preset": 1, "filters": None}},
     "compression_opts"),
    ({"compression": "lzma",
      "compression_opts": {"format": 1, "check": 0, "preset": None,
                           "filters": [{"id": 999}]}},
     "compression_opts"),
    ({"fill_value": "abc"}, "fill_value"),
    ({"fill_value": [1]}, "fill_value"),
    ({"fill_value": 1.5}, "fill_value"),
    ({"dtype": "|u1", "fill_value": 300}, "fill_value"),
    ({"order": "A"}, "order"),
    ({"order": None}, "order"),
]


@pytest.mark.parametrize("changes,field", BAD_META, ids=[f"{f}-{i}" for i, (_, f)
                                                         in enumerate(BAD_META)])
def test_bad_meta_names_key_and_field(changes, field):
    with pytest.raises(MetadataError) as err:
        parse_v1_array(json.dumps(meta_doc(**changes)).encode(), b"{}", "grp/arr")
    assert err.value.key == "grp/arr/meta"
    assert err.value.field == field, str(err.value)


def test_deeply_nested_structured_dtype_is_refused():
    dtype = "<i4"
    for i in range(5000):
        dtype = [[f"f{i}", dtype]]
    with pytest.raises(MetadataError) as err:
        parse_v1_array(meta_doc(dtype=dtype), b"{}")
    assert err.value.field == "dtype"
    # a few levels are fine
    nested = [["a", [["b", [["c", "<i4"]]]]]]
    assert parse_v1_dtype(nested) == np.dtype([("a", [("b", [("c", "<i4")])])])


@pytest.mark.parametrize("member", ["zarr_format", "shape", "chunks", "dtype", "compression",
                                    "compression_opts", "fill_value", "order"])
def test_missing_member_names_it(member):
    with pytest.raises(MetadataError) as err:
        parse_v1_array(meta_doc(**{member: _DROP}), b"{}")
    assert err.value.key == "meta" and err.value.field == member


@pytest.mark.parametrize("meta", [b"{", b"", b"\xff\xfe", b"[1, 2]", b'"meta"', b"null",
                                  b"[" * 100000, 17])
def test_meta_that_is_not_a_json_object(meta):
    with pytest.raises(MetadataError) as err:
        parse_v1_array(meta, b"{}", "a")
    assert err.value.key == "a/meta"


@pytest.mark.parametrize("attrs", [b"{", b"[]", b"1", "nope"])
def test_attrs_that_are_not_a_json_object(attrs):
    with pytest.raises(MetadataError) as err:
        parse_v1_array(meta_doc(), attrs, "a")
    assert err.value.key == "a/attrs"


def test_blosc_snappy_is_read_with_a_note_that_its_chunks_cannot_be_decoded():
    # zarr 1.x bundled snappy in its Blosc; numcodecs' Blosc has none
    m = parse_v1_array(meta_doc(compression="blosc", compression_opts={
        "cname": "snappy", "clevel": 5, "shuffle": 1}), b"{}")
    if "snappy" in numcodecs.blosc.list_compressors():
        assert not any("cannot be decoded" in n for n in m.legacy.notes)
    else:
        assert any("no snappy" in n for n in m.legacy.notes)


def test_lenient_where_zarr1_was():
    # other members mean nothing; gzip is zarr 1.x's other name for zlib; null
    # compression was its other name for none; absent attrs read as none
    m = parse_v1_array(meta_doc(extra={"x": 1}, compression="gzip"), None)
    assert m.codecs[-1].to_json() == {"name": "numcodecs.zlib",
                                      "configuration": {"level": 1}}
    assert m.attributes == {}
    m = parse_v1_array(meta_doc(compression=None, compression_opts=None), b"{}")
    assert [c.name for c in m.codecs] == ["bytes"]
