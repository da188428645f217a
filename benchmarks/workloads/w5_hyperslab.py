"""W5 hyperslab: strided reads of the W1 array, ``a[::7]`` (every 7th row) and
``a[::3, 5:4000:11]`` (2-D strides), MB/s of output, uncompressed and blosc-zstd.
The array is written once, untimed; each read is checked against numpy's answer.
"""

from __future__ import annotations

from typing import Any

from ..harness import Recorder, check_equal
from .data import CODECS, bulk_shape, smooth_float32
from .w1_bulk import CHUNKS

TITLE = "W5 hyperslab: strided reads of the W1 array"
DEFAULTS = {"mib": 256, "codecs": ["uncompressed", "blosc-zstd"]}
SELECTIONS = {
    "a[::7]": (slice(None, None, 7),),
    "a[::3, 5:4000:11]": (slice(None, None, 3), slice(5, 4000, 11)),
}


def scaled(params: dict[str, Any], factor: float) -> dict[str, Any]:
    return {**params, "mib": max(1, params["mib"] * factor)}


def run(system: Any, p: dict[str, Any], rec: Recorder, repeat: int) -> None:
    data = smooth_float32(*bulk_shape(p["mib"]))
    for cname in p["codecs"]:
        loc = system.location(f"w5-{cname}")
        try:
            system.load(loc, "a", data, CHUNKS, CODECS[cname])
            h = system.open(loc, "a")
            for _ in range(repeat):
                for label, sel in SELECTIONS.items():
                    want = data[sel]
                    name = f"{label}, {cname}"
                    got = rec.rate(name, "MB/s", want.nbytes / 1e6, lambda: h.read(sel))
                    check_equal(got, want, name)
            del h
        finally:
            system.drop(loc)
