"""kvzarr's codec worker threads: one pool for the whole process.

Chunks are encoded and decoded on it (the compressors release the GIL), and one large
chunk's Blosc blocks are compressed on it. Work already running on a worker does not fan
out onto the pool again: a worker waiting for the pool could wait for itself, and the
cores are busy anyway.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_local = threading.local()


def _mark_worker() -> None:
    _local.worker = True


#: the number of threads of :data:`POOL`
WORKERS = max(2, os.cpu_count() or 2)

POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="kvzarr-codec",
                          initializer=_mark_worker)


def in_worker() -> bool:
    """Whether the calling thread is one of :data:`POOL`'s."""
    return getattr(_local, "worker", False)


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
