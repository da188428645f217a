"""``vlen-utf8`` and ``vlen-bytes``: array -> bytes codecs for variable-length elements
(zarr-extensions ``codecs/vlen-utf8``, ``codecs/vlen-bytes``).

Encoding of one chunk: a ``u32le`` element count, then for each element in C order a
``u32le`` byte length followed by the bytes (UTF-8 for ``vlen-utf8``). Example::

    ["a", "", "héllo"] -> 03000000 01000000 61 00000000 06000000 68c3a96c6c6f

Configuration is empty; written as ``{"name": "vlen-utf8", "configuration": {}}`` like
zarr-python. ``vlen-utf8`` serves only the ``string`` data type (decoding to numpy
``StringDType``), ``vlen-bytes`` only ``bytes`` (decoding to an object array of ``bytes``).

Promises: the bytes equal numcodecs ``VLenUTF8`` / ``VLenBytes`` output; a value that is
truncated, has bytes after its last element, holds a count other than the chunk's element
count, or is not UTF-8 raises CodecError; an element of the wrong type raises CodecError
on encode.
"""

from __future__ import annotations

import math
import struct
from typing import Any, ClassVar

import numpy as np

from ..errors import CodecError, MetadataError
from ..metadata.dtypes.strings import STRING_DTYPE
from .base import ArrayBytesCodec, ChunkArraySpec
from .registry import register_codec

_U32 = struct.Struct("<I")
_MAX_LENGTH = 2**32 - 1


def _frame(items: list[bytes]) -> bytes:
    pack = _U32.pack
    try:
        return pack(len(items)) + b"".join([pack(len(b)) + b for b in items])
    except struct.error:
        raise CodecError(f"an element is longer than {_MAX_LENGTH} bytes") from None


def _unframe(data: Any, count: int) -> list[bytes]:
    """The ``count`` element payloads of ``data``; CodecError on any framing fault."""
    if not isinstance(data, bytes):
        data = bytes(data)
    size = len(data)
    if size < 4:
        raise CodecError(f"vlen value of {size} bytes is shorter than its 4-byte header")
    (n,) = _U32.unpack_from(data, 0)
    if n != count:
        raise CodecError(f"vlen value holds {n} elements, the chunk has {count}")
    if 4 + 4 * n > size:  # before allocating n items for a corrupt count
        raise CodecError(f"vlen value of {size} bytes is too short for {n} elements")
    unpack = _U32.unpack_from
    items: list[bytes] = [b""] * n
    pos = 4
    try:
        for i in range(n):
            (length,) = unpack(data, pos)
            pos += 4
            end = pos + length
            if end > size:
                raise CodecError(f"vlen element {i} of {length} bytes runs past the end of "
                                 f"the value ({size} bytes)")
            items[i] = data[pos:end]
            pos = end
    except struct.error:
        raise CodecError(f"vlen value truncated in the length of element {i}") from None
    if pos != size:
        raise CodecError(f"vlen value has {size - pos} bytes after its last element")
    return items


class _VlenCodec(ArrayBytesCodec):
    #: the only data type this codec serves
    data_type_name: ClassVar[str]

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "_VlenCodec":
        if configuration:
            raise MetadataError(f"{cls.name} takes no configuration, got "
                                f"{sorted(configuration)}", field="codecs")
        return cls()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {}}

    def validate(self, spec: ChunkArraySpec) -> None:
        if spec.data_type.name != self.data_type_name:
            raise MetadataError(f"codec {self.name} serves only the {self.data_type_name} "
                                f"data type, not {spec.data_type.to_json()!r}", field="codecs")

    def _elements(self, chunk: np.ndarray, spec: ChunkArraySpec) -> list[Any]:
        chunk = np.asarray(chunk)
        if chunk.shape != tuple(spec.shape):
            raise CodecError(f"chunk of shape {chunk.shape} given for codec shape "
                             f"{tuple(spec.shape)}")
        return chunk.ravel(order="C").tolist()

    def _count(self, spec: ChunkArraySpec) -> int:
        return math.prod(spec.shape)

    def max_encoded_size(self, spec: ChunkArraySpec) -> int | None:
        # what the format allows: the count, then a u32 length and at most 2**32 - 1
        # bytes per element. Elements have no size in the metadata, so this bounds
        # decoders only loosely (:mod:`.bounds`).
        return 4 + self._count(spec) * (4 + _MAX_LENGTH)


class VlenUtf8Codec(_VlenCodec):
    name = "vlen-utf8"
    data_type_name = "string"

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes:
        elements = self._elements(chunk, spec)
        try:
            items = [s.encode("utf-8") for s in elements]
        except AttributeError:
            bad = next(s for s in elements if not isinstance(s, str))
            raise CodecError(f"vlen-utf8 element {bad!r} is not a string") from None
        except UnicodeEncodeError as e:
            raise CodecError(f"vlen-utf8 element is not valid Unicode: {e}") from None
        if not all(type(b) is bytes for b in items):  # something str-like but not str
            bad = next(s for s in elements if not isinstance(s, str))
            raise CodecError(f"vlen-utf8 element {bad!r} is not a string")
        return _frame(items)

    def decode(self, data: bytes, spec: ChunkArraySpec) -> np.ndarray:
        items = _unframe(data, self._count(spec))
        try:
            text = [str(b, "utf-8") for b in items]
        except UnicodeDecodeError as e:
            raise CodecError(f"vlen-utf8 element is not valid UTF-8: {e}") from None
        return np.array(text, dtype=STRING_DTYPE).reshape(spec.shape)


class VlenBytesCodec(_VlenCodec):
    name = "vlen-bytes"
    data_type_name = "bytes"

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes:
        items = self._elements(chunk, spec)
        if not all(type(b) is bytes for b in items):
            items = [_as_bytes(b) for b in items]
        return _frame(items)

    def decode(self, data: bytes, spec: ChunkArraySpec) -> np.ndarray:
        items = _unframe(data, self._count(spec))
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(spec.shape)


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):  # includes np.bytes_
        return bytes(value)
    if isinstance(value, memoryview):
        return value.tobytes()
    raise CodecError(f"vlen-bytes element {value!r} is not bytes")


register_codec(VlenUtf8Codec)
register_codec(VlenBytesCodec)

__all__ = ["VlenUtf8Codec", "VlenBytesCodec"]
