"""The string, bytes, fixed-length UTF-32 and null-terminated bytes extension types
(strings.py) and their fill values, against what zarr-python 3.1.6 writes and reads."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvzarr.errors import MetadataError, UnsupportedExtensionError
from kvzarr.metadata.dtypes import data_type_from_numpy, parse_data_type
from kvzarr.metadata.dtypes.strings import (BytesType, FixedLengthUTF32Type,
                                            NullTerminatedBytesType, StringType)

from .dtype_helpers import (HSET, SD, bad_data_type, bad_fill, raw, through_json,
                            zp_metadata, zp_open_with)

zarr = pytest.importorskip("zarr")


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
    assert data_type_from_numpy("S") == b  # unsized, as zarr-python maps it
    assert data_type_from_numpy("S3") != b  # sized S is null_terminated_bytes
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
# null_terminated_bytes
# ======================================================================================

def _ntb(length_bytes):
    return parse_data_type({"name": "null_terminated_bytes",
                            "configuration": {"length_bytes": length_bytes}})


def test_null_terminated_bytes_forms():
    doc = {"name": "null_terminated_bytes", "configuration": {"length_bytes": 5}}
    t = parse_data_type(doc)
    assert isinstance(t, NullTerminatedBytesType) and t == NullTerminatedBytesType(5)
    assert t.to_json() == doc
    assert t.numpy_dtype == np.dtype("S5") and t.itemsize == 5 and t.length_bytes == 5
    assert not t.has_endianness and not t.is_variable_length
    for spelling in ("S5", "|S5", np.dtype("S5"), np.bytes_(b"abcde").dtype):
        assert data_type_from_numpy(spelling) == t
    assert data_type_from_numpy("S1") == _ntb(1)


@pytest.mark.parametrize("length", [0, -1, "5", True, 5.0, 2**31, None, [5]])
def test_null_terminated_bytes_bad_length_names_the_field(length):
    bad_data_type({"name": "null_terminated_bytes", "configuration": {"length_bytes": length}})


def test_null_terminated_bytes_bad_configuration_names_the_field():
    bad_data_type({"name": "null_terminated_bytes"})
    bad_data_type({"name": "null_terminated_bytes", "configuration": {}})
    bad_data_type({"name": "null_terminated_bytes",
                   "configuration": {"length_bytes": 3, "endian": "little"}})
    with pytest.raises(MetadataError) as info:
        NullTerminatedBytesType(0)
    assert info.value.field == "data_type"


def test_null_terminated_bytes_fill_forms():
    t = _ntb(4)
    assert t.default_fill() == b"" and t.coerce_fill(None) == b""
    assert t.fill_to_json(t.default_fill()) == ""
    assert t.fill_from_json("") == b""
    assert t.fill_from_json("YWI=") == b"ab"
    assert t.fill_to_json(np.bytes_(b"ab")) == "YWI="
    assert t.fill_from_json("AAA=") == b""                      # NULs only: padding
    assert t.fill_from_json("YQBiAA==") == b"a\x00b"          # inner NUL kept
    assert t.fill_from_json("/wAB/w==") == b"\xff\x00\x01\xff"  # exactly 4 bytes
    assert t.fill_from_json("YWJjZAAAAA==") == b"abcd"          # trailing NULs beyond
    assert isinstance(t.fill_from_json("YWI="), np.bytes_)
    assert t.fill_to_json(b"ab\x00\x00") == "YWI="              # written without padding


def test_null_terminated_bytes_coerce_fill():
    t = _ntb(3)
    assert t.coerce_fill(b"ab") == b"ab" and isinstance(t.coerce_fill(b"ab"), np.bytes_)
    assert t.coerce_fill(bytearray(b"\x01")) == b"\x01"
    assert t.coerce_fill(np.bytes_(b"xyz")) == b"xyz"
    assert t.coerce_fill("ab") == b"ab"          # str as ASCII, as numpy casts it
    assert t.coerce_fill(7) == b"7" == np.array(7, dtype="S3")[()]   # numpy's cast
    assert t.coerce_fill(np.int16(-12)) == b"-12"
    assert t.coerce_fill(b"a\x00\x00\x00\x00") == b"a"  # NUL padding past the end is no data
    for value in [b"abcd", "abcd", "é", 1234, True, 1.5, [97], {"a": 1}]:
        with pytest.raises(MetadataError) as info:
            t.coerce_fill(value)
        assert info.value.field == "fill_value"


@pytest.mark.parametrize("value", [
    "YWJjZA==",      # b"abcd": longer than length_bytes (zarr-python truncates silently)
    "YW I=",         # a stray character (zarr-python drops it; not base64)
    "YWI",           # missing padding
    "!!!!", "éé", 0, 1, [97, 98], None, True, {"a": 1}])
def test_null_terminated_bytes_bad_fill_names_the_field(value):
    bad_fill(_ntb(3), value)


@HSET
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.binary(max_size=n))))
def test_null_terminated_bytes_fill_round_trip(case):
    n, blob = case
    t = NullTerminatedBytesType(n)
    value = t.coerce_fill(blob)
    assert value == np.array(blob, dtype=f"S{n}")[()]        # numpy's own reading
    assert raw(t, through_json(t, value)) == raw(t, blob)
    assert raw(t, t.fill_from_json(t.fill_to_json(blob))) == raw(t, blob)


def test_null_terminated_bytes_is_fill():
    t = _ntb(3)
    assert t.is_fill(np.array([b"ab", b"ab"], dtype="S3"), np.bytes_(b"ab"))
    assert t.is_fill(np.array([b"ab\x00", b"ab"], dtype="S3"), np.bytes_(b"ab"))
    assert not t.is_fill(np.array([b"ab", b"abc"], dtype="S3"), np.bytes_(b"ab"))
    assert not t.is_fill(np.array([b"ab", b"a\x00b"], dtype="S3"), np.bytes_(b"ab"))
    assert t.is_fill(np.zeros((2, 0), dtype="S3"), np.bytes_(b"x"))
    assert t.is_fill(np.zeros((2, 2), dtype="S3"), np.bytes_(b""))
    assert t.chunk_is_fill(np.full((3, 3), b"\xff", dtype="S3"), np.bytes_(b"\xff"))


def test_null_terminated_bytes_matches_zarr_python(tmp_path):
    doc = zp_metadata(tmp_path, "S3", fill_value=b"ab")
    t = data_type_from_numpy("S3")
    assert doc["data_type"] == t.to_json()
    assert doc["fill_value"] == t.fill_to_json(t.coerce_fill(b"ab")) == "YWI="
    assert doc["codecs"] == [{"name": "bytes"}]
    assert t.fill_from_json(doc["fill_value"]) == b"ab"
    arr = zp_open_with(tmp_path, t.to_json(), t.fill_to_json(np.bytes_(b"\x00\xffz")),
                       [{"name": "bytes"}])
    assert arr.dtype == t.numpy_dtype and arr.fill_value == b"\x00\xffz"
    assert arr[:].tobytes() == b"\x00\xffz" * 2
