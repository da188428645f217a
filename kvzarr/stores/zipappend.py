"""The zip store's append protocol: how a commit is added to the end of an archive in
place, and how a reader finds the last complete commit when the end of the file is torn.

A zip archive is read from its end: the end of central directory record (PKWARE APPNOTE
6.3.x, 4.3.16) points at the central directory just before it, which points at every
member. So a commit can leave every existing byte where it is and append, after the old
end record, its new members' local headers and data, then a central directory of all live
members (old ones at their old offsets) and new end records. Replaced and erased members,
the old directories and end records become dead bytes; a reader holding the old directory
keeps reading valid offsets, because nothing before the old end is ever rewritten.

The commit record. The writer (holding the writer lock) keeps in the sidecar
``<archive>.lock`` one fixed 64-byte :class:`CommitRecord`: the archive file it is about
(device and inode), the length ``committed`` of the archive before the commit (the end of
its last good end record), the length ``target`` it will have after, and the CRC-32 of the
bytes ``[tail_start, target)`` it writes last (the new central directory and end records).
Before the first appended byte the record says ``target`` is unknown (``UNKNOWN``); once
the members are written, and before the directory, it gives the target and the CRC. On a
durable store the final record is fsynced after the archive, before the commit returns.
The record carries its own CRC-32, so a torn record is no record.

Finding the archive's end (:func:`candidate_ends`), given the file's size ``S`` and the
record, when the record is about this very file:

* ``committed < S < target``: a commit is being appended, or its writer died: the archive
  ends at ``committed`` (the bytes past it are not looked at, whatever they look like).
* ``S == target``: the commit is complete if the last bytes match the record's CRC (a
  value that itself holds a zip archive cannot fake that); otherwise ``committed``.
* ``S == committed``: nothing was appended yet.
* otherwise (another tool changed the archive in place, or there is no record): the end
  records at the end of the file, as any zip reader finds them, then ``target`` and
  ``committed`` if those do not parse. Past a record's target the end records at the end
  must also point at a directory right before them with no bytes "prepended" to the
  archive: a zip archive stored as a value, cut right after it by a power loss that also
  lost the running commit's record, has its own offsets and fails that test.

The next writer truncates a torn tail back to the end it finds (under the writer lock);
readers never truncate. Python's ``zipfile``, zarr-python and TensorStore know nothing of
the record: after a writer is killed mid-append they see the torn tail (and fail to open
the archive) until a kvzarr writer opens it. A zip's directory must end the file, so that
window cannot be closed by the format.

Thread and process promises: writing a record needs the writer lock; reading one needs
nothing (a record read while it is being written fails its CRC and is read again).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from zlib_ng import zlib_ng

#: magic, device, inode, committed, target, tail_start, tail_crc, CRC-32 of what precedes
_RECORD = struct.Struct("<8s5QL")
_MAGIC = b"KVZIPAP1"
RECORD_SIZE = 64
#: the target of a commit still appending members (its length is not known yet)
UNKNOWN = (1 << 64) - 1
#: how often a reader re-reads a record that fails its CRC (a writer is writing it)
_RETRIES = 100


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """What the last (or the running) commit of the archive file (dev, ino) promised."""
    dev: int
    ino: int
    committed: int       # the archive's length before the commit
    target: int          # its length after the commit
    tail_start: int      # where the commit's central directory starts
    tail_crc: int        # CRC-32 of the bytes [tail_start, target)

    def encode(self) -> bytes:
        body = _RECORD.pack(_MAGIC, self.dev, self.ino, self.committed, self.target,
                            self.tail_start, self.tail_crc)
        return (body + struct.pack("<L", zlib_ng.crc32(body))).ljust(RECORD_SIZE, b"\0")


def read_record(fd: int | None) -> CommitRecord | None:
    """The record in the sidecar ``fd``, or None (no sidecar, an empty or foreign one,
    or a record that stays torn)."""
    if fd is None:
        return None
    for _ in range(_RETRIES):
        raw = os.pread(fd, RECORD_SIZE, 0)
        if len(raw) < _RECORD.size + 4 or raw[:8] != _MAGIC:
            return None
        body, (crc,) = raw[:_RECORD.size], struct.unpack_from("<L", raw, _RECORD.size)
        if zlib_ng.crc32(body) == crc:
            _, dev, ino, committed, target, tail_start, tail_crc = _RECORD.unpack(body)
            return CommitRecord(dev, ino, committed, target, tail_start, tail_crc)
    return None


def write_record(fd: int, record: CommitRecord, durable: bool) -> None:
    """Store ``record`` in the sidecar (the caller holds the writer lock); on disk before
    this returns when ``durable``."""
    data = record.encode()
    if os.pwrite(fd, data, 0) != len(data):
        raise OSError("short write of the zip commit record")
    if durable:
        datasync(fd)


def candidate_ends(fd: int, size: int, dev: int, ino: int,
                   record: CommitRecord | None) -> list[tuple[int, bool]]:
    """The lengths at which the archive in ``fd`` (``size`` bytes, file ``dev``/``ino``)
    may end, best first (see the module docstring), each with whether it must have no
    prepended bytes; the caller parses the first whose end records read."""
    if record is None or (record.dev, record.ino) != (dev, ino):
        return [(size, False)]
    if record.committed < size < record.target:
        return [(record.committed, False)]
    if size == record.target:
        if record.tail_start <= size and _crc_of(fd, record.tail_start, size) == \
                record.tail_crc:
            return [(size, False)]
        return [(record.committed, False)]
    if size == record.committed:
        return [(size, False)]
    return [(size, True), *((end, False) for end in (record.target, record.committed)
                            if end < size)]


def _crc_of(fd: int, start: int, end: int) -> int:
    crc, pos = 0, start
    while pos < end:
        block = os.pread(fd, min(8 << 20, end - pos), pos)
        if not block:
            return -1
        crc, pos = zlib_ng.crc32(block, crc), pos + len(block)
    return crc


def datasync(fd: int) -> None:
    """Data and size of ``fd`` on disk (fdatasync where the OS has it)."""
    (getattr(os, "fdatasync", None) or os.fsync)(fd)
