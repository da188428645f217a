"""Advisory key locks for stores without transactions: what makes a read-modify-write of
one key (a chunk, a shard, a ``zarr.json``) exclusive across threads and processes.

A fixed number of lock *stripes* (``STRIPES``), each a file in a lock directory; a key
maps to the stripe ``crc32(key) % STRIPES`` (the same in every process: Python's own
``hash`` of a str differs per process). Holding a key means holding its stripe:

* across processes, an exclusive ``flock(2)`` of the stripe's file. The kernel releases it
  when the holder's last descriptor of it closes, so a process killed while holding it
  (SIGKILL included) leaves nothing locked;
* across threads of one process, a re-entrant mutex per stripe taken before the
  ``flock``: a ``flock`` belongs to the open file description, which every thread of the
  process shares, so it alone would let two threads in at once. The mutex is per table
  (per store handle); two handles in one process open their own descriptors, and
  ``flock`` excludes them from each other as it excludes processes.

Several keys are locked stripe by stripe in ascending stripe order, so two holders of
overlapping key sets cannot deadlock. Two keys on one stripe share its lock (a holder of
one makes the other wait): a bounded file count (``STRIPES`` files, however many chunks)
for an occasional needless wait.

After ``fork`` the child must not use the parent's descriptors (they share the parent's
open file descriptions, hence its locks): a table seen from another process drops them
and opens its own.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # no flock (Windows): no key locks
    fcntl = None  # type: ignore[assignment]

from ..errors import ConflictError, StoreError
from ..runtime.process import current_pid

#: number of lock files; part of the on-disk contract (every process must agree)
STRIPES = 64


def stripe_of(key: str) -> int:
    """The stripe that guards ``key``: the same number in every process."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % STRIPES


class _Stripe:
    __slots__ = ("mutex", "depth", "fd")

    def __init__(self) -> None:
        self.mutex = threading.RLock()
        self.depth = 0              # holds by the thread that owns the mutex
        self.fd: int | None = None


class KeyLockTable:
    """The stripes of one store handle. ``directory()`` names the directory that holds
    the lock files (created on first use, as are the files); ``timeout`` bounds each
    wait for a lock (None: wait as long as it takes; then :class:`ConflictError`).
    ``translate(error, where)`` turns an OSError into a kvzarr error."""

    def __init__(self, directory: Callable[[], Path], timeout: float | None,
                 translate: Callable[[OSError, str], StoreError]) -> None:
        self._directory = directory
        self._dir: Path | None = None
        self.timeout = timeout
        self._translate = translate
        self._pid = current_pid()
        self._stripes = [_Stripe() for _ in range(STRIPES)]
        self._open_lock = threading.Lock()

    def hold(self, keys: Sequence[str]) -> "_Held":
        """A context manager holding every key of ``keys`` (see the module docstring)."""
        return _Held(self, sorted({stripe_of(k) for k in keys}))

    # -- one stripe ------------------------------------------------------------------------

    def _acquire(self, index: int, deadline: float | None) -> None:
        if self._pid != current_pid():
            self._after_fork()
        stripe = self._stripes[index]
        wait = -1 if deadline is None else max(0.0, deadline - time.monotonic())
        if not stripe.mutex.acquire(timeout=wait):
            raise ConflictError("timed out waiting for another thread's key lock",
                                hint="raise lock_timeout")
        if stripe.depth:            # this thread holds the stripe already
            stripe.depth += 1
            return
        try:
            self._flock(self._fd(index, stripe), deadline)
        except BaseException as e:
            stripe.mutex.release()
            if isinstance(e, OSError) and not isinstance(e, StoreError):
                # a filesystem that cannot lock (ENOLCK, EOPNOTSUPP on some network ones)
                raise self._translate(e, f"key lock stripe {index}") from e
            raise
        stripe.depth = 1

    def _release(self, index: int) -> None:
        stripe = self._stripes[index]
        stripe.depth -= 1
        try:
            if stripe.depth == 0 and stripe.fd is not None:
                fcntl.flock(stripe.fd, fcntl.LOCK_UN)
        finally:
            stripe.mutex.release()

    def _fd(self, index: int, stripe: _Stripe) -> int:
        if stripe.fd is not None:
            return stripe.fd
        with self._open_lock:
            if self._dir is None:
                self._dir = self._directory()
            path = self._dir / f"stripe-{index}"
            try:
                # read-only is enough for flock, and works on a file another user made
                stripe.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError as e:
                raise self._translate(e, str(path)) from e
        return stripe.fd

    def _flock(self, fd: int, deadline: float | None) -> None:
        flock_until(fd, deadline, "another process's key lock", 0.0005, 0.02)

    def _after_fork(self) -> None:
        """In a forked child: the inherited descriptors share the parent's locks; close
        them (the parent's stay held by the parent) and start from fresh mutexes."""
        for stripe in self._stripes:
            if stripe.fd is not None:
                try:
                    os.close(stripe.fd)
                except OSError:
                    pass
        self._stripes = [_Stripe() for _ in range(STRIPES)]
        self._open_lock = threading.Lock()
        self._pid = current_pid()

    def __del__(self) -> None:
        # a store dropped without close() must not keep its lock files open
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Close the lock files (releasing any lock still held through them)."""
        if self._pid != current_pid():
            self._after_fork()
            return
        for stripe in self._stripes:
            if stripe.fd is not None:
                fd, stripe.fd = stripe.fd, None
                try:
                    os.close(fd)
                except OSError:
                    pass


class _Held:
    """``with table.hold(keys):`` — the stripes, taken in ascending order, released in
    reverse; a failure half way releases what was taken."""

    __slots__ = ("table", "stripes", "taken")

    def __init__(self, table: KeyLockTable, stripes: list[int]) -> None:
        self.table = table
        self.stripes = stripes
        self.taken = 0

    def __enter__(self) -> None:
        table = self.table
        timeout = table.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            for index in self.stripes:
                table._acquire(index, deadline)
                self.taken += 1
        except BaseException:
            self._release()
            raise

    def __exit__(self, *exc: Any) -> None:
        self._release()

    def _release(self) -> None:
        table = self.table
        while self.taken:
            self.taken -= 1
            table._release(self.stripes[self.taken])


def flock_until(fd: int, deadline: float | None, holder: str, first_delay: float,
                max_delay: float) -> None:
    """An exclusive ``flock`` of ``fd``: blocking when ``deadline`` (a
    ``time.monotonic()`` value) is None, else polled with a backoff from
    ``first_delay`` to ``max_delay`` seconds, and ConflictError ("timed out waiting for
    ``holder``") once the deadline has passed."""
    if deadline is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    delay = first_delay
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ConflictError(f"timed out waiting for {holder}",
                                    hint="raise lock_timeout") from None
            time.sleep(delay)
            delay = min(delay * 2, max_delay)
