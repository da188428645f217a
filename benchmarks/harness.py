"""Timing, repetitions and correctness checks shared by every workload.

Promises: a metric is a list of per-repetition rates, reported as median with min-max;
every read is compared with what was written and a mismatch raises
:class:`CorrectnessError`, which discards the whole workload for that system (a fast wrong
answer never gets a number); loops of many small operations stop at a time budget and
say how many of their operations they ran, so one slow system cannot stall the suite.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class CorrectnessError(AssertionError):
    """A read returned something other than what was written."""


class Unsupported(Exception):
    """The system cannot run this part of a workload; the message says why."""


def check_equal(got: Any, want: np.ndarray, what: str) -> None:
    """Raise CorrectnessError unless ``got`` equals ``want`` exactly (shape, dtype
    kind and every element; NaN equal to NaN)."""
    got = np.asarray(got)
    if got.shape != want.shape:
        raise CorrectnessError(f"{what}: shape {got.shape}, expected {want.shape}")
    if not np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
        differ = got != want
        if want.dtype.kind in "fc":
            differ &= ~(np.isnan(got) & np.isnan(want))
        bad = int(np.count_nonzero(differ))
        raise CorrectnessError(f"{what}: {bad} of {want.size} elements differ")


@dataclass
class Metric:
    name: str
    unit: str
    values: list[float] = field(default_factory=list)   # one per repetition
    better: str = "higher"
    limit_metric: str | None = None   # the raw engines' metric that bounds this one
    note: str = ""
    na: str | None = None             # why the system cannot do this
    error: str | None = None          # what went wrong when it tried
    lost: list[int] | None = None     # elements lost by concurrent writers, per repetition

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "unit": self.unit, "better": self.better,
                               "values": self.values, "note": self.note, "na": self.na,
                               "error": self.error,
                               "limit_metric": self.limit_metric or self.name}
        if self.values:
            out.update(median=statistics.median(self.values), min=min(self.values),
                       max=max(self.values))
        if self.lost is not None:
            out["lost"] = self.lost
        return out


class Recorder:
    """Collects the metrics of one (system, workload) run, in the order first seen."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.metrics: dict[str, Metric] = {}

    def metric(self, name: str, unit: str, **kw: Any) -> Metric:
        m = self.metrics.get(name)
        if m is None:
            m = self.metrics[name] = Metric(name, unit, **kw)
        return m

    def na(self, name: str, unit: str, reason: str, **kw: Any) -> None:
        self.metric(name, unit, **kw).na = reason

    def fail(self, name: str, unit: str, message: str, **kw: Any) -> None:
        self.metric(name, unit, **kw).error = message

    def rate(self, name: str, unit: str, amount: float, fn: Callable[[], Any],
             **kw: Any) -> Any:
        """Time ``fn()`` once; record ``amount / seconds``; return what fn returned."""
        seconds, result = timed(fn)
        self.metric(name, unit, **kw).values.append(amount / seconds)
        return result

    def loop_rate(self, name: str, unit: str, items: Iterable[Any],
                  fn: Callable[[Any], Any], total: int,
                  tail: Callable[[], Any] | None = None, **kw: Any) -> list[Any]:
        """Run ``fn(item)`` for the items until done or out of budget, then ``tail()``
        (e.g. a close that completes the writes, timed with them); record operations
        per second; return the results of the operations that ran."""
        done, seconds, results = budget_loop(items, fn, self.budget)
        if tail is not None:
            t0 = time.perf_counter()
            tail()
            seconds += time.perf_counter() - t0
        m = self.metric(name, unit, **kw)
        m.values.append(done / seconds if seconds > 0 else float("inf"))
        if done < total:
            m.note = f"time budget: {done:,} of {total:,} operations"
        return results

    def record(self, name: str, unit: str, value: float, **kw: Any) -> None:
        self.metric(name, unit, **kw).values.append(value)

    def results(self) -> list[dict[str, Any]]:
        return [m.summary() for m in self.metrics.values()]


def settle() -> None:
    """Start each timed operation from the same state: earlier writes flushed to disk
    (else the kernel makes whoever comes next pay for them) and garbage collected."""
    if hasattr(os, "sync"):
        os.sync()
    gc.collect()


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    settle()
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def budget_loop(items: Iterable[Any], fn: Callable[[Any], Any],
                budget: float) -> tuple[int, float, list[Any]]:
    """(operations run, seconds, their results); stops once ``budget`` seconds pass.
    The clock is read every operation: cheap next to any store operation."""
    settle()
    results = []
    clock = time.perf_counter
    t0 = clock()
    deadline = t0 + budget
    for item in items:
        results.append(fn(item))
        if clock() > deadline:
            break
    return len(results), clock() - t0, results


class WriteCounter:
    """Bytes this process handed to write(2)-family calls (Linux ``/proc/self/io``
    ``wchar``), all threads included: what a store really wrote, journals and
    rewrites too. None where the counter is unavailable."""

    @staticmethod
    def read() -> int | None:
        try:
            with open("/proc/self/io") as f:
                for line in f:
                    if line.startswith("wchar:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None


def rep_locations(system: Any, tag: str, repeat: int,
                  preload: Callable[[str], Any]) -> Iterable[tuple[int, str]]:
    """(repetition, location) pairs: a fresh location per repetition for a system that
    writes, dropped after it; for one that cannot write, one location filled once by
    ``preload(loc)`` (untimed) and read by every repetition."""
    if not system.lacks("write"):
        for r in range(repeat):
            loc = system.location(f"{tag}-{r}")
            try:
                yield r, loc
            finally:
                system.drop(loc)
        return
    loc = system.location(tag)
    try:
        preload(loc)
        for r in range(repeat):
            yield r, loc
    finally:
        system.drop(loc)
