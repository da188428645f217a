"""A stored shard laid out again with some of its inner chunks replaced (sharding-indexed
v1.0, "Binary shard format",
https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html).

A write into part of a shard keeps most of it: one 64 x 64 tile of a 1024 x 1024 shard
replaces one inner chunk of 256. The new shard is the old one's bytes with that chunk's
bytes swapped, and every offset after it moved. Laying it out inner chunk by inner chunk
costs a Python object per chunk kept (a range to read, a slice, an index entry), which
was most of a tile write's time. Here the index is computed with numpy, and each run of
kept inner chunks that lies end to end in the old shard is copied as ONE slice, so the
work per write is proportional to the chunks it replaces, not to the shard.

Promises:

* the result is byte for byte what laying out every stored inner chunk one by one in
  write (Morton) order gives (``ShardingCodec._assemble``): dense, in write order,
  offsets counted from byte 0 of the shard, whatever order and gaps the old shard had;
* inner chunks replaced by None are left out (absent), and a shard left with no stored
  inner chunk is None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .layout import ShardIndex, ShardLayout


def splice(layout: ShardLayout, index: ShardIndex, view: memoryview,
           new: Mapping[int, Any], base: int) -> tuple[ShardIndex, list[Any]] | None:
    """The index and the pieces (to join in order) of the shard ``view`` (whose checked
    index is ``index``) with the inner chunks of ``new`` (flat id -> encoded bytes, or None
    for absent) replaced; the first inner chunk starts at byte ``base`` (the index's size
    when it comes first, else 0). None when no inner chunk is left stored."""
    entries = index.entries
    stored = index.present.copy()
    lengths = np.where(stored, entries[:, 1], np.uint64(0))
    fresh = np.zeros(layout.nchunks, dtype=bool)
    for i, data in new.items():
        fresh[i] = True
        stored[i] = data is not None
        lengths[i] = 0 if data is None else memoryview(data).nbytes
    order = layout.write_order
    seq = order[stored[order]]            # the inner chunks kept, in write order
    if not len(seq):
        return None
    seq_lengths = lengths[seq]
    out = ShardIndex.empty(layout.nchunks)
    out.entries[seq, 0] = np.cumsum(seq_lengths, dtype=np.uint64) - seq_lengths + np.uint64(base)
    out.entries[seq, 1] = seq_lengths

    # A run breaks at every replaced chunk and wherever the old bytes are not end to end.
    # (A replaced chunk's old entry may be missing: its uint64 sum wraps, unused.)
    is_fresh = fresh[seq]
    old_start = entries[seq, 0]
    with np.errstate(over="ignore"):
        old_end = old_start + entries[seq, 1]
    breaks = np.ones(len(seq), dtype=bool)
    breaks[1:] = is_fresh[1:] | is_fresh[:-1] | (old_start[1:] != old_end[:-1])
    firsts = np.flatnonzero(breaks).tolist()
    lasts = [j - 1 for j in firsts[1:]] + [len(seq) - 1]
    ids, starts, ends = seq.tolist(), old_start.tolist(), old_end.tolist()
    fresh_at = is_fresh.tolist()
    pieces = [new[ids[a]] if fresh_at[a] else view[starts[a]:ends[b]]
              for a, b in zip(firsts, lasts)]
    return out, pieces
