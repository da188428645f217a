"""Vertices sorted into the cells of a level: the one sort each writer does.

A writer sorts its rows once — by (chunk, bin) for a plain point cloud, by (chunk,
object) otherwise, stably so that input order breaks ties — and cuts the sorted rows
into one run per chunk. :class:`Cells` is that result; the fragment index of each chunk
comes with it. Chunks are numbered by counting, not sorting, where their bounding grid
is small enough, and bin keys that fit in 16 bits are radix-sorted: a million points
sort in a few milliseconds.
"""

from __future__ import annotations

import numpy as np

from . import fragments
from .objects import ObjectParts
from .writer import LevelLayout


class Cells:
    """Sorted rows cut into chunks: ``order`` puts the input rows in stored order,
    ``bounds[i]:bounds[i + 1]`` of it is chunk ``chunks[i]``, and ``index[i]`` is that
    chunk's fragment index."""

    def __init__(self, order: np.ndarray, chunks: np.ndarray, bounds: np.ndarray,
                 index: list[bytes]) -> None:
        self.order, self.chunks, self.bounds, self.index = order, chunks, bounds, index


def runs(keys: np.ndarray) -> np.ndarray:
    """Start of each run of equal rows in sorted ``keys`` (N, K), plus N at the end."""
    if len(keys) == 0:
        return np.zeros(1, dtype=np.int64)
    change = np.any(keys[1:] != keys[:-1], axis=1)
    return np.concatenate(([0], np.flatnonzero(change) + 1, [len(keys)]))


def binned_cells(layout: LevelLayout, pos: np.ndarray) -> Cells:
    """Plain point cloud: one range fragment per bin (empty bins included), rows by bin
    and then input order."""
    grid = layout.grid
    chunks, bins = grid.bins_of(pos)
    cell, held = cell_numbers(chunks)
    n_bins = grid.bins_in_chunk
    key = cell * n_bins + bins
    order = stable_argsort(key, len(held) * n_bins)
    counts = np.bincount(key, minlength=len(held) * n_bins).reshape(len(held), n_bins)
    per_chunk = counts.sum(axis=1)
    bounds = np.concatenate(([0], np.cumsum(per_chunk)))
    index = [fragments.encode_ranges(np.cumsum(c) - c, c) for c in counts]
    return Cells(order, held, bounds, index)


def cell_numbers(chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct chunks of ``chunks`` (N, D) in ascending order: returns each
    row's number and the distinct chunks (K, D)."""
    if len(chunks) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, chunks.shape[1]), dtype=np.int64)
    lo = chunks.min(axis=0)
    extent = chunks.max(axis=0) - lo + 1
    cells = float(np.prod(extent.astype(np.float64)))
    if cells <= max(4 * len(chunks), 1 << 20):
        # chunks as one integer in C order of their bounding grid (ascending = tuple
        # order), numbered by a count instead of a sort
        shape = tuple(int(e) for e in extent)
        flat = np.ravel_multi_index(tuple((chunks - lo).T), shape)
        present = np.bincount(flat, minlength=int(cells)) > 0
        number = (np.cumsum(present) - 1)[flat]
        held = np.column_stack(np.unravel_index(np.flatnonzero(present), shape)) + lo
        return number.astype(np.int64), held.astype(np.int64)
    held, number = np.unique(chunks, axis=0, return_inverse=True)
    return number.reshape(-1).astype(np.int64), held


def stable_argsort(key: np.ndarray, limit: int) -> np.ndarray:
    """``argsort(key, stable)`` for keys in ``[0, limit)``; radix-sorted when they fit in
    16 bits, which numpy's stable sort does in linear time."""
    if limit <= 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="stable")


def object_cells(layout: LevelLayout, pos: np.ndarray, ids: np.ndarray
                  ) -> tuple[Cells, ObjectParts]:
    """Points with object ids: one range fragment per object present in a chunk, objects
    ascending, rows in input order; each object's manifest lists its chunks ascending."""
    chunks = layout.grid.chunks_of(pos)
    order = np.lexsort((ids, *chunks.T[::-1]))
    chunks, sids = chunks[order], ids[order]
    bounds = runs(chunks)
    parts = runs(np.column_stack((chunks, sids)))      # one run per (chunk, object)
    part_chunk = np.searchsorted(bounds, parts[:-1], side="right") - 1
    first_part = np.searchsorted(parts[:-1], bounds[:-1])
    index = []
    for c in range(len(bounds) - 1):
        starts = parts[first_part[c]:(first_part[c + 1] if c + 1 < len(first_part)
                                      else len(parts) - 1)]
        ends = np.append(starts[1:], bounds[c + 1])
        index.append(fragments.encode_ranges(starts - bounds[c], ends - starts))
    rank = np.arange(len(parts) - 1) - first_part[part_chunk]
    object_parts = ObjectParts(sids[parts[:-1]], chunks[parts[:-1]], rank)
    return Cells(order, chunks[bounds[:-1]], bounds, index), object_parts
