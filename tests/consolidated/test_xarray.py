"""xarray opening a store with ``consolidated=True`` after kvzarr changed it sees the real
dataset: the issue's bug was that after kvzarr appended to an xarray-written store with
consolidated metadata, xarray silently showed the old shape and missed the new arrays."""

from __future__ import annotations

import numpy as np
import pytest

import kvzarr

xr = pytest.importorskip("xarray")
pytestmark = pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part")


def _dataset(n: int) -> "xr.Dataset":
    return xr.Dataset(
        {"temp": (("time", "x"), np.arange(n * 3, dtype="float64").reshape(n, 3)),
         "rain": (("time",), np.linspace(0, 1, n))},
        coords={"time": np.arange(n, dtype="int64"), "x": np.array([10, 20, 30])},
        attrs={"title": "demo"})


def test_xarray_sees_the_shape_and_arrays_kvzarr_appended_to_a_consolidated_store(tmp_path):
    path = tmp_path / "d.zarr"
    _dataset(4).to_zarr(path, consolidated=True, zarr_format=3)
    root = kvzarr.open_group(str(path))
    root["temp"].append(np.full((2, 3), -1.0), axis=0)
    root["rain"].append(np.array([5.0, 6.0]))
    root["time"].append(np.array([4, 5]))
    root.create_array("snow", data=np.ones((6, 3)), dimension_names=["time", "x"],
                      attributes={"units": "mm"})

    ds = xr.open_zarr(path, consolidated=True)
    assert ds.sizes["time"] == 6          # the stale member said 4
    assert "snow" in ds.data_vars         # the stale member had no "snow"
    np.testing.assert_array_equal(ds["time"].values, np.arange(6))
    np.testing.assert_array_equal(ds["temp"].values[4:], -1.0)
    np.testing.assert_array_equal(ds["rain"].values[4:], [5.0, 6.0])
    assert ds["snow"].attrs["units"] == "mm"
    xr.testing.assert_identical(ds.load(), xr.open_zarr(path, consolidated=False).load())


def test_xarray_sees_attributes_resizes_and_deletes_kvzarr_made(tmp_path):
    path = tmp_path / "d.zarr"
    _dataset(5).to_zarr(path, consolidated=True, zarr_format=3)
    root = kvzarr.open_group(str(path))
    root.attrs["title"] = "changed"
    root["temp"].attrs["units"] = "K"
    del root["rain"]
    for name in ("temp", "time"):
        shape = root[name].shape
        root[name].resize((3, *shape[1:]))

    ds = xr.open_zarr(path, consolidated=True)
    assert ds.attrs["title"] == "changed"
    assert ds["temp"].attrs["units"] == "K"
    assert "rain" not in ds
    assert ds.sizes["time"] == 3
    xr.testing.assert_identical(ds.load(), xr.open_zarr(path, consolidated=False).load())


def test_xarray_appends_after_kvzarr_changes_keep_both_views_equal(tmp_path):
    # kvzarr keeps the member true, so xarray's own append (which reads it) starts from
    # the real shape too
    path = tmp_path / "d.zarr"
    _dataset(3).to_zarr(path, consolidated=True, zarr_format=3)
    root = kvzarr.open_group(str(path))
    for name in ("temp", "rain", "time"):
        arr = root[name]
        arr.append(np.zeros((1, *arr.shape[1:]), dtype=arr.dtype), axis=0)
    root["time"][3] = 3
    more = _dataset(2).assign_coords(time=[4, 5])
    more.to_zarr(path, append_dim="time", consolidated=True)
    ds = xr.open_zarr(path, consolidated=True)
    np.testing.assert_array_equal(ds["time"].values, np.arange(6))
    xr.testing.assert_identical(ds.load(), xr.open_zarr(path, consolidated=False).load())
