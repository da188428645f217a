"""The thread pool that encodes and decodes the inner chunks of shards.

One pool for the whole process: the compressors (zlib, blosc, zstd) and numpy copies
release the GIL, so inner chunks of one shard decode in parallel. Promises:

* results come back in the order of the items; the first exception is re-raised;
* a task running in this pool never waits on the pool again (nested sharding runs its
  inner shard serially), so the pool cannot deadlock on itself;
* small batches run inline, where thread hand-off would cost more than it saves.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

#: fewer items than this run inline
MIN_ITEMS = 4
#: fewer raw (decoded) bytes than this run inline
MIN_BYTES = 256 * 1024

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_local = threading.local()


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                           thread_name_prefix="kvzarr-shard")
    return _pool


def _in_worker(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    def run(item: Any) -> T:
        _local.busy = True
        try:
            return fn(item)
        finally:
            _local.busy = False
    return run


def worth_threads(count: int, raw_bytes: int) -> bool:
    return count >= MIN_ITEMS and raw_bytes >= MIN_BYTES


def map_items(fn: Callable[[Any], T], items: Iterable[Any], parallel: bool) -> list[T]:
    """``[fn(x) for x in items]``, in the shared pool when ``parallel``."""
    items = list(items)
    if not parallel or len(items) < 2 or getattr(_local, "busy", False):
        return [fn(x) for x in items]
    return list(_get_pool().map(_in_worker(fn), items))
