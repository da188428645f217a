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
* Decoding also reads frames without a content size (streaming writers) and several
  concatenated frames; corrupt or truncated input raises :class:`CodecError`.
* Decoding is bounded (:mod:`.bounds`): the frame headers are read first
  (:func:`.decoders.declared_size`, RFC 8878 section 3.1.1) and a value declaring more than the
  chunk can hold fails before anything is allocated (:class:`DecodedSizeError`);
  libzstd then decodes into a buffer of the declared size and fails on any frame that
  holds more than it declares. A frame without a content size (rare: streaming
  writers) is streamed by ``zstandard`` (``stream_reader().read(limit + 1)``,
  https://python-zstandard.readthedocs.io/en/latest/decompressor.html), so it too
  stops at the bound.
"""

from __future__ import annotations

from typing import Any

import numcodecs.zstd as _nc_zstd

from ..errors import CodecError, MetadataError
from .base import BytesBytesCodec, ChunkArraySpec
from .bounds import compressed_bound
from .decoders import unzstd
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
        return unzstd(data, None)

    def decode_bounded(self, data: bytes, spec: ChunkArraySpec,
                       max_size: int | None) -> bytes:
        return unzstd(data, max_size)

    def max_encoded_size(self, size: int | None) -> int | None:
        return None if size is None else compressed_bound(size)


register_codec(ZstdCodec)
