"""Early flushing of the bytes a large write transaction has handed to the operating
system, so that its commit waits for less.

A durable commit ends with an ``fsync``. The bytes written before it wait in the page
cache until then, and the writer then waits for all of them to reach stable storage at
once: 0.25-0.3 s for 150 MB on a 2-core VM, up to a quarter of a bulk write of
compressed chunks (W1 of benchmarks/, 256 MiB of blosc-zstd). Every
:data:`WRITEBACK_BYTES` a transaction writes, the store flushes what the file holds so
far (``fdatasync``) on a thread of its own, while the writer goes on encoding and
writing; the commit's own sync then flushes only the rest. Two stores do this:

* the SQLite store, for the ``-wal`` file: a write transaction in WAL mode appends its
  pages there as SQLite's page cache spills them, long before the COMMIT;
* the zip store, for the archive: a transaction appends its members past the end of
  the archive as they are set (zipcommit.py).

Promises:

* nothing about durability changes: the early flushes write bytes the commit's sync
  would write anyway, and the commit still syncs the file. Bytes past the last commit
  are ignored when the file is read (a WAL's frames after its last commit frame,
  https://www.sqlite.org/fileformat2.html, "The Write-Ahead Log"; a zip's members past
  the directory its commit record names), so flushing them early exposes nothing;
* the writer never waits for it: one flush runs at a time, and one asked for while it
  runs makes it run once more;
* the file is opened by its path at each run, so a run after the writer closed its own
  descriptor flushes whatever file is there now, which is harmless. The stores lock
  other files (SQLite the database and its ``-shm``, the zip store a sidecar), so
  closing this descriptor drops no lock of theirs;
* where ``fdatasync`` does not exist or fails, nothing happens. A write error it meets
  still reaches the commit: Linux reports a write-back error to the sync of every
  descriptor that was open when it happened (the writer's among them).

Why a flush and not only a write-back (``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which
this module used first): on the VM measured, a disk's cache flush costs in proportion
to what was written since the last one, whether or not it was already written back.
146 MB written over 0.75 s, then ``fdatasync``: 235-300 ms without help, 230-260 ms
after a write-back every 16 MiB, 10-15 ms after an ``fdatasync`` every 16 MiB on a
thread, which did not slow the writer.

Measured in the stores (alternating runs of each; benchmarks/ W1 and W3 shapes):

* zip, 256 MiB of 1 MiB stored chunks, fsync=True: 293-575 MB/s with write-back only,
  437-541 with flushes;
* SQLite, W3's 26 MB sharded write: the COMMIT 72-103 ms with write-back every 16 MiB,
  41-48 ms with flushes every 4 MiB;
* LMDB does not do it. Without its write map (the default where commits sync) the
  pages reach the file only at commit. With it, flushes halved the commit but the
  total did not move: at commit LMDB clears a flag in the header of every page it
  changed, through the map, and a page changed through a map is written back as its
  whole page-cache folio (up to 2 MiB on Linux 6.18; stores/lmdb.md, "Write map"):
  133 one-byte changes 1.1 MB apart made ``fdatasync`` write 116 MB in 110-130 ms,
  the same changes made with ``pwrite`` 0.55 MB in 6-8 ms.
"""

from __future__ import annotations

import os

from ..runtime.background import BackgroundJob

#: bytes a transaction stores between two flushes (W3 above: 4 MiB left the SQLite
#: COMMIT 44 ms, 8 MiB 55 ms, 16 MiB 70 ms; each costs one flush of the disk's cache)
WRITEBACK_BYTES = 4 * 1024 * 1024

_FDATASYNC = getattr(os, "fdatasync", None)


def available() -> bool:
    """Whether this system can flush a file early."""
    return _FDATASYNC is not None


class FileWriteback(BackgroundJob):
    """Flushes the file at ``path`` on a thread named ``name``, when asked
    (:meth:`request`), never twice at once (runtime/background.py)."""

    def __init__(self, path: str, name: str) -> None:
        self.path = path
        #: runs that flushed the file (for tests and the curious)
        self.started = 0
        super().__init__(self._flush, name=name, daemon=True)

    def request(self) -> None:
        if _FDATASYNC is not None:
            super().request()

    def _flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return          # no such file (a rollback-journal database, or not written yet)
        try:
            _FDATASYNC(fd)
            self.started += 1
        except OSError:
            pass            # the commit's own sync reports what matters
        finally:
            os.close(fd)
