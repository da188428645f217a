"""Regression: changing attributes or the shape of an array written by zarr-python keeps the
rest of its zarr.json as zarr-python wrote it (legacy ``structured`` stays readable by
zarr-python 3.1, which cannot read ``struct``)."""

import json
import warnings

import numpy as np
import zarr

import kvzarr


def test_attribute_and_resize_keep_foreign_metadata_form(tmp_path):
    dtype = np.dtype([("a", "<i4"), ("b", "<f8")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(zarr.storage.LocalStore(tmp_path), name="s", shape=(4,),
                              dtype=dtype, chunks=(2,))
        z[...] = np.array([(1, 2.0), (3, 4.0), (5, 6.0), (7, 8.0)], dtype=dtype)
    before = json.loads((tmp_path / "s" / "zarr.json").read_text())

    a = kvzarr.open_array(str(tmp_path), path="s")
    a.attrs["x"] = 1
    a.resize(6)

    after = json.loads((tmp_path / "s" / "zarr.json").read_text())
    assert after["shape"] == [6] and after["attributes"] == {"x": 1}
    for member in ("data_type", "codecs", "fill_value", "chunk_grid", "chunk_key_encoding"):
        assert after[member] == before[member], member
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = zarr.open_array(zarr.storage.LocalStore(tmp_path), path="s")[...]
    np.testing.assert_array_equal(back[:4]["a"], [1, 3, 5, 7])
    np.testing.assert_array_equal(kvzarr.open_array(str(tmp_path), path="s")[...], back)
