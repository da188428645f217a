"""kvzarr's worker threads: ONE pool for the whole process, safe across ``fork()``.

Everything that runs in parallel runs here: chunks encoded and decoded (the compressors
and numpy copies release the GIL), the inner chunks of a shard (:func:`map_items`), one
large chunk's Blosc blocks (:func:`share`), and batches of file reads and writes (file
I/O releases the GIL too). Promises:

* a task already running on a worker does not fan out onto the pool again (it runs its
  items inline): a worker waiting for the pool could wait for itself, and the cores are
  busy anyway;
* a forked child gets a fresh pool on first use: the parent's threads do not exist in
  the child, and a copied executor would queue work that no thread ever runs;
* results come back in the order of the items; when one fails, what has not started is
  cancelled and what runs is waited for before the exception reaches the caller.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

_local = threading.local()


def _mark_worker() -> None:
    _local.worker = True


def _mark_sync_thread() -> None:
    _local.worker = True         # nothing it runs fans out onto POOL either
    _local.syncing = True


class ForkSafeExecutor:
    """A ThreadPoolExecutor that a forked child makes anew. The child has none of the
    parent's threads, but a copied executor believes its idle ones are there and
    would queue work that no thread ever runs."""

    def __init__(self, **options: object) -> None:
        self._options = options
        self._forget()
        if hasattr(os, "register_at_fork"):   # POSIX only; elsewhere no fork()
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        # (after a fork: the child's only thread, so nothing races this)
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def _current(self) -> ThreadPoolExecutor:
        executor = self._executor
        if executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(**self._options)  # type: ignore[arg-type]
                executor = self._executor
        return executor

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return self._current().submit(fn, *args, **kwargs)

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any]) -> Iterator[Any]:
        """As ThreadPoolExecutor.map, except that when a task fails (or the caller stops
        early) the rest are cancelled or finished before the caller goes on (see
        :func:`drain`)."""
        futures = [self.submit(fn, *args) for args in zip(*iterables)]

        def results() -> Iterator[Any]:
            try:
                for future in futures:
                    yield future.result()
            except BaseException:
                drain(futures)
                raise
        return results()


#: the threads of :data:`POOL`, one per core. Measured on 2 cores: with 8 threads (the old
#: file I/O pool's size) small-chunk reads on a directory store ran at ~6,500 chunks/s
#: against ~11,000 with 2 (the extra threads fought over the GIL), and sharded reads
#: were slower too.
WORKERS = max(2, os.cpu_count() or 2)
THREADS = WORKERS

POOL = ForkSafeExecutor(max_workers=THREADS, thread_name_prefix="kvzarr-worker",
                        initializer=_mark_worker)

#: threads that mostly wait for a disk to make data durable (``fsync``): a second pool,
#: since a wait there holds no core, and a disk (or a virtual one) works on several
#: syncs at once. Measured on 2 cores writing and syncing 256 files of 1 MiB: 2 threads
#: ~300 MB/s, 8 threads ~350, 16 threads ~400; the encoding stays on :data:`POOL`.
SYNC_THREADS = 8

SYNC_POOL = ForkSafeExecutor(max_workers=SYNC_THREADS, thread_name_prefix="kvzarr-sync",
                             initializer=_mark_sync_thread)

#: fewer items than this run inline in :func:`map_items`
MIN_ITEMS = 4
#: fewer raw (decoded) bytes than this run inline in :func:`map_items`
MIN_BYTES = 256 * 1024


def in_sync_thread() -> bool:
    """Whether this thread is one of :data:`SYNC_POOL`'s."""
    return getattr(_local, "syncing", False)


def worth_threads(count: int, raw_bytes: int) -> bool:
    """Whether ``count`` items of ``raw_bytes`` in all are worth handing to the pool:
    small batches run inline, where the hand-off would cost more than it saves."""
    return count >= MIN_ITEMS and raw_bytes >= MIN_BYTES


def map_items(fn: Callable[[Any], Any], items: Iterable[Any], parallel: bool) -> list[Any]:
    """``[fn(x) for x in items]``, on the pool when ``parallel`` (and not already on a
    worker), one task per item. For items too small to be a task each, see
    :func:`map_grouped`."""
    items = list(items)
    if not parallel or len(items) < 2 or in_worker():
        return [fn(x) for x in items]
    return list(POOL.map(fn, items))


def map_grouped(fn: Callable[[Any], Any], items: Iterable[Any], parallel: bool) -> list[Any]:
    """``[fn(item) for item in items]``, on the pool when ``parallel``. Items go to the
    threads in a few contiguous groups: one task per item costs more than a small chunk's
    whole decode. A pool worker or a sync thread runs them itself; a thread inside an
    :func:`inline` block (an encoding stream's writer) hands them to the sync threads
    instead (:func:`map_aside`): queued on the pool, they would wait behind tasks that
    wait for that thread."""
    return start_grouped(fn, items, parallel).result()


class Started:
    """Results of :func:`start_grouped` on their way: :meth:`result` waits for them, in
    the order of the items, and :meth:`drain` lets them go (a caller whose own work
    failed: no task may still read what it lets go next)."""

    def __init__(self, futures: list[Future], inline_run: Callable[[], list[Any]] | None
                 ) -> None:
        self._futures, self._inline_run = futures, inline_run

    def result(self) -> list[Any]:
        if self._inline_run is not None:
            return self._inline_run()
        out: list[Any] = []
        try:
            for future in self._futures:
                out.extend(future.result())
        except BaseException:
            drain(self._futures)
            raise
        return out

    def drain(self) -> None:
        drain(self._futures)


def start_grouped(fn: Callable[[Any], Any], items: Iterable[Any], parallel: bool
                  ) -> Started:
    """:func:`map_grouped`, begun: the groups go to the threads now and the caller does
    other work (a write of the same buffers) before it asks for the results. Where
    :func:`map_grouped` would run the items itself, they run when asked for."""
    items = list(items)
    pool, threads = POOL, WORKERS
    if not parallel or len(items) < 2 or getattr(_local, "syncing", False):
        pool = None
    elif in_worker():
        pool = SYNC_POOL if getattr(_local, "aside", False) else None   # map_aside's
    if pool is None:
        return Started([], lambda: [fn(item) for item in items])
    return Started(_submit_groups(pool, threads, fn, items), None)


def map_waiting(fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """``[fn(item) for item in items]`` on :data:`SYNC_POOL`, for items that spend their
    time waiting for a disk (a write and its ``fsync``): up to :data:`SYNC_THREADS` wait
    at once, in a few groups per thread. Safe from a :data:`POOL` worker (the two pools
    never wait for each other); from a sync thread it runs inline."""
    items = list(items)
    if len(items) < 2 or getattr(_local, "syncing", False):
        return [fn(item) for item in items]
    return _map_in_groups(SYNC_POOL, SYNC_THREADS, fn, items)


#: :func:`map_probed` reads this many items on the calling thread first, and hands the
#: rest to the pool only if those took over PROBE_SECONDS each (a 4 KiB file read from
#: the page cache takes ~20 us; from a disk, ~200 us)
PROBE_ITEMS = 32
PROBE_SECONDS = 60e-6


def map_probed(fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """``[fn(item) for item in items]`` for items that are small file reads: as
    :func:`map_probed_runs`."""
    items = list(items)
    return map_probed_runs(lambda lo, hi: [fn(item) for item in items[lo:hi]], len(items))


def map_probed_runs(run: Callable[[int, int], list[Any]], count: int) -> list[Any]:
    """``run(0, count)``, where ``run(lo, hi)`` returns the results of items ``lo`` to
    ``hi - 1``, each a small file read of a few system calls: the first
    :data:`PROBE_ITEMS` on this thread, the rest on the pool only if those waited for a
    disk. From the page cache, two threads passing the GIL back and forth at every
    system call read at about 0.6x one thread's speed; from a disk, the pool's threads
    overlap their waits."""
    if count <= PROBE_ITEMS:
        return run(0, count)
    start = time.perf_counter()
    first = run(0, PROBE_ITEMS)
    waited = (time.perf_counter() - start) / PROBE_ITEMS > PROBE_SECONDS
    return first + map_ranges(run, PROBE_ITEMS, count, parallel=waited)


def map_ranges(run: Callable[[int, int], list[Any]], lo: int, hi: int,
               parallel: bool) -> list[Any]:
    """``run(lo, hi)``; when ``parallel``, cut into four runs per pool thread, results in
    order."""
    if not parallel or hi - lo < 2 or in_worker():
        return run(lo, hi)
    step = -(-(hi - lo) // min(hi - lo, WORKERS * 4))
    out: list[Any] = []
    for part in POOL.map(lambda i: run(i, min(hi, i + step)), range(lo, hi, step)):
        out.extend(part)
    return out


def map_aside(fn: Callable[[Any], Any], items: Iterable[Any], parallel: bool) -> list[Any]:
    """``[fn(item) for item in items]``, when ``parallel`` on :data:`SYNC_POOL`'s threads,
    four groups per core: for work that releases the GIL (a checksum, a copy into
    the page cache) done by a thread that must not queue on :data:`POOL`, such as an
    encoding stream's writer (see :func:`inline`), whose queued tasks would wait behind
    encoders that wait for it. From a sync thread it runs inline."""
    items = list(items)
    if not parallel or len(items) < 2 or getattr(_local, "syncing", False):
        return [fn(item) for item in items]
    return _map_in_groups(SYNC_POOL, WORKERS, fn, items)


def _map_in_groups(pool: ForkSafeExecutor, threads: int, fn: Callable[[Any], Any],
                   items: list[Any]) -> list[Any]:
    """``[fn(item) for item in items]`` on ``pool``, in four contiguous groups per
    thread, results in order."""
    # (a failed item stops the call only once no other is running: the items may be
    # views that end with the caller's transaction)
    return Started(_submit_groups(pool, threads, fn, items), None).result()


def _submit_groups(pool: ForkSafeExecutor, threads: int, fn: Callable[[Any], Any],
                   items: list[Any]) -> list[Future]:
    """One task per contiguous group of ``items``, four groups per thread."""
    groups = min(len(items), threads * 4)
    size = -(-len(items) // groups)
    run = lambda part: [fn(item) for item in part]  # noqa: E731
    futures: list[Future] = []
    try:
        for i in range(0, len(items), size):
            futures.append(pool.submit(run, items[i:i + size]))
    except BaseException:
        drain(futures)
        raise
    return futures


def share(fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """``[fn(item) for item in items]`` with the pool's help. The caller runs the first
    item, then, from the end of the list, every item no worker has started yet; it waits
    only for items already running. When other threads or processes keep the cores busy
    the workers start late and the caller does nearly all of it, as one thread would,
    without paying for hand-offs that bought nothing. (Never waiting for an item that is
    still queued also means a caller cannot wait on itself.)"""
    items = list(items)
    if len(items) < 2 or in_worker():
        return [fn(item) for item in items]
    futures = [POOL.submit(fn, item) for item in items[1:]]
    out: list[Any] = [None] * len(items)
    try:
        out[0] = fn(items[0])
        for i in range(len(items) - 1, 0, -1):   # the workers take them from the front
            if futures[i - 1].cancel():
                out[i] = fn(items[i])
        for i, future in enumerate(futures, 1):
            if not future.cancelled():
                out[i] = future.result()
    finally:
        drain(futures)
    return out


def drain(futures: Iterable[Future]) -> None:
    """Cancel what has not started and wait for what has. Called on the way out of a
    failed batch: no task may still run on what the caller lets go next (a value viewed
    in a store's memory map is gone once its transaction ends)."""
    running = [f for f in futures if not f.cancel()]
    wait(running)   # (a cancelled one counts as done only once a worker dequeues it)


@contextmanager
def inline() -> Iterator[None]:
    """Inside the block the calling thread does itself what it would hand to
    :data:`POOL` (as a worker does), and what :func:`map_grouped` would hand there goes
    to the sync threads: for a thread the pool's tasks may wait for. An encoding
    stream's writer is one: its workers wait for it to take what they encoded, so work
    it queued behind theirs would never run."""
    was = getattr(_local, "worker", False), getattr(_local, "aside", False)
    _local.worker = _local.aside = True
    try:
        yield
    finally:
        _local.worker, _local.aside = was


def in_worker() -> bool:
    """Whether the calling thread is one of :data:`POOL`'s."""
    return getattr(_local, "worker", False)


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def idle_cores() -> int:
    """How many of :func:`cores` nothing wants right now, besides the caller's: on
    Linux from the count of runnable threads in /proc/loadavg (the caller among them,
    about 8 us to read); elsewhere all but one. Work split for one caller is worth
    handing out only to these: on cores other threads or processes keep busy, the
    parts displace their work and the hand-offs cost more than they give."""
    try:
        with open("/proc/loadavg", "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        running = 1
    return max(0, cores() - max(1, running))
