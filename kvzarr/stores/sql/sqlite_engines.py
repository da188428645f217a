"""The SQLAlchemy engines of SQLite files: one per file and connection settings in a
process, shared by the stores open on it and kept for the next one.

Building an engine (``create_engine``, its pool and events, the dialect's checks on its
first connection) costs as much again as opening the file: a program that opens a store
for every call (a path given to each read) paid it every time.

Promises:

* stores open on one file with the same settings (open mode, ``busy_timeout``,
  ``synchronous``, read-only) share one engine and its pool;
* when the last of them closes, the engine's pool is disposed: every connection is
  closed, so the file is left exactly as by any close (the last connection to close
  checkpoints the log and removes the ``-wal`` and ``-shm`` files). Only the engine
  object is kept, without a connection, for the next store on that file;
* at most :data:`KEPT_UNUSED` engines without a store are kept, the least recently used
  dropped first;
* a caller that disposes a shared engine (``store.engine.dispose()``) makes every
  store on it drop its idle connections, which belonged to the disposed pool.

Forked children: each store's backend forgets the parent's connections in the child
(backends.py); the registry itself only renews its lock.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

#: engines kept with no store open on them
KEPT_UNUSED = 16


class _Entry:
    """A shared engine, the number of stores using it and their backends (weakly: a
    backend's idle connections are dropped when a caller disposes the engine)."""

    __slots__ = ("engine", "users", "backends")

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.users = 0
        self.backends: weakref.WeakSet[Any] = weakref.WeakSet()
        event.listen(engine, "engine_disposed", self._drop_idle)

    def _drop_idle(self, engine: sa.Engine) -> None:
        for backend in list(self.backends):
            backend.drop_idle()


_entries: OrderedDict[Hashable, _Entry] = OrderedDict()
_lock = threading.Lock()


def acquire(key: Hashable, build: Callable[[], sa.Engine], backend: Any) -> sa.Engine:
    """The engine for ``key`` (built by ``build()`` if none is kept), now also used by
    ``backend``; hand it back with :func:`release`."""
    with _lock:
        entry = _entries.get(key)
        if entry is None:
            entry = _entries[key] = _Entry(build())
        else:
            _entries.move_to_end(key)
        entry.users += 1
        entry.backends.add(backend)
        _trim()
        return entry.engine


def release(key: Hashable, backend: Any) -> None:
    """``backend`` (which has given back its connections) no longer uses the engine of
    ``key``; the last one's release closes every connection of the engine."""
    with _lock:
        entry = _entries.get(key)
        if entry is None:
            return
        entry.backends.discard(backend)
        entry.users -= 1
        if entry.users > 0:
            return
        _entries.move_to_end(key)       # the most recently used of the unused
        _trim()
        engine = entry.engine
    # Outside the lock (closing the last connection may checkpoint a long log). A store
    # opened on the file meanwhile loses nothing: the pool closes only connections that
    # no one holds.
    engine.dispose()


def _trim() -> None:
    unused = [key for key, entry in _entries.items() if entry.users == 0]
    for key in unused[:max(0, len(unused) - KEPT_UNUSED)]:
        del _entries[key]


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):   # POSIX only; elsewhere no fork()
    os.register_at_fork(after_in_child=_after_fork_in_child)
