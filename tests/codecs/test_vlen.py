"""vlen-utf8 and vlen-bytes: the spec example, byte equality with numcodecs VLenUTF8 /
VLenBytes, interchange with zarr-python 3.1.6 stores, and every framing fault."""

from __future__ import annotations

import json
import struct
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.codecs.base import ChunkArraySpec
from kvzarr.codecs.pipeline import CodecPipeline
from kvzarr.codecs.registry import codec_from_json, get_codec_class
from kvzarr.codecs.vlen import VlenBytesCodec, VlenUtf8Codec
from kvzarr.errors import CodecError, MetadataError
from kvzarr.metadata.dtypes import parse_data_type

numcodecs = pytest.importorskip("numcodecs")
zarr = pytest.importorskip("zarr")

HSET = settings(max_examples=150, deadline=None)
SD = np.dtypes.StringDType()
STRING = parse_data_type("string")
BYTES = parse_data_type("bytes")
UTF8 = VlenUtf8Codec()
VBYTES = VlenBytesCodec()


def spec(shape, dtype=STRING):
    return ChunkArraySpec(tuple(shape), dtype, dtype.default_fill())


def objects(items, shape=None):
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape if shape is not None else (len(items),))


def frame(*payloads: bytes, count: int | None = None) -> bytes:
    """The framing written out by hand, independently of the codec."""
    n = len(payloads) if count is None else count
    return struct.pack("<I", n) + b"".join(struct.pack("<I", len(p)) + p for p in payloads)


# -- metadata ----------------------------------------------------------------------------

def test_registry_and_json_forms():
    for name, cls in (("vlen-utf8", VlenUtf8Codec), ("vlen-bytes", VlenBytesCodec)):
        assert get_codec_class(name) is cls
        assert isinstance(codec_from_json(name), cls)
        assert isinstance(codec_from_json({"name": name}), cls)
        codec = codec_from_json({"name": name, "configuration": {}})
        assert codec.to_json() == {"name": name, "configuration": {}}  # as zarr-python writes
        with pytest.raises(MetadataError) as info:
            codec_from_json({"name": name, "configuration": {"x": 1}})
        assert info.value.field == "codecs"
    assert VlenUtf8Codec() == VlenUtf8Codec() and VlenUtf8Codec() != VlenBytesCodec()


def test_validate_only_the_matching_data_type():
    UTF8.validate(spec((2,)))
    VBYTES.validate(spec((2,), BYTES))
    others = [BYTES, parse_data_type("int32"),
              parse_data_type({"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}})]
    for dtype in others:
        with pytest.raises(MetadataError) as info:
            UTF8.validate(spec((2,), dtype))
        assert info.value.field == "codecs"
    for dtype in (STRING, parse_data_type("uint8")):
        with pytest.raises(MetadataError):
            VBYTES.validate(spec((2,), dtype))
    with pytest.raises(MetadataError):
        CodecPipeline([VBYTES]).evolve(spec((2,)))
    assert UTF8.encoded_size(spec((2,))) is None and not UTF8.supports_partial


# -- encoding ----------------------------------------------------------------------------

def test_spec_example_bytes():
    chunk = np.array(["a", "", "héllo"], dtype=SD)
    data = UTF8.encode(chunk, spec((3,)))
    assert data.hex() == "03000000" "01000000" "61" "00000000" "06000000" "68c3a96c6c6f"
    back = UTF8.decode(data, spec((3,)))
    assert back.dtype == SD and back.tolist() == ["a", "", "héllo"]


def test_c_order_and_input_kinds():
    grid = np.array([["a", "b"], ["c", "d"]], dtype=SD)
    expected = frame(b"a", b"b", b"c", b"d")
    for chunk in (grid, np.asfortranarray(grid), grid.astype(object), grid.astype("U1"),
                  np.array([["a", "c"], ["b", "d"]], dtype=SD).T):
        assert UTF8.encode(chunk, spec((2, 2))) == expected
    back = UTF8.decode(expected, spec((2, 2)))
    assert back.shape == (2, 2) and back.tolist() == [["a", "b"], ["c", "d"]]
    blobs = objects([b"\x00", bytearray(b"xy"), np.bytes_(b"q"), memoryview(b"mv")], (2, 2))
    assert VBYTES.encode(blobs, spec((2, 2), BYTES)) == frame(b"\x00", b"xy", b"q", b"mv")


def test_zero_and_empty_chunks():
    assert UTF8.encode(np.array("x", dtype=SD), spec(())) == frame(b"x")
    assert UTF8.decode(frame(b"x"), spec(())).tolist() == "x"
    assert UTF8.encode(np.zeros((0, 3), dtype=SD), spec((0, 3))) == b"\x00\x00\x00\x00"
    assert UTF8.decode(b"\x00\x00\x00\x00", spec((0, 3))).shape == (0, 3)
    assert VBYTES.decode(b"\x00\x00\x00\x00", spec((0,), BYTES)).shape == (0,)


@HSET
@given(st.lists(st.text(), max_size=20), st.booleans())
def test_utf8_equals_numcodecs(texts, two_d):
    shape = (2, len(texts) // 2) if two_d else (len(texts),)
    texts = texts[:int(np.prod(shape))]
    chunk = np.array(texts, dtype=SD).reshape(shape)
    ours = UTF8.encode(chunk, spec(shape))
    theirs = bytes(numcodecs.VLenUTF8().encode(chunk.astype(object)))
    assert ours == theirs
    back = UTF8.decode(theirs, spec(shape))
    assert back.dtype == SD and back.shape == shape and back.tolist() == chunk.tolist()


@HSET
@given(st.lists(st.binary(max_size=40), max_size=20))
def test_bytes_equals_numcodecs(blobs):
    chunk = objects(blobs)
    ours = VBYTES.encode(chunk, spec((len(blobs),), BYTES))
    assert ours == bytes(numcodecs.VLenBytes().encode(chunk))
    back = VBYTES.decode(memoryview(ours), spec((len(blobs),), BYTES))
    assert back.dtype == object and back.tolist() == blobs
    assert all(type(b) is bytes for b in back.tolist())


def test_large_element_round_trip():
    big = "é" * 100_000
    chunk = np.array([big, "", big[:3]], dtype=SD)
    data = UTF8.encode(chunk, spec((3,)))
    assert len(data) == 4 + 3 * 4 + 200_000 + 6
    assert UTF8.decode(data, spec((3,))).tolist() == chunk.tolist()


def test_pipeline_round_trip():
    pipeline = CodecPipeline([codec_from_json({"name": "vlen-utf8", "configuration": {}})])
    s = spec((2, 3))
    pipeline = pipeline.evolve(s)
    chunk = np.array([["x", "yy", ""], ["日本", "a\x00b", "z"]], dtype=SD)
    assert pipeline.decode(pipeline.encode(chunk, s), s).tolist() == chunk.tolist()
    assert pipeline.to_json() == [{"name": "vlen-utf8", "configuration": {}}]


# -- bad input -------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [None, b"bytes", 3, "\ud800"])
def test_utf8_encode_rejects_non_text(bad):
    chunk = objects(["ok", bad])
    with pytest.raises(CodecError):
        UTF8.encode(chunk, spec((2,)))


@pytest.mark.parametrize("bad", [None, "text", 3, np.zeros(2, np.uint8)])
def test_bytes_encode_rejects_non_bytes(bad):
    chunk = objects([b"ok", bad])
    with pytest.raises(CodecError):
        VBYTES.encode(chunk, spec((2,), BYTES))


def test_encode_rejects_a_chunk_of_the_wrong_shape():
    with pytest.raises(CodecError):
        UTF8.encode(np.array(["a", "b"], dtype=SD), spec((3,)))
    with pytest.raises(CodecError):
        VBYTES.encode(objects([b"a", b"b"]), spec((1, 2), BYTES))


def test_encode_rejects_missing_values_of_na_strings():
    chunk = np.array(["a", None], dtype=np.dtypes.StringDType(na_object=None))
    with pytest.raises(CodecError):
        UTF8.encode(chunk, spec((2,)))


GOOD = frame(b"ab", b"", b"cde")


@pytest.mark.parametrize("data, shape", [
    (b"", (3,)),                                   # no header
    (b"\x03\x00", (3,)),                           # half a header
    (GOOD, (2,)),                                  # count 3, chunk of 2
    (GOOD, (4,)),                                  # count 3, chunk of 4
    (GOOD[:-1], (3,)),                             # last payload truncated
    (GOOD[:4 + 4 + 2 + 2], (3,)),                  # truncated inside a length
    (GOOD[:4 + 4 + 2], (3,)),                      # ends where a length should start
    (GOOD + b"\x00", (3,)),                        # a byte after the last element
    (frame(b"ab", b"", b"cde") + frame(b"x"), (3,)),
    (frame(b"a", count=2**32 - 1), (2**32 - 1,)),  # huge count, tiny value
    (struct.pack("<II", 1, 2**32 - 1) + b"abc", (1,)),  # length past the end
])
def test_decode_framing_faults(data, shape):
    for codec, dtype in ((UTF8, STRING), (VBYTES, BYTES)):
        with pytest.raises(CodecError):
            codec.decode(data, spec(shape, dtype))


def test_decode_rejects_invalid_utf8():
    for payload in (b"\xff", b"\xc3", b"\xed\xa0\x80"):  # bad byte, cut sequence, surrogate
        with pytest.raises(CodecError):
            UTF8.decode(frame(b"ok", payload), spec((2,)))
    assert VBYTES.decode(frame(b"ok", b"\xff"), spec((2,), BYTES)).tolist() == [b"ok", b"\xff"]


def test_pipeline_names_the_key_of_a_bad_chunk():
    pipeline = CodecPipeline([UTF8])
    with pytest.raises(CodecError) as info:
        pipeline.decode(GOOD[:-1], spec((3,)), key="a/c/0")
    assert info.value.key == "a/c/0"


# -- interchange with zarr-python 3.1.6 --------------------------------------------------

def zp_array(path, dtype, shape, chunks):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=dtype,
                                 compressors=None)


def test_zarr_python_reads_our_chunks_and_we_read_theirs(tmp_path):
    from zarr.core.dtype import VariableLengthBytes
    cases = [
        (str, UTF8, STRING, np.array([["a", "héllo"], ["", "日本"]], dtype=SD)),
        (VariableLengthBytes(), VBYTES, BYTES,
         objects([b"\x00", b"", b"xyz", b"\xff" * 9], (2, 2))),
    ]
    for i, (zp_dtype, codec, dtype, values) in enumerate(cases):
        path = tmp_path / f"a{i}"
        arr = zp_array(path, zp_dtype, (2, 2), (2, 2))
        doc = json.loads((path / "zarr.json").read_text())
        assert codec_from_json(doc["codecs"][0]) == codec
        arr[:] = values
        theirs = (path / "c" / "0" / "0").read_bytes()
        assert codec.decode(theirs, spec((2, 2), dtype)).tolist() == values.tolist()
        ours = codec.encode(values, spec((2, 2), dtype))
        assert ours == theirs
        other = values[::-1, ::-1].copy()  # new content, written by kvzarr only
        (path / "c" / "0" / "0").write_bytes(codec.encode(other, spec((2, 2), dtype)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert zarr.open_array(str(path), mode="r")[:].tolist() == other.tolist()
