"""Encoding that runs while a store writes: whole chunks are encoded on the worker pool
and handed to the writing thread as they are ready, so a transactional store's puts
overlap the encoding of what comes after them instead of waiting for all of it.

A write of whole chunks used to encode a batch on the pool, then store it, then encode
the next: the store's puts (copies into LMDB's map, SQLite's page writes) ran while
every worker stood idle, and the pool idled at the tail of every batch. Here a producer
thread runs the encoding (which fans out onto the pool as before); each finished chunk
or shard goes into a queue; the writing thread takes whatever is ready, stores it, and
comes back for more.

Promises:

* ``items`` yields lists of ``(key, bytes or None)`` in the order they finish; every
  item the producer emits is yielded exactly once, unless the stream is closed early;
* at most ``window`` encoded bytes wait in the queue: a worker that finishes a chunk
  while it is full waits for the writer to take some (so a store slower than the
  encoder does not make a write hold all its encoded bytes at once);
* an exception in the producer reaches the writer, after what was emitted before it,
  when the writer asks for more; the writer's own exception (or an early close)
  stops the producer: no worker waits on a full queue, no new chunk starts;
* when :meth:`close` returns (leaving the ``with`` block), the producer has finished
  and no worker still runs a task of it: what the encoding read from (the caller's
  array) may be let go.

Not for a call made on a pool worker: the worker would wait for the producer, which
waits for the pool (the caller encodes inline instead; :func:`usable`). For the same
reason the writer, while the stream is open, runs inline what it would hand to the pool
(a zip store's CRC-32s, a checksum transformer's digests): the pool's workers may all
be waiting for it to take what they encoded, with its tasks queued behind theirs.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..runtime import workers

#: what the producer hands over: a list of (key, bytes or None to erase)
Items = list[tuple[str, Any]]


class _Stopped(Exception):
    """Raised in a worker that emits after the writer closed the stream: ends the
    producer's encoding through its own failure path (which cancels what has not
    started and waits for what runs)."""


def usable() -> bool:
    """Whether the calling thread may wait for a stream (it is not a pool worker)."""
    return not workers.in_worker()


class EncodeStream:
    """``produce(emit)`` run on a thread of its own; ``emit(items)`` queues encoded
    items for :meth:`items`. Use as a context manager."""

    def __init__(self, produce: Callable[[Callable[[Items], None]], Any],
                 window: int, raw_bytes: int = 0) -> None:
        self._produce = produce
        #: the bytes it encodes, before encoding (a bound on what it hands over, for
        #: compressed data; Store.expect_writes)
        self.raw_bytes = raw_bytes
        self._window = window
        self._cond = threading.Condition()
        self._queue: deque[Items] = deque()
        self._queued_bytes = 0
        self._finished = False          # the producer returned or raised
        self._error: BaseException | None = None
        self._stopped = False           # the writer closed the stream
        self._thread = threading.Thread(target=self._run, name="kvzarr-encode",
                                        daemon=True)

    def __enter__(self) -> "EncodeStream":
        self._inline = workers.inline()
        self._inline.__enter__()
        try:
            self._thread.start()
        except BaseException:
            self._inline.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.close()
        finally:
            self._inline.__exit__(None, None, None)

    def _run(self) -> None:
        try:
            self._produce(self._emit)
        except BaseException as e:   # handed to the writer (a _Stopped: nobody asks)
            error: BaseException | None = e
        else:
            error = None
        with self._cond:
            self._error = error
            self._finished = True
            self._cond.notify_all()

    def _emit(self, items: Items) -> None:
        size = sum(len(v) for _, v in items if v is not None)
        with self._cond:
            # An item bigger than the window still goes when the queue is empty.
            while (self._queue and self._queued_bytes + size > self._window
                   and not self._stopped):
                self._cond.wait()
            if self._stopped:
                raise _Stopped()
            self._queue.append(items)
            self._queued_bytes += size
            self._cond.notify_all()

    def items(self) -> Iterator[Items]:
        """Everything ready at each step (one list, waiting until there is some), until
        the producer is done; then its exception, if it raised one."""
        while True:
            with self._cond:
                while not self._queue and not self._finished:
                    self._cond.wait()
                if self._queue:
                    batch: Items = []
                    while self._queue:
                        batch.extend(self._queue.popleft())
                    self._queued_bytes = 0
                    self._cond.notify_all()
                elif self._error is not None:
                    raise self._error
                else:
                    return
            yield batch

    def close(self) -> None:
        """Stop the producer if it still runs and wait for it to end."""
        with self._cond:
            self._stopped = True
            self._queue.clear()
            self._queued_bytes = 0
            self._cond.notify_all()
        if self._thread.ident is not None:
            self._thread.join()
