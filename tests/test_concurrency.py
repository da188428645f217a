"""Several processes writing one array through the Array API on the transactional stores
and on the directory store (which holds its key lock around each read-modify-write).

Each writer sets its own interleaved elements, one partial-chunk write at a time, so every
write is a read-modify-write of a chunk (or a shard) that the other writers are also
changing. Afterwards every element must hold its writer's last value: zero lost updates.
A reader in another process must see each multi-chunk write entirely or not at all.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

import kvzarr

WRITERS = 4
WRITES_EACH = 1000
ROUNDS = 300
CONTEXT = mp.get_context("spawn")


def _targets(tmp_path):
    targets = [("lmdb", str(tmp_path / "data.lmdb")), ("sqlite", str(tmp_path / "data.sqlite")),
               ("directory", str(tmp_path / "data.zarr"))]
    url = os.environ.get("KVZARR_TEST_POSTGRES_URL")
    if url:
        targets.append(("postgresql", url))
    return targets


def _open_store(target: str, table: str | None):
    if target.startswith("postgresql"):
        from kvzarr.stores.sql import SQLStore
        return SQLStore(target, table=table)
    return kvzarr.open_store(target)


def _writer(target, table, path, writer, start_event):
    store = _open_store(target, table)
    a = kvzarr.open_array(store, path=path)
    n = a.shape[0]
    mine = np.arange(writer, n, WRITERS)
    start_event.wait()
    for step in range(WRITES_EACH):
        i = int(mine[step % len(mine)])
        a[i] = writer * 100_000 + step  # a partial write of a chunk shared with the others
    store.close()


def _run_writers(target, table, path):
    start = CONTEXT.Event()
    procs = [CONTEXT.Process(target=_writer, args=(target, table, path, w, start))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=300)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


def _expected(n: int) -> np.ndarray:
    out = np.zeros(n, dtype="int64")
    for w in range(WRITERS):
        mine = np.arange(w, n, WRITERS)
        for step in range(WRITES_EACH):
            out[mine[step % len(mine)]] = w * 100_000 + step
    return out


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_no_lost_updates_between_processes(tmp_path, sharded):
    for name, target in _targets(tmp_path):
        table = f"t_conc_{os.getpid()}_{int(sharded)}" if name == "postgresql" else None
        store = _open_store(target if name != "postgresql" else target, table)
        path = f"a_{int(sharded)}"
        kwargs = {"shards": (32,), "chunks": (8,)} if sharded else {"chunks": (16,)}
        kvzarr.create_array(store, name=path, shape=(64,), dtype="int64", overwrite=True,
                            **kwargs)
        store.close()
        _run_writers(target, table, path)
        result = kvzarr.open_array(_open_store(target, table), path=path, mode="r")[...]
        expected = _expected(64)
        lost = int((result != expected).sum())
        assert lost == 0, f"{name}: {lost} lost updates"


def _flipper(target, path, rounds, reader_ready):
    store = kvzarr.open_store(target)
    a = kvzarr.open_array(store, path=path)
    reader_ready.wait(timeout=60)   # the reader is in its loop: the writes overlap it
    for k in range(1, rounds + 1):
        a[...] = k  # one transaction over all four chunks
    store.close()


def _watcher(target, path, queue, reader_ready):
    store = kvzarr.open_store(target)
    a = kvzarr.open_array(store, path=path, mode="r")
    torn = reads = 0
    seen = set()
    last = 0
    while last < ROUNDS:
        values = a[...]
        reads += 1
        reader_ready.set()
        if len(set(values.tolist())) != 1:
            torn += 1
        last = int(values[0])
        seen.add(last)
    queue.put((torn, reads, len(seen)))
    store.close()


@pytest.mark.parametrize("kind", ["lmdb", "sqlite"])
def test_readers_see_whole_transactions(tmp_path, kind):
    target = str(tmp_path / ("data.lmdb" if kind == "lmdb" else "data.sqlite"))
    store = kvzarr.open_store(target)
    kvzarr.create_array(store, name="f", shape=(64,), chunks=(16,), dtype="int32",
                        fill_value=0)
    store.close()
    # The writer starts once the reader has read: a reader whose process started late
    # could otherwise find the writer done and see one state only.
    reader_ready, queue = CONTEXT.Event(), CONTEXT.Queue()
    writer = CONTEXT.Process(target=_flipper, args=(target, "f", ROUNDS, reader_ready))
    reader = CONTEXT.Process(target=_watcher, args=(target, "f", queue, reader_ready))
    writer.start()
    reader.start()
    writer.join(timeout=120)
    torn, reads, distinct = queue.get(timeout=120)
    reader.join(timeout=30)
    assert writer.exitcode == 0 and reader.exitcode == 0
    assert distinct >= 2, "the reader never overlapped the writer; the test proved nothing"
    assert torn == 0, f"{torn} of {reads} reads saw half a write"


APPENDS_EACH = 12


def _appender(target, table, path, writer, start_event):
    store = _open_store(target, table)
    a = kvzarr.open_array(store, path=path)      # its shape is read once, here
    start_event.wait()
    for seq in range(APPENDS_EACH):
        a.append(np.array([[writer, seq, writer * 1000 + seq]], dtype="int64"))
    store.close()


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_processes_appending_to_one_array_lose_no_append(tmp_path, sharded):
    """Array.append grows the shape as stored, not as the handle last saw it: writers in
    several processes that each append rows all keep every row (each exactly once), on
    every store that promises no lost updates. On a directory this also needs edge
    chunks read-modify-written: another writer may have grown the array and written
    past this handle's edge."""
    for name, target in _targets(tmp_path):
        table = f"t_app_{os.getpid()}_{int(sharded)}" if name == "postgresql" else None
        store = _open_store(target, table)
        layout = {"chunks": (2, 3), "shards": (4, 3)} if sharded else {"chunks": (4, 3)}
        kvzarr.create_array(store, name="log", shape=(0, 3), dtype="int64", fill_value=-1,
                            overwrite=True, **layout)
        store.close()
        start = CONTEXT.Event()
        procs = [CONTEXT.Process(target=_appender, args=(target, table, "log", w, start))
                 for w in range(WRITERS)]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(timeout=300)
        assert all(p.exitcode == 0 for p in procs), (name, [p.exitcode for p in procs])
        rows = kvzarr.open_array(_open_store(target, table), path="log", mode="r")[...]
        assert rows.shape == (WRITERS * APPENDS_EACH, 3), name
        got = sorted(map(tuple, rows.tolist()))
        want = sorted((w, s, w * 1000 + s) for w in range(WRITERS) for s in range(APPENDS_EACH))
        assert got == want, f"{name}: rows lost or doubled"


# -- a partial read of a shard while another process rewrites it -----------------------

_VERSIONS = 6


def _version(k: int) -> np.ndarray:
    """Version ``k`` of a 64 x 64 array: values of a range that grows with ``k``, so the
    gzip-compressed inner chunks change size (and the shard's offsets move) between
    versions."""
    rng = np.random.default_rng(k)
    return rng.integers(0, 2 + 40 * k, (64, 64), dtype="uint16")


def _rewriter(target, stop_event):
    a = kvzarr.open_array(target, path="s")
    k = 0
    while not stop_event.is_set():
        a[...] = _version(k % _VERSIONS)   # one whole-shard set: a new file renamed over it
        k += 1


def test_partial_shard_read_during_a_rewrite_sees_one_version_on_a_directory(tmp_path):
    """Regression: on a directory, a tile read of a shard read the index from one file
    and the inner chunks (each range opening the file anew) from whichever file a
    concurrent writer had renamed over the key since: wrong offsets (CodecError) or a
    tile mixing two versions. A read transaction now keeps the file it read open."""
    target = str(tmp_path / "data.zarr")
    a = kvzarr.create_array(target, name="s", shape=(64, 64), dtype="uint16",
                            chunks=(8, 8), shards=(64, 64),
                            compressors=[{"name": "gzip", "configuration": {"level": 1}}])
    a[...] = _version(0)
    versions = [_version(k) for k in range(_VERSIONS)]
    stop = CONTEXT.Event()
    proc = CONTEXT.Process(target=_rewriter, args=(target, stop))
    proc.start()
    try:
        reads = 0
        while reads < 3000 and proc.is_alive():
            tile = a[4:28, 12:36]          # 9+ inner chunks of the one shard, not all of them
            assert any(np.array_equal(tile, v[4:28, 12:36]) for v in versions), \
                "a tile mixing versions of the shard"
            reads += 1
    finally:
        stop.set()
        proc.join(timeout=60)
    assert proc.exitcode == 0
