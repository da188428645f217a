"""Checksum records: their binary format and the CRC-32C arithmetic done on them.

A record protects one value. It is binary, little-endian and checks itself::

    offset  size  field
    0       4     magic  b"KVCR"
    4       1     format version (1)
    5       1     log2 of the block size
    6       1     number of states, 1 or 2 (1: final; 2: a write was under way)
    7       1     reserved, 0
    8       ...   the states, one after another:
                    u64  length of the value in bytes, or 2**64-1 "absent",
                         or 2**64-2 "present but unprotected"
                    u32  CRC-32C of the whole value (0 unless the value is present)
                    u32  CRC-32C of each block, ceil(length / block size) of them
    end-4   4     CRC-32C of every byte before it

CRC-32C is the Castagnoli CRC (RFC 3720, appendix B.4), as the ``crc32c`` package and
the Zarr ``crc32c`` codec compute it. A value of ``n`` bytes is cut into blocks of
``block_size`` bytes (the last one shorter); an empty value has no blocks and a whole
checksum of 0. The whole-value checksum lets a read of the whole value be verified with
one pass of the checksum (the fastest the hardware goes); the block checksums let a read
of a byte range be verified by reading only the blocks it touches.

A *final* record has one state, the value's. A record with more states is *pending*: a
write to a store without transactions was under way (new state first, then what the
value may still hold), and the value is good if it matches any of them.

Everything here is pure computation on bytes: no store, no key.
"""

from __future__ import annotations

import functools
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import crc32c as _crc32c

crc32c = _crc32c.crc32c

MAGIC = b"KVCR"
VERSION = 1
#: magic, version, log2(block size), number of states, reserved
_HEADER = struct.Struct("<4sBBBB")
#: a state's length (or a marker) and its whole-value checksum
_STATE = struct.Struct("<QI")
_TRAILER = 4
#: the header and one state: a final record without its block checksums
_FINAL = struct.Struct("<4sBBBBQI")
#: length markers of the states that hold no checksums
_ABSENT = (1 << 64) - 1
_UNPROTECTED = (1 << 64) - 2
MAX_STATES = 2

#: the block sizes a record can describe (powers of two); the transformer's own limits
#: are narrower (see Checksum)
MIN_LOG2, MAX_LOG2 = 4, 30

if array("I").itemsize != 4:   # pragma: no cover - every platform Python runs on today
    raise ImportError("kvzarr's checksum records need a 4-byte array('I')")
_SWAP = sys.byteorder == "big"


class RecordFormatError(ValueError):
    """Raised by :func:`decode` for bytes that are not a valid record; the transformer
    turns it into :class:`~kvzarr.errors.ChecksumRecordError` naming the key."""


# --- states -----------------------------------------------------------------------------

PRESENT, ABSENT, UNPROTECTED = "present", "absent", "unprotected"


class State(NamedTuple):
    """One content a value may have: ``PRESENT`` with its length and checksums, ``ABSENT``
    (no value) or ``UNPROTECTED`` (a value nobody computed checksums for). (A named
    tuple: a read decodes one per value, and a frozen dataclass costs twice as much.)"""
    kind: str
    length: int = 0
    whole: int = 0
    blocks: Any = ()      # array('I') of block checksums, in host byte order

    @property
    def present(self) -> bool:
        return self.kind == PRESENT

    def same(self, other: "State") -> bool:
        return (self.kind == other.kind and self.length == other.length
                and self.whole == other.whole and list(self.blocks) == list(other.blocks))


STATE_ABSENT = State(ABSENT)
STATE_UNPROTECTED = State(UNPROTECTED)


def nblocks(length: int, block_size: int) -> int:
    return -(-length // block_size)


def block_crcs(data: Any, block_size: int, first: int = 0) -> array:
    """The checksum of each block of ``data`` (a bytes-like that starts at block
    ``first`` of its value; only its length matters for where blocks end)."""
    view = memoryview(data).cast("B")
    return array("I", [crc32c(view[i:i + block_size])
                       for i in range(0, len(view), block_size)])


def state_of(data: Any, block_size: int) -> State:
    """The PRESENT state of a value: its length, whole checksum and block checksums. The
    whole checksum comes from the block checksums of the full blocks (combined, under a
    microsecond a block) continued over the last block's bytes: one pass over the value,
    not two."""
    view = memoryview(data).cast("B")
    if len(view) <= block_size:             # (most small values: one block)
        if not view:
            return State(PRESENT, 0, 0, array("I"))
        crc = crc32c(view)
        return State(PRESENT, len(view), crc, array("I", (crc,)))
    blocks = block_crcs(view, block_size)
    n = len(blocks)
    prefix = _combined(blocks, n - 1, block_size)
    whole = crc32c(view[(n - 1) * block_size:], prefix)
    return State(PRESENT, len(view), whole, blocks)


# --- the record -------------------------------------------------------------------------

class Record(NamedTuple):
    """A decoded record. ``raw`` is the stored bytes (readers compare it to tell whether
    a record changed between two reads)."""
    block_size: int
    states: tuple[State, ...]
    raw: bytes

    @property
    def final(self) -> bool:
        return len(self.states) == 1

    @property
    def state(self) -> State:
        """The newest state (the only one of a final record)."""
        return self.states[0]


def encode_final(block_size: int, state: State) -> bytes:
    """The bytes of a final record (one PRESENT state; the transformer checked the block
    size): what every write makes, so without :func:`encode`'s general checks."""
    blocks = state.blocks
    if _SWAP:
        blocks = array("I", blocks)
        blocks.byteswap()
    body = _FINAL.pack(MAGIC, VERSION, block_size.bit_length() - 1, 1, 0, state.length,
                       state.whole) + blocks.tobytes()
    return body + crc32c(body).to_bytes(4, "little")


def encode(block_size: int, states: Sequence[State]) -> bytes:
    """The record bytes for ``states`` (newest first). A final record's one state is
    PRESENT; states that repeat an earlier one are dropped."""
    kept: list[State] = []
    for s in states:
        if not any(s.same(k) for k in kept):
            kept.append(s)
    if not 1 <= len(kept) <= MAX_STATES:
        raise ValueError(f"a record holds 1 to {MAX_STATES} states, not {len(kept)}")
    if len(kept) == 1 and not kept[0].present:
        raise ValueError("a final record describes a present value")
    log2 = block_size.bit_length() - 1
    if block_size != 1 << log2 or not MIN_LOG2 <= log2 <= MAX_LOG2:
        raise ValueError(f"block size {block_size} is not a power of two in range")
    parts = [_HEADER.pack(MAGIC, VERSION, log2, len(kept), 0)]
    for s in kept:
        if s.kind == PRESENT:
            if len(s.blocks) != nblocks(s.length, block_size):
                raise ValueError("block checksums do not cover the value")
            parts.append(_STATE.pack(s.length, s.whole))
            blocks = array("I", s.blocks)
            if _SWAP:
                blocks.byteswap()
            parts.append(blocks.tobytes())
        else:
            parts.append(_STATE.pack(_ABSENT if s.kind == ABSENT else _UNPROTECTED, 0))
    body = b"".join(parts)
    return body + crc32c(body).to_bytes(4, "little")


def decode(raw: Any) -> Record:
    """Parse and check a record; :class:`RecordFormatError` says what is wrong."""
    if type(raw) is not bytes:
        raw = bytes(raw)
    size = len(raw)
    if size < _HEADER.size + _STATE.size + _TRAILER:
        raise RecordFormatError(f"the record is {size} bytes, too short to be one")
    magic, version, log2, count, reserved = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise RecordFormatError(f"the record does not start with {MAGIC!r}")
    end = size - _TRAILER
    stored = int.from_bytes(raw[end:], "little")
    computed = crc32c(memoryview(raw)[:end])
    if stored != computed:
        raise RecordFormatError(f"the record's own checksum fails (stored {stored:08x}, "
                                f"computed {computed:08x})")
    if version != VERSION:
        raise RecordFormatError(f"record format version {version} is not one this kvzarr "
                                f"reads (it reads version {VERSION}); a newer kvzarr wrote it")
    if not MIN_LOG2 <= log2 <= MAX_LOG2 or not 1 <= count <= MAX_STATES or reserved:
        raise RecordFormatError("the record's header holds impossible values")
    block_size = 1 << log2
    states = []
    at = _HEADER.size
    for _ in range(count):
        if at + _STATE.size > end:
            raise RecordFormatError("the record ends inside a state")
        length, whole = _STATE.unpack_from(raw, at)
        at += _STATE.size
        if length >= _UNPROTECTED:
            states.append(STATE_ABSENT if length == _ABSENT else STATE_UNPROTECTED)
            continue
        stop = at + 4 * -(-length // block_size)
        if stop > end:
            raise RecordFormatError("the record ends inside its block checksums")
        blocks = array("I", raw[at:stop])
        if _SWAP:
            blocks.byteswap()
        at = stop
        states.append(State(PRESENT, length, whole, blocks))
    if at != end:
        raise RecordFormatError("the record has bytes after its last state")
    if count == 1 and not states[0].present:
        raise RecordFormatError("a final record describes no value")
    return Record(block_size, tuple(states), raw)


# --- verification -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Mismatch:
    """Why bytes failed their checksums: a block whose checksum differs (``block``,
    ``stored``, ``computed``; ``end``: where the block ends in the value), or a length
    that differs from the record's."""
    block: int | None
    stored: int | None
    computed: int | None
    detail: str
    end: int | None = None


def first_bad_block(state: State, data: Any, block_size: int, first: int = 0
                    ) -> Mismatch | None:
    """Check ``data``, which holds blocks ``first``, ``first + 1``, ... of the value
    (whole blocks, the value's last block as long as it is), block by block."""
    view = memoryview(data).cast("B")
    blocks = state.blocks
    for j, at in enumerate(range(0, len(view), block_size), first):
        block = view[at:at + block_size]
        got = crc32c(block)
        if got != blocks[j]:
            return Mismatch(j, blocks[j], got, "", j * block_size + len(block))
    return None


def check_span(state: State, data: Any, block_size: int, first: int) -> Mismatch | None:
    """Check ``data``, blocks ``first``, ``first + 1``, ... of a value (whole blocks; the
    value's last block as long as it is), in one pass: the checksum of its full blocks
    against their stored checksums combined (under a microsecond a block), the last
    block alone if it is short; only on failure block by block, to name the bad one."""
    view = memoryview(data).cast("B")
    count = -(-len(view) // block_size)
    if count <= 1:
        return first_bad_block(state, view, block_size, first)
    full = len(view) // block_size
    blocks = state.blocks
    expected = _combined(blocks[first:first + full], full, block_size)
    good = crc32c(view[:full * block_size]) == expected
    if good and full < count:
        good = crc32c(view[full * block_size:]) == blocks[first + full]
    return None if good else first_bad_block(state, view, block_size, first)


def final_matches(raw: bytes, data: Any) -> bool:
    """Whether ``raw`` is a sound final record (its own checksum holds, its layout is
    right) of exactly ``data``: a whole value checked without decoding its record, the
    way every read of a good value goes. False says nothing more; decode the record to
    learn why."""
    end = len(raw) - _TRAILER
    if end < _FINAL.size:
        return False
    magic, version, log2, count, reserved, length, whole = _FINAL.unpack_from(raw)
    if (magic != MAGIC or version != VERSION or count != 1 or reserved
            or not MIN_LOG2 <= log2 <= MAX_LOG2
            or end != _FINAL.size + 4 * -(-length >> log2)
            or crc32c(memoryview(raw)[:end]) != int.from_bytes(raw[end:], "little")):
        return False
    return len(data) == length and crc32c(data) == whole


def check_whole(state: State, data: Any, block_size: int) -> Mismatch | None:
    """Check a whole value against a PRESENT state: its length, then its whole checksum
    in one pass; only on failure are the blocks checked one by one to name the bad one."""
    view = memoryview(data).cast("B")
    if len(view) != state.length:
        return length_mismatch(state, len(view), block_size)
    if crc32c(view) == state.whole:
        return None
    found = first_bad_block(state, view, block_size)
    if found is not None:
        return found
    # Every block matches but the whole does not: the record's two parts disagree.
    return Mismatch(None, state.whole, crc32c(view),
                    "the whole-value checksum disagrees with the block checksums")


def length_mismatch(state: State, length: int, block_size: int) -> Mismatch:
    """A value of ``length`` bytes where the record says ``state.length``: the first
    block whose extent differs is the bad one."""
    block = min(length, state.length) // block_size
    return Mismatch(block, None, None,
                    f"the value is {length} bytes long, its record says {state.length}")


def matches(state: State, data: Any, block_size: int) -> bool:
    view = memoryview(data).cast("B")
    return state.present and len(view) == state.length and crc32c(view) == state.whole


# --- combining checksums ----------------------------------------------------------------
#
# The checksum of A + B from the checksums of A and B and the length of B, as zlib's
# crc32_combine does it (zlib 1.2.12, crc32.c: multmodp / x2nmodp), for the reflected
# Castagnoli polynomial. Used when a partial write changes blocks in the middle of a
# value: the whole checksum is rebuilt from the block checksums, without reading the
# blocks the write did not touch.

_POLY = 0x82F63B78


def _multmodp(a: int, b: int) -> int:
    """a * b modulo the polynomial (reflected bit order: 1 << 31 is x**0)."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


#: x ** (2 ** k) modulo the polynomial
_X2N = [1 << 30]
for _ in range(63):
    _X2N.append(_multmodp(_X2N[-1], _X2N[-1]))


def _x8nmodp(n: int) -> int:
    """x ** (8 * n) modulo the polynomial: the operator that shifts a checksum past n
    zero bytes."""
    p, k = 1 << 31, 3
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 63], p)
        n >>= 1
        k += 1
    return p


def combine(crc_a: int, crc_b: int, length_b: int) -> int:
    """CRC-32C of A + B from crc(A), crc(B) and len(B)."""
    return _multmodp(_x8nmodp(length_b), crc_a) ^ crc_b


@functools.lru_cache(maxsize=8)
def _shift_tables(length: int) -> tuple[list[int], ...]:
    """Tables that shift a checksum past ``length`` zero bytes by four lookups. The
    product with a fixed operator is linear in the other factor (XOR distributes), so
    each byte's table is built from its eight single-bit entries (32 products per
    length, ~0.3 ms, instead of 1,024)."""
    op = _x8nmodp(length)
    tables = []
    for k in range(4):
        table = [0] * 256
        for bit in range(8):
            entry = _multmodp(op, 1 << (8 * k + bit))
            step = 1 << bit
            for v in range(step):
                table[v | step] = table[v] ^ entry
        tables.append(table)
    return tuple(tables)


def _combined(blocks: Sequence[int], count: int, block_size: int) -> int:
    """The checksum of the first ``count`` (full) blocks from their checksums."""
    t0, t1, t2, t3 = _shift_tables(block_size)
    whole = blocks[0]
    for i in range(1, count):
        whole = (t0[whole & 0xFF] ^ t1[(whole >> 8) & 0xFF] ^ t2[(whole >> 16) & 0xFF]
                 ^ t3[whole >> 24] ^ blocks[i])
    return whole


def whole_from_blocks(blocks: Sequence[int], length: int, block_size: int) -> int:
    """The whole-value checksum of a value of ``length`` bytes from its block checksums
    alone (the last block shifted in by :func:`combine`, ~16 us)."""
    if not length:
        return 0
    n = len(blocks)
    if n == 1:
        return blocks[0]
    whole = _combined(blocks, n - 1, block_size)
    return combine(whole, blocks[-1], length - (n - 1) * block_size)
