"""SQLite engines shared by the stores of a process on one file (sqlite_engines.py): a
store opened after another on the same file and settings reuses its engine, closing
the last store still closes every connection (the file is left alone, as after any
close), and opening and closing stores leaves nothing behind in the process."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import sqlite3
from pathlib import Path

from kvzarr.runtime import process
from kvzarr.stores.sql import sqlite_engines
from kvzarr.stores.sql.store import SQLStore


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_a_store_opened_after_another_reuses_its_engine(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with SQLStore(path) as first:
        first.set("k", b"v")
        engine = first.engine
    assert _files(tmp_path) == ["a.db"]     # the last close closed every connection
    with SQLStore(path) as again:
        assert again.engine is engine and again.get("k") == b"v"
    with SQLStore(path, read_only=True) as reader:      # other settings: its own engine
        assert reader.engine is not engine and reader.get("k") == b"v"
    with SQLStore(path, synchronous="NORMAL") as normal:
        assert normal.engine is not engine
    assert _files(tmp_path) == ["a.db"]


def test_stores_open_together_share_the_engine_and_close_independently(
        tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    first, second = SQLStore(path), SQLStore(path)
    assert first.engine is second.engine
    first.set("a", b"1")
    second.set("b", b"2")
    assert first.get("b") == b"2" and second.get("a") == b"1"
    first.close()
    second.set("c", b"3")                 # the other store's close took nothing of this one
    with second.transaction():
        second.set("d", b"4")
    assert second.get("c") == b"3" and second.get("d") == b"4"
    assert os.path.exists(f"{path}-wal")   # a connection is still open
    second.close()
    assert _files(tmp_path) == ["b.db"]
    check = sqlite3.connect(path)
    assert sorted(check.execute("SELECT k FROM kvzarr")) == [("a",), ("b",), ("c",), ("d",)]
    check.close()


def test_disposing_the_shared_engine_leaves_every_store_working(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    first, second = SQLStore(path), SQLStore(path)
    first.set("k", b"1")
    assert second.get("k") == b"1"        # both hold idle connections now
    first.engine.dispose()                # a caller's dispose: the pool is gone
    assert first.get("k") == b"1" and second.get("k") == b"1"
    second.set("k", b"2")
    assert first.get("k") == b"2"
    first.close()
    second.close()
    assert _files(tmp_path) == ["c.db"]


def test_engines_without_a_store_are_kept_up_to_a_bound(tmp_path: Path) -> None:
    for i in range(sqlite_engines.KEPT_UNUSED + 8):
        SQLStore(tmp_path / f"{i}.db").close()
    unused = [e for e in sqlite_engines._entries.values() if e.users == 0]
    assert len(unused) <= sqlite_engines.KEPT_UNUSED
    held = SQLStore(tmp_path / "held.db")
    for i in range(sqlite_engines.KEPT_UNUSED + 8):
        SQLStore(tmp_path / f"more{i}.db").close()
    held.set("k", b"v")                   # an engine in use is never dropped
    assert held.get("k") == b"v"
    assert any(e.engine is held.engine for e in sqlite_engines._entries.values())
    held.close()


def test_opening_and_closing_stores_leaves_no_fork_hooks_behind(
        tmp_path: Path, monkeypatch) -> None:
    # os.register_at_fork cannot forget a hook: one per store would grow without bound
    SQLStore(tmp_path / "warm.db").close()
    gc.collect()
    before = len(process._hooks)
    registered: list[object] = []
    monkeypatch.setattr(os, "register_at_fork", lambda **hook: registered.append(hook))
    for i in range(50):
        with SQLStore(tmp_path / "d.db") as store:
            store.set(f"k{i}", b"v")
    del store
    gc.collect()
    assert registered == [] and len(process._hooks) == before


def _child_opens_the_file(path: str, out) -> None:
    with SQLStore(path) as store:         # the inherited engine, with connections of its own
        store.set("child", b"c")
        out.put(store.get("parent"))


def test_a_forked_child_opens_the_file_on_an_inherited_engine(tmp_path: Path) -> None:
    path = str(tmp_path / "e.db")
    store = SQLStore(path)
    store.set("parent", b"p")             # an idle connection exists at the fork
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_opens_the_file, args=(path, out))
    child.start()
    got = out.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0 and got == b"p"
    assert store.get("child") == b"c"     # the parent's connections still work
    store.set("parent", b"q")
    store.close()
    assert _files(tmp_path) == ["e.db"]
