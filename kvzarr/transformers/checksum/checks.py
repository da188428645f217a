"""What a read of a value finds, as pure functions of the value and its record: good, a
value without a record, or the error to raise (with the key, the block and both
checksums). Used by the reads, the writes that must not vouch for damaged bytes, and
the scrub.
"""

from __future__ import annotations

import functools
from typing import Any

from ...errors import ChecksumMismatchError, ChecksumRecordError
from . import record as rec
from .record import UNPROTECTED, Mismatch, Record, RecordFormatError


class BadRecord:
    """A record that would not decode, kept in place of a Record: the value it protects
    cannot be verified (which only matters if the value is there)."""
    __slots__ = ("reason", "raw")

    def __init__(self, reason: str, raw: bytes) -> None:
        self.reason, self.raw = reason, raw


#: a record as a read finds it: decoded, damaged, absent, or (in the read paths) the
#: bytes as stored, decoded only when the direct check of a value fails
Found = Record | BadRecord | bytes | None
#: the outcome of a check of a value that has no record
UNPROTECTED_VALUE = "unprotected"


def decode_found(raw: Any) -> Found:
    """The record stored as ``raw`` (None: there is none)."""
    if raw is None:
        return None
    raw = raw if type(raw) is bytes else bytes(raw)
    try:
        return _decoded(raw)
    except RecordFormatError as e:
        return BadRecord(str(e), raw)


#: Records decoded lately, by their exact bytes: the same bytes always decode to the
#: same record, and a ranged read decodes its record each time (~4 us; a lookup
#: costs a tenth). Nothing changes a decoded record (updates copy its checksums).
_decoded = functools.lru_cache(maxsize=4096)(rec.decode)


def mismatch_error(key: str, m: Mismatch, block_size: int) -> ChecksumMismatchError:
    if m.stored is None or m.block is None:
        where = "" if m.block is None else f" (block {m.block})"
        text = f"checksum mismatch: {m.detail}{where}"
        if m.stored is not None:
            text += f"; stored crc32c {m.stored:08x}, computed {m.computed:08x}"
    else:
        start = m.block * block_size
        end = start + block_size if m.end is None else m.end
        text = (f"checksum mismatch in block {m.block} (bytes {start}-{end - 1}): "
                f"stored crc32c {m.stored:08x}, computed {m.computed:08x}")
    return ChecksumMismatchError(
        text, key=key, block=m.block, stored=m.stored, computed=m.computed,
        hint="the value changed after its checksum record was written: damaged storage, "
             "or a rewrite by a tool that keeps no records; `kvzarr verify` lists every "
             "such key")


def record_error(key: str, bad: BadRecord) -> ChecksumRecordError:
    return ChecksumRecordError(
        f"the checksum record of this value is damaged: {bad.reason}", key=key,
        hint="the value cannot be verified; `kvzarr verify` lists every such key")


def check_value(key: str, found: Found, value: Any) -> Any:
    """Check a whole present value: None (good), UNPROTECTED_VALUE or the error."""
    if type(found) is bytes:
        if rec.final_matches(found, value):
            return None
        found = decode_found(found)
    if found is None:
        return UNPROTECTED_VALUE
    if type(found) is BadRecord:
        return record_error(key, found)
    bs = found.block_size
    if found.final:
        m = rec.check_whole(found.state, value, bs)
        return None if m is None else mismatch_error(key, m, bs)
    # a pending record: a write on a store without transactions did not finish (or is
    # running): the value may hold any of its states
    if any(rec.matches(s, value, bs) for s in found.states):
        return None
    if any(s.kind == UNPROTECTED for s in found.states):
        return UNPROTECTED_VALUE
    newest = next(s for s in found.states if s.present)
    m = rec.check_whole(newest, value, bs)
    return None if m is None else mismatch_error(key, m, bs)
