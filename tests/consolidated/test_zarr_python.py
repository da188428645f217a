"""kvzarr's consolidated metadata against zarr-python 3 over a shared directory: kvzarr
writes the member zarr-python writes (same entries, same key order), reads the one
zarr-python writes, and after kvzarr changes a hierarchy zarr-python opening it with
``use_consolidated=True`` sees the real tree, shapes and attributes."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest

import kvzarr

from .conftest import Recording, assert_member_true

zarr = pytest.importorskip("zarr")
from zarr.storage import LocalStore  # noqa: E402

# zarr-python warns that consolidated metadata is not in the v3 core spec
pytestmark = pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part")


def _member(path):
    return json.loads((path / "zarr.json").read_text())["consolidated_metadata"]


def _zarr_consolidate(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(LocalStore(path))


def _tree(group):
    """(path, kind, shape, dtype, attributes) of every node below a zarr-python group."""
    out = []
    for name, node in group.members(max_depth=None):
        shape = getattr(node, "shape", None)
        dtype = str(node.dtype) if shape is not None else None
        out.append((name, type(node).__name__, shape, dtype, dict(node.attrs)))
    return sorted(out)


def _kvzarr_hierarchy(path):
    root = kvzarr.open_group(str(path), attributes={"title": "root"})
    root.create_array("temp", shape=(6, 4), chunks=(3, 2), dtype="float32",
                      dimension_names=["time", "x"], attributes={"units": "K"})
    root.create_array("B", shape=(3,), dtype="int64", fill_value=-1)
    root.create_array("a", shape=(2,), dtype="uint8")
    g = root.create_group("grp", attributes={"g": [1, 2]})
    g.create_array("inner/v", shape=(5,), chunks=(2,), dtype="int16")
    g.create_group("Äquator")
    root.create_array("s", shape=(4, 4), chunks=(2, 2), shards=(4, 4), dtype="float64")
    return root


def test_kvzarr_writes_the_member_zarr_python_writes(tmp_path):
    _kvzarr_hierarchy(tmp_path / "by_zarr")
    shutil.copytree(tmp_path / "by_zarr", tmp_path / "by_kvzarr")
    _zarr_consolidate(tmp_path / "by_zarr")
    kvzarr.consolidate_metadata(str(tmp_path / "by_kvzarr"))
    theirs, ours = _member(tmp_path / "by_zarr"), _member(tmp_path / "by_kvzarr")
    assert ours == theirs
    assert list(ours["metadata"]) == list(theirs["metadata"])


def test_kvzarr_lists_from_the_member_zarr_python_wrote(tmp_path):
    root = zarr.open_group(LocalStore(tmp_path), mode="w", attributes={"r": 1})
    root.create_array("x", shape=(3,), dtype="int32", attributes={"a": 1})
    root.create_group("g").create_array("y", shape=(2, 2), dtype="float64")
    _zarr_consolidate(tmp_path)
    store = Recording(kvzarr.FilesystemStore(tmp_path))
    group = kvzarr.open_group(store, mode="r")
    store.calls.clear()
    listed = [(n, getattr(m, "shape", None)) for n, m in group.members(max_depth=None)]
    assert listed == [("g", None), ("g/y", (2, 2)), ("x", (3,))]
    assert [op for op, _ in store.calls] == ["get"]


def test_zarr_python_sees_every_kvzarr_change_through_the_member(tmp_path):
    z = zarr.open_group(LocalStore(tmp_path), mode="w")
    z.create_array("t", shape=(4, 3), chunks=(2, 3), dtype="float64", attributes={"u": "s"})
    z.create_group("g").create_array("old", shape=(2,), dtype="int8")
    _zarr_consolidate(tmp_path)

    root = kvzarr.open_group(str(tmp_path))
    root["t"].append(np.ones((3, 3)), axis=0)                 # the shape grows to (7, 3)
    root.create_array("new", shape=(5,), dtype="int32", attributes={"fresh": True})
    root.create_array("made/on/the/way", shape=(1,), dtype="uint8")
    root["g"].attrs["title"] = "G"
    del root["g/old"]
    root.move("made", "moved")
    root["t"].attrs["u"] = "changed"
    assert_member_true(root.store)

    consolidated = zarr.open_group(LocalStore(tmp_path, read_only=True), mode="r",
                                   use_consolidated=True)
    plain = zarr.open_group(LocalStore(tmp_path, read_only=True), mode="r",
                            use_consolidated=False)
    assert _tree(consolidated) == _tree(plain)
    assert consolidated["t"].shape == (7, 3)
    assert consolidated["t"].attrs["u"] == "changed"
    np.testing.assert_array_equal(consolidated["t"][4:], np.ones((3, 3)))
    assert "new" in consolidated and "moved/on/the/way" in consolidated
    assert "made" not in consolidated and "g/old" not in consolidated

    # and what kvzarr kept is what zarr-python writes when it consolidates afresh
    kept = _member(tmp_path)
    _zarr_consolidate(tmp_path)
    assert _member(tmp_path) == kept
