"""The ``bytes`` codec (codecs/bytes, v1.0): array -> bytes, fixed-size elements in C order.

Configuration::

    {"name": "bytes", "configuration": {"endian": "little"}}   # multi-byte types
    {"name": "bytes"}                                          # single-byte types

Alias read on input: ``endian`` (the codec's name before spec PR #263).

Promises:

* ``endian`` is ``"little"`` or ``"big"``; it is required when the data type has an
  endianness and more than one byte per element, and dropped by :meth:`evolve` for types
  without one, so the written metadata matches what zarr-python 3 writes.
* Encoding is the chunk as its numpy dtype in the stated byte order, C order. Types with
  several bytes but no ``endian`` (structured types in zarr-python's model) are written
  little-endian, which is what zarr-python writes on every little-endian host.
* Decoding checks the length (``prod(shape) * itemsize``, else :class:`CodecError`) and
  returns a native-endian array of ``spec.shape``. It copies only to swap bytes: the
  result may be a read-only view of the input buffer.
* Variable-length data types are not for this codec (:class:`MetadataError`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..errors import CodecError, MetadataError
from ..metadata.dtypes import DataType
from .base import ArrayBytesCodec, ChunkArraySpec
from .registry import register_codec

_ENDIANS = ("little", "big")
_ORDER_CHAR = {"little": "<", "big": ">"}


class BytesCodec(ArrayBytesCodec):
    """Fixed-size elements as raw bytes in lexicographic (C) order."""

    name = "bytes"

    def __init__(self, endian: str | None = "little") -> None:
        if endian is not None and endian not in _ENDIANS:
            raise MetadataError(f"bytes endian must be 'little' or 'big', got {endian!r}",
                                field="bytes.endian")
        self.endian = endian

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "BytesCodec":
        extra = set(configuration) - {"endian"}
        if extra:
            raise MetadataError(f"unknown bytes configuration keys {sorted(extra)}",
                                field=f"bytes.{sorted(extra)[0]}")
        endian = configuration.get("endian")
        if endian is not None and endian not in _ENDIANS:
            raise MetadataError(f"bytes endian must be 'little' or 'big', got {endian!r}",
                                field="bytes.endian")
        return cls(endian)

    def to_json(self) -> dict[str, Any]:
        if self.endian is None:
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def evolve(self, spec: ChunkArraySpec) -> "BytesCodec":
        dt = spec.data_type
        if self.endian is not None and dt.itemsize is not None and not _needs_endian(dt):
            return BytesCodec(None)
        if self.endian is None and _needs_endian(dt) and dt.implicit_little_endian:
            return BytesCodec("little")  # say explicitly what the legacy form meant
        return self

    def validate(self, spec: ChunkArraySpec) -> None:
        dt = spec.data_type
        if dt.itemsize is None:
            raise MetadataError(
                f"the bytes codec cannot encode the variable-length data type {dt.name!r}",
                field="codecs", hint="use vlen-utf8 or vlen-bytes")
        if self.endian is None and _needs_endian(dt) and not dt.implicit_little_endian:
            raise MetadataError(
                f"the bytes codec needs 'endian' for the multi-byte data type {dt.name!r}",
                field="bytes.endian", hint='add {"endian": "little"}')

    def stored_dtype(self, dt: DataType) -> np.dtype:
        """The numpy dtype of the bytes this codec stores for elements of ``dt``."""
        return _stored_numpy_dtype(dt.numpy_dtype, self.endian or "little")

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes:
        chunk = np.asarray(chunk)
        if chunk.shape != spec.shape:
            raise CodecError(f"bytes codec got a chunk of shape {chunk.shape}, "
                             f"expected {spec.shape}")
        stored = self.stored_dtype(spec.data_type)
        if chunk.dtype != stored:
            chunk = chunk.astype(stored, order="C")
        return chunk.tobytes(order="C")

    def decode(self, data: bytes, spec: ChunkArraySpec) -> np.ndarray:
        dt = spec.data_type
        if dt.itemsize is None:
            raise CodecError(f"the bytes codec cannot decode the variable-length data type "
                             f"{dt.name!r}")
        expected = math.prod(spec.shape) * dt.itemsize
        view = memoryview(data)
        if view.nbytes != expected:
            raise CodecError(f"chunk has {view.nbytes} bytes, expected {expected} "
                             f"for shape {spec.shape} of {dt.name} (truncated or corrupt)")
        stored = self.stored_dtype(dt)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
        arr = np.frombuffer(view, dtype=stored).reshape(spec.shape)
        if stored != dt.numpy_dtype:
            arr = arr.astype(dt.numpy_dtype)
        return arr

    def encoded_size(self, spec: ChunkArraySpec) -> int | None:
        if spec.data_type.itemsize is None:
            return None
        return math.prod(spec.shape) * spec.data_type.itemsize


def _needs_endian(dt: DataType) -> bool:
    return bool(dt.has_endianness) and dt.itemsize is not None and dt.itemsize > 1


register_codec(BytesCodec, "endian")


@functools.lru_cache(maxsize=256)
def _stored_numpy_dtype(npd: np.dtype, endian: str) -> np.dtype:
    """The dtype of the stored bytes (cached: newbyteorder costs more than a chunk's copy)."""
    if npd.itemsize <= 1:
        return npd
    # newbyteorder is a no-op for byte-order-free dtypes (V, S, bool) and applies to every
    # field of a structured dtype
    return npd.newbyteorder(_ORDER_CHAR[endian])
