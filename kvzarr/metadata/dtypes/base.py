"""The data type contract (core spec "Data types",
https://zarr-specs.readthedocs.io/en/latest/v3/data-types/index.html).

A :class:`DataType` ties a Zarr data type name to the numpy dtype used in memory and to
the JSON encoding of its fill value. The ``bytes`` codec uses ``itemsize`` and
``has_endianness``; variable-length types (``itemsize is None``) need a vlen codec.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np


class DataType(ABC):
    """One Zarr data type. Instances are immutable and compare by value."""

    #: the registered name, e.g. ``"float32"``, ``"numpy.datetime64"``
    name: str
    #: native-endian numpy dtype of decoded chunks
    numpy_dtype: np.dtype
    #: bytes per element in the ``bytes`` codec encoding; None for variable-length types
    itemsize: int | None
    #: the ``bytes`` codec must state an ``endian`` for this type
    has_endianness: bool
    #: read from a legacy spelling whose ``bytes`` codec may omit ``endian``, meaning
    #: little-endian (legacy ``structured``: zarr-extensions ``data-types/structured``,
    #: "Endianness handling")
    implicit_little_endian: bool = False

    @property
    def is_variable_length(self) -> bool:
        return self.itemsize is None

    @abstractmethod
    def to_json(self) -> str | dict[str, Any]:
        """The ``data_type`` member: a bare name for core types, a full object otherwise."""

    @abstractmethod
    def fill_from_json(self, value: Any) -> Any:
        """Decode the ``fill_value`` member; raises MetadataError when it does not fit."""

    @abstractmethod
    def fill_to_json(self, value: Any) -> Any:
        """Encode a fill value so that :meth:`fill_from_json` gives it back bit-exactly."""

    @abstractmethod
    def coerce_fill(self, value: Any) -> Any:
        """A fill value given by a user (Python or numpy scalar, None = default)."""

    @abstractmethod
    def default_fill(self) -> Any:
        """The fill value used when none is given (zero, false, empty)."""

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        """True if every element of ``chunk`` equals ``fill``: such a chunk is not stored.
        Never true for a value that would read back differently."""
        return bool(np.all(chunk == fill))

    def chunk_is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        """:meth:`is_fill`, answered from the first element alone when that one differs
        (as it does in most chunks written), without a pass over the whole chunk."""
        if chunk.size > 1 and not self.is_fill(chunk[(slice(0, 1),) * chunk.ndim], fill):
            return False
        return self.is_fill(chunk, fill)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataType) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        import json
        return hash(json.dumps(self.to_json(), sort_keys=True))

    def __repr__(self) -> str:
        return f"DataType({self.to_json()!r})"
