"""``kvzarr.migrate_v3`` and ``kvzarr migrate v3``: v2 hierarchies (written by zarr-python 3
with ``zarr_format=2``) become v3 ones that read the same chunk bytes, in place in one
transaction or into a copy; the cases zarr-python's own ``zarr migrate v3`` fails on
(consolidated metadata, vlen-utf8 object arrays, null fill values, Blosc's automatic
shuffle) included; a dry run and a failed migration change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

import kvzarr  # noqa: E402
from kvzarr.cli import main  # noqa: E402
from kvzarr.errors import KvzarrError  # noqa: E402
from kvzarr.stores import open_store  # noqa: E402

from .conftest import kv_store, write_v2_hierarchy  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LEGACY = (".zarray", ".zgroup", ".zattrs", ".zmetadata")


def snapshot(target) -> dict[str, bytes]:
    st = kv_store(target)
    try:
        return {k: st.get(k) for k in st.list()}
    finally:
        if st is not target:
            st.close()


def test_in_place_migration_reads_the_same_chunks_as_v3(target) -> None:
    data = write_v2_hierarchy(target)
    chunks_before = {k: v for k, v in snapshot(target).items()
                     if k.rpartition("/")[2] not in LEGACY}
    report = kvzarr.migrate_v3(target)
    assert report.arrays == len(data) and report.groups == 2      # root and "sub"
    after = snapshot(target)
    assert not [k for k in after if k.rpartition("/")[2] in LEGACY]
    # no chunk was rewritten: every value but the documents is as it was
    assert {k: v for k, v in after.items() if not k.endswith("zarr.json")} == chunks_before
    zs = kvzarr.ZarrStore(target, read_only=True)
    for path, expected in data.items():
        np.testing.assert_array_equal(kvzarr.open_array(target, path=path, mode="r")[...],
                                      expected)
        got = zarr.open_array(zs, path=path, zarr_format=3, mode="r")
        np.testing.assert_array_equal(got[...], expected)
    assert dict(zarr.open_group(zs, zarr_format=3, mode="r").attrs) == {"title": "v2"}
    zs.close()


def test_tensorstore_reads_a_migrated_directory(tmp_path: Path) -> None:
    """The arrays whose codecs TensorStore has (it has no numcodecs.* codecs: zlib and
    delta stay those after a migration, as they must to read the same bytes)."""
    ts = pytest.importorskip("tensorstore")
    where = str(tmp_path / "data")
    data = write_v2_hierarchy(where)
    kvzarr.migrate_v3(where)
    for path in ("sub/nested_keys", "flags"):
        expected = data[path]
        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file",
                                                      "path": f"{where}/{path}"}}).result()
        np.testing.assert_array_equal(arr.read().result(), expected)


def test_dry_run_reports_and_changes_nothing(target) -> None:
    write_v2_hierarchy(target)
    before = snapshot(target)
    report = kvzarr.migrate_v3(target, dry_run=True)
    assert report.dry_run and report.arrays == 4
    assert "/sub/big_endian_f: Zarr v2 array -> v3" in str(report)
    assert snapshot(target) == before


def test_migration_into_another_store_leaves_the_source(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "v2.lmdb"), str(tmp_path / "v3.sqlite")
    data = write_v2_hierarchy(src)
    before = snapshot(src)
    kvzarr.migrate_v3(src, to=dst)
    assert snapshot(src) == before
    for path, expected in data.items():
        np.testing.assert_array_equal(kvzarr.open_array(dst, path=path, mode="r")[...],
                                      expected)
        assert kvzarr.open_array(dst, path=path, mode="r").metadata.zarr_format == 3


def test_what_zarr_python_cannot_migrate(tmp_path: Path) -> None:
    """Consolidated metadata, vlen-utf8 object arrays, a null fill value, Blosc with
    automatic shuffle: migrated, each choice in the report, the data the same."""
    where = str(tmp_path / "x.sqlite")
    zs = kvzarr.ZarrStore(where)
    root = zarr.open_group(zs, mode="w", zarr_format=2)
    words = np.array(["alpha", "", "γάμμα", "delta"], dtype=object)
    s = root.create_array("words", shape=(4,), chunks=(3,), dtype=str)
    s[...] = words
    nofill = root.create_array("nofill", shape=(5,), chunks=(2,), dtype="<i4",
                               fill_value=None)
    nofill[...] = np.arange(5, dtype="<i4")
    auto = root.create_array("auto", shape=(40,), chunks=(16,), dtype="<u2",
                             compressors=numcodecs.Blosc(cname="zstd", shuffle=-1))
    auto[...] = np.arange(40, dtype="<u2")
    zarr.consolidate_metadata(zs)
    zs.close()
    assert snapshot(where).get(".zmetadata") is not None
    report = kvzarr.migrate_v3(where)
    text = str(report)
    assert "null" in text and "shuffle" in text
    assert report.consolidated == [""]
    after = snapshot(where)
    assert ".zmetadata" not in after
    assert "consolidated_metadata" in json.loads(after["zarr.json"])
    np.testing.assert_array_equal(kvzarr.open_array(where, path="words", mode="r")[...],
                                  words.astype(str))
    np.testing.assert_array_equal(kvzarr.open_array(where, path="nofill", mode="r")[...],
                                  np.arange(5))
    np.testing.assert_array_equal(kvzarr.open_array(where, path="auto", mode="r")[...],
                                  np.arange(40))
    zs = kvzarr.ZarrStore(where, read_only=True)
    np.testing.assert_array_equal(zarr.open_array(zs, path="words", mode="r")[...], words.astype(str))
    assert sorted(zarr.open_group(zs, use_consolidated=True, mode="r").array_keys()) == [
        "auto", "nofill", "words"]
    zs.close()


def test_a_node_that_cannot_be_converted_stops_it_before_anything_is_written(
        tmp_path: Path) -> None:
    where = str(tmp_path / "x.lmdb")
    write_v2_hierarchy(where)
    st = open_store(where)
    doc = json.loads(st.get("sub/nested_keys/.zarray"))
    doc["compressor"] = {"id": "no-such-codec"}
    st.set("sub/nested_keys/.zarray", json.dumps(doc).encode())
    st.close()
    before = snapshot(where)
    with pytest.raises(KvzarrError) as err:
        kvzarr.migrate_v3(where)
    assert "sub/nested_keys" in str(err.value)
    assert snapshot(where) == before


def test_a_failure_while_writing_rolls_the_whole_migration_back(tmp_path: Path,
                                                                monkeypatch) -> None:
    where = str(tmp_path / "x.sqlite")
    write_v2_hierarchy(where)
    zs = kvzarr.ZarrStore(where)
    zarr.consolidate_metadata(zs)
    zs.close()
    before = snapshot(where)
    from kvzarr import consolidated

    def fail(store, path):
        raise OSError("disk gone")
    monkeypatch.setattr(consolidated, "consolidate", fail)
    with pytest.raises(OSError):
        kvzarr.migrate_v3(where)
    assert snapshot(where) == before


def test_the_migrate_command(tmp_path: Path, capsys) -> None:
    where = str(tmp_path / "x.sqlite")
    write_v2_hierarchy(where)
    before = snapshot(where)
    assert main(["migrate", "v3", where, "--dry-run"]) == 0
    assert "would migrate 4 arrays and 2 groups" in capsys.readouterr().out
    assert snapshot(where) == before
    assert main(["migrate", "v3", where]) == 0
    assert "migrated 4 arrays and 2 groups" in capsys.readouterr().out
    assert kvzarr.open_group(where, mode="r").metadata.zarr_format == 3
    assert main(["migrate", "v3", str(tmp_path / "missing.sqlite")]) == 2
    assert not (tmp_path / "missing.sqlite").exists()
