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
  (:func:`declared_size`, RFC 8878 section 3.1.1) and a value declaring more than the
  chunk can hold fails before anything is allocated (:class:`DecodedSizeError`);
  libzstd then decodes into a buffer of the declared size and fails on any frame that
  holds more than it declares. A frame without a content size (rare: streaming
  writers) is streamed by ``zstandard`` (``stream_reader().read(limit + 1)``,
  https://python-zstandard.readthedocs.io/en/latest/decompressor.html) when that is
  installed; without it (and only then) such a frame is inflated whole and checked
  after.
"""

from __future__ import annotations

from typing import Any

import numcodecs.zstd as _nc_zstd

from ..errors import CodecError, KvzarrError, MetadataError
from .base import BytesBytesCodec, ChunkArraySpec
from .bounds import compressed_bound, too_big
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


def unzstd(data: Any, max_size: int | None) -> bytes:
    """The content of the Zstandard frames in ``data``, at most ``max_size`` bytes
    (:class:`DecodedSizeError` past it)."""
    if _is_empty_frame(data):
        return b""  # numcodecs rejects the empty frames it writes itself
    declared = None if max_size is None else declared_size(data)
    if declared is not None and declared > max_size:
        raise too_big("zstd data", declared, max_size, declared=True)
    try:
        if declared is not None or max_size is None:
            out = _nc_zstd.decompress(data)
        else:
            out = _stream_bounded(data, max_size)
    except KvzarrError:
        raise
    except Exception as e:
        raise CodecError(f"corrupt zstd data: {e}") from e
    if max_size is not None and len(out) > max_size:
        raise too_big("zstd data", len(out), max_size)
    return out


def _stream_bounded(data: Any, max_size: int) -> bytes:
    """Frames without a content size, at most ``max_size`` bytes of them."""
    try:
        import zstandard
    except ImportError:     # no bounded streaming API at hand: inflate, then check
        return _nc_zstd.decompress(data)
    reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True)
    parts, size = [], 0
    while size <= max_size:          # read() may return less than asked: until the end
        part = reader.read(max_size + 1 - size)
        if not part:
            break
        parts.append(part)
        size += len(part)
    if size > max_size:
        raise too_big("zstd data", None, max_size)
    return b"".join(parts)


def declared_size(data: Any) -> int | None:
    """The sum of the ``Frame_Content_Size`` of every frame in ``data`` (RFC 8878 section
    3.1.1; skippable frames, section 3.1.2, hold none), or None when a frame does not
    declare it. Only headers are read: a frame's blocks are stepped over by their
    ``Block_Size`` (section 3.1.1.2). CodecError for data that is not frames."""
    view = memoryview(data).cast("B")
    n = view.nbytes
    pos = 0
    total = 0
    unknown = False
    while pos < n:
        if n - pos < 8:
            raise CodecError("truncated zstd frame header")
        magic = int.from_bytes(view[pos:pos + 4], "little")
        if magic & 0xFFFFFFF0 == _SKIPPABLE:
            pos += 8 + int.from_bytes(view[pos + 4:pos + 8], "little")
            continue
        if magic != _MAGIC_INT:
            raise CodecError("not a zstd frame (bad magic number)")
        descriptor = view[pos + 4]
        single_segment = descriptor >> 5 & 1
        fcs_size = (single_segment, 2, 4, 8)[descriptor >> 6]
        start = pos + 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
        if start + fcs_size > n:
            raise CodecError("truncated zstd frame header")
        if fcs_size:
            size = int.from_bytes(view[start:start + fcs_size], "little")
            total += size + 256 if fcs_size == 2 else size
        else:
            unknown = True
        pos = start + fcs_size
        while True:                      # step over the blocks
            if pos + 3 > n:
                raise CodecError("truncated zstd frame")
            header = int.from_bytes(view[pos:pos + 3], "little")
            block_type = header >> 1 & 3
            pos += 3 + (1 if block_type == 1 else header >> 3)
            if header & 1:
                break
        pos += 4 if descriptor & 4 else 0    # Content_Checksum
        if pos > n:
            raise CodecError("truncated zstd frame")
    return None if unknown else total


_SKIPPABLE = 0x184D2A50
_MAGIC_INT = 0xFD2FB528
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
