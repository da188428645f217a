"""Bad input to kvzarr.vectors: every case raises a clear kvzarr.errors exception and
leaves the store exactly as it was (every key and value compared), on a store that
already holds a dataset. Damaged datasets (broken documents, truncated cells, corrupt
fragment indexes and manifests) raise on read instead of answering wrongly."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kvzarr
from kvzarr import errors
from kvzarr.vectors import read_points, write_points

from .test_points_interop import snapshot

POS = np.array([[10, 10, 10], [60, 10, 10], [210, 10, 10], [250, 260, 10]], dtype=float)
GOOD = dict(chunk_shape=(200,) * 3, bin_shape=(50,) * 3)




@pytest.fixture(params=["memory", "lmdb", "sqlite", "zip", "dir"])
def store(request, tmp_path):
    if request.param == "memory":
        st = kvzarr.MemoryStore()
    else:
        suffix = {"lmdb": ".lmdb", "sqlite": ".sqlite", "zip": ".zip", "dir": ".zarr"}
        st = kvzarr.open_store(str(tmp_path / f"x{suffix[request.param]}"))
    write_points(st, POS, object_ids=[0, 1, 1, 2], vertex_attributes={"a": np.arange(4)},
                 **GOOD)
    yield st
    st.close()


BAD_WRITES = {
    "positions 1-D": dict(positions=np.arange(4.0)),
    "positions 3-D": dict(positions=np.zeros((4, 3, 1))),
    "positions of another dimensionality than the dataset": dict(
        positions=np.zeros((4, 2)), chunk_shape=(200, 200), bin_shape=(50, 50)),
    "NaN position": dict(positions=np.array([[0, 0, np.nan]])),
    "infinite position": dict(positions=np.array([[0, 0, np.inf]])),
    "overflowing float32": dict(positions=np.array([[0, 0, 1e300]]), bounds=None),
    "text positions": dict(positions=np.array([["a", "b", "c"]])),
    "bins that do not divide chunks": dict(bin_shape=(60,) * 3),
    "zero bin": dict(bin_shape=(0, 50, 50)),
    "chunk_shape of the wrong length": dict(chunk_shape=(200, 200)),
    "negative chunk": dict(chunk_shape=(-200, 200, 200)),
    "NaN chunk": dict(chunk_shape=(np.nan, 200, 200)),
    "bounds min above max": dict(bounds=([0, 0, 500], [400, 400, 0])),
    "bounds of the wrong length": dict(bounds=([0, 0], [400, 400])),
    "points outside the bounds": dict(bounds=([0, 0, 0], [100, 100, 100])),
    "unknown out_of_bounds policy": dict(out_of_bounds="clip"),
    "object ids of the wrong length": dict(object_ids=[0, 1]),
    "object ids that are not integers": dict(object_ids=[0.5, 1, 2, 3]),
    "group naming an unknown object": dict(object_ids=[0, 1, 1, 2], groups={0: [0, 9]}),
    "negative group id": dict(object_ids=[0, 1, 1, 2], groups={-1: [0]}),
    "object attribute with a row per point, not per object": dict(
        object_ids=[0, 1, 1, 2], object_attributes={"w": np.arange(4.0)}),
    "object attribute of text": dict(object_ids=[0, 1, 1, 2],
                                     object_attributes={"w": np.array(["a", "b", "c"])}),
    "group attributes without groups": dict(object_ids=[0, 1, 1, 2],
                                            group_attributes={"g": np.arange(2.0)}),
    "vertex attribute of the wrong length": dict(vertex_attributes={"a": np.arange(3)}),
    "vertex attribute name with a slash": dict(vertex_attributes={"a/b": np.arange(4)}),
    "2-D categorical attribute": dict(vertex_attributes={"c": np.array([["a"]] * 4)}),
    "unknown compressor": dict(compressor="lzma-please"),
    "zero shard": dict(shard_shape=0),
    "five axes without names": dict(positions=np.zeros((2, 5)), chunk_shape=(1,) * 5,
                                    bin_shape=(1,) * 5),
}


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_bad_write_raises_and_changes_nothing(store, case):
    args = {**GOOD, **BAD_WRITES[case]}
    positions = args.pop("positions", POS)
    before = snapshot(store)
    with pytest.raises(errors.KvzarrError) as info:
        write_points(store, positions, **args)
    assert isinstance(info.value, (errors.VectorDataError, errors.MetadataError,
                                   errors.UnsupportedOperationError))
    assert str(info.value)
    assert snapshot(store) == before


BAD_READS = {
    "bbox corner of the wrong length": dict(bbox=([0, 0], [1, 1])),
    "bbox with NaN": dict(bbox=([0, 0, np.nan], [1, 1, 1])),
    "bbox that is not two corners": dict(bbox=[0, 1, 2]),
    "chunk of the wrong length": dict(chunks=[(0, 0)]),
    "object ids that are text": dict(object_ids=["a"]),
    "unknown attribute": dict(attribute_names=["nope"]),
    "missing level": dict(level=3),
    "negative level": dict(level=-1),
}


@pytest.mark.parametrize("case", sorted(BAD_READS))
def test_bad_read_raises(store, case):
    with pytest.raises(errors.KvzarrError):
        read_points(store, **BAD_READS[case])


def test_not_a_vector_dataset(tmp_path):
    with kvzarr.open_store(str(tmp_path / "a.lmdb")) as st:
        with pytest.raises(errors.NodeNotFoundError):
            read_points(st)
        kvzarr.create_group(st)
        with pytest.raises(errors.MetadataError, match="not a Zarr Vector Format"):
            read_points(st)
        kvzarr.create_array(st, name="arr", shape=(2,), dtype="i4")
        with pytest.raises(errors.NodeTypeError):
            write_points(st, POS, path="arr/inside", **GOOD)


#: case -> (key, damage, which reads must see it: a box query reads no fragment index or
#: manifest of cells it takes whole, so it answers right whatever they hold)
DAMAGE = {
    "broken root JSON": ("zarr.json", b"{not json", "both"),
    "root without bounds": ("zarr.json", None, "both"),
    "truncated vertices cell": ("0/vertices/c/0/0/0", "truncate", "both"),
    "vertices cell not whole rows": ("0/vertices/c/0/0/0", "odd", "both"),
    "vertex cell with two items": ("0/vertices/c/0/0/0", "two", "both"),
    "corrupt fragment index": ("0/vertex_fragments/c/0/0/0", "truncate", "objects"),
    "attribute cell of another row count": ("0/vertex_attributes/a/c/0/0/0", "short",
                                            "both"),
    "manifests that are not zstd": ("0/object_index/manifests/c/0", b"garbage", "objects"),
    "nonempty chunk outside the grid": ("0/vertices/zarr.json", "outside", "both"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_dataset_raises_on_read(store, case):
    key, how, reads = DAMAGE[case]
    old = store.get(key)
    if how is None:
        doc = json.loads(old)
        del doc["attributes"]["zarr_vectors"]["bounds"]
        new = json.dumps(doc).encode()
    elif how == "truncate":
        new = old[:len(old) - 5]
    elif how == "odd":
        new = (1).to_bytes(4, "little") + (len(old) - 9).to_bytes(4, "little") + old[8:-1]
    elif how == "two":
        new = (2).to_bytes(4, "little") + old[4:]
    elif how == "short":
        payload = old[8:-8]
        new = (1).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload
    elif how == "outside":
        doc = json.loads(old)
        doc["attributes"]["nonempty_chunks"].append("9.9.9")
        new = json.dumps(doc).encode()
    else:
        new = how
    store.set(key, new)
    if reads in ("both", "space"):
        with pytest.raises(errors.KvzarrError):
            read_points(store, bbox=([0, 0, 0], [399, 399, 399]), attribute_names=["a"])
    if reads in ("both", "objects"):
        with pytest.raises(errors.KvzarrError):
            read_points(store, object_ids=[0, 1, 2], attribute_names=["a"])
