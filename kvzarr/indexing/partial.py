"""Split a chunk selection into an orthogonal box and a selection inside it.

Used to read part of a shard: the orthogonal part (per dimension a slice or a sorted,
unique index array) says which inner chunks are needed; the rest picks the result out of
the decoded sub-block. Promise, for every selection an indexer produces::

    chunk[chunk_selection] == apply_orthogonal(chunk, orth_sel)[sub_sel]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArrayIndexError
from .dims import _int_array, normalize_int, normalize_slice
from .normalize import is_bool_array, is_integer, is_integer_array, replace_ellipsis


def _compress(u: np.ndarray) -> slice | np.ndarray:
    """A sorted unique index array as a slice when it is an arithmetic progression."""
    if u.size == 0:
        return slice(0, 0, 1)
    first = int(u[0])
    if u.size == 1:
        return slice(first, first + 1, 1)
    d = np.diff(u)
    if (d == d[0]).all():
        return slice(first, int(u[-1]) + 1, int(d[0]))
    return u


def to_orthogonal(chunk_selection: Any, chunk_shape: tuple[int, ...]) -> tuple[tuple, tuple]:
    """``(orth_sel, sub_sel)``: ``orth_sel`` holds one slice (step >= 1) or sorted unique
    1-D intp array per dimension, ``sub_sel`` has the structure of ``chunk_selection``
    (ints where it has ints, index arrays of the same shapes where it has arrays)."""
    sel = replace_ellipsis(chunk_selection, tuple(chunk_shape))
    orth: list[Any] = []
    sub: list[Any] = []
    for item, n in zip(sel, chunk_shape):
        if is_integer(item):
            i = normalize_int(item, n)
            orth.append(slice(i, i + 1, 1))
            sub.append(0)
        elif isinstance(item, slice):
            orth.append(slice(*normalize_slice(item, n)))
            sub.append(slice(None))
        elif is_integer_array(item) or (is_bool_array(item, 1) and item.shape[0] == n):
            x = np.asarray(item)
            x = np.flatnonzero(x) if x.dtype == bool else _int_array(x, n)
            u, inv = np.unique(x.reshape(-1), return_inverse=True)
            orth.append(_compress(u.astype(np.intp)))
            sub.append(inv.reshape(x.shape).astype(np.intp))
        else:
            raise ArrayIndexError(
                f"unsupported chunk selection item {type(item)!r}; expected an integer, "
                "a slice or an index array")
    return tuple(orth), tuple(sub)


def apply_orthogonal(chunk: np.ndarray, orth_sel: tuple) -> np.ndarray:
    """``chunk`` indexed orthogonally (``np.ix_`` semantics) by ``orth_sel``."""
    out = chunk[tuple(s if isinstance(s, slice) else slice(None) for s in orth_sel)]
    for axis, s in enumerate(orth_sel):
        if not isinstance(s, slice):
            out = np.take(out, s, axis=axis)
    return out
