"""The zip store's commits held without a central directory (``ZipStore(directory=
"close")``), until ``flush()`` or ``close()`` writes one for all of them.

A zip's central directory lists every member and must end the file (PKWARE APPNOTE
6.3.x, 4.3.12-4.3.16), so a store that keeps the archive valid after every commit writes
the whole directory each time: O(members) per commit, however small the commit. Python's
``zipfile`` and zarr-python's zip stores write it once, at close. A handle with
``directory="close"`` does the same, and keeps what they do not:

* Each commit still appends its members past the end of the archive as a normal commit
  does (:class:`~kvzarr.stores.zipcommit.PendingAppend`), with the commit record saying
  the archive ends at its last directory; it writes no directory. The handle keeps the
  writer lock from its first such commit until the directory is written, so nothing else
  writes the archive meanwhile (other writers wait; other processes' readers read the
  archive as its last directory left it).
* The handle's own readers see each commit at once: an in-memory version of the archive
  (``HeldCommits.version``) points at the appended members.
* A transaction that fails cuts only its own members away; the held commits stay.
* :meth:`HeldCommits.finish` writes one directory of the latest version after them, with
  the commit record's final target (synced when the store syncs): one commit of
  everything held, as :meth:`PendingAppend.finish` makes any commit.
* A crash before that loses the held commits and nothing else: the archive is the one
  its last directory describes (the commit record says where that ends), and the next
  writer cuts the tail away.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

from ..runtime.process import current_pid
from .ziparchive import ArchiveVersion
from .zipcommit import PendingAppend


class HeldCommits:
    """The commits one handle appended since the archive's last directory: the append
    they share and the archive version they make. Inactive (no ``pending``) when there
    are none. Owned by the handle; the writer lock is held while active."""

    __slots__ = ("pending", "version", "pid", "lock_fd")

    def __init__(self) -> None:
        self.pending: PendingAppend | None = None
        #: the archive as the held commits made it: what the handle reads
        self.version: ArchiveVersion | None = None
        self.pid = 0                 # the process that holds them (a fork does not)
        self.lock_fd = -1            # the sidecar whose lock they hold

    @property
    def active(self) -> bool:
        return self.pending is not None

    def hold(self, pending: PendingAppend, version: ArchiveVersion, lock_fd: int) -> None:
        """One more commit held: ``version`` (read through its own descriptor) is the
        archive with its members, appended by ``pending``."""
        self.pending, self.version = pending, version
        self.pid, self.lock_fd = current_pid(), lock_fd

    def cut(self, mark: int) -> None:
        """A transaction that appended from ``mark`` failed (or changed nothing): cut its
        members away; the commits held before it stay."""
        pending = self.pending
        if pending is not None and pending.pos > mark:
            os.ftruncate(pending.fd, mark)
            pending.pos = mark

    def drop(self) -> None:
        """Give up every held commit: the archive as its last directory left it."""
        if self.pending is not None:
            self.pending.abandon()
        self.clear()

    def finish(self, version: ArchiveVersion) -> tuple[os.stat_result, Any, int, int]:
        """Write the central directory of ``version`` after the held members: the
        commit of them all. Returns the file's status, its file object (the caller's
        now), where the archive ends and where its directory starts. The caller clears
        the held commits once it has taken the new version."""
        pending = self.pending
        assert pending is not None
        directory = pending.directory(version.records, version.members.values(),
                                      version.foreign, version.comment)
        cd_start = pending.pos
        try:
            st, file = pending.finish(directory)
        except BaseException:
            # no part of a directory stays behind the members: the next commit or
            # flush writes after them as if this one had not been tried
            os.ftruncate(pending.fd, cd_start)
            raise
        return st, file, directory.pos, cd_start

    def clear(self) -> None:
        self.pending = self.version = None

    def finish_quietly(self) -> None:
        """At the handle's garbage collection or the interpreter's exit without a close:
        write the directory (the commits are kept) and unlock; errors are swallowed, the
        next writer then cuts the tail. Only in the process that holds them."""
        if self.pending is None or self.pid != current_pid():
            return
        try:
            _, file, _, _ = self.finish(self.version)
            file.close()
        except Exception:
            pass
        finally:
            self.clear()
            try:
                fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
            except Exception:
                pass
