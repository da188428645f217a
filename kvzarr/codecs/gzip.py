"""The ``gzip`` codec (codecs/gzip, v1.0): bytes -> bytes, one RFC 1952 gzip member.

Configuration::

    {"name": "gzip", "configuration": {"level": 5}}

No aliases. ``level`` is an integer 0..9 (0 stores without compression).

Promises:

* Output is the member Python's ``gzip.GzipFile`` writes for in-memory data (which is
  what zarr-python's GzipCodec, through numcodecs, writes): the same header flags,
  deflate stream and trailer, except that the header's modification time is always 0
  instead of the current time, so equal chunks give equal bytes.
* Decoding accepts several concatenated members (RFC 1952 section 2.2), verifies each
  member's CRC-32 and length, and raises :class:`CodecError` on anything else:
  truncated data, trailing garbage, a bad header or checksum.
* Decoding is bounded (:mod:`.bounds`): zlib inflates at most the chunk's size (given by
  the pipeline) and :class:`DecodedSizeError` is raised past it, so a member that
  inflates to gigabytes costs no more than the chunk.
* zlib releases the GIL while it works; no threads are started here.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from ..errors import MetadataError
from .base import BytesBytesCodec, ChunkArraySpec
from .bounds import compressed_bound
from .decoders import gunzip
from .registry import register_codec

# magic, CM=deflate, FLG=0 (no name), MTIME=0; XFL and OS follow
_HEADER_START = b"\x1f\x8b\x08\x00\x00\x00\x00\x00"
_OS_UNKNOWN = b"\xff"


class GzipCodec(BytesBytesCodec):
    """gzip compression with zlib."""

    name = "gzip"

    def __init__(self, level: int = 5) -> None:
        self.level = _parse_level(level)
        # XFL as GzipFile writes it: 2 = best compression, 4 = fastest
        xfl = b"\x02" if self.level == 9 else b"\x04" if self.level == 1 else b"\x00"
        self._header = _HEADER_START + xfl + _OS_UNKNOWN

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "GzipCodec":
        extra = set(configuration) - {"level"}
        if extra:
            raise MetadataError(f"unknown gzip configuration keys {sorted(extra)}",
                                field=f"gzip.{sorted(extra)[0]}")
        if "level" not in configuration:
            raise MetadataError("gzip needs 'level'", field="gzip.level")
        return cls(configuration["level"])

    def to_json(self) -> dict[str, Any]:
        return {"name": "gzip", "configuration": {"level": self.level}}

    def encode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        view = memoryview(data).cast("B")
        # the same compressor settings and call sequence as gzip.GzipFile, so the
        # deflate stream is byte-identical to numcodecs' GZip
        compressor = zlib.compressobj(self.level, zlib.DEFLATED, -zlib.MAX_WBITS,
                                      zlib.DEF_MEM_LEVEL, 0)
        body = compressor.compress(view)
        tail = compressor.flush()
        trailer = struct.pack("<II", zlib.crc32(view), view.nbytes & 0xFFFFFFFF)
        return b"".join((self._header, body, tail, trailer))

    def decode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        return self.decode_bounded(data, spec, None)

    def decode_bounded(self, data: bytes, spec: ChunkArraySpec,
                       max_size: int | None) -> bytes:
        return gunzip(data, max_size)

    def max_encoded_size(self, size: int | None) -> int | None:
        return None if size is None else compressed_bound(size)


def _parse_level(level: Any) -> int:
    if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= 9:
        raise MetadataError(f"gzip level must be an integer 0..9, got {level!r}",
                            field="gzip.level")
    return level


register_codec(GzipCodec)
