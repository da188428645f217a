"""Large SQLite commits leave their WAL checkpoint to the store's thread
(kvzarr/stores/sql/checkpoint.py): the pages still reach the database file, every
connection keeps SQLite's automatic checkpoint, closing waits for the thread, and a
writer killed at any moment -- its checkpoint included -- leaves all or nothing."""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from kvzarr.stores.sql import SQLStore
from kvzarr.stores.sql.checkpoint import AUTOCHECKPOINT_PAGES, LARGE_COMMIT_BYTES

from ..forkserver import forkserver_context

#: values per transaction of the killed writer, together past LARGE_COMMIT_BYTES
_KEYS = [f"big/{i:02d}" for i in range(10)]
_VALUE = 1 << 20


def _write_large_until_killed(path: str, ready) -> None:
    store = SQLStore(path, busy_timeout=10.0, retries=10)
    first = store.get(_KEYS[0])
    gen = int(first[:8]) if first else 0
    ready.set()
    while True:
        gen += 1
        tag = b"%08d" % gen
        store.set_many([(k, tag * (_VALUE // 8)) for k in _KEYS])


def test_large_commit_is_checkpointed_on_the_store_thread(tmp_path: Path) -> None:
    assert len(_KEYS) * _VALUE >= LARGE_COMMIT_BYTES
    path = tmp_path / "big.db"
    store = SQLStore(path)
    store.set("small", b"1")
    assert store._backend.checkpoints._thread is None    # small commits: SQLite's own
    values = [(k, os.urandom(_VALUE)) for k in _KEYS]
    store.set_many(values)
    store._backend.checkpoints.wait()
    # the pages were copied into the database file while the store is still open
    assert os.path.getsize(path) >= len(_KEYS) * _VALUE
    for conn in store._backend._idle:           # the pragma was set back on each
        assert conn.cursor().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == \
            AUTOCHECKPOINT_PAGES
    with store.transaction():                  # a large transaction, several statements
        for k, v in values:
            store.set(k, v[::-1])
    store.close()                              # waits for the thread, then closes all
    assert not os.path.exists(f"{path}-wal")   # the last close removed the log
    with SQLStore(path) as again:
        assert again.get_many(_KEYS) == [v[::-1] for _, v in values]


def test_writer_killed_during_large_commits_and_checkpoints_leaves_all_or_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = forkserver_context(monkeypatch, sys.modules[__name__])
    path = str(tmp_path / "killed.db")
    SQLStore(path).close()
    rng = random.Random(1616)
    generations = []
    for _ in range(15):
        ready = ctx.Event()
        p = ctx.Process(target=_write_large_until_killed, args=(path, ready))
        p.start()
        assert ready.wait(30)
        time.sleep(rng.uniform(0.02, 0.4))
        os.kill(p.pid, signal.SIGKILL)
        p.join(10)
        with SQLStore(path) as store:
            values = store.get_many(_KEYS)
        tags = {None if v is None else v[:8] for v in values}
        assert len(tags) == 1, tags                       # all old or all new
        (tag,) = tags
        if tag is not None:
            assert all(v == tag * (_VALUE // 8) for v in values)
        generations.append(0 if tag is None else int(tag))
    assert generations == sorted(generations)
    assert len(set(generations)) > 2     # the kills landed between commits
