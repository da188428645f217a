"""The ``crc32c`` codec (codecs/crc32c, v1.0): bytes -> bytes, appends a CRC-32C checksum.

Configuration::

    {"name": "crc32c"}

No aliases; no configuration (an empty ``configuration`` object is accepted on read and
not written, as zarr-python 3 writes it).

Promises:

* Encoding appends the CRC-32C (Castagnoli, RFC 3720) of the input as a little-endian
  u32; the encoded size is always the input size + 4.
* Decoding verifies it: a mismatch raises :class:`ChecksumMismatchError`, input shorter
  than 4 bytes :class:`CodecError`. The payload is returned as a slice of the input
  (no copy when the input is a memoryview).
"""

from __future__ import annotations

from typing import Any

import crc32c as _crc32c

from ..errors import ChecksumMismatchError, CodecError, MetadataError
from .base import BytesBytesCodec, ChunkArraySpec
from .bounds import too_big
from .registry import register_codec


class Crc32cCodec(BytesBytesCodec):
    """CRC-32C checksum appended to the bytes."""

    name = "crc32c"

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "Crc32cCodec":
        if configuration:
            raise MetadataError(f"crc32c takes no configuration, got {sorted(configuration)}",
                                field=f"crc32c.{sorted(configuration)[0]}")
        return cls()

    def to_json(self) -> dict[str, Any]:
        return {"name": "crc32c"}

    def encode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        view = memoryview(data).cast("B")
        checksum = _crc32c.crc32c(view).to_bytes(4, "little")
        return b"".join((view, checksum))

    def decode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        view = memoryview(data).cast("B")
        if view.nbytes < 4:
            raise CodecError(f"crc32c data has {view.nbytes} bytes, fewer than the 4 of "
                             f"its checksum")
        computed = _crc32c.crc32c(view[:-4])
        stored = int.from_bytes(view[-4:], "little")
        if computed != stored:
            raise ChecksumMismatchError(
                f"crc32c mismatch: stored {stored:08x}, computed {computed:08x}")
        # bytes in, bytes out (one copy); any other buffer gets a view
        return data[:-4] if isinstance(data, (bytes, bytearray)) else view[:-4]

    def decode_bounded(self, data: bytes, spec: ChunkArraySpec,
                       max_size: int | None) -> bytes:
        # the payload is a slice of the input: check its size before hashing it all
        if max_size is not None:
            size = (len(data) if type(data) is bytes else memoryview(data).nbytes) - 4
            if size > max_size:
                raise too_big("crc32c data", size, max_size)
        return self.decode(data, spec)

    def encoded_size(self, size: int, spec: ChunkArraySpec) -> int | None:
        return size + 4

    def max_encoded_size(self, size: int | None) -> int | None:
        return None if size is None else size + 4


register_codec(Crc32cCodec)
