"""Writing one commit of the zip store, with the writer lock held: the members a write
transaction appends past the end of the archive as they are set (:class:`PendingAppend`),
finished by a central directory and end records in place, or a complete new archive
swapped in for the old one (:func:`rewrite`: the first archive, and compactions; and
:class:`PendingArchive`, the members of a commit into an archive with no members, written
to the new file from the start).

Byte layout: :mod:`kvzarr.stores.zipformat`; the commit record and how readers find the
end of the archive: :mod:`kvzarr.stores.zipappend`. Errors are the OS's ``OSError``s; the
store translates them.

Crash promises: while a transaction appends, the commit record says the archive ends
where it ended (target unknown), so kvzarr readers never look at the new bytes, and a
writer killed at any moment leaves the old archive plus a tail the next writer cuts.
:meth:`PendingAppend.finish` stores the final record (the new length and the CRC-32 of the
new directory) before the directory's first byte, so a reader that sees the file at its
new length can tell the commit is complete. A rewrite writes a temporary file, fsyncs it,
records it and renames it over the archive: a crash leaves the old archive or the new one,
and possibly the temporary file, which the next writer removes.
"""

from __future__ import annotations

import os
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from zlib_ng import zlib_ng

from ..runtime import workers
from .writeback import WRITEBACK_BYTES, FileWriteback
from .zipappend import UNKNOWN, CommitRecord, datasync, write_record
from .zipdirectory import SortedRecords, records_kept
from .zipformat import (LOCAL_CRC_AT, ArchiveFile, ArchiveWriter, BytesOut, Member,
                        copy_members, dos_datetime, encode_value, stored_member,
                        write_directory, write_local_header, write_records)

#: Temporary archives are named ``.<archive name>.kvzarr-tmp-<hex>`` in the same directory.
TEMP_MARKER = ".kvzarr-tmp-"
#: values at least this large on average are checksummed on the worker threads
_PARALLEL_VALUE_BYTES = 64 * 1024
#: at most this many buffers per pwritev call (POSIX guarantees IOV_MAX >= 16; Linux 1024)
_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 16, 1024)


class FileChangedError(OSError):
    """The file at the archive's path is not the archive the transaction read (another
    program replaced or cut it)."""


class PendingAppend:
    """The members one write transaction appends past byte ``end`` of the archive file
    ``file_id``. :meth:`add` writes them at once (a value is in the page cache when it
    returns, so callers need not keep it); :meth:`finish` makes them a commit;
    :meth:`abandon` truncates them away. Members it wrote read back through ``file``."""

    def __init__(self, path: str, file_id: tuple[int, int], end: int, record_fd: int,
                 zip64_limit: int, durable: bool, writeback: FileWriteback | None = None
                 ) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != file_id or st.st_size < end:
                raise FileChangedError(f"the zip archive {path} was changed by another "
                                       f"program")
            if st.st_size > end:
                os.ftruncate(fd, end)            # the torn tail of a killed writer
            # No fsync: this record is for readers racing the append. After a power loss
            # the previous commit's record (whose target is ``end``) serves, see zipappend.
            write_record(record_fd, CommitRecord(st.st_dev, st.st_ino, end, UNKNOWN, 0, 0),
                         durable=False)
        except BaseException:
            os.close(fd)
            raise
        self.file = ArchiveFile(os.fdopen(fd, "rb"), path)
        self.fd, self.file_id, self.record_fd = fd, file_id, record_fd
        self.start = self.pos = end
        self.zip64_limit, self.durable = zip64_limit, durable
        #: asked to flush every WRITEBACK_BYTES appended, when the commit will sync the
        #: archive (writeback.py): it then waits for less
        self.writeback = writeback if durable else None
        self.done = False

    def add(self, items: Sequence[tuple[str, Any]], compression: int,
            compresslevel: int | None) -> list[Member]:
        """Append ``items`` (name, bytes-like value) as new members, in one write."""
        stamp = dos_datetime(time.localtime()[:6])
        # The CRC-32 (and deflate) of large values on several threads: zlib-ng releases
        # the GIL for them, and one thread checksumming a bulk write was the store's
        # bottleneck. Small values stay inline, where a hand-off costs more.
        size = sum(len(value) for _, value in items)
        parallel = (workers.worth_threads(len(items), size)
                    and size >= _PARALLEL_VALUE_BYTES * len(items))
        if parallel and compression == zipfile.ZIP_STORED:
            return self._add_stored(items, stamp)
        encoded = workers.map_grouped(
            lambda item: encode_value(item[0], item[1], stamp, compression, compresslevel),
            items, parallel)
        members = [m for m, _ in encoded]
        self._write(members, [data for _, data in encoded])
        return members

    def _add_stored(self, items: Sequence[tuple[str, Any]], stamp: tuple[int, int]
                    ) -> list[Member]:
        """Values stored as they are, checksummed on the worker threads while this
        thread writes them: their local headers go out with a CRC-32 of 0 and are
        patched once the sums are in. No reader looks past the archive's old end before
        the commit's directory is there, and a failure cuts the members away. (256 MiB
        in 1 MiB chunks, no fsync, alternating runs: 147-168 ms summing first, 126-158
        ms this way; the write itself, one thread copying into the page cache, is most
        of the rest.)"""
        sums = workers.start_grouped(lambda item: zlib_ng.crc32(item[1]), items, True)
        members = [stored_member(name, len(value), stamp) for name, value in items]
        start = self.pos
        try:
            self._write(members, [value for _, value in items])
            crcs = sums.result()
            for m, crc in zip(members, crcs):
                m.crc = crc
                os.pwrite(self.fd, crc.to_bytes(4, "little"), m.header_offset + LOCAL_CRC_AT)
        except BaseException:
            sums.drain()
            if self.pos != start:
                self.pos = start
                os.ftruncate(self.fd, start)
            raise
        return members

    def _write(self, members: list[Member], datas: Sequence[Any]) -> None:
        """Lay ``members`` (with their stored ``datas``) out from :attr:`pos` and write
        them in one go; a failed write leaves none of them behind."""
        buffers: list[Any] = []
        pos = self.pos
        for m, data in zip(members, datas):
            m.header_offset = pos
            head = BytesOut(pos, self.zip64_limit)
            write_local_header(head, m)
            buffers += (head.data, data)
            pos = head.pos + len(data)
        try:
            write_at(self.fd, buffers, self.pos)
        except BaseException:
            os.ftruncate(self.fd, self.pos)      # no half member stays behind
            raise
        done, now = self.pos - self.start, pos - self.start
        if self.writeback is not None and done // WRITEBACK_BYTES != now // WRITEBACK_BYTES:
            self.writeback.request()
        self.pos = pos

    def directory(self, records: SortedRecords | None, members: Iterable[Member],
                  foreign: Sequence[Member], comment: bytes) -> BytesOut:
        """The central directory and end records of an archive, to go at the end: see
        :func:`_write_central`."""
        out = BytesOut(self.pos, self.zip64_limit)
        _write_central(out, records, members, foreign, comment)
        return out

    def finish(self, directory: BytesOut) -> tuple[os.stat_result, Any]:
        """Write ``directory`` (from :meth:`directory`) after the members: the commit.
        Returns the file's status and its open file object (now the caller's)."""
        dev, ino = self.file_id
        write_record(self.record_fd, CommitRecord(dev, ino, self.start, directory.pos,
                                                  self.pos, zlib_ng.crc32(directory.data)),
                     durable=False)
        write_at(self.fd, [directory.data], self.pos)
        if self.durable:
            datasync(self.fd)                    # the archive first: the record names it
            datasync(self.record_fd)
        self.done = True
        file, self.file.file = self.file.file, None
        return os.fstat(self.fd), file

    def abandon(self) -> None:
        """Truncate what was appended (the archive as it was) and close; idempotent."""
        if self.done:
            return
        self.done = True
        try:
            os.ftruncate(self.fd, self.start)
        except OSError:
            pass                                 # the next writer cuts the tail
        file, self.file.file = self.file.file, None
        if file is not None:
            file.close()


class PendingArchive(PendingAppend):
    """The members of a commit into an archive with no members, appended to a new file
    beside it from offset 0 as they are set; :meth:`finish` writes the directory there
    and renames the file over the archive. (Appending them to the empty archive is not
    allowed, see the store's ``_finish``, and copying them into a new file at the
    commit, as a rewrite does, wrote a large first commit twice.) The temporary file's
    name is the rewrite's, so a killed writer's is removed by the next one."""

    def __init__(self, path: Path, record_fd: int, zip64_limit: int, durable: bool,
                 mode: int | None) -> None:
        self.path = path
        self.tmp, fd = _temp_archive(path, mode)
        try:
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            _unlink(self.tmp)
            raise
        self.file = ArchiveFile(os.fdopen(fd, "rb"), str(path))
        self.fd, self.file_id, self.record_fd = fd, (st.st_dev, st.st_ino), record_fd
        self.start = self.pos = 0
        self.zip64_limit, self.durable = zip64_limit, durable
        self.writeback = None
        self.done = False

    def finish(self, directory: BytesOut) -> tuple[os.stat_result, Any]:
        """Write ``directory`` after the members, sync, record the new file and rename
        it over the archive, as a rewrite does: a crash leaves the old archive or this
        one (and possibly the temporary file)."""
        write_at(self.fd, [directory.data], self.pos)
        if self.durable:
            os.fsync(self.fd)
        st = os.fstat(self.fd)
        _swap_in(st, directory.pos, self.tmp, self.path, self.record_fd, self.durable)
        self.done = True
        if self.durable:
            fsync_directory(self.path.parent)
        file, self.file.file = self.file.file, None
        return st, file

    def abandon(self) -> None:
        """Remove the new file (the archive as it was) and close; idempotent."""
        if self.done:
            return
        self.done = True
        _unlink(self.tmp)
        file, self.file.file = self.file.file, None
        if file is not None:
            file.close()


def _temp_archive(path: Path, mode: int | None) -> tuple[Path, int]:
    """A new file beside the archive for a complete new archive, with the archive's
    ``mode``, named ``.<archive name>.kvzarr-tmp-<hex>`` so that a killed writer's is
    removed by the next writer; its path and descriptor."""
    tmp = path.with_name(f".{path.name}{TEMP_MARKER}{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        _unlink(tmp)
        raise
    return tmp, fd


def _swap_in(st: os.stat_result, end: int, tmp: Path, path: Path, record_fd: int,
             durable: bool) -> None:
    """Make the new archive ``tmp`` (status ``st``, ``end`` bytes, already on disk when
    ``durable``) the archive: a record of it, whole and complete, then the rename. A
    reader that finds the old file at the path ignores a record about another file."""
    write_record(record_fd, CommitRecord(st.st_dev, st.st_ino, end, end, end, 0), durable)
    os.replace(tmp, path)


def _write_central(out: BytesOut | ArchiveWriter, records: SortedRecords | None,
                   members: Iterable[Member], foreign: Sequence[Member],
                   comment: bytes) -> None:
    """The central directory and end records: from ``records`` (the sorted records an
    archive keeps for the next commit, zipdirectory.py) where there are, else built from
    the ``members`` and the ``foreign`` members."""
    if records is not None:
        write_records(out, records.records, comment)
    else:
        write_directory(out, [*members, *foreign], comment)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass                                     # the next writer removes it


def write_at(fd: int, buffers: Sequence[Any], offset: int) -> None:
    """Write ``buffers`` one after another from ``offset``, without joining them."""
    views = [memoryview(b).cast("B") for b in buffers if len(b)]
    pwritev = getattr(os, "pwritev", None)
    i = 0
    while i < len(views):
        if pwritev is None:
            n = os.pwrite(fd, views[i], offset)
        else:
            n = pwritev(fd, views[i:i + _IOV_MAX], offset)
        offset += n
        while n:
            if n >= len(views[i]):
                n -= len(views[i])
                i += 1
            else:
                views[i], n = views[i][n:], 0


def rewrite(path: Path, plan: Sequence[tuple[str, ArchiveFile, Member]], foreign: set[str],
            comment: bytes, mode: int | None, record_fd: int, zip64_limit: int,
            durable: bool, before_swap: Callable[[], None]
            ) -> tuple[os.stat_result, Any, dict[str, Member], list[Member], int,
                       SortedRecords | None]:
    """Write a new archive of ``plan`` (name, file holding the member, member; in name
    order) beside the old one and rename it over it; ``foreign`` names the members
    that are not keys. ``before_swap`` runs once the new archive is on disk, just
    before its record and the rename. Returns the new file's status, its open file
    object, its key members, its foreign members, where its directory starts and its
    sorted directory records (None with foreign members or a lowered ZIP64 limit)."""
    tmp, fd = _temp_archive(path, mode)
    try:
        out = ArchiveWriter(fd, zip64_limit)
        members: dict[str, Member] = {}
        others: list[Member] = []
        copies = copy_members(out, [(source, src) for _, source, src in plan])
        for (name, _, _), m in zip(plan, copies):
            if name in foreign:
                others.append(m)
            else:
                members[name] = m
        cd_start = out.pos
        # the sorted records the next commit starts from (zipdirectory.py)
        records = (SortedRecords.build(members.values())
                   if records_kept(bool(others), zip64_limit) else None)
        _write_central(out, records, members.values(), others, comment)
        out.flush()
        if durable:
            os.fsync(fd)
        st = os.fstat(fd)
        before_swap()
        _swap_in(st, out.pos, tmp, path, record_fd, durable)
    except BaseException:
        os.close(fd)
        _unlink(tmp)
        raise
    if durable:
        fsync_directory(path.parent)
    return st, os.fdopen(fd, "rb"), members, others, cd_start, records


def fsync_directory(directory: Path) -> None:
    """Make a rename durable: fsync the directory entry (POSIX)."""
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
