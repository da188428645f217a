"""Compaction on demand over a hierarchy: ``kvzarr.compact(target, path)`` lays out
again, without garbage, every shard under ``path`` that appended partial writes left
garbage in (see :class:`kvzarr.transformers.AppendShards`). ``kvzarr compact`` is its
command line.

Each shard is read, laid out again from the same encoded inner chunks and written back
inside one write transaction of its own; a shard that cannot be read is reported and left
as it is. Readers read the same values before and after, bit for bit what a plain
rewrite would have stored.

    >>> import kvzarr, numpy as np
    >>> store = kvzarr.open_store("memory://", transformers=["append_shards"])
    >>> a = kvzarr.create_array(store, name="img", shape=(64, 64), chunks=(16, 16),
    ...                         shards=(64, 64), dtype="uint16", fill_value=0)
    >>> a[:] = 7
    >>> a[0:16, 0:16] = 9                        # appended: the old chunk is garbage now
    >>> report = kvzarr.compact(store)
    >>> report.compacted, report.reclaimed > 0
    (1, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .api import open as open_node
from .api import open_store
from .array import Array
from .errors import ReadOnlyError
from .engine.compaction import CompactionReport
from .stores.base import Store
from .stores.zip import ZipStore
from .transformers.base import stack_layers


def compact(target: Any, path: str | None = None, *, dry_run: bool = False,
            progress: Callable[[int, int], None] | None = None,
            transformers: Any = None) -> CompactionReport:
    """Compact every sharded array at or below ``path`` (the root by default) of the store
    ``target`` (a Store, a path or a URL, as :func:`kvzarr.open_store` takes it, with
    ``transformers`` stacked on it). ``progress(done, total)`` is called before the first
    shard and after each (``total`` counts the stored shards of every array found).
    On a zip archive the archive is then rewritten without dead bytes too
    (``report.store_reclaimed``). ``dry_run`` measures what compacting the shards would
    reclaim and writes nothing. A target this call opens (a path or URL) is closed
    again; a Store is left open."""
    if not isinstance(target, Store) and not dry_run:
        # the node must exist before the store is opened for writing (which would create
        # a missing directory or database)
        with open_store(target, mode="r") as probe:
            open_node(probe, mode="r", path=path)
    store = open_store(target, mode="r" if dry_run else "r+", transformers=transformers)
    try:
        if not dry_run and store.read_only:
            raise ReadOnlyError(f"{store!r} is read-only: nothing can be compacted",
                                hint="open it writable, or pass dry_run=True")
        node = open_node(store, mode="r" if dry_run else "r+", path=path)
        arrays = [node] if isinstance(node, Array) else \
            [a for _, a in node.members(max_depth=None) if isinstance(a, Array)]
        arrays = [a for a in arrays if a.compactable]
        total = sum(a.nchunks_initialized for a in arrays)
        done = 0
        if progress is not None:
            progress(0, total)

        def step(_: str) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, max(total, done))   # shards written meanwhile count too

        report = CompactionReport()
        for array in arrays:
            report.add(array.compact(dry_run=dry_run, progress=step))
        if not dry_run:
            report.store_reclaimed = _compact_store(store)
        return report
    finally:
        if not isinstance(target, Store):
            store.close()


def _compact_store(store: Store) -> int:
    """Where the store at the bottom of the stack keeps dead bytes of its own, free them
    and return how many: a zip archive holds the shards just laid out again beside the
    members they replaced (and earlier commits' directories) until it is rewritten."""
    bottom = stack_layers(store)[-1]
    if isinstance(bottom, ZipStore):
        return bottom.compact()
    return 0


__all__ = ["CompactionReport", "compact"]
