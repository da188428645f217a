"""The garbage-collector pause around big reads and writes: always undone, counted
across threads, never turning on a collector the program turned off."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import sys
import threading

import numpy as np
import pytest

import kvzarr
from kvzarr.runtime.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def _collector_on():
    gc.enable()
    yield
    gc.enable()


def test_pause_is_undone_also_after_an_error():
    with pytest.raises(ValueError):
        with gc_paused():
            assert not gc.isenabled()
            raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_the_program_turned_off_stays_off():
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_in_threads_end_with_the_last():
    first_in, second_done, first_may_leave = (threading.Event() for _ in range(3))
    seen = {}

    def first():
        with gc_paused():
            first_in.set()
            first_may_leave.wait(10)
        seen["after_first"] = gc.isenabled()

    t = threading.Thread(target=first)
    t.start()
    assert first_in.wait(10)
    with gc_paused():
        pass
    seen["after_second"] = gc.isenabled()   # the first pause still runs
    second_done.set()
    first_may_leave.set()
    t.join(10)
    assert seen == {"after_second": False, "after_first": True}


def _report_collector(queue):
    queue.put(gc.isenabled())


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                    reason="needs the fork start method")
def test_a_child_forked_during_a_pause_has_the_collector_on():
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    with gc_paused():
        proc = ctx.Process(target=_report_collector, args=(queue,))
        proc.start()
        child_enabled = queue.get(timeout=30)
        proc.join(30)
    assert child_enabled is True


def test_array_reads_and_writes_of_many_chunks_leave_the_collector_as_it_was(tmp_path):
    paused = []
    original = gc.disable

    def spy():
        paused.append(True)
        original()

    a = kvzarr.create_array(str(tmp_path / "a.lmdb"), shape=(64, 64), chunks=(4, 4),
                            dtype="int32")
    data = np.arange(64 * 64, dtype="int32").reshape(64, 64)
    gc.disable = spy
    try:
        a[...] = data
        assert np.array_equal(a[...], data)
        with pytest.raises(kvzarr.errors.KvzarrError):
            a[...] = np.zeros((3, 3), dtype="int32")     # wrong shape: refused
    finally:
        gc.disable = original
    assert paused, "a 256-chunk read or write should pause the collector"
    assert gc.isenabled()
    assert np.array_equal(a[...], data)
