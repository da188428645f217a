"""Per-vertex attributes: one cell array per name, each cell holding the rows of the
chunk's vertices in the same order.

Numbers are stored raw, ``(N,)`` or ``(N, C)`` (``row_shape`` ``[]`` or ``[C]``,
``channel_names`` ``ch0 ..``). Text and other categories are stored dictionary-encoded
as zarr-vectors does it: the sorted distinct values become the array attribute
``categories`` and each row the index of its value, in the smallest unsigned integer
type that holds them; with missing values (``None``) the type is signed and ``-1``
(``_FillValue``) marks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MetadataError, VectorDataError


@dataclass
class Column:
    """An attribute ready to store: numeric rows and the array attributes to add."""

    name: str
    data: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    def array_attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {"zv_array": "attribute", "name": self.name,
                                 "dtype": self.data.dtype.name}
        if self.data.ndim == 2:
            attrs["channel_names"] = [f"ch{i}" for i in range(self.data.shape[1])]
            attrs["row_shape"] = [int(self.data.shape[1])]
        else:
            attrs["row_shape"] = []
        attrs.update(self.extra)
        return attrs


def prepare(values: dict[str, Any] | None, n: int) -> list[Column]:
    columns = []
    for name, value in (values or {}).items():
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise VectorDataError(f"attribute name {name!r} is not a valid node name",
                                  field="vertex_attributes")
        data = np.asarray(value)
        if data.ndim == 0 or data.shape[0] != n or data.ndim > 2:
            raise VectorDataError(f"vertex attribute {name!r} must have shape ({n},) or "
                                  f"({n}, C), got {data.shape}", field="vertex_attributes")
        if data.dtype.kind in "USO":
            columns.append(_categorical(name, data))
        elif data.dtype.kind in "biuf":
            columns.append(Column(name, data.astype(data.dtype.newbyteorder("<"))))
        else:
            raise VectorDataError(f"vertex attribute {name!r} has type {data.dtype}, "
                                  f"neither numbers nor categories", field="vertex_attributes")
    return columns


def _categorical(name: str, data: np.ndarray) -> Column:
    if data.ndim != 1:
        raise VectorDataError(f"categorical attribute {name!r} must be 1-D, got "
                              f"{data.shape}", field="vertex_attributes")
    missing = np.array([v is None for v in data], dtype=bool) if data.dtype.kind == "O" \
        else np.zeros(len(data), dtype=bool)
    present = [_plain(v) for v in data[~missing]]
    try:
        categories, inverse = np.unique(np.array(present), return_inverse=True) if present \
            else (np.array([]), np.zeros(0, dtype=np.int64))
    except TypeError:
        raise VectorDataError(f"the values of attribute {name!r} cannot be ordered "
                              f"(mixed types)", field="vertex_attributes") from None
    k = len(categories)
    has_fill = bool(missing.any())
    if has_fill:
        dtype = np.int8 if k <= 127 else np.int16 if k <= 32767 else np.int32
    else:
        dtype = np.uint8 if k <= 255 else np.uint16 if k <= 65535 else np.uint32
    codes = np.empty(len(data), dtype=np.dtype(dtype).newbyteorder("<"))
    codes[~missing] = inverse.reshape(-1)
    extra: dict[str, Any] = {"encoding": "dictionary",
                             "categories": [_plain(c) for c in categories],
                             "ordered": False}
    if has_fill:
        codes[missing] = -1
        extra["_FillValue"] = -1
    return Column(name, codes, extra)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class StoredLayout:
    """How one stored attribute's cells read back."""

    dtype: np.dtype
    row_shape: tuple[int, ...]
    categories: list[Any] | None
    fill: int | None

    @classmethod
    def from_attributes(cls, attrs: dict[str, Any], where: str) -> "StoredLayout":
        try:
            dtype = np.dtype(attrs.get("dtype", "float32")).newbyteorder("<")
        except TypeError:
            raise MetadataError(f"attribute dtype {attrs.get('dtype')!r} is not a data type",
                                key=where, field="dtype") from None
        if attrs.get("row_shape") is not None:
            row_shape = tuple(int(v) for v in attrs["row_shape"])
        elif attrs.get("channel_names"):
            row_shape = (len(attrs["channel_names"]),)
        else:
            row_shape = ()
        categories = None
        if attrs.get("encoding") == "dictionary":
            categories = attrs.get("categories")
            if not isinstance(categories, list):
                raise MetadataError("a dictionary-encoded attribute needs categories",
                                    key=where, field="categories")
        return cls(dtype, row_shape, categories, attrs.get("_FillValue"))

    def implied_channels(self, payload: Any, n_rows: int) -> int | None:
        """The channel count a cell implies when its document says scalar rows
        (``row_shape`` ``[]``, no ``channel_names``) but it holds a whole number ``k > 1``
        of values per vertex: zarr-vectors 0.9.2's polyline, mesh and graph writers
        store ``(N, k)`` attributes so. None when the document's rows fit."""
        if self.row_shape or not n_rows or self.categories is not None:
            return None
        per_row, left = divmod(len(payload), n_rows * self.dtype.itemsize)
        return per_row if per_row > 1 and not left else None

    def rows(self, payload: Any, where: str, n_rows: int | None = None) -> np.ndarray:
        """The cell's rows; with ``n_rows``, a cell of k values per vertex under a scalar
        document reads as (n_rows, k) (see :meth:`implied_channels`)."""
        if n_rows is not None:
            k = self.implied_channels(payload, n_rows)
            if k is not None:
                return np.frombuffer(payload, self.dtype).reshape(n_rows, k)
        width = int(np.prod(self.row_shape)) * self.dtype.itemsize if self.row_shape else \
            self.dtype.itemsize
        if len(payload) % width:
            raise MetadataError(f"an attribute cell of {len(payload)} bytes is not whole "
                                f"rows of {width} bytes", key=where)
        return np.frombuffer(payload, self.dtype).reshape(-1, *self.row_shape)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Category values for dictionary codes (``None`` where missing); numbers as is."""
        if self.categories is None:
            return codes
        cats = np.asarray(self.categories)
        valid = codes != self.fill if self.fill is not None else np.ones(len(codes), bool)
        if np.any(codes[valid] < 0) or np.any(codes[valid] >= len(cats)):
            raise MetadataError("a dictionary code is outside the categories")
        if valid.all():
            return cats[codes.astype(np.int64)]
        out = np.empty(len(codes), dtype=object)
        out[~valid] = None
        out[valid] = cats[codes[valid].astype(np.int64)]
        return out
