"""Selection predicates, normalisation and the ``a[sel]`` dispatch.

Mirrors zarr-python 3's ``is_pure_fancy_indexing`` / ``is_pure_orthogonal_indexing`` /
``replace_ellipsis`` / ``pop_fields`` so that a selection takes the same path here as there;
errors are kvzarr's, of the types zarr-python raises.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..errors import ArrayIndexError


def is_integer(x: Any) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(x, numbers.Integral) and not is_bool(x)


def is_bool(x: Any) -> bool:
    return type(x) in (bool, np.bool_)


def is_integer_list(x: Any) -> bool:
    return isinstance(x, list) and len(x) > 0 and all(is_integer(i) for i in x)


def is_bool_list(x: Any) -> bool:
    return isinstance(x, list) and len(x) > 0 and all(is_bool(i) for i in x)


def is_integer_array(x: Any, ndim: int | None = None) -> bool:
    t = (not np.isscalar(x) and hasattr(x, "shape") and hasattr(x, "dtype")
         and x.dtype.kind in "ui")
    if ndim is not None:
        t = t and len(x.shape) == ndim
    return bool(t)


def is_bool_array(x: Any, ndim: int | None = None) -> bool:
    t = hasattr(x, "shape") and hasattr(x, "dtype") and x.dtype == bool
    if ndim is not None:
        t = t and len(x.shape) == ndim
    return bool(t)


def is_int_or_bool_iterable(x: Any) -> bool:
    return is_integer_list(x) or is_integer_array(x) or is_bool_array(x) or is_bool_list(x)


def ensure_tuple(v: Any) -> tuple:
    return v if isinstance(v, tuple) else (v,)


def replace_lists(selection: tuple) -> tuple:
    return tuple(np.asarray(s) if isinstance(s, list) else s for s in selection)


def replace_ellipsis(selection: Any, shape: tuple[int, ...]) -> tuple:
    """Expand one ``...`` into full slices, pad missing trailing dims with ``:``."""
    selection = ensure_tuple(selection)
    n_ellipsis = sum(1 for s in selection if s is Ellipsis)
    if n_ellipsis > 1:
        raise ArrayIndexError("an index can only have a single ellipsis ('...')")
    if n_ellipsis == 1:
        pos = next(i for i, s in enumerate(selection) if s is Ellipsis)
        n_items = len(selection) - 1
        fill = (slice(None),) * max(0, len(shape) - n_items)
        selection = selection[:pos] + fill + selection[pos + 1:]
    if len(selection) < len(shape):
        selection += (slice(None),) * (len(shape) - len(selection))
    if len(selection) > len(shape):
        raise ArrayIndexError(
            f"too many indices for array; expected {len(shape)}, got {len(selection)}")
    return selection


def pop_fields(selection: Any) -> tuple[Any, Any]:
    """Split field names (strings, structured dtypes) from a selection: (fields, rest)."""
    if isinstance(selection, str):
        return selection, ()
    if not isinstance(selection, tuple):
        return None, selection
    fields: Any = [f for f in selection if isinstance(f, str)]
    fields = fields[0] if len(fields) == 1 else fields
    rest = tuple(s for s in selection if not isinstance(s, str))
    return fields, (rest[0] if len(rest) == 1 else rest)


def is_pure_fancy_indexing(selection: Any, ndim: int) -> bool:
    if is_bool_array(selection):
        return True                                   # a mask
    if ndim == 1 and (is_integer_list(selection) or is_integer_array(selection)
                      or is_bool_list(selection)):
        return True
    no_slicing = (isinstance(selection, tuple) and len(selection) == ndim
                  and not any(isinstance(s, slice) or s is Ellipsis for s in selection))
    return (no_slicing
            and all(is_integer(s) or is_integer_list(s) or is_integer_array(s)
                    for s in selection)
            and any(is_integer_list(s) or is_integer_array(s) for s in selection))


def is_pure_orthogonal_indexing(selection: Any, ndim: int) -> bool:
    if not ndim:
        return False
    sel = ensure_tuple(selection)
    if len(sel) == ndim and all(is_int_or_bool_iterable(s) for s in sel):
        return True
    # zarr-python checks ``isinstance(s, int | slice)`` here: numpy integers do not count.
    return (len(sel) <= ndim
            and sum(is_int_or_bool_iterable(s) for s in sel) <= 1
            and all(is_int_or_bool_iterable(s) or isinstance(s, (int, slice)) for s in sel))


def classify_selection(selection: Any, shape: tuple[int, ...]) -> str:
    """Which path ``a[selection]`` takes: ``'vindex'``, ``'orthogonal'`` or ``'basic'``.

    Field names are popped first, as zarr-python does; the caller pops them itself with
    :func:`pop_fields` (and for ``'vindex'`` passes the selection without fields).
    """
    _, pure = pop_fields(selection)
    ndim = len(shape)
    if is_pure_fancy_indexing(pure, ndim):
        return "vindex"
    if is_pure_orthogonal_indexing(pure, ndim):
        return "orthogonal"
    return "basic"
