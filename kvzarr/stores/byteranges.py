"""Byte-range requests and their coalescing: the vocabulary shared by stores (which serve
ranges) and codecs (sharding asks for ranges). Imports only kvzarr.errors.

Range forms follow the Zarr v3 abstract store interface: ``[start, end)``, from an
offset to the end, and a suffix of a given length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from ..errors import InvalidByteRangeError, ValueTypeError


@dataclass(frozen=True, slots=True)
class RangeRequest:
    """Bytes ``[start, end)`` of a value."""
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise InvalidByteRangeError(f"invalid byte range [{self.start}, {self.end})")


@dataclass(frozen=True, slots=True)
class OffsetRequest:
    """Bytes from ``offset`` to the end of a value."""
    offset: int

    def __post_init__(self) -> None:
        if self.offset < 0:
            raise InvalidByteRangeError(f"invalid byte offset {self.offset}")


@dataclass(frozen=True, slots=True)
class SuffixRequest:
    """The last ``suffix`` bytes of a value (the whole value if it is shorter)."""
    suffix: int

    def __post_init__(self) -> None:
        if self.suffix < 0:
            raise InvalidByteRangeError(f"invalid byte suffix {self.suffix}")


ByteRequest = Union[RangeRequest, OffsetRequest, SuffixRequest]


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
