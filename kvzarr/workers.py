"""kvzarr's codec worker threads: one pool for the whole process.

Chunks are encoded and decoded on it (the compressors release the GIL), and one large
chunk's Blosc blocks are compressed with its help (:func:`share`). Work already running
on a worker does not fan out onto the pool again: a worker waiting for the pool could
wait for itself, and the cores are busy anyway.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

_local = threading.local()


def _mark_worker() -> None:
    _local.worker = True


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


#: the number of threads of :data:`POOL`
WORKERS = max(2, os.cpu_count() or 2)

POOL = ForkSafeExecutor(max_workers=WORKERS, thread_name_prefix="kvzarr-codec",
                        initializer=_mark_worker)


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
