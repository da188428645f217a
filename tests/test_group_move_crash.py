"""A process killed (SIGKILL) in the middle of ``Group.move`` leaves the node whole: on
LMDB and SQLite at exactly one of its two paths, with the consolidated metadata above
them true; on a directory at one or both of them (what :mod:`kvzarr.move` promises),
each path that holds a ``zarr.json`` reading back all of the data. One mover process per
store, all running at once, each killed at a random moment."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import time

import numpy as np

import kvzarr
from tests.consolidated.conftest import assert_member_true

CONTEXT = mp.get_context("spawn")
DATA = np.arange(600, dtype="int32")
ROUNDS = 1
SUFFIXES = (".lmdb", ".sqlite", ".zarr")


def _mover(target, ready):
    store = kvzarr.open_store(target)
    root = kvzarr.open_group(store)
    ready.set()
    source, dest = "x", "y/under"
    while True:
        root.move(source, dest)
        source, dest = dest, source


def _prepare(target):
    store = kvzarr.open_store(target)
    root = kvzarr.open_group(store)
    root.create_array("x", data=DATA, chunks=(4,), attributes={"a": 1})
    kvzarr.consolidate_metadata(store)
    transactional = store.capabilities.transactional
    store.close()
    return transactional


def _check(target, transactional):
    store = kvzarr.open_store(target)
    try:
        present = [p for p in ("x", "y/under") if store.exists(f"{p}/zarr.json")]
        assert (len(present) == 1) if transactional else present, (target, present)
        for path in present:
            arr = kvzarr.open_array(store, path=path, mode="r")
            np.testing.assert_array_equal(arr[...], DATA)
            assert arr.attrs["a"] == 1
        if transactional:
            gone = "x" if present == ["y/under"] else "y/under"
            assert not list(store.list_prefix(gone + "/")), target
        else:
            kvzarr.consolidate_metadata(store)     # the repair after a crash
        assert_member_true(store)
    finally:
        store.close()


def test_a_killed_move_leaves_the_node_whole(tmp_path):
    rng = random.Random(0)
    for r in range(ROUNDS):
        targets = [str(tmp_path / f"r{r}{suffix}") for suffix in SUFFIXES]
        transactional = [_prepare(t) for t in targets]
        ready = [CONTEXT.Event() for _ in targets]
        procs = [CONTEXT.Process(target=_mover, args=(t, e)) for t, e in zip(targets, ready)]
        for p in procs:
            p.start()
        for event in ready:
            assert event.wait(120)
        for p in procs:                       # each killed at its own random moment
            time.sleep(rng.uniform(0.02, 0.3))
            assert p.is_alive()               # still moving back and forth
            os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            p.join()
        for target, tx in zip(targets, transactional):
            _check(target, tx)
