"""LMDB's meta pages read without LMDB: the check of a data file before LMDB maps it
(stores/lmdb.md, "Damaged files"), and the id of the last committed transaction
(stores/lmdb.md, "Change counter").

:func:`check_data_file` reads the two meta pages with plain reads and refuses a file
shorter than its newest meta page says it is: LMDB maps the file and would touch the
missing pages through the map, and a page past the end of a file is a SIGBUS that kills
the process, not an error (a file cut by a failed copy or a full disk, 8192 or 12288
bytes of a larger one). A page number inside the file is all LMDB's own checks need
(``mdb_page_get`` refuses pages past the last one with ``MDB_PAGE_NOTFOUND``). LMDB keeps
no checksums: bits flipped inside a data page are not found here (see the spec).

``env.info()["last_txnid"]`` costs a couple of microseconds through py-lmdb, more than a
cache hit may cost in all. LMDB's data file starts with two meta pages (the file format
of LMDB's ``mdb.c``, https://github.com/LMDB/lmdb/blob/mdb.master/libraries/liblmdb/mdb.c:
pages 0 and 1, each an ``MDB_page`` header followed by an ``MDB_meta`` whose last field is
``mm_txnid``). A commit writes its transaction id into the meta page it is not using, and
the larger of the two ids is the last commit. :class:`MetaPages` maps the two pages
read-only and reads both ids: a few hundred nanoseconds.

Ordering: ``mdb_env_write_meta`` writes the meta page first and only then publishes the
new id to readers (in the lock file), so the id read here is never behind what a read
transaction begun now would see; for the instant between the two it is one ahead. A
reader that caches data must therefore take its data's token from the read transaction
(``txn.id()``), and may use this one only to check whether anything changed since.

Every field is checked once at opening (magic, version, and the id against
``env.info()``); on anything unexpected (another word size, another LMDB format) the
caller falls back to ``env.info()``. The map is read-only and the file descriptor is
closed at once: LMDB locks only its lock file, never the data file, so closing a
descriptor of the data file cannot drop a lock of LMDB's.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from typing import Any

from ...errors import StoreError

#: ``MDB_MAGIC`` and ``MDB_DATA_VERSION`` of LMDB 0.9
_MAGIC, _VERSION = 0xBEEFC0DE, 1
#: bytes of the page header before ``MDB_meta`` (``PAGEHDRSZ``) on a 64-bit build
_PAGE_HEADER = 16
#: offset of ``mm_txnid`` in ``MDB_meta`` on a 64-bit build: magic, version (4 + 4),
#: address, map size (8 + 8), two ``MDB_db`` records (2 x 48), last page (8)
_TXNID = 4 + 4 + 8 + 8 + 2 * 48 + 8
_U32 = struct.Struct("=II")
_U64 = struct.Struct("=Q")
#: ``mp_flags`` of ``MDB_page`` (after ``mp_pgno`` and ``mp_pad``) and its ``P_META`` bit
_FLAGS_AT, _P_META = 10, 0x08
#: offsets in ``MDB_meta``: ``mm_psize`` (``mm_dbs[FREE_DBI].md_pad``), ``mm_last_pg``
_PSIZE, _LAST_PG = 4 + 4 + 8 + 8, 4 + 4 + 8 + 8 + 2 * 48
#: offsets of ``md_root`` of the two databases (free pages, main) in ``MDB_meta``
_ROOTS = (4 + 4 + 8 + 8 + 40, 4 + 4 + 8 + 8 + 48 + 40)
#: ``P_BRANCH``, ``P_LEAF``: what a root page is; ``P_INVALID``: no root (empty)
_P_BRANCH, _P_LEAF, _P_INVALID = 0x01, 0x02, (1 << 64) - 1
#: bytes of a meta page read: the page header and ``MDB_meta`` up to ``mm_txnid``
_META_BYTES = _PAGE_HEADER + _TXNID + 8
#: LMDB's page sizes: powers of two up to ``MAX_PAGESIZE`` (64 KiB)
_PAGE_SIZES = tuple(1 << n for n in range(9, 17))
#: reads of the pages before a file whose newest meta page keeps changing is let be
_ATTEMPTS = 20


def check_data_file(data_file: str, display: str) -> None:
    """Raise :class:`StoreError` if the LMDB data file at ``data_file`` exists but is not
    one LMDB can map safely: shorter than two meta pages, a meta page without LMDB's
    magic and version, or shorter than the pages its newest meta page uses
    (``(mm_last_pg + 1) * page size``). A missing or empty file is a new environment.
    Reads with ``pread`` only: a short file is an answer here, never a signal. On a
    build whose ``MDB_meta`` this module cannot read (32-bit) it checks nothing."""
    if sys.maxsize <= 2 ** 32:
        return
    try:
        fd = os.open(data_file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, IsADirectoryError):
        return
    except OSError as e:
        raise StoreError(f"cannot read the LMDB data file: {e.strerror or e}",
                         path=display) from e
    try:
        if os.fstat(fd).st_size == 0:
            return
        # Another process may commit while this reads: a commit can free the newest root
        # and the one after it reuse the page, and a commit can grow the file after its
        # size was read. So the size is read after the meta page (a file is never shorter
        # than its newest meta page uses), and what was read counts only if no commit
        # came between the first read of the meta pages and a second one (a root page is
        # freed only by a later commit). A meta that never holds still has a live writer.
        for _ in range(_ATTEMPTS):
            txnid, newest, psize = _newest_meta(fd, display)
            damage = _damage(fd, newest, psize, os.fstat(fd).st_size, display)
            if _newest_meta(fd, display)[0] == txnid:
                if damage is not None:
                    raise damage
                return
    except StoreError:
        raise
    except OSError as e:
        raise StoreError(f"cannot read the LMDB data file: {e.strerror or e}",
                         path=display) from e
    finally:
        os.close(fd)


def _newest_meta(fd: int, display: str) -> tuple[int, bytes, int]:
    """The id of the last commit, its meta page and the page size, read from ``fd``."""
    first = _meta(os.pread(fd, _META_BYTES, 0), 0, display)
    psize = _U32.unpack_from(first, _PAGE_HEADER + _PSIZE)[0]
    if psize not in _PAGE_SIZES:
        raise StoreError(f"damaged LMDB data file: page size {psize} in its first meta "
                         f"page is not one LMDB uses", path=display)
    second = _meta(os.pread(fd, _META_BYTES, psize), 1, display)
    txnid, newest = max((_U64.unpack_from(page, _PAGE_HEADER + _TXNID)[0], page)
                        for page in (first, second))
    return txnid, newest, psize


def _damage(fd: int, newest: bytes, psize: int, size: int,
            display: str) -> StoreError | None:
    """What is wrong with a file of ``size`` bytes whose newest meta page is ``newest``:
    shorter than the pages that commit uses, or a root that is not a root page."""
    last_pg = _U64.unpack_from(newest, _PAGE_HEADER + _LAST_PG)[0]
    if size < max(2, last_pg + 1) * psize:
        return StoreError(
            f"the LMDB data file is cut short: {size:,} bytes, but its last commit uses "
            f"{last_pg + 1:,} pages of {psize} bytes ({(last_pg + 1) * psize:,} bytes); "
            f"LMDB would crash reading the missing pages", path=display,
            hint="restore the file from a complete copy")
    for at in _ROOTS:
        root = _U64.unpack_from(newest, _PAGE_HEADER + at)[0]
        if not _is_root(fd, root, last_pg, psize):
            return StoreError(f"damaged LMDB data file: its newest meta page names page "
                              f"{root} as the root of a database, which is not a root "
                              f"page", path=display)
    return None


def _is_root(fd: int, root: int, last_pg: int, psize: int) -> bool:
    """Whether ``root`` (from the newest meta page) is no page or a branch or leaf page
    that knows its own number: a root that names another kind of page (the middle of a
    large value, a meta page) would have LMDB read data as page headers."""
    if root == _P_INVALID:
        return True
    head = os.pread(fd, _PAGE_HEADER, root * psize) if 2 <= root <= last_pg else b""
    if len(head) != _PAGE_HEADER:
        return False
    pgno = _U64.unpack_from(head, 0)[0]
    kind = struct.unpack_from("=H", head, _FLAGS_AT)[0] & (_P_BRANCH | _P_LEAF | 0x0C)
    return pgno == root and kind in (_P_BRANCH, _P_LEAF)


def _meta(page: bytes, number: int, display: str) -> bytes:
    """``page`` (the start of meta page ``number``) if it is a whole LMDB 0.9 meta page."""
    if len(page) < _META_BYTES:
        raise StoreError(f"the LMDB data file is cut short inside meta page {number}",
                         path=display)
    flags = struct.unpack_from("=H", page, _FLAGS_AT)[0]
    magic, version = _U32.unpack_from(page, _PAGE_HEADER)
    if not flags & _P_META or magic != _MAGIC:
        raise StoreError(f"not an LMDB data file, or a damaged one: meta page {number} "
                         f"lacks LMDB's magic number", path=display)
    if version != _VERSION:
        raise StoreError(f"LMDB data file of format version {version}, not "
                         f"{_VERSION}", path=display)
    return page


class MetaPages:
    """A read-only map of the two meta pages of one LMDB data file."""

    __slots__ = ("_map", "_first", "_second")

    def __init__(self, data_file: str, page_size: int) -> None:
        fd = os.open(data_file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            if os.fstat(fd).st_size < 2 * page_size:   # reading past its end: SIGBUS
                raise ValueError("the data file is shorter than its two meta pages")
            self._map = mmap.mmap(fd, 2 * page_size, prot=mmap.PROT_READ) \
                if hasattr(mmap, "PROT_READ") else \
                mmap.mmap(fd, 2 * page_size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self._first = _PAGE_HEADER + _TXNID
        self._second = page_size + _PAGE_HEADER + _TXNID

    @classmethod
    def open(cls, data_file: str, page_size: int, env: Any) -> "MetaPages | None":
        """The meta pages of ``data_file``, or None if they cannot be read this way
        (then ``env.info()`` is the way)."""
        if sys.maxsize <= 2 ** 32:
            return None       # a 32-bit build lays MDB_meta out differently
        try:
            pages = cls(data_file, page_size)
        except (OSError, ValueError):
            return None
        try:
            for page in (0, page_size):
                magic, version = _U32.unpack_from(pages._map, page + _PAGE_HEADER)
                if magic != _MAGIC or version != _VERSION:
                    raise ValueError("not an LMDB 0.9 meta page")
            # another process may commit between the two reads: a few tries
            for _ in range(5):
                if pages.last_txnid() == env.info()["last_txnid"]:
                    return pages
            raise ValueError("transaction id not where it was expected")
        except (ValueError, struct.error):
            pages.close()
            return None

    def last_txnid(self) -> int:
        m = self._map
        a = _U64.unpack_from(m, self._first)[0]
        b = _U64.unpack_from(m, self._second)[0]
        return a if a > b else b

    def close(self) -> None:
        self._map.close()
