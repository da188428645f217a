"""Zarr v2 hierarchies through kvzarr's nodes, on every backend: zarr-python 3 writes
them (``zarr_format=2``) through ``kvzarr.ZarrStore``; kvzarr detects the format, reads
them, writes into them in their own form (zarr-python still reads them, and no
``zarr.json`` ever appears), creates v2 nodes as zarr-python does, and refuses what would
mix the formats."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

import kvzarr  # noqa: E402
from kvzarr.errors import MetadataError, NodeNotFoundError  # noqa: E402

from .conftest import keys_of, kv_store, write_v2_hierarchy  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")   # zarr's v2 notices


def test_kvzarr_detects_and_reads_a_v2_hierarchy(target) -> None:
    data = write_v2_hierarchy(target)
    with kvzarr.open_group(target, mode="r") as root:
        assert root.metadata.zarr_format == 2
        assert dict(root.attrs) == {"title": "v2"}
        assert sorted(root.array_keys()) == ["flags", "plain"]
        assert list(root.group_keys()) == ["sub"]
        for path, expected in data.items():
            a = root[path]
            assert a.metadata.zarr_format == 2
            # (values in the machine's byte order, as for v3 arrays)
            assert a.dtype == expected.dtype.newbyteorder("=") and a.shape == expected.shape
            np.testing.assert_array_equal(a[...], expected)
        assert root["plain"].attrs["units"] == "m"
        np.testing.assert_array_equal(root["plain"][1:5:2, [0, 9]],
                                      data["plain"][1:5:2][:, [0, 9]])
        assert kvzarr.open_array(target, path="sub/nested_keys", mode="r").shape == (2, 3, 4)


def test_writes_into_v2_keep_its_form_and_zarr_python_reads_them(target) -> None:
    data = write_v2_hierarchy(target)
    a = kvzarr.open_array(target, path="plain")
    a[2:5, 3:9] = 7
    a.attrs["units"] = "km"
    a.resize((8, 10))
    a.close()
    g = kvzarr.open_group(target, path="sub")
    g.attrs.update(level=2)
    g.close()
    expected = np.full((8, 10), -1, dtype="<i4")
    expected[:6] = data["plain"]
    expected[2:5, 3:9] = 7
    assert not any(k.endswith("zarr.json") for k in keys_of(target))
    zs = kvzarr.ZarrStore(target, read_only=True)
    got = zarr.open_array(zs, path="plain", zarr_format=2, mode="r")
    np.testing.assert_array_equal(got[...], expected)
    assert got.attrs["units"] == "km"
    assert dict(zarr.open_group(zs, path="sub", zarr_format=2, mode="r").attrs) == {"level": 2}
    zs.close()


def test_opening_a_v2_store_for_writing_adds_nothing(target) -> None:
    write_v2_hierarchy(target)
    st = kv_store(target)
    before = {k: st.get(k) for k in st.list()}
    if st is not target:
        st.close()
    for node in (kvzarr.open(target, mode="a"), kvzarr.open_group(target, mode="a"),
                 kvzarr.open_array(target, path="flags", mode="a")):
        node.close()
    st = kv_store(target)
    assert {k: st.get(k) for k in st.list()} == before
    if st is not target:
        st.close()


def test_new_nodes_in_a_v2_group_are_v2_and_zarr_python_reads_them(target) -> None:
    write_v2_hierarchy(target)
    with kvzarr.open_group(target) as root:
        made = root.create_array("made", shape=(7,), chunks=(3,), dtype="<f4",
                                 fill_value=0)
        made[...] = np.arange(7, dtype="<f4")
        assert made.metadata.zarr_format == 2
        assert root.create_group("deeper/still").metadata.zarr_format == 2
    top = kvzarr.create_array(target, name="sub/top", shape=(4,), dtype="int16")
    assert top.metadata.zarr_format == 2
    top.close()
    assert not any(k.endswith("zarr.json") for k in keys_of(target))
    zs = kvzarr.ZarrStore(target, read_only=True)
    np.testing.assert_array_equal(zarr.open_array(zs, path="made", mode="r")[...],
                                  np.arange(7, dtype="<f4"))
    assert isinstance(zarr.open_group(zs, path="deeper/still", mode="r"), zarr.Group)
    zs.close()


def test_kvzarr_creates_v2_as_zarr_python_does(tmp_path: Path) -> None:
    """Same arguments, same .zarray and .zgroup documents (compared as JSON)."""
    import json
    ours, theirs = kvzarr.MemoryStore(), kvzarr.MemoryStore()
    kvzarr.create_array(ours, name="g/a", shape=(10, 10), chunks=(5, 5), dtype="<i8",
                        fill_value=3, zarr_format=2)
    zarr.create_array(kvzarr.ZarrStore(theirs), name="g/a", shape=(10, 10), chunks=(5, 5),
                      dtype="<i8", fill_value=3, zarr_format=2)
    for key in ("g/a/.zarray", "g/.zgroup", ".zgroup"):
        assert json.loads(ours.get(key)) == json.loads(theirs.get(key)), key


def test_a_zarr_json_beside_v2_documents_wins_unless_v2_is_asked_for(tmp_path: Path
                                                                       ) -> None:
    """As zarr-python 3 reads such a node (one read to open a v3 node); v2 and v1
    documents at one path are refused."""
    store = kvzarr.MemoryStore()
    zarr.create_array(kvzarr.ZarrStore(store), name="x", shape=(3,), dtype="i4",
                      zarr_format=2, fill_value=0)[...] = [1, 2, 3]
    zarr.create_array(kvzarr.ZarrStore(store), name="y", shape=(2,), dtype="i4",
                      fill_value=0)[...] = [4, 5]
    store.set("x/zarr.json", store.get("y/zarr.json"))     # a stale or foreign v3 document
    assert kvzarr.open_array(store, path="x").shape == (2,)
    assert kvzarr.open_array(store, path="x", zarr_format=2)[...].tolist() == [1, 2, 3]
    with pytest.raises(NodeNotFoundError):
        kvzarr.open_array(store, path="y", zarr_format=2)
    report = kvzarr.migrate_v3(store, path="x")            # the v2 documents are the truth
    assert "replaced" in str(report)
    assert kvzarr.open_array(store, path="x")[...].tolist() == [1, 2, 3]
    store.set("y/meta", b'{"zarr_format": 1}')
    store.set("y/.zarray", b"{}")                            # never parsed: refused first
    store.erase("y/zarr.json")
    with pytest.raises(MetadataError) as err:
        kvzarr.open_array(store, path="y")
    assert ".zarray" in str(err.value) and "meta" in str(err.value)


def test_a_node_of_the_other_format_is_refused_inside_a_group_and_nothing_written(
        tmp_path: Path) -> None:
    store = kvzarr.MemoryStore()
    kvzarr.create_group(store, zarr_format=2).create_group("g")
    before = {k: store.get(k) for k in store.list()}
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="g/v3", shape=(2,), dtype="i1", zarr_format=3)
    with pytest.raises(MetadataError):
        kvzarr.create_group(store, path="g/h/v3", zarr_format=3)
    assert {k: store.get(k) for k in store.list()} == before


def test_v2_nodes_pickle_and_reopen_as_v2(tmp_path: Path) -> None:
    path = str(tmp_path / "x.sqlite")
    write_v2_hierarchy(path)
    a = kvzarr.open_array(path, path="plain", mode="r")
    b = pickle.loads(pickle.dumps(a))
    assert b.metadata.zarr_format == 2
    np.testing.assert_array_equal(b[...], a[...])
    a.close()


def test_moving_v2_nodes_keeps_them_v2_and_zmetadata_true(target) -> None:
    data = write_v2_hierarchy(target)
    kvzarr.consolidate_metadata(target)
    with kvzarr.open_group(target) as root:
        root.move("sub", "moved/here")
        root.move("plain", "moved/plain")
    assert not any(k.endswith("zarr.json") for k in keys_of(target))
    zs = kvzarr.ZarrStore(target, read_only=True)
    group = zarr.open_group(zs, use_consolidated=True, zarr_format=2, mode="r")
    assert sorted(group.array_keys()) == ["flags"]
    np.testing.assert_array_equal(group["moved/here/big_endian_f"][...],
                                  data["sub/big_endian_f"])
    np.testing.assert_array_equal(group["moved/plain"][...], data["plain"])
    zs.close()


def test_copying_a_v2_node_gives_it_v2_ancestors(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "v2.sqlite"), str(tmp_path / "copy.lmdb")
    data = write_v2_hierarchy(src)
    report = kvzarr.copy_store(src, dst, path="sub/nested_keys")
    assert report.nodes == 3          # the array and the two groups above it
    assert not any(k.endswith("zarr.json") for k in keys_of(dst))
    with kvzarr.open_group(dst, mode="r") as root:
        assert root.metadata.zarr_format == 2 and dict(root.attrs) == {"title": "v2"}
        np.testing.assert_array_equal(root["sub/nested_keys"][...], data["sub/nested_keys"])
    with pytest.raises(MetadataError):      # a v2 node does not go into a v3 hierarchy
        v3 = str(tmp_path / "v3.sqlite")
        kvzarr.create_group(v3, path="sub").close()
        kvzarr.copy_store(src, v3, path="sub/nested_keys")


def test_broken_v2_documents_in_a_store_name_the_document(tmp_path: Path) -> None:
    where = str(tmp_path / "x.sqlite")
    write_v2_hierarchy(where)
    st = kvzarr.open_store(where)
    st.set("plain/.zarray", b"{not json")
    st.set("sub/.zgroup", b'{"zarr_format": 2, "surprise": true}')
    st.close()
    with pytest.raises(MetadataError) as err:
        kvzarr.open_array(where, path="plain", mode="r")
    assert err.value.path == "plain/.zarray"
    with pytest.raises(MetadataError) as err:
        kvzarr.open_group(where, path="sub", mode="r")
    assert err.value.path == "sub/.zgroup" and err.value.field == "surprise"
    with pytest.raises(MetadataError):       # and a migration refuses, changing nothing
        kvzarr.migrate_v3(where)


def test_v2_creation_refuses_what_v2_cannot_hold_before_writing(tmp_path: Path) -> None:
    where = str(tmp_path / "x.sqlite")
    for bad in ({"shards": (4,)}, {"dimension_names": ["x"]},
                {"chunk_key_encoding": {"name": "default"}},
                {"compressors": [numcodecs.Zlib(), numcodecs.BZ2()]}):
        with pytest.raises(MetadataError):
            kvzarr.create_array(where, name="a", shape=(8,), chunks=(4,), dtype="i4",
                                zarr_format=2, **bad)
    assert not Path(where).exists()


def test_a_v2_array_created_without_a_fill_value_gets_zarr_pythons_default() -> None:
    import json
    ours, theirs = kvzarr.MemoryStore(), kvzarr.MemoryStore()
    for dtype in ("<f8", "<i2", "bool"):
        kvzarr.create_array(ours, name=dtype, shape=(4,), dtype=dtype, zarr_format=2)
        zarr.create_array(kvzarr.ZarrStore(theirs), name=dtype, shape=(4,), dtype=dtype,
                          zarr_format=2)
        mine = json.loads(ours.get(f"{dtype}/.zarray"))
        assert mine["fill_value"] == json.loads(theirs.get(f"{dtype}/.zarray"))["fill_value"]
        assert mine["fill_value"] is not None
