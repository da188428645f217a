"""Bad input through the public API: each kind gets a clear kvzarr.errors exception that
names the key, path or field, and a failed write leaves the store unchanged."""

import json

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import (BoundsCheckError, ChecksumMismatchError, CodecError, InvalidKeyError,
                           KvzarrError, MetadataError, NegativeStepError, NodeNotFoundError,
                           ShapeMismatchError, StoreConfigError, UnsupportedExtensionError,
                           ValueConversionError, ValueOverflowError, ValueTypeError,
                           VindexInvalidSelectionError)
from kvzarr.stores.keys import check_key


def snapshot(store):
    return {k: store.get(k) for k in store.list()}


@pytest.fixture
def store():
    return kvzarr.MemoryStore()


def test_corrupt_metadata_json(store):
    kvzarr.create_array(store, name="a", shape=(4,), dtype="int8")
    store.set("a/zarr.json", b'{"zarr_format": 3, "node_type": "array", ')
    with pytest.raises(MetadataError) as info:
        kvzarr.open_array(store, path="a")
    assert info.value.path == "/a"


def test_wrong_field_type_names_the_field(store):
    a = kvzarr.create_array(store, name="a", shape=(4,), dtype="int8")
    doc = json.loads(store.get("a/zarr.json"))
    doc["fill_value"] = "zero"
    store.set("a/zarr.json", json.dumps(doc).encode())
    with pytest.raises(MetadataError) as info:
        kvzarr.open_array(store, path="a")
    assert info.value.field == "fill_value"
    assert a.shape == (4,)


def test_unknown_required_extension(store):
    kvzarr.create_array(store, name="a", shape=(4,), dtype="int8")
    doc = json.loads(store.get("a/zarr.json"))
    doc["codecs"].append({"name": "fancy-compressor", "configuration": {}})
    store.set("a/zarr.json", json.dumps(doc).encode())
    with pytest.raises(UnsupportedExtensionError):
        kvzarr.open_array(store, path="a")


def test_truncated_chunk_names_its_key(store):
    a = kvzarr.create_array(store, name="a", shape=(8,), chunks=(4,), dtype="int32",
                            compressors=None)
    a[...] = np.arange(8)
    store.set("a/c/1", store.get("a/c/1")[:-3])
    with pytest.raises(CodecError) as info:
        a[...]
    assert info.value.key == "a/c/1"
    np.testing.assert_array_equal(a[:4], np.arange(4))  # other chunks still read


def test_corrupt_compressed_chunk(store):
    a = kvzarr.create_array(store, name="a", shape=(1000,), chunks=(500,), dtype="float64")
    a[...] = np.linspace(0, 1, 1000)
    raw = bytearray(store.get("a/c/0"))
    raw[len(raw) // 2:] = b"\x00" * (len(raw) - len(raw) // 2)
    store.set("a/c/0", bytes(raw))
    with pytest.raises(CodecError) as info:
        a[0:10]
    assert info.value.key == "a/c/0"


def test_checksum_mismatch(store):
    a = kvzarr.create_array(store, name="a", shape=(16,), chunks=(16,), dtype="uint8",
                            compressors=[{"name": "crc32c"}])
    a[...] = np.arange(16)
    raw = bytearray(store.get("a/c/0"))
    raw[3] ^= 0xFF
    store.set("a/c/0", bytes(raw))
    with pytest.raises(ChecksumMismatchError) as info:
        a[...]
    assert info.value.key == "a/c/0"


def test_truncated_shard_and_corrupt_shard_index(store):
    a = kvzarr.create_array(store, name="s", shape=(16, 16), chunks=(4, 4), shards=(8, 8),
                            dtype="uint16", compressors=None)
    a[...] = np.arange(256).reshape(16, 16)
    whole = store.get("s/c/0/0")
    store.set("s/c/0/0", whole[:20])  # shorter than the index
    with pytest.raises(CodecError):
        a[0:2, 0:2]
    index_start = len(whole) - (16 * 4 + 4)
    broken = bytearray(whole)
    broken[index_start] ^= 0x01  # the index crc32c no longer matches
    store.set("s/c/0/0", bytes(broken))
    with pytest.raises(ChecksumMismatchError):
        a[0:2, 0:2]
    np.testing.assert_array_equal(a[8:, 8:], np.arange(256).reshape(16, 16)[8:, 8:])


@pytest.mark.parametrize("selection,error", [
    ((9, 0), BoundsCheckError), ((0, -10), BoundsCheckError), ((slice(None, None, -1),),
                                                               NegativeStepError),
    ((0, 0, 0), IndexError), ((Ellipsis, Ellipsis), IndexError), ((None,), IndexError),
    ((1.5,), IndexError), ((slice(None, None, 0),), ValueError),
])
def test_bad_selections(store, selection, error):
    a = kvzarr.create_array(store, name="a", shape=(4, 5), chunks=(2, 2), dtype="int8")
    with pytest.raises(error):
        a[selection]
    with pytest.raises(error):
        a[selection] = 1


def test_bad_vindex_and_oindex(store):
    a = kvzarr.create_array(store, name="a", shape=(4, 5), chunks=(2, 2), dtype="int8")
    with pytest.raises(VindexInvalidSelectionError):
        a.vindex[0:2, [1, 2]]
    with pytest.raises(BoundsCheckError):
        a.vindex[[0, 4], [1, 2]]
    with pytest.raises(IndexError):
        a.oindex[np.array([True, False]), :]
    with pytest.raises(IndexError):
        a.oindex[np.zeros((2, 2), dtype=int), :]
    with pytest.raises(BoundsCheckError):
        a.blocks[2, 0]


def test_shape_mismatched_values_leave_store_unchanged(store):
    a = kvzarr.create_array(store, name="a", shape=(4, 5), chunks=(2, 2), dtype="int16")
    a[...] = 3
    before = snapshot(store)
    for sel, value in [((slice(0, 3), slice(0, 3)), np.zeros((3, 2))),
                       ((slice(None),), np.zeros(5)),
                       ((0,), np.zeros((2, 5)))]:
        with pytest.raises(ShapeMismatchError):
            a[sel] = value
    with pytest.raises(ShapeMismatchError):
        a.vindex[[0, 1], [0, 1]] = [1, 2, 3]
    with pytest.raises(ShapeMismatchError):
        a.oindex[[0, 1], :] = np.zeros((3, 5))
    assert snapshot(store) == before


@pytest.mark.parametrize("value, error, builtin", [
    ("abc", ValueConversionError, ValueError),
    (float("nan"), ValueConversionError, ValueError),
    (2 ** 40, ValueOverflowError, OverflowError),
    (np.array([1, 2 ** 40, 3], dtype=object), ValueOverflowError, OverflowError),
    ({"a": 1}, ValueTypeError, TypeError),
])
def test_unconvertible_values_leave_store_unchanged(store, value, error, builtin):
    a = kvzarr.create_array(store, name="a", shape=(3,), chunks=(2,), dtype="int32")
    a[...] = 7
    before = snapshot(store)
    with pytest.raises(error) as info:
        a[...] = value
    assert isinstance(info.value, builtin)      # what numpy (and zarr-python) raise
    assert "int32" in str(info.value)
    assert snapshot(store) == before


def test_bad_store_values_urls_and_resizes(store):
    store.set("k", b"v")
    with pytest.raises(ValueTypeError):
        store.set("k", "a str is not bytes")
    with pytest.raises(ValueTypeError):
        store.get_partial_values([("k", (0, 1))])    # a tuple is not a byte request
    with pytest.raises(StoreConfigError, match="scheme 'foo'"):
        kvzarr.open("foo://bar")
    a = kvzarr.create_array(store, name="a", shape=(4,), chunks=(2,), dtype="int8")
    a[...] = 1
    before = snapshot(store)
    for shape in [(-1,), (4, 4)]:
        with pytest.raises(MetadataError):
            a.resize(shape)
    assert snapshot(store) == before and a.shape == (4,)
    with pytest.raises(StoreConfigError, match="mode"):
        kvzarr.open(store, mode="x")
    with pytest.raises(MetadataError, match="needs a shape"):
        kvzarr.create_array(store, name="b", dtype="int8")
    with pytest.raises(ValueTypeError):
        kvzarr.open_array(store, path=b"a")
    assert snapshot(store) == before


def test_invalid_keys_and_paths(store):
    with pytest.raises(InvalidKeyError):
        store.set("a/../b", b"x")
    with pytest.raises(InvalidKeyError):
        store.set("/abs", b"x")
    with pytest.raises(InvalidKeyError):
        store.set("a//b", b"x")
    with pytest.raises(InvalidKeyError):
        store.set("nul\x00", b"x")
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="a/../../etc", shape=(1,), dtype="int8")
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="g/zarr.json", shape=(1,), dtype="int8")
    assert list(store.list()) == []


def test_an_error_about_a_huge_key_quotes_only_its_ends():
    key = "start/" + "x" * 100_000 + "/../end"
    with pytest.raises(InvalidKeyError) as info:
        check_key(key)
    text = str(info.value)
    assert len(text) < 400
    assert "'start/xxx" in text and "/../end'" in text and "100,013 characters" in text
    assert info.value.key == key            # the attribute keeps the whole key
    assert str(InvalidKeyError("bad", key="a/b", field="f")) == "bad (key 'a/b', field 'f')"


def test_missing_node_and_wrong_create_arguments(store):
    with pytest.raises(NodeNotFoundError):
        kvzarr.open_array(store, path="missing", mode="r")
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="a", shape=(4,), chunks=(0,), dtype="int8")
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="a", shape=(4,), chunks=(2, 2), dtype="int8")
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="a", shape=(4,), dtype="int8", fill_value=1000)
    with pytest.raises(UnsupportedExtensionError):
        kvzarr.create_array(store, name="a", shape=(4,), dtype=object)
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="a", shape=(8,), chunks=(3,), shards=(8,), dtype="int8")
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="a", shape=(4,), dtype="int8",
                            compressors=[{"name": "zstd", "configuration": {"level": 99}}])
    assert list(store.list()) == []


@pytest.mark.parametrize("field, value", [
    ("data_type", {"name": "null_terminated_bytes", "configuration": {"length_bytes": 0}}),
    ("data_type", {"name": "null_terminated_bytes", "configuration": {"length_bytes": "3"}}),
    ("data_type", {"name": "null_terminated_bytes", "configuration": {}}),
    ("fill_value", "YWJjZA=="),     # b"abcd" in an S3 array
    ("fill_value", "YW*I="),        # not base64
    ("fill_value", 0)])
def test_null_terminated_bytes_bad_metadata_names_the_field(store, field, value):
    kvzarr.create_array(store, name="a", shape=(4,), chunks=(2,), dtype="S3")
    doc = json.loads(store.get("a/zarr.json"))
    doc[field] = value
    store.set("a/zarr.json", json.dumps(doc).encode())
    with pytest.raises(MetadataError) as info:
        kvzarr.open_array(store, path="a")
    assert info.value.field == field and info.value.path == "/a"


@pytest.mark.parametrize("fill", [b"abcd", "é", 1234, 2.5, [97]])
def test_null_terminated_bytes_bad_fill_creates_nothing(store, fill):
    with pytest.raises(MetadataError) as info:
        kvzarr.create_array(store, name="a", shape=(4,), dtype="S3", fill_value=fill)
    assert info.value.field == "fill_value"
    assert list(store.list()) == []


def test_every_error_is_a_kvzarr_error():
    import inspect
    for name, cls in inspect.getmembers(kvzarr.errors, inspect.isclass):
        if cls.__module__ == "kvzarr.errors":
            # the two roots: every error, and every warning
            root = kvzarr.errors.KvzarrWarning if issubclass(cls, Warning) else KvzarrError
            assert issubclass(cls, root), name
