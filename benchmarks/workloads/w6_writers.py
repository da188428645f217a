"""W6 many writers: 2 and 4 separate processes (multiprocessing, spawn) writing into one
float32 array (64 MiB at scale 1, 1 MiB chunks, blosc-zstd) at once (MB/s of data
written, from the first writer's start to the last one's end).

* disjoint: whole chunks, dealt round-robin to the writers; no chunk is shared. Any
  element that does not read back as written is a correctness failure.
* shared: blocks of 32 full-width rows dealt round-robin, so every chunk is written in
  part by every writer and each write is a read-modify-write of the chunks it touches.
  A system that does not make that atomic loses updates: the elements that do not read
  back as written are counted and reported as "lost" (the system is then excluded from
  "best peer" for that metric), with what the system documents about it.

Writers are started once per writer count and reused across repetitions; they open the
array before a barrier and start together after it.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from typing import Any

import numpy as np

from ..harness import CorrectnessError, Recorder
from .data import BLOSC_ZSTD, bulk_shape, smooth_float32
from .w1_bulk import CHUNKS

TITLE = "W6 many writers: processes writing one array at once"
DEFAULTS = {"mib": 64, "procs": [2, 4], "block_rows": 32}


def scaled(params: dict[str, Any], factor: float) -> dict[str, Any]:
    return {**params, "mib": max(4, params["mib"] * factor)}


def units_of(mode: str, shape: tuple[int, int], block_rows: int) -> list[tuple[slice, slice]]:
    rows, cols = shape
    if mode == "disjoint":
        return [(slice(i, i + CHUNKS[0]), slice(j, j + CHUNKS[1]))
                for i in range(0, rows, CHUNKS[0]) for j in range(0, cols, CHUNKS[1])]
    return [(slice(i, i + block_rows), slice(0, cols)) for i in range(0, rows, block_rows)]


def _writer(k: int, nprocs: int, system_args: tuple[str, str], params: dict[str, Any],
            budget: float, barrier: Any, commands: Any, results: Any) -> None:
    """A writer process: rebuild the adapter, then for each command open the array,
    wait at the barrier, write this writer's units, report (start, end, units done)."""
    from ..systems import make_system
    name, root = system_args
    system = make_system(name, root)
    shape = bulk_shape(params["mib"])
    data = smooth_float32(*shape)
    while True:
        cmd = commands.get()
        if cmd is None:
            return
        loc, mode = cmd
        mine = list(range(k, len(units_of(mode, shape, params["block_rows"])), nprocs))
        units = units_of(mode, shape, params["block_rows"])
        done: list[int] = []
        try:
            h = system.open(loc, "a", write=True)
            barrier.wait(timeout=120)
            t0 = time.perf_counter()
            deadline = t0 + budget
            for u in mine:
                h.write(units[u], data[units[u]])
                done.append(u)
                if time.perf_counter() > deadline:
                    break
            system.finish(loc)
            t1 = time.perf_counter()
            del h
            system.close(loc)
            results.put((k, t0, t1, done, None))
        except BaseException as e:  # reported, never fatal to the suite
            try:
                barrier.abort()
            except Exception:
                pass
            results.put((k, 0.0, 0.0, done, f"{type(e).__name__}: {e}\n"
                                            f"{traceback.format_exc(limit=3)}"))


class _Writers:
    def __init__(self, nprocs: int, system: Any, params: dict[str, Any], budget: float):
        ctx = mp.get_context("spawn")
        self.barrier = ctx.Barrier(nprocs)
        self.results = ctx.Queue()
        self.commands = [ctx.Queue() for _ in range(nprocs)]
        self.procs = [ctx.Process(target=_writer, daemon=True, args=(
            k, nprocs, system.child_args(), params, budget, self.barrier,
            self.commands[k], self.results)) for k in range(nprocs)]
        for proc in self.procs:
            proc.start()

    def run(self, loc: str, mode: str) -> list[tuple]:
        self.barrier.reset()
        for q in self.commands:
            q.put((loc, mode))
        return sorted(self.results.get(timeout=900) for _ in self.procs)

    def stop(self) -> None:
        for q in self.commands:
            q.put(None)
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


def run(system: Any, p: dict[str, Any], rec: Recorder, repeat: int) -> None:
    shape = bulk_shape(p["mib"])
    data = smooth_float32(*shape)
    reason = system.lacks("multiprocess")
    for nprocs in p["procs"]:
        names = {m: f"{nprocs} writers, {m} chunks" for m in ("disjoint", "shared")}
        if reason:
            for name in names.values():
                rec.na(name, "MB/s", reason)
            continue
        shared_reason = system.lacks("shared-writes")
        writers = _Writers(nprocs, system, p, rec.budget)
        try:
            for mode in ("disjoint", "shared"):
                if mode == "shared" and shared_reason:
                    rec.na(names["shared"], "MB/s", shared_reason)
                    continue
                for r in range(repeat):
                    if not _once(system, rec, writers, names[mode], mode, shape, data, p, r):
                        break
        finally:
            writers.stop()


def _once(system, rec, writers, name, mode, shape, data, p, r) -> bool:
    loc = system.location(f"w6-{mode}-{r}")
    try:
        system.create(loc, "a", shape, "float32", CHUNKS, BLOSC_ZSTD)
        system.finish(loc)
        system.close(loc)
        out = writers.run(loc, mode)
        errors = [e for *_, e in out if e]
        if errors:
            rec.fail(name, "MB/s", errors[0].strip().splitlines()[0])
            rec.metric(name, "MB/s").note = errors[0]
            return False
        units = units_of(mode, shape, p["block_rows"])
        done = sorted(u for *_, d, _ in out for u in d)
        seconds = max(t1 for _, _, t1, _, _ in out) - min(t0 for _, t0, _, _, _ in out)
        nbytes = sum(data[units[u]].nbytes for u in done)
        m = rec.metric(name, "MB/s")
        m.values.append(nbytes / 1e6 / seconds)
        notes = [f"time budget: {len(done)} of {len(units)} writes"] \
            if len(done) < len(units) else []
        got = system.open(loc, "a").read(Ellipsis)
        written = np.zeros(shape, dtype=bool)
        for u in done:
            written[units[u]] = True
        lost = int(np.count_nonzero((got != data) & written))
        if mode == "disjoint" and lost:
            raise CorrectnessError(f"{name}: {lost} elements lost with no chunk shared")
        if mode == "shared":
            m.lost = (m.lost or []) + [lost]
            notes.append(f"documented: {system.shared_writes}")
        m.note = "; ".join(notes)
        return True
    finally:
        system.drop(loc)
