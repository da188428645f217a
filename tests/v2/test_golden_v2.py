"""kvzarr on the Zarr v2 golden files (tests/golden/v2: zarr-python 2.18's LMDBStore,
SQLiteStore, DirectoryStore, NestedDirectoryStore, ZipStore and a consolidated
hierarchy, and zarr-python 3's zarr_format=2): every array reads as its writer wrote
it; the old LMDB and SQLite files take writes in their own form and migrate to v3."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import CodecError, KvzarrError
from kvzarr.stores import open_store
from tests.golden import goldenlib

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

MANIFEST = goldenlib.load_manifest()
STORE_FILES = sorted({e["store_file"] for e in MANIFEST["entries"]})


def entries_of(store_file: str) -> list[dict]:
    return [e for e in MANIFEST["entries"] if e["store_file"] == store_file]


def copy_of(store_file: str, tmp: Path) -> str:
    """A writable copy of a golden store (the files in the repository stay as written)."""
    src, dst = goldenlib.V2 / store_file, tmp / store_file
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy(src, dst)
    return str(dst)


def read_as_expected(got: np.ndarray, entry: dict) -> None:
    want = goldenlib.expected_values(entry)
    if want.dtype.hasobject:
        assert got.shape == want.shape, entry["path"]
        got_objects = goldenlib.as_objects(got) if got.dtype != object else got
        assert goldenlib.same(got_objects, want), entry["path"]
    else:
        # kvzarr hands out values in the machine's byte order, as for v3 arrays
        assert got.dtype == want.dtype.newbyteorder("=") or got.dtype == want.dtype, \
            (entry["path"], got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=entry["path"])


@pytest.mark.parametrize("store_file", STORE_FILES)
def test_every_golden_array_reads_as_its_writer_wrote_it(store_file: str,
                                                        tmp_path: Path) -> None:
    # a copy: opening an LMDB file writes a lock file beside it
    with kvzarr.open_group(copy_of(store_file, tmp_path), mode="r") as root:
        assert root.metadata.zarr_format == 2
        for entry in entries_of(store_file):
            a = root[entry["path"]]
            assert a.metadata.zarr_format == 2
            assert list(a.shape) == entry["shape"] and list(a.chunks) == entry["chunks"]
            assert dict(a.attrs) == entry["attributes"]
            if _pickled(entry):
                # unpickling runs code: numcodecs refuses it unless the user allows it
                with pytest.raises(CodecError):
                    a[...]
                continue
            read_as_expected(a[...], entry)


def _pickled(entry: dict) -> bool:
    return any(f.get("id") == "pickle" for f in entry["filters"] or [])


@pytest.mark.parametrize("store_file", ["zarr2-lmdb.lmdb", "zarr2-sqlite.sqlite"])
def test_old_lmdb_and_sqlite_files_take_writes_in_their_own_form(store_file: str,
                                                                tmp_path: Path) -> None:
    where = copy_of(store_file, tmp_path)
    numeric = [e for e in entries_of(store_file) if e["dtype"] in ("<i4", "<f8", ">i2")
               and e["filters"] is None]
    assert numeric
    for entry in numeric:
        with kvzarr.open_array(where, path=entry["path"]) as a:
            before = goldenlib.expected_values(entry)
            region = tuple(slice(0, max(1, n // 2)) for n in a.shape)
            a[region] = 7
            a.attrs["touched"] = True
        want = before.copy()
        want[region] = 7
        with kvzarr.open_array(where, path=entry["path"], mode="r") as again:
            np.testing.assert_array_equal(again[...], want, err_msg=entry["path"])
            assert again.attrs["touched"] is True
    st = open_store(where, mode="r")
    try:
        keys = list(st.list())
        assert not any(k.endswith("zarr.json") for k in keys)
        for entry in numeric:       # .zarray untouched, byte for byte
            key = f"{entry['path']}/.zarray"
            assert st.get(key) == goldenlib.raw_items(store_file)[key], key
    finally:
        st.close()


#: the golden arrays Zarr v3 has no form for, each refused by a migration (structured
#: fields of mixed byte order: one bytes codec has one endian; categorize: no v3 codec
#: zarr-python 3 reads; objects other than strings and bytes: no v3 data type)
NOT_IN_V3 = {"dtypes/structured", "dtypes/structured_flat", "fill/structured",
             "order/F_structured", "filters/categorize_U5", "filters/categorize_object",
             "objects/json", "objects/msgpack", "objects/pickle", "objects/vlen_array_i4"}


@pytest.mark.parametrize("store_file", ["zarr2-lmdb.lmdb", "zarr2-sqlite.sqlite",
                                        "zarr2-consolidated.zarr"])
def test_old_files_migrate_to_v3_what_v3_can_hold(store_file: str, tmp_path: Path) -> None:
    """A whole golden hierarchy holds arrays v3 has no form for: migrating it all is
    refused before anything changes, the error naming the array; every other array
    migrates (one at a time here) and reads as its writer wrote it."""
    where = copy_of(store_file, tmp_path)

    def snapshot() -> dict[str, bytes]:
        with open_store(where, mode="r") as st:
            return {k: st.get(k) for k in st.list()}
    before = snapshot()
    with pytest.raises(KvzarrError) as err:
        kvzarr.migrate_v3(where)
    assert any(p in str(err.value) for p in NOT_IN_V3), str(err.value)
    assert snapshot() == before
    for entry in entries_of(store_file):
        if entry["path"] in NOT_IN_V3:
            with pytest.raises(KvzarrError):
                kvzarr.migrate_v3(where, path=entry["path"])
            continue
        report = kvzarr.migrate_v3(where, path=entry["path"])
        assert report.arrays == 1, entry["path"]
        with kvzarr.open_array(where, path=entry["path"], mode="r") as a:
            assert a.metadata.zarr_format == 3
            if _pickled(entry):
                continue
            read_as_expected(a[...], entry)


def test_zarr2_consolidated_metadata_lists_the_hierarchy(tmp_path: Path) -> None:
    where = copy_of("zarr2-consolidated.zarr", tmp_path)
    with kvzarr.open_group(where, mode="r", use_consolidated=True) as root:
        listed = {name for name, _ in root.members(max_depth=None)}
    doc = json.loads((Path(where) / ".zmetadata").read_text())["metadata"]
    arrays = {k.rpartition("/")[0] for k in doc if k.endswith("/.zarray")}
    assert arrays <= listed and arrays == {e["path"] for e in entries_of(
        "zarr2-consolidated.zarr")}
