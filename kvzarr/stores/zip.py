"""ZipStore: every key is one member of a single zip archive. Specification: stores/zip.md.

Implements the Zarr v3 abstract store interface (core spec, "Abstract store interface")
over the ZIP format (PKWARE APPNOTE 6.3.x: local file headers, central directory, ZIP64),
whose byte layout lives in :mod:`kvzarr.stores.zipformat`; this module adds the Store
contract, transactions, the writer lock, and the choice between appending a commit in
place and rewriting the archive (compaction). The append protocol and its crash safety:
:mod:`kvzarr.stores.zipappend`; one loaded version of the archive:
:mod:`kvzarr.stores.ziparchive`; the writers of a commit: :mod:`kvzarr.stores.zipcommit`.

Promises:

* Every write is a transaction; ``with store.transaction():`` groups many into one. A
  commit appends its new members, a central directory of every live member and new end
  records after the old end of the file; nothing before it is rewritten, so readers of
  the previous directory keep reading valid offsets. Replaced and erased members and old
  directories become dead bytes. When dead bytes would reach ``COMPACT_MIN_DEAD`` and
  more than half the file, the commit instead writes a complete new archive next to the
  old one (live members' compressed bytes copied raw), fsyncs it and ``os.replace``-s
  it over the old one; :meth:`ZipStore.compact` does that on demand.
* Crashes: kvzarr sees the old archive or the new one, never a mix. A writer killed
  mid-append leaves the old archive followed by a torn tail, which kvzarr readers skip
  (the commit record in ``<archive>.lock`` says where the archive ended) and the next
  kvzarr writer truncates. Until then, tools that do not know the record (``zipfile``,
  zarr-python, TensorStore) see the torn tail and fail to open the archive: a zip's
  directory must end the file, so that window cannot be closed. A killed rewrite
  leaves a temporary archive, removed by the next writer.
* Overwrite and erase leave exactly one live member per key in the directory, so the
  file stays a plain zip that Python's ``zipfile`` and other Zarr readers open after
  every commit.
* ``directory="close"`` holds commits instead: each appends only its members and the
  handle keeps the writer lock until :meth:`ZipStore.flush` or ``close()`` writes one
  directory for all of them (:mod:`kvzarr.stores.zipheld`); a crash before that loses
  the held commits, never the archive before them.
* Writers in all threads and processes are serialised by ``flock`` on the sidecar file
  ``<archive>.lock``; readers take no lock, read from the archive version they loaded
  and load the next when the file at the path grew or was replaced (inode, size or
  mtime changed).
* Members are stored uncompressed (``ZIP_STORED``) by default, so a byte range is one
  ``pread`` of the member's data. With ``ZIP_DEFLATED`` a range read inflates the member
  from its start, and ``capabilities.partial_reads`` is false.
* Cost: a commit writes its new members and the central directory (46 bytes + the name
  per live member), O(new data + members); a compaction, O(live data).
* ``change_counter()`` names the archive version a read sees: every version this handle
  loads or writes gets the next number of a per-handle sequence (the handle keeps the
  file it loaded open, so its inode cannot be reused by a later file; an append always
  grows the file). A running or torn append is not a new version.
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import itertools
import os
import threading
import time
import weakref
import zipfile
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .byteranges import ByteRequest
from ..errors import (ConflictError, StoreError, StoreFullError, StorePermissionError,
                      UnsupportedOperationError)
from .base import Capabilities, Store
from .keys import check_key, prefix_successor
from .keylocks import flock_until
from ..runtime import workers
from ..runtime.process import current_pid
from .overlay import DELETED, merged_keys
from .writeback import FileWriteback, available as writeback_available
from .ziparchive import ArchiveVersion as _Archive
from .ziparchive import Ident, load, resolve as _resolve
from .ziparchive import ident as _ident
from .zipcommit import TEMP_MARKER, PendingAppend, PendingArchive, rewrite
from .zipdirectory import SortedRecords, records_kept
from .zipformat import SIG_EOCD64, ZIP64_LIMIT, ArchiveFile, Member, footprint, read_directory
from .zipheld import HeldCommits


# The ZIP64 threshold of the archives this module writes, looked up at each commit so
# tests can lower it to exercise ZIP64 fields on small archives.
_ZIP64_LIMIT = ZIP64_LIMIT
#: Compaction: a commit rewrites the archive instead of appending when its dead bytes
#: (replaced and erased members, old directories) would reach this many bytes AND more
#: than half the file. Below it, rewriting costs more than the disk it frees.
COMPACT_MIN_DEAD = 4 << 20
#: members at least this large on average are read ahead on the worker threads
#: (ZipStore.iter_values)
_READ_AHEAD_VALUE_BYTES = 64 * 1024
# Tests reach the format code through this module.
_read_directory, _SIG_EOCD64 = read_directory, SIG_EOCD64


class ZipStore(Store):
    """Keys as members of one zip archive; see the module docstring and stores/zip.md."""

    capabilities = Capabilities(partial_reads=True, partial_writes=False, transactional=True,
                                multi_process=True)
    max_key_bytes = 0xFFFF     # the name length field is 16 bits
    lists_foreign_keys = False # members whose names are not keys are kept apart (foreign)

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False,
                 compression: int = zipfile.ZIP_STORED, compresslevel: int | None = None,
                 fsync: bool = True, lock_timeout: float | None = None,
                 directory: str = "commit") -> None:
        """Open the archive at ``path``, creating an empty one (and its directory) unless
        ``read_only``. ``compression`` is ``zipfile.ZIP_STORED`` or ``ZIP_DEFLATED``
        (``compresslevel`` 0-9). ``fsync=False`` gives up durability on power loss, not
        atomicity. ``lock_timeout`` seconds bound the wait for the writer lock
        (:class:`ConflictError` after); None waits as long as it takes.

        ``directory`` says when the central directory is written: ``"commit"`` (every
        commit: the archive is complete and durable after each) or ``"close"``
        (:meth:`flush`, :meth:`close`, a compaction: commits append only their members,
        the handle holds the writer lock in between, and a crash loses what it held,
        never the archive before; see :mod:`kvzarr.stores.zipheld`)."""
        super().__init__(read_only=read_only)
        if directory not in ("commit", "close"):
            raise UnsupportedOperationError(
                f"zip directory {directory!r} is not supported", field="directory",
                hint='use "commit" (the default) or "close"')
        if compression not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UnsupportedOperationError(
                f"zip compression {compression!r} is not supported", field="compression",
                hint="use zipfile.ZIP_STORED (the default) or zipfile.ZIP_DEFLATED")
        if compression == zipfile.ZIP_DEFLATED:
            self.capabilities = replace(self.capabilities, partial_reads=False)
        if directory == "close":
            # one writing handle until it closes: others wait for the lock it holds
            self.capabilities = replace(self.capabilities, multi_process=False)
        self.path = Path(path).absolute()
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.compression = compression
        self.compresslevel = compresslevel
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self.directory = directory
        self._held = self._new_held()
        #: a durable commit's early flushes of the members it appends (writeback.py)
        self._writeback = (FileWriteback(str(self.path), "kvzarr-zip-writeback")
                           if fsync and not read_only and writeback_available() else None)
        self._pid = current_pid()
        self._mutex = threading.Lock()       # one writing thread of this process at a time
        self._load_lock = threading.Lock()
        self._fd_lock = threading.Lock()     # opening the sidecar's descriptors
        self._lock_fd: int | None = None
        self._record_ro_fd: int | None = None   # the sidecar, on a read-only handle
        self._cleaned = False
        self._archive: _Archive | None = None
        #: the (device, inode, size, mtime) of the file when ``_archive`` was found in it
        self._seen: Ident | None = None
        self._commits = 0                    # commits written by this handle (for tests)
        self._rewrites = 0                   # of which rewrote the whole archive
        self._seqs = itertools.count(1)      # numbers of the archives (change counter)
        if read_only:
            if not self.path.is_file():
                raise StoreError("no zip archive to open read-only", path=str(self.path))
            self._fresh()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise _translate(e, str(self.path)) from e
        if self.path.exists():
            self._clean_if_idle()
        else:
            self._acquire()
            try:
                if not self.path.exists():
                    self._seen, self._archive = self._first_archive()
                    self._archive.seq = next(self._seqs)
            finally:
                self._release()
        self._fresh()

    def _first_archive(self) -> tuple[Ident, _Archive]:
        """Create the empty archive (we hold the writer lock)."""
        try:
            st, file, *_ = rewrite(self.path, [], set(), b"", None, self._lock_file(),
                                   _ZIP64_LIMIT, self.fsync, lambda: None)
        except OSError as e:
            raise _translate(e, str(self.path)) from e
        self._rewrites += 1
        return _ident(st), _Archive(file, {}, [], b"", str(self.path), end=st.st_size,
                                    cd_start=0, live=0, st=st)

    # -- reading -------------------------------------------------------------------------

    def _fresh(self) -> _Archive:
        """The archive now at the path: reloaded when the file changed (a commit appended
        to it, or a compaction replaced it). While the file ends in bytes past the
        archive (a commit being appended, or a torn one) every call looks again."""
        self._check_fork()
        held = self._held.version
        if held is not None:                   # our own commits, past the last directory
            return held
        try:
            ident = _ident(os.stat(self.path))
        except FileNotFoundError:
            raise StoreError("the zip archive was removed", path=str(self.path)) from None
        archive = self._archive
        if archive is not None and self._seen == ident and archive.end == ident[2]:
            return archive
        with self._load_lock:
            archive = self._archive
            if archive is None or self._seen != ident or archive.end != ident[2]:
                self._seen, archive = self._load(archive)
                self._archive = archive
            return archive

    def _load(self, prev: _Archive | None) -> tuple[Ident, _Archive]:
        """The version of the archive its commit record says is complete (``prev`` when
        the file only grew by a commit not finished yet), numbered if it is new."""
        try:
            seen, archive = load(self.path, self._record_fd(), prev)
        except OSError as e:
            if isinstance(e, StoreError):
                raise
            raise _translate(e, str(self.path)) from e
        if archive is not prev:
            archive.seq = next(self._seqs)
        return seen, archive

    def _record_fd(self) -> int | None:
        """The sidecar holding the commit record (None: a read-only handle finds none)."""
        if not self.read_only:
            return self._lock_file()
        with self._fd_lock:
            if self._record_ro_fd is None:
                try:
                    self._record_ro_fd = os.open(self.lock_path, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:
                    return None
                except OSError as e:
                    raise _translate(e, str(self.lock_path)) from e
            return self._record_ro_fd

    def _check_fork(self) -> None:
        """After fork the child owns neither the parent's lock nor its thread state."""
        if self._pid != current_pid():
            self._pid, self._lock_fd, self._archive = current_pid(), None, None
            self._record_ro_fd = None
            self._held = self._new_held()      # the parent's are not ours
            self._mutex = threading.Lock()
            self._load_lock = threading.Lock()
            self._fd_lock = threading.Lock()

    def _new_held(self) -> HeldCommits:
        """directory="close": the commits appended since the last directory, written by
        flush(), close(), or when the handle is dropped or the interpreter exits."""
        held = HeldCommits()
        if self.directory == "close" and not self.read_only:
            weakref.finalize(self, held.finish_quietly)
        return held

    def _view(self) -> tuple[_Archive, Any]:
        """The archive this thread reads and its transaction (None outside one)."""
        txn = self._current_transaction()
        if txn is None:
            return self._fresh(), None
        return txn.archive, txn

    @staticmethod
    def _located(archive: _Archive, txn: Any, key: str) -> tuple[ArchiveFile, Member] | None:
        """Where the value of ``key`` is read from as ``txn`` (None: outside a
        transaction) sees it: the members it appended, else ``archive``; None if absent."""
        if txn is not None and txn.writes and key in txn.writes:
            m = txn.writes[key]
            return None if m is DELETED else (txn.pending.file, m)
        m = archive.members.get(key)
        return None if m is None else (archive, m)

    def _get(self, key: str) -> bytes | None:
        found = self._located(*self._view(), key)
        return None if found is None else found[0].read(found[1])

    def _read_many_into(self, keys: Sequence[str], view: memoryview,
                        size: int) -> list[int | None]:
        # One archive for the whole batch (the read transaction's, or the one at the
        # path now), each member of that size read straight into its place
        # (ArchiveFile.read_into); no value object, no copy.
        archive, txn = self._view()
        located, sizes = self._located, []
        for i, key in enumerate(keys):
            found = located(archive, txn, key)
            if found is None:
                sizes.append(None)
                continue
            file, m = found
            if m.size == size:
                file.read_into(m, view[i * size:(i + 1) * size])
            sizes.append(m.size)
        return sizes

    streams_values = True

    def iter_values(self, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """As :meth:`Store.iter_values`: each member read when it is asked for, or, for
        large members, read ahead on the worker threads (a few per thread), since
        checking a member's CRC-32 costs more than reading it from the page cache and
        zlib-ng lets threads do it at once."""
        archive, txn = self._view()
        found = [self._located(archive, txn, check_key(key, self.max_key_bytes))
                 for key in keys]
        sizes = [entry[1].size for entry in found if entry is not None]
        if (len(sizes) < 2 or workers.in_worker()
                or sum(sizes) < _READ_AHEAD_VALUE_BYTES * len(sizes)):
            for i, entry in enumerate(found):
                yield i, None if entry is None else entry[0].read(entry[1])
            return
        # the archive objects stay open while their reads run: the futures hold them
        ahead: deque[tuple[int, Future | None]] = deque()
        todo = iter(enumerate(found))

        def submit_next() -> None:
            for i, entry in todo:
                ahead.append((i, None if entry is None
                              else workers.POOL.submit(entry[0].read, entry[1])))
                return
        try:
            for _ in range(2 * workers.WORKERS):
                submit_next()
            while ahead:
                i, future = ahead.popleft()
                value = None if future is None else future.result()
                submit_next()
                yield i, value
        finally:
            workers.drain([f for _, f in ahead if f is not None])

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        found = self._located(*self._view(), key)
        if found is None:
            return None
        file, m = found
        return file.read_span(m, *_resolve(request, m.size))

    def _exists(self, key: str) -> bool:
        archive, txn = self._view()
        if txn is not None and txn.writes and key in txn.writes:
            return txn.writes[key] is not DELETED
        return key in archive.members

    def _getsize(self, key: str) -> int | None:
        archive, txn = self._view()
        if txn is not None and txn.writes and key in txn.writes:
            m = txn.writes[key]
            return None if m is DELETED else m.size
        m = archive.members.get(key)
        return None if m is None else m.size

    def _sorted_keys(self, prefix: str) -> tuple[list[str], int, int]:
        """A sorted key list and the index range ``[lo, hi)`` of the keys under ``prefix``."""
        archive, txn = self._view()
        keys = archive.keys
        lo = bisect.bisect_left(keys, prefix)
        succ = prefix_successor(prefix)
        hi = len(keys) if succ is None else bisect.bisect_left(keys, succ, lo)
        if txn is not None and txn.writes:
            keys = merged_keys(keys[lo:hi], txn.writes, prefix)
            lo, hi = 0, len(keys)
        return keys, lo, hi

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        keys, lo, hi = self._sorted_keys(prefix)
        return (keys[i] for i in range(lo, hi))    # key lists are never mutated

    def _list_dir(self, prefix: str) -> Iterator[str]:
        keys, lo, hi = self._sorted_keys(prefix)
        return _children(keys, lo, hi, prefix)

    # -- writing -------------------------------------------------------------------------

    #: values are written to the file by ``_set_many`` (see ``_add``), so callers may
    #: hand over buffers they reuse afterwards
    copies_values = True

    def _set(self, key: str, value: bytes) -> None:
        self._set_many([(key, value)])

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        txn = self._current_transaction()
        if txn is None or txn.writes is None:
            with self.transaction():           # a lone write is a one-write transaction
                self._set_many(items)
            return
        self._add(txn, items)

    def _add(self, txn: Any, items: Sequence[tuple[str, bytes]]) -> None:
        """Append ``items`` past the end of the archive now (kvzarr readers do not look
        there until the commit's directory follows them): the store keeps no copy."""
        if not items:
            return
        pending = self._pending_append(txn)
        try:
            members = pending.add(items, self.compression, self.compresslevel)
        except OSError as e:
            raise _translate(e, str(self.path)) from e
        for m in members:
            txn.writes[m.name] = m

    def _pending_append(self, txn: Any) -> PendingAppend:
        if txn.pending is None:
            old = txn.archive
            try:
                if old.members or old.foreign:
                    txn.pending = PendingAppend(str(self.path), old.file_id, old.end,
                                                self._lock_file(), _ZIP64_LIMIT,
                                                self.fsync, self._writeback)
                else:       # nothing to keep: the commit's members start a new file
                    txn.pending = PendingArchive(self.path, self._lock_file(),
                                                 _ZIP64_LIMIT, self.fsync, old.mode)
            except OSError as e:
                raise _translate(e, str(self.path)) from e
        return txn.pending

    def _erase(self, key: str) -> None:
        txn = self._current_transaction()
        if txn is None or txn.writes is None:
            with self.transaction():
                self._erase(key)
            return
        txn.writes[key] = DELETED

    # Transaction hooks. A write transaction holds the writer lock from begin to end and
    # reads the archive that was current when it got the lock, so nothing can commit
    # between its reads and its commit.

    def _begin(self, write: bool) -> Any:
        if not write:
            return _Txn(self._fresh(), None)
        self._acquire()
        try:
            archive = self._fresh()
            if archive.file is None:           # no archive yet (cannot happen after init)
                raise StoreError("the zip archive is missing", path=str(self.path))
            txn = _Txn(archive, {})
            if self._held.active:              # appends after the commits held so far
                txn.pending = self._held.pending
                txn.mark = txn.pending.pos
            return txn
        except BaseException:
            self._release()
            raise

    def _commit(self, handle: Any) -> None:
        if handle.writes is None:
            return
        done = False          # a commit that changes nothing keeps none of its members
        try:
            old, writes = handle.archive, handle.writes
            if handle.compact or _changes(old, writes):
                seen, archive = self._finish(handle, old, writes)
                archive.seq = handle.seq if handle.seq else next(self._seqs)
                handle.end = archive.end
                with self._load_lock:
                    self._seen, self._archive = seen, archive
                done = True
        finally:
            self._drop_pending(handle, done)
            self._release()

    def _drop_pending(self, txn: Any, committed: bool) -> None:
        """After a transaction: what it appended is cut away unless its commit finished
        it or holds it (directory="close"); commits held before it stay."""
        pending = txn.pending
        if pending is None:
            return
        if pending is self._held.pending:
            if not committed:
                self._held.cut(txn.mark)
        else:
            pending.abandon()                  # no-op once finished

    def _finish(self, txn: Any, old: _Archive, writes: dict[str, Any]
                ) -> tuple[Ident, _Archive]:
        """Commit ``writes``: a directory after the appended members, or (compaction)
        a rewrite of the archive when dead bytes would pass the threshold."""
        # A replaced member is assigned over, not popped and inserted again: a dict
        # with no deleted slots is copied as one block (CPython), where one with them is
        # rebuilt entry by entry (~100 us against ~7 for 4,096 members).
        members, live, limit = dict(old.members), old.live, _ZIP64_LIMIT
        for name, m in writes.items():
            if m is DELETED:
                gone = members.pop(name, None)
            else:
                gone = members.get(name)
                members[name] = m
                live += footprint(m, limit)
            if gone is not None:
                live -= footprint(gone, limit)
        path = str(self.path)
        try:
            # An empty archive is replaced rather than appended to: its end record would
            # stay at offset 0, and a copy of the file cut at byte 22 would be a valid
            # (empty) archive instead of a damaged one. Its commit's members went to a
            # new file from the start (PendingArchive), which now replaces it.
            if not txn.compact and isinstance(txn.pending, PendingArchive):
                return self._replace(txn.pending, old, members, live, writes)
            if not txn.compact and (old.members or old.foreign):
                pending = self._pending_append(txn)
                records = self._sorted_records(old, members, writes)
                dead = pending.pos - live
                if self.directory == "close":
                    if not (dead >= COMPACT_MIN_DEAD and 2 * dead > pending.pos):
                        return self._hold(pending, old, members, live, records)
                else:
                    directory = pending.directory(records, members.values(), old.foreign,
                                                  old.comment)
                    if not (dead >= COMPACT_MIN_DEAD and 2 * dead > directory.pos):
                        st, file = pending.finish(directory)
                        self._commits += 1
                        return _ident(st), _Archive(file, members, list(old.foreign),
                                                    old.comment, path, end=directory.pos,
                                                    cd_start=pending.pos, live=live,
                                                    st=st, records=records)
            return self._rewrite(old, members, txn.pending)
        except OSError as e:
            if isinstance(e, StoreError):
                raise
            raise _translate(e, path) from e

    def _replace(self, pending: PendingArchive, old: _Archive, members: dict[str, Member],
                 live: int, writes: dict[str, Any]) -> tuple[Ident, _Archive]:
        """The commit into an archive with no members: the new file's directory, and
        the file renamed over the archive."""
        records = self._sorted_records(old, members, writes)
        directory = pending.directory(records, members.values(), [], old.comment)
        st, file = pending.finish(directory)
        self._commits += 1
        self._rewrites += 1
        old.close_aside = True                 # its name is gone (see _rewrite)
        return _ident(st), _Archive(file, members, [], old.comment, str(self.path),
                                    end=directory.pos, cd_start=pending.pos, live=live,
                                    st=st, records=records)

    def _hold(self, pending: PendingAppend, old: _Archive, members: dict[str, Member],
              live: int, records: SortedRecords | None) -> tuple[Ident, _Archive]:
        """directory="close": the commit as a version of the archive that only this
        handle reads (through a descriptor of its own, so versions close independently),
        its members held until the next directory."""
        file = os.fdopen(os.dup(pending.fd), "rb")
        version = _Archive(file, members, list(old.foreign), old.comment, str(self.path),
                           end=pending.pos, cd_start=pending.pos, live=live,
                           records=records)
        self._held.hold(pending, version, self._lock_file())
        self._commits += 1
        return self._seen, version

    def flush(self) -> None:
        """Write the central directory of the commits held since the last one
        (``directory="close"``), synced with ``fsync=True``: from then on they are in the
        archive other programs and processes read, and survive a crash; the writer lock
        is released. Nothing to do otherwise (each commit wrote its own directory). Not
        inside a transaction of this thread."""
        if not self._held.active:
            return
        if self._in_write_transaction():
            raise UnsupportedOperationError("flush inside a write transaction",
                                            hint="flush after the transaction")
        self._acquire()
        try:
            self._write_held()
        finally:
            self._release()

    def _write_held(self) -> None:
        """The held commits' directory (we hold the writer lock)."""
        held = self._held
        version = held.version
        if version is None:
            return
        try:
            st, file, end, cd_start = held.finish(version)
        except OSError as e:
            raise _translate(e, str(self.path)) from e
        archive = _Archive(file, version.members, version.foreign, version.comment,
                           str(self.path), end=end, cd_start=cd_start, live=version.live,
                           st=st, records=version.records)
        archive.seq = version.seq              # the same content: a cache stays valid
        with self._load_lock:
            self._seen, self._archive = _ident(st), archive
        held.clear()

    @staticmethod
    def _sorted_records(old: _Archive, members: dict[str, Member],
                        writes: dict[str, Any]) -> SortedRecords | None:
        """The new directory's records in name order: ``old``'s with ``writes`` applied
        when it kept them, else built once. None where records are not kept
        (zipdirectory.records_kept)."""
        if not records_kept(bool(old.foreign), _ZIP64_LIMIT):
            return None
        if old.records is None:
            return SortedRecords.build(members.values())
        return old.records.updated(
            {k: m for k, m in writes.items() if m is not DELETED},
            [k for k, m in writes.items() if m is DELETED])

    def compact(self) -> int:
        """Rewrite the archive without dead bytes (members that were replaced or erased,
        the directories of earlier commits) and return how many bytes that freed. Commits
        do this themselves when dead bytes pass ``COMPACT_MIN_DEAD`` and half the file;
        call this to reclaim the rest (e.g. before shipping the archive). One write
        transaction (inside an open one, part of it): readers keep the archive they
        read, and a crash leaves the old archive or the compacted one."""
        with self.transaction():
            txn = self._current_transaction()
            txn.compact = True
            before = txn.archive.end
        return before - txn.end

    def _change_counter(self) -> int:
        """The number of the archive this thread reads (see the module docstring); in a
        write transaction that changes something, the number its new archive will get
        (reserved now, so no other archive can take it)."""
        txn = self._current_transaction()
        if txn is None:
            return self._fresh().seq
        if txn.writes is None or not (txn.compact or _changes(txn.archive, txn.writes)):
            return txn.archive.seq
        if not txn.seq:
            txn.seq = next(self._seqs)
        return txn.seq

    def _abort(self, handle: Any) -> None:
        if handle.writes is not None:
            try:
                self._drop_pending(handle, False)   # the archive as it was
            finally:
                self._release()

    def _cut_torn_tail(self, old: _Archive) -> None:
        """Truncate what a killed writer appended past ``old`` (we hold the writer lock),
        so that no reader of the file ever parses that tail."""
        if old.file is None:
            return
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == old.file_id and st.st_size > old.end:
                os.truncate(self.path, old.end)
        except OSError as e:
            raise _translate(e, str(self.path)) from e

    def _rewrite(self, old: _Archive, members: dict[str, Member],
                 pending: PendingAppend | None
                 ) -> tuple[Ident, _Archive]:
        """Write ``members`` (and ``old``'s foreign members) as a new archive and swap it
        in: the first archive, a compaction. Members this transaction appended are
        copied from past the old archive's end, which is cut before the swap."""
        plan: list[tuple[str, ArchiveFile, Member]] = [(m.name, old, m) for m in old.foreign]
        for name, m in members.items():
            fresh = pending is not None and m.header_offset >= pending.start
            plan.append((name, pending.file if fresh else old, m))
        plan.sort(key=lambda entry: entry[0])

        def before_swap() -> None:
            if pending is not None and pending is self._held.pending:
                # Held commits are read by this handle's readers from the old file:
                # rather than cut, it gets the directory of ``old`` (a crash before
                # the rename leaves that archive), and this transaction's members
                # stay behind as dead bytes.
                _, file, _, _ = self._held.finish(old)
                file.close()
                self._held.clear()
            elif pending is not None:
                pending.abandon()
            else:
                self._cut_torn_tail(old)

        st, file, new, foreign, cd_start, records = rewrite(
            self.path, plan, {m.name for m in old.foreign}, old.comment, old.mode,
            self._lock_file(), _ZIP64_LIMIT, self.fsync, before_swap)
        self._commits += 1
        self._rewrites += 1
        # the old file is gone from the directory: the last close of it frees its
        # blocks, which is left to a sync thread (zipformat.ArchiveFile.close_aside)
        old.close_aside = True
        return _ident(st), _Archive(file, new, foreign, old.comment, str(self.path),
                                    end=st.st_size, cd_start=cd_start, live=cd_start, st=st,
                                    records=records)

    # -- the writer lock -----------------------------------------------------------------

    def _acquire(self) -> None:
        self._check_fork()
        timeout = self.lock_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._mutex.acquire(timeout=-1 if timeout is None else timeout):
            raise ConflictError("timed out waiting for another writer thread",
                                path=str(self.path), hint="raise lock_timeout")
        try:
            if not self._held.active:          # held commits keep the lock between them
                self._flock(self._lock_file(), deadline)
            if not self._cleaned:
                self._remove_stale_temps()
                self._cleaned = True
        except BaseException as e:
            self._mutex.release()
            if isinstance(e, OSError) and not isinstance(e, StoreError):
                raise _translate(e, str(self.lock_path)) from e
            raise

    def _lock_file(self) -> int:
        """The sidecar, opened once (under a lock: the flock is per descriptor, so two
        descriptors in one process would not exclude each other)."""
        if self._lock_fd is None:
            with self._fd_lock:
                if self._lock_fd is None:
                    self._lock_fd = os.open(self.lock_path,
                                            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        return self._lock_fd

    @staticmethod
    def _flock(fd: int, deadline: float | None) -> None:
        flock_until(fd, deadline, "another writer's commit", 0.001, 0.05)

    def _release(self) -> None:
        try:
            if self._lock_fd is not None and not self._held.active:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

    def _clean_if_idle(self) -> None:
        """At open: remove a killed writer's temporary archive and truncate the torn
        tail it appended, if no writer is active (otherwise the next commit does it)."""
        try:
            fcntl.flock(self._lock_file(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        except OSError as e:
            raise _translate(e, str(self.lock_path)) from e
        try:
            self._remove_stale_temps()
            self._cleaned = True
            self._cut_torn_tail(self._fresh())
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _remove_stale_temps(self) -> None:
        """Temporary archives of writers that died mid-commit. Only the lock holder
        writes one, so while we hold the lock every one we see is stale."""
        start = f".{self.path.name}{TEMP_MARKER}"
        try:
            entries = list(os.scandir(self.path.parent))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(start):
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass

    def _reopen_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (str(self.path),), dict(
            read_only=self.read_only, compression=self.compression,
            compresslevel=self.compresslevel, fsync=self.fsync,
            lock_timeout=self.lock_timeout, directory=self.directory)

    def _close(self) -> None:
        try:
            if self._held.active and self._pid == current_pid():
                self._close_held()
        finally:
            self._close_files()

    def _close_held(self) -> None:
        """close() with commits held: their directory, or (when it cannot be written)
        the archive as it was before them."""
        if self._in_write_transaction():     # (the writer mutex is this thread's)
            raise UnsupportedOperationError(
                "close inside a write transaction of directory='close'",
                hint="close after the transaction; the held commits are written when "
                     "the handle is dropped")
        self._acquire()
        try:
            self._write_held()
        except BaseException:
            self._held.drop()
            raise
        finally:
            self._release()

    def _close_files(self) -> None:
        if self._writeback is not None:
            self._writeback.wait()
        if self._pid == current_pid():
            for fd in (self._lock_fd, self._record_ro_fd):
                if fd is not None:
                    os.close(fd)
        self._lock_fd = self._record_ro_fd = None
        if self._archive is not None and self._archive.file is not None:
            self._archive.file.close()
        self._archive = None

    def __repr__(self) -> str:
        return f"ZipStore({str(self.path)!r})"


@dataclass(slots=True)
class _Txn:
    archive: _Archive
    writes: dict[str, Any] | None        # None in a read transaction
    #: the number reserved for the archive this transaction writes (0: none yet)
    seq: int = 0
    #: the members this transaction appended so far (None: nothing yet)
    pending: PendingAppend | None = None
    #: rewrite the archive without dead bytes at commit (ZipStore.compact)
    compact: bool = False
    #: the length of the archive the commit wrote
    end: int = 0
    #: where this transaction's members start in a held append (directory="close")
    mark: int = 0


# --- helpers ---------------------------------------------------------------------------

def _changes(old: _Archive, writes: dict[str, Any]) -> bool:
    """Whether ``writes`` make a new archive (erasing only absent keys does not)."""
    return any(v is not DELETED or k in old.members for k, v in writes.items())


def _children(keys: list[str], lo: int, hi: int, prefix: str) -> Iterator[str]:
    """list_dir over sorted keys: one bisect skips each child's whole subtree."""
    n = len(prefix)
    i = lo
    while i < hi:
        rest = keys[i][n:]
        cut = rest.find("/")
        if cut < 0:
            yield rest
            i += 1
        else:
            yield rest[:cut + 1]
            # "0" is the character after "/": the first key past the child's subtree.
            i = bisect.bisect_left(keys, prefix + rest[:cut] + "0", i + 1, hi)


def _translate(error: OSError, path: str) -> StoreError:
    """The one place OS errors of this backend become kvzarr errors."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError("no space left for the new archive; the old one is unchanged",
                              path=path)
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StorePermissionError(f"the filesystem refused access: {error.strerror}; "
                                    f"the archive is unchanged", path=path)
    return StoreError(f"zip store I/O error: {error.strerror or error}", path=path)
