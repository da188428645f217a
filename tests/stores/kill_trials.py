"""SIGKILL trials of writer processes: one writer per run, each killed at a moment the
test picks, and a check that what is left holds one generation of values."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def killed_runs(ctx: Any, target: Callable[..., None], path: str, trials: int,
                pause: Callable[[int], float]) -> Iterator[int]:
    """Runs 1..``trials``: ``target(path, run, ready, go)`` in a process of ``ctx`` is let
    go, and killed with SIGKILL ``pause(run)`` seconds after it sets ``ready``; each run
    is yielded once its writer is dead. The next writer starts up while this one is
    killed, so start-up time stays out of the trials."""
    def spawn(run: int) -> tuple[Any, Any, Any]:
        ready, go = ctx.Event(), ctx.Event()
        child = ctx.Process(target=target, args=(path, run, ready, go))
        child.start()
        return child, ready, go

    upcoming = spawn(1)
    for run in range(1, trials + 1):
        child, ready, go = upcoming
        if run < trials:
            upcoming = spawn(run + 1)
        go.set()
        assert ready.wait(60)
        time.sleep(pause(run))
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        yield run


def one_generation(values: Sequence[bytes], size: int) -> int:
    """The generation (first byte) every value of ``size`` bytes repeats; fails on a
    mix of generations or a torn value."""
    gens = {v[0] for v in values}
    assert all(len(v) == size and v.count(v[:1]) == size for v in values)
    assert len(gens) == 1, f"a mix of generations: {sorted(gens)}"
    return gens.pop()
