"""Creating and opening many arrays: creates inside one user transaction share its commit
and are visible together; members that repeat between arrays are parsed once, without
ever mixing up documents that differ; a create checks and makes its ancestors; metadata
is compact JSON that other readers take."""

import json
import threading

import numpy as np
import pytest

import kvzarr
from kvzarr.codecs.blosc import BloscCodec
from kvzarr.errors import MetadataError, NodeTypeError
from kvzarr.metadata import parse_node_metadata
from kvzarr.stores.memory import MemoryStore


@pytest.fixture(params=["memory", "lmdb", "sqlite"])
def store(request, tmp_path):
    if request.param == "memory":
        st = MemoryStore()
    elif request.param == "lmdb":
        from kvzarr.stores.lmdb import LMDBStore
        st = LMDBStore(tmp_path / "h.lmdb")
    else:
        from kvzarr.stores.sql import SQLStore
        st = SQLStore(tmp_path / "h.db")
    yield st
    st.close()


def snapshot(store):
    return {k: store.get(k) for k in store.list()}


def test_creates_in_one_transaction_are_visible_together(store):
    root = kvzarr.open_group(store)
    seen_inside = []

    def peek():   # another thread: its own snapshot, outside the transaction
        seen_inside.append([store.get(k) for k in ("g00/zarr.json", "g03/a0039/zarr.json")])

    with store.transaction():
        for i in range(40):
            group = root.require_group(f"g{i % 4:02d}")
            group.create_array(f"a{i:04d}", shape=(16,), chunks=(16,), dtype="int32",
                               attributes={"i": i})
        reader = threading.Thread(target=peek)
        reader.start()
        reader.join()
    assert seen_inside == [[None, None]]
    for i in range(40):
        a = kvzarr.open_array(store, path=f"g{i % 4:02d}/a{i:04d}", mode="r")
        assert a.attrs.asdict() == {"i": i} and a.shape == (16,)
    assert list(root.keys()) == ["g00", "g01", "g02", "g03"]
    assert len(root["g02"]) == 10


def test_a_failed_transaction_creates_nothing(store):
    root = kvzarr.open_group(store)
    root.create_group("g")
    before = snapshot(store)
    with pytest.raises(RuntimeError):
        with store.transaction():
            for i in range(10):
                root["g"].create_array(f"a{i}", shape=(4,), dtype="uint8")
            root.create_group("h/i")
            raise RuntimeError("stop")
    assert snapshot(store) == before


class CountingStore(MemoryStore):
    """A MemoryStore that records the primitive operations run on it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.writes: list[str] = []
        self.commits = 0

    def _get(self, key):
        self.reads.append(key)
        return super()._get(key)

    def _exists(self, key):
        self.reads.append(key)
        return super()._exists(key)

    def _set(self, key, value):
        self.writes.append(key)
        super()._set(key, value)

    def _commit(self, handle):
        self.commits += 1
        super()._commit(handle)


def test_creates_in_a_transaction_commit_once_and_read_only_their_parent():
    store = CountingStore()
    group = kvzarr.open_group(store).create_group("g")
    store.reads.clear(), store.writes.clear()
    store.commits = 0
    with store.transaction():
        for i in range(50):
            group.create_array(f"a{i:02d}", shape=(16,), dtype="int32")
    names = [f"g/a{i:02d}/zarr.json" for i in range(50)]
    assert store.commits == 1
    assert store.writes == names
    # per create: is a node of any Zarr format there already (its zarr.json, .zarray,
    # .zgroup or v1 meta), is the parent a group, and does a group further up hold
    # consolidated metadata (the parent's document, read already, is not read again);
    # nothing else
    others = [n.replace("zarr.json", doc) for n in names for doc in (".zarray", ".zgroup",
                                                                     "meta")]
    assert sorted(store.reads) == sorted(names + others + ["g/zarr.json", "zarr.json"] * 50)


def test_create_makes_missing_ancestors_and_refuses_an_array_ancestor():
    store = MemoryStore()
    kvzarr.create_array(store, name="a/b/c", shape=(2,), dtype="uint8")
    for key in ("zarr.json", "a/zarr.json", "a/b/zarr.json"):
        assert json.loads(store.get(key))["node_type"] == "group"
    before = snapshot(store)
    with pytest.raises(NodeTypeError):
        kvzarr.create_array(store, name="a/b/c/d", shape=(2,), dtype="uint8")
    with pytest.raises(NodeTypeError):
        kvzarr.create_group(store, path="a/b/c/x/y")
    assert snapshot(store) == before

    rooted = MemoryStore()
    kvzarr.create_array(rooted, shape=(2,), dtype="uint8")
    with pytest.raises(NodeTypeError):
        kvzarr.create_array(rooted, name="x", shape=(2,), dtype="uint8")
    assert list(rooted.list()) == ["zarr.json"]


def array_doc(codecs, data_type="int16"):
    return {"zarr_format": 3, "node_type": "array", "shape": [10], "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": codecs, "attributes": {}}


def test_parsed_members_are_shared_but_never_mixed_up():
    little = {"name": "bytes", "configuration": {"endian": "little"}}
    one = parse_node_metadata(array_doc([little, {"name": "gzip", "configuration": {"level": 1}}]))
    again = parse_node_metadata(array_doc([little, {"name": "gzip",
                                                    "configuration": {"level": 1}}]))
    assert again.codecs is one.codecs and again.data_type is one.data_type
    five = parse_node_metadata(array_doc([little, {"name": "gzip", "configuration": {"level": 5}}]))
    assert five.codecs[1].level == 5 and one.codecs[1].level == 1
    # equal in Python (1 == 1.0 == True) but not the same JSON: still rejected every time
    for level in (1.0, True, 1.0):
        with pytest.raises(MetadataError):
            parse_node_metadata(array_doc([little, {"name": "gzip",
                                                    "configuration": {"level": level}}]))
    assert parse_node_metadata(array_doc([little], "uint16")).data_type.name == "uint16"
    assert parse_node_metadata(array_doc([little], "int16")).data_type.name == "int16"


def test_shared_codec_objects_evolve_per_data_type():
    store = MemoryStore()
    blosc = BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")   # typesize from the data
    for name, dtype in (("a", "int16"), ("b", "float64"), ("c", "int16"), ("d", "uint8")):
        kvzarr.create_array(store, name=name, shape=(8,), dtype=dtype, compressors=[blosc])
    docs = {n: json.loads(store.get(f"{n}/zarr.json"))["codecs"] for n in "abcd"}
    assert [docs[n][1]["configuration"]["typesize"] for n in "abcd"] == [2, 8, 2, 1]
    assert docs["a"][0] == {"name": "bytes", "configuration": {"endian": "little"}}
    assert docs["d"][0] == {"name": "bytes"}
    for n, dtype in (("a", "int16"), ("b", "float64"), ("d", "uint8")):
        a = kvzarr.open_array(store, path=n)
        a[...] = np.arange(8)
        np.testing.assert_array_equal(a[...], np.arange(8, dtype=dtype))


def test_an_array_reads_through_its_new_metadata_after_a_change(store):
    # rectilinear: a resize adds a chunk the old grid does not have
    a = kvzarr.create_array(store, name="a", shape=(3,), chunks=[[2, 1]], dtype="int32",
                            fill_value=-1)
    a[...] = [1, 2, 3]
    np.testing.assert_array_equal(a[...], [1, 2, 3])
    a.resize(6)
    assert a.write_chunk_sizes == ((2, 1, 3),)
    np.testing.assert_array_equal(a[...], [1, 2, 3, -1, -1, -1])
    a.attrs["k"] = 1
    a[3:] = [4, 5, 6]
    np.testing.assert_array_equal(a[...], [1, 2, 3, 4, 5, 6])
    assert kvzarr.open_array(store, path="a").attrs.asdict() == {"k": 1}


def test_listing_inside_a_transaction_sees_its_creates(store):
    root = kvzarr.open_group(store)
    root.create_group("old")
    with store.transaction():
        root.create_array("x", shape=(2,), dtype="uint8")
        root.create_group("y")
        assert list(root.keys()) == ["old", "x", "y"]
        assert [n for n, _ in root.members()] == ["old", "x", "y"]
    assert [n for n, _ in root.groups()] == ["old", "y"]


def test_metadata_is_compact_utf8_json_that_zarr_python_reads(tmp_path):
    zarr = pytest.importorskip("zarr")
    store = kvzarr.FilesystemStore(tmp_path / "d")
    kvzarr.create_array(store, name="x", shape=(4,), dtype="float32",
                        attributes={"unit": "°C", "note": "line\nbreak"})
    raw = (tmp_path / "d" / "x" / "zarr.json").read_bytes()
    assert b"\n" not in raw and "°C".encode() in raw
    z = zarr.open_array(zarr.storage.LocalStore(tmp_path / "d"), path="x", mode="r")
    assert dict(z.attrs) == {"unit": "°C", "note": "line\nbreak"} and z.shape == (4,)
