"""Fixtures every test folder shares: another process to send pickled objects to."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import pytest

CONTEXTS = ["spawn", "fork"] if "fork" in mp.get_all_start_methods() else ["spawn"]


@pytest.fixture(scope="module")
def spawned() -> Iterator[ProcessPoolExecutor]:
    """One spawned worker for the module (a spawn costs an interpreter start)."""
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        yield pool


@pytest.fixture(params=CONTEXTS)
def other_process(request: pytest.FixtureRequest,
                  spawned: ProcessPoolExecutor) -> Iterator[ProcessPoolExecutor]:
    """A process that is not this one: the module's spawned worker, or a child forked
    now, after the test opened its stores (so it inherits them open)."""
    if request.param == "spawn":
        yield spawned
        return
    with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as pool:
        yield pool
