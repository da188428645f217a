"""Pausing Python's cyclic garbage collector while an array read or write runs.

A read or write of many chunks creates a few small tracked objects per chunk (keys,
(key, value) tuples, projections). They live until the operation ends, so every
collection the allocations trigger finds nothing to free and only walks them again:
on 20,000 chunks of 4 KiB that was about a fifth of the write. kvzarr's own code makes
no reference cycles, and the collector runs again as soon as the operation ends.

The collector is process-wide: the pause is counted, so overlapping operations in
several threads re-enable it only when the last one ends, and only if it was enabled
when the first one began (a program that turned it off keeps it off).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic garbage collector off."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()


def _after_fork_in_child() -> None:
    # Threads that paused the collector do not exist in the child: nothing will end
    # their pauses, so the child starts unpaused.
    global _lock, _depth
    _lock = threading.Lock()
    if _depth and _was_enabled:
        gc.enable()
    _depth = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
