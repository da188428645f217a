"""glibc's malloc, set once for chunk-sized buffers instead of learning it chunk by chunk.

Every chunk kvzarr encodes or decodes goes through buffers of about the chunk's size:
a compressor's output buffer (the chunk's size plus a header), shrunk to what it wrote,
then the bytes handed to the store. glibc's malloc serves a request of 128 KiB or more
with a fresh ``mmap`` until a freed one teaches it otherwise (its "dynamic threshold"),
and gives the top of the heap back to the kernel as soon as more than twice that is
free there. Freeing a chunk's buffers does exactly that, so the next chunk's buffers
are new pages again: every page a first-time fault and a zeroing by the kernel. Whether
that happens, and for how long, depends on what else happens to lie at the top of the
heap, so it differed from process to process and from run to run. Measured here
(2 cores, glibc 2.36): a fresh process writing 32 chunks of 1 MiB (blosc-zstd, LMDB)
took 24,000 page faults and 0.08-0.13 s of system time where, once warm, it took
4,400 and 0.02-0.04 s; writers started for a job (a multiprocessing pool, a dask
worker) ran their first writes 30% slower than the same writes a second time.

:func:`tune` sets the two thresholds to the top of the range the dynamic threshold may
reach by itself (glibc's ``DEFAULT_MMAP_THRESHOLD_MAX``, 32 MiB on 64-bit; trimming at
twice that), once, when kvzarr is imported: buffers up to 32 MiB come from the heap and
are reused, and the heap keeps up to 64 MiB free at its top instead of returning it.
The cost is memory the process already needed at its peak staying mapped after it (up
to 64 MiB per malloc arena, a few per process). Larger buffers (a whole array read at
once) are mapped and unmapped as before.

It is process-wide, so it is skipped where the program or its user chose otherwise:
``KVZARR_MALLOC=system`` in the environment (kvzarr leaves malloc alone), any of
glibc's ``MALLOC_*`` variables in the environment or a ``glibc.malloc`` tunable in
``GLIBC_TUNABLES`` (glibc reads those at start-up; setting the thresholds here would
override them), and anywhere the C library is not glibc (``mallopt`` is glibc's).
See https://man7.org/linux/man-pages/man3/mallopt.3.html (M_MMAP_THRESHOLD,
M_TRIM_THRESHOLD).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: mallopt parameter numbers (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's ceiling for the dynamic mmap threshold on 64-bit (4 MiB * sizeof(long)); the
#: largest value mallopt accepts for it there
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
#: the environment variable that keeps kvzarr's hands off malloc ("system")
OPT_OUT = "KVZARR_MALLOC"
#: the environment variables glibc's malloc reads at start-up (mallopt(3), ENVIRONMENT)
_GLIBC_MALLOC_VARIABLES = ("MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_MMAP_MAX_",
                           "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                           "MALLOC_TRIM_THRESHOLD_")

#: what :func:`tune` did: None before it ran, else a short reason or "tuned"
state: str | None = None


def reason_to_skip(environ: Mapping[str, str], libc: str | None) -> str | None:
    """Why malloc is to be left alone in this process (None: tune it). ``libc`` is
    ``os.confstr("CS_GNU_LIBC_VERSION")`` ("glibc 2.36"), None where there is none."""
    if environ.get(OPT_OUT, "").strip().lower() == "system":
        return f"{OPT_OUT}=system"
    if not libc or not libc.startswith("glibc"):
        return "not glibc"
    chosen = [name for name in _GLIBC_MALLOC_VARIABLES if name in environ]
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        chosen.append("GLIBC_TUNABLES")
    if chosen:
        return f"malloc set by the environment ({', '.join(chosen)})"
    return None


def _libc_version() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return None


def tune() -> str:
    """Set glibc's thresholds once per process (see the module's notes); returns what
    was done ("tuned", or why not). Later calls return the first call's answer."""
    global state
    if state is not None:
        return state
    skip = reason_to_skip(os.environ, _libc_version())
    if skip is not None:
        state = skip
        return state
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        # (setting either one ends glibc's dynamic threshold: both are set)
        ok = (mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
              and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1)
    except (OSError, AttributeError):
        ok = False
    state = "tuned" if ok else "mallopt refused"
    return state
