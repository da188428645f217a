"""Write ``tests/golden/v2/zarr3-v2.zarr``: a Zarr v2 hierarchy written by zarr-python 3.

    .venv/bin/python tests/golden/make_v2_zarr3.py

Runs with the zarr-python 3 of kvzarr's test environment (``zarr_format=2``), so that the
v2 golden files cover both writers (``make_v2.py`` writes the zarr-python 2.18 ones). It
rewrites only this store, its expected files (``v2/expected/zarr3-v2/``) and its entries
of ``v2/expected/manifest.json``. The hierarchy is consolidated (``.zmetadata``), as
zarr-python 3 writes it. Deterministic: fixed values, no time stamps in any file.
"""

from __future__ import annotations

import json
import shutil
import sys
import warnings

import numcodecs
import numpy as np
import zarr
from goldenlib import EXPECTED, V2, expected_object_json, same, store_digest, update_manifest
from zarr.core.dtype import VariableLengthBytes

NAME = "zarr3-v2.zarr"
PREFIX = "zarr3-v2"  # expected files go under expected/zarr3-v2/
WRITER = f"zarr-python {zarr.__version__} (numcodecs {numcodecs.__version__})"
GROUP_ATTRS = {"": {"writer": "zarr-python 3", "zarr_format": 2, "list": [1, "two"]},
               "sub": {"level": 1}}
# zarr-python 3 reads all of these (it wrote them); the test checks that too
FLAT = np.dtype([("a", "<i2"), ("b", ">f8")])


def arrays():
    """(path, create_array keyword arguments, regions to write or None for all, values)."""
    ramp = np.arange(60, dtype="<f8").reshape(6, 10) * 0.5
    yield ("i2_blosc", dict(shape=(6, 10), chunks=(4, 4), dtype="<i2", fill_value=-1,
                            compressors=numcodecs.Blosc("zstd", 3, numcodecs.Blosc.BITSHUFFLE)),
           None, (np.arange(60, dtype="<i2").reshape(6, 10) - 30) * 1000)
    yield ("f8_be_F_zstd", dict(shape=(6, 10), chunks=(4, 4), dtype=">f8", order="F",
                                fill_value=np.nan, compressors=numcodecs.Zstd(level=1)),
           [(slice(0, 4), slice(0, 4))], ramp.astype(">f8"))
    yield ("u4_nested_keys", dict(shape=(5, 5), chunks=(2, 3), dtype="<u4",
                                  chunk_key_encoding={"name": "v2", "separator": "/"},
                                  compressors=numcodecs.Zlib(level=1), fill_value=0),
           None, np.arange(25, dtype="<u4").reshape(5, 5) * 100_000)
    yield ("f4_filters", dict(shape=(20,), chunks=(8,), dtype="<f4", fill_value=0,
                              filters=[numcodecs.Quantize(digits=1, dtype="<f4")],
                              compressors=None),
           None, np.linspace(-3, 3, 20, dtype="<f4"))
    yield ("b1_sparse", dict(shape=(10,), chunks=(4,), dtype="|b1", fill_value=True,
                             compressors=None),
           [(slice(0, 4),)], np.array([False, True, False, False] * 2 + [True, True]))
    yield ("S5", dict(shape=(7,), chunks=(3,), dtype="|S5", fill_value=b"ab"),
           [(slice(0, 3),), (slice(6, 7),)],
           np.array([b"", b"a\x00b", b"hello", b"x", b"y", b"z", b"last"], dtype="|S5"))
    yield ("U3", dict(shape=(4,), chunks=(3,), dtype="<U3", fill_value="ñ"),
           None, np.array(["", "ab", "ñé🙂", "xyz"], dtype="<U3"))
    yield ("M8_ns", dict(shape=(4,), chunks=(2,), dtype="<M8[ns]", fill_value=0),
           None, np.array(["NaT", "1970-01-01", "2024-02-29T12:00", "1677-09-22"],
                          dtype="<M8[ns]"))
    yield ("structured_flat", dict(shape=(3,), chunks=(2,), dtype=FLAT, fill_value=None),
           None, np.array([(1, 1.5), (-2, -0.0), (3, np.inf)], dtype=FLAT))
    strings = np.array(["", "a", "héllo", "🙂", "last one"], dtype=object)
    yield ("strings_vlen_utf8", dict(shape=(5,), chunks=(2,), dtype=str), None, strings)
    blobs = np.array([b"", b"\x00\x01", b"abc", b"\xff" * 9], dtype=object)
    yield ("sub/bytes_vlen", dict(shape=(4,), chunks=(3,), dtype=VariableLengthBytes()),
           None, blobs)
    yield ("sub/zero_d_c16", dict(shape=(), dtype="<c16", fill_value=0), None,
           np.array(1.5 - 2.5j, dtype="<c16"))


def main() -> None:
    if not zarr.__version__.startswith("3."):
        sys.exit(f"make_v2_zarr3.py needs zarr-python 3, found {zarr.__version__}")
    warnings.simplefilter("ignore")  # zarr-python 3 warns that v2 is not its native format
    root_path = V2 / NAME
    shutil.rmtree(root_path, ignore_errors=True)
    shutil.rmtree(EXPECTED / PREFIX, ignore_errors=True)
    store = zarr.storage.LocalStore(root_path)
    root = zarr.open_group(store, mode="w", zarr_format=2, attributes=GROUP_ATTRS[""])
    root.create_group("sub", attributes=GROUP_ATTRS["sub"])
    specs = list(arrays())
    for path, kwargs, regions, values in specs:
        a = root.create_array(path, attributes={"golden": path}, **kwargs)
        if regions is None:
            a[...] = values
        else:
            for region in regions:
                a[region] = values[region]
    zarr.consolidate_metadata(store, zarr_format=2)

    entries, groups = [], []
    reread = zarr.open_group(zarr.storage.LocalStore(root_path, read_only=True), mode="r",
                             zarr_format=2, use_consolidated=True)
    for path, kwargs, regions, values in specs:
        got = reread[path][...]
        meta = json.loads((root_path / path / ".zarray").read_text())
        if meta["dtype"] == "|O":
            got = np.array([v if isinstance(v, bytes) else str(v) for v in got.reshape(-1)],
                           dtype=object).reshape(got.shape)
            assert same(got, values), path
            rel = f"{PREFIX}/{path}.json"
            (EXPECTED / rel).parent.mkdir(parents=True, exist_ok=True)
            (EXPECTED / rel).write_text(json.dumps(expected_object_json(got), indent=1,
                                                   sort_keys=True, ensure_ascii=False) + "\n")
        else:
            if regions is None and "filters" not in kwargs:
                assert same(got, values.astype(got.dtype)), path
            rel = f"{PREFIX}/{path}.npy"
            (EXPECTED / rel).parent.mkdir(parents=True, exist_ok=True)
            np.save(EXPECTED / rel, got, allow_pickle=False)
        entries.append({
            "store_file": NAME, "store_kind": "LocalStore", "writer": WRITER, "path": path,
            "dtype": meta["dtype"], "shape": meta["shape"], "chunks": meta["chunks"],
            "order": meta["order"], "compressor": meta["compressor"],
            "filters": meta["filters"], "fill_value": meta["fill_value"],
            "dimension_separator": meta.get("dimension_separator"),
            "attributes": {"golden": path},
            "chunks_written": "all" if regions is None else "some",
            "expected": rel, "zarr3_reads": True, "zarr3_note": None,
        })
    for gpath in ("", "sub"):
        groups.append({"store_file": NAME, "path": gpath, "attributes": GROUP_ATTRS[gpath]})
    stores = [{"store_file": NAME, "store_kind": "LocalStore", "writer": WRITER,
               "consolidated": True, "sha256": store_digest(root_path), "zarr3_note": None}]
    update_manifest(stores, entries, groups)
    print(f"wrote {len(entries)} entries for {NAME}")


if __name__ == "__main__":
    main()
