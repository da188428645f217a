"""ZipStore: every key is one member of a single zip archive. Specification: stores/zip.md.

Implements the Zarr v3 abstract store interface (core spec, "Abstract store interface")
over the ZIP format (PKWARE APPNOTE 6.3.x: local file headers, central directory, ZIP64).

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
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import os
import struct
import threading
import time
import uuid
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..byteranges import ByteRequest, OffsetRequest, RangeRequest, SuffixRequest
from ..errors import (ChecksumMismatchError, ConflictError, InvalidKeyError, StoreError,
                      StoreFullError, UnsupportedOperationError)
from .base import Capabilities, Store
from .keys import check_key, prefix_successor

#: Temporary archives are named ``.<archive name>.kvzarr-tmp-<hex>`` in the same directory.
TEMP_MARKER = ".kvzarr-tmp-"

_LOCAL = struct.Struct("<4s2B4HL2L2H")        # local file header, 30 bytes
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")    # central directory header, 46 bytes
_EOCD = struct.Struct("<4s4H2LH")             # end of central directory, 22 bytes
_EOCD64 = struct.Struct("<4sQ2H2L4Q")         # ZIP64 end of central directory, 56 bytes
_LOCATOR64 = struct.Struct("<4sLQL")          # ZIP64 end of central directory locator
_SIG_LOCAL, _SIG_CENTRAL = b"PK\x03\x04", b"PK\x01\x02"
_SIG_EOCD, _SIG_EOCD64, _SIG_LOCATOR64 = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"

# Like zipfile: sizes and offsets past 2 GiB - 1 go to ZIP64 fields, since some readers
# read the 32-bit fields as signed.
_ZIP64_LIMIT = (1 << 31) - 1
_COUNT_LIMIT = 0xFFFF
_FLAG_ENCRYPTED, _FLAG_DESCRIPTOR, _FLAG_UTF8 = 0x01, 0x08, 0x800
_UNIX = 3
_DEFAULT_ATTR = 0o100644 << 16                 # regular file, rw-r--r--
_COPY_CHUNK = 8 << 20

_DELETED = object()


@dataclass(slots=True)
class _Member:
    """One member as the central directory describes it."""
    name: str
    header_offset: int
    method: int
    crc: int
    csize: int
    size: int
    dostime: int
    dosdate: int
    external_attr: int
    flags: int                 # general purpose bits kept on rewrite (deflate options)
    data_offset: int = -1      # -1 until the local header has been read


class _Archive:
    """One version of the archive: an open file and its parsed directory. Immutable once
    built, so readers share it without locks; the file closes when the last user drops it."""

    def __init__(self, file: Any, members: dict[str, _Member], foreign: list[_Member],
                 comment: bytes, path: str) -> None:
        self.file = file
        self.fd = file.fileno() if file is not None else -1
        self.ident = _ident(os.fstat(self.fd)) if file is not None else None
        self.mode = os.fstat(self.fd).st_mode & 0o7777 if file is not None else None
        self.members = members
        self.keys = sorted(members)
        self.foreign = foreign     # members whose names are not valid keys: kept, not shown
        self.comment = comment
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._zip_lock = threading.Lock()

    def __del__(self) -> None:
        if self.file is not None:
            self.file.close()

    def data_offset(self, m: _Member) -> int:
        if m.data_offset < 0:
            head = os.pread(self.fd, _LOCAL.size, m.header_offset)
            if len(head) != _LOCAL.size or head[:4] != _SIG_LOCAL:
                raise StoreError("corrupt zip archive: bad local header", key=m.name,
                                 path=self.path)
            name_len, extra_len = struct.unpack_from("<2H", head, 26)
            m.data_offset = m.header_offset + _LOCAL.size + name_len + extra_len
        return m.data_offset

    def raw(self, m: _Member, offset: int, length: int) -> bytes:
        data = os.pread(self.fd, length, self.data_offset(m) + offset)
        if len(data) != length:
            raise StoreError("corrupt zip archive: member data cut short", key=m.name,
                             path=self.path)
        return data

    def read(self, m: _Member) -> bytes:
        if m.method == zipfile.ZIP_STORED:
            data = self.raw(m, 0, m.csize)
        elif m.method == zipfile.ZIP_DEFLATED:
            try:
                data = zlib.decompress(self.raw(m, 0, m.csize), -15)
            except zlib.error as e:
                raise StoreError(f"corrupt deflate data: {e}", key=m.name, path=self.path) from e
        else:
            return self._read_other(m)
        if len(data) != m.size or zlib.crc32(data) != m.crc:
            raise ChecksumMismatchError("zip member does not match its CRC-32", key=m.name,
                                        path=self.path)
        return data

    def read_range(self, m: _Member, request: ByteRequest) -> bytes:
        start, end = _resolve(request, m.size)
        if start >= end:
            return b""
        if m.method == zipfile.ZIP_STORED:
            return self.raw(m, start, end - start)
        if m.method != zipfile.ZIP_DEFLATED:
            return self._read_other(m)[start:end]
        # Deflate has no random access: inflate from the start, stop once past ``end``.
        inflater, out, pos = zlib.decompressobj(-15), bytearray(), 0
        while len(out) < end and pos < m.csize:
            n = min(1 << 20, m.csize - pos)
            try:
                out += inflater.decompress(self.raw(m, pos, n))
            except zlib.error as e:
                raise StoreError(f"corrupt deflate data: {e}", key=m.name, path=self.path) from e
            pos += n
        return bytes(out[start:end])

    def _read_other(self, m: _Member) -> bytes:
        """Members another tool compressed with bzip2, lzma, ...: zipfile decodes them."""
        with self._zip_lock:
            try:
                if self._zip is None:
                    self._zip = zipfile.ZipFile(self.file)
                return self._zip.read(m.name)
            except NotImplementedError as e:
                raise UnsupportedOperationError(
                    f"zip compression method {m.method} is not supported", key=m.name,
                    path=self.path) from e
            except zipfile.BadZipFile as e:
                raise ChecksumMismatchError(str(e), key=m.name, path=self.path) from e


class ZipStore(Store):
    """Keys as members of one zip archive; see the module docstring and stores/zip.md."""

    capabilities = Capabilities(partial_reads=True, partial_writes=False, transactional=True,
                                multi_process=True)
    max_key_bytes = 0xFFFF     # the name length field is 16 bits

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
        self._pid = os.getpid()
        self._mutex = threading.Lock()       # one writing thread of this process at a time
        self._load_lock = threading.Lock()
        self._lock_fd: int | None = None
        self._cleaned = False
        self._archive: _Archive | None = None
        self._commits = 0                    # archives written by this handle (for tests)
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
                archive = self._archive = _load(self.path)
            return archive

    def _check_fork(self) -> None:
        """After fork the child owns neither the parent's lock nor its thread state."""
        if self._pid != os.getpid():
            self._pid, self._lock_fd, self._archive = os.getpid(), None, None
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
            return None if value is _DELETED else value
        m = archive.members.get(key)
        return None if m is None else archive.read(m)

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        archive, writes = self._view()
        if writes and key in writes:
            value = writes[key]
            if value is _DELETED:
                return None
            start, end = _resolve(request, len(value))
            return value[start:end]
        m = archive.members.get(key)
        return None if m is None else archive.read_range(m, request)

    def _exists(self, key: str) -> bool:
        archive, writes = self._view()
        if writes and key in writes:
            return writes[key] is not _DELETED
        return key in archive.members

    def _getsize(self, key: str) -> int | None:
        archive, writes = self._view()
        if writes and key in writes:
            value = writes[key]
            return None if value is _DELETED else len(value)
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
            merged = set(keys[lo:hi])
            for key, value in writes.items():
                if key.startswith(prefix):
                    if value is _DELETED:
                        merged.discard(key)
                    else:
                        merged.add(key)
            keys = sorted(merged)
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
        writes[key] = _DELETED

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
                self._archive = self._write(plan, handle.archive)
        finally:
            self._release()

    def _abort(self, handle: Any) -> None:
        if handle.writes is not None:
            self._release()

    def _write(self, plan: list[tuple[str, _Member | None, bytes | None]],
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
            out = _Output(fd)
            members: dict[str, _Member] = {}
            foreign: list[_Member] = []
            stamp = _dos_datetime(time.localtime()[:6])
            for name, src, value in plan:
                if value is not None:
                    m = self._put_value(out, name, value, stamp)
                else:
                    m = _copy_member(out, old, src)
                if value is not None or name in old.members:
                    members[name] = m
                else:
                    foreign.append(m)
            _write_directory(out, [*members.values(), *foreign], old.comment)
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

    def _put_value(self, out: _Output, name: str, value: bytes,
                   stamp: tuple[int, int]) -> _Member:
        crc = zlib.crc32(value)
        method, data = zipfile.ZIP_STORED, value
        if self.compression == zipfile.ZIP_DEFLATED and value:
            level = -1 if self.compresslevel is None else self.compresslevel
            packer = zlib.compressobj(level, zlib.DEFLATED, -15)
            packed = packer.compress(value) + packer.flush()
            if len(packed) < len(value):      # incompressible values stay stored
                method, data = zipfile.ZIP_DEFLATED, packed
        m = _Member(name, out.pos, method, crc, len(data), len(value), stamp[0], stamp[1],
                    _DEFAULT_ATTR, 0)
        _write_local_header(out, m)
        out.write(data)
        return m

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
        if deadline is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConflictError("timed out waiting for another writer's commit",
                                        hint="raise lock_timeout") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

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

    def _close(self) -> None:
        if self._lock_fd is not None and self._pid == os.getpid():
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


# --- the archive format ---------------------------------------------------------------

def _load(path: Path) -> _Archive:
    """Open the archive at ``path`` and parse its central directory."""
    try:
        file = open(path, "rb")
    except OSError as e:
        raise _translate(e, str(path)) from e
    try:
        entries, comment = _read_directory(file.fileno(), str(path))
    except BaseException:
        file.close()
        raise
    members: dict[str, _Member] = {}
    foreign: dict[str, _Member] = {}
    for m in entries:
        # A later entry of the same name wins, as in zipfile and zarr-python, whose zip
        # stores append a duplicate on overwrite; our next commit drops the earlier ones.
        (members if _is_key(m.name) else foreign)[m.name] = m
    return _Archive(file, members, list(foreign.values()), comment, str(path))


def _read_directory(fd: int, path: str) -> tuple[list[_Member], bytes]:
    """The central directory's entries and the archive comment, read as zipfile reads
    them (ZIP64 records, bytes prepended to the archive); an empty file is an empty
    archive (what a zip writer that never finished leaves)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return [], b""
    tail_len = min(size, _EOCD.size + 0xFFFF)
    tail = os.pread(fd, tail_len, size - tail_len)
    at = tail.rfind(_SIG_EOCD)
    while at >= 0 and at + _EOCD.size > len(tail):
        at = tail.rfind(_SIG_EOCD, 0, at)
    if at < 0:
        raise StoreError("not a zip archive: no end of central directory record", path=path)
    _, disk, cd_disk, _, count, cd_size, cd_offset, comment_len = _EOCD.unpack_from(tail, at)
    comment = tail[at + _EOCD.size:at + _EOCD.size + comment_len]
    end = size - tail_len + at                   # file offset of the end record
    records = end
    if end >= _LOCATOR64.size + _EOCD64.size:
        loc = os.pread(fd, _LOCATOR64.size, end - _LOCATOR64.size)
        if loc[:4] == _SIG_LOCATOR64:
            records = end - _LOCATOR64.size - _EOCD64.size
            rec = _EOCD64.unpack(os.pread(fd, _EOCD64.size, records))
            if rec[0] != _SIG_EOCD64:
                raise StoreError("corrupt zip archive: bad ZIP64 end record", path=path)
            disk, cd_disk, count, cd_size, cd_offset = rec[4], rec[5], rec[7], rec[8], rec[9]
    if disk or cd_disk:
        raise StoreError("multi-disk zip archives are not supported", path=path)
    shift = records - cd_size - cd_offset         # bytes prepended to the archive
    if shift < 0:
        raise StoreError("corrupt zip archive: bad central directory offset", path=path)
    cd = os.pread(fd, cd_size, cd_offset + shift)
    if len(cd) != cd_size:
        raise StoreError("corrupt zip archive: central directory cut short", path=path)
    entries: list[_Member] = []
    pos = 0
    while pos + _CENTRAL.size <= cd_size:
        (sig, _, _, _, _, flags, method, dostime, dosdate, crc, csize, usize, name_len,
         extra_len, comment_len, _, _, attr, offset) = _CENTRAL.unpack_from(cd, pos)
        if sig != _SIG_CENTRAL:
            raise StoreError("corrupt zip archive: bad central directory entry", path=path)
        pos += _CENTRAL.size
        raw = cd[pos:pos + name_len]
        name = raw.decode("utf-8" if flags & _FLAG_UTF8 else "cp437", "surrogateescape")
        if 0xFFFFFFFF in (usize, csize, offset):
            usize, csize, offset = _zip64_fields(cd[pos + name_len:pos + name_len + extra_len],
                                                 usize, csize, offset, name, path)
        pos += name_len + extra_len + comment_len
        if flags & _FLAG_ENCRYPTED:
            raise StoreError("encrypted zip members are not supported", key=name, path=path)
        entries.append(_Member(name, offset + shift, method, crc, csize, usize, dostime,
                               dosdate, attr, flags & ~(_FLAG_DESCRIPTOR | _FLAG_UTF8)))
    if len(entries) != count:
        raise StoreError(f"corrupt zip archive: {len(entries)} entries, {count} announced",
                         path=path)
    return entries, comment


def _zip64_fields(extra: bytes, usize: int, csize: int, offset: int, name: str,
                  path: str) -> tuple[int, int, int]:
    """Fill the 32-bit fields that are 0xFFFFFFFF from the ZIP64 extra field (id 1)."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<2H", extra, at)
        if kind == 1:
            values = list(struct.unpack_from(f"<{length // 8}Q", extra, at + 4))
            try:
                if usize == 0xFFFFFFFF:
                    usize = values.pop(0)
                if csize == 0xFFFFFFFF:
                    csize = values.pop(0)
                if offset == 0xFFFFFFFF:
                    offset = values.pop(0)
            except IndexError:
                break
            return usize, csize, offset
        at += 4 + length
    raise StoreError("corrupt zip archive: missing ZIP64 field", key=name, path=path)


def _plan(old: _Archive, writes: dict[str, Any]
          ) -> list[tuple[str, _Member | None, bytes | None]] | None:
    """The members of the next archive in name order: (name, old member to copy, new
    value); None when ``writes`` change nothing."""
    if not any(v is not _DELETED or k in old.members for k, v in writes.items()):
        return None
    entries: dict[str, tuple[str, _Member | None, bytes | None]] = {
        m.name: (m.name, m, None) for m in old.foreign}
    for name, m in old.members.items():
        entries[name] = (name, m, None)
    for name, value in writes.items():
        if value is _DELETED:
            entries.pop(name, None)
        else:
            entries[name] = (name, None, value)
    return [entries[name] for name in sorted(entries)]


def _copy_member(out: _Output, old: _Archive, src: _Member) -> _Member:
    """Copy a member's compressed bytes unchanged under a fresh local header."""
    m = _Member(src.name, out.pos, src.method, src.crc, src.csize, src.size, src.dostime,
                src.dosdate, src.external_attr, src.flags)
    _write_local_header(out, m)
    out.copy_from(old, src)
    return m


def _name_and_flags(m: _Member) -> tuple[bytes, int]:
    if m.name.isascii():
        return m.name.encode("ascii"), m.flags
    return m.name.encode("utf-8", "surrogateescape"), m.flags | _FLAG_UTF8


def _write_local_header(out: _Output, m: _Member) -> None:
    name, flags = _name_and_flags(m)
    big = m.size > _ZIP64_LIMIT or m.csize > _ZIP64_LIMIT
    extra = struct.pack("<2H2Q", 1, 16, m.size, m.csize) if big else b""
    csize, size = (0xFFFFFFFF, 0xFFFFFFFF) if big else (m.csize, m.size)
    out.write(_LOCAL.pack(_SIG_LOCAL, 45 if big else 20, 0, flags, m.method, m.dostime,
                          m.dosdate, m.crc, csize, size, len(name), len(extra))
              + name + extra)
    m.data_offset = m.header_offset + _LOCAL.size + len(name) + len(extra)


def _write_directory(out: _Output, members: list[_Member], comment: bytes) -> None:
    members.sort(key=lambda m: m.header_offset)
    start = out.pos
    for m in members:
        name, flags = _name_and_flags(m)
        fields, size, csize, offset = [], m.size, m.csize, m.header_offset
        if size > _ZIP64_LIMIT or csize > _ZIP64_LIMIT:     # zipfile reads both or none
            fields += [size, csize]
            size = csize = 0xFFFFFFFF
        if offset > _ZIP64_LIMIT:
            fields.append(offset)
            offset = 0xFFFFFFFF
        extra = struct.pack(f"<2H{len(fields)}Q", 1, 8 * len(fields), *fields) if fields else b""
        version = 45 if fields else 20
        out.write(_CENTRAL.pack(_SIG_CENTRAL, version, _UNIX, version, 0, flags, m.method,
                                m.dostime, m.dosdate, m.crc, csize, size, len(name),
                                len(extra), 0, 0, 0, m.external_attr, offset)
                  + name + extra)
    count, size, offset = len(members), out.pos - start, start
    if count >= _COUNT_LIMIT or size > _ZIP64_LIMIT or offset > _ZIP64_LIMIT:
        end64 = out.pos
        out.write(_EOCD64.pack(_SIG_EOCD64, 44, 45, 45, 0, 0, count, count, size, offset))
        out.write(_LOCATOR64.pack(_SIG_LOCATOR64, 0, end64, 1))
        count, size, offset = min(count, 0xFFFF), min(size, 0xFFFFFFFF), min(offset, 0xFFFFFFFF)
    comment = comment[:0xFFFF]
    out.write(_EOCD.pack(_SIG_EOCD, 0, 0, count, count, size, offset, len(comment)))
    out.write(comment)


class _Output:
    """Sequential writer on a raw fd with its own buffer and position."""

    def __init__(self, fd: int) -> None:
        self.fd, self.pos, self._buf = fd, 0, bytearray()

    def write(self, data: bytes) -> None:
        self.pos += len(data)
        if len(data) >= _COPY_CHUNK:
            self.flush()
            _write_all(self.fd, data)
            return
        self._buf += data
        if len(self._buf) >= _COPY_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self._buf:
            _write_all(self.fd, self._buf)
            self._buf = bytearray()

    def copy_from(self, old: _Archive, m: _Member) -> None:
        done = 0
        while done < m.csize:
            n = min(_COPY_CHUNK, m.csize - done)
            self.write(old.raw(m, done, n))
            done += n


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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
    raise TypeError(f"not a byte request: {request!r}")


def _is_key(name: str) -> bool:
    try:
        check_key(name, ZipStore.max_key_bytes)
        name.encode("utf-8")                  # undecodable names stay foreign
    except (InvalidKeyError, UnicodeEncodeError):
        return False
    return True


def _dos_datetime(t: tuple[int, ...]) -> tuple[int, int]:
    year, month, day, hour, minute, second = t[:6]
    if year < 1980:
        year, month, day, hour, minute, second = 1980, 1, 1, 0, 0, 0
    elif year > 2107:
        year, month, day, hour, minute, second = 2107, 12, 31, 23, 59, 58
    return (hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (month << 5) | day


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
    return StoreError(f"zip store I/O error: {error.strerror or error}", path=path)
