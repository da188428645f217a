"""Bounded decoders of the compressed formats kvzarr reads (gzip, Zstandard, Blosc 1),
shared by their codecs and the ``numcodecs.*`` adapter; each stops at ``max_size``
decoded bytes (:mod:`.bounds`). This module registers nothing and knows no codec class,
so both sides import it without a cycle.
"""

from __future__ import annotations

from typing import Any

import numcodecs.blosc as _nc_blosc
import numcodecs.zstd as _nc_zstd
from zlib_ng import zlib_ng

from ..errors import CodecError, KvzarrError
from .bounds import clamp, inflate, too_big

#: Blosc 1 header: version, versionlz, flags, typesize, nbytes, blocksize, cbytes
_BLOSC_HEADER_SIZE = 16


def gunzip(data: Any, max_size: int | None) -> bytes:
    """The bytes of the gzip members in ``data``, at most ``max_size`` of them
    (:class:`DecodedSizeError` past it: zlib-ng stops there, nothing more is inflated).
    zlib-ng inflates what any deflate wrote, about 1.2 times as fast as classic zlib."""
    view = memoryview(data).cast("B")
    if view.nbytes == 0:
        raise CodecError("empty gzip data")
    try:
        # the common case, one member and nothing after it, without inflate()'s loop
        budget = clamp(max_size)
        d = _gzip_stream()
        out = d.decompress(view, budget + 1)
        if d.eof and not d.unused_data and len(out) <= budget:
            return out
        return inflate(_gzip_stream, view, max_size, "gzip data", True)
    except zlib_ng.error as e:
        raise CodecError(f"corrupt gzip data: {e}") from e


def _gzip_stream() -> Any:
    return zlib_ng.decompressobj(16 + zlib_ng.MAX_WBITS)


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
    import zstandard    # a dependency; imported on the rare path that needs it
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


def unblosc(data: Any, max_size: int | None) -> bytes:
    """The content of one Blosc 1 frame, at most ``max_size`` bytes."""
    view = memoryview(data).cast("B")
    # blosc trusts the header's compressed size and would read past the end of a
    # truncated buffer: check it against the real length first
    if view.nbytes < _BLOSC_HEADER_SIZE:
        raise CodecError(f"blosc data has {view.nbytes} bytes, shorter than its header")
    cbytes = int.from_bytes(view[12:16], "little")
    if cbytes != view.nbytes:
        raise CodecError(f"blosc header gives {cbytes} compressed bytes, the data has "
                         f"{view.nbytes} (truncated or corrupt)")
    nbytes = int.from_bytes(view[4:8], "little")
    if max_size is not None and nbytes > max_size:
        raise too_big("blosc data", nbytes, max_size, declared=True)
    if nbytes == 0:
        return b""  # numcodecs fails on the empty buffers it writes itself
    try:
        return _nc_blosc.decompress(view)
    except Exception as e:
        raise CodecError(f"corrupt blosc data: {e}") from e
