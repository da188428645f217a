"""Early write-back of the bytes a large write transaction has handed to the operating
system, so that its commit waits for less.

A durable commit ends with an ``fsync``. The bytes written before it wait in the page
cache until then, and the writer then waits for all of them to reach the disk at once:
0.1-0.2 s for 150 MB on a 2-core VM, up to a quarter of a bulk write of compressed
chunks (W1 of benchmarks/, 256 MiB of blosc-zstd). Every :data:`WRITEBACK_BYTES` a
transaction writes, the store asks the kernel to start writing what the file holds so
far (``sync_file_range(SYNC_FILE_RANGE_WRITE)``,
https://man7.org/linux/man-pages/man2/sync_file_range.2.html) on a thread of its own,
while the writer goes on encoding and writing. Two stores do this:

* the SQLite store, for the ``-wal`` file: a write transaction in WAL mode appends its
  pages there as SQLite's page cache spills them, long before the COMMIT;
* the zip store, for the archive: a transaction appends its members past the end of
  the archive as they are set (zipcommit.py).

Promises:

* nothing about durability changes: the kernel is only asked early for writes it makes
  anyway (at the fsync, or under memory pressure); the commit still syncs the file.
  Bytes past the last commit are ignored when the file is read (a WAL's frames after
  its last commit frame, https://www.sqlite.org/fileformat2.html, "The Write-Ahead Log";
  a zip's members past the directory its commit record names);
* the writer never waits for it: one request runs at a time, and one asked for while
  it runs makes it run once more;
* the file is opened by its path at each run, so a run after the writer closed its own
  descriptor starts the write-back of whatever file is there now, which is harmless;
* where the call does not exist (not Linux) or fails, nothing happens.

Measured:

* SQLite (W1, 256 MiB of blosc-zstd chunks into a new file, synchronous=FULL): about
  1.1-1.2x the write rate;
* zip (256 MiB of 1 MiB stored chunks, fsync=True): 384-435 MB/s without it, 402-487
  with it, alternating runs of each;
* LMDB's write map did not gain from the same (slower in the same runs), so the LMDB
  store does not do it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any

from ..runtime.background import BackgroundJob

#: bytes a transaction stores between two requests
WRITEBACK_BYTES = 16 * 1024 * 1024
#: sync_file_range's flag: start writing the dirty pages of the range, do not wait
_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _sync_file_range()


def available() -> bool:
    """Whether this system can start a file's write-back early."""
    return _SYNC_FILE_RANGE is not None


class FileWriteback(BackgroundJob):
    """Starts the write-back of the file at ``path`` on a thread named ``name``, when
    asked (:meth:`request`), never twice at once (runtime/background.py)."""

    def __init__(self, path: str, name: str) -> None:
        self.path = path
        #: runs that started a write-back (for tests and the curious)
        self.started = 0
        super().__init__(self._start_writeback, name=name, daemon=True)

    def request(self) -> None:
        if _SYNC_FILE_RANGE is not None:
            super().request()

    def _start_writeback(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return          # no such file (a rollback-journal database, or not written yet)
        try:
            if _SYNC_FILE_RANGE(fd, 0, 0, _SYNC_FILE_RANGE_WRITE) == 0:
                self.started += 1
        finally:
            os.close(fd)

