"""Named regression tests for what a new user hit with the command and the opening
functions (issue "Ecosystem ... the kvzarr command"): each test writes its input out."""

from __future__ import annotations

import os

import numpy as np
import pytest

import kvzarr
from kvzarr.cli import main
from kvzarr.errors import KvzarrError, StoreError


def test_demo_into_memory_url_reads_back_what_it_wrote(capsys):
    # the read-back used to open memory:// again: a new, empty store (NodeNotFoundError)
    assert main(["demo", "memory://"]) == 0
    out = capsys.readouterr().out
    assert "temperature (1024, 1024) float32" in out
    assert out.rstrip().endswith(": OK")


def test_upgrade_of_a_missing_sqlite_file_creates_nothing(tmp_path, capsys):
    target = tmp_path / "missing.sqlite"
    assert main(["upgrade", str(target)]) == 2
    assert "no database file" in capsys.readouterr().err
    assert main(["upgrade", f"sqlite:///{target}"]) == 2
    assert list(tmp_path.iterdir()) == []      # not even an empty database file


@pytest.mark.parametrize("name", ["x.sqlite", "x.lmdb", "x.zip", "x.zarr"])
def test_failed_create_with_mode_w_leaves_no_new_file(tmp_path, name):
    target = str(tmp_path / name)
    attempts = [
        lambda: kvzarr.create_array(target, mode="w", shape=(4,), dtype="bad"),
        lambda: kvzarr.create_array(target, mode="w", shape=(4,), dtype="i4", chunks=(0,)),
        lambda: kvzarr.create_array(target, mode="w", shape=(4, 4), dtype="i4",
                                    chunks=(2, 2), shards=(3, 3)),   # not a multiple
        lambda: kvzarr.open_array(target, mode="w", shape=(4,), dtype="bad"),
        lambda: kvzarr.open(target, mode="w", shape=(4,), dtype="bad"),
        lambda: kvzarr.open(target, mode="w-", shape=(4,), dtype="i4",
                            compressors=[{"name": "no-such-codec"}]),
        lambda: kvzarr.create_group(target, mode="w", attributes={"x": float("nan")}),
        lambda: kvzarr.open_group(target, mode="w", attributes={"x": object()}),
    ]
    for attempt in attempts:
        with pytest.raises(KvzarrError):
            attempt()
        assert list(tmp_path.iterdir()) == [], attempt
    # the same calls with good arguments do create the store
    kvzarr.create_array(target, mode="w", shape=(4,), dtype="i4")[:] = 1
    assert os.path.exists(target)


def test_failed_create_with_mode_w_leaves_an_existing_store_unchanged(tmp_path):
    target = str(tmp_path / "x.sqlite")
    kvzarr.create_array(target, name="a", shape=(3,), dtype="i2")[:] = [1, 2, 3]
    with kvzarr.open_store(target, mode="r") as store:
        before = {k: store.get(k) for k in store.list()}
    with pytest.raises(KvzarrError):
        kvzarr.create_array(target, name="a", mode="w", overwrite=True, shape=(4,),
                            dtype="bad")
    with kvzarr.open_store(target, mode="r") as store:
        assert {k: store.get(k) for k in store.list()} == before


@pytest.mark.parametrize("content", [b"just some notes\n", b"", b"\x00" * 8192])
def test_opening_a_non_lmdb_file_read_only_creates_no_lock_file(tmp_path, content):
    notes = tmp_path / "notes.lmdb"     # a text file renamed .lmdb, an empty file, zeros
    notes.write_bytes(content)
    with pytest.raises(StoreError):
        kvzarr.open(str(notes), mode="r")
    with pytest.raises(StoreError):
        kvzarr.open_store(str(notes), mode="r")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.lmdb"]
    assert notes.read_bytes() == content
    assert main(["info", str(notes)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.lmdb"]


def test_a_real_lmdb_file_still_opens_read_only(tmp_path):
    target = str(tmp_path / "x.lmdb")
    kvzarr.create_array(target, name="a", shape=(3,), dtype="u1")[:] = [7, 8, 9]
    np.testing.assert_array_equal(kvzarr.open_array(target, path="a", mode="r")[:], [7, 8, 9])
