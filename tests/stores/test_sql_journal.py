"""SQLStore's ``journal_mode`` option (stores/sql.md, "Bulk loading"): a SQLite file in
the rollback journal (DELETE) keeps every promise of the WAL default -- no lost update
between processes, no half transaction seen by a reader, all or nothing after SIGKILL --
and the mode is set, kept and refused as documented."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from kvzarr.errors import ConflictError, StoreConfigError
from kvzarr.stores.sql import SQLStore

from ..forkserver import forkserver_context
from . import test_sql as base


def _mode(path: Path) -> str:
    db = sqlite3.connect(path)    # closed here: an open one would block a switch
    try:
        return db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()


@pytest.fixture
def delete_file(tmp_path: Path) -> base.Target:
    """A new store made in the rollback journal; every later open keeps that mode."""
    path = tmp_path / "bulk.db"
    SQLStore(path, journal_mode="DELETE").close()
    assert _mode(path) == "delete"
    return base.Target(str(path), None, "sqlite")


def test_journal_mode_of_a_new_file_is_kept_until_asked_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with SQLStore(path, journal_mode="delete") as store:      # any case
        store.set("a/zarr.json", b"{}")
        assert store.change_counter() is None     # no wal-index: no counter
    assert _mode(path) == "delete"
    with SQLStore(path) as store:                 # default: the file's own mode
        store.set("b", b"1")
    assert _mode(path) == "delete"
    with SQLStore(path, journal_mode="WAL") as store:
        assert store.get("b") == b"1"
        assert store.change_counter() is not None
    assert _mode(path) == "wal"
    with SQLStore(path, journal_mode="DELETE") as store:    # and back, data intact
        assert store.get("a/zarr.json") == b"{}"
    assert _mode(path) == "delete"


def test_leaving_wal_while_another_store_has_the_file_open_is_a_conflict(
        tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    first = SQLStore(path)
    first.set("k", b"v")          # its connections stay open
    with pytest.raises(ConflictError) as err:
        SQLStore(path, journal_mode="DELETE")
    assert err.value.field == "journal_mode" and err.value.path
    assert _mode(path) == "wal"
    assert first.get("k") == b"v"
    first.set("k", b"w")          # the first store is untouched and still writes
    first.close()
    with SQLStore(path, journal_mode="DELETE") as store:   # alone now: switched
        assert store.get("k") == b"w"


def test_bad_journal_mode_arguments_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    for bad in ("MEMORY", "OFF", "wal2", 3):
        with pytest.raises(StoreConfigError) as err:
            SQLStore(path, journal_mode=bad)
        assert err.value.field == "journal_mode"
    assert not path.exists()               # refused before anything was created
    SQLStore(path).close()
    with pytest.raises(StoreConfigError):
        SQLStore(path, read_only=True, journal_mode="DELETE")
    with pytest.raises(StoreConfigError):  # refused before any connection is tried
        SQLStore("postgresql://nobody@127.0.0.1:1/none", journal_mode="DELETE")


def test_rollback_journal_read_modify_write_in_three_processes_loses_nothing(
        delete_file: base.Target) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    base._run(ctx, [ctx.Process(target=base._increment,
                                args=(delete_file.url, None, 60, barrier))
                    for _ in range(3)])
    with delete_file.open() as store:
        assert store.get("counter") == b"180"
    assert _mode(Path(delete_file.url)) == "delete"


def test_rollback_journal_reader_never_sees_half_a_transaction(
        delete_file: base.Target) -> None:
    ctx = mp.get_context("spawn")
    barrier, out, midway = ctx.Barrier(2), ctx.Queue(), ctx.Event()
    reader = ctx.Process(target=base._read_generations,
                         args=(delete_file.url, None, barrier, out, midway))
    writer = ctx.Process(target=base._write_generations,
                         args=(delete_file.url, None, 150, barrier, midway))
    base._run(ctx, [reader, writer])
    torn, distinct = out.get(timeout=5)
    assert torn == 0
    assert distinct >= 2


def test_rollback_journal_killed_writer_leaves_all_old_or_all_new(
        delete_file: base.Target, monkeypatch: pytest.MonkeyPatch) -> None:
    # as test_sql's SIGKILL trial (forkserver children that import test_sql's writer),
    # 30 kills: the rollback journal's hot-journal recovery on the next open
    ctx = forkserver_context(monkeypatch, base)
    rng = random.Random(16)
    keys = [f"k/{i:02d}" for i in range(20)]
    generations = []
    for _ in range(30):
        ready = ctx.Event()
        p = ctx.Process(target=base._write_until_killed, args=(delete_file.url, None, ready))
        p.start()
        assert ready.wait(30)
        time.sleep(rng.uniform(0.0, 0.03))
        os.kill(p.pid, signal.SIGKILL)
        p.join(10)
        with delete_file.open() as store:
            values = store.get_many(keys)
        assert len(set(values)) == 1, values
        generations.append(int(values[0] or b"0"))
    assert generations == sorted(generations)
    assert len(set(generations)) > 5
    assert _mode(Path(delete_file.url)) == "delete"


def test_a_reopened_store_joins_the_file_in_the_mode_it_has(tmp_path: Path) -> None:
    import pickle
    path = tmp_path / "shared.db"
    with SQLStore(path, journal_mode="DELETE") as store:
        store.set("k", b"v")
        args, kwargs = store._reopen_args()
        assert "journal_mode" not in kwargs     # never a switch while this one is open
        again = pickle.loads(pickle.dumps(store))
        assert again.get("k") == b"v"
        again.set("k", b"w")
        assert store.get("k") == b"w"
        again.close()
    assert _mode(path) == "delete"
