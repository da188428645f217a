"""Arrays of Python objects (numpy ``object``), as Zarr v2 stores them with an object codec
other than vlen-utf8 / vlen-bytes (numcodecs ``json2``, ``msgpack2``, ``pickle``,
``vlen-array``; Zarr v2 spec, "Data type encoding", and zarr-python 2's object arrays).

Zarr v3 has no such data type, so this one is not registered: it is never read from a
``zarr.json``, only built by :mod:`kvzarr.metadata.v2`, and its :meth:`to_json` names it
for messages and comparisons only. The fill value is any JSON value; ``null`` (Python
``None``) is what zarr-python 2 reads for a missing chunk of such an array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import DataType


class ObjectType(DataType):
    """Python objects, serialised by the numcodecs object codec ``codec_id``."""

    numpy_dtype = np.dtype(object)
    itemsize = None
    has_endianness = False

    def __init__(self, codec_id: str) -> None:
        self.codec_id = codec_id
        self.name = f"object[{codec_id}]"

    def to_json(self) -> dict[str, Any]:
        return {"name": "object", "configuration": {"object_codec": self.codec_id}}

    def fill_from_json(self, value: Any) -> Any:
        return value

    def fill_to_json(self, value: Any) -> Any:
        return value

    def coerce_fill(self, value: Any) -> Any:
        return value

    def default_fill(self) -> Any:
        return None

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        # elements may be arrays (vlen-array), for which == is not a truth value: only a
        # chunk of the very fill object (None) counts as empty
        return fill is None and all(v is None for v in chunk.flat)


__all__ = ["ObjectType"]
