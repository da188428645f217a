"""The ``zstd`` codec (zarr-extensions codecs/zstd): bytes -> bytes, one Zstandard frame
(RFC 8878).

Configuration::

    {"name": "zstd", "configuration": {"level": 0, "checksum": false}}

No aliases. ``level`` is an integer in [-131072, 22] (0 = the library default);
``checksum`` an optional boolean (absent = false).

Promises:

* ``to_json`` always writes ``checksum``, as zarr-python 3 does (the extension's README
  says to omit it when false; readers accept both, so we match zarr-python's bytes).
* Encoding goes through numcodecs' Zstd with the same parameters as zarr-python, so the
  frames are identical (content size recorded in the header).
* Decoding also reads frames without a content size (streaming writers); corrupt or
  truncated input raises :class:`CodecError`.
"""

from __future__ import annotations

from typing import Any

import numcodecs.zstd as _nc_zstd

from ..errors import CodecError, MetadataError
from .base import BytesBytesCodec, ChunkArraySpec
from .registry import register_codec

MIN_LEVEL = -131072
MAX_LEVEL = 22


class ZstdCodec(BytesBytesCodec):
    """Zstandard compression."""

    name = "zstd"

    def __init__(self, level: int = 0, checksum: bool = False) -> None:
        if (not isinstance(level, int) or isinstance(level, bool)
                or not MIN_LEVEL <= level <= MAX_LEVEL):
            raise MetadataError(f"zstd level must be an integer {MIN_LEVEL}..{MAX_LEVEL}, "
                                f"got {level!r}", field="zstd.level")
        if not isinstance(checksum, bool):
            raise MetadataError(f"zstd checksum must be a boolean, got {checksum!r}",
                                field="zstd.checksum")
        self.level = level
        self.checksum = checksum

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "ZstdCodec":
        extra = set(configuration) - {"level", "checksum"}
        if extra:
            raise MetadataError(f"unknown zstd configuration keys {sorted(extra)}",
                                field=f"zstd.{sorted(extra)[0]}")
        if "level" not in configuration:
            raise MetadataError("zstd needs 'level'", field="zstd.level")
        return cls(configuration["level"], configuration.get("checksum", False))

    def to_json(self) -> dict[str, Any]:
        return {"name": "zstd", "configuration": {"level": self.level,
                                                  "checksum": self.checksum}}

    def encode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        try:
            return _nc_zstd.compress(data, self.level, self.checksum)
        except Exception as e:
            raise CodecError(f"zstd could not compress the chunk: {e}") from e

    def decode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        if _is_empty_frame(data):
            return b""  # numcodecs rejects the empty frames it writes itself
        try:
            return _nc_zstd.decompress(data)
        except Exception as e:
            raise CodecError(f"corrupt zstd data: {e}") from e


_MAGIC = b"\x28\xb5\x2f\xfd"
_LAST_EMPTY_RAW_BLOCK = b"\x01\x00\x00"
_EMPTY_CHECKSUM = b"\x99\xe9\xd8\x51"  # low 32 bits of XXH64 of no bytes, little-endian


def _is_empty_frame(data: bytes) -> bool:
    """A complete frame of zero content bytes (RFC 8878 section 3.1.1): header with
    Frame_Content_Size 0, one empty last block, and the checksum if flagged."""
    view = memoryview(data).cast("B")
    if view.nbytes < 6 or view[:4] != _MAGIC:
        return False
    descriptor = view[4]
    single_segment = descriptor >> 5 & 1
    fcs_size = (single_segment, 2, 4, 8)[descriptor >> 6]
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    if not fcs_size or fcs_size == 2 or view.nbytes < start + fcs_size:
        return False  # unknown size, or the 2-byte form (which means 256 or more)
    if int.from_bytes(view[start:start + fcs_size], "little") != 0:
        return False
    rest = view[start + fcs_size:]
    return rest == _LAST_EMPTY_RAW_BLOCK + (_EMPTY_CHECKSUM if descriptor & 4 else b"")


register_codec(ZstdCodec)
