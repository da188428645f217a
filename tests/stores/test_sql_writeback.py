"""A large SQLite write transaction flushes its log on a thread before the COMMIT
(kvzarr/stores/writeback.py): it happens every WRITEBACK_BYTES stored inside a
transaction and never for small ones, what is committed reads back, and a writer killed
after the log was flushed early -- before its COMMIT -- leaves the old state."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

from kvzarr.stores.sql import SQLStore
from kvzarr.stores import writeback
from kvzarr.stores.writeback import WRITEBACK_BYTES

from ..forkserver import forkserver_context
from .kill_trials import killed_runs

pytestmark = pytest.mark.skipif(not writeback.available(),
                                reason="no fdatasync on this system")

_VALUE = 1 << 20
#: keys of one generation: together past two flush steps
_KEYS = [f"big/{i:02d}" for i in range(2 * WRITEBACK_BYTES // _VALUE + 4)]


def _started(store: SQLStore, at_least: int, timeout: float = 10.0) -> int:
    """The store's flush count once it reaches ``at_least`` (or the timeout)."""
    deadline = time.monotonic() + timeout
    wb = store._backend.writeback
    while wb.started < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    return wb.started


def _generation(gen: int) -> bytes:
    return (b"%08d" % gen) * (_VALUE // 8)


def test_a_large_transaction_writes_its_log_back_before_the_commit(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "s.db")
    with store.transaction():
        for k in _KEYS:
            store.set_many([(k, _generation(1))])
        # inside the transaction, not yet committed: the log is being flushed
        assert _started(store, 1) >= 1
    assert store.get_many(_KEYS) == [_generation(1)] * len(_KEYS)
    store.close()
    with SQLStore(tmp_path / "s.db") as again:
        assert again.get_many(_KEYS) == [_generation(1)] * len(_KEYS)


def test_small_transactions_do_not(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "s.db")
    for gen in range(3):
        with store.transaction():
            for k in _KEYS[:WRITEBACK_BYTES // _VALUE - 1]:
                store.set(k, _generation(gen))
    time.sleep(0.2)
    assert store._backend.writeback.started == 0
    store.close()


def _open_when_let_go(path: str, go) -> tuple[SQLStore, int]:
    """The store, once the trial lets this writer go, and the generation it holds then
    (read after ``go``: the writer before may have committed up to its kill)."""
    store = SQLStore(path, busy_timeout=10.0)
    go.wait(30)
    return store, int(store.get(_KEYS[0])[:8])


def _write_then_hang(path: str, run: int, ready, go) -> None:
    """Commit nothing new: write the next generation in one transaction, wait until the
    log was flushed early, say so, and hang inside the transaction."""
    store, gen = _open_when_let_go(path, go)
    with store.transaction():
        for k in _KEYS:
            store.set(k, _generation(gen + 1))
        _started(store, 1)
        ready.set()
        time.sleep(60)


def _write_until_killed(path: str, run: int, ready, go) -> None:
    store, gen = _open_when_let_go(path, go)
    ready.set()
    while True:
        gen += 1
        with store.transaction():
            for k in _KEYS:
                store.set(k, _generation(gen))


def _one_generation(path: str) -> int:
    with SQLStore(path) as store:
        values = store.get_many(_KEYS)
    tags = {v[:8] for v in values}
    assert len(tags) == 1, f"a mix of generations: {sorted(tags)}"
    (tag,) = tags
    assert all(v == _generation(int(tag)) for v in values)
    return int(tag)


def test_a_writer_killed_after_an_early_writeback_leaves_the_old_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = forkserver_context(monkeypatch, sys.modules[__name__])
    path = str(tmp_path / "killed.db")
    with SQLStore(path) as store:
        store.set_many([(k, _generation(7)) for k in _KEYS])
    for _ in killed_runs(ctx, _write_then_hang, path, 2, lambda run: 0.0):
        assert _one_generation(path) == 7


def test_writers_killed_at_any_moment_of_large_transactions_leave_one_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = forkserver_context(monkeypatch, sys.modules[__name__])
    path = str(tmp_path / "killed.db")
    with SQLStore(path) as store:
        store.set_many([(k, _generation(0)) for k in _KEYS])
    rng = random.Random(1617)
    seen = [_one_generation(path)
            for _ in killed_runs(ctx, _write_until_killed, path, 8,
                                 lambda run: rng.uniform(0.05, 0.8))]
    assert seen == sorted(seen)
    assert seen[-1] > 0            # some transactions committed between the kills


def test_not_where_the_commit_does_not_sync_the_log(tmp_path: Path) -> None:
    """synchronous=NORMAL syncs the log at checkpoints only: nothing to start early."""
    with SQLStore(tmp_path / "s.db", synchronous="NORMAL") as store:
        assert store._backend.writeback is None
    with SQLStore(tmp_path / "s.db", synchronous="EXTRA") as store:
        assert store._backend.writeback is not None
