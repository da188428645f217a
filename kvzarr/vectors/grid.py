"""Space cut into chunks and chunks into bins, as the Zarr Vector Format addresses them.

A point ``p`` lies in the absolute chunk ``floor(p / chunk_shape)`` (negative where ``p``
is) and the global bin ``floor(p / bin_shape)``. The cells of every per-chunk array are
indexed from the grid's origin, ``floor(bounds_min / chunk_shape)``, and the grid spans
up to ``floor(bounds_max / chunk_shape)`` inclusive (bounds are closed). A chunk is named
in ``nonempty_chunks`` and the object manifests by its absolute coordinates; its key is
the cell ``chunk - origin``.

zarr-vectors assigns a plain point cloud's chunks through its bins,
``floor_div(floor(p / bin), bins_per_chunk)``, and everything else directly. In floating
point the two can disagree at a chunk's edge (0.3 / 0.1 is 2.999...), so a query takes
the union of both answers for its corners: every point a box holds is then among the
chunks it reads, whichever way the store was written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import MetadataError, VectorDataError

#: how far a bin may be from dividing its chunk and still count as dividing it
DIVIDES_TOLERANCE = 1e-9


@dataclass(frozen=True)
class SpatialGrid:
    chunk_shape: tuple[float, ...]
    bin_shape: tuple[float, ...]
    origin: tuple[int, ...]
    shape: tuple[int, ...]

    @classmethod
    def from_bounds(cls, chunk_shape, bin_shape, bounds_min, bounds_max) -> "SpatialGrid":
        chunk = np.asarray(chunk_shape, dtype=np.float64)
        lo = np.floor(np.asarray(bounds_min, dtype=np.float64) / chunk).astype(np.int64)
        hi = np.floor(np.asarray(bounds_max, dtype=np.float64) / chunk).astype(np.int64)
        shape = np.maximum(1, hi - lo + 1)
        return cls(tuple(float(c) for c in chunk_shape), tuple(float(b) for b in bin_shape),
                   tuple(int(o) for o in lo), tuple(int(s) for s in shape))

    def covering(self, chunks: np.ndarray) -> "SpatialGrid":
        """This grid grown to hold ``chunks`` too: a point on a bound can fall into the
        chunk beside it by the bin arithmetic (module docstring)."""
        if not len(chunks):
            return self
        origin = np.asarray(self.origin, dtype=np.int64)
        end = origin + np.asarray(self.shape, dtype=np.int64)
        lo = np.minimum(origin, chunks.min(axis=0))
        hi = np.maximum(end, chunks.max(axis=0) + 1)
        return SpatialGrid(self.chunk_shape, self.bin_shape, tuple(int(v) for v in lo),
                           tuple(int(v) for v in hi - lo))

    @property
    def ndim(self) -> int:
        return len(self.chunk_shape)

    @property
    def bins_per_chunk(self) -> tuple[int, ...]:
        return tuple(int(round(c / b)) for c, b in zip(self.chunk_shape, self.bin_shape))

    @property
    def bins_in_chunk(self) -> int:
        return math.prod(self.bins_per_chunk)

    def chunks_of(self, points: np.ndarray) -> np.ndarray:
        """Absolute chunk of each point, ``floor(p / chunk_shape)``: (N, D) int64."""
        cols = floor_columns(points, self.chunk_shape)
        return np.column_stack(cols) if cols else np.zeros((len(points), 0), np.int64)

    def bins_of(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(chunks, local bin index)`` of each point through its global bin, the way
        zarr-vectors bins a plain point cloud; the bin index is C order in the chunk."""
        bpc = self.bins_per_chunk
        chunks = np.empty(points.shape, dtype=np.int64)
        local = np.zeros(len(points), dtype=np.int64)
        for axis, glob in enumerate(floor_columns(points, self.bin_shape)):
            chunk = np.floor_divide(glob, bpc[axis], out=chunks[:, axis])
            local *= bpc[axis]
            local += glob
            local -= chunk * bpc[axis]
        return chunks, local

    def chunk_range(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chunks (inclusive, per axis) that may hold a point of the closed box
        ``[lo, hi]``, by either assignment (module docstring). Infinite corners clamp to
        the grid's edges; empty (lo > hi somewhere) gives a range with lo > hi."""
        grid_lo = np.asarray(self.origin, dtype=np.int64)
        grid_hi = grid_lo + np.asarray(self.shape, dtype=np.int64) - 1
        bpc = np.asarray(self.bins_per_chunk, dtype=np.int64)
        chunk = np.asarray(self.chunk_shape)
        binw = np.asarray(self.bin_shape)
        with np.errstate(invalid="ignore", over="ignore"):
            c_lo = _floor_clamped(lo / chunk, grid_lo - 1, grid_hi + 1)
            c_hi = _floor_clamped(hi / chunk, grid_lo - 1, grid_hi + 1)
            if np.any(bpc < 1):   # (a coarse level's bins may be wider than its chunks:
                return np.maximum(c_lo, grid_lo), np.minimum(c_hi, grid_hi)  # no bins)
            b_lo = np.floor_divide(_floor_clamped(lo / binw, (grid_lo - 1) * bpc,
                                                  (grid_hi + 2) * bpc), bpc)
            b_hi = np.floor_divide(_floor_clamped(hi / binw, (grid_lo - 1) * bpc,
                                                  (grid_hi + 2) * bpc), bpc)
        first = np.maximum(np.minimum(c_lo, b_lo), grid_lo)
        last = np.minimum(np.maximum(c_hi, b_hi), grid_hi)
        return first, last

    def bin_range(self, chunk: np.ndarray, lo: np.ndarray, hi: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Local bins (inclusive, per axis) of ``chunk`` that may hold a point of the
        box; bins are assigned by ``floor(p / bin)`` alone, which is monotone in ``p``."""
        bpc = np.asarray(self.bins_per_chunk, dtype=np.int64)
        binw = np.asarray(self.bin_shape)
        base = np.asarray(chunk, dtype=np.int64) * bpc
        with np.errstate(invalid="ignore", over="ignore"):
            b_lo = _floor_clamped(lo / binw, base - 1, base + bpc)
            b_hi = _floor_clamped(hi / binw, base - 1, base + bpc)
        return np.maximum(b_lo - base, 0), np.minimum(b_hi - base, bpc - 1)


def floor_columns(points: np.ndarray, widths) -> list[np.ndarray]:
    """``floor(points[:, i] / widths[i])`` as int64, column by column: in float64, as
    zarr-vectors computes it, and several times faster than the same on the (N, D) array
    (numpy reduces and broadcasts a narrow last axis slowly)."""
    out = []
    for axis, width in enumerate(widths):
        column = points[:, axis].astype(np.float64)
        column /= float(width)
        np.floor(column, out=column)
        out.append(column.astype(np.int64))
    return out


def column_extent(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-axis minimum and maximum, column by column (see :func:`floor_columns`)."""
    cols = [points[:, axis] for axis in range(points.shape[1])]
    return (np.array([c.min() for c in cols], dtype=np.float64),
            np.array([c.max() for c in cols], dtype=np.float64))


def _floor_clamped(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``floor(values)`` as int64, with infinities and huge values clamped to
    ``[low, high]`` before the cast (an infinite box corner is a corner past the grid)."""
    return np.clip(np.floor(np.nan_to_num(values, nan=0.0, posinf=np.inf, neginf=-np.inf)),
                   low, high).astype(np.int64)


def chunk_name(chunk) -> str:
    """The chunk's name in ``nonempty_chunks``: its absolute coordinates joined by dots."""
    return ".".join(str(int(c)) for c in chunk)


def parse_chunk_name(name: str, ndim: int, where: str) -> tuple[int, ...]:
    try:
        parts = name.split(".")
        coords = tuple(int(p) for p in parts)
    except (ValueError, AttributeError):
        raise MetadataError(f"{name!r} is not a chunk name", key=where,
                            field="nonempty_chunks") from None
    if [str(c) for c in coords] != parts:   # ("01", "+1", " 1": not as writers name them)
        raise MetadataError(f"{name!r} is not a chunk name in canonical form", key=where,
                            field="nonempty_chunks")
    if len(coords) != ndim:
        raise MetadataError(f"chunk {name!r} has {len(coords)} coordinates, the grid "
                            f"{ndim}", key=where, field="nonempty_chunks")
    return coords


def parse_chunk_names(names: list, ndim: int, where: str) -> np.ndarray:
    """Every name of a ``nonempty_chunks`` list as an (N, ndim) int64 array of chunk
    coordinates, in ascending (lexicographic) order. One pass in C over all names: a
    reader parses this list on every query. A list that is not all canonical names is
    parsed name by name, for the error naming the first bad one."""
    count = len(names)
    if not count:
        return np.zeros((0, ndim), dtype=np.int64)
    try:
        joined = ".".join(names)
        parts = joined.split(".")
        if len(parts) == count * ndim and all(n.count(".") == ndim - 1 for n in names):
            coords = list(map(int, parts))
            # canonical form ("01", "+1", " 1" are not how writers name chunks)
            if ".".join(map(str, coords)) == joined:
                rows = np.asarray(coords, dtype=np.int64).reshape(count, ndim)
                return rows[np.lexsort(rows.T[::-1])] if count > 1 else rows
    except (TypeError, ValueError, OverflowError):
        pass
    for name in names:
        parse_chunk_name(name, ndim, where)    # raises for the first bad name
    raise MetadataError("nonempty_chunks is not a list of chunk names", key=where,
                        field="nonempty_chunks")


def check_bins_divide(chunk_shape, bin_shape) -> None:
    """Bins must divide chunks exactly, or points land in bins of the wrong chunk."""
    for axis, (c, b) in enumerate(zip(chunk_shape, bin_shape)):
        if not b > 0 or not math.isfinite(b):
            raise VectorDataError(f"bin_shape[{axis}] = {b} is not a positive number",
                                  field="bin_shape")
        ratio = c / b
        if abs(ratio - round(ratio)) > DIVIDES_TOLERANCE or round(ratio) < 1:
            raise VectorDataError(f"bin_shape[{axis}] = {b} does not divide "
                                  f"chunk_shape[{axis}] = {c}", field="bin_shape")
