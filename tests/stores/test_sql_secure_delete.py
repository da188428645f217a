"""The SQLite store's connections set ``PRAGMA secure_delete = FAST``
(kvzarr/stores/sql/backends.py, SQLITE_SECURE_DELETE): erasing or replacing a large
value does not zero and log every page it frees, whatever the SQLite build's default."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from kvzarr.stores.sql import SQLStore

_VALUE = 4 << 20


def _wal_size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def _empty_the_log(path: Path) -> None:
    """Copy the log into the database and truncate it to 0 bytes, from a connection of
    another program (the store's are idle)."""
    conn = sqlite3.connect(path)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
    finally:
        conn.close()


def test_every_connection_deletes_fast(tmp_path: Path) -> None:
    with SQLStore(tmp_path / "s.db") as store:
        store.set("k", b"v")
        conns = list(store._backend._idle)
        assert conns
        for conn in conns:      # 2 = FAST (0 = OFF, 1 = ON)
            assert conn.cursor().execute("PRAGMA secure_delete").fetchone()[0] == 2


def test_erasing_a_large_value_logs_a_few_pages_not_the_value(tmp_path: Path) -> None:
    # With secure_delete = ON (Debian's default) the erase writes each of the value's
    # 256 overflow pages, zeroed, to the log: at least the value's size.
    path = tmp_path / "s.db"
    big = os.urandom(_VALUE)
    with SQLStore(path) as store:
        store.set("small", b"kept")
        store.set("big", big)
        store._backend.checkpoints.wait()
        _empty_the_log(path)
        assert _wal_size(path) == 0
        store.erase("big")
        assert 0 < _wal_size(path) < _VALUE // 16
        assert store.get("big") is None and store.get("small") == b"kept"
        # the freed pages are reused: writing the value again does not grow the file
        size = path.stat().st_size
        store.set("big", big[::-1])
        store._backend.checkpoints.wait()
        _empty_the_log(path)
        assert path.stat().st_size <= size
        assert store.get("big") == big[::-1]



def test_replacing_a_large_value_by_one_of_another_size_logs_only_the_new_one(
        tmp_path: Path) -> None:
    # (a value of the same size is overwritten in place, page by page, either way; a
    # shard rewritten with one tile changed has another size: with ON the old value's
    # pages were zeroed and logged too, 8.1 MB here instead of 3.9)
    path = tmp_path / "s.db"
    with SQLStore(path) as store:
        store.set("big", os.urandom(_VALUE))
        store._backend.checkpoints.wait()
        _empty_the_log(path)
        new = os.urandom(_VALUE - 300_000)
        store.set("big", new)
        assert _wal_size(path) < _VALUE
        assert store.get("big") == new
