"""Round trips through ZarrStore with xarray and dask on single-file stores (SQLite, LMDB,
zip), each compared with the same data built in numpy, and kvzarr reading what they
wrote (and the reverse)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
da = pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")

import kvzarr  # noqa: E402
from kvzarr.zarr_store import ZarrStore  # noqa: E402

FILES = ["x.sqlite", "x.lmdb", "x.zip"]


def weather(times: range) -> xr.Dataset:
    """A 2-variable dataset over (time, x), with values that say where they are."""
    t = np.array(list(times), dtype="int64")
    x = np.arange(5, dtype="int64")
    temp = (t[:, None] * 10 + x[None, :]).astype("float32")
    rain = (t[:, None] % 3 + x[None, :] * 0.5).astype("float64")
    return xr.Dataset({"temp": (("time", "x"), temp), "rain": (("time", "x"), rain)},
                      coords={"time": t, "x": x}, attrs={"title": "test"})


@pytest.mark.parametrize("name", FILES)
def test_xarray_writes_appends_and_reads_a_single_file(name: str, tmp_path: Path) -> None:
    path = str(tmp_path / name)
    first, second = weather(range(0, 6)), weather(range(6, 10))
    first.chunk({"time": 3}).to_zarr(ZarrStore(path), mode="w")
    second.to_zarr(ZarrStore(path), append_dim="time")
    expected = weather(range(0, 10))
    with xr.open_zarr(ZarrStore(path, read_only=True)) as got:
        assert got.sizes == {"time": 10, "x": 5}
        xr.testing.assert_identical(got.load(), expected)
    # kvzarr itself reads what xarray wrote
    root = kvzarr.open(path, mode="r")
    np.testing.assert_array_equal(root["temp"][...], expected["temp"].values)
    np.testing.assert_array_equal(root["time"][...], expected["time"].values)
    assert root["temp"].metadata.dimension_names == ("time", "x") or \
        list(root["temp"].metadata.dimension_names) == ["time", "x"]
    root.store.close()


def test_xarray_writes_a_zip_whose_directory_is_written_at_close(tmp_path: Path) -> None:
    """zarr-python's chunk writes through ZarrStore, one commit each, held by a zip
    store with directory="close": one directory when the store closes, and the archive
    reads back in zarr-python's own zip store and in xarray."""
    path = tmp_path / "x.zip"
    first, second = weather(range(0, 6)), weather(range(6, 10))
    with kvzarr.ZipStore(path, directory="close") as store:
        first.chunk({"time": 2}).to_zarr(ZarrStore(store), mode="w")
        second.chunk({"time": 2}).to_zarr(ZarrStore(store), append_dim="time")
    expected = weather(range(0, 10))
    theirs = zarr.storage.ZipStore(path, mode="r")
    try:
        np.testing.assert_array_equal(zarr.open_group(theirs, mode="r")["temp"][:],
                                      expected["temp"].values)
    finally:
        theirs.close()
    with xr.open_zarr(ZarrStore(str(path), read_only=True)) as got:
        xr.testing.assert_identical(got.load(), expected)


@pytest.mark.parametrize("name", FILES)
def test_xarray_reads_what_kvzarr_wrote(name: str, tmp_path: Path) -> None:
    path = str(tmp_path / name)
    data = np.arange(24, dtype="int16").reshape(4, 6)
    root = kvzarr.open_group(path, mode="w", attributes={"source": "kvzarr"})
    root.create_array("v", data=data, chunks=(2, 3), dimension_names=["y", "x"],
                      attributes={"units": "m"})
    root.store.close()
    with xr.open_zarr(ZarrStore(path, read_only=True), consolidated=False) as ds:
        assert ds.attrs["source"] == "kvzarr"
        assert ds["v"].dims == ("y", "x") and ds["v"].attrs["units"] == "m"
        np.testing.assert_array_equal(ds["v"].values, data)


@pytest.mark.parametrize("name", FILES)
def test_dask_to_zarr_and_from_zarr_through_zarr_store(name: str, tmp_path: Path) -> None:
    path = str(tmp_path / name)
    data = np.random.default_rng(1).standard_normal((30, 20))
    # dask chunks that do not line up with the storage chunks of 8 x 8 would be
    # unsafe in zarr-python; dask's to_zarr writes its own chunking
    da.to_zarr(da.from_array(data, chunks=(10, 10)), ZarrStore(path), component="a")
    back = da.from_zarr(ZarrStore(path, read_only=True), component="a")
    assert back.chunks == ((10, 10, 10), (10, 10))
    np.testing.assert_array_equal(back.compute(), data)
    np.testing.assert_array_equal(kvzarr.open_array(path, path="a", mode="r")[...], data)


def test_dask_to_zarr_with_processes_scheduler_on_sqlite(tmp_path: Path) -> None:
    """The dask graph carries the ZarrStore to worker processes (pickled: each reopens
    the file) that write into one SQLite file."""
    import dask
    path = str(tmp_path / "x.sqlite")
    data = np.arange(400, dtype="float64").reshape(20, 20)
    with dask.config.set(scheduler="processes", num_workers=2):
        da.to_zarr(da.from_array(data, chunks=(5, 20)), ZarrStore(path), component="a")
        back = da.from_zarr(ZarrStore(path, read_only=True), component="a").compute()
    np.testing.assert_array_equal(back, data)


def test_xarray_write_inside_one_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    path = str(tmp_path / "x.lmdb")
    zs = ZarrStore(path)
    weather(range(3)).to_zarr(zs, mode="w")
    with pytest.raises(RuntimeError):
        with zs.transaction():
            weather(range(3, 6)).to_zarr(zs, append_dim="time")
            raise RuntimeError("abandon the append")
    with xr.open_zarr(ZarrStore(path, read_only=True)) as ds:
        xr.testing.assert_identical(ds.load(), weather(range(3)))
    zs.close()
