"""kvzarr.runtime.workers: share() computes every item once, in order, never waits on work no
thread has started (so a caller gets through with every worker busy), and stops what
has not started when an item fails; idle_cores() sees processes that keep the cores
busy."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from kvzarr.runtime import workers


def test_share_returns_results_in_order():
    assert workers.share(lambda x: x * x, range(50)) == [x * x for x in range(50)]
    assert workers.share(lambda x: x, []) == []
    assert workers.share(lambda x: -x, [3]) == [-3]


def test_share_runs_everything_on_the_caller_when_every_worker_is_busy():
    release = threading.Event()
    blockers = [workers.POOL.submit(release.wait, 30) for _ in range(workers.THREADS)]
    ran_on: list[int] = []
    caller: list[int] = []
    result: list[list[int]] = []

    def call() -> None:
        caller.append(threading.get_ident())
        result.append(workers.share(
            lambda x: ran_on.append(threading.get_ident()) or x + 1, range(8)))

    try:
        thread = threading.Thread(target=call)
        thread.start()
        thread.join(20)
        # with POOL.map the call would wait for the blocked workers
        assert not thread.is_alive(), "share() waited on work no worker had started"
    finally:
        release.set()
        for b in blockers:
            b.result()
    assert result == [list(range(1, 9))]
    assert ran_on == caller * 8                              # all on the calling thread


def test_share_stops_what_has_not_started_after_a_failure():
    release = threading.Event()
    blockers = [workers.POOL.submit(release.wait, 30) for _ in range(workers.THREADS)]
    seen: list[int] = []

    def fn(x: int) -> int:
        seen.append(x)
        if x == 0:
            raise ValueError("item 0")
        return x

    try:
        with pytest.raises(ValueError, match="item 0"):
            workers.share(fn, range(6))
    finally:
        release.set()
        for b in blockers:
            b.result()
    # the queued items were cancelled: none runs once the workers are free again
    workers.POOL.submit(lambda: None).result()
    time.sleep(0.05)
    assert seen == [0]


def test_share_on_a_worker_runs_in_place():
    out = workers.POOL.submit(workers.share, lambda x: (workers.in_worker(), x),
                              range(4)).result()
    assert out == [(True, x) for x in range(4)]


def _spin(started) -> None:
    started.set()
    while True:
        pass


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="Linux only")
def test_idle_cores_sees_busy_processes():
    assert 0 <= workers.idle_cores() < max(2, workers.cores())
    ctx = multiprocessing.get_context("spawn")
    events = [ctx.Event() for _ in range(workers.cores())]
    procs = [ctx.Process(target=_spin, args=(e,), daemon=True) for e in events]
    for p in procs:
        p.start()
    try:
        for e in events:
            assert e.wait(60)
        # every core has a spinning process, and the caller wants one too
        assert max(workers.idle_cores() for _ in range(20)) == 0
    finally:
        for p in procs:
            p.kill()
            p.join(10)


def test_map_waits_for_the_running_tasks_when_one_fails():
    started = threading.Event()
    finished: list[int] = []

    def task(x: int) -> int:
        if x == 0:
            started.wait(10)          # fail while task 1 runs
            raise ValueError("task 0")
        started.set()
        time.sleep(0.3)
        finished.append(x)
        return x

    with pytest.raises(ValueError, match="task 0"):
        list(workers.POOL.map(task, range(2)))
    # ThreadPoolExecutor.map would raise while task 1 still runs
    assert finished == [1]


def test_inline_keeps_the_pool_work_on_the_calling_thread_until_the_block_ends():
    def names(n: int) -> set[str]:
        return set(workers.map_grouped(lambda _: threading.current_thread().name,
                                       range(n), parallel=True))
    me = threading.current_thread().name
    with workers.inline():
        # nothing goes to the pool: shares and maps of items stay here, grouped maps
        # go to the sync threads
        assert workers.in_worker()
        assert not any(n.startswith("kvzarr-worker") for n in names(64))
        assert set(workers.share(lambda _: threading.current_thread().name,
                                 range(8))) == {me}
        assert set(workers.map_items(lambda _: threading.current_thread().name,
                                     range(8), parallel=True)) == {me}
        with workers.inline():
            pass
        assert workers.in_worker()           # a nested block leaves the outer one on
    assert not workers.in_worker()
    assert all(n.startswith("kvzarr-worker") for n in names(64))


@pytest.mark.parametrize("count", [0, 1, workers.PROBE_ITEMS, workers.PROBE_ITEMS + 1, 1000])
@pytest.mark.parametrize("slow", [False, True], ids=["page cache", "disk waits"])
def test_map_probed_runs_covers_every_item_once_in_order(
        monkeypatch: pytest.MonkeyPatch, count: int, slow: bool) -> None:
    monkeypatch.setattr(workers, "PROBE_SECONDS", 0.0 if slow else 1.0)
    runs: list[tuple[int, int, str]] = []

    def run(lo: int, hi: int) -> list[int]:
        runs.append((lo, hi, threading.current_thread().name))
        return [i * i for i in range(lo, hi)]
    assert workers.map_probed_runs(run, count) == [i * i for i in range(count)]
    covered = sorted((lo, hi) for lo, hi, _ in runs)
    assert [i for lo, hi in covered for i in range(lo, hi)] == list(range(count))
    on_pool = [name for _, _, name in runs if name.startswith("kvzarr-worker")]
    # the probe on this thread; the rest on the pool only when the probe waited
    assert bool(on_pool) == (slow and count > workers.PROBE_ITEMS + 1)
    assert runs[0][:2] == (0, min(count, workers.PROBE_ITEMS))
    assert not runs[0][2].startswith("kvzarr-worker")


def test_map_aside_runs_on_the_sync_threads_in_order_and_inline_from_one() -> None:
    def where(i: int) -> tuple[int, str]:
        return i, threading.current_thread().name
    got = workers.map_aside(where, range(40), parallel=True)
    assert [i for i, _ in got] == list(range(40))
    assert all(name.startswith("kvzarr-sync") for _, name in got)
    assert workers.map_aside(where, range(5), parallel=False) == [
        (i, threading.current_thread().name) for i in range(5)]
    # from a sync thread (a task of map_waiting) it runs inline, never waits on itself
    nested = workers.map_waiting(lambda i: workers.map_aside(where, [i, i + 1], True),
                                 [0, 10])
    for pair in nested:
        assert pair[0][1] == pair[1][1]


def test_map_grouped_from_an_inline_block_goes_to_the_sync_threads() -> None:
    def where(i: int) -> str:
        return threading.current_thread().name
    assert all(n.startswith("kvzarr-worker") for n in workers.map_grouped(where, range(8), True))
    with workers.inline():
        assert workers.in_worker()
        assert all(n.startswith("kvzarr-sync") for n in workers.map_grouped(where, range(8), True))
    assert not workers.in_worker()
    # a pool worker runs them itself, as does a sync thread
    on_worker = workers.POOL.submit(lambda: workers.map_grouped(where, range(8), True)).result()
    assert len(set(on_worker)) == 1 and on_worker[0].startswith("kvzarr-worker")
    on_sync = workers.SYNC_POOL.submit(lambda: workers.map_grouped(where, range(8), True)
                                       ).result()
    assert len(set(on_sync)) == 1 and on_sync[0].startswith("kvzarr-sync")


def test_start_grouped_runs_while_the_caller_works_and_returns_in_order() -> None:
    started = threading.Event()

    def item(i: int) -> tuple[int, str]:
        started.set()
        return i * i, threading.current_thread().name
    pending = workers.start_grouped(item, range(30), True)
    # the groups run without the caller asking for them
    assert started.wait(5)
    got = pending.result()
    assert [v for v, _ in got] == [i * i for i in range(30)]
    assert all(name.startswith("kvzarr-worker") for _, name in got)
    # not parallel: nothing runs until asked, then on the caller's thread
    ran: list[int] = []
    lazy = workers.start_grouped(lambda i: ran.append(i) or threading.current_thread().name,
                                 range(4), False)
    assert ran == []
    assert set(lazy.result()) == {threading.current_thread().name} and ran == [0, 1, 2, 3]


def test_start_grouped_raises_the_failure_after_the_running_groups_end() -> None:
    finished: list[int] = []

    def item(i: int) -> int:
        if i == 3:
            raise ValueError("item 3")
        time.sleep(0.01)
        finished.append(i)
        return i
    pending = workers.start_grouped(item, range(16), True)
    with pytest.raises(ValueError, match="item 3"):
        pending.result()
    count = len(finished)
    time.sleep(0.1)
    assert len(finished) == count, "no group still ran after the failure reached the caller"
