"""The zip store with ``directory="close"``: commits append their members only, and
flush() / close() write one central directory for all of them (stores/zip.md, "Commits
held until a directory")."""

from __future__ import annotations

import multiprocessing
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import ConflictError, UnsupportedOperationError
from kvzarr.stores import zip as zipmod
from kvzarr.stores.base import Store
from kvzarr.stores.zip import ZipStore
from kvzarr.testing import StoreConformance

from .kill_trials import killed_runs, one_generation
from .test_zip_append import _slow_writes, peers_read, zip_contents


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "x.zip"


class TestHeldZipConformance(StoreConformance):
    """The store contract holds for one handle holding its commits."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Store]:
        self.path = tmp_path / "x.zip"
        with ZipStore(self.path, directory="close") as store:
            yield store

    def reopen(self, store: Store, *, read_only: bool) -> Store | None:
        return ZipStore(self.path, read_only=read_only, directory="close")

    def other_writer(self, store: Store) -> Store:
        # another writing handle would wait for the lock this one holds until it closes
        return store


def test_commits_are_the_handles_until_a_flush_then_everyones(path: Path) -> None:
    store = ZipStore(path, fsync=False, directory="close")
    store.set("zarr.json", b"{}")            # the first commit into an empty archive
    before = zip_contents(path)              # is a rewrite: a complete archive
    for i in range(50):
        store.set(f"c/{i}", bytes([i]) * 100)
    assert store.get("c/7") == bytes([7]) * 100
    assert sorted(store.list_prefix("c/")) == sorted(f"c/{i}" for i in range(50))
    size = path.stat().st_size
    with ZipStore(path, read_only=True) as other:
        assert sorted(other.list()) == ["zarr.json"]     # the archive of the last directory
        assert store.exists("c/0") and not other.exists("c/0")
        store.flush()
        assert path.stat().st_size > size                # one directory after the members
        assert other.get("c/49") == bytes([49]) * 100
    want = {"zarr.json": b"{}", **{f"c/{i}": bytes([i]) * 100 for i in range(50)}}
    assert before == {"zarr.json": b"{}"} and zip_contents(path) == want
    store.flush()                                        # nothing held: nothing written
    assert zip_contents(path) == want
    store.set("c/0", b"again")
    store.close()
    assert zip_contents(path) == {**want, "c/0": b"again"}


def test_each_commit_writes_its_members_and_no_directory(path: Path) -> None:
    with ZipStore(path, fsync=False, directory="close") as store:
        store.set_many([(f"k/{i:04}", bytes(64)) for i in range(1000)])
        size = path.stat().st_size
        for i in range(100):
            store.set(f"k/{i:04}", bytes([1]) * 64)
        # each commit: a 30-byte local header, the 6-byte name and the value; a directory
        # of 1,000 members would be ~52 KB each
        assert path.stat().st_size - size == 100 * (30 + 6 + 64)


def test_a_failed_transaction_cuts_its_members_and_keeps_the_held_ones(path: Path) -> None:
    with ZipStore(path, fsync=False, directory="close") as store:
        store.set("a", b"0")
        store.set("b", b"1")                              # held
        size = path.stat().st_size
        with pytest.raises(RuntimeError):
            with store.transaction():
                store.set("b", b"lost" * 100)
                store.set("c", b"lost")
                raise RuntimeError
        assert path.stat().st_size == size
        assert (store.get("b"), store.get("c")) == (b"1", None)
    assert zip_contents(path) == {"a": b"0", "b": b"1"}


def test_a_failed_first_held_transaction_releases_the_lock(path: Path) -> None:
    ZipStore(path, fsync=False).set("a", b"0")
    with ZipStore(path, fsync=False, directory="close") as store:
        with pytest.raises(RuntimeError):
            with store.transaction():
                store.set("b", b"lost")
                raise RuntimeError
        with ZipStore(path, fsync=False, lock_timeout=5) as other:
            other.set("c", b"other")                    # nothing held: the lock is free
        assert store.get("c") == b"other"


def test_another_writer_waits_until_the_holder_flushes(path: Path) -> None:
    holder = ZipStore(path, fsync=False, directory="close")
    holder.set("a", b"0")
    holder.set("b", b"1")
    other = ZipStore(path, fsync=False, lock_timeout=0.2)
    with pytest.raises(ConflictError):
        other.set("c", b"2")
    holder.flush()
    other.set("c", b"2")
    assert holder.get("c") == b"2"                      # read from the file again
    other.close()
    holder.close()
    assert zip_contents(path) == {"a": b"0", "b": b"1", "c": b"2"}


def test_flush_inside_a_transaction_and_unknown_options_are_refused(path: Path) -> None:
    with ZipStore(path, directory="close") as store:
        assert not store.capabilities.multi_process
        store.set("a", b"0")
        store.set("b", b"1")
        with store.transaction():
            with pytest.raises(UnsupportedOperationError):
                store.flush()
    store = ZipStore(path, directory="close")
    store.set("c", b"2")
    with pytest.raises(UnsupportedOperationError):
        with store.transaction():              # not a deadlock on its own lock
            store.close()
    with pytest.raises(UnsupportedOperationError):
        ZipStore(path, directory="never")
    assert ZipStore(path).capabilities.multi_process


def test_compactions_among_held_commits_keep_every_version_readable(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction ends the held commits with a directory of the version before it
    rather than cutting them away: a read transaction of another thread still reads
    the held members from the old file."""
    monkeypatch.setattr(zipmod, "COMPACT_MIN_DEAD", 64 << 10)
    reading, read_more, done = threading.Event(), threading.Event(), threading.Event()
    seen: list[bytes | None] = []

    with ZipStore(path, fsync=False, directory="close") as store:
        store.set_many([(f"v/{j}", bytes(4096)) for j in range(8)])
        store.set("v/0", b"held")

        def reader() -> None:
            with store.transaction(write=False):
                seen.append(store.get("v/0"))
                reading.set()
                read_more.wait(30)
                seen.append(store.get("v/0"))
            done.set()
        t = threading.Thread(target=reader)
        t.start()
        assert reading.wait(30)
        rewrites = store._rewrites
        for i in range(100):
            store.set_many([(f"v/{j}", bytes([i]) * 4096) for j in range(8)])
            size = path.stat().st_size
            assert size <= 2 * (store._archive.end - store._archive.dead) + (64 << 10) * 2
        assert store._rewrites - rewrites >= 2
        read_more.set()
        t.join(30)
        assert done.is_set() and seen == [b"held", b"held"]
    assert zip_contents(path) == {f"v/{j}": bytes([99]) * 4096 for j in range(8)}


def test_a_handle_dropped_without_close_writes_its_directory(path: Path) -> None:
    """At garbage collection and at interpreter exit the held commits are kept."""
    store = ZipStore(path, fsync=False, directory="close")
    store.set("a", b"0")
    store.set("b", b"1")
    del store
    assert zip_contents(path) == {"a": b"0", "b": b"1"}
    script = (f"from kvzarr.stores.zip import ZipStore\n"
              f"s = ZipStore({str(path)!r}, directory='close')\n"
              f"s.set('c', b'2')\ns.set('d', b'3')\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert zip_contents(path) == {"a": b"0", "b": b"1", "c": b"2", "d": b"3"}


def test_zarr_python_and_tensorstore_read_what_held_commits_wrote(path: Path) -> None:
    """Tile writes, one commit each, held until each flush: after each, zarr-python 3's
    ZipStore and TensorStore's zip kvstore read the array kvzarr reads."""
    model = np.zeros((40, 40), dtype="int32")
    store = ZipStore(path, directory="close")
    arr = kvzarr.create_array(store, name="a", shape=model.shape, chunks=(10, 10),
                              dtype="int32", fill_value=0)
    rng = np.random.default_rng(5)
    for flush in range(3):
        for step in range(8):
            r, c = rng.integers(0, 30, 2)
            model[r:r + 10, c:c + 10] = 10 * flush + step + 1
            arr[r:r + 10, c:c + 10] = 10 * flush + step + 1
        model[:10, :10] = 0
        arr[:10, :10] = 0                         # a chunk of fill: its key is erased
        np.testing.assert_array_equal(arr[...], model)
        store.flush()
        peers_read(path, model)
    store.close()


KEYS, SIZE, TRIALS = 8, 64 << 10, 12


def _generation(path: str, gen: int, ready, go) -> None:
    _slow_writes()
    store = ZipStore(path, directory="close")
    go.wait(60)
    ready.set()
    for i in range(KEYS):                       # one commit per key, all held
        store.set(f"v/{i}", bytes([gen]) * SIZE)
    store.flush()                               # one directory for the generation
    store.set("after", bytes([gen]))            # held again: lost to the kill
    time.sleep(60)                              # (the kill lands by then)


def test_a_killed_holder_leaves_the_last_flushed_generation_whole(path: Path) -> None:
    """Killed before its flush the archive is the one before the held commits; after,
    all of them: never some of a generation's commits."""
    ctx = multiprocessing.get_context("spawn")
    with ZipStore(path) as store:
        store.set_many([(f"v/{i}", bytes([0]) * SIZE) for i in range(KEYS)])
    current, committed = 0, 0
    rng = random.Random(11)
    for run in killed_runs(ctx, _generation, str(path), TRIALS,
                           lambda run: rng.uniform(0, 0.08)):
        with ZipStore(path, read_only=True) as store:
            state = one_generation(store.get_many([f"v/{i}" for i in range(KEYS)]), SIZE)
            assert store.get("after") is None
        assert state in (current, run)
        committed += state == run
        current = state
    assert 0 < committed < TRIALS, "the kills should land before and after flushes"
    with ZipStore(path):                        # a writer cuts the torn tail
        pass
    contents = zip_contents(path)
    assert {contents[f"v/{i}"][0] for i in range(KEYS)} == {current}
    assert "after" not in contents


def test_a_commit_that_changes_nothing_keeps_none_of_its_bytes(path: Path) -> None:
    with ZipStore(path, fsync=False, directory="close") as store:
        store.set("a", b"0")
        store.set("b", b"1")                          # held
        size = path.stat().st_size
        with store.transaction():
            store.set("c", b"written, then erased")
            store.erase("c")
        assert path.stat().st_size == size
    assert zip_contents(path) == {"a": b"0", "b": b"1"}
