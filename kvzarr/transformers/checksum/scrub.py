"""The scrub behind ``Checksum.verify`` and ``kvzarr verify``: every value under a prefix
read and checked against its record, every record checked against its value.

Promises:

* Every key is classified once: a good value is counted; the findings are a *mismatch*
  (the value fails its record: the first bad block and both checksums), a *corrupt
  record* (a record that fails its own checksum or cannot be read), a *record without
  value* (the value was lost, or erased by a tool that keeps no records), an
  *unprotected* value (no record: written by another tool; not bad) and an *interrupted*
  write (a pending record left by a crash on a store without transactions, which the
  value or its absence matches: not bad either). Mismatches, corrupt records and records
  without values are bad.
* Keys are read in batches of :data:`BATCH`; on a store with transactions each batch's
  values and records are read in one read transaction (one snapshot), so a writer
  committing meanwhile causes no finding. On a store without transactions a suspicious
  key is read again, records first, until two reads agree (as reads do).
* ``repair_missing=True`` gives every unprotected value a record computed from the bytes
  read, and completes interrupted writes (a final record for the state the value
  matches, or no record for a value that is absent), in the batch's write transaction
  where the store has them; it never touches a bad key. On a store without transactions
  a repair races writers of the same keys: repair when nothing else writes.
* Values are streamed (``iter_values`` inside the batch's transaction): a batch holds one
  value at a time on SQL and zip stores, views of the map on LMDB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import ReadOnlyError
from . import record as rec
from .record import ABSENT, UNPROTECTED, Mismatch, Record
from .checks import decode_found, mismatch_error, record_error
from .rereads import RECORD_PREFIX, Read

#: (``ck`` below is the Checksum transformer being scrubbed; not imported here, since
#: it imports this module)

#: keys examined per batch (one read, or write, transaction each)
BATCH = 256
#: the kinds of finding, and those that make a scrub fail
KINDS = ("mismatch", "corrupt-record", "orphan-record", "unprotected", "interrupted")
BAD = ("mismatch", "corrupt-record", "orphan-record")
_LABELS = {"mismatch": "MISMATCH", "corrupt-record": "CORRUPT RECORD",
           "orphan-record": "RECORD WITHOUT VALUE", "unprotected": "UNPROTECTED",
           "interrupted": "INTERRUPTED WRITE"}


@dataclass(frozen=True)
class Finding:
    """One key that is not simply good. ``block``, ``stored`` and ``computed`` are set for
    a mismatch of a block's checksum; ``repaired`` when ``repair_missing`` fixed it."""
    kind: str
    key: str
    message: str
    block: int | None = None
    stored: int | None = None
    computed: int | None = None
    repaired: bool = False

    @property
    def bad(self) -> bool:
        """Whether this finding is damage (a mismatch, a corrupt record, a record
        without its value), not an unprotected value or an interrupted write."""
        return self.kind in BAD

    def __str__(self) -> str:
        done = " (repaired)" if self.repaired else ""
        return f"{_LABELS[self.kind]} {self.key}: {self.message}{done}"


@dataclass
class VerifyReport:
    """What a scrub found under ``prefix``: ``values`` and ``bytes`` read, a count per kind
    of finding, ``repaired`` keys and the findings themselves (unless they went to an
    ``on_finding`` callback instead)."""
    prefix: str
    values: int = 0
    bytes: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    repaired: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def bad(self) -> int:
        """The number of findings that are damage (see :attr:`Finding.bad`)."""
        return sum(self.counts[k] for k in BAD)

    @property
    def ok(self) -> bool:
        """True when nothing bad was found (``kvzarr verify`` exits 0)."""
        return self.bad == 0

    def summary(self) -> str:
        """One line of counts for people."""
        c = self.counts
        text = (f"verified {self.values:,} values ({self.bytes:,} bytes): "
                f"{c['mismatch']} mismatched, {c['corrupt-record']} corrupt records, "
                f"{c['orphan-record']} records without value, {c['unprotected']} "
                f"unprotected, {c['interrupted']} interrupted writes")
        if self.repaired:
            text += f"; {self.repaired} repaired"
        return text


@dataclass
class _Key:
    """One key of a batch: what was read and what it is."""
    key: str
    found: Any = None
    nbytes: int = -1
    finding: Finding | None = None
    #: the repair: a record to write (bytes), or "erase" the record
    fix: Any = None


def verify(ck: Any, prefix: str, *, repair_missing: bool,
           on_finding: Callable[[Finding], None] | None,
           progress: Callable[[int, int], None] | None) -> VerifyReport:
    """Scrub every key under ``prefix`` of ``ck``'s store (see the module docstring).
    ``on_finding(finding)`` is called for each finding as it is found (then they are not
    kept in the report); ``progress(values, bytes)`` after each batch."""
    if repair_missing and ck.read_only:
        raise ReadOnlyError(f"{ck!r} is read-only: open it writable to repair")
    report = VerifyReport(prefix)
    batch: list[str] = []
    for key in _walk(ck, prefix):
        batch.append(key)
        if len(batch) == BATCH:
            _batch(ck, batch, repair_missing, report, on_finding, progress)
            batch = []
    if batch:
        _batch(ck, batch, repair_missing, report, on_finding, progress)
    return report


def _walk(ck: Any, prefix: str) -> Iterator[str]:
    """Every key under ``prefix`` that has a value or a record, in key order: the two
    sorted listings merged."""
    n = len(RECORD_PREFIX)
    values = iter(ck.list_prefix(prefix))
    records = (k[n:] for k in ck.base.list_prefix(RECORD_PREFIX + prefix))
    v, r = next(values, None), next(records, None)
    while v is not None or r is not None:
        if r is None or (v is not None and v < r):
            yield v
            v = next(values, None)
        elif v is None or r < v:
            yield r
            r = next(records, None)
        else:
            yield v
            v, r = next(values, None), next(records, None)


def _batch(ck: Any, keys: list[str], repair: bool, report: VerifyReport,
           on_finding: Callable[[Finding], None] | None,
           progress: Callable[[int, int], None] | None) -> None:
    if ck._transactional:
        with ck.base.transaction(write=repair):
            examined = _examine_snapshot(ck, keys, repair)
            if repair:
                _repair(ck, examined)
    else:
        examined = _examine_loose(ck, keys, repair)
        if repair:
            _repair(ck, examined)
    values = nbytes = 0
    for k in examined:
        if k.nbytes >= 0:
            values += 1
            nbytes += k.nbytes
        f = k.finding
        if f is None:
            continue
        if k.fix is not None:
            f = Finding(f.kind, f.key, f.message, f.block, f.stored, f.computed, True)
            report.repaired += 1
        report.counts[f.kind] += 1
        if on_finding is not None:
            on_finding(f)
        else:
            report.findings.append(f)
    report.values += values
    report.bytes += nbytes
    if progress is not None:
        progress(values, nbytes)


def _examine_snapshot(ck: Any, keys: list[str], repair: bool) -> list[_Key]:
    """Records and values of ``keys`` read in the open transaction."""
    out = [_Key(k, decode_found(raw)) for k, raw in
           zip(keys, ck.base.get_many([RECORD_PREFIX + k for k in keys]))]
    seen = set()
    for i, value in ck.base.iter_values(keys):
        _classify(ck, out[i], value, repair)
        seen.add(i)
    for i in set(range(len(keys))) - seen:     # pragma: no cover - every store answers all
        _classify(ck, out[i], None, repair)
    return out


def _examine_loose(ck: Any, keys: list[str], repair: bool) -> list[_Key]:
    """On a store without transactions: records, then values, and suspicious keys again
    until a second read agrees (a writer changes the record before and after the
    value)."""
    def attempt(subset: list[str]) -> dict[str, Any]:
        found = ck._records_loose(subset)
        reads = {}
        for k, value in zip(subset, ck.base.get_many(subset)):
            item = _Key(k, found[k])
            _classify(ck, item, value, repair)
            # only bad findings are read again: an unprotected value seen while a
            # writer creates it is harmless (its repair records what was read)
            bad = item.finding is not None and item.finding.bad
            reads[k] = Read(item, item.finding.kind if bad else None, item.nbytes,
                             (getattr(found[k], "raw", None), value))
        return reads

    reads = ck._retrying(attempt, keys)
    return [reads[k].answer for k in keys]


def _classify(ck: Any, item: _Key, value: Any, repair: bool) -> None:
    """Set ``item.finding`` (None: good) and, when repairing, ``item.fix``."""
    found, key = item.found, item.key
    bad_record = found is not None and not isinstance(found, Record)
    if value is None:
        if found is None:
            return                                  # gone since it was listed
        if bad_record:
            item.finding = Finding("corrupt-record", key, record_error(key, found).message)
        elif not found.final and any(s.kind == ABSENT for s in found.states):
            item.finding = Finding("interrupted", key, "a write or erase did not finish; "
                                   "the value is absent, which its record allows")
            item.fix = "erase" if repair else None
        else:
            item.finding = Finding("orphan-record", key, "a checksum record without a "
                                   "value: the value was lost, or erased by a tool that "
                                   "keeps no records")
        return
    item.nbytes = len(value)
    if found is None:
        item.finding = Finding("unprotected", key, "no checksum record")
        item.fix = ck._encode([rec.state_of(value, ck.block_size)]) if repair else None
        return
    if bad_record:
        item.finding = Finding("corrupt-record", key, record_error(key, found).message)
        return
    bs = found.block_size
    if found.final:
        _mismatch(ck, item, rec.check_whole(found.state, value, bs), bs)
        return
    for s in found.states:
        if rec.matches(s, value, bs):
            item.finding = Finding("interrupted", key, "a write did not finish; the value "
                                   "matches one of the states its record allows")
            item.fix = ck._encode([s], bs) if repair else None
            return
    if any(s.kind == UNPROTECTED for s in found.states):
        item.finding = Finding("unprotected", key, "a write over an unprotected value did "
                               "not finish; the value is the old, unprotected one")
        item.fix = ck._encode([rec.state_of(value, ck.block_size)]) if repair else None
        return
    newest = next(s for s in found.states if s.present)
    _mismatch(ck, item, rec.check_whole(newest, value, bs), bs)


def _mismatch(ck: Any, item: _Key, m: Mismatch | None, bs: int) -> None:
    if m is not None:
        e = mismatch_error(item.key, m, bs)
        item.finding = Finding("mismatch", item.key, e.message.replace(
            "checksum mismatch in ", "").replace("checksum mismatch: ", ""),
            m.block, m.stored, m.computed)


def _repair(ck: Any, examined: list[_Key]) -> None:
    writes = [(RECORD_PREFIX + k.key, k.fix) for k in examined if isinstance(k.fix, bytes)]
    erases = [RECORD_PREFIX + k.key for k in examined if k.fix == "erase"]
    if writes:
        ck.base.set_many(writes)
        ck._count(records_written=len(writes))
    if erases:
        ck.base.erase_values(erases)
