"""The geometry and index of one shard (sharding-indexed v1.0, "Binary shard format",
https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html).

A :class:`ShardLayout` is everything that follows from one shard shape: chunks per shard,
the inner chunk grid, the index's array spec and encoded size, and the Morton write order.
Building one costs nothing in proportion to the number of inner chunks (a metadata value:
``chunk_shape`` may make it 10**18): coordinates are computed from flat ids, and the write
order, which is that large, only when a shard is written.
The outer grid may be rectilinear, so each distinct shard shape gets its own layout.

:class:`ShardIndex` is the decoded index, a ``(n, 2)`` uint64 array of
``(offset, nbytes)`` per inner chunk in C order. Promises:

* an entry is missing only when BOTH values are ``2**64 - 1`` (``nbytes == 0`` is a
  stored, empty chunk);
* offsets count from byte 0 of the shard, whatever ``index_location`` is;
* :meth:`ShardIndex.check_bounds` rejects any present entry reaching past the shard's end
  (overflow-safe) with :class:`CodecError`.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ...errors import CodecError
from ...grid import MAX_NDIM, ChunkGrid
from ...metadata.dtypes import DataType, parse_data_type
from ..base import ChunkArraySpec

#: both index values of a missing inner chunk
MISSING = np.uint64(2**64 - 1)
#: a layout lists its inner chunks' coordinates up to this many inner chunks
LISTED_COORDS = 1 << 16


@lru_cache(maxsize=1)
def index_data_type() -> DataType:
    return parse_data_type("uint64")


@lru_cache(maxsize=64)
def morton_order(chunks_per_shard: tuple[int, ...]) -> np.ndarray:
    """C-order flat ids of the inner chunks sorted by compressed Morton code: dimension d
    contributes ``(c_d - 1).bit_length()`` bits, interleaved from the lowest bit up with
    dimension 0 first. This is the order zarr-python 3 writes, so our shards match its
    bytes exactly."""
    n = math.prod(chunks_per_shard)
    if n == 0:
        return np.empty(0, dtype=np.intp)
    coords = np.indices(chunks_per_shard, dtype=np.uint64).reshape(len(chunks_per_shard), n)
    bits = [(c - 1).bit_length() for c in chunks_per_shard]
    code = np.zeros(n, dtype=np.uint64)
    out_bit = 0
    for coord_bit in range(max(bits, default=0)):
        for dim, nbits in enumerate(bits):
            if coord_bit < nbits:
                bit = (coords[dim] >> np.uint64(coord_bit)) & np.uint64(1)
                code |= bit << np.uint64(out_bit)
                out_bit += 1
    # codes are unique, so the sort order is fully determined
    order = np.argsort(code, kind="stable").astype(np.intp)
    order.flags.writeable = False
    return order


@lru_cache(maxsize=64)
def morton_rank(chunks_per_shard: tuple[int, ...]) -> np.ndarray:
    """The position of each C-order flat id in :func:`morton_order`."""
    order = morton_order(chunks_per_shard)
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order), dtype=np.intp)
    rank.flags.writeable = False
    return rank


@dataclass(frozen=True)
class ShardLayout:
    """What follows from one shard shape and the inner chunk shape."""
    shard_shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    chunks_per_shard: tuple[int, ...]
    #: the inner chunk grid over the shard (always regular)
    grid: ChunkGrid
    #: spec of the decoded index array: ``chunks_per_shard + (2,)`` uint64
    index_spec: ChunkArraySpec
    #: encoded byte size of the index (fixed: checked when the codec is built)
    index_size: int
    #: number of inner chunks, ``prod(chunks_per_shard)``
    nchunks: int
    #: C-order strides of a flat id over ``chunks_per_shard``
    _strides: tuple[int, ...] = field(repr=False)

    def chunk_coords(self, flat_id: int) -> tuple[int, ...]:
        """The coordinates of inner chunk ``flat_id`` (C order). Computed, or looked up in
        :attr:`listed_coords` where the shard has few enough inner chunks to list them, so
        a layout costs the same for 10 inner chunks as for 10**18."""
        listed = self.listed_coords
        if listed is not None:
            return listed[flat_id]
        out = []
        for stride in self._strides:
            c, flat_id = divmod(flat_id, stride)
            out.append(c)
        return tuple(out)

    @functools.cached_property
    def listed_coords(self) -> tuple[tuple[int, ...], ...] | None:
        """Every inner chunk's coordinates by flat id, listed on first use when there are
        at most :data:`LISTED_COORDS` of them (whole-shard codecs look one up per inner
        chunk), else None."""
        if self.nchunks > LISTED_COORDS:
            return None
        return tuple(itertools.product(*(range(n) for n in self.chunks_per_shard)))

    @property
    def write_order(self) -> np.ndarray:
        return morton_order(self.chunks_per_shard)

    @property
    def write_rank(self) -> np.ndarray:
        """Each flat id's position in :attr:`write_order`."""
        return morton_rank(self.chunks_per_shard)

    def flat_id(self, coords: tuple[int, ...]) -> int:
        i = 0
        for c, n in zip(coords, self.chunks_per_shard):
            i = i * n + int(c)
        return i

    def blocks(self, shard: np.ndarray) -> "InnerChunks":
        """The inner chunks of ``shard`` (an array of ``shard_shape``) as views:
        ``blocks[flat_id]`` reads and ``blocks[flat_id] = chunk`` writes one (no copy)."""
        return InnerChunks(self, shard)


class InnerChunks:
    """Views of a shard's inner chunks by flat id. Up to half numpy's dimension limit the
    shard is viewed once with shape ``chunks_per_shard + chunk_shape`` and indexed by
    coordinates; past that (the view would have too many dimensions) each inner chunk
    is sliced out."""

    __slots__ = ("_layout", "_shard", "_view", "_listed")

    def __init__(self, layout: ShardLayout, shard: np.ndarray) -> None:
        self._layout = layout
        self._shard = shard
        self._listed = layout.listed_coords
        nd = len(layout.chunk_shape)
        self._view = None
        if 2 * nd <= MAX_NDIM:
            interleaved: list[int] = []
            for n, c in zip(layout.chunks_per_shard, layout.chunk_shape):
                interleaved += [n, c]
            self._view = shard.reshape(interleaved).transpose(
                *range(0, 2 * nd, 2), *range(1, 2 * nd, 2))

    def _index(self, flat_id: int) -> tuple:
        listed = self._listed
        coords = listed[flat_id] if listed is not None else self._layout.chunk_coords(flat_id)
        if self._view is not None:
            return coords
        return tuple(slice(c * n, (c + 1) * n)
                     for c, n in zip(coords, self._layout.chunk_shape))

    def __getitem__(self, flat_id: int) -> np.ndarray:
        target = self._shard if self._view is None else self._view
        return target[self._index(flat_id)]

    def __setitem__(self, flat_id: int, chunk: np.ndarray) -> None:
        target = self._shard if self._view is None else self._view
        target[self._index(flat_id)] = chunk


def make_layout(shard_shape: tuple[int, ...], chunk_shape: tuple[int, ...],
                index_size_of: Callable[[ChunkArraySpec], int]) -> ShardLayout:
    """The layout of a shard of ``shard_shape``; the caller has checked divisibility.
    ``index_size_of(index_spec)`` gives the index's encoded size."""
    cps = tuple(s // c for s, c in zip(shard_shape, chunk_shape))
    index_spec = ChunkArraySpec(cps + (2,), index_data_type(), MISSING,
                                write_empty_chunks=True)
    strides = []
    n = 1
    for c in reversed(cps):
        strides.append(n)
        n *= c
    grid = ChunkGrid.from_sizes(shard_shape, chunk_shape)
    return ShardLayout(shard_shape, chunk_shape, cps, grid, index_spec,
                       index_size_of(index_spec), n, tuple(reversed(strides)))


class ShardIndex:
    """The ``(offset, nbytes)`` pairs of one shard, flat in C order."""

    __slots__ = ("entries",)

    def __init__(self, entries: np.ndarray) -> None:
        #: uint64 array of shape ``(n, 2)``
        self.entries = entries

    @classmethod
    def empty(cls, n: int) -> "ShardIndex":
        return cls(np.full((n, 2), MISSING, dtype=np.uint64))

    @classmethod
    def from_decoded(cls, array: np.ndarray, layout: ShardLayout) -> "ShardIndex":
        arr = np.asarray(array)
        if arr.shape != layout.index_spec.shape:
            raise CodecError(f"shard index has shape {arr.shape}, expected "
                             f"{layout.index_spec.shape}")
        return cls(arr.astype(np.uint64, copy=False).reshape(layout.nchunks, 2))

    @property
    def present(self) -> np.ndarray:
        """Boolean mask of stored inner chunks."""
        e = self.entries
        return ~((e[:, 0] == MISSING) & (e[:, 1] == MISSING))

    def is_present(self, flat_id: int) -> bool:
        off, nb = self.entries[flat_id]
        return not (off == MISSING and nb == MISSING)

    def range(self, flat_id: int) -> tuple[int, int]:
        """``(start, end)`` of a present inner chunk."""
        off, nb = self.entries[flat_id].tolist()      # plain ints, no uint64 overflow
        return off, off + nb

    def check_bounds(self, size: int) -> None:
        """CodecError if a present entry reaches past ``size`` bytes."""
        e = self.entries
        off, nb = e[:, 0], e[:, 1]
        size64 = np.uint64(size)
        # off <= size first, so that size - off cannot wrap where it matters
        with np.errstate(over="ignore"):
            bad = self.present & ((off > size64) | (nb > size64 - off))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise CodecError(
                f"truncated shard: inner chunk {i} spans bytes [{int(off[i])}, "
                f"{int(off[i]) + int(nb[i])}) of a {size}-byte shard")

    def to_array(self, layout: ShardLayout) -> np.ndarray:
        return self.entries.reshape(layout.index_spec.shape)
