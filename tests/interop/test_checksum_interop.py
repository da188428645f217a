"""The checksum transformer changes nothing another Zarr reader sees
(``kvzarr/transformers/checksum``: values stay byte for byte what Zarr wrote; records live
under reserved ``__kvzarr/`` keys). A directory and a zip archive written through a checksum
stack are read bit-exactly by zarr-python 3.1 and TensorStore, zarr-python lists no
reserved key as a child, and what zarr-python writes into such a store is adopted by
``verify(repair_missing=True)`` and then read verified."""

from __future__ import annotations

import pytest

import kvzarr
from kvzarr.errors import ChecksumMissingError
from kvzarr.stores.filesystem import FilesystemStore
from kvzarr.stores.zip import ZipStore
from kvzarr.transformers import Checksum, build_stack

from .conftest import (NAME, REGIONS, Case, assert_bit_equal, creation_kwargs,
                       expected_array, sample, tensorstore_spec)

zarr = pytest.importorskip("zarr")
ts = pytest.importorskip("tensorstore")
from zarr.errors import ZarrUserWarning  # noqa: E402
from zarr.storage import LocalStore  # noqa: E402

CASES = [Case("float64", "nan"), Case("int32", "nonzero", "none"),
         Case("uint16", "nonzero", "none", "end"), Case("float32", "nan", "gzip", "start"),
         Case("int64", "zero", "zstd-crc32c", keys="v2.")]


def _write_through_checksum(case: Case, store) -> object:
    stack = build_stack(store, [Checksum(block_size=256)])
    group = kvzarr.create_group(stack, attributes={"written": "through checksum"})
    arr = kvzarr.create_array(stack, name=f"grp/{NAME}", **creation_kwargs(case, "kvzarr"))
    data = sample(case.dtype, case.seed)
    for region in REGIONS:
        arr[region] = data[region]
    assert group.attrs["written"] == "through checksum"
    assert list(store.list_prefix("__kvzarr/crc/grp/"))        # records exist
    stack.close()
    return expected_array(case, data)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_directory_written_through_checksum_reads_everywhere(case, tmp_path):
    expected = _write_through_checksum(case, FilesystemStore(tmp_path))
    z = zarr.open_array(LocalStore(tmp_path, read_only=True), path=f"grp/{NAME}", mode="r")
    assert_bit_equal(z[...], expected)
    spec = tensorstore_spec(case, tmp_path / "grp")
    got = ts.open({"driver": "zarr3", "kvstore": spec["kvstore"]}, open=True,
                  read=True).result().read().result()
    assert_bit_equal(got, expected)
    # zarr-python sees the hierarchy and nothing of the records: it lists no reserved
    # key (it says, as of any entry that is no node, that it skipped it)
    root = zarr.open_group(LocalStore(tmp_path, read_only=True), mode="r")
    with pytest.warns(ZarrUserWarning, match="Object at __kvzarr is not recognized"):
        assert list(root.keys()) == ["grp"]
    with pytest.warns(ZarrUserWarning, match="__kvzarr"):
        assert [p for p, _ in root.members(max_depth=None)] == ["grp", f"grp/{NAME}"]
    assert list(root["grp"].keys()) == [NAME]
    assert (tmp_path / "__kvzarr" / "crc" / "grp" / NAME / "zarr.json").exists()


@pytest.mark.parametrize("case", CASES[:3], ids=str)
def test_a_zip_written_through_checksum_reads_everywhere(case, tmp_path):
    path = tmp_path / "x.zip"
    expected = _write_through_checksum(case, ZipStore(path))
    from zarr.storage import ZipStore as ZarrZip
    zstore = ZarrZip(path, mode="r")
    z = zarr.open_array(zstore, path=f"grp/{NAME}", mode="r")
    assert_bit_equal(z[...], expected)
    root = zarr.open_group(zstore, mode="r")
    with pytest.warns(ZarrUserWarning, match="__kvzarr"):
        assert list(root.keys()) == ["grp"]
    zstore.close()
    got = ts.open({"driver": "zarr3", "kvstore": {"driver": "zip", "base": {
        "driver": "file", "path": str(path)}, "path": f"grp/{NAME}/"}}, open=True,
        read=True).result().read().result()
    assert_bit_equal(got, expected)


def test_what_zarr_python_writes_is_adopted_by_a_repair(tmp_path):
    case = CASES[1]
    z = zarr.create_array(LocalStore(tmp_path), name=NAME, **creation_kwargs(case, "zarr"))
    data = sample(case.dtype, case.seed)
    for region in REGIONS:
        z[region] = data[region]
    stack = build_stack(FilesystemStore(tmp_path), [Checksum()])
    with pytest.raises(ChecksumMissingError):
        kvzarr.open_array(stack, path=NAME, mode="r")[...]
    report = stack.verify(repair_missing=True)
    assert report.ok and report.repaired == report.counts["unprotected"] > 1
    assert_bit_equal(kvzarr.open_array(stack, path=NAME, mode="r")[...],
                     expected_array(case, data))
    assert stack.stats()["unprotected_reads"] == 1
