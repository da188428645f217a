"""The journal mode of a SQLite file (https://sqlite.org/pragma.html#pragma_journal_mode;
stores/sql.md, "Bulk loading"): which modes a store may be asked for, and switching an
existing file to one.

The mode is persistent: it is a property of the file, which every later connection, of
any process, uses until a connection sets another. SQLite changes a file out of WAL only
while no other connection has it open (it answers with the mode still in force, or
fails with SQLITE_BUSY), so the store switches on a connection of its own before it opens
any other.
"""

from __future__ import annotations

import sqlite3

#: the journal modes a store may be asked for: WAL, the default (readers never wait for
#: the writer; every page is written twice, to the log and by the checkpoint), and
#: DELETE, the rollback journal (pages appended to the file are written once, so a bulk
#: load runs ~2-3x faster, but a commit waits for readers to finish and blocks new ones
#: while it writes)
JOURNAL_MODES = ("WAL", "DELETE")


def switch_journal(uri: str, mode: str, busy_timeout: float) -> str:
    """Set journal ``mode`` on the existing file of the SQLite ``uri`` (a ``file:`` URI)
    on a connection of its own, closed before returning; return the mode in force after
    (upper case: ``mode`` unless other connections kept it from changing). Raises what
    :mod:`sqlite3` raises."""
    db = sqlite3.connect(uri, uri=True, timeout=busy_timeout, isolation_level=None)
    try:
        now = db.execute("PRAGMA journal_mode").fetchone()[0].upper()
        if now != mode:
            now = db.execute(f"PRAGMA journal_mode = {mode}").fetchone()[0].upper()
        return now
    finally:
        db.close()
