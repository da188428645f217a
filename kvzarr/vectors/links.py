"""Links: connectivity records between vertices, as zarr-vectors 0.9.2 stores them.

A record joins ``link_width`` endpoints, each a (chunk, row in that chunk's vertices
cell). Records of one level live in the family group ``<level>/links/<delta>/`` and,
inside it, in cell arrays named by the chunk offsets of endpoints 1.. from the record's
source chunk: ``0.0.+1``, ``+1.-1.0``, several offsets joined by ``_``. The cell of a
record is its source chunk.

Undirected families are stored ``canonical``: a record's endpoints are sorted by (chunk,
row), the smallest is the source (so offsets are lexicographically >= 0), and the row
stored is ``[perm, row_0, row_1, ...]`` where ``perm`` is the rank of the sorting
permutation among all permutations in lexicographic order (its Lehmer code), which
gives back the original endpoint order: an edge's direction, a face's winding.

Cells of non-zero offset arrays hold ``i64 K, i64 byte_offset[K], rows``; writers use
``K = 1``. Cells of the all-zero (intra-chunk) array hold the rows alone, with a
fragment index of link groups in ``link_fragments``.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from ..errors import CodecError

_I64 = struct.Struct("<q")


def offset_name(offsets: np.ndarray) -> str:
    """``[[1, 0, -2]]`` -> ``+1.0.-2``; several offsets joined by ``_``."""
    def one(vec) -> str:
        return ".".join("0" if v == 0 else f"{int(v):+d}" for v in vec)
    return "_".join(one(vec) for vec in np.asarray(offsets).reshape(-1, offsets.shape[-1]))


def lehmer(perm: np.ndarray) -> np.ndarray:
    """Rank of each permutation row (M, L) among the L! permutations in lexicographic
    order: ``[0, 1] -> 0``, ``[1, 0] -> 1``, ``[1, 2, 0] -> 3``."""
    m, width = perm.shape
    rank = np.zeros(m, dtype=np.int64)
    for i in range(width):
        smaller_after = (perm[:, i + 1:] < perm[:, i:i + 1]).sum(axis=1)
        rank += smaller_after * math.factorial(width - 1 - i)
    return rank


def unlehmer(rank: np.ndarray, width: int) -> np.ndarray:
    """The permutations (M, width) with the given lexicographic ranks."""
    rank = np.asarray(rank, dtype=np.int64).copy()
    if np.any(rank < 0) or np.any(rank >= math.factorial(width)):
        raise CodecError(f"a link's permutation index is not below {width}!")
    out = np.empty((len(rank), width), dtype=np.int64)
    left = np.tile(np.arange(width), (len(rank), 1))
    for i in range(width):
        f = math.factorial(width - 1 - i)
        pick = rank // f
        rank -= pick * f
        out[:, i] = left[np.arange(len(rank)), pick]
        keep = np.ones_like(left, dtype=bool)
        keep[np.arange(len(rank)), pick] = False
        left = left[keep].reshape(len(rank), width - 1 - i)
    return out


def canonical(chunks: np.ndarray, rows: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Place undirected records (chunks (M, L, D), rows (M, L)): returns each record's
    source chunk (M, D), its endpoints' offsets from the source (M, L - 1, D) and the
    stored row ``[perm, rows in sorted order]`` (M, 1 + L)."""
    m, width, ndim = chunks.shape
    keys = np.concatenate([chunks, rows[:, :, None]], axis=2)       # (M, L, D + 1)
    order = np.empty((m, width), dtype=np.int64)
    for r in range(m):   # (records are few: the bridges between chunks)
        order[r] = sorted(range(width), key=lambda k: tuple(keys[r, k].tolist()))
    take = np.arange(m)[:, None]
    sorted_chunks = chunks[take, order]
    source = sorted_chunks[:, 0]
    offsets = sorted_chunks[:, 1:] - source[:, None, :]
    stored = np.concatenate([lehmer(order)[:, None], rows[take, order]], axis=1)
    return source, offsets, stored


def encode_cell(rows: np.ndarray) -> bytes:
    """A non-intra links cell: one block of int64 rows."""
    return _I64.pack(1) + _I64.pack(0) + np.ascontiguousarray(rows, dtype="<i8").tobytes()


def decode_cell(payload: Any, width: int, key: str | None = None) -> np.ndarray:
    """The rows (M, width) of a non-intra links cell (every block, in order)."""
    data = memoryview(payload).cast("B")
    if len(data) < 8:
        raise CodecError("a links cell needs its block count", key=key)
    (k,) = _I64.unpack_from(data)
    head = 8 + 8 * k
    if k < 0 or len(data) < head:
        raise CodecError(f"a links cell claims {k} blocks in {len(data)} bytes", key=key)
    starts = np.frombuffer(data, "<i8", k, 8).astype(np.int64)
    body = len(data) - head
    ends = np.append(starts[1:], body)
    row = 8 * width
    if k and (starts[0] != 0 or np.any(np.diff(starts) < 0) or np.any(starts > body)
              or np.any((ends - starts) % row)):
        raise CodecError("a links cell's blocks do not cut its rows", key=key)
    if body % row:
        raise CodecError(f"a links cell holds {body} bytes, not rows of {width}", key=key)
    return np.frombuffer(data, "<i8", body // 8, head).astype(np.int64).reshape(-1, width)


def decode_intra(payload: Any, width: int, key: str | None = None) -> np.ndarray:
    """The rows of an intra-chunk (all-zero offsets) links cell."""
    data = memoryview(payload).cast("B")
    if len(data) % (8 * width):
        raise CodecError(f"an intra-chunk links cell of {len(data)} bytes is not rows of "
                         f"{width}", key=key)
    return np.frombuffer(data, "<i8").astype(np.int64).reshape(-1, width)
