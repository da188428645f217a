"""kvzarr sets glibc's malloc thresholds once, at import, for chunk-sized buffers
(kvzarr/runtime/allocator.py): checked by what malloc does in fresh processes, and the
choice to leave malloc alone by the environment it reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvzarr.runtime import allocator

GLIBC = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc") \
    if hasattr(os, "confstr") else False

# In a fresh process: import kvzarr, then allocate 20 MiB (under the 32 MiB threshold,
# far over glibc's starting 128 KiB) and free it, reading the size of the main heap
# ([heap] in /proc/self/maps) before, with and after.
_PROBE = r"""
import json, kvzarr

def heap():
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("[heap]"):
                lo, hi = line.split()[0].split("-")
                return int(hi, 16) - int(lo, 16)
    return 0

before = heap()
buf = bytearray(20 << 20)
during = heap()
del buf
after = heap()
print(json.dumps({"state": kvzarr._allocator.state, "before": before,
                  "during": during, "after": after}))
"""


def _probe(**env: str) -> dict:
    environ = {k: v for k, v in os.environ.items()
               if k != allocator.OPT_OUT and not k.startswith("MALLOC_")
               and k != "GLIBC_TUNABLES"}
    environ.update(env)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=environ, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(not GLIBC or not os.path.exists("/proc/self/maps"),
                    reason="glibc's malloc on Linux only")
def test_import_serves_chunk_sized_buffers_from_the_heap_and_keeps_them():
    got = _probe()
    assert got["state"] == "tuned"
    mib = 1 << 20
    # served from the heap (glibc's default would map it on its own)...
    assert got["during"] - got["before"] >= 16 * mib
    # ...and the heap is not trimmed when it is freed, so the next one reuses it
    assert got["after"] >= got["during"] - mib


@pytest.mark.skipif(not GLIBC or not os.path.exists("/proc/self/maps"),
                    reason="glibc's malloc on Linux only")
@pytest.mark.parametrize("env", [{"KVZARR_MALLOC": "system"},
                                 {"MALLOC_ARENA_MAX": "2"},
                                 {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"}])
def test_a_choice_in_the_environment_leaves_malloc_alone(env):
    got = _probe(**env)
    assert got["state"] != "tuned"
    # glibc's own behaviour: a 20 MiB buffer in a fresh process is mapped on its own
    assert got["during"] - got["before"] < 4 << 20


@pytest.mark.parametrize("environ, libc, skip", [
    ({}, "glibc 2.36", None),
    ({"KVZARR_MALLOC": "system"}, "glibc 2.36", "KVZARR_MALLOC=system"),
    ({"KVZARR_MALLOC": " System "}, "glibc 2.36", "KVZARR_MALLOC=system"),
    ({"KVZARR_MALLOC": "tuned"}, "glibc 2.36", None),
    ({}, None, "not glibc"),
    ({}, "musl", "not glibc"),
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, "glibc 2.36",
     "malloc set by the environment (MALLOC_TRIM_THRESHOLD_)"),
    ({"MALLOC_MMAP_THRESHOLD_": "1", "GLIBC_TUNABLES": "glibc.malloc.arena_max=1"},
     "glibc 2.36", "malloc set by the environment (MALLOC_MMAP_THRESHOLD_, GLIBC_TUNABLES)"),
    # tunables of other parts of glibc are no choice about malloc
    ({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"}, "glibc 2.36", None),
])
def test_reason_to_skip(environ, libc, skip):
    assert allocator.reason_to_skip(environ, libc) == skip


def test_tune_runs_once():
    first = allocator.tune()
    assert allocator.tune() == first == allocator.state
