"""Orthogonal (outer) selection, ``a.oindex[...]`` (zarr-python 3's ``OrthogonalIndexer``).

Per dimension: an int, a slice (step >= 1), a 1-D integer array or list (any order,
duplicates, negatives wrap), or a 1-D Boolean array of exactly the dimension's length.
The result is the outer product (``np.ix_`` semantics) with integer dims dropped.
"""

from __future__ import annotations

from typing import Any

from ..errors import ArrayIndexError
from .dims import (project_bool_array, project_int, project_int_array, project_slice,
                   selects_nothing, unprojected_slice)
from .normalize import is_bool_array, is_integer, is_integer_array, replace_ellipsis, replace_lists
from .projection import ProductIndexer


class OrthogonalIndexer(ProductIndexer):
    def __init__(self, selection: Any, grid: Any) -> None:
        sel = replace_lists(replace_ellipsis(selection, grid.shape))
        slices = unprojected_slice if selects_nothing(sel, grid.dimensions) else project_slice
        dims = []
        for item, dim in zip(sel, grid.dimensions):
            if is_integer(item):
                dims.append(project_int(item, dim))
            elif isinstance(item, slice):
                dims.append(slices(item, dim))
            elif is_integer_array(item):
                dims.append(project_int_array(item, dim))
            elif is_bool_array(item):
                dims.append(project_bool_array(item, dim))
            else:
                raise ArrayIndexError(
                    "unsupported selection item for orthogonal indexing; expected integer, "
                    f"slice, integer array or Boolean array, got {type(item)!r}")
        super().__init__(dims)
