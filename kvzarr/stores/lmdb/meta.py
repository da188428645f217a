"""The id of the last committed transaction of an LMDB file, read from its meta pages
without asking LMDB (stores/lmdb.md, "Change counter").

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

#: ``MDB_MAGIC`` and ``MDB_DATA_VERSION`` of LMDB 0.9
_MAGIC, _VERSION = 0xBEEFC0DE, 1
#: bytes of the page header before ``MDB_meta`` (``PAGEHDRSZ``) on a 64-bit build
_PAGE_HEADER = 16
#: offset of ``mm_txnid`` in ``MDB_meta`` on a 64-bit build: magic, version (4 + 4),
#: address, map size (8 + 8), two ``MDB_db`` records (2 x 48), last page (8)
_TXNID = 4 + 4 + 8 + 8 + 2 * 48 + 8
_U32 = struct.Struct("=II")
_U64 = struct.Struct("=Q")


class MetaPages:
    """A read-only map of the two meta pages of one LMDB data file."""

    __slots__ = ("_map", "_first", "_second")

    def __init__(self, data_file: str, page_size: int) -> None:
        fd = os.open(data_file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
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
