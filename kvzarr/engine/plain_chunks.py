"""Whole chunks of a plain-bytes array (the bytes codec alone, regular grid), encoded in
bulk for one write, and decoded in bulk for one read.

Writing many small chunks one at a time costs a round of Python per chunk: a projection,
a slice of the value, a C-order copy, a key. For the box of chunks that a basic selection
covers completely (every chunk but the partial ones at its edges) one strided copy does
it all: split each axis of the value into (chunks, chunk length), move the chunk axes to
the front, and the chunks' bytes lie one after another in one block. Each chunk is then a
read-only view of that block, the keys are built a dimension at a time, and the chunks
equal to the fill chunk are found with numpy.

A read of many small chunks does the reverse: their bytes laid end to end are one block,
copied into the output with one strided copy (:func:`decode_box`).

Promises: a chunk's bytes are exactly those the bytes codec makes of it (the stored
dtype's byte order, C order); the box holds only chunks whose whole region is written,
never a padded edge chunk; blocks are cut along the first axis to at most ``max_bytes``
(at least one row of chunks).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..grid import MAX_NDIM
from ..indexing.dims import SLICE
from ..indexing.projection import Indexer, ProductIndexer
from ..metadata.chunk_keys import ChunkKeyEncoding


def find_box(indexer: Indexer, chunk_shape: tuple[int, ...]) -> list[range] | None:
    """Per dimension, the run of positions (into that dimension's projections) of chunks
    the selection covers whole; None when there is no such chunk or the selection is not
    made of slices."""
    if (not isinstance(indexer, ProductIndexer) or indexer.drop_axes or not chunk_shape
            or 2 * len(chunk_shape) > MAX_NDIM):   # the bulk copy views 2 * ndim axes
        return None
    box = []
    for dim, length in zip(indexer.dim_projections, chunk_shape):
        if dim.kind != SLICE:
            return None
        whole = [complete and out.stop - out.start == length
                 for complete, out in zip(dim.complete, dim.out_sel)]
        # a slice covers whole chunks in one run: only its two ends can be partial
        if True not in whole:
            return None
        lo = whole.index(True)
        hi = lo
        while hi < len(whole) and whole[hi]:
            hi += 1
        box.append(range(lo, hi))
    return box


def slabs(box: list[range], chunk_nbytes: int, max_bytes: int) -> Iterator[list[range]]:
    """``box`` cut along its first dimension into pieces of at most ``max_bytes``."""
    row = chunk_nbytes * math.prod(len(r) for r in box[1:])
    step = max(1, max_bytes // max(row, 1))
    first = box[0]
    for i in range(0, len(first), step):
        yield [first[i:i + step]] + box[1:]


def encode_box(values: np.ndarray, indexer: ProductIndexer, box: list[range],
               chunk_shape: tuple[int, ...], stored: np.dtype, keys: ChunkKeyEncoding,
               prefix: str, fill: bytes | None) -> list[tuple[str, Any]]:
    """``(key, bytes-like)`` for every chunk in ``box``, or ``(key, None)`` for a chunk
    equal to ``fill`` (the fill chunk's bytes; None keeps every chunk). The values are
    read-only views of one block, which they keep alive."""
    dims = indexer.dim_projections
    region = values[tuple(slice(dim.out_sel[r[0]].start, dim.out_sel[r[-1]].stop)
                          for dim, r in zip(dims, box))]
    counts = [len(r) for r in box]
    ndim = len(counts)
    # splitting an axis is always a view, also of a broadcast scalar
    split = region.reshape([n for pair in zip(counts, chunk_shape) for n in pair])
    block = np.empty(counts + list(chunk_shape), dtype=stored)
    block[...] = split.transpose(list(range(0, 2 * ndim, 2)) + list(range(1, 2 * ndim, 2)))
    block.flags.writeable = False
    nchunks = math.prod(counts)
    rows = block.reshape(nchunks, -1).view(np.uint8)
    size = rows.shape[1]
    flat = memoryview(rows.reshape(-1))
    names = box_keys(indexer, box, keys, prefix)
    empty = _fill_rows(rows, fill) if fill is not None else ()
    if not empty:
        return [(name, flat[i * size:(i + 1) * size]) for i, name in enumerate(names)]
    return [(name, None if i in empty else flat[i * size:(i + 1) * size])
            for i, name in enumerate(names)]


def box_keys(indexer: ProductIndexer, box: list[range], keys: ChunkKeyEncoding,
             prefix: str) -> list[str]:
    """The keys of the chunks in ``box``, in C order of the box."""
    dims = indexer.dim_projections
    return [prefix + k for k in
            keys.encode_grid([[dim.coords[i] for i in r] for dim, r in zip(dims, box)])]


def decode_box(out: np.ndarray, indexer: ProductIndexer, box: list[range],
               chunk_shape: tuple[int, ...], stored: np.dtype, data: bytes) -> None:
    """Write into ``out`` (the read's buffer) the chunks of ``box`` whose bytes ``data``
    holds one after another, in the order of :func:`box_keys`: the reverse of
    :func:`encode_box`, one strided copy for the whole box."""
    dims = indexer.dim_projections
    counts = [len(r) for r in box]
    ndim = len(counts)
    block = np.frombuffer(data, dtype=stored).reshape(counts + list(chunk_shape))
    region = out[tuple(slice(dim.out_sel[r[0]].start, dim.out_sel[r[-1]].stop)
                       for dim, r in zip(dims, box))]
    split = region.reshape([n for pair in zip(counts, chunk_shape) for n in pair])
    split[...] = block.transpose([axis for i in range(ndim) for axis in (i, ndim + i)])


def _fill_rows(rows: np.ndarray, fill: bytes) -> set[int]:
    """Positions of the rows equal to ``fill``: a cheap look at the first bytes of
    every row, then a full comparison of the few that pass."""
    want = np.frombuffer(fill, dtype=np.uint8)
    head = min(8, rows.shape[1])
    maybe = np.flatnonzero((rows[:, :head] == want[:head]).all(axis=1))
    if not maybe.size:
        return set()
    return set(maybe[(rows[maybe] == want).all(axis=1)].tolist())
