"""Chunks encoded on the worker pool while the store writes the ones already encoded.

A write of many compressed chunks into a transactional store used to encode them all,
then hand them to the store: the store's work (copying into the database, a B-tree, the
write-ahead log) came on top of the encoding. Here the pool encodes batch k+1, k+2, ...
while the caller stores batch k inside its one write transaction; py-lmdb and sqlite3
release the GIL while they write, so the two overlap (Zarr v3 core spec, "Chunk
encoding": each chunk is encoded independently, so batches need no order but the
store's).

Promises:

* batches come back in the order they were given, each as ``fn`` returned it;
* at most ``window`` batches are encoded or waiting at once, so the memory held is a
  few batches, not the whole write;
* :meth:`EncodeAhead.first` waits for the first batch: an encoding error in it surfaces
  before the caller takes the store's write lock;
* leaving the ``with`` block (normally or by an exception, e.g. a failed batch) cancels
  what has not started and waits for what runs, so no worker still reads the caller's
  array when the write returns; a failed write's transaction rolls back whatever batches
  it stored, so the store is left unchanged.

Thread promises: one caller thread drives it; never from a pool worker (a worker
waiting for the pool could wait for itself: callers check :func:`workers.in_worker`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from ..runtime import workers


class EncodeAhead:
    """``fn(batch)`` for each of ``batches`` on the worker pool, handed back in order."""

    def __init__(self, fn: Callable[[Any], Any], batches: Sequence[Any], window: int) -> None:
        self._fn = fn
        self._batches = batches
        self._next = 0
        self._window = max(1, window)
        self._pending: deque[Future] = deque()
        self._fill()

    def _fill(self) -> None:
        while len(self._pending) < self._window and self._next < len(self._batches):
            self._pending.append(workers.POOL.submit(self._fn, self._batches[self._next]))
            self._next += 1

    def first(self) -> None:
        """Wait until the first batch is encoded (raising what its encoding raised)."""
        if self._pending:
            self._pending[0].result()

    def __iter__(self) -> Iterator[Any]:
        while self._pending:
            result = self._pending.popleft().result()
            self._fill()   # before the caller stores this batch: the pool keeps working
            yield result

    def __enter__(self) -> EncodeAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        pending, self._pending = self._pending, deque()
        self._next = len(self._batches)
        workers.drain(pending)


def batches_of(items: Sequence[Any], sizes: Sequence[int], target: int) -> list[list[Any]]:
    """``items`` cut in order into runs of about ``target`` bytes (``sizes`` are the
    items' bytes), at least one item each."""
    out: list[list[Any]] = []
    run: list[Any] = []
    total = 0
    for item, size in zip(items, sizes):
        run.append(item)
        total += size
        if total >= target:
            out.append(run)
            run, total = [], 0
    if run:
        out.append(run)
    return out
