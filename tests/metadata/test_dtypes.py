"""Data types and fill values: the core types (numeric.py) and the extension types
(strings.py, temporal.py, structs.py), checked against numpy bit patterns, the spec's
examples and what zarr-python 3.1.6 writes and reads."""

from __future__ import annotations

import base64
import datetime as dt
import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.errors import MetadataError, UnsupportedExtensionError
from kvzarr.metadata.dtypes import DataType, data_type_from_numpy, parse_data_type
from kvzarr.metadata.dtypes.strings import BytesType, FixedLengthUTF32Type, StringType
from kvzarr.metadata.dtypes.structs import StructType
from kvzarr.metadata.dtypes.temporal import NAT, DateTime64Type, TimeDelta64Type

zarr = pytest.importorskip("zarr")

HSET = settings(max_examples=150, deadline=None)
SD = np.dtypes.StringDType()
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


# -- helpers ---------------------------------------------------------------------------

def bad_fill(dtype: DataType, value) -> None:
    with pytest.raises(MetadataError) as info:
        dtype.fill_from_json(value)
    assert info.value.field == "fill_value"


def bad_data_type(doc, error=MetadataError) -> None:
    with pytest.raises(error) as info:
        parse_data_type(doc)
    assert info.value.field == "data_type"


def through_json(dtype: DataType, value):
    """fill_to_json -> real JSON text -> fill_from_json (NaN/inf must never be numbers)."""
    text = json.dumps(dtype.fill_to_json(value), allow_nan=False)
    return dtype.fill_from_json(json.loads(text))


def raw(dtype: DataType, value) -> bytes:
    return np.array(value, dtype=dtype.numpy_dtype).tobytes()


def zp_metadata(tmp_path, dtype, **kwargs) -> dict:
    """The zarr.json zarr-python 3.1.6 writes for an array of ``dtype``."""
    path = tmp_path / "zp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.create_array(str(path), shape=(2,), chunks=(2,), dtype=dtype, compressors=None,
                          **kwargs)
    return json.loads((path / "zarr.json").read_text())


def zp_open_with(tmp_path, data_type, fill_value, codecs):
    """Open with zarr-python an array whose metadata kvzarr types wrote."""
    path = tmp_path / "ours"
    path.mkdir()
    doc = {"zarr_format": 3, "node_type": "array", "shape": [2], "data_type": data_type,
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": fill_value, "codecs": codecs, "attributes": {}}
    (path / "zarr.json").write_text(json.dumps(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_array(str(path), mode="r")


def float_bits(name: str, bits: int):
    dtype = np.dtype(name)
    return np.array(bits, dtype=UINT[dtype.itemsize]).view(dtype)[()]


def bits_of(value, name: str) -> int:
    dtype = np.dtype(name)
    return int(np.array(value, dtype=dtype).view(UINT[dtype.itemsize]))


# ======================================================================================
# core data types (numeric.py)
# ======================================================================================

CORE = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("name", CORE)
def test_core_names_parse_and_map_to_numpy(name):
    dtype = parse_data_type(name)
    assert dtype.to_json() == name
    assert dtype.numpy_dtype == np.dtype(name)
    assert dtype.itemsize == np.dtype(name).itemsize
    assert parse_data_type({"name": name}) == dtype
    assert data_type_from_numpy(np.dtype(name)) == dtype
    assert data_type_from_numpy(np.dtype(name).newbyteorder(">")) == dtype
    assert dtype.has_endianness == (np.dtype(name).itemsize > 1)


def test_core_data_type_errors():
    bad_data_type({"name": "int8", "configuration": {"x": 1}})
    bad_data_type("int128", UnsupportedExtensionError)
    bad_data_type({"name": "float32", "must_understand": False})
    bad_data_type(7)
    bad_data_type("r0")
    bad_data_type("r12")


def test_bool_fill():
    b = parse_data_type("bool")
    assert b.fill_from_json(True) is np.True_ and b.fill_from_json(False) is np.False_
    assert b.fill_from_json(1) == np.True_  # zarr-python is lenient on read
    assert b.fill_to_json(np.True_) is True
    for value in ["true", 2, None, 1.5, [True]]:
        bad_fill(b, value)


@pytest.mark.parametrize("name", CORE[1:9])
def test_int_fill_range(name):
    dtype = parse_data_type(name)
    info = np.iinfo(name)
    for value in (int(info.min), int(info.max), 0):
        got = dtype.fill_from_json(value)
        assert got.dtype == np.dtype(name) and int(got) == value
        assert through_json(dtype, got) == got
    bad_fill(dtype, int(info.min) - 1)
    bad_fill(dtype, int(info.max) + 1)
    assert dtype.fill_from_json(3.0) == 3  # lenient, as zarr-python reads
    for value in [1.5, True, "1", None, [1], float("nan")]:
        bad_fill(dtype, value)


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_float_special_names(name):
    dtype = parse_data_type(name)
    nan = dtype.fill_from_json("NaN")
    assert bits_of(nan, name) == bits_of(np.nan, name)  # the canonical quiet NaN
    assert dtype.fill_to_json(nan) == "NaN"
    assert dtype.fill_from_json("Infinity") == np.inf
    assert dtype.fill_from_json("-Infinity") == -np.inf
    assert dtype.fill_to_json(dtype.fill_from_json("Infinity")) == "Infinity"
    assert dtype.fill_to_json(dtype.fill_from_json("-Infinity")) == "-Infinity"
    neg_zero = dtype.fill_from_json(-0.0)
    assert bits_of(through_json(dtype, neg_zero), name) == bits_of(-0.0, name)
    for value in ["nan", "inf", "Inf", "", True, None, [1.0], {"x": 1}]:
        bad_fill(dtype, value)


def test_float_canonical_nan_hex_is_the_nan_name():
    f32 = parse_data_type("float32")
    assert bits_of(f32.fill_from_json("0x7fc00000"), "float32") == 0x7FC00000
    assert f32.fill_to_json(f32.fill_from_json("0x7fc00000")) == "NaN"
    f64 = parse_data_type("float64")
    assert f64.fill_to_json(f64.fill_from_json("0x7ff8000000000000")) == "NaN"


@pytest.mark.parametrize("name, hexbits", [
    ("float32", "0x7fc00001"),            # quiet NaN with a payload
    ("float32", "0xffc00000"),            # negative quiet NaN
    ("float32", "0x7f800001"),            # signalling NaN
    ("float64", "0x7ff0000000000001"),    # signalling NaN
    ("float64", "0xfff8000000000000"),    # the NaN x86 arithmetic produces
    ("float16", "0x7e01"),
    ("float16", "0xfc01"),
])
def test_float_nan_payload_survives_bit_exactly(name, hexbits):
    dtype = parse_data_type(name)
    first = dtype.fill_from_json(hexbits)
    assert bits_of(first, name) == int(hexbits, 16)
    written = dtype.fill_to_json(first)
    assert written == hexbits  # lower-case, full width
    again = through_json(dtype, first)
    assert bits_of(again, name) == int(hexbits, 16)


def test_float_hex_of_ordinary_values_and_bad_hex():
    f32 = parse_data_type("float32")
    assert f32.fill_from_json("0x3f800000") == np.float32(1.0)
    assert f32.fill_from_json("0x3F800000") == np.float32(1.0)
    for value in ["0x7fc0000", "0x7fc000000", "0xzzzzzzzz", "0x", "7fc00000"]:
        bad_fill(f32, value)
    bad_fill(parse_data_type("float16"), "0x7fc00000")


@pytest.mark.parametrize("value", ["0x+0000000", "0x0000_000", "0x0000000 ", "0x-0000001"])
def test_float_hex_rejects_non_hex_digits(value):
    bad_fill(parse_data_type("float32"), value)


def test_float_rounding_ties_to_even():
    f16, f32 = parse_data_type("float16"), parse_data_type("float32")
    assert f16.fill_from_json(2049) == 2048 and f16.fill_from_json(2051) == 2052
    assert f32.fill_from_json(16777217) == 16777216
    assert f32.fill_from_json(16777219) == 16777220
    assert f32.fill_from_json(0.1) == np.float32(0.1)


def test_float_huge_integer_is_a_metadata_error_or_infinity():
    f64 = parse_data_type("float64")
    try:
        assert f64.fill_from_json(10**400) == np.inf
    except MetadataError:
        pass


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
@HSET
@given(data=st.data())
def test_float_round_trip_every_bit_pattern(name, data):
    size = np.dtype(name).itemsize
    bits = data.draw(st.integers(0, 2 ** (8 * size) - 1))
    dtype = parse_data_type(name)
    value = float_bits(name, bits)
    assert bits_of(through_json(dtype, value), name) == bits


def test_complex_fill_pairs():
    c64 = parse_data_type("complex64")
    assert c64.fill_from_json([1.0, 2]) == np.complex64(1 + 2j)
    value = c64.fill_from_json(["-Infinity", "NaN"])
    assert value.real == -np.inf and np.isnan(value.imag)
    payload = c64.fill_from_json([0.5, "0x7fc00001"])
    assert c64.fill_to_json(payload) == [0.5, "0x7fc00001"]
    again = through_json(c64, payload)
    assert raw(c64, again) == raw(c64, payload)


def test_complex_fill_to_json_and_bad_pairs():
    c128 = parse_data_type("complex128")
    assert c128.fill_to_json(np.complex128(1.5 - 2j)) == [1.5, -2.0]
    assert c128.fill_to_json(np.complex128(complex(np.inf, np.nan))) == ["Infinity", "NaN"]
    for value in [[1.0], [1, 2, 3], "NaN", 1.0, None, [True, 0], ["x", 0]]:
        bad_fill(c128, value)


@pytest.mark.parametrize("name", ["complex64", "complex128"])
@HSET
@given(data=st.data())
def test_complex_round_trip_every_bit_pattern(name, data):
    dtype = parse_data_type(name)
    size = dtype.itemsize
    blob = data.draw(st.binary(min_size=size, max_size=size))
    value = np.frombuffer(blob, dtype=dtype.numpy_dtype)[0]
    assert raw(dtype, through_json(dtype, value)) == blob


def test_raw_bits_fill():
    r16 = parse_data_type("r16")
    assert r16.numpy_dtype == np.dtype("V2") and r16.itemsize == 2
    assert not r16.has_endianness
    value = r16.fill_from_json([1, 255])
    assert bytes(value) == b"\x01\xff"
    assert r16.fill_to_json(value) == [1, 255]
    assert bytes(through_json(r16, value)) == b"\x01\xff"
    assert bytes(r16.default_fill()) == b"\x00\x00"
    for value in [[1], [1, 2, 3], [256, 0], [-1, 0], [True, 0], "AQI=", None, [1.0, 2]]:
        bad_fill(r16, value)
    assert data_type_from_numpy("V3") == parse_data_type("r24")


def test_is_fill_float_semantics():
    f64 = parse_data_type("float64")
    nan = f64.fill_from_json("NaN")
    assert f64.is_fill(np.full((2, 3), np.nan), nan)            # NaN fill matches NaN chunk
    assert not f64.is_fill(np.array([np.nan, 1.0]), nan)
    zero = f64.fill_from_json(0.0)
    assert f64.is_fill(np.zeros(4), zero)
    assert not f64.is_fill(np.array([0.0, -0.0]), zero)         # -0.0 is not the fill 0.0
    assert not f64.is_fill(np.zeros(3), f64.fill_from_json(-0.0))
    assert f64.is_fill(np.zeros((3, 4))[:, ::2], zero)          # strided views too
    f16 = parse_data_type("float16")
    assert not f16.is_fill(np.array([-0.0], np.float16), f16.fill_from_json(0))


def test_is_fill_int_bool_complex_raw():
    i16 = parse_data_type("int16")
    assert i16.is_fill(np.zeros(5, np.int16), i16.fill_from_json(0))
    assert not i16.is_fill(np.array([0, 1], np.int16), i16.fill_from_json(0))
    assert i16.is_fill(np.full(3, -7, np.int16), i16.fill_from_json(-7))
    b = parse_data_type("bool")
    assert b.is_fill(np.ones(3, bool), b.fill_from_json(True))
    assert not b.is_fill(np.array([True, False]), b.fill_from_json(True))
    c = parse_data_type("complex64")
    fill = np.complex64(complex(np.nan, 0.0))
    assert c.is_fill(np.full((2, 2), fill), fill)
    assert not c.is_fill(np.full(2, np.complex64(complex(np.nan, -0.0))), fill)
    assert c.is_fill(np.zeros((), np.complex64), np.complex64(0))
    r = parse_data_type("r16")
    chunk = np.frombuffer(b"\x01\x02" * 3, dtype="V2")
    assert r.is_fill(chunk, r.fill_from_json([1, 2]))
    assert not r.is_fill(chunk, r.fill_from_json([2, 1]))



@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(["float32", "float64", "int16", "bool", "complex64",
                             "uint8", "r16"]),
       shape=st.lists(st.integers(1, 4), min_size=0, max_size=3),
       strided=st.booleans(), where=st.integers(0, 63), seed=st.integers(0, 2 ** 16),
       fill_json=st.sampled_from([0, 1, "NaN", -0.0]))
def test_chunk_is_fill_equals_is_fill(name, shape, strided, where, seed, fill_json):
    """The first-element shortcut gives is_fill's answer: all fill, fill but one
    element (the first or another), NaN and -0.0 fills, strided views, 0-d chunks."""
    dtype = parse_data_type(name)
    if name == "r16":
        fill_json = [0, 0] if fill_json == 0 else [1, 2]
    elif name == "bool":
        fill_json = bool(fill_json == 1)
    elif name in ("int16", "uint8") and not isinstance(fill_json, int):
        fill_json = 0
    elif name == "complex64":
        fill_json = [fill_json, 0]
    fill = dtype.fill_from_json(fill_json)
    full_shape = tuple(s * 2 for s in shape) if strided else tuple(shape)
    chunk = np.full(full_shape, fill, dtype=dtype.numpy_dtype)
    if strided:
        chunk = chunk[tuple(slice(None, None, 2) for _ in shape) + (Ellipsis,)]
    assert dtype.chunk_is_fill(chunk, fill) == dtype.is_fill(chunk, fill) is True
    if chunk.size:
        other = np.random.default_rng(seed).integers(1, 255, dtype.numpy_dtype.itemsize,
                                                     dtype=np.uint8).tobytes()
        index = np.unravel_index(where % chunk.size, chunk.shape) + (Ellipsis,)
        chunk[index] = np.frombuffer(other, dtype=dtype.numpy_dtype)[0]
        expected = dtype.is_fill(chunk, fill)
        assert dtype.chunk_is_fill(chunk, fill) == expected


# ======================================================================================
# string
# ======================================================================================

def test_string_type_forms():
    s = parse_data_type("string")
    assert isinstance(s, StringType)
    assert parse_data_type({"name": "string"}) == s
    assert parse_data_type({"name": "string", "configuration": {}}) == s
    assert s.to_json() == "string"
    assert s.numpy_dtype == SD and s.itemsize is None and s.is_variable_length
    assert not s.has_endianness
    bad_data_type({"name": "string", "configuration": {"x": 1}})
    for spelling in (str, SD, "U", "string"):
        assert data_type_from_numpy(spelling) == s


def test_string_fill():
    s = parse_data_type("string")
    assert s.default_fill() == "" and s.coerce_fill(None) == ""
    for text in ["", "héllo", "日本語", "a\x00b\x00", "💾"]:
        assert s.fill_from_json(text) == text
        assert through_json(s, text) == text
    assert s.coerce_fill(np.str_("x")) == "x"
    for value in [1, None, ["a"], b"a", "\ud800"]:
        bad_fill(s, value)
    with pytest.raises(MetadataError):
        s.coerce_fill(b"bytes")


def test_string_is_fill():
    s = parse_data_type("string")
    assert s.is_fill(np.array(["a", "a"], dtype=SD), "a")
    assert not s.is_fill(np.array(["a", "a "], dtype=SD), "a")
    assert s.is_fill(np.array(["", ""], dtype=object), "")
    assert not s.is_fill(np.array([None], dtype=object), "None")


@HSET
@given(st.text())
def test_string_fill_round_trip(text):
    s = parse_data_type("string")
    assert through_json(s, s.fill_from_json(text)) == text


def test_string_matches_zarr_python(tmp_path):
    doc = zp_metadata(tmp_path, str)
    assert doc["data_type"] == "string" and doc["fill_value"] == ""
    assert doc["codecs"][0] == {"name": "vlen-utf8", "configuration": {}}
    s = parse_data_type(doc["data_type"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zp_dtype = zarr.open_array(str(tmp_path / "zp")).dtype
    assert zp_dtype == s.numpy_dtype
    assert s.fill_to_json(s.fill_from_json(doc["fill_value"])) == doc["fill_value"]
    arr = zp_open_with(tmp_path, s.to_json(), s.fill_to_json("héllo"),
                       [{"name": "vlen-utf8", "configuration": {}}])
    assert arr.fill_value == "héllo"
    assert arr[:].tolist() == ["héllo", "héllo"]


# ======================================================================================
# bytes
# ======================================================================================

def test_bytes_type_forms():
    b = parse_data_type("bytes")
    assert isinstance(b, BytesType)
    assert parse_data_type("variable_length_bytes") == b
    assert parse_data_type({"name": "bytes"}) == b
    assert b.to_json() == "bytes"
    assert b.numpy_dtype == np.dtype(object) and b.itemsize is None
    bad_data_type({"name": "bytes", "configuration": {"x": 1}})
    assert data_type_from_numpy(bytes) == b
    assert data_type_from_numpy("bytes") == b
    with pytest.raises(UnsupportedExtensionError):
        data_type_from_numpy("S3")  # null_terminated_bytes is not registered
    with pytest.raises(UnsupportedExtensionError):
        data_type_from_numpy(object)  # ambiguous, as in zarr-python


def test_bytes_fill_both_json_forms():
    b = parse_data_type("bytes")
    assert b.fill_from_json("AQID") == b"\x01\x02\x03"
    assert b.fill_from_json([1, 2, 3]) == b"\x01\x02\x03"
    assert b.fill_from_json([]) == b"" and b.fill_from_json("") == b""
    assert b.fill_to_json(b"\x01\x02\x03") == "AQID"
    assert b.default_fill() == b""
    assert b.coerce_fill(bytearray(b"x")) == b"x"
    assert b.coerce_fill("é") == "é".encode()  # a str is UTF-8, as zarr-python casts
    assert b.coerce_fill([7]) == b"\x07"
    for value in ["!!!!", "AQI", "AQ=D", "éé", [256], [-1], [True], [1.0], 5, None, {"a": 1}]:
        bad_fill(b, value)
    with pytest.raises(MetadataError):
        b.coerce_fill(3.5)


@HSET
@given(st.binary(max_size=64))
def test_bytes_fill_round_trip(blob):
    b = parse_data_type("bytes")
    assert through_json(b, blob) == blob
    assert b.fill_from_json(list(blob)) == blob


def test_bytes_is_fill():
    b = parse_data_type("bytes")
    chunk = np.empty(3, dtype=object)
    chunk[:] = [b"ab", b"ab", bytearray(b"ab")]
    assert b.is_fill(chunk, b"ab")
    chunk[1] = "ab"  # a str would not read back as b"ab"
    assert not b.is_fill(chunk, b"ab")


def test_bytes_matches_zarr_python(tmp_path):
    from zarr.core.dtype import VariableLengthBytes
    doc = zp_metadata(tmp_path, VariableLengthBytes(), fill_value=b"\x01\x02\x03")
    assert doc["data_type"] == "variable_length_bytes" and doc["fill_value"] == "AQID"
    b = parse_data_type(doc["data_type"])
    assert b.fill_from_json(doc["fill_value"]) == b"\x01\x02\x03"
    assert b.fill_to_json(b"\x01\x02\x03") == doc["fill_value"]
    # zarr-python reads what kvzarr writes: "bytes" with a base64 fill
    arr = zp_open_with(tmp_path, b.to_json(), b.fill_to_json(b"\x00\xff"),
                       [{"name": "vlen-bytes", "configuration": {}}])
    assert arr.fill_value == b"\x00\xff"
    assert arr[:].tolist() == [b"\x00\xff", b"\x00\xff"]


# ======================================================================================
# fixed_length_utf32
# ======================================================================================

def test_fixed_length_utf32_forms():
    doc = {"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}}
    u = parse_data_type(doc)
    assert isinstance(u, FixedLengthUTF32Type)
    assert u.to_json() == doc
    assert u.numpy_dtype == np.dtype("U5") and u.itemsize == 20 and u.has_endianness
    assert data_type_from_numpy("U5") == u
    assert data_type_from_numpy(">U5") == u
    assert data_type_from_numpy(np.dtype("U1")).to_json()["configuration"] == {
        "length_bytes": 4}
    for length in [0, 3, 6, -4, "20", True, 20.0, 2147483648, None]:
        bad_data_type({"name": "fixed_length_utf32", "configuration": {"length_bytes": length}})
    bad_data_type({"name": "fixed_length_utf32"})
    bad_data_type({"name": "fixed_length_utf32",
                   "configuration": {"length_bytes": 4, "endian": "little"}})


def test_fixed_length_utf32_fill():
    u = parse_data_type({"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}})
    assert u.default_fill() == "" and u.fill_to_json(u.default_fill()) == ""
    assert u.fill_from_json("abcde") == "abcde"
    assert u.fill_from_json("ab\x00\x00\x00") == "ab"  # padded form: NULs are padding
    assert u.fill_to_json(np.str_("ab")) == "ab"
    assert u.fill_from_json("日本") == "日本"
    assert through_json(u, u.fill_from_json("a\x00b")) == "a\x00b"  # inner NUL kept
    for value in ["abcdef", 1, None, ["a"], b"ab", "\udfff"]:
        bad_fill(u, value)
    with pytest.raises(MetadataError):
        u.coerce_fill("too long!")


@HSET
@given(st.text(max_size=6))
def test_fixed_length_utf32_round_trip(text):
    u = FixedLengthUTF32Type(24)
    value = u.coerce_fill(text)
    assert raw(u, through_json(u, value)) == raw(u, text)


def test_fixed_length_utf32_is_fill():
    u = FixedLengthUTF32Type(8)
    assert u.is_fill(np.array(["ab", "ab"], dtype="U2"), np.str_("ab"))
    assert u.is_fill(np.array(["ab", "ab"], dtype=">U2"), np.str_("ab"))
    assert not u.is_fill(np.array(["ab", "a"], dtype="U2"), np.str_("ab"))
    assert u.is_fill(np.array(["", ""], dtype="U2"), np.str_(""))


def test_fixed_length_utf32_matches_zarr_python(tmp_path):
    doc = zp_metadata(tmp_path, "U5", fill_value="hi")
    u = data_type_from_numpy("U5")
    assert doc["data_type"] == u.to_json()
    assert doc["fill_value"] == u.fill_to_json(u.coerce_fill("hi")) == "hi"
    arr = zp_open_with(tmp_path, u.to_json(), u.fill_to_json(np.str_("héllo")),
                       [{"name": "bytes", "configuration": {"endian": "little"}}])
    assert arr.dtype == u.numpy_dtype and arr.fill_value == "héllo"


# ======================================================================================
# numpy.datetime64 / numpy.timedelta64
# ======================================================================================

def dt64(unit="us", scale=10):
    return parse_data_type({"name": "numpy.datetime64",
                            "configuration": {"unit": unit, "scale_factor": scale}})


def td64(unit="ns", scale=1):
    return parse_data_type({"name": "numpy.timedelta64",
                            "configuration": {"unit": unit, "scale_factor": scale}})


@pytest.mark.parametrize("unit", ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps",
                                  "fs", "as"])
def test_temporal_units(unit):
    d, t = dt64(unit, 3), td64(unit, 3)
    assert isinstance(d, DateTime64Type) and isinstance(t, TimeDelta64Type)
    assert d.numpy_dtype == np.dtype(f"M8[3{unit}]")
    assert t.numpy_dtype == np.dtype(f"m8[3{unit}]")
    assert d.itemsize == t.itemsize == 8 and d.has_endianness
    assert data_type_from_numpy(f"M8[3{unit}]") == d
    assert data_type_from_numpy(f">m8[3{unit}]") == t
    assert d.to_json() == {"name": "numpy.datetime64",
                           "configuration": {"unit": unit, "scale_factor": 3}}


def test_temporal_micro_sign_and_generic():
    assert dt64("μs", 10) == dt64("us", 10)
    assert dt64("μs", 10).to_json()["configuration"]["unit"] == "us"
    generic = dt64("generic", 1)
    assert generic.numpy_dtype == np.dtype("M8")
    assert data_type_from_numpy("M8") == generic
    assert data_type_from_numpy("m8") == td64("generic", 1)
    assert generic.fill_from_json("NaT") is not None
    bad_fill(generic, 5)  # numpy's generic unit holds nothing but NaT
    bad_data_type({"name": "numpy.datetime64",
                   "configuration": {"unit": "generic", "scale_factor": 2}})


@pytest.mark.parametrize("config", [
    {"unit": "us"}, {"scale_factor": 1}, {}, {"unit": "x", "scale_factor": 1},
    {"unit": "US", "scale_factor": 1}, {"unit": "us", "scale_factor": 0},
    {"unit": "us", "scale_factor": 2**31}, {"unit": "us", "scale_factor": True},
    {"unit": "us", "scale_factor": "1"}, {"unit": "us", "scale_factor": 1.0},
    {"unit": "us", "scale_factor": 1, "endian": "little"}, {"unit": 1, "scale_factor": 1}])
def test_temporal_bad_configuration(config):
    bad_data_type({"name": "numpy.datetime64", "configuration": config})
    bad_data_type({"name": "numpy.timedelta64", "configuration": config})


def test_temporal_scale_factor_bounds():
    assert dt64("s", 2**31 - 1).numpy_dtype == np.dtype(f"M8[{2**31 - 1}s]")
    bad_data_type("numpy.datetime64")  # configuration is required


def test_temporal_fill():
    d = dt64("us", 10)
    nat = d.fill_from_json("NaT")
    assert np.isnat(nat) and nat.dtype == d.numpy_dtype
    assert d.fill_to_json(nat) == NAT == -(2**63)  # integer form, as zarr-python writes
    assert np.isnat(d.fill_from_json(-(2**63)))
    assert np.isnat(d.default_fill())
    v = d.fill_from_json(12345)
    assert v == np.datetime64(12345, "10us") and d.fill_to_json(v) == 12345
    assert d.fill_from_json(2**63 - 1).view(np.int64) == 2**63 - 1
    for value in [2**63, -(2**63) - 1, 1.0, True, "2020-01-01", "nat", None, [1]]:
        bad_fill(d, value)
    t = td64("ms", 1)
    assert t.fill_from_json(-5) == np.timedelta64(-5, "ms")
    bad_fill(t, 0.5)


@HSET
@given(st.integers(-(2**63), 2**63 - 1))
def test_temporal_fill_round_trip(count):
    for dtype in (dt64("ns", 7), td64("D", 1)):
        value = dtype.fill_from_json(count)
        assert raw(dtype, through_json(dtype, value)) == np.int64(count).tobytes()


def test_temporal_coerce_fill():
    s = dt64("s", 1)
    assert s.coerce_fill(np.datetime64("2020-01-01")) == np.datetime64("2020-01-01T00:00:00")
    assert s.coerce_fill(dt.datetime(2020, 1, 1, 12)) == np.datetime64("2020-01-01T12:00:00")
    assert s.coerce_fill(dt.date(2020, 1, 2)) == np.datetime64("2020-01-02")
    assert s.coerce_fill("2020-01-01T00:00:01") == np.datetime64("2020-01-01T00:00:01")
    assert np.isnat(s.coerce_fill(np.datetime64("NaT"))) and np.isnat(s.coerce_fill(None))
    assert s.coerce_fill(5) == np.datetime64(5, "s")
    us10 = dt64("us", 10)
    assert us10.coerce_fill(np.datetime64("2020-01-01T00:00:00.00002")) == np.datetime64(
        "2020-01-01T00:00:00.00002")
    ms = td64("ms", 1)
    # np.timedelta64 is an integer subclass: it must convert by unit, not by count
    assert ms.coerce_fill(np.timedelta64(5, "s")).view(np.int64) == 5000
    assert ms.coerce_fill(dt.timedelta(seconds=2)).view(np.int64) == 2000
    bad = [
        (us10, np.datetime64("2020-01-01T00:00:00.000001")),  # not a multiple of 10 us
        (s, np.timedelta64(1, "s")), (ms, np.datetime64("2020-01-01")),
        (s, dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)), (s, "not a date"),
        (s, 1.5), (s, True), (ms, "5"), (td64("D", 1), np.timedelta64(1, "h")),
        (dt64("ns", 1), np.datetime64("9999-01-01")),  # overflows int64 nanoseconds
    ]
    for dtype, value in bad:
        with pytest.raises(MetadataError) as info:
            dtype.coerce_fill(value)
        assert info.value.field == "fill_value"


def test_temporal_is_fill():
    d = dt64("s", 1)
    nat = d.default_fill()
    assert d.is_fill(np.full(3, np.datetime64("NaT"), dtype="M8[s]"), nat)
    assert not d.is_fill(np.array(["NaT", "2020-01-01"], dtype="M8[s]"), nat)
    one = d.fill_from_json(1)
    assert d.is_fill(np.full((2, 2), 1, dtype=np.int64).view("M8[s]"), one)
    assert d.is_fill(np.full(2, 1, dtype=">i8").view(">M8[s]"), one)


@pytest.mark.parametrize("numpy_dtype", ["M8[10us]", "m8[ns]", "M8[s]", "m8[3D]"])
def test_temporal_matches_zarr_python(tmp_path, numpy_dtype):
    doc = zp_metadata(tmp_path, numpy_dtype)
    ours = data_type_from_numpy(numpy_dtype)
    assert doc["data_type"] == ours.to_json()
    assert doc["fill_value"] == ours.fill_to_json(ours.default_fill())
    arr = zp_open_with(tmp_path, ours.to_json(), ours.fill_to_json(ours.fill_from_json(42)),
                       [{"name": "bytes", "configuration": {"endian": "little"}}])
    assert arr.dtype == ours.numpy_dtype
    assert np.array(arr.fill_value, dtype=ours.numpy_dtype).view(np.int64) == 42


# ======================================================================================
# struct / structured
# ======================================================================================

def struct(*fields):
    return parse_data_type({"name": "struct", "configuration": {"fields": [
        {"name": n, "data_type": t} for n, t in fields]}})


def test_struct_packed_layout_spec_examples():
    s = struct(("id", "int32"), ("flags", "uint8"), ("value", "float64"))
    assert isinstance(s, StructType)
    assert s.itemsize == 13 == s.numpy_dtype.itemsize
    assert [s.numpy_dtype.fields[n][1] for n in ("id", "flags", "value")] == [0, 4, 5]
    assert s.has_endianness
    nested = struct(("point", {"name": "struct", "configuration": {"fields": [
        {"name": "x", "data_type": "float32"}, {"name": "y", "data_type": "float32"}]}}),
        ("value", "float64"))
    assert nested.itemsize == 16
    assert nested.numpy_dtype.fields["value"][1] == 8
    assert nested.numpy_dtype["point"].fields["y"][1] == 4
    assert not struct(("a", "uint8"), ("b", "int8")).has_endianness


def test_struct_to_json_and_field_forms():
    doc = {"name": "struct", "configuration": {"fields": [
        {"name": "t", "data_type": {"name": "numpy.datetime64",
                                    "configuration": {"unit": "s", "scale_factor": 1}}},
        {"name": "u", "data_type": {"name": "uint8"}},
        {"name": "s", "data_type": {"name": "fixed_length_utf32",
                                    "configuration": {"length_bytes": 8}}},
        {"name": "r", "data_type": "r16"}]}}
    s = parse_data_type(doc)
    assert s.itemsize == 8 + 1 + 8 + 2
    assert s.numpy_dtype == np.dtype([("t", "M8[s]"), ("u", "u1"), ("s", "U2"), ("r", "V2")])
    written = s.to_json()
    assert written["configuration"]["fields"][1] == {"name": "u", "data_type": "uint8"}
    assert parse_data_type(written) == s


def test_struct_legacy_structured_is_read_never_written():
    legacy = {"name": "structured", "configuration": {"fields": [
        ["a", "int32"], ["b", {"name": "structured", "configuration": {
            "fields": [["x", "float32"]]}}]]}}
    s = parse_data_type(legacy)
    assert s == struct(("a", "int32"), ("b", {"name": "struct", "configuration": {
        "fields": [{"name": "x", "data_type": "float32"}]}}))
    assert s.to_json()["name"] == "struct"
    assert "structured" not in json.dumps(s.to_json())


@pytest.mark.parametrize("fields", [
    [], "a", [{"name": "a"}], [{"name": "a", "data_type": "int8", "x": 1}],
    [["a", "int8"]],  # pair form is legacy-only
    [{"name": "", "data_type": "int8"}], [{"name": 1, "data_type": "int8"}],
    [{"name": "a", "data_type": "int8"}, {"name": "a", "data_type": "int16"}],
    [{"name": "s", "data_type": "string"}], [{"name": "b", "data_type": "bytes"}],
    [{"name": "a", "data_type": {"name": "int8", "must_understand": False}}],
])
def test_struct_bad_configuration(fields):
    bad_data_type({"name": "struct", "configuration": {"fields": fields}})


def test_struct_bad_configuration_more():
    bad_data_type({"name": "struct"})
    bad_data_type({"name": "struct", "configuration": {"fields": [
        {"name": "a", "data_type": "int8"}], "extra": 1}})
    bad_data_type({"name": "struct", "configuration": {"fields": [
        {"name": "a", "data_type": "float128"}]}}, UnsupportedExtensionError)
    bad_data_type({"name": "structured", "configuration": {"fields": [["a"]]}})
    bad_data_type({"name": "structured", "configuration": {"fields": [["a", "int8", 1]]}})


def test_struct_fill_object_round_trip_with_nan_payload():
    s = struct(("id", "int32"), ("score", "float64"), ("h", "float16"))
    fill = s.fill_from_json({"id": -1, "score": "0x7ff0000000000001", "h": "NaN"})
    assert isinstance(fill, np.void) and fill.dtype == s.numpy_dtype
    assert fill["id"] == -1
    assert bits_of(fill["score"], "float64") == 0x7FF0000000000001
    assert s.fill_to_json(fill) == {"id": -1, "score": "0x7ff0000000000001", "h": "NaN"}
    assert raw(s, through_json(s, fill)) == raw(s, fill)
    assert s.fill_from_json({"id": 1, "score": 0.5, "h": -0.0})["score"] == 0.5


def test_struct_nested_fill():
    s = struct(("point", {"name": "struct", "configuration": {"fields": [
        {"name": "x", "data_type": "float32"}, {"name": "y", "data_type": "float32"}]}}),
        ("value", "float64"))
    fill = s.fill_from_json({"point": {"x": 1.0, "y": 2.0}, "value": 3.14})
    assert fill["point"]["y"] == 2.0 and fill["value"] == 3.14
    assert s.fill_to_json(fill) == {"point": {"x": 1.0, "y": 2.0}, "value": 3.14}
    expected = np.array((1.0, 2.0, 3.14), dtype="<f4,<f4,<f8").tobytes()
    assert raw(s, fill) == expected
    bad_fill(s, {"point": {"x": 1.0}, "value": 3.14})
    bad_fill(s, {"point": [1.0, 2.0], "value": 3.14})


def test_struct_bad_fills():
    s = struct(("a", "int8"), ("b", "float32"))
    for value in [{"a": 1}, {"a": 1, "b": 2.0, "c": 3}, {"a": 300, "b": 1.0},
                  {"a": 1, "b": "x"}, [1, 2.0], 5, None, "!!!", "AAAA", True]:
        bad_fill(s, value)
    with pytest.raises(MetadataError, match="'a'"):
        s.fill_from_json({"a": 300, "b": 1.0})


def test_struct_legacy_base64_fill_is_little_endian():
    s = struct(("a", "int32"), ("b", "float64"))
    packed = np.array((1, 2.5), dtype="<i4,<f8").tobytes()
    fill = s.fill_from_json(base64.b64encode(packed).decode())
    assert fill["a"] == 1 and fill["b"] == 2.5
    assert s.fill_to_json(fill) == {"a": 1, "b": 2.5}


def test_struct_default_and_coerce_fill():
    s = struct(("n", "int16"), ("t", {"name": "numpy.datetime64",
                                      "configuration": {"unit": "s", "scale_factor": 1}}))
    default = s.default_fill()
    assert default["n"] == 0 and np.isnat(default["t"])  # each field's own default
    assert raw(s, s.coerce_fill(None)) == raw(s, default)
    assert s.fill_to_json(s.coerce_fill((3, np.datetime64("2020-01-01")))) == {
        "n": 3, "t": 1577836800}
    other = np.array((4, 60), dtype=[("n", ">i2"), ("t", ">M8[m]")])[()]
    assert s.fill_to_json(s.coerce_fill(other)) == {"n": 4, "t": 3600}
    assert s.coerce_fill({"n": 1, "t": "NaT"})["n"] == 1
    for value in [(1,), (1, 2, 3), np.array((1, 2), dtype=[("x", "i2"), ("y", "i8")])[()],
                  {"n": 1}, 3.5, {"n": 1.5, "t": 0}]:
        with pytest.raises(MetadataError):
            s.coerce_fill(value)


def test_struct_from_numpy():
    s = data_type_from_numpy([("a", ">i4"), ("b", [("x", "f4"), ("y", "U2")]), ("c", "M8[ms]")])
    assert s.numpy_dtype == np.dtype([("a", "i4"), ("b", [("x", "f4"), ("y", "U2")]),
                                      ("c", "M8[ms]")])
    assert s.to_json()["configuration"]["fields"][0] == {"name": "a", "data_type": "int32"}
    assert data_type_from_numpy("V4") == parse_data_type("r32")  # plain void stays raw bits
    for bad in [np.dtype([("a", "i1"), ("b", "f8")], align=True),
                np.dtype({"names": ["a", "b"], "formats": ["i1", "i1"], "offsets": [0, 2]}),
                np.dtype({"names": ["a"], "formats": ["i4"], "itemsize": 8}),
                np.dtype({"names": ["a", "b"], "formats": ["i1", "i1"], "offsets": [1, 0]}),
                np.dtype([(("title", "a"), "i4")]),
                np.dtype([("a", "i4", (2,))]),
                np.dtype([("a", "O")])]:
        with pytest.raises(MetadataError) as info:
            data_type_from_numpy(bad)
        assert info.value.field == "dtype"


def test_struct_is_fill_compares_bytes():
    s = struct(("a", "int32"), ("b", "float64"))
    nan = s.fill_from_json({"a": 0, "b": "NaN"})
    chunk = np.zeros(4, dtype=s.numpy_dtype)
    chunk["b"] = np.nan
    assert s.is_fill(chunk, nan)
    chunk["b"][1] = float_bits("float64", 0x7FF8000000000001)  # other NaN payload
    assert not s.is_fill(chunk, nan)
    zero = s.fill_from_json({"a": 0, "b": 0.0})
    chunk = np.zeros((2, 2), dtype=s.numpy_dtype)
    assert s.is_fill(chunk, zero)
    chunk["b"][0, 1] = -0.0
    assert not s.is_fill(chunk, zero)
    assert s.is_fill(np.zeros(3, dtype=[("a", ">i4"), ("b", ">f8")]), zero)


STRUCT_ANY = [("h", "float16"), ("f", "float32"), ("t", {
    "name": "numpy.timedelta64", "configuration": {"unit": "ns", "scale_factor": 1}}),
    ("u", {"name": "fixed_length_utf32", "configuration": {"length_bytes": 4}}),
    ("r", "r24"), ("n", {"name": "struct", "configuration": {"fields": [
        {"name": "d", "data_type": "float64"}, {"name": "i", "data_type": "uint64"}]}})]


@HSET
@given(st.data())
def test_struct_fill_round_trip_any_bits(data):
    s = struct(*STRUCT_ANY)
    blob = bytearray(data.draw(st.binary(min_size=s.itemsize, max_size=s.itemsize)))
    # the U1 field must hold one valid code point: numpy strips a trailing NUL anyway
    char = data.draw(st.characters(exclude_categories=["Cs"]).filter(lambda c: c != "\x00"))
    offset = s.numpy_dtype.fields["u"][1]
    blob[offset:offset + 4] = np.array(char, dtype="U1").tobytes()
    value = np.frombuffer(bytes(blob), dtype=s.numpy_dtype)[0]
    assert raw(s, through_json(s, value)) == bytes(blob)


@HSET
@given(st.binary(min_size=12, max_size=12))
def test_struct_fill_round_trip_complex_field(blob):
    s = struct(("f", "float32"), ("c", "complex64"))
    value = np.frombuffer(blob, dtype=s.numpy_dtype)[0]
    assert raw(s, through_json(s, value)) == blob


def test_struct_matches_zarr_python_legacy(tmp_path):
    numpy_dtype = np.dtype([("a", "i4"), ("b", "f8")])
    fill = np.array((1, 2.5), dtype=numpy_dtype)[()]
    doc = zp_metadata(tmp_path, numpy_dtype, fill_value=fill)
    assert doc["data_type"]["name"] == "structured"  # zarr-python 3.1 writes the legacy form
    s = parse_data_type(doc["data_type"])
    assert s == data_type_from_numpy(numpy_dtype)
    assert raw(s, s.fill_from_json(doc["fill_value"])) == fill.tobytes()
    assert s.fill_to_json(s.fill_from_json(doc["fill_value"])) == {"a": 1, "b": 2.5}


def test_data_types_compare_and_hash_by_json():
    spellings = [
        (parse_data_type("bytes"), parse_data_type("variable_length_bytes")),
        (dt64("μs", 2), dt64("us", 2)),
        (parse_data_type({"name": "structured", "configuration": {"fields": [["a", "int8"]]}}),
         struct(("a", "int8"))),
    ]
    for one, other in spellings:
        assert one == other and hash(one) == hash(other)
    assert dt64("us", 2) != td64("us", 2)
    assert FixedLengthUTF32Type(4) != FixedLengthUTF32Type(8)
    assert len({parse_data_type("string"), parse_data_type({"name": "string"})}) == 1
