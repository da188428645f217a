"""``numcodecs.*`` codecs: classification and JSON as zarr-python 3.1.6 has them, filters
checked against numpy, compressors and checksums against numcodecs, and whole arrays
against zarr-python's chunk bytes."""

from __future__ import annotations

import json
import math
import warnings

import numcodecs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvzarr.codecs import (ChunkArraySpec, CodecPipeline, codec_from_json, codecs_from_json,
                           numcodecs_codec, numcodecs_codec_class)
from kvzarr.errors import (ChecksumMismatchError, CodecError, MetadataError,
                           UnsupportedExtensionError)
from kvzarr.metadata.dtypes import parse_data_type

zarr = pytest.importorskip("zarr")
import zarr.codecs.numcodecs as znc  # noqa: E402
from zarr.abc.codec import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec  # noqa: E402
from zarr.core.buffer.cpu import Buffer  # noqa: E402
from zarr.storage import MemoryStore  # noqa: E402

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

ZARR_IDS = sorted(name[len("numcodecs."):] for name in zarr.config.get("codecs")
                  if name.startswith("numcodecs."))
INSTALLED = [i for i in ZARR_IDS if i in numcodecs.registry.codec_registry]


def spec_of(shape, name) -> ChunkArraySpec:
    dt = parse_data_type(name)
    return ChunkArraySpec(tuple(shape), dt, dt.default_fill())


def nc(name, **config):
    return codec_from_json({"name": f"numcodecs.{name}", "configuration": config})


def without_mtime(data: bytes) -> bytes:
    return data[:4] + bytes(4) + data[8:] if data[:2] == b"\x1f\x8b" else data


@pytest.fixture(autouse=True)
def _quiet_zarr():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python warns that numcodecs.* is not in v3
        yield


# --- classification and metadata ----------------------------------------------------------

@pytest.mark.parametrize("codec_id", INSTALLED)
def test_kind_matches_zarr_python(codec_id):
    ours = numcodecs_codec_class(f"numcodecs.{codec_id}")
    theirs = zarr.registry.get_codec_class(f"numcodecs.{codec_id}")
    expected = {ArrayArrayCodec: "array_to_array", ArrayBytesCodec: "array_to_bytes",
                BytesBytesCodec: "bytes_to_bytes"}
    kind = next(v for k, v in expected.items() if issubclass(theirs, k))
    assert ours is not None and ours.kind == kind and ours.name == f"numcodecs.{codec_id}"


@pytest.mark.parametrize("name", ["numcodecs.nosuchcodec", "numcodecs.pickle",
                                  "numcodecs.vlen-utf8", "numcodecs.zfpy", "numcodecs."])
def test_unknown_or_unclassified_ids_are_unsupported(name):
    if name == "numcodecs.zfpy" and "zfpy" in numcodecs.registry.codec_registry:
        pytest.skip("zfpy is installed")
    assert numcodecs_codec_class(name) is None
    with pytest.raises(UnsupportedExtensionError):
        codec_from_json({"name": name, "configuration": {}})
    with pytest.raises(UnsupportedExtensionError):
        numcodecs_codec(name[len("numcodecs."):])


@pytest.mark.parametrize("doc", [
    {"name": "numcodecs.zlib", "configuration": {"level": 3}},
    {"name": "numcodecs.delta", "configuration": {"dtype": ">i2", "astype": ">i2"}},
    {"name": "numcodecs.blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": 1,
                                                  "blocksize": 0}},
    {"name": "numcodecs.fixedscaleoffset", "configuration": {"offset": 1.5, "scale": 10,
                                                             "dtype": "<f8", "astype": "<i4"}},
    {"name": "numcodecs.crc32", "configuration": {"location": "end"}},
    {"name": "numcodecs.lzma", "configuration": {}},
])
def test_json_round_trips_like_zarr(doc):
    ours = codec_from_json(doc)
    theirs = zarr.registry.get_codec_class(doc["name"]).from_dict(doc)
    assert json.dumps(ours.to_json()) == json.dumps(theirs.to_dict()) == json.dumps(doc)
    assert ours == codec_from_json(json.loads(json.dumps(doc)))


@pytest.mark.parametrize("name,config", [
    ("shuffle", {}), ("fixedscaleoffset", {"offset": 0, "scale": 2}), ("quantize", {"digits": 3}),
    ("astype", {"encode_dtype": "float32"})])
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_evolve_fills_what_zarr_fills(name, config, dtype):
    if name == "quantize" and dtype == "int32":
        with pytest.raises(MetadataError):  # numcodecs: floating point only
            nc(name, **config).evolve(spec_of((4,), dtype))
        return
    ours = nc(name, **config).evolve(spec_of((4,), dtype))
    zcls = zarr.registry.get_codec_class(f"numcodecs.{name}")
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.dtype import parse_dtype
    zdt = parse_dtype(np.dtype(dtype), zarr_format=3)
    zspec = ArraySpec(shape=(4,), dtype=zdt, fill_value=zdt.default_scalar(),
                      config=ArrayConfig.from_dict({}), prototype=default_buffer_prototype())
    theirs = zcls(**config).evolve_from_array_spec(zspec)
    assert json.dumps(ours.to_json(), sort_keys=True) == json.dumps(theirs.to_dict(),
                                                                    sort_keys=True)


@pytest.mark.parametrize("name,config", [
    ("zlib", {"level": 1, "bogus": 2}), ("delta", {}), ("delta", {"dtype": "notadtype"}),
    ("fixedscaleoffset", {"offset": 0, "dtype": "f8"}), ("crc32", {"location": "middle"}),
    ("zlib", {"id": "bz2", "level": 1}), ("packbits", {"x": 1}),
])
def test_bad_config_is_a_metadata_error(name, config):
    with pytest.raises(MetadataError) as e:
        nc(name, **config)
    assert e.value.field.startswith(f"numcodecs.{name}")


def test_from_numcodecs_objects():
    codec = numcodecs_codec(numcodecs.Zlib(level=4))
    assert codec.to_json() == {"name": "numcodecs.zlib", "configuration": {"level": 4}}
    assert numcodecs_codec("bz2", level=2).to_json() == {"name": "numcodecs.bz2",
                                                         "configuration": {"level": 2}}


# --- bytes -> bytes -----------------------------------------------------------------------

B2B = [("zlib", {"level": 5}), ("bz2", {"level": 1}), ("lzma", {}), ("lz4", {}),
       ("zstd", {"level": 3, "checksum": True}), ("gzip", {"level": 6}),
       ("blosc", {"cname": "zstd", "clevel": 3, "shuffle": 2}), ("shuffle", {"elementsize": 4}),
       ("crc32", {}), ("crc32", {"location": "end"}), ("adler32", {}), ("fletcher32", {}),
       ("jenkins_lookup3", {}), ("crc32c", {})]


@SETTINGS
@given(st.sampled_from(B2B), st.binary(min_size=1, max_size=2000).map(lambda b: b * 4))
def test_bytes_codecs_round_trip_and_match_numcodecs(name_config, payload):
    name, config = name_config
    codec = nc(name, **config)
    spec = spec_of((1,), "uint8")
    enc = codec.encode(payload, spec)
    assert isinstance(enc, bytes)
    direct = numcodecs.get_codec({"id": name, **config})
    assert without_mtime(enc) == without_mtime(bytes(direct.encode(payload)))
    assert bytes(direct.decode(enc)) == payload
    assert codec.decode(enc, spec) == payload
    size = codec.encoded_size(len(payload), spec)
    assert size == (len(enc) if name in ("crc32", "adler32", "fletcher32", "jenkins_lookup3",
                                         "crc32c") else None)


@pytest.mark.parametrize("name", ["crc32", "adler32", "fletcher32", "jenkins_lookup3",
                                  "crc32c"])
def test_numcodecs_checksum_mismatch(name):
    codec, spec = nc(name), spec_of((1,), "uint8")
    enc = bytearray(codec.encode(bytes(range(200)), spec))
    enc[len(enc) // 2] ^= 0x04
    with pytest.raises(ChecksumMismatchError):
        codec.decode(bytes(enc), spec)


def test_numcodecs_corrupt_compressed_data():
    spec = spec_of((1,), "uint8")
    for name in ("zlib", "bz2", "lzma", "zstd"):
        codec = nc(name)
        enc = codec.encode(bytes(range(256)) * 8, spec)
        with pytest.raises(CodecError):
            codec.decode(enc[: len(enc) // 2] + b"\xff" * 7, spec)


# --- filters (array -> array), checked against numpy -------------------------------------

@SETTINGS
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=40),
       st.sampled_from(["<i4", ">i4", "int32", "<i8"]))
def test_delta_against_numpy(values, dtype_str):
    arr = np.array(values, dtype="int32").reshape(-1, 1)
    spec = spec_of(arr.shape, "int32")
    codec = nc("delta", dtype=dtype_str).evolve(spec)
    enc = codec.encode(arr, spec)
    flat = arr.reshape(-1).astype("int64")
    expected = np.concatenate([flat[:1], np.diff(flat)])
    out_spec = codec.resolve_spec(spec)
    assert enc.shape == out_spec.shape == arr.shape and enc.dtype.isnative
    np.testing.assert_array_equal(enc.reshape(-1), expected)
    np.testing.assert_array_equal(codec.decode(enc, spec), arr)


def test_delta_astype_narrows_the_data_type():
    arr = np.arange(10, dtype="int32") * 3
    spec = spec_of(arr.shape, "int32")
    codec = nc("delta", dtype="int32", astype="int8")
    assert codec.resolve_spec(spec).data_type == parse_data_type("int8")
    enc = codec.encode(arr, spec)
    assert enc.dtype == np.dtype("int8")
    np.testing.assert_array_equal(enc, [0] + [3] * 9)
    np.testing.assert_array_equal(codec.decode(enc, spec), arr)


def test_fixedscaleoffset_and_quantize_against_numpy():
    arr = np.linspace(-3, 7, 24).reshape(4, 6)
    spec = spec_of(arr.shape, "float64")
    fso = nc("fixedscaleoffset", offset=1.0, scale=100, astype="i2").evolve(spec)
    enc = fso.encode(arr, spec)
    np.testing.assert_array_equal(enc, np.around((arr - 1.0) * 100).astype("i2"))
    np.testing.assert_allclose(fso.decode(enc, spec), arr, atol=0.005)
    q = nc("quantize", digits=2).evolve(spec)
    np.testing.assert_allclose(q.decode(q.encode(arr, spec), spec), arr, atol=10 ** -2)


def test_bitround_keeps_float_bits():
    arr = (np.arange(20, dtype="float32") / 7).reshape(4, 5)
    spec = spec_of(arr.shape, "float32")
    codec = nc("bitround", keepbits=5)
    enc = codec.encode(arr, spec)
    assert enc.dtype == np.dtype("float32")
    assert enc.tobytes() == numcodecs.BitRound(5).encode(arr).tobytes()
    mask = np.uint32(0xFFFFFFFF << (23 - 5) & 0xFFFFFFFF)
    assert ((enc.view("uint32") & ~mask) == 0).all()  # dropped mantissa bits are zero


@SETTINGS
@given(st.lists(st.booleans(), min_size=1, max_size=50))
def test_packbits_against_numpy(bits):
    arr = np.array(bits, dtype=bool)
    spec = spec_of(arr.shape, "bool")
    codec = nc("packbits")
    codec.validate(spec)
    enc = codec.encode(arr, spec)
    assert codec.resolve_spec(spec).shape == enc.shape == (1 + math.ceil(len(bits) / 8),)
    assert enc[0] == (-len(bits)) % 8  # numcodecs' leading count of padding bits
    np.testing.assert_array_equal(enc[1:], np.packbits(arr))
    np.testing.assert_array_equal(codec.decode(enc, spec), arr)


def test_packbits_needs_bool():
    with pytest.raises(MetadataError):
        nc("packbits").validate(spec_of((4,), "uint8"))


def test_astype_filter():
    arr = np.arange(12, dtype="float64").reshape(3, 4) / 4
    spec = spec_of(arr.shape, "float64")
    codec = nc("astype", encode_dtype="float32").evolve(spec)
    assert codec.to_json()["configuration"] == {"encode_dtype": "float32",
                                                "decode_dtype": "float64"}
    enc = codec.encode(arr, spec)
    assert enc.dtype == np.dtype("float32")
    np.testing.assert_array_equal(codec.decode(enc, spec), arr)


def test_filters_see_c_order_after_transpose():
    arr = np.arange(12, dtype="int32").reshape(3, 4)
    spec = spec_of((4, 3), "int32")
    codec = nc("delta", dtype="int32")
    enc = codec.encode(arr.T, spec)  # an F-ordered view
    expected = np.ascontiguousarray(arr.T).reshape(-1)
    np.testing.assert_array_equal(enc.reshape(-1), np.concatenate([expected[:1],
                                                                   np.diff(expected)]))


# --- array -> bytes -----------------------------------------------------------------------

def test_pcodec_array_to_bytes():
    pytest.importorskip("pcodec")
    arr = (np.arange(60, dtype="int64") ** 2).reshape(6, 10)
    spec = spec_of(arr.shape, "int64")
    codec = nc("pcodec", level=4)
    enc = codec.encode(arr, spec)
    assert enc == bytes(numcodecs.get_codec({"id": "pcodec", "level": 4}).encode(arr))
    np.testing.assert_array_equal(codec.decode(enc, spec), arr)


# --- whole arrays against zarr-python -----------------------------------------------------

def _stacks():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python's "not in the v3 spec" warning
        return _build_stacks()


def _build_stacks():
    data_i = np.arange(70, dtype="int32").reshape(7, 10) * 3 - 50
    return [
        ("delta+zlib", data_i, [znc.Delta(dtype="<i4")], "auto", [znc.Zlib(level=3)]),
        ("delta-astype+bz2", data_i, [znc.Delta(dtype="int32", astype="int16")], "auto",
         [znc.BZ2(level=3)]),
        ("fso+lzma", data_i / 7.0, [znc.FixedScaleOffset(offset=1, scale=10, astype="int16")],
         "auto", [znc.LZMA()]),
        ("quantize+shuffle", data_i / 7.0, [znc.Quantize(digits=2)], "auto", [znc.Shuffle()]),
        ("bitround+checksums", (data_i / 7.0).astype("float32"), [znc.BitRound(keepbits=5)],
         "auto", [znc.CRC32(), znc.Adler32()]),
        ("astype+checksums", data_i, [znc.AsType(encode_dtype="int16")], "auto",
         [znc.Fletcher32(), znc.JenkinsLookup3(), znc.CRC32C()]),
        ("packbits+lz4+gzip", data_i % 4 == 0, [znc.PackBits()], "auto",
         [znc.LZ4(), znc.GZip(level=3)]),
        ("blosc+zstd", data_i.astype("int16"), None, "auto",
         [znc.Blosc(cname="lz4", shuffle=2), znc.Zstd(level=2)]),
    ]


@pytest.mark.parametrize("data,filters,serializer,compressors",
                         [s[1:] for s in _stacks()], ids=[s[0] for s in _stacks()])
def test_whole_array_chunks_match_zarr(data, filters, serializer, compressors):
    store_dict: dict = {}
    chunk_shape = (4, 5)
    z = zarr.create_array(store=MemoryStore(store_dict), shape=data.shape, chunks=chunk_shape,
                          dtype=data.dtype, filters=filters, serializer=serializer,
                          compressors=compressors, fill_value=0)
    z[:] = data
    meta = json.loads(store_dict["zarr.json"].to_bytes())
    dt = parse_data_type(meta["data_type"])
    spec = ChunkArraySpec(chunk_shape, dt, dt.default_fill())
    pipeline = CodecPipeline(codecs_from_json(meta["codecs"])).evolve(spec)
    assert json.dumps(pipeline.to_json()) == json.dumps(meta["codecs"])
    for i in range(2):
        for j in range(2):
            chunk = np.zeros(chunk_shape, dtype=dt.numpy_dtype)
            part = data[i * 4:(i + 1) * 4, j * 5:(j + 1) * 5]
            chunk[:part.shape[0], :part.shape[1]] = part
            stored = store_dict[f"c/{i}/{j}"].to_bytes()
            assert without_mtime(pipeline.encode(chunk, spec)) == without_mtime(stored)
            zarr_view = np.asarray(z[i * 4:(i + 1) * 4, j * 5:(j + 1) * 5])
            ours = pipeline.decode(stored, spec)[:part.shape[0], :part.shape[1]]
            assert ours.tobytes() == zarr_view.tobytes()


def test_v2_style_big_endian_delta_reads_like_zarr():
    """A v2 array as zarr-python's ``zarr migrate v3`` converts it: ``numcodecs.delta`` with
    ``>i2`` and a big-endian bytes codec, chunks written the zarr v2 way (numcodecs on
    big-endian data)."""
    data = (np.arange(30, dtype="int16").reshape(5, 6) * 37) - 400
    meta = {"shape": [5, 6], "data_type": "int16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 6]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 7,
            "codecs": [{"name": "numcodecs.delta", "configuration": {"dtype": ">i2",
                                                                      "astype": ">i2"}},
                       {"name": "bytes", "configuration": {"endian": "big"}},
                       {"name": "blosc", "configuration": {"typesize": 2, "cname": "lz4",
                                                           "clevel": 5, "shuffle": "shuffle",
                                                           "blocksize": 0}}],
            "attributes": {}, "zarr_format": 3, "node_type": "array",
            "storage_transformers": []}
    v2_chunk = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1).encode(
        numcodecs.Delta(dtype=">i2").encode(data.astype(">i2")))
    store_dict = {"zarr.json": Buffer.from_bytes(json.dumps(meta).encode()),
                  "c/0/0": Buffer.from_bytes(v2_chunk)}
    np.testing.assert_array_equal(zarr.open_array(MemoryStore(store_dict), mode="r")[:], data)
    dt = parse_data_type("int16")
    spec = ChunkArraySpec((5, 6), dt, dt.fill_from_json(7))
    pipeline = CodecPipeline(codecs_from_json(meta["codecs"])).evolve(spec)
    out = pipeline.decode(v2_chunk, spec)
    np.testing.assert_array_equal(out, data)
    assert out.dtype.isnative
    # and we write the same bytes back
    assert pipeline.encode(data, spec) == v2_chunk
