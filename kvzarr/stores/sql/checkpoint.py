"""Checkpoints of a SQLite write-ahead log after large commits, run on a thread of the
store so that the writer does not wait for them (https://www.sqlite.org/wal.html,
"Checkpointing" and "Automatic Checkpoint").

In WAL mode a commit appends the transaction's pages to the ``-wal`` file and syncs it:
from then on the transaction is durable. A checkpoint later copies those pages into the
database file and syncs that. SQLite runs the checkpoint inside the COMMIT whose pages
take the log past ``wal_autocheckpoint`` pages (1000), so the writer of a large
transaction waited for a second copy of all it wrote before its commit returned. For a
transaction that wrote at least :data:`LARGE_COMMIT_BYTES` the store turns the automatic
checkpoint off for that one COMMIT (``PRAGMA wal_autocheckpoint = 0``, set back right
after, on the same connection, before it serves anyone else) and asks
:class:`BackgroundCheckpoints` for a ``PASSIVE`` checkpoint instead.

Promises:

* durability and isolation are those of any commit: nothing is acknowledged before the
  log is synced, and readers read the log until the pages are copied;
* at most one checkpoint thread per store; a large commit while it runs makes it run
  once more when done (a passive checkpoint copies only what was committed when it
  began);
* a checkpoint that cannot run (another one holds SQLite's checkpoint lock, an error)
  is skipped: the next automatic checkpoint, or the last connection's close, copies the
  pages. A process killed during one leaves a valid database: SQLite's checkpoint can be
  cut at any point and the log stays until the database file is synced;
* :meth:`BackgroundCheckpoints.wait` (the store closing) returns once no checkpoint of
  this process runs; a forked child neither waits for nor uses its parent's thread.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable

from ...runtime.process import current_pid

#: bytes a write transaction stores before its commit leaves the checkpoint to the
#: store's thread: half of what SQLite's automatic checkpoint waits for (1000 pages of
#: 16 KiB), so a transaction this big makes the COMMIT checkpoint about every other time
LARGE_COMMIT_BYTES = 8 * 1024 * 1024
#: SQLite's default ``wal_autocheckpoint``, set back after a large commit
AUTOCHECKPOINT_PAGES = 1000


class BackgroundCheckpoints:
    """Runs ``checkpoint()`` (one passive checkpoint on a connection of the store) on a
    thread of its own when asked, never two at once."""

    def __init__(self, checkpoint: Callable[[], None]) -> None:
        self._checkpoint = checkpoint
        self._reset()
        ref = weakref.ref(self)

        def _in_child() -> None:   # the parent's thread does not exist in the child
            me = ref()
            if me is not None:
                me._reset()

        if hasattr(os, "register_at_fork"):   # POSIX only; elsewhere no fork()
            os.register_at_fork(after_in_child=_in_child)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._busy = False
        self._again = False
        self._pid = current_pid()

    def request(self) -> None:
        """Checkpoint soon, on the store's thread (started if none runs)."""
        with self._lock:
            if self._busy:
                self._again = True
                return
            self._busy = True
            # not a daemon: an exiting interpreter lets the copy finish (and the last
            # connection's close then removes the log) instead of cutting it
            self._thread = threading.Thread(target=self._run, daemon=False,
                                            name="kvzarr-sqlite-checkpoint")
            self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self._checkpoint()
            except Exception:    # skipped: a later checkpoint copies the pages (above)
                pass
            with self._lock:
                if not self._again:
                    self._busy = False
                    return
                self._again = False

    def wait(self) -> None:
        """Return once no checkpoint of this process runs."""
        thread = self._thread
        if thread is not None and self._pid == current_pid() \
                and thread is not threading.current_thread():
            thread.join()
