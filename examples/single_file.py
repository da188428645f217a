"""A dataset in one file: write it, read it back read-only, and make a zip to share.

Run:  python examples/single_file.py [FILE]   (default: a new file ocean.sqlite;
      a path ending in .lmdb makes an LMDB file instead)
"""

import sys
import zipfile

import numpy as np

import kvzarr

target = sys.argv[1] if len(sys.argv) > 1 else "ocean.sqlite"

# Writing: one store for the whole session; `with` closes it at the end.
with kvzarr.open_store(target) as store:
    root = kvzarr.open_group(store, mode="w", attributes={"title": "sea surface"})
    # Many small writes in one transaction: one commit (one disk sync) for all of them.
    with store.transaction():
        sst = root.create_array("sst", shape=(12, 180, 360), chunks=(1, 90, 90),
                                dtype="float32", fill_value=np.nan,
                                dimension_names=["month", "lat", "lon"],
                                attributes={"units": "degC"})
        lat = np.linspace(-89.5, 89.5, 180, dtype="float32")
        for month in range(12):
            season = np.cos((month - 1) * np.pi / 6)
            sst[month] = (28 * np.cos(np.radians(lat))[:, None] - 2 + 3 * season
                          * np.sign(lat)[:, None] + np.zeros((180, 360), "float32"))
        root.create_array("lat", data=lat, dimension_names=["lat"])

# Reading back, read-only: writes would raise kvzarr.errors.ReadOnlyError.
with kvzarr.open_store(target, mode="r") as store:
    root = kvzarr.open_group(store, mode="r")
    print(root.tree())
    sst = root["sst"]
    print("units   :", sst.attrs["units"], "| dims:", sst.dimension_names)
    print("equator :", sst[:, 90, 0].round(1))
    print("stored  :", sst.nchunks_initialized, "of", sst.nchunks, "chunks")
    try:
        sst[0, 0, 0] = 0
    except kvzarr.errors.ReadOnlyError as e:
        print("read-only:", e)

    # A zip archive to share: written in one transaction (each commit rewrites a zip).
    with kvzarr.open_store("ocean-share.zip") as out:
        with out.transaction():
            copy = kvzarr.open_group(out, mode="w", attributes=dict(root.attrs))
            for name, array in root.arrays():
                copy.create_array(name, data=array[...], chunks=array.chunks,
                                  fill_value=array.fill_value,
                                  dimension_names=array.dimension_names,
                                  attributes=dict(array.attrs))

members = zipfile.ZipFile("ocean-share.zip").namelist()
print("zip     :", len(members), "members, e.g.", sorted(members)[:3])
shared = kvzarr.open_group("ocean-share.zip", mode="r")
assert np.array_equal(shared["sst"][...], kvzarr.open_array(target, path="sst", mode="r")[...],
                      equal_nan=True)
print("the zip reads back the same data")
