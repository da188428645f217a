"""W2 small chunks: a float32 array of 4 KiB chunks (32 x 32, uncompressed, random data),
100 chunks wide: write all and read all (chunks/s); then 10,000 random single-element
reads one by one and the same elements as one batched coordinate selection (ops/s).

The default is 20,000 chunks (80 MB), not the issue's 100,000: zarr-python 3 and 2 write
about 1,500 small chunks a second here, and 100,000 of them would take the whole suite's
time budget alone. ``--param W2.chunks=100000`` runs the full size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..harness import Recorder, check_equal, rep_locations
from .data import NONE, random_float32

TITLE = "W2 small chunks: 4 KiB chunks, whole-array and single-element access"
DEFAULTS = {"chunks": 20000, "points": 10000, "width": 100}
CHUNK = (32, 32)


def scaled(params: dict[str, Any], factor: float) -> dict[str, Any]:
    return {**params, "chunks": max(params["width"], int(params["chunks"] * factor)),
            "points": max(10, int(params["points"] * factor))}


def run(system: Any, p: dict[str, Any], rec: Recorder, repeat: int) -> None:
    rows = max(1, p["chunks"] // p["width"])
    nchunks = rows * p["width"]
    shape = (rows * CHUNK[0], p["width"] * CHUNK[1])
    data = random_float32(shape, seed=2)
    rng = np.random.default_rng(7)
    ii = rng.integers(0, shape[0], p["points"])
    jj = rng.integers(0, shape[1], p["points"])
    want_points = data[ii, jj]
    cannot_write = system.lacks("write")
    if cannot_write:
        rec.na("write all", "chunks/s", cannot_write)
    preload = lambda loc: system.load(loc, "a", data, CHUNK, NONE)  # noqa: E731
    for _, loc in rep_locations(system, "w2", repeat, preload):
        if not cannot_write:
            def write() -> None:
                h = system.create(loc, "a", shape, "float32", CHUNK, NONE)
                h.write(Ellipsis, data)
                system.finish(loc)
            rec.rate("write all", "chunks/s", nchunks, write)
        h = system.open(loc, "a")
        got = rec.rate("read all", "chunks/s", nchunks, lambda: h.read(Ellipsis))
        check_equal(got, data, "read all")
        del got
        singles = rec.loop_rate("single-element reads", "ops/s",
                                zip(ii.tolist(), jj.tolist()), h.element, total=len(ii))
        check_equal(np.array(singles, dtype="float32"), want_points[:len(singles)],
                    "single-element reads")
        # the same points again: a cache's hits; without one, the steady state
        again = len(singles)
        warm = rec.loop_rate("single-element reads, warm", "ops/s",
                             zip(ii[:again].tolist(), jj[:again].tolist()), h.element,
                             total=again)
        check_equal(np.array(warm, dtype="float32"), want_points[:len(warm)],
                    "single-element reads, warm")
        got = rec.rate("batched selection", "elements/s", len(ii),
                       lambda: h.points((ii, jj)))
        check_equal(got, want_points, "batched selection")
        del h
