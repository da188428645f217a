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

from collections.abc import Callable

from ...runtime.background import BackgroundJob

#: bytes a write transaction stores before its commit leaves the checkpoint to the
#: store's thread: half of what SQLite's automatic checkpoint waits for (1000 pages of
#: 16 KiB), so a transaction this big makes the COMMIT checkpoint about every other time
LARGE_COMMIT_BYTES = 8 * 1024 * 1024
#: SQLite's default ``wal_autocheckpoint``, set back after a large commit
AUTOCHECKPOINT_PAGES = 1000


class BackgroundCheckpoints(BackgroundJob):
    """Runs ``checkpoint()`` (one passive checkpoint on a connection of the store) on a
    thread of its own when asked, never two at once (runtime/background.py). Not a daemon: an
    exiting interpreter lets the copy finish (and the last connection's close then
    removes the log) instead of cutting it."""

    def __init__(self, checkpoint: Callable[[], None]) -> None:
        super().__init__(checkpoint, name="kvzarr-sqlite-checkpoint", daemon=False)
