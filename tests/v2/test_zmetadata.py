"""v2 consolidated metadata (``.zmetadata``) stays true through kvzarr's changes: what
zarr-python and xarray read from it after kvzarr created, resized, changed or deleted
v2 nodes is what the store holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")

import kvzarr  # noqa: E402
from kvzarr.stores import open_store  # noqa: E402

from .conftest import write_v2_hierarchy  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def consolidated_entries(where) -> dict:
    st = open_store(where)
    try:
        return json.loads(st.get(".zmetadata"))["metadata"]
    finally:
        st.close()


def test_every_kind_of_change_keeps_zmetadata_true(target) -> None:
    write_v2_hierarchy(target)
    zs = kvzarr.ZarrStore(target)
    zarr.consolidate_metadata(zs)
    zs.close()
    with kvzarr.open_group(target) as root:
        root["plain"].resize((9, 10))
        root["plain"].attrs["units"] = "cm"
        root.attrs["title"] = "changed"
        root.create_array("fresh", shape=(3,), dtype="<i2", fill_value=0)
        root.create_group("more/groups")
        del root["sub"]
    zs = kvzarr.ZarrStore(target, read_only=True)
    group = zarr.open_group(zs, use_consolidated=True, zarr_format=2, mode="r")
    assert sorted(group.array_keys()) == ["flags", "fresh", "plain"]
    assert sorted(group.group_keys()) == ["more"]
    assert group["plain"].shape == (9, 10) and group["plain"].attrs["units"] == "cm"
    assert group.attrs["title"] == "changed"
    zs.close()
    # the consolidated copy is the documents themselves, entry for entry
    st = target if isinstance(target, kvzarr.Store) else open_store(target)
    entries = json.loads(st.get(".zmetadata"))["metadata"]
    for key, value in entries.items():
        assert json.loads(st.get(key)) == value, key
    documents = [k for k in st.list() if k.rpartition("/")[2] in (".zarray", ".zgroup",
                                                                 ".zattrs")]
    assert sorted(entries) == sorted(documents)
    if st is not target:
        st.close()


def test_xarray_sees_a_kvzarr_append_to_its_consolidated_v2_dataset(tmp_path: Path) -> None:
    where = str(tmp_path / "weather.sqlite")
    ds = xr.Dataset({"temp": (("time", "x"), np.arange(12.0).reshape(4, 3))},
                    coords={"time": np.arange(4), "x": np.arange(3)})
    ds.to_zarr(kvzarr.ZarrStore(where), mode="w", zarr_format=2, consolidated=True)
    with kvzarr.open_group(where) as root:
        root["temp"].append(np.full((2, 3), -1.0))
        root["time"].append(np.array([4, 5]))
    got = xr.open_zarr(kvzarr.ZarrStore(where, read_only=True), consolidated=True)
    assert got.sizes["time"] == 6
    np.testing.assert_array_equal(got["temp"].values[4:], -1.0)
    assert consolidated_entries(where)["temp/.zarray"]["shape"] == [6, 3]


def test_a_v2_group_lists_its_members_from_its_zmetadata(tmp_path: Path) -> None:
    from tests.consolidated.conftest import Recording
    base = kvzarr.MemoryStore()
    data = write_v2_hierarchy(base)
    kvzarr.consolidate_metadata(base)          # a v2 group: a .zmetadata, no zarr.json
    assert base.get(".zmetadata") is not None and base.get("zarr.json") is None
    store = Recording(base)
    root = kvzarr.open_group(store, use_consolidated=True, mode="r")
    store.calls.clear()
    described = sorted((name, getattr(node, "shape", None))
                       for name, node in root.members(max_depth=None))
    assert described == sorted([("sub", None)] + [(p, a.shape) for p, a in data.items()])
    assert {op for op, _ in store.calls} == {"get"}, store.calls   # no listing


def test_a_stale_or_broken_zmetadata_is_not_trusted(tmp_path: Path) -> None:
    from kvzarr.errors import InvalidConsolidatedMetadataWarning, MetadataError
    store = kvzarr.MemoryStore()
    write_v2_hierarchy(store)
    kvzarr.consolidate_metadata(store)
    doc = json.loads(store.get(".zmetadata"))
    del doc["metadata"][".zgroup"]                 # its members have no parent now
    store.set(".zmetadata", json.dumps(doc).encode())
    root = kvzarr.open_group(store, mode="r")
    with pytest.warns(InvalidConsolidatedMetadataWarning):
        assert sorted(root.keys()) == ["flags", "plain", "sub"]
    with pytest.raises(MetadataError):
        kvzarr.open_group(store, mode="r", use_consolidated=True)
