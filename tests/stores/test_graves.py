"""The directory store's replaced files: moved aside under a hidden name (a hard link)
before the rename and unlinked by a sync thread (kvzarr.stores.graves)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kvzarr.runtime import workers
from kvzarr.stores import graves
from kvzarr.stores.filesystem import TEMP_MARKER, FilesystemStore


def _temporary_names(root: Path) -> list[str]:
    return [name for _, _, names in os.walk(root) for name in names if TEMP_MARKER in name]


@pytest.fixture
def no_drainer(monkeypatch: pytest.MonkeyPatch) -> None:
    """No sync thread unlinks graves: only the writers' back-pressure and flush do."""
    graves.flush()
    monkeypatch.setattr(workers.SYNC_POOL, "submit", lambda fn, *a, **k: None)
    yield
    monkeypatch.undo()
    with graves._lock:                       # the drain that never ran
        graves._draining = False
    graves.flush()


def test_an_overwrite_leaves_the_old_file_to_a_grave_then_nothing(tmp_path, no_drainer):
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set("a/k", b"old")
    inode = os.stat(root / "a" / "k").st_ino
    store.set("a/k", b"new")
    [grave] = _temporary_names(root)
    assert os.stat(root / "a" / grave).st_ino == inode          # the old file itself
    assert (root / "a" / grave).read_bytes() == b"old"
    assert store.get("a/k") == b"new" and list(store.list()) == ["a/k"]
    store.close()                                               # close flushes
    assert _temporary_names(root) == []


def test_graves_wait_within_bounds(tmp_path, no_drainer, monkeypatch):
    monkeypatch.setattr(graves, "MAX_PENDING", 3)
    monkeypatch.setattr(graves, "MAX_PENDING_BYTES", 10_000)
    store = FilesystemStore(tmp_path / "d")
    for i in range(10):
        store.set("k", bytes([i]) * 100)
    assert len(_temporary_names(tmp_path)) == 3                 # the writer removed older
    for i in range(3):
        store.set("big", bytes([i]) * 6_000)
    names = _temporary_names(tmp_path)
    assert len(names) <= 3 and sum(os.path.getsize(tmp_path / "d" / n) for n in names) \
        <= 10_000
    graves.flush()
    assert _temporary_names(tmp_path) == []
    assert store.get("k") == bytes([9]) * 100 and store.get("big") == bytes([2]) * 6_000


def test_a_grave_does_not_keep_an_erased_key_s_directory(tmp_path, no_drainer):
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set_many([("a/b/k", b"1"), ("z", b"keep")])
    store.set("a/b/k", b"2")
    store.erase("a/b/k")          # the grave is still in a/b: the erase cannot prune it
    assert (root / "a" / "b").is_dir()
    graves.flush()                # the grave goes, and with it the empty directories
    assert not (root / "a").exists() and list(store.list()) == ["z"]


def test_a_sync_thread_removes_graves_while_writes_go_on(tmp_path):
    store = FilesystemStore(tmp_path / "d")
    values = [bytes([i]) * 300_000 for i in range(20)]
    stop = threading.Event()
    torn = []

    def reader() -> None:
        while not stop.is_set():
            v = store.get("k")
            if v is not None and v not in values:
                torn.append(len(v))
    t = threading.Thread(target=reader)
    t.start()
    try:
        for v in values:
            store.set("k", v)
    finally:
        stop.set()
        t.join()
    assert torn == [] and store.get("k") == values[-1]
    graves.flush()
    assert _temporary_names(tmp_path) == []


def test_a_file_with_other_links_is_replaced_without_a_grave(tmp_path, no_drainer):
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set("k", b"0123")
    os.link(root / "k", root / ".other-link")      # a second link we did not make
    store.set("k", b"new")
    assert _temporary_names(root) == []             # not given a grave: left as it was
    assert (root / ".other-link").read_bytes() == b"0123"


def test_metadata_documents_get_no_grave(tmp_path, no_drainer):
    """Other Zarr readers list node directories to find members: no grave there."""
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set_many([("zarr.json", b"{}"), ("g/zarr.json", b"{}"), ("g/.zattrs", b"{}")])
    store.set_many([("zarr.json", b"{ }"), ("g/zarr.json", b"{ }"), ("g/.zattrs", b"{ }")])
    assert _temporary_names(root) == []
    assert store.get("g/zarr.json") == b"{ }"
