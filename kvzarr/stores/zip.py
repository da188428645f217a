"""ZipStore: every key is one member of a single zip archive. Specification: stores/zip.md.

Implements the Zarr v3 abstract store interface (core spec, "Abstract store interface")
over the ZIP format (PKWARE APPNOTE 6.3.x: local file headers, central directory, ZIP64),
whose byte layout lives in :mod:`kvzarr.stores.zipformat`; this module adds the Store
contract, transactions, the writer lock and the atomic swap of archives.

Promises:

* Every write is a transaction; ``with store.transaction():`` groups many into one. A
  commit writes a complete new archive next to the old one (unchanged members' bytes are
  copied raw, never recompressed), fsyncs it and ``os.replace``-s it over the old one.
  Readers and a crash see the old archive or the new one, never a mix; a temporary
  archive left by a killed writer is removed by the next writer that opens the store.
* Overwrite and erase leave exactly one member per key, so the file stays a plain zip
  that Python's ``zipfile`` and other Zarr readers open.
* Writers in all threads and processes are serialised by ``flock`` on the sidecar file
  ``<archive>.lock``; readers take no lock, read from the archive they opened and switch
  to a new one when the file at the path was replaced (inode, size or mtime changed).
* Members are stored uncompressed (``ZIP_STORED``) by default, so a byte range is one
  ``pread`` of the member's data. With ``ZIP_DEFLATED`` a range read inflates the member
  from its start, and ``capabilities.partial_reads`` is false.
* Cost: each commit rewrites the archive, O(archive size). Batch writes (``set_many``,
  a transaction) so that many keys cost one rewrite.
* ``change_counter()`` names the archive a read sees: every archive this handle loads
  or writes gets the next number of a per-handle sequence (so an inode the filesystem
  reuses for a later archive can never bring an old number back: the handle holds the
  archive it last loaded open, and a different file at the path is a new load).
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import itertools
import os
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .byteranges import ByteRequest, OffsetRequest, RangeRequest, SuffixRequest
from ..errors import (ConflictError, InvalidKeyError, StoreError, StoreFullError,
                      StorePermissionError,
                      UnsupportedOperationError, ValueTypeError)
from .base import Capabilities, Store
from .keys import check_key, prefix_successor
from .keylocks import flock_until
from ..runtime.process import current_pid
from .overlay import DELETED, merged_keys
from .zipformat import (SIG_EOCD64, ZIP64_LIMIT, ArchiveFile, ArchiveWriter, Member,
                        copy_member, dos_datetime, read_directory, write_directory,
                        write_value)

#: Temporary archives are named ``.<archive name>.kvzarr-tmp-<hex>`` in the same directory.
TEMP_MARKER = ".kvzarr-tmp-"


# The ZIP64 threshold of the archives this module writes, looked up at each commit so
# tests can lower it to exercise ZIP64 fields on small archives.
_ZIP64_LIMIT = ZIP64_LIMIT
# Tests reach the format code through this module.
_read_directory, _SIG_EOCD64 = read_directory, SIG_EOCD64


class _Archive(ArchiveFile):
    """One version of the archive: an open file and its parsed directory. Immutable once
    built, so readers share it without locks; the file closes when the last user drops it."""

    def __init__(self, file: Any, members: dict[str, Member], foreign: list[Member],
                 comment: bytes, path: str) -> None:
        super().__init__(file, path)
        self.ident = _ident(os.fstat(self.fd)) if file is not None else None
        self.mode = os.fstat(self.fd).st_mode & 0o7777 if file is not None else None
        self.members = members
        self.keys = sorted(members)
        self.foreign = foreign     # members whose names are not valid keys: kept, not shown
        self.comment = comment
        #: this archive's number in its store handle's sequence (the change counter)
        self.seq = 0

    def read_range(self, m: Member, request: ByteRequest) -> bytes:
        start, end = _resolve(request, m.size)
        return self.read_span(m, start, end)


class ZipStore(Store):
    """Keys as members of one zip archive; see the module docstring and stores/zip.md."""

    capabilities = Capabilities(partial_reads=True, partial_writes=False, transactional=True,
                                multi_process=True)
    max_key_bytes = 0xFFFF     # the name length field is 16 bits
    lists_foreign_keys = False # members whose names are not keys are kept apart (foreign)

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False,
                 compression: int = zipfile.ZIP_STORED, compresslevel: int | None = None,
                 fsync: bool = True, lock_timeout: float | None = None) -> None:
        """Open the archive at ``path``, creating an empty one (and its directory) unless
        ``read_only``. ``compression`` is ``zipfile.ZIP_STORED`` or ``ZIP_DEFLATED``
        (``compresslevel`` 0-9). ``fsync=False`` gives up durability on power loss, not
        atomicity. ``lock_timeout`` seconds bound the wait for the writer lock
        (:class:`ConflictError` after); None waits as long as it takes."""
        super().__init__(read_only=read_only)
        if compression not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UnsupportedOperationError(
                f"zip compression {compression!r} is not supported", field="compression",
                hint="use zipfile.ZIP_STORED (the default) or zipfile.ZIP_DEFLATED")
        if compression == zipfile.ZIP_DEFLATED:
            self.capabilities = replace(type(self).capabilities, partial_reads=False)
        self.path = Path(path).absolute()
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.compression = compression
        self.compresslevel = compresslevel
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self._pid = current_pid()
        self._mutex = threading.Lock()       # one writing thread of this process at a time
        self._load_lock = threading.Lock()
        self._lock_fd: int | None = None
        self._cleaned = False
        self._archive: _Archive | None = None
        self._commits = 0                    # archives written by this handle (for tests)
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
                    self._archive = self._write([], _Archive(None, {}, [], b"", str(self.path)))
                    self._archive.seq = next(self._seqs)
            finally:
                self._release()
        self._fresh()

    # -- reading -------------------------------------------------------------------------

    def _fresh(self) -> _Archive:
        """The archive now at the path, reloaded if another writer replaced it."""
        try:
            ident = _ident(os.stat(self.path))
        except FileNotFoundError:
            raise StoreError("the zip archive was removed", path=str(self.path)) from None
        self._check_fork()
        archive = self._archive
        if archive is not None and archive.ident == ident:
            return archive
        with self._load_lock:
            archive = self._archive
            if archive is None or archive.ident != ident:
                archive = _load(self.path)
                archive.seq = next(self._seqs)
                self._archive = archive
            return archive

    def _check_fork(self) -> None:
        """After fork the child owns neither the parent's lock nor its thread state."""
        if self._pid != current_pid():
            self._pid, self._lock_fd, self._archive = current_pid(), None, None
            self._mutex = threading.Lock()
            self._load_lock = threading.Lock()

    def _view(self) -> tuple[_Archive, dict[str, Any] | None]:
        """The archive this thread reads and its transaction's pending writes, if any."""
        txn = self._current_transaction()
        if txn is None:
            return self._fresh(), None
        return txn.archive, txn.writes

    def _get(self, key: str) -> bytes | None:
        archive, writes = self._view()
        if writes and key in writes:
            value = writes[key]
            return None if value is DELETED else value
        m = archive.members.get(key)
        return None if m is None else archive.read(m)

    streams_values = True

    def iter_values(self, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """As :meth:`Store.iter_values`: each member read when it is asked for."""
        for i, key in enumerate(keys):
            yield i, self._get(check_key(key, self.max_key_bytes))

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        archive, writes = self._view()
        if writes and key in writes:
            value = writes[key]
            if value is DELETED:
                return None
            start, end = _resolve(request, len(value))
            return value[start:end]
        m = archive.members.get(key)
        return None if m is None else archive.read_range(m, request)

    def _exists(self, key: str) -> bool:
        archive, writes = self._view()
        if writes and key in writes:
            return writes[key] is not DELETED
        return key in archive.members

    def _getsize(self, key: str) -> int | None:
        archive, writes = self._view()
        if writes and key in writes:
            value = writes[key]
            return None if value is DELETED else len(value)
        m = archive.members.get(key)
        return None if m is None else m.size

    def _sorted_keys(self, prefix: str) -> tuple[list[str], int, int]:
        """A sorted key list and the index range ``[lo, hi)`` of the keys under ``prefix``."""
        archive, writes = self._view()
        keys = archive.keys
        lo = bisect.bisect_left(keys, prefix)
        succ = prefix_successor(prefix)
        hi = len(keys) if succ is None else bisect.bisect_left(keys, succ, lo)
        if writes:
            keys = merged_keys(keys[lo:hi], writes, prefix)
            lo, hi = 0, len(keys)
        return keys, lo, hi

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        keys, lo, hi = self._sorted_keys(prefix)
        return (keys[i] for i in range(lo, hi))    # key lists are never mutated

    def _list_dir(self, prefix: str) -> Iterator[str]:
        keys, lo, hi = self._sorted_keys(prefix)
        return _children(keys, lo, hi, prefix)

    # -- writing -------------------------------------------------------------------------

    def _pending(self) -> dict[str, Any] | None:
        txn = self._current_transaction()
        return None if txn is None else txn.writes

    def _set(self, key: str, value: bytes) -> None:
        writes = self._pending()
        if writes is None:
            with self.transaction():           # a lone write is a one-write transaction
                self._set(key, value)
            return
        writes[key] = value

    def _erase(self, key: str) -> None:
        writes = self._pending()
        if writes is None:
            with self.transaction():
                self._erase(key)
            return
        writes[key] = DELETED

    # Transaction hooks. A write transaction holds the writer lock from begin to end and
    # reads the archive that was current when it got the lock, so nothing can commit
    # between its reads and its commit.

    def _begin(self, write: bool) -> Any:
        if not write:
            return _Txn(self._fresh(), None)
        self._acquire()
        try:
            return _Txn(self._fresh(), {})
        except BaseException:
            self._release()
            raise

    def _commit(self, handle: Any) -> None:
        if handle.writes is None:
            return
        try:
            plan = _plan(handle.archive, handle.writes)
            if plan is not None:
                archive = self._write(plan, handle.archive)
                archive.seq = handle.seq if handle.seq else next(self._seqs)
                self._archive = archive
        finally:
            self._release()

    def _change_counter(self) -> int:
        """The number of the archive this thread reads (see the module docstring); in a
        write transaction that changes something, the number its new archive will get
        (reserved now, so no other archive can take it)."""
        txn = self._current_transaction()
        if txn is None:
            return self._fresh().seq
        if txn.writes is None or not _changes(txn.archive, txn.writes):
            return txn.archive.seq
        if not txn.seq:
            txn.seq = next(self._seqs)
        return txn.seq

    def _abort(self, handle: Any) -> None:
        if handle.writes is not None:
            self._release()

    def _write(self, plan: list[tuple[str, Member | None, bytes | None]],
               old: _Archive) -> _Archive:
        """Write ``plan`` as a new archive beside the old one and swap it in."""
        tmp = self.path.with_name(f".{self.path.name}{TEMP_MARKER}{uuid.uuid4().hex}")
        path = str(self.path)
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise _translate(e, path) from e
        try:
            if old.mode is not None:
                os.fchmod(fd, old.mode)
            out = ArchiveWriter(fd, _ZIP64_LIMIT)
            members: dict[str, Member] = {}
            foreign: list[Member] = []
            stamp = dos_datetime(time.localtime()[:6])
            for name, src, value in plan:
                if value is not None:
                    m = write_value(out, name, value, stamp, self.compression,
                                    self.compresslevel)
                else:
                    m = copy_member(out, old, src)
                if value is not None or name in old.members:
                    members[name] = m
                else:
                    foreign.append(m)
            write_directory(out, [*members.values(), *foreign], old.comment)
            out.flush()
            if self.fsync:
                os.fsync(fd)
            os.replace(tmp, self.path)
        except BaseException as e:
            os.close(fd)
            _unlink_quietly(tmp)
            if isinstance(e, OSError) and not isinstance(e, StoreError):
                raise _translate(e, path) from e
            raise
        reader = os.fdopen(fd, "rb")           # the new archive, read through the same fd
        if self.fsync:
            _fsync_directory(self.path.parent)
        self._commits += 1
        return _Archive(reader, members, foreign, old.comment, path)

    # -- the writer lock -----------------------------------------------------------------

    def _acquire(self) -> None:
        self._check_fork()
        timeout = self.lock_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._mutex.acquire(timeout=-1 if timeout is None else timeout):
            raise ConflictError("timed out waiting for another writer thread",
                                path=str(self.path), hint="raise lock_timeout")
        try:
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
        if self._lock_fd is None:
            self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                                    0o666)
        return self._lock_fd

    @staticmethod
    def _flock(fd: int, deadline: float | None) -> None:
        flock_until(fd, deadline, "another writer's commit", 0.001, 0.05)

    def _release(self) -> None:
        try:
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

    def _clean_if_idle(self) -> None:
        """At open: remove a killed writer's temporary archive if no writer is active
        (otherwise the first write of this handle does it)."""
        try:
            fcntl.flock(self._lock_file(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        except OSError as e:
            raise _translate(e, str(self.lock_path)) from e
        try:
            self._remove_stale_temps()
            self._cleaned = True
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
                _unlink_quietly(Path(entry.path))

    def _reopen_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (str(self.path),), dict(
            read_only=self.read_only, compression=self.compression,
            compresslevel=self.compresslevel, fsync=self.fsync,
            lock_timeout=self.lock_timeout)

    def _close(self) -> None:
        if self._lock_fd is not None and self._pid == current_pid():
            os.close(self._lock_fd)
        self._lock_fd = None
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


# --- loading and planning archives -----------------------------------------------------

def _load(path: Path) -> _Archive:
    """Open the archive at ``path`` and parse its central directory."""
    try:
        file = open(path, "rb")
    except OSError as e:
        raise _translate(e, str(path)) from e
    try:
        entries, comment = read_directory(file.fileno(), str(path))
    except BaseException:
        file.close()
        raise
    members: dict[str, Member] = {}
    foreign: dict[str, Member] = {}
    for m in entries:
        # A later entry of the same name wins, as in zipfile and zarr-python, whose zip
        # stores append a duplicate on overwrite; our next commit drops the earlier ones.
        (members if _is_key(m.name) else foreign)[m.name] = m
    return _Archive(file, members, list(foreign.values()), comment, str(path))


def _plan(old: _Archive, writes: dict[str, Any]
          ) -> list[tuple[str, Member | None, bytes | None]] | None:
    """The members of the next archive in name order: (name, old member to copy, new
    value); None when ``writes`` change nothing."""
    if not _changes(old, writes):
        return None
    entries: dict[str, tuple[str, Member | None, bytes | None]] = {
        m.name: (m.name, m, None) for m in old.foreign}
    for name, m in old.members.items():
        entries[name] = (name, m, None)
    for name, value in writes.items():
        if value is DELETED:
            entries.pop(name, None)
        else:
            entries[name] = (name, None, value)
    return [entries[name] for name in sorted(entries)]


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


def _resolve(request: ByteRequest, size: int) -> tuple[int, int]:
    """A byte request as a clipped ``[start, end)`` of a value of ``size`` bytes."""
    if isinstance(request, RangeRequest):
        return min(request.start, size), min(request.end, size)
    if isinstance(request, OffsetRequest):
        return min(request.offset, size), size
    if isinstance(request, SuffixRequest):
        return max(0, size - request.suffix), size
    raise ValueTypeError(f"not a byte request: {request!r}")


def _is_key(name: str) -> bool:
    try:
        check_key(name, ZipStore.max_key_bytes)
        name.encode("utf-8")                  # undecodable names stay foreign
    except (InvalidKeyError, UnicodeEncodeError):
        return False
    return True


def _ident(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable: fsync the directory entry (POSIX)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _translate(error: OSError, path: str) -> StoreError:
    """The one place OS errors of this backend become kvzarr errors."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError("no space left for the new archive; the old one is unchanged",
                              path=path)
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StorePermissionError(f"the filesystem refused access: {error.strerror}; "
                                    f"the archive is unchanged", path=path)
    return StoreError(f"zip store I/O error: {error.strerror or error}", path=path)
