"""Basic and block selections (zarr-python 3's ``BasicIndexer`` and ``BlockIndexer``).

Basic: ints (negative wrap once), slices with step >= 1 (clipped like ``slice.indices``), one
``...``; missing trailing dims are ``:``; integer dims are dropped from the result shape.
Block: chunk indices (int or step-1 slice over chunks) turned into the element range of
those chunks, then handled as a basic selection (no dimension is dropped).
"""

from __future__ import annotations

import operator
from typing import Any

from ..errors import ArrayIndexError, BoundsCheckError
from .dims import project_int, project_slice, selects_nothing, unprojected_slice
from .normalize import is_integer, replace_ellipsis, replace_lists
from .projection import ProductIndexer


class BasicIndexer(ProductIndexer):
    def __init__(self, selection: Any, grid: Any) -> None:
        sel = replace_ellipsis(selection, grid.shape)
        slices = unprojected_slice if selects_nothing(sel, grid.dimensions) else project_slice
        dims = []
        for item, dim in zip(sel, grid.dimensions):
            if is_integer(item):
                dims.append(project_int(item, dim))
            elif isinstance(item, slice):
                dims.append(slices(item, dim))
            else:
                raise ArrayIndexError(
                    "unsupported selection item for basic indexing; "
                    f"expected integer or slice, got {type(item)!r}")
        super().__init__(dims)


def _block_index(value: Any, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise ArrayIndexError(
            f"block {what} must be an integer or None, got {value!r}") from None


def block_to_slice(item: Any, dim: Any) -> slice:
    """The element range covered by the chunks ``item`` selects along ``dim``."""
    nch, length = dim.nchunks, dim.extent
    if is_integer(item):
        b = int(item)
        if b < 0:
            b += nch
        if not 0 <= b < nch:
            raise BoundsCheckError(
                f"block index out of bounds for dimension with {nch} chunk(s)")
        start = dim.chunk_offset(b)
        return slice(start, start + dim.data_size(b), 1)
    if isinstance(item, slice):
        if item.step is not None and _block_index(item.step, "step") != 1:
            raise ArrayIndexError(
                "unsupported selection item for block indexing; "
                f"expected integer or slice with step=1, got {item!r}")
        b0 = 0 if item.start is None else _block_index(item.start, "start")
        b1 = nch if item.stop is None else _block_index(item.stop, "stop")
        if b0 < 0:
            b0 += nch
        if b1 < 0:
            b1 += nch
        # zarr-python: the first selected block must exist, even for an empty range.
        if not 0 <= b0 < nch:
            raise BoundsCheckError(
                f"block index out of bounds for dimension with {nch} chunk(s)")
        b1 = min(max(b1, b0), nch)
        start = dim.chunk_offset(b0)
        stop = dim.chunk_offset(b1) if b1 < nch else length
        return slice(start, stop, 1)
    raise ArrayIndexError(
        "unsupported selection item for block indexing; "
        f"expected integer or slice, got {type(item)!r}")


class BlockIndexer(ProductIndexer):
    def __init__(self, selection: Any, grid: Any) -> None:
        sel = replace_lists(replace_ellipsis(selection, grid.shape))
        ranges = [block_to_slice(item, dim) for item, dim in zip(sel, grid.dimensions)]
        slices = unprojected_slice if selects_nothing(ranges, grid.dimensions) else project_slice
        dims = [slices(r, dim) for r, dim in zip(ranges, grid.dimensions)]
        super().__init__(dims)
