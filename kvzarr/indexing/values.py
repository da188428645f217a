"""Values for a set, taken as zarr-python 3 takes them.

A scalar broadcasts to the whole selection. A non-scalar must have the selection's shape;
axes of size 1 broadcast, but dimensions are never prepended (``a[...] = row`` into a 2-D
array fails, as in zarr-python). For coordinate and mask selections a value with exactly
``n`` elements is also taken in C order (zarr-python flattens it). The result has the
indexer's ``buffer_shape`` so that ``value[p.out_selection]`` works for every projection.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import (ShapeMismatchError, ValueConversionError, ValueOverflowError,
                      ValueTypeError)
from .projection import Indexer
from .vindex import CoordinateIndexer


def _is_scalar(value: Any, dtype: np.dtype) -> bool:
    if np.isscalar(value):
        return True
    if getattr(value, "shape", None) == ():
        return True
    return isinstance(value, tuple) and dtype.names is not None and len(value) == len(dtype.names)


def prepare_value(value: Any, indexer: Indexer, numpy_dtype: Any) -> np.ndarray:
    """``value`` as an array of ``indexer.buffer_shape`` and ``numpy_dtype``; raises
    :class:`~kvzarr.errors.ShapeMismatchError` when it does not fit the selection."""
    dtype = np.dtype(numpy_dtype)
    shape, buffer_shape = tuple(indexer.shape), tuple(indexer.buffer_shape)
    if _is_scalar(value, dtype):
        return np.broadcast_to(_converted(value, dtype), buffer_shape)
    arr = _converted(value, dtype)
    if arr.shape == shape:
        return arr.reshape(buffer_shape)
    if isinstance(indexer, CoordinateIndexer) and arr.size == math.prod(buffer_shape):
        return arr.reshape(buffer_shape)
    if arr.ndim == len(shape) and all(v in (s, 1) for v, s in zip(arr.shape, shape)):
        return np.broadcast_to(arr, shape).reshape(buffer_shape)
    raise ShapeMismatchError(
        f"value of shape {arr.shape} does not match the selection of shape {shape}",
        hint="pass a scalar or an array of exactly the selection's shape")


def _converted(value: Any, dtype: np.dtype) -> np.ndarray:
    """``np.asarray(value, dtype)``, numpy's conversion errors raised as kvzarr's."""
    try:
        return np.asarray(value, dtype=dtype)
    except OverflowError as e:
        raise ValueOverflowError(f"value out of range for {dtype}: {e}") from e
    except TypeError as e:
        raise ValueTypeError(f"value cannot be converted to {dtype}: {e}") from e
    except ValueError as e:
        raise ValueConversionError(f"value cannot be converted to {dtype}: {e}") from e
