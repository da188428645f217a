"""Decoding bounded by the size a chunk can have.

A compressed value says nothing trustworthy about how much it inflates to: a 3 MB gzip
member can inflate to 3 GiB, a 98 KB zstd frame can declare (and hold) as much. So no
decoder here is asked to "decode everything": each bytes -> bytes decoder is told the
most bytes its output may have, ``max_size``, and stops there:

* The bound comes from the chunk spec, through the pipeline: the array -> bytes codec
  knows what it accepts (``bytes``: exactly ``prod(shape) * itemsize``; ``vlen-*``: what
  the format allows for ``prod(shape)`` elements; a shard: its index plus its inner
  chunks' bounds), and every bytes -> bytes codec above it adds what its own format may
  add (:meth:`BytesBytesCodec.max_encoded_size`: crc32c 4 bytes, a compressor its
  worst-case expansion, :func:`compressed_bound`).
* Streams are inflated with the library's output limit (``zlib.decompressobj`` and
  ``max_length``, https://docs.python.org/3/library/zlib.html#zlib.Decompress.decompress;
  the same for bz2 and lzma); formats whose header gives the decoded size (Blosc 1's
  ``nbytes``, a Zstandard frame's ``Frame_Content_Size``, numcodecs' LZ4 size prefix)
  are checked against the bound BEFORE the library allocates that much.
* Past the bound a decoder raises :class:`DecodedSizeError` (a CodecError). Peak memory
  for one decode is therefore about ``max_size`` plus the input, whatever the input holds.

The other codecs never allocate more than their input or their chunk: ``bytes`` checks
the length (``prod(shape) * itemsize``) before viewing the buffer; ``vlen-*`` checks the
element count against the chunk's and that ``4 + 4 * count`` bytes exist before making
its list; ``crc32c`` and numcodecs' checksums return a slice; ``transpose`` a view; a
shard's index and inner chunks go through pipelines bounded the same way, and a shard
shorter than its index is refused before the index is decoded.

Formats: gzip, RFC 1952 (https://www.rfc-editor.org/rfc/rfc1952); zlib, RFC 1950;
Zstandard frames, RFC 8878 section 3.1.1 (https://www.rfc-editor.org/rfc/rfc8878);
Blosc 1 header, https://github.com/Blosc/c-blosc/blob/main/README_HEADER.rst.

A bound is never tighter than a valid encoding can need: refusing a chunk another
implementation wrote correctly would be worse than the bomb.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..errors import CodecError, DecodedSizeError

#: the largest output a decompressor can be asked for (max_length is a Py_ssize_t)
MAX_OUTPUT = sys.maxsize - 1


def compressed_bound(size: int) -> int:
    """An upper bound on what a general-purpose compressor writes for ``size`` bytes:
    above zlib's ``deflateBound`` (about 0.03% plus 13 bytes, plus 18 of gzip framing)
    and zlib-ng's (up to 1/8 more at its level 1, which emits 9-bit literals),
    ``ZSTD_compressBound`` (0.4% plus up to 64 bytes) and Blosc's 16 bytes of overhead,
    with room for other encoders' framing (gzip header fields, several members)."""
    return size + (size >> 3) + 4096


def clamp(limit: int | None) -> int:
    """``limit`` as a decompressor output limit (None: as much as a buffer may hold)."""
    return MAX_OUTPUT if limit is None or limit > MAX_OUTPUT else limit


def too_big(what: str, size: int | None, limit: int, declared: bool = False
            ) -> DecodedSizeError:
    """The error for ``what`` decoding to more than ``limit`` bytes (``size`` if known;
    ``declared`` when the size is the one the value's header claims)."""
    if size is None:
        text = f"{what} decodes to more than {limit} bytes, the most this chunk can hold"
    elif declared:
        text = (f"{what} declares {size} decoded bytes, more than the {limit} this chunk "
                f"can hold")
    else:
        text = f"{what} decodes to {size} bytes, more than the {limit} this chunk can hold"
    return DecodedSizeError(text, limit=limit, declared=size if declared else None)


def inflate(make: Callable[[], Any], data: Any, limit: int | None, what: str,
            multi: bool) -> bytes:
    """Decompress ``data`` with decompressor objects from ``make()`` (zlib, bz2, lzma:
    ``decompress(data, max_length)``, ``eof``, ``unused_data``, ``unconsumed_tail`` or
    ``needs_input``), never producing more than ``limit`` bytes. ``multi``: concatenated
    streams are decoded one after another (gzip, bz2, xz), and zero padding after the
    last is ignored; otherwise bytes after the stream are ignored, as ``zlib.decompress``
    does.

    Raises :class:`DecodedSizeError` past ``limit``, CodecError for a truncated stream;
    the library's own errors (corrupt data) pass through for the caller to translate."""
    budget = clamp(limit)
    parts: list[bytes] = []
    rest: Any = data
    while True:
        d = make()
        out = d.decompress(rest, budget + 1)
        if len(out) > budget:
            raise too_big(what, None, budget)
        parts.append(out)
        budget -= len(out)
        if not d.eof:
            # stopped short of the end: either the input ran out (truncated) or, for zlib,
            # the output limit was reached with input left over
            if getattr(d, "unconsumed_tail", b"") or not getattr(d, "needs_input", True):
                raise too_big(what, None, clamp(limit))
            raise CodecError(f"truncated {what}")
        rest = d.unused_data
        if not multi or not rest or not rest.strip(b"\x00"):
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)
