"""The filters of a read, checked and made exact: a closed box, a chunk whitelist, an
object or group selection, and the attribute columns to return.

A box is ``(lo, hi)``; a scalar corner stands for the same value on every axis (as in
zarr-vectors), a corner of any other length than the dataset's dimensionality is an
error, and so is NaN. Infinite corners are allowed: ``(-inf, inf)`` is everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UnsupportedOperationError, VectorDataError
from .objects import group_members


@dataclass(frozen=True)
class Box:
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def parse(cls, bbox: Any, ndim: int) -> "Box | None":
        if bbox is None:
            return None
        try:
            lo_raw, hi_raw = bbox
        except (TypeError, ValueError):
            raise VectorDataError(f"bbox must be (lo, hi), got {bbox!r}", field="bbox") from None
        lo, hi = _corner(lo_raw, ndim, "lo"), _corner(hi_raw, ndim, "hi")
        return cls(lo, hi)

    def contains(self, points: np.ndarray) -> np.ndarray:
        """Closed on both ends, on every axis; compared in float64 (the corners are numpy
        float64 scalars, so float32 columns are widened, not the corners narrowed), one
        column at a time (several times faster than on the (N, D) array)."""
        mask = np.ones(len(points), dtype=bool)
        for axis in range(points.shape[1]):
            column = points[:, axis]
            mask &= column >= self.lo[axis]
            mask &= column <= self.hi[axis]
        return mask

    def empty(self) -> bool:
        return bool(np.any(self.lo > self.hi))


def _corner(value: Any, ndim: int, which: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise VectorDataError(f"bbox {which} corner {value!r} is not numbers",
                              field="bbox") from None
    if arr.ndim == 0:
        arr = np.full(ndim, float(arr))
    if arr.shape != (ndim,):
        raise VectorDataError(f"bbox {which} corner has shape {arr.shape}, the dataset "
                              f"{ndim} dimensions", field="bbox")
    if np.any(np.isnan(arr)):
        raise VectorDataError(f"bbox {which} corner holds NaN", field="bbox")
    return arr


def chunk_filter(level: Any, box: Box | None, chunks: Any) -> np.ndarray:
    """The level's chunks (ascending) that the box and the whitelist both allow."""
    held = level.chunks
    keep = np.ones(len(held), dtype=bool)
    if box is not None:
        if box.empty():
            return held[:0]
        first, last = level.grid.chunk_range(box.lo, box.hi)
        keep &= np.all((held >= first) & (held <= last), axis=1)
    if chunks is not None:
        wanted = _chunk_list(chunks, level.ndim)
        if len(wanted) == 0:
            return held[:0]
        keep &= _rows_in(held, wanted)
    return held[keep]


def _chunk_list(chunks: Any, ndim: int) -> np.ndarray:
    try:
        arr = np.asarray([tuple(c) for c in chunks], dtype=np.float64)
    except (TypeError, ValueError):
        raise VectorDataError("chunks must be a list of chunk coordinate tuples",
                              field="chunks") from None
    if len(arr) == 0:
        return np.zeros((0, ndim), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != ndim or np.any(arr != np.round(arr)):
        raise VectorDataError(f"every chunk must be {ndim} integers", field="chunks")
    return arr.astype(np.int64)


def _rows_in(rows: np.ndarray, table: np.ndarray) -> np.ndarray:
    wanted = {tuple(r) for r in table.tolist()}
    return np.array([tuple(r) in wanted for r in rows.tolist()], dtype=bool)


def object_selection(level: Any, object_ids: Any, group_ids: Any) -> np.ndarray:
    """The object ids to read, in order: ``object_ids`` as requested; ``group_ids`` as
    the sorted union of the groups' members (intersected with ``object_ids`` when both
    are given)."""
    ids = None
    if object_ids is not None:
        ids = _int_list(object_ids, "object_ids")
    if group_ids is not None:
        members = group_members(level.target, level.path, _int_list(group_ids, "group_ids"))
        ids = members if ids is None else np.intersect1d(members, ids)
    return ids


def _int_list(values: Any, field: str) -> np.ndarray:
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise VectorDataError(f"{field} must be a list of integers", field=field)
    return arr.astype(np.int64)


def refuse_attribute_filter(attribute_filter: Any) -> None:
    """``attribute_filter`` selects among the leading chunk axis of a level chunked by
    an attribute (``chunk_by_attribute``), which kvzarr does not read yet."""
    if attribute_filter:
        raise UnsupportedOperationError("attribute_filter needs a level chunked by an "
                                        "attribute, which is not supported yet",
                                        field="attribute_filter")


def with_attributes(names: list[str], attrs: list, parts: list[list[np.ndarray]]
                    ) -> dict[str, np.ndarray]:
    """Each requested attribute's rows, joined and decoded (categories become values)."""
    out = {}
    for name, (_cells, stored), pieces in zip(names, attrs, parts):
        if pieces:
            column = np.concatenate(pieces)
        else:
            column = np.zeros((0, *stored.row_shape), dtype=stored.dtype)
        out[name] = stored.decode(column)
    return out
