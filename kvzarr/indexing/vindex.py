"""Coordinate and mask selections, ``a.vindex[...]`` (zarr-python 3's ``CoordinateIndexer``
and ``MaskIndexer``).

Coordinate: one integer array per dimension (ints become 1-element arrays), broadcast
together with numpy's rules; the result has the broadcast shape. Mask: one Boolean array
of the array's shape, turned into coordinates with ``np.nonzero``; the result is 1-D in C
order. Both fill a flat buffer of ``(n,)`` elements: ``out_selection`` is a 1-tuple of a
slice or of an int array of buffer positions.

Points are grouped by chunk with a stable sort, so duplicates keep their order and a set
with repeated coordinates leaves the last value (numpy's and zarr-python's behaviour).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InvalidSelectionError, VindexInvalidSelectionError
from .dims import _int_array, _valid_bounds
from .normalize import (ensure_tuple, is_bool_array, is_integer, is_integer_array,
                        replace_lists)
from .projection import ChunkProjection, Indexer


class CoordinateIndexer(Indexer):
    def __init__(self, selection: Any, grid: Any) -> None:
        sel = ensure_tuple(selection)
        sel = replace_lists(tuple(np.asarray([s]) if is_integer(s) else s for s in sel))
        if len(sel) != grid.ndim or not all(is_integer_array(s) for s in sel):
            raise VindexInvalidSelectionError(
                "invalid coordinate selection; expected one integer (coordinate) array per "
                f"dimension of the target array ({grid.ndim}), got {selection!r}")
        points = [_int_array(np.asarray(s), d.extent) for s, d in zip(sel, grid.dimensions)]
        try:
            shape = np.broadcast_shapes(*(p.shape for p in points))
        except ValueError as e:
            raise InvalidSelectionError(
                "shape mismatch: coordinate arrays could not be broadcast together with "
                f"shapes {[p.shape for p in points]}") from e
        flat = [np.broadcast_to(p, shape).reshape(-1) for p in points]
        self._build(flat, tuple(shape), grid)

    def _build(self, flat: list[np.ndarray], shape: tuple[int, ...], grid: Any) -> None:
        self.shape = shape
        n = math.prod(shape)
        self.buffer_shape = (n,)
        self.drop_axes = ()
        self._zero_d = grid.ndim == 0 and n > 0
        self._coords: list[tuple[int, ...]] = []
        self._starts = self._stops = self._complete = []
        self._local: list[np.ndarray] = []
        self._order = None
        if n == 0 or grid.ndim == 0:
            return
        dims = grid.dimensions
        grid_shape = grid.grid_shape
        cix = [np.asarray(d.indices_to_chunks(x), dtype=np.int64) for d, x in zip(dims, flat)]
        ids = np.ravel_multi_index(cix, grid_shape)
        order = None
        if n > 1 and (ids[1:] < ids[:-1]).any():
            order = np.argsort(ids, kind="stable")
            ids = ids[order]
            flat = [x[order] for x in flat]
            cix = [c[order] for c in cix]
        starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        stops = np.append(starts[1:], n)
        counts = stops - starts
        local, strides = [], []
        total = np.ones(len(starts), dtype=np.int64)
        for d, x, c in reversed(list(zip(dims, flat, cix))):
            a, b = _valid_bounds(d, c[starts])
            local.append((x - np.repeat(a, counts)).astype(np.intp))
            strides.append(total.copy())
            total *= b - a
        local.reverse()
        strides.reverse()
        # Complete: the chunk's points enumerate its valid region once, in C order.
        complete = counts == total
        if complete.any():
            lin = sum(loc * np.repeat(s, counts) for loc, s in zip(local, strides))
            breaks = np.concatenate(([0], np.cumsum(np.diff(lin) != 1)))
            complete &= (lin[starts] == 0) & (breaks[stops - 1] == breaks[starts])
        self._coords = list(zip(*(c[starts].tolist() for c in cix)))
        self._starts, self._stops = starts.tolist(), stops.tolist()
        self._local = local
        self._order = None if order is None else order.astype(np.intp)
        self._complete = complete.tolist()

    def nchunks(self) -> int:
        return 1 if self._zero_d else len(self._coords)

    def point_groups(self) -> tuple[list[tuple[int, ...]], np.ndarray, tuple[np.ndarray, ...],
                                    np.ndarray | None] | None:
        """The points grouped by chunk, for a reader that picks them out of many chunks
        in one numpy operation: the touched chunks' coordinates (in iteration order), the
        number of points in each, each point's index inside its chunk (one array per
        dimension, the points of the first chunk first), and each point's position in
        the output buffer (None: in that order). None for a 0-d array."""
        if self._zero_d:
            return None
        counts = (np.asarray(self._stops, dtype=np.intp)
                  - np.asarray(self._starts, dtype=np.intp))
        return self._coords, counts, tuple(self._local), self._order

    def __iter__(self) -> Iterator[ChunkProjection]:
        if self._zero_d:
            yield ChunkProjection((), (), (0,), True)
            return
        local, order = self._local, self._order
        for coords, p, q, comp in zip(self._coords, self._starts, self._stops, self._complete):
            out = slice(p, q) if order is None else order[p:q]
            yield ChunkProjection(coords, tuple(x[p:q] for x in local), (out,), comp)


def _is_mask(sel: tuple, shape: tuple[int, ...]) -> bool:
    return len(sel) == 1 and is_bool_array(sel[0]) and sel[0].shape == shape


class MaskIndexer(CoordinateIndexer):
    def __init__(self, selection: Any, grid: Any) -> None:
        sel = replace_lists(ensure_tuple(selection))
        if not _is_mask(sel, grid.shape):
            raise VindexInvalidSelectionError(
                "invalid mask selection; expected one Boolean (mask) array with the same "
                f"shape as the target array {grid.shape}, got {selection!r}")
        mask = np.asarray(sel[0])
        if grid.ndim == 0:
            # np.nonzero refuses 0-d input; a 0-d mask selects the one element or nothing.
            self._build([], (int(bool(mask)),), grid)
            return
        self._build([x.astype(np.int64) for x in np.nonzero(mask)],
                    (int(np.count_nonzero(mask)),), grid)


def vindex_indexer(selection: Any, grid: Any) -> CoordinateIndexer:
    """``a.vindex[selection]``: a coordinate or a mask selection, else
    :class:`~kvzarr.errors.VindexInvalidSelectionError` (zarr-python's ``VIndex``)."""
    sel = replace_lists(ensure_tuple(selection))
    if len(sel) == grid.ndim and all(is_integer(s) or is_integer_array(s) for s in sel):
        return CoordinateIndexer(sel, grid)
    if _is_mask(sel, grid.shape):
        return MaskIndexer(sel, grid)
    raise VindexInvalidSelectionError(
        "unsupported selection type for vectorized indexing; only coordinate selection "
        "(tuple of integer arrays) and mask selection (single Boolean array) are supported; "
        f"got {selection!r}")
