"""The core data types (numeric.py) and their fill values, checked against numpy bit
patterns and the spec's examples; equality and hashing of every type by its JSON."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.errors import MetadataError, UnsupportedExtensionError
from kvzarr.metadata.dtypes import data_type_from_numpy, parse_data_type
from kvzarr.metadata.dtypes.strings import FixedLengthUTF32Type

from .dtype_helpers import (HSET, bad_data_type, bad_fill, bits_of, dt64, float_bits, raw,
                            struct, td64, through_json)

zarr = pytest.importorskip("zarr")


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
