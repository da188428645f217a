"""kvzarr.engine.encode_stream and the streamed write path: encoded chunks reach the store
while the rest are still being encoded, every one exactly once; the queue between them
stays within its window; a failure on either side stops the other and leaves the store
as it was; no thread of a write outlives it."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import kvzarr
from kvzarr.engine import chunk_io
from kvzarr.engine.encode_stream import EncodeStream
from kvzarr.errors import CodecError, StoreFullError
from kvzarr.runtime import workers
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.sql import SQLStore

GZIP = [{"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "gzip", "configuration": {"level": 1}}]


def _encode_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kvzarr-encode"]


def test_every_item_is_handed_over_once_and_the_producer_ends():
    def produce(emit):
        workers.map_items(lambda i: emit([(f"k{i}", bytes([i % 256]) * 100)]), range(500),
                          parallel=True)

    got: list[str] = []
    with EncodeStream(produce, window=10_000) as stream:
        for items in stream.items():
            got += [k for k, _ in items]
    assert sorted(got) == sorted(f"k{i}" for i in range(500))
    assert not _encode_threads()


def test_a_full_queue_holds_the_producer_back():
    """Items of 1,000 bytes into a 3,000-byte window, taken slowly: never more than the
    window waits (an item goes when the queue is empty, whatever its size)."""
    queued: list[int] = []

    def produce(emit):
        for i in range(40):
            emit([(f"k{i}", b"x" * 1000)])

    with EncodeStream(produce, window=3000) as stream:
        for items in stream.items():
            queued.append(sum(len(v) for _, v in items))
            time.sleep(0.002)
    assert sum(queued) == 40_000
    assert max(queued) <= 3000
    assert len(queued) >= 40_000 // 3000


def test_an_item_bigger_than_the_window_still_goes():
    with EncodeStream(lambda emit: emit([("big", b"x" * 10_000)]), window=100) as stream:
        assert [k for items in stream.items() for k, _ in items] == ["big"]


def test_the_producers_error_comes_after_what_it_emitted_first():
    def produce(emit):
        emit([("a", b"1")])
        emit([("b", None)])
        raise CodecError("chunk c does not encode")

    got: list[tuple[str, bytes | None]] = []
    with EncodeStream(produce, window=1 << 20) as stream:
        with pytest.raises(CodecError, match="chunk c"):
            for items in stream.items():
                got += items
    assert got == [("a", b"1"), ("b", None)]


def test_closing_early_stops_the_producer_and_waits_for_its_workers():
    """The writer fails after the first item: the producer's blocked and later emits
    fail, its pool tasks that have not started are cancelled, and close() returns only
    once no task of it runs."""
    started: list[int] = []
    running = threading.Semaphore(0)
    active = [0]
    lock = threading.Lock()

    def task(i: int, emit) -> None:
        with lock:
            active[0] += 1
            started.append(i)
        try:
            time.sleep(0.005)
            emit([(f"k{i}", b"x" * 1000)])
        finally:
            with lock:
                active[0] -= 1
            running.release()

    def produce(emit):
        workers.map_items(lambda i: task(i, emit), range(200), parallel=True)

    stream = EncodeStream(produce, window=2000)
    with pytest.raises(RuntimeError, match="the store failed"):
        with stream:
            for _ in stream.items():
                raise RuntimeError("the store failed")
    assert active[0] == 0                       # nothing of it runs once close() returned
    assert len(started) < 200                   # and what had not started never did
    assert not _encode_threads()


def _array(store, shape=(512, 512), chunks=(64, 64)):
    return kvzarr.create_array(store, name="a", shape=shape, chunks=chunks, dtype="int32",
                               codecs=GZIP, fill_value=0)


def _data(shape=(512, 512)):
    return np.random.default_rng(0).integers(0, 1000, shape, dtype="int32")


@pytest.fixture(params=["lmdb", "sqlite", "memory"])
def store(request, tmp_path):
    if request.param == "lmdb":
        s = LMDBStore(tmp_path / "s.lmdb")
    elif request.param == "sqlite":
        s = SQLStore(tmp_path / "s.sqlite")
    else:
        s = kvzarr.MemoryStore()
    yield s
    s.close()


class _Recording(kvzarr.MemoryStore):
    """A memory store that notes, at each set_many, how many chunks had been encoded."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded = 0
        self.seen_at_puts: list[int] = []
        self.in_transaction_puts = 0

    def set_many(self, items):
        items = list(items)
        if any("/c/" in k for k, _ in items):
            self.seen_at_puts.append(self.encoded)
            self.in_transaction_puts += self._current_transaction() is not None
        super().set_many(items)


def test_chunks_reach_the_store_while_others_are_still_encoded(monkeypatch):
    """64 gzip chunks, each encode slowed to 5 ms: the first chunks are put inside the
    write transaction long before the last is encoded, in several puts."""
    store = _Recording()
    a = _array(store)
    original = chunk_io.ChunkIO._encode_chunk

    def slow_encode(self, chunk, spec):
        time.sleep(0.005)
        out = original(self, chunk, spec)
        store.encoded += 1          # (a race between two workers only undercounts)
        return out

    monkeypatch.setattr(chunk_io.ChunkIO, "_encode_chunk", slow_encode)
    data = _data()
    a[...] = data
    assert store.seen_at_puts and store.seen_at_puts[0] < 32
    assert len(store.seen_at_puts) > 1
    assert store.in_transaction_puts == len(store.seen_at_puts)
    np.testing.assert_array_equal(a[...], data)


def test_streamed_writes_read_back_on_every_store(store):
    a = _array(store)
    data = _data()
    a[...] = data
    a[3:300, 5:77] = data[3:300, 5:77] * 2       # whole and partial chunks together
    want = data.copy()
    want[3:300, 5:77] *= 2
    np.testing.assert_array_equal(kvzarr.open_array(store, path="a")[...], want)


def test_a_chunk_that_fails_to_encode_leaves_the_store_as_it_was(store, monkeypatch):
    a = _array(store)
    before = _data()
    a[...] = before
    original = chunk_io.ChunkIO._encode_chunk
    calls = [0]

    def failing(self, chunk, spec):
        calls[0] += 1
        if calls[0] == 40:
            raise CodecError("the 40th chunk does not encode")
        return original(self, chunk, spec)

    monkeypatch.setattr(chunk_io.ChunkIO, "_encode_chunk", failing)
    with pytest.raises(CodecError, match="40th"):
        a[...] = before + 1
    monkeypatch.undo()
    np.testing.assert_array_equal(kvzarr.open_array(store, path="a")[...], before)
    assert not _encode_threads()


def test_a_store_that_fills_up_mid_stream_stops_the_encoding(tmp_path):
    """An LMDB map too small for the write: the put fails part way through the stream,
    nothing of the write is stored, and no encoding thread is left running."""
    store = LMDBStore(tmp_path / "s.lmdb", map_size_start=1 << 20, map_size_max=4 << 20)
    a = _array(store, shape=(1024, 1024), chunks=(128, 128))
    noise = np.random.default_rng(1).integers(0, 2**31, (1024, 1024), dtype="int32")
    with pytest.raises(StoreFullError):
        a[...] = noise
    assert not _encode_threads()
    assert not list(store.list_prefix("a/c/"))
    assert not np.any(kvzarr.open_array(store, path="a")[...])
    store.close()


def test_the_lmdb_map_grows_once_for_a_streamed_write(tmp_path, monkeypatch):
    """The write tells the store what is coming (expect_writes): the map grows once
    before the first put instead of again and again, each time replaying the puts."""
    from kvzarr.stores.lmdb.env import SharedEnv
    grows: list[int] = []
    original = SharedEnv.grow

    def counting(self, pending, headroom=2):
        grows.append(pending)
        return original(self, pending, headroom)

    monkeypatch.setattr(SharedEnv, "grow", counting)
    store = LMDBStore(tmp_path / "s.lmdb", map_size_start=1 << 20)
    a = _array(store, shape=(1024, 1024), chunks=(128, 128))
    grows.clear()
    noise = np.random.default_rng(1).integers(0, 2**31, (1024, 1024), dtype="int32")
    a[...] = noise
    assert len(grows) == 1
    np.testing.assert_array_equal(a[...], noise)
    store.close()


def test_a_hint_beyond_the_map_limit_is_no_error(tmp_path):
    """expect_writes asks for more than map_size_max allows: the transaction goes on,
    with what it wrote before the hint, and commits what fits."""
    store = LMDBStore(tmp_path / "s.lmdb", map_size_start=1 << 20, map_size_max=8 << 20)
    with store.transaction():
        store.set("before", b"1" * 100_000)
        store.expect_writes(1 << 30)
        store.set("after", b"2" * 100_000)
    assert store.get("before") == b"1" * 100_000
    assert store.get("after") == b"2" * 100_000
    store.close()


_WRITER_USES_THE_POOL = """
import numpy as np, sys, kvzarr
from kvzarr.engine import chunk_io
from kvzarr.stores.zip import ZipStore
chunk_io._STREAM_WINDOW_BYTES = 1       # every worker waits for the writer at each chunk
store = ZipStore(sys.argv[1], fsync=False)
a = kvzarr.create_array(store, name="a", shape=(64, 256, 256), chunks=(1, 256, 256),
                        dtype="float64", compressors=[{"name": "gzip",
                                                       "configuration": {"level": 1}}])
value = np.random.default_rng(0).normal(size=a.shape)
for _ in range(3):
    a[...] = value
assert np.array_equal(a[...], value)
store.close()
"""


def test_a_writer_whose_store_uses_the_pool_is_not_left_waiting_for_it(tmp_path):
    """The zip store checksums a large group of values on the worker pool. As the
    stream's writer it used to queue those tasks behind the encoding tasks, whose
    workers waited (full window) for the writer to take their chunks: a hang. A
    process of its own, so a hang fails the test instead of the session."""
    import subprocess
    import sys
    try:
        done = subprocess.run([sys.executable, "-c", _WRITER_USES_THE_POOL,
                               str(tmp_path / "a.zip")], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the streamed write into the zip store hung")
    assert done.returncode == 0, done.stderr.decode()


def test_a_stream_writer_s_zip_checksums_still_run_on_several_threads(tmp_path, monkeypatch):
    """The writer must not queue on the pool (above), so the zip store hands its
    checksums (and deflate) to the sync threads instead (workers.map_aside): a deflated
    archive written through a stream is not checksummed by one thread."""
    import threading
    import zipfile

    from kvzarr.stores import zipcommit
    from kvzarr.stores.zip import ZipStore
    names: set[str] = set()
    real = zipcommit.encode_value

    def spy(*args):  # type: ignore[no-untyped-def]
        names.add(threading.current_thread().name)
        return real(*args)
    monkeypatch.setattr(zipcommit, "encode_value", spy)
    store = ZipStore(tmp_path / "a.zip", fsync=False, compression=zipfile.ZIP_DEFLATED)
    a = kvzarr.create_array(store, name="a", shape=(32, 256, 256), chunks=(1, 256, 256),
                            dtype="float64",
                            compressors=[{"name": "gzip", "configuration": {"level": 1}}])
    value = np.random.default_rng(1).normal(size=a.shape)
    a[...] = value
    assert any(name.startswith("kvzarr-sync") for name in names), names
    np.testing.assert_array_equal(a[...], value)
    store.close()
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:    # a valid archive
        assert archive.testzip() is None
