"""The struct type and the legacy structured spelling (structs.py): packed layout, fill
values of any bits, against what zarr-python 3.1.6 writes and reads."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvzarr.errors import MetadataError, UnsupportedExtensionError
from kvzarr.metadata.dtypes import data_type_from_numpy, parse_data_type
from kvzarr.metadata.dtypes.structs import StructType

from .dtype_helpers import (HSET, bad_data_type, bad_fill, bits_of, float_bits, raw, struct,
                            through_json, zp_metadata)

zarr = pytest.importorskip("zarr")


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
