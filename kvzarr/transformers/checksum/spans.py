"""Which blocks a byte request touches: requests made absolute on a value of known
length, widened to whole blocks and merged per key, so that every range read through the
checksum transformer is verified block by block and no block is read twice.

Pure arithmetic on integers and byte requests (Zarr v3 abstract store interface, byte
ranges: ``[start, end)``, from an offset, a suffix).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ...stores.byteranges import ByteRequest, OffsetRequest, RangeRequest


def absolute(request: ByteRequest | None, length: int) -> tuple[int, int]:
    """``[start, end)`` that ``request`` selects on a value of ``length`` bytes, clipped
    to it the way :func:`~kvzarr.stores.byteranges.apply_byte_request` cuts."""
    if request is None:
        return 0, length
    if isinstance(request, RangeRequest):
        return min(request.start, length), min(max(request.end, request.start), length)
    if isinstance(request, OffsetRequest):
        return min(request.offset, length), length
    if request.suffix == 0:
        return length, length
    return max(0, length - request.suffix), length


class Span(NamedTuple):
    """Whole blocks ``[first, stop)`` of one value, read as one range. ``probe``: the
    range asks for one byte past the value's recorded end, so a value longer than its
    record is caught (the answer then has that byte). (A named tuple: every ranged read
    makes some.)"""
    first: int
    stop: int
    start: int         # first byte: first * block_size
    end: int           # end of the last block's bytes (the value's length at most)
    probe: bool

    def request(self) -> RangeRequest:
        return RangeRequest(self.start, self.end + 1 if self.probe else self.end)


def spans(bounds: Sequence[tuple[int, int]], length: int, block_size: int) -> list[Span]:
    """The merged spans of whole blocks covering every non-empty ``[start, end)`` of
    ``bounds`` (absolute, within ``length``), in order; overlapping and adjacent block
    runs become one span."""
    if len(bounds) == 1:               # (most reads: one range of a key)
        start, end = bounds[0]
        if end <= start:
            return []
        first, stop = start // block_size, -(-end // block_size)
        last = min(stop * block_size, length)
        return [Span(first, stop, first * block_size, last, last == length)]
    runs = sorted((s // block_size, -(-e // block_size)) for s, e in bounds if e > s)
    merged: list[list[int]] = []
    for first, stop in runs:
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([first, stop])
    out = []
    for first, stop in merged:
        end = min(stop * block_size, length)
        out.append(Span(first, stop, first * block_size, end, end == length))
    return out


def span_of(spans_: Sequence[Span], start: int, end: int) -> Span:
    """The span holding ``[start, end)`` (which one of ``spans_`` covers)."""
    for s in spans_:
        if s.start <= start and end <= s.end:
            return s
    raise AssertionError(f"no span holds [{start}, {end})")   # pragma: no cover
