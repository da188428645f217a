"""Decompression bombs, built cheaply: small values that inflate to gigabytes.

Nothing here inflates them (that is what the decoders must not do): each is built from a
repeated piece whose output is known.

* :func:`gzip_bomb`: ONE gzip member whose deflate stream is the same flushed segment
  (1 MiB of zeros after ``Z_FULL_FLUSH``, which resets the compressor, so every segment
  is the same bytes) repeated; about 1 KiB of input per MiB of output. The trailer's
  check value is exact up to 64 MiB; past that it is not computed (hashing gigabytes
  would cost the test seconds): a decoder that inflated everything would only find out
  at the end, after the work and memory the bound must prevent.
* :func:`zstd_bomb`: ONE Zstandard frame of RLE blocks (RFC 8878 section 3.1.1.2: a
  block of type 1 repeats one byte ``Block_Size`` times, 4 bytes for 128 KiB), with
  (or without) ``Frame_Content_Size``: 3 GiB in 98 KB, the issue's example.
* :func:`blosc_bomb`: a Blosc 1 header declaring ``nbytes`` far past the chunk.
"""

from __future__ import annotations

import struct
import zlib

MiB = 1 << 20
GiB = 1 << 30

_ZEROS = bytes(MiB)
#: bombs up to this size get an exact check value (CRC-32, Adler-32)
_CHECKED = 64 * MiB


def _deflate_segments() -> tuple[bytes, bytes, bytes]:
    """(first segment, repeated segment, final segment) of a raw deflate stream of
    zeros, 1 MiB each."""
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = c.compress(_ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    second = c.compress(_ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    third = c.compress(_ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    assert second == third, "a full flush resets deflate: segments must repeat"
    last = c.compress(_ZEROS) + c.flush(zlib.Z_FINISH)
    return first, second, last


def gzip_bomb(total: int = 3 * GiB) -> bytes:
    """One gzip member inflating to ``total`` zero bytes (a multiple of 1 MiB, >= 3 MiB)."""
    n = total // MiB
    first, middle, last = _deflate_segments()
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    crc = zlib.crc32(bytes(total)) if total <= _CHECKED else 0
    trailer = struct.pack("<II", crc, total & 0xFFFFFFFF)
    return b"".join([header, first, middle * (n - 2), last, trailer])


def zlib_bomb(total: int = 256 * MiB) -> bytes:
    """One zlib stream (RFC 1950) inflating to ``total`` zero bytes."""
    n = total // MiB
    first, middle, last = _deflate_segments()
    adler = zlib.adler32(bytes(total)) if total <= _CHECKED else 0
    return b"".join([b"\x78\x01", first, middle * (n - 2), last, struct.pack(">I", adler)])


_RLE_BLOCK = 128 * 1024   # Block_Maximum_Size


def zstd_bomb(total: int = 3 * GiB, content_size: bool = True) -> bytes:
    """One Zstandard frame of zero bytes, ``total`` (a multiple of 128 KiB) long,
    declaring its size in the header when ``content_size``."""
    n = total // _RLE_BLOCK
    # Frame_Header_Descriptor: FCS field 8 bytes (flag 3) or none (flag 0), not single
    # segment (so a Window_Descriptor follows: window log 17 = 128 KiB, exponent 7)
    fhd = 0xC0 if content_size else 0x00
    header = b"\x28\xb5\x2f\xfd" + bytes([fhd, 7 << 3])
    if content_size:
        header += struct.pack("<Q", total)
    block = ((1 << 1) | (_RLE_BLOCK << 3)).to_bytes(3, "little") + b"\x00"
    last = ((1 << 0) | (1 << 1) | (_RLE_BLOCK << 3)).to_bytes(3, "little") + b"\x00"
    return header + block * (n - 1) + last


def blosc_bomb(declared: int = 2**31 - 1 - 16) -> bytes:
    """A Blosc 1 frame whose header declares ``declared`` decoded bytes (its body is
    not a valid encoding of them: only the header matters to a bounded decoder)."""
    body = bytes(64)
    cbytes = 16 + len(body)
    # version 2, compressor version 1, flags: memcpyed (0x02) | byte shuffle off
    return struct.pack("<BBBBiii", 2, 1, 0x02, 1, declared, declared, cbytes) + body
