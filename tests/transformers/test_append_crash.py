"""SIGKILL trials: a child process writes tiles into shards through AppendShards (appends,
automatic compactions, rewrites) and is killed at a random moment; every shard must then
hold its old or its new content, read by a fresh handle before anyone repairs anything.
100 trials per store that appends (filesystem, SQLite, and PostgreSQL when
KVZARR_TEST_POSTGRES_URL is set), plus filesystem trials with appends of several MiB, so
that kills land inside the write itself and tear it.

The writes are a deterministic sequence (write ``i`` is a function of ``i``): the child
reports in shared memory how many it has finished, so the parent can compute the two
contents the store may hold, the one before the write in flight and the one after it.
(The shared counter has no lock: a child killed while holding one would leave it held.)
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.stores.filesystem import APPEND_MARKER, FilesystemStore
from kvzarr.stores.sql import SQLStore

from ..forkserver import forkserver_context

PG_URL = os.environ.get("KVZARR_TEST_POSTGRES_URL")

SHAPE, INNER, SHARD = (256, 256), (32, 32), (128, 128)
TRIALS = 100


def _open(kind: str, location: str, *, read_only: bool = False, fsync: bool = False):
    if kind == "filesystem":
        return FilesystemStore(location, read_only=read_only, fsync=fsync)
    if kind == "sqlite":
        return SQLStore(location, read_only=read_only, busy_timeout=30, retries=30)
    return SQLStore(PG_URL, table=location, read_only=read_only, busy_timeout=30, retries=30)


def _write(i: int) -> tuple[tuple[slice, slice], np.ndarray]:
    """Write number ``i`` of the sequence: a selection and its values. Most are whole
    inner chunks (appended as they are), some part of one (read, merged, appended), some
    span inner chunks or shards."""
    rng = np.random.default_rng(i)
    kind = rng.integers(0, 10)
    if kind < 6:
        y, x = rng.integers(0, 8, 2) * 32
        sel = (slice(y, y + 32), slice(x, x + 32))
    elif kind < 9:
        y, x = rng.integers(0, 240, 2)
        h, w = rng.integers(1, 17, 2)
        sel = (slice(y, y + h), slice(x, x + w))
    else:
        y, x = rng.integers(0, 160, 2)
        sel = (slice(y, y + 96), slice(x, x + 96))
    shape = tuple(s.stop - s.start for s in sel)
    return sel, rng.integers(0, 65535, shape, dtype="uint16")


def _state_after(state: np.ndarray, start: int, stop: int) -> np.ndarray:
    out = state.copy()
    for i in range(start, stop):
        sel, value = _write(i)
        out[sel] = value
    return out


def _tile_writer(kind: str, location: str, start: int, fsync: bool, done, ready) -> None:
    store = kvzarr.open_store(_open(kind, location, fsync=fsync), transformers=[
        {"name": "append_shards", "max_garbage": 0.5}])
    a = kvzarr.open_array(store, path="img")
    ready.set()
    i = start
    while True:
        sel, value = _write(i)
        a[sel] = value
        i += 1
        done.value = i


def _forkserver(monkeypatch: pytest.MonkeyPatch):
    return forkserver_context(monkeypatch, sys.modules[__name__],
                              preload=("kvzarr", "kvzarr.stores.sql"))


def _markers(root: Path) -> list[Path]:
    return [p for p in root.rglob(f"*{APPEND_MARKER}*")]


@pytest.mark.parametrize("kind", ["filesystem", "sqlite"] + (["postgresql"] if PG_URL else []))
def test_a_killed_tile_writer_leaves_every_shard_old_or_new(kind, tmp_path, monkeypatch):
    ctx = _forkserver(monkeypatch)
    location = {"filesystem": str(tmp_path / "img.zarr"), "sqlite": str(tmp_path / "img.db"),
                "postgresql": f"t_{uuid.uuid4().hex[:12]}"}[kind]
    state = np.random.default_rng(0).integers(0, 65535, SHAPE, dtype="uint16")
    with _open(kind, location) as store:
        a = kvzarr.create_array(store, name="img", shape=SHAPE, chunks=INNER, shards=SHARD,
                                dtype="uint16", fill_value=0, compressors=None)
        a[:] = state
    rng = random.Random(20240612)
    step, outcomes, inside = 0, {"old": 0, "new": 0, "mixed": 0}, 0
    # One reader for every trial: it opens the store as it is after each kill, before any
    # writer has repaired anything (the filesystem store keeps nothing between reads).
    reader = _open(kind, location, read_only=True)
    try:
        for trial in range(TRIALS):
            done, ready = ctx.Value("q", step, lock=False), ctx.Event()
            fsync = kind == "filesystem" and trial % 2 == 0
            p = ctx.Process(target=_tile_writer,
                            args=(kind, location, step, fsync, done, ready))
            p.start()
            assert ready.wait(60), "the writer did not start"
            time.sleep(rng.uniform(0.0, 0.03 if kind == "filesystem" else 0.05))
            os.kill(p.pid, signal.SIGKILL)
            p.join(30)
            finished = done.value
            if kind == "filesystem" and _markers(Path(location)):
                inside += 1            # killed inside an append (its marker is there)
            got = kvzarr.open_array(reader, path="img", mode="r")[:]
            old = _state_after(state, step, finished)
            new = _state_after(old, finished, finished + 1)
            if kind == "filesystem":
                # no transactions across keys: each shard on its own is old or new
                for y in range(0, SHAPE[0], SHARD[0]):
                    for x in range(0, SHAPE[1], SHARD[1]):
                        r = (slice(y, y + SHARD[0]), slice(x, x + SHARD[1]))
                        assert np.array_equal(got[r], old[r]) or np.array_equal(
                            got[r], new[r]), (f"trial {trial}: shard at {(y, x)} is neither "
                                              f"its content before nor after write "
                                              f"{finished}")
            else:
                # a write is one transaction: the whole array is old or new
                assert np.array_equal(got, old) or np.array_equal(got, new), (
                    f"trial {trial}: the array is neither the state after write "
                    f"{finished} nor after write {finished + 1}")
            which = ("old" if np.array_equal(got, old) else
                     "new" if np.array_equal(got, new) else "mixed")
            outcomes[which] += 1
            state, step = got, finished + (which != "old")
        # the trials wrote and appended: there is garbage for a compaction to reclaim
        report = kvzarr.compact(_open(kind, location), dry_run=True)
        assert report.reclaimed > 0
        assert step > TRIALS // 10, "the writers hardly wrote anything before the kills"
        if kind == "filesystem":
            assert inside > 0, "no kill landed inside an append"
        # a writer carries on from what the last one left (repairing a killed append)
        with kvzarr.open_store(_open(kind, location), transformers=["append_shards"]) as st:
            a = kvzarr.open_array(st, path="img")
            sel, value = _write(step)
            a[sel] = value
            state[sel] = value
            np.testing.assert_array_equal(a[:], state)
            a[:] = state          # dense rewrites leave no marker behind
    finally:
        reader.close()
        if kind == "postgresql":
            from tests.stores.test_sql import _drop_pg_tables
            _drop_pg_tables(PG_URL, location)
    if kind == "filesystem":
        assert _markers(Path(location)) == []


# --- torn appends on the filesystem -------------------------------------------------------

BLOCK = 6 << 20          # one append: long enough for a kill to land inside the write


def _block(i: int) -> bytes:
    return bytes([i % 251]) * (BLOCK + i)


def _big_appender(root: str, done, ready) -> None:
    store = FilesystemStore(root)
    size = store.getsize("k")
    n = done.value
    ready.set()
    while True:
        store.append("k", _block(n), expected_size=size)
        size += len(_block(n))
        n += 1
        done.value = n


def test_a_kill_inside_a_big_append_tears_the_file_but_never_the_value(tmp_path,
                                                                          monkeypatch):
    ctx = _forkserver(monkeypatch)
    root = tmp_path / "d"
    FilesystemStore(root).set("k", b"base")
    rng = random.Random(7)
    torn = 0
    for trial in range(30):
        store = FilesystemStore(root)
        store.set("k", b"base")           # start each trial small again
        done, ready = ctx.Value("q", 0, lock=False), ctx.Event()
        p = ctx.Process(target=_big_appender, args=(str(root), done, ready))
        p.start()
        assert ready.wait(60)
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(p.pid, signal.SIGKILL)
        p.join(30)
        n = done.value
        file_size = (root / "k").stat().st_size
        ro = FilesystemStore(root, read_only=True)
        value = ro.get("k")
        before = b"base" + b"".join(_block(i) for i in range(n))
        after = before + _block(n)
        assert value in (before, after), f"trial {trial}: a torn value was served"
        assert ro.getsize("k") == len(value)
        assert ro.get_partial_values([("k", None)]) == [value]
        if file_size not in (len(before), len(after)):
            torn += 1                     # the file itself was torn; the value was not
        # the next append repairs the file and goes on from the value
        store.append("k", b"!", expected_size=len(value))
        assert store.get("k") == value + b"!"
        assert _markers(root) == []
    assert torn > 0, "no kill landed inside a write: the trial did not test torn appends"
