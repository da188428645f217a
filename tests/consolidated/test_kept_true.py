"""Every hierarchy change through kvzarr keeps the consolidated metadata of every
consolidating group above it true, on every backend: after each step the stored member
equals the oracle's (``expected_member``), and a failed change leaves the store as it was.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import NodeExistsError, NodeNotFoundError, NodeTypeError
from kvzarr.metadata.v3 import encode_json

from .conftest import Recording, assert_member_true, snapshot, stored_member


def _hierarchy(store):
    root = kvzarr.open_group(store)
    root.create_array("a", shape=(4,), chunks=(2,), dtype="int32", attributes={"k": 1})
    g = root.create_group("g", attributes={"title": "G"})
    g.create_array("b", shape=(2, 3), chunks=(1, 3), dtype="float64")
    return root


def test_every_change_keeps_the_member_true(store_factory):
    store = store_factory.make()
    root = _hierarchy(store)
    root = kvzarr.consolidate_metadata(store)
    assert_member_true(store)
    steps = [
        lambda: root.create_array("c", shape=(3,), dtype="uint8"),
        lambda: root.create_array("deep/x/y", shape=(2,), dtype="int16"),   # makes deep, deep/x
        lambda: root["a"].resize((10,)),
        lambda: root["a"].append(np.arange(3, dtype="int32")),
        lambda: root["g/b"].attrs.__setitem__("units", "K"),
        lambda: root["g"].attrs.update({"more": [1, 2]}),
        lambda: root.attrs.__setitem__("root_attr", True),
        lambda: root.create_array("c", shape=(5, 5), dtype="float32", overwrite=True),
        lambda: root.create_group("g", overwrite=True),                      # drops g/b
        lambda: root.move("deep", "moved/here"),
        lambda: root.require_group("rg"),
        lambda: root.zeros(name="rg/z", shape=(3,), dtype="int8"),
        lambda: root.require_array("rg/z", shape=(3,), dtype="int8"),
        lambda: root["moved/here/x/y"].attrs.put({}),
        lambda: root.__delitem__("moved"),
    ]
    for step in steps:
        step()
        assert_member_true(store)
    assert sorted(root) == ["a", "c", "g", "rg"]
    assert root["a"].shape == (13,)


def test_nested_consolidating_groups_are_both_kept_true(store_factory):
    store = store_factory.make()
    root = _hierarchy(store)
    kvzarr.consolidate_metadata(store, "g")
    kvzarr.consolidate_metadata(store)
    assert stored_member(store, "g") is not None
    root["g"].create_array("sub/q", shape=(1,), dtype="int32")
    root["g/b"].resize((4, 3))
    root["g"].move("sub", "sub2")
    del root["g/b"]
    for path in ("", "g"):
        assert_member_true(store, path)
    assert list(stored_member(store, "g")["metadata"]) == ["sub2", "sub2/q"]


def test_failed_changes_leave_the_store_unchanged(store_factory):
    store = store_factory.make()
    root = _hierarchy(store)
    kvzarr.consolidate_metadata(store)
    before = snapshot(store)
    failures = [
        (NodeExistsError, lambda: root.create_array("a", shape=(1,))),
        (NodeExistsError, lambda: root.move("a", "g")),
        (NodeNotFoundError, lambda: root.move("nothing", "x")),
        (NodeTypeError, lambda: root.move("g", "a/inside")),
        (NodeNotFoundError, lambda: root.__delitem__("nothing")),
        (ValueError, lambda: root.move("g", "g/b/c")),
        (TypeError, lambda: root.require_array("a", shape=(5,), dtype="int32")),
    ]
    for error, change in failures:
        with pytest.raises(error):
            change()
        assert snapshot(store) == before


def test_an_aborted_transaction_takes_the_member_update_with_it(store_factory):
    store = store_factory.make()
    if not store.capabilities.transactional:
        pytest.skip("the store has no transactions")
    root = _hierarchy(store)
    kvzarr.consolidate_metadata(store)
    before = snapshot(store)
    with pytest.raises(RuntimeError):
        with store.transaction():
            root.create_array("new", shape=(2,), dtype="int32")
            root["a"].resize((1,))
            raise RuntimeError("abort")
    assert snapshot(store) == before


def test_a_member_kvzarr_cannot_update_is_removed_not_left_stale():
    store = kvzarr.MemoryStore()
    root = kvzarr.open_group(store)
    root.create_array("a", shape=(2,), dtype="int8")
    doc = json.loads(store.get("zarr.json"))
    doc["consolidated_metadata"] = {"kind": "external", "must_understand": False,
                                    "location": "elsewhere"}
    store.set("zarr.json", json.dumps(doc).encode())
    root.create_array("b", shape=(2,), dtype="int8")
    assert "consolidated_metadata" not in json.loads(store.get("zarr.json"))


def test_chunk_writes_neither_read_nor_write_any_metadata_document():
    store = Recording(kvzarr.MemoryStore())
    root = _hierarchy(store)
    kvzarr.consolidate_metadata(store)
    a, b = root["a"], root["g/b"]
    store.calls.clear()
    a[:] = [1, 2, 3, 4]
    b[1] = 7.5
    b[:, 1:] = 2.0
    touched = [k for _, keys in store.calls for k in ([keys] if isinstance(keys, str) else keys)]
    assert touched and not [k for k in touched if k.endswith("zarr.json")]


def test_changes_inside_one_transaction_are_all_in_the_member(store_factory):
    store = store_factory.make()
    root = kvzarr.open_group(store)
    kvzarr.consolidate_metadata(store)
    with store.transaction():
        for i in range(20):
            root.create_array(f"v{i:02d}", shape=(4,), dtype="int32", attributes={"i": i})
    assert_member_true(store)
    assert len(stored_member(store)["metadata"]) == 20
    # the document joined from remembered entry texts is byte for byte what the plain
    # encoder writes
    data = store.get("zarr.json")
    assert data == encode_json(json.loads(data))
