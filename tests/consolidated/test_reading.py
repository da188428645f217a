"""Opening a group uses its consolidated metadata when it is present and valid: listings
read one document instead of listing the store and reading each child; an absent or
invalid member falls back to the store (with a warning when invalid)."""

from __future__ import annotations

import json

import pytest

import kvzarr
from kvzarr.errors import InvalidConsolidatedMetadataWarning, MetadataError

from .conftest import Recording


def _build(store):
    root = kvzarr.open_group(store, attributes={"title": "t"})
    for i in range(12):
        root.create_array(f"v{i:02d}", shape=(i + 1,), dtype="int32", attributes={"i": i})
    sub = root.create_group("sub", attributes={"s": 1})
    sub.create_array("deep/x", shape=(2, 2), dtype="float32")
    return root


def _described(group):
    return [(name, type(node).__name__, getattr(node, "shape", None),
             str(getattr(node, "dtype", "")), dict(node.attrs))
            for name, node in group.members(max_depth=None)]


def test_listings_of_a_consolidated_group_read_one_document(store_factory):
    store = Recording(store_factory.make())
    plain = _described(_build(store))
    kvzarr.consolidate_metadata(store)
    root = kvzarr.open_group(store)
    store.calls.clear()
    assert _described(root) == plain
    assert list(root) == ["sub"] + [f"v{i:02d}" for i in range(12)]
    assert len(root) == 13
    assert list(root["sub"]) == ["deep"]           # a child group reached through it
    assert list(root["sub"]["deep"].array_keys()) == ["x"]
    root.tree()
    ops = {op for op, _ in store.calls}
    assert ops == {"get"}, store.calls               # no listing, no read per child
    assert len(store.calls) <= 12


def test_use_consolidated_false_lists_the_store():
    store = Recording(kvzarr.MemoryStore())
    _build(store)
    kvzarr.consolidate_metadata(store)
    root = kvzarr.open_group(store, use_consolidated=False)
    store.calls.clear()
    assert len(root) == 13
    assert "list_dir" in {op for op, _ in store.calls}


def test_changes_made_elsewhere_are_not_seen_until_consolidated_again():
    # a tool that does not keep the member (zarr-python creating a node) leaves it stale:
    # the listing follows the member, as zarr-python's does; consolidating repairs it
    store = kvzarr.MemoryStore()
    _build(store)
    kvzarr.consolidate_metadata(store)
    store.set("other/zarr.json", json.dumps(
        {"zarr_format": 3, "node_type": "group", "attributes": {}}).encode())
    assert "other" not in list(kvzarr.open_group(store))
    assert "other" in list(kvzarr.open_group(store, use_consolidated=False))
    kvzarr.consolidate_metadata(store)
    assert "other" in list(kvzarr.open_group(store))


def _with_member(member):
    store = kvzarr.MemoryStore()
    _build(store)
    kvzarr.consolidate_metadata(store)
    doc = json.loads(store.get("zarr.json"))
    doc["consolidated_metadata"] = member(doc["consolidated_metadata"])
    store.set("zarr.json", json.dumps(doc).encode())
    return store


def _entries(change):
    def edit(member):
        change(member["metadata"])
        return member
    return edit


INVALID = {
    "kind": lambda m: {**m, "kind": "external"},
    "must_understand": lambda m: {**m, "must_understand": True},
    "metadata not an object": lambda m: {**m, "metadata": [1]},
    "entry not an object": _entries(lambda e: e.__setitem__("v00", 3)),
    "entry not zarr 3": _entries(lambda e: e["v00"].__setitem__("zarr_format", 2)),
    "entry missing its data type": _entries(lambda e: e["v00"].pop("data_type")),
    "key with ..": _entries(lambda e: e.__setitem__("../v", e["v00"])),
    "key with a leading /": _entries(lambda e: e.__setitem__("/v", e["v00"])),
    "entry without its parent": _entries(lambda e: e.pop("sub")),
    "parent is an array": _entries(lambda e: e.__setitem__("v00/in", e["v01"])),
}


@pytest.mark.parametrize("change", list(INVALID.values()), ids=list(INVALID))
def test_an_invalid_member_falls_back_to_the_store_with_a_warning(change):
    store = _with_member(change)
    want = _described(kvzarr.open_group(store, use_consolidated=False))
    root = kvzarr.open_group(store)
    with pytest.warns(InvalidConsolidatedMetadataWarning):
        assert _described(root) == want
    with pytest.raises(MetadataError):
        kvzarr.open_group(store, use_consolidated=True)


def test_use_consolidated_true_needs_a_member():
    store = kvzarr.MemoryStore()
    _build(store)
    with pytest.raises(MetadataError, match="consolidated"):
        kvzarr.open_group(store, use_consolidated=True)
    kvzarr.consolidate_metadata(store)
    assert len(kvzarr.open_group(store, use_consolidated=True)) == 13
    assert len(kvzarr.open(store, use_consolidated=True)) == 13


def test_an_array_path_or_a_missing_group_cannot_be_consolidated():
    store = kvzarr.MemoryStore()
    _build(store)
    with pytest.raises(kvzarr.errors.NodeTypeError):
        kvzarr.consolidate_metadata(store, "v00")
    with pytest.raises(kvzarr.errors.NodeNotFoundError):
        kvzarr.consolidate_metadata(store, "nothing")
    with pytest.raises(kvzarr.errors.ReadOnlyError):
        kvzarr.consolidate_metadata(kvzarr.MemoryStore(read_only=True))
