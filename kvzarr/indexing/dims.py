"""Per-dimension projection of one selection item onto the chunks of one grid dimension.

Implements the NCZarr hyperslab projection (netCDF-C ``libnczarr/zchunking.c``, the same
math as zarr-python's ``SliceDimIndexer``) for slices, and its array analogue for integer /
Boolean arrays (zarr-python's ``IntArrayDimIndexer``), for regular and rectilinear dimensions.

Promises: every result is computed with vectorised numpy per dimension (a slice over a
few chunks in plain integers: numpy's cost per call is more than such a loop); Python
only loops once per *touched chunk* (to hand out the per-chunk selections), never per
element. Touched chunks come in output order; chunks that hold no selected point never
appear; the output selections tile ``[0, nitems)``; ``complete`` says the chunk's whole
valid region is selected, each element once, in increasing order.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..errors import ArrayIndexError, BoundsCheckError, InvalidSelectionError, NegativeStepError

INT, SLICE, ARRAY = "int", "slice", "array"


class DimProjection:
    """The projections of one dimension: parallel lists with one entry per touched chunk.

    ``chunk_sel`` entries are an int (``kind == INT``), a ``slice`` with explicit
    ``start, stop, step >= 1`` (``SLICE``) or a 1-D intp array (``ARRAY``), all relative to
    the chunk. ``out_sel`` entries are ``None`` (INT: the axis is dropped), a step-1 slice,
    or an intp array of output positions (an unsorted integer array).
    """

    __slots__ = ("kind", "nitems", "coords", "chunk_sel", "out_sel", "complete", "sorted_out")

    def __init__(self, kind: str, nitems: int, coords: list[int], chunk_sel: list[Any],
                 out_sel: list[Any], complete: list[bool], sorted_out: bool = True) -> None:
        self.kind = kind
        self.nitems = nitems
        self.coords = coords
        self.chunk_sel = chunk_sel
        self.out_sel = out_sel
        self.complete = complete
        #: every out_sel entry is a slice (False only for unsorted integer arrays)
        self.sorted_out = sorted_out

    def __len__(self) -> int:
        return len(self.coords)

    def __repr__(self) -> str:
        rows = ", ".join(f"{c}: {s!r} -> {o!r}" for c, s, o in
                         zip(self.coords, self.chunk_sel, self.out_sel))
        return f"DimProjection({self.kind}, n={self.nitems}, [{rows}])"


def _empty(kind: str) -> DimProjection:
    return DimProjection(kind, 0, [], [], [], [])


def _valid_bounds(dim: Any, js: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) of the valid data of chunks ``js`` (all < nchunks)."""
    nch = dim.nchunks
    a = np.asarray(dim.offsets(js), dtype=np.int64)
    nxt = js + 1
    inner = nxt < nch
    # Offsets of the next chunk are valid only below nchunks; the last chunk ends at L.
    b = np.where(inner, np.asarray(dim.offsets(np.where(inner, nxt, nch - 1)), dtype=np.int64),
                 dim.extent)
    return a, np.minimum(b, dim.extent)


def normalize_int(i: Any, length: int) -> int:
    """Wrap a negative index once and bounds-check it (zp ``normalize_integer_selection``)."""
    i = int(i)
    if i < 0:
        i += length
    if not 0 <= i < length:
        raise BoundsCheckError(f"index out of bounds for dimension with length {length}")
    return i


def normalize_slice(sel: slice, length: int) -> tuple[int, int, int]:
    """``slice.indices`` with kvzarr's errors: step 0 -> ValueError, negative -> IndexError."""
    if sel.step is not None:
        try:
            step = operator.index(sel.step)
        except TypeError:
            raise ArrayIndexError(f"slice step must be an integer, got {sel.step!r}") from None
        if step == 0:
            raise InvalidSelectionError("slice step cannot be zero")
    try:
        start, stop, step = sel.indices(length)
    except TypeError as e:
        raise ArrayIndexError(f"slice indices must be integers or None: {sel!r}") from e
    if step < 1:
        raise NegativeStepError("only slices with step >= 1 are supported.")
    return start, stop, step


def project_int(i: Any, dim: Any) -> DimProjection:
    idx = normalize_int(i, dim.extent)
    j = dim.index_to_chunk(idx)
    a = dim.chunk_offset(j)
    return DimProjection(INT, 1, [j], [idx - a], [None], [dim.data_size(j) == 1])


def slice_count(sel: slice, dim: Any) -> int:
    """How many items ``sel`` selects along ``dim`` (checked as by :func:`project_slice`)."""
    s, e, k = normalize_slice(sel, dim.extent)
    return max(0, -(-(e - s) // k))


def selects_nothing(items: Any, dims: Any) -> bool:
    """Whether a product selection is empty because one of its items selects nothing (a
    slice, an empty integer array, a Boolean array with no True)."""
    for item, dim in zip(items, dims):
        if isinstance(item, slice):
            # plain slice.indices: this runs on every read, and a bad slice is reported
            # by the projection that follows with kvzarr's errors
            try:
                s, e, k = item.indices(dim.extent)
            except (TypeError, ValueError):
                continue
            if k > 0 and e <= s:
                return True
        elif isinstance(item, np.ndarray) and item.ndim == 1:
            if item.size == 0 or (item.dtype == bool and not item.any()):
                return True
    return False


def unprojected_slice(sel: slice, dim: Any) -> DimProjection:
    """The projection of a slice in a selection that is empty anyway (another dimension
    selects nothing): its item count, no chunks. Projecting it would cost in proportion
    to the chunks it spans, a number the metadata sets (shape ``[0, 2**31]``)."""
    return DimProjection(SLICE, slice_count(sel, dim), [], [], [], [])


#: a slice over at most this many chunks is projected without numpy
FEW_CHUNKS = 8


def project_slice(sel: slice, dim: Any) -> DimProjection:
    """The slice's items per touched chunk, vectorised over the touched chunks."""
    s, e, k = normalize_slice(sel, dim.extent)
    n = max(0, -(-(e - s) // k))
    if n == 0:
        return _empty(SLICE)
    t = s + (n - 1) * k                              # last selected index (tight stop)
    j0, j1 = dim.index_to_chunk(s), dim.index_to_chunk(t)
    if j1 - j0 < FEW_CHUNKS and j1 - j0 + 1 <= n:
        return _slice_over_few_chunks(dim, s, t, k, n, j0, j1)
    return _slice_vectorised(dim, s, t, k, n, j0, j1)


def _slice_over_few_chunks(dim: Any, s: int, t: int, k: int, n: int, j0: int,
                           j1: int) -> DimProjection:
    """The dense case of :func:`_slice_vectorised`, chunk by chunk in plain integers."""
    nch, extent = dim.nchunks, dim.extent
    coords: list[int] = []
    chunk_sel: list[slice] = []
    out_sel: list[slice] = []
    complete: list[bool] = []
    for j in range(j0, j1 + 1):
        a = dim.chunk_offset(j)
        b = min(dim.chunk_offset(j + 1) if j + 1 < nch else extent, extent)
        f = max(s + (-((s - a) // k)) * k, s)
        g = s + ((min(b - 1, t) - s) // k) * k
        if f > g:
            continue                                 # the stride steps over this chunk
        m = (g - f) // k + 1
        o0 = (f - s) // k
        coords.append(j)
        chunk_sel.append(slice(f - a, g - a + 1, k))
        out_sel.append(slice(o0, o0 + m))
        complete.append(m == b - a)
    return DimProjection(SLICE, n, coords, chunk_sel, out_sel, complete)


def _slice_vectorised(dim: Any, s: int, t: int, k: int, n: int, j0: int,
                      j1: int) -> DimProjection:
    """Slice ``s, s + k, ..., t`` (``n`` points, chunks ``j0..j1``) projected with numpy."""
    if j1 - j0 + 1 <= n:
        # Dense: walk the chunk range [j0, j1].
        js = np.arange(j0, j1 + 1, dtype=np.int64)
        a, b = _valid_bounds(dim, js)
        # First point at or after a; for j0 (a <= s) the max picks s itself.
        f = np.maximum(s + (-((s - a) // k)) * k, s)
        g = s + ((np.minimum(b - 1, t) - s) // k) * k
        keep = f <= g                                # false only when k > chunk size
        if not keep.all():
            js, a, b, f, g = js[keep], a[keep], b[keep], f[keep], g[keep]
    else:
        # Sparse (stride longer than chunks): fewer points than chunks in range, so group
        # the points by chunk instead of scanning mostly empty chunks.
        pts = s + k * np.arange(n, dtype=np.int64)
        pc = np.asarray(dim.indices_to_chunks(pts), dtype=np.int64)
        first = np.flatnonzero(np.concatenate(([True], pc[1:] != pc[:-1])))
        counts = np.diff(np.append(first, n))
        js = pc[first]
        f = pts[first]
        g = f + (counts - 1) * k
        a, b = _valid_bounds(dim, js)
    m = (g - f) // k + 1
    lo, hi = (f - a).tolist(), (g - a + 1).tolist()
    o0 = (f - s) // k
    o1 = (o0 + m).tolist()
    return DimProjection(
        SLICE, n, js.tolist(),
        [slice(x, y, k) for x, y in zip(lo, hi)],
        [slice(x, y) for x, y in zip(o0.tolist(), o1)],
        (m == b - a).tolist())


def _int_array(x: np.ndarray, length: int) -> np.ndarray:
    """Wrapped, bounds-checked int64 copy of an integer index array."""
    if x.dtype.kind == "u":
        if x.size and int(x.max()) >= length:
            raise BoundsCheckError(f"index out of bounds for dimension with length {length}")
        return x.astype(np.int64)
    x = x.astype(np.int64)  # copy: the caller's array is never modified
    neg = x < 0
    if neg.any():
        x[neg] += length
    if x.size and (int(x.min()) < 0 or int(x.max()) >= length):
        raise BoundsCheckError(f"index out of bounds for dimension with length {length}")
    return x


def project_int_array(sel: Any, dim: Any) -> DimProjection:
    """1-D int array, any order, duplicates and negatives allowed."""
    x = np.asarray(sel)
    if x.ndim != 1:
        raise ArrayIndexError(
            "integer arrays in an orthogonal selection must be 1-dimensional only")
    return _project_points(_int_array(x, dim.extent), dim)


def project_bool_array(sel: Any, dim: Any) -> DimProjection:
    x = np.asarray(sel)
    if x.ndim != 1:
        raise ArrayIndexError(
            "Boolean arrays in an orthogonal selection must be 1-dimensional only")
    if x.shape[0] != dim.extent:
        raise ArrayIndexError(
            "Boolean array has the wrong length for dimension; "
            f"expected {dim.extent}, got {x.shape[0]}")
    return _project_points(np.flatnonzero(x).astype(np.int64), dim)


def _project_points(x: np.ndarray, dim: Any) -> DimProjection:
    """Group in-range indices ``x`` by chunk (stable, so duplicates keep their order)."""
    n = x.shape[0]
    if n == 0:
        return _empty(ARRAY)
    chunks = np.asarray(dim.indices_to_chunks(x), dtype=np.int64)
    order = None
    if n > 1 and (chunks[1:] < chunks[:-1]).any():
        order = np.argsort(chunks, kind="stable")
        x, chunks = x[order], chunks[order]
    starts = np.flatnonzero(np.concatenate(([True], chunks[1:] != chunks[:-1])))
    stops = np.append(starts[1:], n)
    js = chunks[starts]
    a, b = _valid_bounds(dim, js)
    local = (x - np.repeat(a, stops - starts)).astype(np.intp)
    # Complete: the chunk's points are exactly 0, 1, ..., size-1 in that order.
    breaks = np.concatenate(([0], np.cumsum(np.diff(local) != 1)))
    complete = ((stops - starts) == (b - a)) & (local[starts] == 0) & (
        breaks[stops - 1] == breaks[starts])
    st, sp = starts.tolist(), stops.tolist()
    chunk_sel = [local[p:q] for p, q in zip(st, sp)]
    if order is None:
        out_sel: list[Any] = [slice(p, q) for p, q in zip(st, sp)]
    else:
        order = order.astype(np.intp)
        out_sel = [order[p:q] for p, q in zip(st, sp)]
    return DimProjection(ARRAY, n, js.tolist(), chunk_sel, out_sel, complete.tolist(),
                         sorted_out=order is None)
