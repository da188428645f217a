"""zarr.json documents: parsing, validation, must_understand, writing (core spec metadata)."""

import json

import pytest

from kvzarr.errors import MetadataError, UnsupportedExtensionError
from kvzarr.metadata import (ArrayMetadata, GroupMetadata, parse_chunk_key_encoding,
                             parse_node_metadata)


def array_doc(**overrides):
    doc = {
        "zarr_format": 3, "node_type": "array", "shape": [10, 7], "data_type": "int16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 3]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 7,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {"a": [1, 2]}, "dimension_names": ["y", None],
    }
    doc.update(overrides)
    return doc


def test_array_round_trip_in_zarr_python_member_order():
    meta = parse_node_metadata(json.dumps(array_doc()).encode())
    assert isinstance(meta, ArrayMetadata)
    assert meta.shape == (10, 7) and meta.fill_value == 7
    out = meta.to_json()
    assert list(out) == ["shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value",
                         "codecs", "attributes", "dimension_names", "zarr_format", "node_type",
                         "storage_transformers"]
    assert parse_node_metadata(meta.to_bytes()).to_json() == out


def test_shorthand_extension_names_are_read_and_full_objects_written():
    meta = parse_node_metadata(array_doc(
        codecs=["bytes", "crc32c"], data_type={"name": "int16"},
        chunk_key_encoding="default"))
    out = meta.to_json()
    assert out["codecs"][0]["name"] == "bytes" and isinstance(out["codecs"][1], dict)
    assert out["data_type"] == "int16"
    assert out["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}


def test_group_round_trip_keeps_consolidated_metadata():
    doc = {"zarr_format": 3, "node_type": "group", "attributes": {"x": 1},
           "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": {}}}
    meta = parse_node_metadata(doc)
    assert isinstance(meta, GroupMetadata)
    assert meta.to_json() == {"attributes": {"x": 1}, "zarr_format": 3,
                              "consolidated_metadata": doc["consolidated_metadata"],
                              "node_type": "group"}


def test_unknown_member_must_understand_false_is_kept():
    doc = array_doc(my_ext={"must_understand": False, "x": 1})
    meta = parse_node_metadata(doc)
    assert meta.to_json()["my_ext"] == {"must_understand": False, "x": 1}


@pytest.mark.parametrize("member", [{"x": 1}, {"must_understand": True}, 5])
def test_unknown_required_member_is_an_error(member):
    with pytest.raises(UnsupportedExtensionError) as info:
        parse_node_metadata(array_doc(my_ext=member))
    assert info.value.field == "my_ext"


def test_unknown_codec_and_dtype_and_transformer():
    with pytest.raises(UnsupportedExtensionError):
        parse_node_metadata(array_doc(codecs=[{"name": "bytes"}, {"name": "no-such-codec"}]))
    # an ignorable unknown codec is skipped
    meta = parse_node_metadata(array_doc(codecs=[
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "no-such-codec", "must_understand": False}]))
    assert [c.name for c in meta.codecs] == ["bytes"]
    with pytest.raises(UnsupportedExtensionError):
        parse_node_metadata(array_doc(data_type="float8_e9m9"))
    with pytest.raises(UnsupportedExtensionError):
        parse_node_metadata(array_doc(storage_transformers=[{"name": "concat-parts"}]))
    meta = parse_node_metadata(array_doc(storage_transformers=[
        {"name": "concat-parts", "must_understand": False}]))
    assert meta.storage_transformers[0]["name"] == "concat-parts"


@pytest.mark.parametrize("data", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
def test_broken_json(data):
    with pytest.raises(MetadataError):
        parse_node_metadata(data, path="/x")


@pytest.mark.parametrize("field,value", [
    ("zarr_format", 2), ("node_type", "table"), ("shape", [3, -1]), ("shape", "3"),
    ("shape", [True]), ("fill_value", "seven"), ("fill_value", 1 << 20), ("fill_value", None),
    ("attributes", []), ("dimension_names", ["y"]), ("dimension_names", [1, 2]),
    ("codecs", {"name": "bytes"}), ("codecs", []), ("data_type", 5),
    ("chunk_grid", {"name": "regular", "configuration": {"chunk_shape": [4]}}),
    ("chunk_key_encoding", {"name": "default", "configuration": {"separator": "-"}}),
    ("chunk_key_encoding", {"name": "default", "must_understand": False}),
])
def test_wrong_field_values(field, value):
    with pytest.raises(MetadataError):
        parse_node_metadata(array_doc(**{field: value}))


def test_missing_required_member_names_the_field():
    doc = array_doc()
    del doc["chunk_grid"]
    with pytest.raises(MetadataError) as info:
        parse_node_metadata(doc)
    assert info.value.field == "chunk_grid"


def test_chunk_key_encodings():
    default = parse_chunk_key_encoding({"name": "default"})
    assert default.encode((1, 23, 45)) == "c/1/23/45" and default.encode(()) == "c"
    dot = parse_chunk_key_encoding({"name": "default", "configuration": {"separator": "."}})
    assert dot.encode((1, 23)) == "c.1.23"
    v2 = parse_chunk_key_encoding({"name": "v2"})
    assert v2.encode((1, 23, 45)) == "1.23.45" and v2.encode(()) == "0"
    v2slash = parse_chunk_key_encoding({"name": "v2", "configuration": {"separator": "/"}})
    assert v2slash.encode((1, 2)) == "1/2"
    for enc in (default, dot, v2, v2slash):
        assert enc.decode(enc.encode((3, 0, 12)), 3) == (3, 0, 12)
        assert enc.decode(enc.encode(()), 0) == ()
        assert enc.decode("zarr.json", 3) is None
    with pytest.raises(UnsupportedExtensionError):
        parse_chunk_key_encoding({"name": "fanout"})
