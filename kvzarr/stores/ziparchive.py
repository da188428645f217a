"""One version of the zip store's archive, and how a version is found in the file.

A version is an open file, its parsed central directory and where the version ends in the
file: the file may hold more (a commit being appended, or a torn one, see
:mod:`kvzarr.stores.zipappend`). Versions are immutable once built, so readers share them
without locks; the file closes when the last user drops it. A version appended to the
same file by a later commit shares no state with this one: every byte this version's
directory points at stays as it is until a compaction replaces the file.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from ..errors import InvalidKeyError, StoreError, ValueTypeError
from .byteranges import ByteRequest, OffsetRequest, RangeRequest, SuffixRequest
from .keys import check_key
from .zipappend import candidate_ends, read_record
from .zipdirectory import SortedRecords
from .zipformat import ArchiveFile, Member, footprint, parse_directory

#: the longest key a member name holds (the name length field is 16 bits)
MAX_KEY_BYTES = 0xFFFF
#: what a handle compares to notice a change: (device, inode, size, mtime)
Ident = tuple[int, int, int, int]


class ArchiveVersion(ArchiveFile):
    """One version of the archive: its file, members and where it ends."""

    def __init__(self, file: Any, members: dict[str, Member], foreign: list[Member],
                 comment: bytes, path: str, *, end: int = 0, cd_start: int = 0,
                 shift: int = 0, live: int | None = None,
                 st: os.stat_result | None = None,
                 records: SortedRecords | None = None) -> None:
        super().__init__(file, path)
        if file is not None and st is None:
            st = os.fstat(self.fd)
        #: (device, inode) of the file, None before the first archive is written
        self.file_id = (st.st_dev, st.st_ino) if st is not None else None
        self.mode = st.st_mode & 0o7777 if st is not None else None
        self.members = members
        #: the directory's records in name order, where the commit that wrote this
        #: version kept them (zipdirectory.py): the next commit starts from them
        self.records = records
        # (the records' names are the members' when the commit kept them: no foreign)
        self.keys = records.names if records is not None else sorted(members)
        self.foreign = foreign     # members whose names are not valid keys: kept, not shown
        self.comment = comment
        #: where this version ends (bytes past it: a commit being appended or a torn
        #: one), where its central directory starts, bytes prepended to it
        self.end, self.cd_start, self.shift = end, cd_start, shift
        self._live = live
        #: this version's number in its store handle's sequence (the change counter)
        self.seq = 0

    @property
    def live(self) -> int:
        """Bytes the live members take before the directory (computed when first asked:
        only writers need it)."""
        if self._live is None:
            self._live = sum(footprint(m)
                             for m in itertools.chain(self.members.values(), self.foreign))
        return self._live

    @property
    def dead(self) -> int:
        """Bytes before the directory that no live member uses (a compaction frees them)."""
        return max(0, self.cd_start - self.shift - self.live)


def load(path: Path, record_fd: int | None, prev: ArchiveVersion | None
         ) -> tuple[Ident, ArchiveVersion]:
    """The version of the archive at ``path`` that its commit record (read from
    ``record_fd``, the sidecar) says is complete; ``prev`` itself when the file only grew
    by a commit still being appended (or a torn one) past it. OSError from opening the
    file; StoreError when no version parses."""
    file = open(path, "rb")
    try:
        fd = file.fileno()
        st = os.fstat(fd)
        for _ in range(1000):
            # The size before and after reading the record agree: the record read is the
            # one of the commit that made (or is making) the file this long.
            record = read_record(record_fd)
            again = os.fstat(fd)
            if again.st_size == st.st_size:
                break
            st = again
        ends = candidate_ends(fd, st.st_size, st.st_dev, st.st_ino, record)
        if (prev is not None and prev.file_id == (st.st_dev, st.st_ino)
                and ends[0][0] == prev.end < st.st_size):
            file.close()                     # a torn or running append: nothing new
            return ident(st), prev
        found: Any = None
        for end, unshifted in ends:
            try:
                found = parse_directory(fd, str(path), end)
            except StoreError as e:
                found = found or e
                continue
            if not (unshifted and found.shift):
                break
            found = StoreError("not a zip archive: bytes past the last commit",
                               path=str(path))
        if isinstance(found, StoreError):
            raise found
    except BaseException:
        file.close()
        raise
    members: dict[str, Member] = {}
    foreign: dict[str, Member] = {}
    for m in found.entries:
        # A later entry of the same name wins, as in zipfile and zarr-python, whose zip
        # stores append a duplicate on overwrite; our next commit drops the rest.
        (members if is_key(m.name) else foreign)[m.name] = m
    return ident(st), ArchiveVersion(file, members, list(foreign.values()), found.comment,
                                     str(path), end=found.end, cd_start=found.cd_start,
                                     shift=found.shift, st=st)


def resolve(request: ByteRequest, size: int) -> tuple[int, int]:
    """A byte request as a clipped ``[start, end)`` of a value of ``size`` bytes."""
    if isinstance(request, RangeRequest):
        return min(request.start, size), min(request.end, size)
    if isinstance(request, OffsetRequest):
        return min(request.offset, size), size
    if isinstance(request, SuffixRequest):
        return max(0, size - request.suffix), size
    raise ValueTypeError(f"not a byte request: {request!r}")


def is_key(name: str) -> bool:
    """Whether a member's name is a store key (other members are kept, never shown)."""
    try:
        check_key(name, MAX_KEY_BYTES)
        name.encode("utf-8")                  # undecodable names stay foreign
    except (InvalidKeyError, UnicodeEncodeError):
        return False
    return True


def ident(st: os.stat_result) -> Ident:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns
