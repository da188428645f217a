"""Byte-range requests and their coalescing: the vocabulary shared by stores (which serve
ranges) and codecs (sharding asks for ranges). Imports only kvzarr.errors.

Range forms follow the Zarr v3 abstract store interface: ``[start, end)``, from an
offset to the end, and a suffix of a given length.

A request is checked once, when it is made: its numbers are integers (``int``, or
anything with ``__index__`` such as numpy integers; never ``bool``) and not negative, or
:class:`InvalidByteRangeError`. Numbers past :data:`MAX_OFFSET` are clipped to it, which
changes no answer (no value is that long) and spares every store numbers its engine
cannot take. What lies past the end of a value is nothing: a range that starts there
reads ``b""`` on every store. The store boundary (``Store.get_partial_values``) only
checks that each request is one of these types (:func:`check_request`).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from ..errors import InvalidByteRangeError, ValueTypeError

#: The largest offset or length a request carries (2**63 - 1: file offsets are signed
#: 64-bit, so no value of any store is longer); larger numbers are clipped to it.
MAX_OFFSET = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class RangeRequest:
    """Bytes ``[start, end)`` of a value."""
    start: int
    end: int

    def __post_init__(self) -> None:
        start, end = self.start, self.end
        # the common request (plain ints, in order, in bounds) costs five tests
        if (type(start) is not int or type(end) is not int or start < 0 or end < start
                or end > MAX_OFFSET):
            start, end = _offset(start, "start"), _offset(end, "end")
            if end < start:
                raise InvalidByteRangeError(f"invalid byte range [{start}, {end})")
            object.__setattr__(self, "start", min(start, MAX_OFFSET))
            object.__setattr__(self, "end", min(end, MAX_OFFSET))


@dataclass(frozen=True, slots=True)
class OffsetRequest:
    """Bytes from ``offset`` to the end of a value."""
    offset: int

    def __post_init__(self) -> None:
        offset = self.offset
        if type(offset) is not int or offset < 0 or offset > MAX_OFFSET:
            object.__setattr__(self, "offset", min(_offset(offset, "offset"), MAX_OFFSET))


@dataclass(frozen=True, slots=True)
class SuffixRequest:
    """The last ``suffix`` bytes of a value (the whole value if it is shorter)."""
    suffix: int

    def __post_init__(self) -> None:
        suffix = self.suffix
        if type(suffix) is not int or suffix < 0 or suffix > MAX_OFFSET:
            object.__setattr__(self, "suffix", min(_offset(suffix, "suffix"), MAX_OFFSET))


def _offset(value: Any, name: str) -> int:
    """``value`` as a plain int >= 0, or InvalidByteRangeError."""
    if isinstance(value, bool):
        raise InvalidByteRangeError(f"byte {name} must be an integer, not {value!r}",
                                    field=name)
    try:
        number = operator.index(value)
    except TypeError:
        raise InvalidByteRangeError(f"byte {name} must be an integer, not "
                                    f"{type(value).__name__} {value!r}", field=name) from None
    if number < 0:
        raise InvalidByteRangeError(f"invalid byte {name} {number}: negative", field=name)
    return number


ByteRequest = Union[RangeRequest, OffsetRequest, SuffixRequest]
_KINDS = (RangeRequest, OffsetRequest, SuffixRequest)


def check_write_offset(offset: Any, length: int, key: str) -> int:
    """The offset of a partial write of ``length`` bytes as a plain int, or
    :class:`InvalidByteRangeError`: not an integer (or a bool), negative, or a write that
    would end past :data:`MAX_OFFSET` (no value can be that long; checked before any
    store builds or pads a value that size)."""
    if type(offset) is not int:
        if isinstance(offset, bool):
            raise InvalidByteRangeError(f"a write offset must be an integer, not {offset!r}",
                                        key=key)
        try:
            offset = operator.index(offset)
        except TypeError:
            raise InvalidByteRangeError(f"a write offset must be an integer, not "
                                        f"{type(offset).__name__}", key=key) from None
    if offset < 0:
        raise InvalidByteRangeError(f"negative offset {offset}", key=key)
    if offset + length > MAX_OFFSET:
        raise InvalidByteRangeError(f"a write at offset {offset} would end past "
                                    f"{MAX_OFFSET}, the largest size of a value", key=key)
    return offset


def check_request(request: Any) -> ByteRequest | None:
    """``request`` if it is a byte request or None (the whole value), else
    :class:`ValueTypeError`: what every store checks at its boundary, before any I/O."""
    if request is None or isinstance(request, _KINDS):
        return request
    raise ValueTypeError(f"not a byte request: {request!r}")


def apply_byte_request(value: bytes, request: ByteRequest | None) -> bytes:
    """Cut ``request`` out of a whole ``value``; ranges past the end are clipped."""
    if request is None:
        return value
    if isinstance(request, RangeRequest):
        return value[request.start:request.end]
    if isinstance(request, OffsetRequest):
        return value[request.offset:]
    if isinstance(request, SuffixRequest):
        return value[max(0, len(value) - request.suffix):] if request.suffix else b""
    raise ValueTypeError(f"not a byte request: {request!r}")


def request_span(request: ByteRequest | None, size: int) -> tuple[int, int]:
    """``[start, end)`` of ``request`` (None: the whole value) in a value of ``size``
    bytes, clipped to it: what :func:`apply_byte_request` cuts, for a store that reads
    the bytes itself (from a file, from parts)."""
    if request is None:
        return 0, size
    if isinstance(request, RangeRequest):
        return min(request.start, size), min(request.end, size)
    if isinstance(request, OffsetRequest):
        return min(request.offset, size), size
    if isinstance(request, SuffixRequest):
        return (max(0, size - request.suffix), size) if request.suffix else (size, size)
    raise ValueTypeError(f"not a byte request: {request!r}")


def coalesce_ranges(ranges: Sequence[RangeRequest], max_gap: int = 64 * 1024,
                    max_bytes: int = 16 * 1024 * 1024) -> list[tuple[RangeRequest, list[int]]]:
    """Group ranges that lie close together into larger reads.

    Ranges are sorted by start; a range joins the current group when the gap to the
    group's end is at most ``max_gap`` (overlaps always join) and the merged span stays
    within ``max_bytes``. Returns ``(merged_range, indices_of_members)`` per group, where
    the indices point into ``ranges``.
    """
    order = sorted(range(len(ranges)), key=lambda i: ranges[i].start)
    groups: list[tuple[int, int, list[int]]] = []
    for i in order:
        r = ranges[i]
        if groups:
            start, end, members = groups[-1]
            overlaps = r.start <= end
            if overlaps or (r.start - end <= max_gap and max(end, r.end) - start <= max_bytes):
                groups[-1] = (start, max(end, r.end), members + [i])
                continue
        groups.append((r.start, r.end, [i]))
    return [(RangeRequest(s, e), members) for s, e, members in groups]
