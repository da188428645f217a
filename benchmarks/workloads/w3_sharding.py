"""W3 sharding: a 4096 x 4096 uint16 image, shards 1024 x 1024 of 64 x 64 inner chunks,
gzip level 5: write all (MB/s), then 1,000 random 64 x 64 tile reads (tiles/s), the same
reads again ("warm": a cache's hits; without one, the steady state); the same
array unsharded (64 x 64 chunks); then 1,000 random tile *writes* into the existing
shards (tiles/s, and bytes handed to the OS per tile: a store that rewrites the whole
shard shows it here; each new tile is the image's own with other noise, so shards keep
their size). The unsharded array gets the same tile writes, which is also what
the raw engines (no shards) do as the limit.

Tiles are aligned to the inner chunks; reads are checked tile by tile, writes by reading
the whole array back afterwards.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..harness import Recorder, WriteCounter, check_equal, rep_locations
from .data import GZIP, image_uint16

TITLE = "W3 sharding: 64 x 64 tiles of a sharded uint16 image"
DEFAULTS = {"side": 4096, "shard": 1024, "tile": 64, "reads": 1000, "writes": 1000}


def scaled(params: dict[str, Any], factor: float) -> dict[str, Any]:
    side = max(256, int(params["side"] * factor ** 0.5) // 256 * 256)
    return {**params, "side": side, "shard": min(params["shard"], side // 2),
            "reads": max(10, int(params["reads"] * factor)),
            "writes": max(10, int(params["writes"] * factor))}


def _tile(t: tuple[int, int], n: int) -> tuple[slice, slice]:
    return slice(t[0] * n, (t[0] + 1) * n), slice(t[1] * n, (t[1] + 1) * n)


def run(system: Any, p: dict[str, Any], rec: Recorder, repeat: int) -> None:
    side, shard, n = p["side"], p["shard"], p["tile"]
    data = image_uint16(side)
    mb = data.nbytes / 1e6
    per_side = side // n
    rng = np.random.default_rng(3)
    reads = [tuple(t) for t in rng.integers(0, per_side, (p["reads"], 2)).tolist()]
    picks = rng.choice(per_side * per_side, size=min(p["writes"], per_side ** 2),
                       replace=False)
    writes = [(int(k) // per_side, int(k) % per_side) for k in picks]
    # New tiles like the ones they replace (the same image, other noise): a shard keeps
    # its size however many tiles a store gets through. Random tiles (incompressible)
    # grew the shards as the writes went on, so a store that finished more of them in
    # the time budget showed more bytes per tile.
    fresh = image_uint16(side, seed=1)
    new_tiles = np.stack([fresh[_tile(t, n)] for t in writes]) if writes else \
        np.empty((0, n, n), dtype="uint16")
    for variant, shards in (("sharded", (shard, shard)), ("unsharded", None)):
        names = [f"{variant}: write all", f"{variant}: tile reads",
                 f"{variant}: tile reads, warm", f"{variant}: tile writes",
                 f"{variant}: bytes written per tile"]
        units = ["MB/s", "tiles/s", "tiles/s", "tiles/s", "KiB"]
        reason = system.lacks("shards") if shards else None
        if reason:
            for name, unit in zip(names, units):
                rec.na(name, unit, reason, better="lower" if unit == "KiB" else "higher")
            continue
        preload = lambda loc, s=shards: system.load(loc, "a", data, (n, n), GZIP, s)  # noqa
        for _, loc in rep_locations(system, f"w3-{variant}", repeat, preload):
            _one(system, rec, loc, data, mb, n, shards, reads, writes, new_tiles,
                 names, units, variant)


def _limit(name: str, variant: str) -> dict[str, Any]:
    # the raw engines have no shards: their unsharded numbers bound the sharded ones
    return {"limit_metric": name.replace("sharded:", "unsharded:", 1)} \
        if variant == "sharded" else {}


def _one(system, rec, loc, data, mb, n, shards, reads, writes, new_tiles, names, units,
         variant) -> None:
    cannot_write = system.lacks("write")
    if cannot_write:
        rec.na(names[0], units[0], cannot_write, **_limit(names[0], variant))
    else:
        def write() -> None:
            h = system.create(loc, "a", data.shape, "uint16", (n, n), GZIP, shards)
            h.write(Ellipsis, data)
            system.finish(loc)
        rec.rate(names[0], units[0], mb, write, **_limit(names[0], variant))
    h = system.open(loc, "a")
    got = rec.loop_rate(names[1], units[1], reads, lambda t: h.read(_tile(t, n)),
                        total=len(reads), **_limit(names[1], variant))
    for t, tile in zip(reads, got):
        check_equal(tile, data[_tile(t, n)], f"{names[1]} {t}")
    # the same tiles again: a cache's hits; without one, the steady state
    again = reads[:len(got)]
    got = rec.loop_rate(names[2], units[2], again, lambda t: h.read(_tile(t, n)),
                        total=len(again), **_limit(names[2], variant))
    for t, tile in zip(again, got):
        check_equal(tile, data[_tile(t, n)], f"{names[2]} {t}")
    del got, h
    if cannot_write:
        rec.na(names[3], units[3], cannot_write, **_limit(names[3], variant))
        rec.na(names[4], units[4], cannot_write, better="lower", **_limit(names[4], variant))
        return
    w = system.open(loc, "a", write=True)
    before = WriteCounter.read()
    done = rec.loop_rate(names[3], units[3], range(len(writes)),
                         lambda k: w.write(_tile(writes[k], n), new_tiles[k]),
                         total=len(writes), tail=lambda: system.finish(loc),
                         **_limit(names[3], variant))
    after = WriteCounter.read()
    gone = system.lacks("bytes-written")
    if gone or before is None:
        rec.na(names[4], units[4], gone or "no /proc/self/io here", better="lower",
               **_limit(names[4], variant))
    else:
        rec.record(names[4], units[4], (after - before) / 1024 / max(1, len(done)),
                   better="lower", **_limit(names[4], variant))
    del w
    want = data.copy()
    for k in range(len(done)):
        want[_tile(writes[k], n)] = new_tiles[k]
    check_equal(system.open(loc, "a").read(Ellipsis), want, f"{names[3]} (read back)")
