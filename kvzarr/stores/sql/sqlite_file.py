"""A SQLite database file checked against its own header before SQLite opens it.

SQLite keeps no checksums, and it reads a page past the end of a truncated file as
zeros: an overflow page cut off a value comes back as zero bytes, and the value reads
wrong with no error (a file cut by a failed copy or a full disk). A database file is
always a whole number of pages, and its header says how many
(https://www.sqlite.org/fileformat2.html, "1.3 The Database Header": the page size at
offset 16, the "in-header database size" at offset 28, valid when the "file change
counter" at offset 24 equals the "version-valid-for number" at offset 92). A file
whose size is not a whole number of pages, or that holds fewer pages than a valid
header counts, is refused before a query runs.

Only when no write-ahead log or rollback journal beside it holds data: then pages may
still be waiting in the log (WAL mode writes them into the database file only at a
checkpoint) or the journal may be about to restore the file's old size, and SQLite's
own recovery is the judge.
"""

from __future__ import annotations

import os

from ...errors import StoreError

_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100


def check_database_file(path: str, display: str) -> None:
    """StoreError if the file at ``path`` is a SQLite database cut short; nothing for a
    missing or empty file (a new database), a file that is not SQLite (SQLite refuses it
    itself), or one with a log or journal beside it."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header = f.read(_HEADER_SIZE)
    except FileNotFoundError:
        return
    except OSError:
        return          # SQLite reports what it cannot open, with its own error
    if len(header) < _HEADER_SIZE or not header.startswith(_MAGIC):
        return
    for suffix in ("-wal", "-journal"):
        try:
            if os.path.getsize(path + suffix) > 0:
                return
        except OSError:
            pass
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return          # not a valid header: SQLite says "file is not a database"
    if size % page_size:
        raise StoreError(f"the SQLite file {display} is cut short: {size} bytes is not a "
                         f"whole number of its {page_size}-byte pages (damaged or "
                         f"truncated; restore it from a copy)", path=display)
    pages = int.from_bytes(header[28:32], "big")
    if pages and header[24:28] == header[92:96] and pages * page_size > size:
        raise StoreError(f"the SQLite file {display} is cut short: its header counts "
                         f"{pages} pages of {page_size} bytes, the file holds "
                         f"{size // page_size} (damaged or truncated; restore it from a "
                         f"copy)", path=display)
