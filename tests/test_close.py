"""``close()`` and ``with`` on arrays and groups: a node closes the store its opening
function opened from a path or URL, never a Store object the caller passed in; a failed
open closes what it opened; an LMDB file opened read-only can then be opened writable in
the same process. (Closing stores themselves: the conformance suite.)"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import (NodeTypeError, ReadOnlyError, StoreClosedError, StoreError,
                           StorePermissionError)
from kvzarr.stores.lmdb import LMDBStore

TARGETS = ["x.lmdb", "x.sqlite", "x.zip", "dir"]


@pytest.mark.parametrize("name", TARGETS)
def test_a_node_opened_from_a_path_closes_its_store(tmp_path, name):
    path = tmp_path / name
    with kvzarr.create_array(path, name="a", shape=(6,), chunks=(4,), dtype="i4") as a:
        a[...] = np.arange(6)
    assert a.store.closed
    with pytest.raises(StoreClosedError):
        a[...]
    a.close()                                        # twice: nothing happens
    with kvzarr.open_group(path, mode="r") as root:
        assert list(root) == ["a"]
        child = root["a"]
        assert child[...].tolist() == list(range(6))
        child.close()                                # a child does not own the store
        assert not root.store.closed
    assert root.store.closed and child.store.closed
    with kvzarr.open(path, mode="r", path="a") as again:
        assert again[...].tolist() == list(range(6))


@pytest.mark.parametrize("opener", [
    lambda s: kvzarr.create_array(s, shape=(2,), dtype="i1"),
    lambda s: kvzarr.create_group(s),
    lambda s: kvzarr.open(s),
    lambda s: kvzarr.open_group(s),
    lambda s: kvzarr.zeros((2,), s),
    lambda s: kvzarr.array(np.ones(2), s),
    lambda s: kvzarr.open_array(s, shape=(2,), dtype="i1"),
], ids=["create_array", "create_group", "open", "open_group", "zeros", "array",
        "open_array"])
def test_every_opening_function_owns_what_it_opened_and_nothing_else(tmp_path, opener):
    node = opener(tmp_path / "owned.sqlite")
    node.close()
    assert node.store.closed
    store = kvzarr.open_store(tmp_path / "mine.sqlite")
    node = opener(store)
    node.close()
    assert not store.closed                         # the caller's store: the caller's
    store.set("still/open", b"1")
    store.close()


def test_a_stack_built_over_a_store_passed_in_leaves_that_store_open(tmp_path):
    store = kvzarr.open_store(tmp_path / "x.lmdb")
    with kvzarr.create_array(store, shape=(4,), dtype="u1", transformers=["cache"]) as a:
        a[...] = 3
    assert not store.closed and a[...].tolist() == [3] * 4
    store.close()


def test_a_failed_open_closes_the_store_it_opened(tmp_path):
    path = tmp_path / "x.lmdb"
    kvzarr.create_group(path).close()
    with pytest.raises(NodeTypeError):
        kvzarr.open_array(path, mode="r")          # a group is there, not an array
    # nothing of the failed open is left in this process: other options are accepted
    with LMDBStore(path, durability="none") as again:
        assert again.get("zarr.json") is not None


def test_lmdb_file_opened_read_only_then_writable_in_the_same_process(tmp_path):
    """Issue 14: a process that opened an LMDB file read-only could not reopen it
    writable ("already open read-only in this process") without reaching for
    ``arr.store.close()``."""
    path = str(tmp_path / "data.lmdb")
    kvzarr.create_array(path, name="t", shape=(4,), chunks=(2,), dtype="f8",
                        fill_value=0).close()
    reader = kvzarr.open(path, mode="r", path="t")
    assert reader[...].tolist() == [0, 0, 0, 0]
    writer = kvzarr.open(path, mode="a", path="t")
    writer[1:3] = 5
    assert writer[...].tolist() == [0, 5, 5, 0]
    assert reader[...].tolist() == [0, 5, 5, 0]     # the reader goes on, sees the commit
    with pytest.raises(ReadOnlyError):
        reader[0] = 1                                # and is still read-only
    writer.close()
    reader.close()
    with kvzarr.open(path, mode="r", path="t") as again:
        assert again[...].tolist() == [0, 5, 5, 0]


def test_lmdb_writable_open_waits_for_the_read_only_transactions_of_other_threads(tmp_path):
    path = tmp_path / "x.lmdb"
    with LMDBStore(path) as s:
        s.set("k", b"1")
    ro = LMDBStore(path, read_only=True)
    inside, release = threading.Event(), threading.Event()

    def long_read() -> None:
        with ro.transaction(write=False):
            inside.set()
            assert ro.get("k") == b"1"
            release.wait(30)
            assert ro.get("k") == b"1"               # its snapshot survived

    reader = threading.Thread(target=long_read)
    reader.start()
    assert inside.wait(30)
    opened: list[LMDBStore] = []
    opener = threading.Thread(target=lambda: opened.append(LMDBStore(path)))
    opener.start()
    opener.join(0.3)
    assert opener.is_alive(), "the environment was reopened under an open transaction"
    release.set()
    reader.join(30)
    opener.join(30)
    rw = opened[0]
    rw.set("k", b"2")
    assert ro.get("k") == b"2"
    rw.close()
    ro.close()


def test_lmdb_writable_open_inside_a_read_transaction_of_the_same_thread_is_refused(tmp_path):
    path = tmp_path / "x.lmdb"
    LMDBStore(path).close()
    with LMDBStore(path, read_only=True) as ro, ro.transaction(write=False):
        with pytest.raises(StoreError, match="holds a transaction"):
            LMDBStore(path)
        assert ro.get("k") is None                   # the read-only side still works


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="needs file permissions that apply to this user")
def test_lmdb_file_that_cannot_be_written_stays_open_read_only(tmp_path):
    path = tmp_path / "x.lmdb"
    with LMDBStore(path) as s:
        s.set("k", b"1")
    os.chmod(path, 0o444)
    try:
        with LMDBStore(path, read_only=True) as ro:
            with pytest.raises(StorePermissionError):
                LMDBStore(path)
            assert ro.get("k") == b"1"
    finally:
        os.chmod(path, 0o644)
