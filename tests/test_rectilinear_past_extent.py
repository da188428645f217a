"""Rectilinear chunk edges that pass the array's extent, given at creation
(zarr-extensions ``chunk-grids/rectilinear``: the edges of a dimension must sum to at least
its length; the last edge may overhang it and whole cells may lie past it).

Promises checked here: ``create_array`` accepts such edges and keeps them in the metadata;
only the cells that overlap the array are ever addressed (so their keys are the only ones
stored), each at its full edge size, padded with the fill value; reads, writes, resizes
and sharded grids work on them as numpy says; edges that fall short are still refused,
and the refusal leaves the store as it was.
"""

import json

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import MetadataError


@pytest.fixture(params=["memory", "filesystem"])
def store(request, tmp_path):
    if request.param == "memory":
        return kvzarr.MemoryStore()
    return kvzarr.FilesystemStore(tmp_path / "data.zarr")


def _grid(store, name="a"):
    return json.loads(store.get(f"{name}/zarr.json"))["chunk_grid"]


def _chunk_keys(store, name="a"):
    return sorted(k[len(name) + 1:] for k in store.list() if k.startswith(f"{name}/c"))


def test_create_array_accepts_rectilinear_edges_past_the_extent(store):
    """Issue 15 item 7: ``chunks=[[4, 4, 4]]`` for shape ``(6,)`` was refused ("sum to
    12, not to the extent 6") although the rectilinear grid allows it and kvzarr read it."""
    a = kvzarr.create_array(store, name="a", shape=(6,), chunks=[[4, 4, 4]], dtype="uint8",
                            fill_value=9, compressors=None)
    assert _grid(store) == {"name": "rectilinear",
                            "configuration": {"kind": "inline", "chunk_shapes": [[[4, 3]]]}}
    assert a.write_chunk_sizes == ((4, 2),) and a.cdata_shape == (2,)
    a[...] = np.arange(6, dtype=np.uint8)
    # cell 2 ([8, 12)) lies wholly outside: never stored; cell 1 is padded with the fill
    assert _chunk_keys(store) == ["c/0", "c/1"]
    assert store.get("a/c/1") == bytes([4, 5, 9, 9])
    again = kvzarr.open_array(store, path="a", mode="r")
    np.testing.assert_array_equal(again[...], np.arange(6))
    np.testing.assert_array_equal(again[1:6:2], [1, 3, 5])


def test_spec_example_overflowing_last_edge_at_creation(store):
    """The rectilinear README's overflowing example (edges ``[5, 5, 5, 2]``, length 16):
    chunk 3 is stored at its full edge of 2 elements, one of them valid."""
    a = kvzarr.create_array(store, name="a", shape=(16,), chunks=[[5, 5, 5, 2]],
                            dtype="uint8", compressors=None)
    assert _grid(store)["configuration"]["chunk_shapes"] == [[[5, 3], 2]]
    a[...] = np.arange(1, 17, dtype=np.uint8)
    assert store.get("a/c/3") == bytes([16, 0])
    np.testing.assert_array_equal(a[14:], [15, 16])


def test_edges_past_the_extent_in_several_dimensions(store):
    shape = (7, 5)
    a = kvzarr.create_array(store, name="a", shape=shape, chunks=[[3, 3, 3], [2, 4, 4]],
                            dtype="int16", fill_value=-1)
    assert _grid(store)["configuration"]["chunk_shapes"] == [[[3, 3]], [2, [4, 2]]]
    ref = np.full(shape, -1, dtype=np.int16)
    a[2:, 1:] = ref[2:, 1:] = np.arange(20, dtype=np.int16).reshape(5, 4)
    np.testing.assert_array_equal(a[...], ref)
    np.testing.assert_array_equal(a.oindex[[6, 0, 3], [4, 1]], ref[np.ix_([6, 0, 3], [4, 1])])
    np.testing.assert_array_equal(a.vindex[[6, 2], [4, 1]], ref[[6, 2], [4, 1]])
    # only cells overlapping [0, 7) x [0, 5): row cells 0..2, column cells 0..1 (column
    # cell 2, [6, 10), is outside); row cell 2 holds row 6 padded to its 3 rows
    assert _chunk_keys(store) == ["c/0/0", "c/0/1", "c/1/0", "c/1/1", "c/2/0", "c/2/1"]
    assert a.write_chunk_sizes == ((3, 3, 1), (2, 3))


def test_resize_keeps_the_edges_and_grows_into_them(store):
    a = kvzarr.create_array(store, name="a", shape=(6,), chunks=[[4, 4, 4]], dtype="int32",
                            fill_value=-5)
    ref = np.arange(6, dtype=np.int32)
    a[...] = ref
    a.resize((11,))     # within the edge sum: the edges stay, cell 2 comes into the array
    assert _grid(store)["configuration"]["chunk_shapes"] == [[[4, 3]]]
    ref = np.concatenate([ref, np.full(5, -5, dtype=np.int32)])
    np.testing.assert_array_equal(a[...], ref)
    a[6:] = ref[6:] = 7
    assert _chunk_keys(store) == ["c/0", "c/1", "c/2"]
    a.resize((14,))     # past the edge sum: one chunk for the gap, as zarr-python 3.3
    assert _grid(store)["configuration"]["chunk_shapes"] == [[[4, 3], 2]]
    ref = np.concatenate([ref, np.full(3, -5, dtype=np.int32)])
    np.testing.assert_array_equal(a[...], ref)
    a.resize((3,))      # cells starting at or past 3 are deleted, the edges stay
    assert _chunk_keys(store) == ["c/0"]
    assert _grid(store)["configuration"]["chunk_shapes"] == [[[4, 3], 2]]
    np.testing.assert_array_equal(kvzarr.open_array(store, path="a")[...], ref[:3])


def test_sharded_grid_with_shards_past_the_extent(store):
    a = kvzarr.create_array(store, name="a", shape=(10,), chunks=(2,), shards=[[4, 8, 8]],
                            dtype="uint16", fill_value=3)
    assert _grid(store) == {"name": "rectilinear", "configuration": {
        "kind": "inline", "chunk_shapes": [[4, [8, 2]]]}}
    ref = np.full(10, 3, dtype=np.uint16)
    a[5:] = ref[5:] = np.arange(100, 105, dtype=np.uint16)
    np.testing.assert_array_equal(a[...], ref)
    assert _chunk_keys(store) == ["c/1"]            # shard 2 ([12, 20)) is outside
    a[:2] = ref[:2] = 0
    np.testing.assert_array_equal(kvzarr.open_array(store, path="a")[...], ref)


def test_zero_extent_with_explicit_edges(store):
    a = kvzarr.create_array(store, name="a", shape=(0, 3), chunks=[[5], [2, 2]],
                            dtype="float32")
    assert a[...].shape == (0, 3) and a.nchunks == 0
    a.resize((4, 3))
    a[...] = 1.5
    np.testing.assert_array_equal(a[...], np.full((4, 3), 1.5, dtype=np.float32))
    assert _chunk_keys(store) == ["c/0/0", "c/0/1"]


@pytest.mark.parametrize("chunks, shards", [
    ([[4, 1]], None),               # 5 < 6
    ([[2, 2], 3], None),            # a second dimension ... the first falls short
    ((2,), [[4]]),                  # shards that fall short
])
def test_edges_that_fall_short_are_still_refused(store, chunks, shards):
    shape = (6,) if len(chunks) == 1 else (6, 3)
    kvzarr.create_group(store)
    before = {k: store.get(k) for k in store.list()}
    with pytest.raises(MetadataError) as info:
        kvzarr.create_array(store, name="a", shape=shape, chunks=chunks, shards=shards,
                            dtype="int8")
    assert info.value.field == "chunks" and "less than the extent 6" in str(info.value)
    assert {k: store.get(k) for k in store.list()} == before
