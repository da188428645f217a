"""The fragment index of one spatial chunk: which rows of the chunk's ``vertices`` cell
(or of its intra-chunk links cell) make up each fragment.

Binary layout, "ZVFG" version 1, all integers little-endian, as zarr-vectors 0.9.2
writes and reads it (https://github.com/AllenInstitute/zarr-vectors-py, "fragment
index"):

    header       u32 magic 0x5A564647 (the bytes "GFVZ"), u16 version 1, u16 flags 0,
                 u32 F (fragments), u32 R (fragments that are ranges)
    bitmap       ceil(F / 8) bytes, padded with zeros to a multiple of 8; bit f (LSB first
                 in byte f >> 3) is set when fragment f is a range
    range table  R rows of (i64 start, i64 count), in the order of the set bits
    explicit     u32 offsets[F - R + 1] (offsets[0] = 0), then i64 row indices; omitted
                 entirely when F = 0

Writers emit ranges only; explicit fragments come from edits and every reader must
take them. Decoding checks every length and bound, so a truncated or hostile blob is a
:class:`~kvzarr.errors.CodecError`, never a wrong answer or a huge allocation.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import CodecError

MAGIC = 0x5A564647
VERSION = 1
_HEADER = struct.Struct("<IHHII")
_RANGE = np.dtype([("start", "<i8"), ("count", "<i8")])


@dataclass(frozen=True)
class FragmentIndex:
    """Fragments of one chunk. ``is_range[f]`` says how fragment ``f`` is kept: as
    ``starts[r], counts[r]`` for its rank ``r`` among the ranges, or as
    ``explicit_rows[offsets[e]:offsets[e + 1]]`` for its rank ``e`` among the others."""

    is_range: np.ndarray        # (F,) bool
    starts: np.ndarray          # (R,) int64
    counts: np.ndarray          # (R,) int64
    offsets: np.ndarray         # (F - R + 1,) int64
    explicit_rows: np.ndarray   # (offsets[-1],) int64

    @property
    def count(self) -> int:
        return len(self.is_range)

    def all_ranges(self) -> bool:
        return bool(self.is_range.all())

    def rows(self, fragment: int) -> np.ndarray:
        """Row indices of one fragment, in their stored order."""
        if not 0 <= fragment < self.count:
            raise CodecError(f"fragment {fragment} is not in an index of {self.count}")
        rank = int(np.count_nonzero(self.is_range[:fragment]))
        if self.is_range[fragment]:
            start = int(self.starts[rank])
            return np.arange(start, start + int(self.counts[rank]), dtype=np.int64)
        e = fragment - rank
        return self.explicit_rows[int(self.offsets[e]):int(self.offsets[e + 1])]

    def rows_of(self, fragments: np.ndarray) -> np.ndarray:
        """Row indices of several fragments, concatenated in the order given."""
        if self.all_ranges():
            starts, counts = self.starts[fragments], self.counts[fragments]
            return ranges_to_rows(starts, counts)
        parts = [self.rows(int(f)) for f in fragments]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def tiles(self, n_rows: int) -> bool:
        """True when the fragments are ranges that cover ``[0, n_rows)`` in order, each
        starting where the previous one ended: then the cell's rows are its fragments'
        rows and a bulk read may skip the index."""
        if not self.all_ranges():
            return False
        if self.count == 0:
            return n_rows == 0
        ends = self.starts + self.counts
        return (int(self.starts[0]) == 0 and bool(np.all(self.starts[1:] == ends[:-1]))
                and int(ends[-1]) == n_rows)

    def check_rows(self, n_rows: int, where: str) -> None:
        """Every row a fragment names lies inside a cell of ``n_rows`` rows."""
        # (each bound first, so that start + count cannot overflow)
        bad_range = np.any((self.starts < 0) | (self.counts < 0) | (self.starts > n_rows)
                           | (self.counts > n_rows)) or np.any(
                               self.starts + self.counts > n_rows)
        bad_rows = self.explicit_rows.size and (self.explicit_rows.min() < 0
                                                or self.explicit_rows.max() >= n_rows)
        if bad_range or bad_rows:
            raise CodecError(f"the fragment index names rows outside the {n_rows} rows of "
                             f"its chunk", key=where)


def ranges_to_rows(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])``, vectorised."""
    counts = np.asarray(counts, dtype=np.int64)
    firsts = np.cumsum(counts) - counts          # where each run starts in the output
    shift = np.asarray(starts, dtype=np.int64) - firsts
    return np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(shift, counts)


def encode_ranges(starts: np.ndarray, counts: np.ndarray) -> bytes:
    """The index of fragments that are all ranges (what every writer emits)."""
    f = len(starts)
    if f == 0:
        return _HEADER.pack(MAGIC, VERSION, 0, 0, 0)
    table = np.empty(f, dtype=_RANGE)
    table["start"] = starts
    table["count"] = counts
    bitmap = np.packbits(np.ones(f, dtype=bool), bitorder="little")
    return b"".join((_HEADER.pack(MAGIC, VERSION, 0, f, f), _pad8(bitmap.tobytes()),
                     table.tobytes(), b"\0\0\0\0"))


def encode(fragments: list[np.ndarray | tuple[int, int]]) -> bytes:
    """The index of a mix of ranges ``(start, count)`` and explicit row arrays."""
    f = len(fragments)
    if f == 0:
        return _HEADER.pack(MAGIC, VERSION, 0, 0, 0)
    is_range = np.array([isinstance(x, tuple) for x in fragments], dtype=bool)
    ranges = np.array([x for x in fragments if isinstance(x, tuple)],
                      dtype=np.int64).reshape(-1, 2)
    table = np.empty(len(ranges), dtype=_RANGE)
    table["start"], table["count"] = ranges[:, 0], ranges[:, 1]
    explicit = [np.asarray(x, dtype="<i8") for x in fragments if not isinstance(x, tuple)]
    offsets = np.concatenate(([0], np.cumsum([len(x) for x in explicit],
                                             dtype=np.int64))).astype("<u4")
    rows = np.concatenate(explicit) if explicit else np.zeros(0, dtype="<i8")
    bitmap = np.packbits(is_range, bitorder="little")
    return b"".join((_HEADER.pack(MAGIC, VERSION, 0, f, len(ranges)), _pad8(bitmap.tobytes()),
                     table.tobytes(), offsets.tobytes(), rows.astype("<i8").tobytes()))


def decode(blob: bytes, key: str | None = None) -> FragmentIndex:
    """Parse an index; every size is checked against the blob's length first."""
    data = memoryview(blob)
    if len(data) < _HEADER.size:
        raise CodecError(f"a fragment index needs a {_HEADER.size}-byte header, got "
                         f"{len(data)} bytes", key=key)
    magic, version, flags, f, r = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CodecError(f"not a fragment index (magic {magic:#010x})", key=key)
    if version != VERSION or flags != 0:
        raise CodecError(f"fragment index version {version} flags {flags} is not "
                         f"version 1 with flags 0", key=key)
    if r > f:
        raise CodecError(f"fragment index claims {r} ranges among {f} fragments", key=key)
    if f == 0:
        if len(data) not in (_HEADER.size, _HEADER.size + 4):
            raise CodecError("an empty fragment index has trailing bytes", key=key)
        empty = np.zeros(0, dtype=np.int64)
        return FragmentIndex(np.zeros(0, dtype=bool), empty, empty, np.zeros(1, np.int64),
                             empty)
    pos = _HEADER.size
    bitmap_len = -(-f // 8)
    padded = -(-bitmap_len // 8) * 8
    e = f - r
    fixed = pos + padded + 16 * r + 4 * (e + 1)
    if len(data) < fixed:
        raise CodecError(f"fragment index of {f} fragments is truncated ({len(data)} "
                         f"bytes, at least {fixed} needed)", key=key)
    is_range = np.unpackbits(np.frombuffer(data, np.uint8, bitmap_len, pos),
                             count=f, bitorder="little").astype(bool)
    if int(is_range.sum()) != r:
        raise CodecError(f"fragment index bitmap marks {int(is_range.sum())} ranges, "
                         f"the header {r}", key=key)
    pos += padded
    table = np.frombuffer(data, _RANGE, r, pos)
    pos += 16 * r
    offsets = np.frombuffer(data, "<u4", e + 1, pos).astype(np.int64)
    pos += 4 * (e + 1)
    if offsets[0] != 0 or np.any(np.diff(offsets) < 0):
        raise CodecError("fragment index offsets do not start at 0 and rise", key=key)
    n_rows = int(offsets[-1])
    if len(data) != pos + 8 * n_rows:
        raise CodecError(f"fragment index holds {len(data) - pos} bytes of explicit rows, "
                         f"its offsets say {8 * n_rows}", key=key)
    rows = np.frombuffer(data, "<i8", n_rows, pos).astype(np.int64)
    if np.any(table["start"] < 0) or np.any(table["count"] < 0) or np.any(rows < 0):
        raise CodecError("fragment index holds negative rows", key=key)
    return FragmentIndex(is_range, table["start"].astype(np.int64),
                         table["count"].astype(np.int64), offsets, rows)


def _pad8(raw: bytes) -> bytes:
    return raw + b"\0" * (-len(raw) % 8)
