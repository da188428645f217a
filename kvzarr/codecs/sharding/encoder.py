"""Whole shards encoded on the worker pool (sharding-indexed v1.0, "Binary shard format",
https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html).

The inner chunks of every shard of a batch become ONE list of small tasks, about
:data:`TASK_BYTES` of raw inner chunks each (less in a small batch, so that every worker
gets a few), for the one worker pool
(:mod:`kvzarr.runtime.workers`). The compressors release the GIL, so every core stays
busy whatever the number of shards: when each shard was one task, 3 shards on 2 cores
kept one core idle a third of the time, and the last long task of a batch kept the other
cores waiting for it; a task of a few inner chunks costs a few milliseconds at most.

Each shard is assembled once, into one buffer, by the thread that encodes its last inner
chunk, and handed to ``done`` right there: a store can write it while the other shards
are still being encoded.

Promises:

* every shard's bytes are exactly those of encoding it alone (the same inner encodings,
  laid out in the same Morton order by the same assembly), so they match zarr-python's;
* results come back in the order of the shards; ``done(i, data)`` is called once per
  shard, from whichever thread finished it (the caller's or a worker): calls for
  different shards may run at the same time;
* when an inner chunk fails to encode, no task runs any more when the exception reaches
  the caller; shards already handed to ``done`` stay handed, no other shard is.
* a call made on a pool worker (a nested shard) runs inline: workers never wait for the
  pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...runtime.workers import WORKERS, map_items, worth_threads
from ..base import ChunkArraySpec

#: raw bytes of inner chunks one task encodes: big enough that handing a task to a
#: thread (tens of microseconds) is lost in its work, small enough that no core waits
#: long for the last task of a batch
TASK_BYTES = 256 * 1024


class _Shard:
    """One shard being encoded: its inner chunk views, their encodings as they come, and
    how many of its tasks are still to finish."""

    __slots__ = ("number", "layout", "blocks", "inner_spec", "encoded", "left", "data")

    def __init__(self, number: int, codec: Any, chunk: np.ndarray,
                 spec: ChunkArraySpec) -> None:
        self.number = number
        self.layout = codec._layout(spec.shape)
        self.blocks = self.layout.blocks(chunk)
        self.inner_spec = codec._inner_spec(spec)
        #: each inner chunk's encoding (None: not stored), by flat id
        self.encoded: list[bytes | None] = [None] * self.layout.nchunks
        self.left = 0
        self.data: bytes | None = None


def encode_shards(codec: Any, chunks: Sequence[np.ndarray],
                  specs: Sequence[ChunkArraySpec],
                  done: Callable[[int, bytes | None], Any] | None = None,
                  parallel: bool | None = None) -> list[bytes | None]:
    """The encoded bytes of each shard ``chunks[i]`` (of ``specs[i].shape``) by ``codec``
    (the ShardingCodec: its layouts, inner encoding and assembly; not imported here, it
    imports this module), None for a shard with no inner chunk to store. ``parallel``: None decides by size (the pool's
    :func:`~kvzarr.runtime.workers.worth_threads`), True or False forces it."""
    shards = [_Shard(n, codec, np.asarray(c), s) for n, (c, s) in enumerate(zip(chunks, specs))]
    tasks: list[tuple[_Shard, list[int]]] = []
    total_bytes = sum(s.layout.nchunks * codec._inner_nbytes(spec)
                      for s, spec in zip(shards, specs))
    # at least a few tasks per worker where there are inner chunks enough, so that a
    # single small shard still spreads over every core
    few = -(-sum(s.layout.nchunks for s in shards) // (4 * WORKERS))
    for shard, spec in zip(shards, specs):
        order = shard.layout.write_order.tolist()
        per_task = max(1, min(TASK_BYTES // codec._inner_nbytes(spec), few))
        for start in range(0, len(order), per_task):
            tasks.append((shard, order[start:start + per_task]))
            shard.left += 1
    lock = threading.Lock()

    def finish(shard: _Shard) -> None:
        order = shard.layout.write_order.tolist()
        shard.data = codec._assemble(shard.layout, ((i, shard.encoded[i]) for i in order))
        shard.encoded = []      # the inner encodings are in the shard now: let them go
        if done is not None:
            done(shard.number, shard.data)

    for shard in shards:
        if shard.left == 0:     # a shard without inner chunks (a zero-sized edge)
            finish(shard)

    def run(task: tuple[_Shard, list[int]]) -> None:
        shard, ids = task
        encode, blocks, spec = codec._encode_inner, shard.blocks, shard.inner_spec
        out = shard.encoded
        for i in ids:       # (tasks own disjoint ids: no lock needed for these)
            out[i] = encode(blocks[i], spec)
        with lock:
            shard.left -= 1
            last = shard.left == 0
        if last:
            finish(shard)

    if parallel is None:
        parallel = worth_threads(sum(len(ids) for _, ids in tasks), total_bytes)
    map_items(run, tasks, parallel)
    return [shard.data for shard in shards]
