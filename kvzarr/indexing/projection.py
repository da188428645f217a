"""Chunk projections and the Cartesian product of per-dimension projections: the chunks a
selection touches are the product of the chunks each dimension touches.

A :class:`ChunkProjection` says, for one chunk, which elements of the decoded chunk (an
array of the chunk's *codec* shape) meet which elements of the output buffer. The array
layer uses every indexer the same way::

    buf = np.empty(ix.buffer_shape, dtype)
    for p in ix:
        buf[p.out_selection] = chunk[p.chunk_selection]      # get
        chunk[p.chunk_selection] = value[p.out_selection]    # set (value from prepare_value)
    result = buf.reshape(ix.shape)

Promises: plain numpy indexing does the right thing with both selections (integer arrays
on several dimensions come pre-shaped as by ``np.ix_``); the cross product is a lean
generator over per-dimension tuples computed once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from .dims import ARRAY, INT, SLICE, DimProjection


@dataclass(frozen=True, slots=True)
class ChunkProjection:
    chunk_coords: tuple[int, ...]
    #: numpy index into the decoded chunk (an array of the chunk's codec shape)
    chunk_selection: tuple
    #: numpy index into the output buffer (shape ``indexer.buffer_shape``)
    out_selection: tuple
    #: the selection covers the chunk's whole valid region, each element once, in order,
    #: so a write need not read the old chunk
    is_complete_chunk: bool


class Indexer:
    """Base of every indexer: iterate it for the chunk projections."""

    shape: tuple[int, ...]          # shape of a get's result and of a set's value
    buffer_shape: tuple[int, ...]   # == shape, except coordinate/mask: (n,)
    drop_axes: tuple[int, ...]      # axes selected by an int; informational, the selections
                                    # already drop them (never squeeze the result)

    def __iter__(self) -> Iterator[ChunkProjection]:  # pragma: no cover - abstract
        raise NotImplementedError

    def nchunks(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self.shape}, buffer_shape={self.buffer_shape}, "
                f"nchunks={self.nchunks()})")


def _as_indices(sel: Any) -> np.ndarray:
    if isinstance(sel, slice):
        return np.arange(sel.start, sel.stop, sel.step, dtype=np.intp)
    return sel


def _ix_shape(p: int, k: int) -> tuple[int, ...]:
    return (1,) * p + (-1,) + (1,) * (k - p - 1)


class ProductIndexer(Indexer):
    """An indexer whose projections are the cross product of per-dimension projections
    (basic, orthogonal and block selections)."""

    def __init__(self, dims: list[DimProjection]) -> None:
        self._dims = dims
        self.shape = tuple(d.nitems for d in dims if d.kind != INT)
        self.buffer_shape = self.shape
        self.drop_axes = tuple(i for i, d in enumerate(dims) if d.kind == INT)
        self._nchunks = math.prod(len(d) for d in dims)

        arrays = [i for i, d in enumerate(dims) if d.kind == ARRAY]
        advanced = [i for i, d in enumerate(dims) if d.kind != SLICE]
        # numpy keeps one advanced index in place only when the advanced items (ints count
        # once an array is present) are adjacent; otherwise go fully np.ix_-shaped.
        chunk_ix = len(arrays) > 1 or (
            len(arrays) == 1 and advanced[-1] - advanced[0] + 1 != len(advanced))
        out_ix = sum(1 for d in dims if d.kind == ARRAY and not d.sorted_out) > 1

        k = len(self.shape)
        coords, csels, comps, outs = [], [], [], []
        p = 0
        for d in dims:
            coords.append(d.coords)
            comps.append(d.complete)
            if d.kind == INT:
                csels.append(d.chunk_sel)
                continue
            if chunk_ix:
                shp = _ix_shape(p, k)
                csels.append([_as_indices(s).reshape(shp) for s in d.chunk_sel])
            else:
                csels.append(d.chunk_sel)
            if out_ix:
                shp = _ix_shape(p, k)
                outs.append([_as_indices(s).reshape(shp) for s in d.out_sel])
            else:
                outs.append(d.out_sel)
            p += 1
        self._coords, self._csels, self._comps, self._outs = coords, csels, comps, outs

    def nchunks(self) -> int:
        return self._nchunks

    def __iter__(self) -> Iterator[ChunkProjection]:
        if not self._dims:                      # 0-d array: one chunk, one element
            return iter([ChunkProjection((), (), (), True)])
        return _chunks(self._coords, self._csels, self._comps, self._outs)

    def projections_outside(self, box: list[range]) -> Iterator[ChunkProjection]:
        """The projections of the chunks outside ``box`` (one range of positions into
        each dimension's projections), for a caller that handles the chunks inside the
        box in bulk. The complement is cut into products (inside the box on the dims
        before ``d``, outside it on ``d``, anything after), so every chunk comes once
        and chunks inside the box cost nothing. Dims selected by an int are not
        supported (their output selections are not per chunk)."""
        if len(box) != len(self._dims) or self.drop_axes:
            raise ValueError("a box needs one range per dimension and no int dimension")
        every = [range(len(d)) for d in self._dims]
        for d, inside in enumerate(box):
            outside = [i for i in every[d] if i not in inside]
            if outside:
                yield from self._product(list(box[:d]) + [outside] + every[d + 1:])

    def _product(self, positions: list[Any]) -> Iterator[ChunkProjection]:
        def pick(lists: list[list[Any]]) -> list[list[Any]]:
            return [[entries[i] for i in chosen] for entries, chosen in zip(lists, positions)]
        return _chunks(pick(self._coords), pick(self._csels), pick(self._comps),
                       pick(self._outs))

    @property
    def dim_projections(self) -> list[DimProjection]:
        return self._dims


def _chunks(coords: list[Any], csels: list[Any], comps: list[Any], outs: list[Any]
            ) -> Iterator[ChunkProjection]:
    """The projection of every chunk in the product of per-dimension entries. Dims
    selected by an int contribute one entry, so the product over the kept dims' output
    selections runs in lockstep with the product over all dims."""
    for c, csel, comp, osel in zip(product(*coords), product(*csels), product(*comps),
                                   product(*outs)):
        yield ChunkProjection(c, csel, osel, all(comp))
