"""The Array/Group API end to end on real stores (memory and filesystem)."""

import json

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import (BoundsCheckError, ChunkNotFoundError, NodeExistsError,
                           NodeNotFoundError, NodeTypeError, ReadOnlyError, ShapeMismatchError)


@pytest.fixture(params=["memory", "filesystem"])
def store(request, tmp_path):
    if request.param == "memory":
        return kvzarr.MemoryStore()
    return kvzarr.FilesystemStore(tmp_path / "data.zarr")


def snapshot(store):
    return {k: store.get(k) for k in store.list()}


def test_write_read_and_chunk_keys(store):
    a = kvzarr.create_array(store, name="a", shape=(10, 7), chunks=(4, 3), dtype="int32",
                            fill_value=-1)
    data = np.arange(70, dtype="int32").reshape(10, 7)
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    keys = sorted(k for k in store.list() if k.startswith("a/c/"))
    assert keys == sorted(f"a/c/{i}/{j}" for i in range(3) for j in range(3))
    assert a.nchunks_initialized == 9 == a.nchunks
    assert a.write_chunk_sizes == ((4, 4, 2), (3, 3, 1))


def test_missing_chunks_read_as_fill_and_can_raise(store):
    a = kvzarr.create_array(store, name="a", shape=(6,), chunks=(2,), dtype="float32",
                            fill_value=float("nan"))
    a[2:4] = 1.5
    out = a[...]
    assert np.isnan(out[[0, 1, 4, 5]]).all() and (out[2:4] == 1.5).all()
    strict = kvzarr.open_array(store, path="a", config={"read_missing_chunks": False})
    with pytest.raises(ChunkNotFoundError) as info:
        strict[0]
    assert info.value.key == "a/c/0"
    assert strict[2] == 1.5


def test_empty_chunks_are_not_stored(store):
    a = kvzarr.create_array(store, name="a", shape=(8,), chunks=(4,), dtype="int8")
    a[:] = 5
    assert a.nchunks_initialized == 2
    a[4:] = 0  # back to the fill value: the chunk is erased
    assert sorted(k for k in store.list() if "/c/" in k) == ["a/c/0"]
    b = kvzarr.create_array(store, name="b", shape=(8,), chunks=(4,), dtype="int8",
                            write_empty_chunks=True)
    b[:] = 0
    assert b.nchunks_initialized == 2


def test_negative_zero_is_not_the_fill_value(store):
    a = kvzarr.create_array(store, name="a", shape=(4,), chunks=(4,), dtype="float64")
    a[:] = -0.0
    assert a.nchunks_initialized == 1
    assert np.signbit(a[...]).all()


def test_boundary_chunk_is_padded_with_fill(store):
    a = kvzarr.create_array(store, name="a", shape=(10,), chunks=(4,), dtype="uint8",
                            fill_value=9, compressors=None)
    a[8:10] = [1, 2]
    assert store.get("a/c/2") == bytes([1, 2, 9, 9])


def test_resize_keeps_straddling_chunk_like_zarr_python(store):
    # zarr-python issue #1017: int16 chunks (4,), data 1..10, resize 10 -> 5 -> 10
    a = kvzarr.create_array(store, name="a", shape=(10,), chunks=(4,), dtype="int16")
    a[:] = np.arange(1, 11)
    a.resize(5)
    assert sorted(k for k in store.list() if "/c/" in k) == ["a/c/0", "a/c/1"]
    a.resize(10)
    np.testing.assert_array_equal(a[:], [1, 2, 3, 4, 5, 6, 7, 8, 0, 0])
    reopened = kvzarr.open_array(store, path="a")
    assert reopened.shape == (10,)


def test_append(store):
    a = kvzarr.create_array(store, name="a", shape=(2, 3), chunks=(2, 2), dtype="int64")
    a[...] = [[1, 2, 3], [4, 5, 6]]
    assert a.append([[7, 8, 9]]) == (3, 3)
    np.testing.assert_array_equal(a[...], [[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    assert a.append(np.array([[0], [0], [1]]), axis=1) == (3, 4)
    with pytest.raises(ShapeMismatchError):
        a.append(np.zeros((1, 2)))
    with pytest.raises(ShapeMismatchError):
        a.append(np.zeros((3, 1)), axis=-1)


def test_rectilinear_array_end_to_end(store):
    a = kvzarr.create_array(store, name="r", shape=(60, 10), chunks=[[10, 20, 30], [4, 6]],
                            dtype="float32")
    doc = json.loads(store.get("r/zarr.json"))
    assert doc["chunk_grid"] == {"name": "rectilinear", "configuration": {
        "kind": "inline", "chunk_shapes": [[10, 20, 30], [4, 6]]}}
    data = np.random.default_rng(1).random((60, 10)).astype("float32")
    a[...] = data
    np.testing.assert_array_equal(a[5:45:3, 3:9], data[5:45:3, 3:9])
    assert a.write_chunk_sizes == ((10, 20, 30), (4, 6))
    with pytest.raises(NotImplementedError):
        a.chunks
    a.resize((70, 10))
    assert kvzarr.open_array(store, path="r").write_chunk_sizes == ((10, 20, 30, 10), (4, 6))
    with pytest.raises(kvzarr.errors.MetadataError):
        kvzarr.create_array(store, name="bad", shape=(25,), chunks=[[10, 10]], dtype="int8")
    regular = kvzarr.create_array(store, name="u", shape=(30,), chunks=[[10, 10, 10]], dtype="i1")
    assert regular.chunks == (10,)


def test_zero_dimensional_array(store):
    a = kvzarr.create_array(store, name="s", shape=(), dtype="float64", fill_value=2.5)
    assert a[()] == 2.5
    a[()] = 7.0
    assert a[...] == 7.0 and isinstance(a[()], np.floating)
    assert store.exists("s/c")


def test_failed_write_leaves_store_unchanged(store):
    a = kvzarr.create_array(store, name="a", shape=(6, 6), chunks=(4, 4), dtype="int32")
    a[...] = 1
    before = snapshot(store)
    with pytest.raises(ShapeMismatchError):
        a[0:5, 0:5] = np.zeros((5, 4))
    with pytest.raises(BoundsCheckError):
        a[7, 0] = 3
    with pytest.raises((ValueError, TypeError)):
        a[0:2, 0:2] = [["x", "y"], ["z", "w"]]
    assert snapshot(store) == before


def test_open_modes_and_errors(store):
    with pytest.raises(NodeNotFoundError):
        kvzarr.open_array(store, mode="r", path="nope")
    a = kvzarr.create_array(store, name="g/a", shape=(3,), dtype="int8")
    with pytest.raises(NodeExistsError):
        kvzarr.create_array(store, name="g/a", shape=(3,), dtype="int8")
    kvzarr.create_array(store, name="g/a", shape=(5,), dtype="int8", overwrite=True)
    assert kvzarr.open_array(store, path="g/a").shape == (5,)
    with pytest.raises(NodeTypeError):
        kvzarr.open_group(store, path="g/a")
    with pytest.raises(NodeTypeError):
        kvzarr.create_array(store, name="g/a/inner", shape=(1,), dtype="int8")
    ro = kvzarr.open_array(store, path="g/a", mode="r")
    with pytest.raises(ReadOnlyError):
        ro[0] = 1
    with pytest.raises(ReadOnlyError):
        ro.attrs["x"] = 1
    assert isinstance(kvzarr.open(store, path="g"), kvzarr.Group)
    assert isinstance(kvzarr.open(store, path="g/a"), kvzarr.Array)
    assert a.name == "/g/a" and a.basename == "a"


def test_group_hierarchy(store):
    root = kvzarr.open_group(store, attributes={"title": "t"})
    g = root.create_group("g1", attributes={"k": 1})
    g.create_array("x", shape=(4,), dtype="uint16")
    g.create_group("h").create_array("y", shape=(2, 2), dtype="float32")
    root.create_array("z", shape=(1,), dtype="bool")
    assert list(root.keys()) == ["g1", "z"]
    assert "g1/h/y" in root and "g1/nope" not in root
    assert isinstance(root["g1/h"], kvzarr.Group) and root["g1/h/y"].shape == (2, 2)
    assert [n for n, _ in root.members(max_depth=None)] == ["g1", "g1/h", "g1/h/y", "g1/x", "z"]
    assert list(g.array_keys()) == ["x"] and list(g.group_keys()) == ["h"]
    assert "y (2, 2) float32" in root.tree()
    with pytest.raises(KeyError):
        root["missing"]
    del root["g1"]
    assert list(root.keys()) == ["z"]
    assert not any(k.startswith("g1/") for k in store.list())
    assert dict(kvzarr.open_group(store).attrs) == {"title": "t"}


def test_attributes_persist_and_validate(store):
    a = kvzarr.create_array(store, name="a", shape=(2,), dtype="int8", attributes={"u": "m"})
    a.attrs["list"] = [1, 2]
    a.attrs.update({"b": True, "c": None})
    del a.attrs["u"]
    again = kvzarr.open_array(store, path="a")
    assert dict(again.attrs) == {"list": [1, 2], "b": True, "c": None}
    before = snapshot(store)
    with pytest.raises(kvzarr.errors.MetadataError):
        a.attrs["bad"] = float("nan")
    with pytest.raises(kvzarr.errors.MetadataError):
        a.attrs["bad"] = object()
    assert snapshot(store) == before


def test_dimension_names_and_info(store):
    a = kvzarr.create_array(store, name="a", shape=(4, 5), chunks=(2, 5), dtype="complex64",
                            dimension_names=["y", "x"])
    assert kvzarr.open_array(store, path="a").dimension_names == ("y", "x")
    text = repr(a.info)
    assert "(2, 5)" in text and "complex64" in text


def test_value_broadcasting_rules(store):
    a = kvzarr.create_array(store, name="a", shape=(2, 5), chunks=(1, 2), dtype="int32")
    a[...] = np.arange(5).reshape(1, 5)  # size-1 axes broadcast
    np.testing.assert_array_equal(a[...], np.tile(np.arange(5), (2, 1)))
    with pytest.raises(ShapeMismatchError):
        a[...] = np.arange(5)  # no prepending of dimensions, as zarr-python


def test_array_as_value_and_selection(store):
    src = kvzarr.create_array(store, name="src", shape=(4,), dtype="int64")
    src[...] = [3, 1, 2, 0]
    dst = kvzarr.create_array(store, name="dst", shape=(4,), dtype="int64")
    dst[...] = src
    np.testing.assert_array_equal(dst[...], [3, 1, 2, 0])
    np.testing.assert_array_equal(dst.oindex[src], [0, 1, 2, 3])


def test_create_array_takes_zarr_pythons_short_chunk_key_encoding_form() -> None:
    """{"name": ..., "separator": ...} as zarr-python's create_array takes it, besides
    the metadata form with a "configuration"."""
    store = kvzarr.MemoryStore()
    kvzarr.create_array(store, name="a", shape=(4, 4), chunks=(2, 2), dtype="i1",
                        chunk_key_encoding={"name": "default", "separator": "."})
    assert json.loads(store.get("a/zarr.json"))["chunk_key_encoding"] == {
        "name": "default", "configuration": {"separator": "."}}
    v2 = kvzarr.MemoryStore()
    kvzarr.create_array(v2, name="b", shape=(4,), chunks=(2,), dtype="i1",
                        zarr_format=2, chunk_key_encoding={"name": "v2", "separator": "/"})
    assert json.loads(v2.get("b/.zarray"))["dimension_separator"] == "/"
