"""The zip file format as ZipStore reads and writes it: byte layout only, no Store contract.

Implements the parts of PKWARE's APPNOTE.TXT 6.3.x that a store of plain members needs:

* 4.3.7 local file header and 4.3.8 file data (read: locate a member's data; write);
* 4.3.12 central directory header, 4.3.16 end of central directory record;
* 4.3.14 / 4.3.15 ZIP64 end of central directory record and locator, 4.5.3 the ZIP64
  extended information extra field (id 0x0001) for sizes, offsets and member counts;
* 4.4.4 general purpose flags (bit 11, UTF-8 names; bit 3, data descriptors, read only),
  4.4.5 compression methods 0 (stored) and 8 (deflate), 4.4.6 MS-DOS date and time,
  4.4.7 CRC-32 (checked on every whole-member read).

Promises:

* ``read_directory`` reads what Python's ``zipfile`` reads: ZIP64 records, bytes prepended
  to the archive (self-extractors), archives streamed with data descriptors, cp437 and
  UTF-8 names. Entries come back in directory order, duplicate names included.
* Writers emit no data descriptors, one local header per member followed by its data, then
  the central directory in header order; ZIP64 fields appear only past ``zip64_limit``
  (2 GiB - 1, like ``zipfile``, since some readers treat the 32-bit fields as signed) or
  65535 members, so small archives stay readable by every zip tool.
* Copying a member keeps its compressed bytes, CRC, time stamp and attributes unchanged.

Not supported: encryption (4.4.4 bit 0) and strong encryption, multi-disk / split archives
(both rejected with StoreError); member comments and extra fields other than ZIP64 are
read past and dropped when a member is rewritten (the archive comment is kept). Members
another tool compressed with bzip2 (method 12) or LZMA (method 14, 5.8.8) are read whole,
with no byte-range shortcut; other methods raise UnsupportedOperationError.

Damaged archives: the directory is checked as it is read (records inside the file,
members before the central directory, sizes that their method can produce), so a cut or
damaged archive fails to open with StoreError, and a member's data is decompressed no
further than its declared size: data that decodes to more, less, or not at all is a
ChecksumMismatchError (or StoreError) of that key, never an exception of zlib, bz2 or
lzma, and never more memory than the member's size.
"""

from __future__ import annotations

import bz2
import lzma
import os
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from zlib_ng import zlib_ng

from ..errors import ChecksumMismatchError, StoreError, UnsupportedOperationError
from ..runtime import workers

LOCAL = struct.Struct("<4s2B4HL2L2H")        # local file header, 30 bytes
#: where the CRC-32 sits in a local file header (after signature, versions, flags, method,
#: time and date)
LOCAL_CRC_AT = struct.calcsize("<4s2B4H")
CENTRAL = struct.Struct("<4s4B4HL2L5H2L")    # central directory header, 46 bytes
EOCD = struct.Struct("<4s4H2LH")             # end of central directory, 22 bytes
EOCD64 = struct.Struct("<4sQ2H2L4Q")         # ZIP64 end of central directory, 56 bytes
LOCATOR64 = struct.Struct("<4sLQL")          # ZIP64 end of central directory locator
SIG_LOCAL, SIG_CENTRAL = b"PK\x03\x04", b"PK\x01\x02"
SIG_EOCD, SIG_EOCD64, SIG_LOCATOR64 = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"

# Like zipfile: sizes and offsets past 2 GiB - 1 go to ZIP64 fields, since some readers
# read the 32-bit fields as signed.
ZIP64_LIMIT = (1 << 31) - 1
_COUNT_LIMIT = 0xFFFF
_FLAG_ENCRYPTED, _FLAG_DESCRIPTOR, _FLAG_UTF8 = 0x01, 0x08, 0x800
_UNIX = 3
_BZIP2, _LZMA = 12, 14
#: deflate's largest expansion (a 258-byte match per two bits, APPNOTE / RFC 1951): a
#: deflated member that claims a larger size than this times its data is damaged
_DEFLATE_RATIO = 1032
#: errors of the decompressors for damaged data (bz2 raises OSError and EOFError)
_DECODE_ERRORS = (zlib_ng.error, lzma.LZMAError, OSError, EOFError, ValueError)
_DEFAULT_ATTR = 0o100644 << 16                 # regular file, rw-r--r--
_COPY_CHUNK = 8 << 20
#: an ArchiveWriter writes data at least this large straight to the file: copying it
#: into its buffer first would cost more than the extra system call
_WRITE_THROUGH = 1 << 20


@dataclass(slots=True)
class Member:
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


# --- reading ----------------------------------------------------------------------------

class ArchiveFile:
    """Member data of one open archive file. Reads are ``pread``s, so threads share it
    without locks; the file closes when the last user drops it. ``file`` may be None
    for an archive that has no file yet."""

    def __init__(self, file: Any, path: str) -> None:
        self.file = file
        self.fd = file.fileno() if file is not None else -1
        self.path = path
        #: close the file on a sync thread: set once the file has no name left (a
        #: compaction renamed a new archive over it), when its last close frees all its
        #: blocks (~20 ms for 30 MB on ext4), which the writer should not wait for
        self.close_aside = False

    def __del__(self) -> None:
        if self.file is None:
            return
        if self.close_aside:
            try:
                workers.SYNC_POOL.submit(self.file.close)
                return
            except Exception:       # the interpreter is shutting down: no new threads
                pass
        self.file.close()

    def data_offset(self, m: Member) -> int:
        if m.data_offset < 0:
            head = os.pread(self.fd, LOCAL.size, m.header_offset)
            if len(head) != LOCAL.size or head[:4] != SIG_LOCAL:
                raise StoreError("corrupt zip archive: bad local header", key=m.name,
                                 path=self.path)
            name_len, extra_len = struct.unpack_from("<2H", head, 26)
            m.data_offset = m.header_offset + LOCAL.size + name_len + extra_len
        return m.data_offset

    def raw(self, m: Member, offset: int, length: int) -> bytes:
        data = os.pread(self.fd, length, self.data_offset(m) + offset)
        if len(data) != length:
            raise StoreError("corrupt zip archive: member data cut short", key=m.name,
                             path=self.path)
        return data

    def read(self, m: Member) -> bytes:
        if m.method == zipfile.ZIP_STORED:
            data = self.raw(m, 0, m.csize)
        elif m.method == zipfile.ZIP_DEFLATED:
            data = self._decode(m, zlib_ng.decompressobj(-15), self.raw(m, 0, m.csize))
        else:
            data = self._read_other(m)
        if len(data) != m.size or zlib_ng.crc32(data) != m.crc:
            raise ChecksumMismatchError("zip member does not match its CRC-32", key=m.name,
                                        path=self.path)
        return data

    def read_into(self, m: Member, place: memoryview) -> None:
        """:meth:`read` of ``m`` into ``place`` (exactly ``m.size`` bytes long): a stored
        member straight from the file, its CRC-32 checked where it landed."""
        if m.method != zipfile.ZIP_STORED:
            place[:] = self.read(m)
            return
        if m.csize != m.size or os.preadv(self.fd, [place], self.data_offset(m)) != m.size:
            raise StoreError("corrupt zip archive: member data cut short", key=m.name,
                             path=self.path)
        if zlib_ng.crc32(place) != m.crc:
            raise ChecksumMismatchError("zip member does not match its CRC-32", key=m.name,
                                        path=self.path)

    def _decode(self, m: Member, decoder: Any, data: bytes) -> bytes:
        """``data`` decompressed by ``decoder``, stopping one byte past the member's size
        (a member that decodes to more is damaged: the CRC check then refuses it)."""
        try:
            return decoder.decompress(data, m.size + 1)
        except _DECODE_ERRORS as e:
            raise ChecksumMismatchError(f"damaged compressed data in the zip member: {e}",
                                        key=m.name, path=self.path) from e

    def read_span(self, m: Member, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the member's uncompressed value (already clipped)."""
        if start >= end:
            return b""
        if m.method == zipfile.ZIP_STORED:
            return self.raw(m, start, end - start)
        if m.method != zipfile.ZIP_DEFLATED:
            return self.read(m)[start:end]
        # Deflate has no random access: inflate from the start, stop at ``end``.
        inflater, out, pos, pending = zlib_ng.decompressobj(-15), bytearray(), 0, b""
        while len(out) < end:
            if not pending:
                if pos >= m.csize:
                    break
                n = min(1 << 20, m.csize - pos)
                pending = self.raw(m, pos, n)
                pos += n
            try:
                out += inflater.decompress(pending, end - len(out))
            except zlib_ng.error as e:
                raise ChecksumMismatchError(f"damaged deflate data in the zip member: {e}",
                                            key=m.name, path=self.path) from e
            pending = inflater.unconsumed_tail
            if inflater.eof:
                break
        if len(out) < end:        # ``end`` is within the declared size: the data is cut
            raise ChecksumMismatchError("the zip member's deflate data ends before its "
                                        "declared size", key=m.name, path=self.path)
        return bytes(out[start:end])

    def _read_other(self, m: Member) -> bytes:
        """A member another tool compressed with bzip2 or LZMA, decoded no further than
        one byte past its size (the caller checks the size and the CRC)."""
        if m.method == _BZIP2:
            return self._decode(m, bz2.BZ2Decompressor(), self.raw(m, 0, m.csize))
        if m.method == _LZMA:
            return self._decode(m, self._lzma_decoder(m), self.raw(m, 4 + 5, m.csize - 9)
                                if m.csize >= 9 else b"")
        raise UnsupportedOperationError(
            f"zip compression method {m.method} is not supported", key=m.name,
            path=self.path, hint="kvzarr reads stored, deflate, bzip2 and LZMA members")

    def _lzma_decoder(self, m: Member) -> Any:
        """The raw LZMA1 decoder of an LZMA member: its data starts with two version
        bytes, the length of the properties (2 bytes, 5 in every LZMA SDK) and the
        properties (lc/lp/pb in one byte, then the dictionary size), APPNOTE 5.8.8."""
        head = self.raw(m, 0, 9) if m.csize >= 9 else b""
        if len(head) < 9 or struct.unpack_from("<H", head, 2)[0] != 5 or head[4] >= 9 * 5 * 5:
            raise ChecksumMismatchError("damaged LZMA header in the zip member",
                                        key=m.name, path=self.path)
        props, dict_size = head[4], int.from_bytes(head[5:9], "little")
        lc, lp, pb = props % 9, props // 9 % 5, props // 45
        try:
            return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[{
                "id": lzma.FILTER_LZMA1, "dict_size": dict_size, "lc": lc, "lp": lp,
                "pb": pb}])
        except _DECODE_ERRORS as e:
            raise ChecksumMismatchError(f"damaged LZMA header in the zip member: {e}",
                                        key=m.name, path=self.path) from e


@dataclass(slots=True)
class Directory:
    """What the end records and central directory of an archive say."""
    entries: list[Member]          # in directory order, duplicate names included
    comment: bytes
    cd_start: int                  # file offset of the central directory
    shift: int                     # bytes prepended to the archive (self-extractors)
    end: int                       # the length of the archive these records end


def read_directory(fd: int, path: str) -> tuple[list[Member], bytes]:
    """The central directory's entries and the archive comment, read as zipfile reads
    them (ZIP64 records, bytes prepended to the archive); an empty file is an empty
    archive (what a zip writer that never finished leaves)."""
    d = parse_directory(fd, path)
    return d.entries, d.comment


def parse_directory(fd: int, path: str, end: int | None = None) -> Directory:
    """:func:`read_directory` of the archive that ends at byte ``end`` of the file (its
    size by default): the bytes past ``end`` are not looked at, so an archive followed by
    a torn append reads as it was before the append."""
    size = os.fstat(fd).st_size if end is None else end
    if size == 0:
        return Directory([], b"", 0, 0, 0)
    tail_len = min(size, EOCD.size + 0xFFFF)
    tail = os.pread(fd, tail_len, size - tail_len)
    if len(tail) != tail_len:
        raise StoreError("corrupt zip archive: the file is shorter than its end", path=path)
    at = tail.rfind(SIG_EOCD)
    while at >= 0 and at + EOCD.size > len(tail):
        at = tail.rfind(SIG_EOCD, 0, at)
    if at < 0:
        raise StoreError("not a zip archive: no end of central directory record", path=path)
    _, disk, cd_disk, _, count, cd_size, cd_offset, comment_len = EOCD.unpack_from(tail, at)
    comment = tail[at + EOCD.size:at + EOCD.size + comment_len]
    end = size - tail_len + at                   # file offset of the end record
    records = end
    if end >= LOCATOR64.size + EOCD64.size:
        loc = os.pread(fd, LOCATOR64.size, end - LOCATOR64.size)
        if loc[:4] == SIG_LOCATOR64:
            records = end - LOCATOR64.size - EOCD64.size
            rec = EOCD64.unpack(os.pread(fd, EOCD64.size, records))
            if rec[0] != SIG_EOCD64:
                raise StoreError("corrupt zip archive: bad ZIP64 end record", path=path)
            disk, cd_disk, count, cd_size, cd_offset = rec[4], rec[5], rec[7], rec[8], rec[9]
    if disk or cd_disk:
        raise StoreError("multi-disk zip archives are not supported", path=path)
    shift = records - cd_size - cd_offset         # bytes prepended to the archive
    if shift < 0 or cd_size > records:
        raise StoreError("corrupt zip archive: bad central directory offset", path=path)
    cd = os.pread(fd, cd_size, cd_offset + shift)
    if len(cd) != cd_size:
        raise StoreError("corrupt zip archive: central directory cut short", path=path)
    entries: list[Member] = []
    pos = 0
    while pos + CENTRAL.size <= cd_size:
        (sig, _, _, _, _, flags, method, dostime, dosdate, crc, csize, usize, name_len,
         extra_len, comment_len, _, _, attr, offset) = CENTRAL.unpack_from(cd, pos)
        if sig != SIG_CENTRAL:
            raise StoreError("corrupt zip archive: bad central directory entry", path=path)
        pos += CENTRAL.size
        raw = cd[pos:pos + name_len]
        name = raw.decode("utf-8" if flags & _FLAG_UTF8 else "cp437", "surrogateescape")
        if 0xFFFFFFFF in (usize, csize, offset):
            usize, csize, offset = _zip64_fields(cd[pos + name_len:pos + name_len + extra_len],
                                                 usize, csize, offset, name, path)
        pos += name_len + extra_len + comment_len
        if flags & _FLAG_ENCRYPTED:
            raise StoreError("encrypted zip members are not supported", key=name, path=path)
        _check_member(name, offset, method, csize, usize, cd_offset, path)
        entries.append(Member(name, offset + shift, method, crc, csize, usize, dostime,
                              dosdate, attr, flags & ~(_FLAG_DESCRIPTOR | _FLAG_UTF8)))
    if len(entries) != count:
        raise StoreError(f"corrupt zip archive: {len(entries)} entries, {count} announced",
                         path=path)
    return Directory(entries, comment, cd_offset + shift, shift, size)


def _check_member(name: str, offset: int, method: int, csize: int, usize: int,
                  cd_offset: int, path: str) -> None:
    """StoreError unless a member's local header and data lie before the central
    directory and its size is one its method can produce from its data."""
    if offset + LOCAL.size + csize > cd_offset:
        raise StoreError("corrupt zip archive: a member's data reaches past the central "
                         "directory", key=name, path=path)
    if ((method == zipfile.ZIP_STORED and usize != csize)
            or (method == zipfile.ZIP_DEFLATED and usize > _DEFLATE_RATIO * csize + 64)):
        raise StoreError(f"corrupt zip archive: a member declares {usize:,} bytes, which "
                         f"{csize:,} bytes of its data cannot hold", key=name, path=path)


def _zip64_fields(extra: bytes, usize: int, csize: int, offset: int, name: str,
                  path: str) -> tuple[int, int, int]:
    """Fill the 32-bit fields that are 0xFFFFFFFF from the ZIP64 extra field (id 1)."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<2H", extra, at)
        if kind == 1:
            if at + 4 + length > len(extra):
                break
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


# --- writing ----------------------------------------------------------------------------

class ArchiveWriter:
    """Sequential writer on a raw fd with its own buffer and position. Sizes and offsets
    past ``zip64_limit`` get ZIP64 fields (a lower limit exercises them on small data)."""

    def __init__(self, fd: int, zip64_limit: int = ZIP64_LIMIT, start: int = 0) -> None:
        """``start``: the file offset the fd is positioned at (appends start past 0)."""
        self.fd, self.pos, self._buf = fd, start, bytearray()
        self.zip64_limit = zip64_limit

    def write(self, data: bytes) -> None:
        self.pos += len(data)
        if len(data) >= _WRITE_THROUGH:
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

    def copy_from(self, old: ArchiveFile, m: Member) -> None:
        done = 0
        while done < m.csize:
            n = min(_COPY_CHUNK, m.csize - done)
            self.write(old.raw(m, done, n))
            done += n


class BytesOut:
    """An :class:`ArchiveWriter` into memory, for records whose bytes are needed before
    they are written (their CRC goes into the commit record first)."""

    def __init__(self, start: int, zip64_limit: int = ZIP64_LIMIT) -> None:
        self.pos, self.zip64_limit, self.data = start, zip64_limit, bytearray()

    def write(self, data: bytes) -> None:
        self.pos += len(data)
        self.data += data


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def encode_value(name: str, value: bytes, stamp: tuple[int, int], compression: int,
                 compresslevel: int | None) -> tuple[Member, bytes]:
    """A new member for ``value`` (its header offset still 0) and the data to store:
    deflated if ``compression`` is ``ZIP_DEFLATED`` and that makes it smaller."""
    crc = zlib_ng.crc32(value)
    method, data = zipfile.ZIP_STORED, value
    if compression == zipfile.ZIP_DEFLATED and value:
        level = -1 if compresslevel is None else compresslevel
        packer = zlib.compressobj(level, zlib.DEFLATED, -15)
        packed = packer.compress(value) + packer.flush()
        if len(packed) < len(value):      # incompressible values stay stored
            method, data = zipfile.ZIP_DEFLATED, packed
    return Member(name, 0, method, crc, len(data), len(value), stamp[0], stamp[1],
                  _DEFAULT_ATTR, 0), data


def stored_member(name: str, size: int, stamp: tuple[int, int]) -> Member:
    """A new member for a value of ``size`` bytes stored as it is, its CRC-32 still 0
    (the caller fills it in) and its header offset still 0."""
    return Member(name, 0, zipfile.ZIP_STORED, 0, size, size, stamp[0], stamp[1],
                  _DEFAULT_ATTR, 0)


def copy_member(out: ArchiveWriter, old: ArchiveFile, src: Member) -> Member:
    """Copy a member's compressed bytes unchanged under a fresh local header."""
    m = _copied(src)
    m.header_offset = out.pos
    write_local_header(out, m)
    out.copy_from(old, src)
    return m


def copy_members(out: ArchiveWriter, sources: Sequence[tuple[ArchiveFile, Member]]
                 ) -> list[Member]:
    """:func:`copy_member` of each (file, member) in turn, writing the same bytes, in
    fewer system calls: members that lie end to end in one file, each under the local
    header this module would write for it, are copied by one read and one write per run
    of up to ``_COPY_CHUNK`` bytes. (A compaction of an archive of small members was a
    read, a header and a buffered write per member, most of a commit's time when each
    commit replaces a small member.) A run whose headers differ (another tool's extra
    fields, data descriptors) is copied member by member."""
    copied: list[Member] = []
    run: list[tuple[Member, Member, bytes]] = []     # (source member, copy, its header)
    run_file: ArchiveFile | None = None
    run_start = run_end = 0

    def flush_run() -> None:
        if not run:
            return
        data = os.pread(run_file.fd, run_end - run_start, run_start)
        at, same = 0, len(data) == run_end - run_start
        for src, _, head in run:
            if not same or data[at:at + len(head)] != head:
                same = False
                break
            at += len(head) + src.csize
        if same:
            base = out.pos - run_start
            for src, m, head in run:
                m.header_offset = base + src.header_offset
                m.data_offset = m.header_offset + len(head)
                copied.append(m)
            out.write(data)
        else:
            copied.extend(copy_member(out, run_file, src) for src, _, _ in run)
        run.clear()

    limit = out.zip64_limit
    for file, src in sources:
        m = _copied(src)
        head = local_header(m, limit)
        span = len(head) + src.csize
        if run and (file is not run_file or src.header_offset != run_end
                    or run_end - run_start + span > _COPY_CHUNK):
            flush_run()
        if span > _COPY_CHUNK:             # copied in pieces of _COPY_CHUNK
            copied.append(copy_member(out, file, src))
            continue
        if not run:
            run_file, run_start, run_end = file, src.header_offset, src.header_offset
        run.append((src, m, head))
        run_end += span
    flush_run()
    return copied


def _copied(src: Member) -> Member:
    """A copy of ``src``'s entry, its offsets still to be set by the writer."""
    return Member(src.name, 0, src.method, src.crc, src.csize, src.size, src.dostime,
                  src.dosdate, src.external_attr, src.flags)


def _name_and_flags(m: Member) -> tuple[bytes, int]:
    if m.name.isascii():
        return m.name.encode("ascii"), m.flags
    return m.name.encode("utf-8", "surrogateescape"), m.flags | _FLAG_UTF8


def write_local_header(out: ArchiveWriter | BytesOut, m: Member) -> None:
    """Write ``m``'s local header at ``out``'s position, which becomes its header offset
    (set by the caller) and sets its data offset."""
    head = local_header(m, out.zip64_limit)
    out.write(head)
    m.data_offset = m.header_offset + len(head)


def local_header(m: Member, limit: int) -> bytes:
    """The member's local file header, name and ZIP64 extra: the same bytes wherever
    the member lies (a local header holds no offset)."""
    name, flags = _name_and_flags(m)
    big = m.size > limit or m.csize > limit
    extra = struct.pack("<2H2Q", 1, 16, m.size, m.csize) if big else b""
    csize, size = (0xFFFFFFFF, 0xFFFFFFFF) if big else (m.csize, m.size)
    return (LOCAL.pack(SIG_LOCAL, 45 if big else 20, 0, flags, m.method, m.dostime,
                       m.dosdate, m.crc, csize, size, len(name), len(extra))
            + name + extra)


def footprint(m: Member, zip64_limit: int = ZIP64_LIMIT) -> int:
    """Bytes a member takes before the central directory as this module writes it
    (local header, name, ZIP64 extra, data): what erasing or replacing it leaves dead."""
    big = m.size > zip64_limit or m.csize > zip64_limit
    return LOCAL.size + len(_name_and_flags(m)[0]) + (20 if big else 0) + m.csize


def central_record(m: Member, limit: int) -> bytes:
    """The member's central directory header, name and ZIP64 extra."""
    name, flags = _name_and_flags(m)
    fields, size, csize, offset = [], m.size, m.csize, m.header_offset
    if size > limit or csize > limit:     # zipfile reads both or none
        fields += [size, csize]
        size = csize = 0xFFFFFFFF
    if offset > limit:
        fields.append(offset)
        offset = 0xFFFFFFFF
    extra = struct.pack(f"<2H{len(fields)}Q", 1, 8 * len(fields), *fields) if fields else b""
    version = 45 if fields else 20
    return (CENTRAL.pack(SIG_CENTRAL, version, _UNIX, version, 0, flags, m.method,
                         m.dostime, m.dosdate, m.crc, csize, size, len(name),
                         len(extra), 0, 0, 0, m.external_attr, offset)
            + name + extra)


_BY_NAME = attrgetter("name")


def write_directory(out: ArchiveWriter | BytesOut, members: list[Member],
                    comment: bytes) -> None:
    """The central directory of ``members`` (sorted in place by name, so ``zipfile``
    lists them in key order wherever their data lies) and the end records, ZIP64 ones
    first when a count, size or offset needs them."""
    limit = out.zip64_limit
    members.sort(key=_BY_NAME)
    write_records(out, [central_record(m, limit) for m in members], comment)


def write_records(out: ArchiveWriter | BytesOut, records: list[bytes],
                  comment: bytes) -> None:
    """A central directory of ``records`` (central_record's, in the order given) and
    the end records, ZIP64 ones first when a count, size or offset needs them."""
    limit = out.zip64_limit
    start = out.pos
    out.write(b"".join(records))
    count, size, offset = len(records), out.pos - start, start
    if count >= _COUNT_LIMIT or size > limit or offset > limit:
        end64 = out.pos
        out.write(EOCD64.pack(SIG_EOCD64, 44, 45, 45, 0, 0, count, count, size, offset))
        out.write(LOCATOR64.pack(SIG_LOCATOR64, 0, end64, 1))
        count, size, offset = min(count, 0xFFFF), min(size, 0xFFFFFFFF), min(offset, 0xFFFFFFFF)
    comment = comment[:0xFFFF]
    out.write(EOCD.pack(SIG_EOCD, 0, 0, count, count, size, offset, len(comment)))
    out.write(comment)


def dos_datetime(t: tuple[int, ...]) -> tuple[int, int]:
    """(time, date) in MS-DOS format, clamped to the years 1980-2107 it can hold."""
    year, month, day, hour, minute, second = t[:6]
    if year < 1980:
        year, month, day, hour, minute, second = 1980, 1, 1, 0, 0, 0
    elif year > 2107:
        year, month, day, hour, minute, second = 2107, 12, 31, 23, 59, 58
    return (hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (month << 5) | day
