"""W1 bulk: a float32 2-D array (256 MiB at scale 1, 4096 columns) in 1 MiB chunks
(256 x 1024), uncompressed and blosc-zstd level 3 with byte shuffle on smooth data:
write all, then read all through a freshly opened array (MB/s).

A write is timed from creating the array to the end of whatever makes it complete
(closing an archive, syncing); every repetition writes to a fresh location.
"""

from __future__ import annotations

from typing import Any

from ..harness import Recorder, check_equal, rep_locations
from .data import CODECS, bulk_shape, smooth_float32

TITLE = "W1 bulk: 1 MiB float32 chunks, write all / read all"
DEFAULTS = {"mib": 256, "codecs": ["uncompressed", "blosc-zstd"]}
CHUNKS = (256, 1024)


def scaled(params: dict[str, Any], factor: float) -> dict[str, Any]:
    return {**params, "mib": max(1, params["mib"] * factor)}


def run(system: Any, p: dict[str, Any], rec: Recorder, repeat: int) -> None:
    data = smooth_float32(*bulk_shape(p["mib"]))
    mb = data.nbytes / 1e6
    for cname in p["codecs"]:
        codec = CODECS[cname]
        wname, rname = f"write all, {cname}", f"read all, {cname}"
        cannot_write = system.lacks("write")
        if cannot_write:
            rec.na(wname, "MB/s", cannot_write)
        preload = lambda loc, c=codec: system.load(loc, "a", data, CHUNKS, c)  # noqa: E731
        for _, loc in rep_locations(system, f"w1-{cname}", repeat, preload):
            if not cannot_write:
                def write() -> None:
                    h = system.create(loc, "a", data.shape, "float32", CHUNKS, codec)
                    h.write(Ellipsis, data)
                    system.finish(loc)
                rec.rate(wname, "MB/s", mb, write)
            h = system.open(loc, "a")
            got = rec.rate(rname, "MB/s", mb, lambda: h.read(Ellipsis))
            check_equal(got, data, rname)
            del got, h
