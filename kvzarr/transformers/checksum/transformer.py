"""The :class:`Checksum` storage transformer: CRC-32C per block of every value, kept in
records beside the values and verified on every read. The design, the record format,
what a crash leaves behind and the block-size measurements are in the package docstring
(:mod:`kvzarr.transformers.checksum`); the format itself in :mod:`.record`.
"""

from __future__ import annotations

import threading
import warnings
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...errors import (ChecksumMismatchError, ChecksumMissingError, ChecksumRecordError,
                       InvalidByteRangeError, InvalidKeyError, KvzarrError,
                       StoreConfigError, UnprotectedValueWarning, UnsupportedOperationError)
from ...runtime import workers
from ...stores.base import Store, _as_buffer, _as_bytes
from ...stores.byteranges import ByteRequest, RangeRequest, apply_byte_request
from ...stores.keys import RESERVED_PREFIX, check_key, check_prefix
from ..base import Transformer, TransformerTxn, reject_unknown_options
from . import record as rec
from .record import (STATE_ABSENT, STATE_UNPROTECTED, UNPROTECTED, Mismatch, Record,
                     RecordFormatError, State)
from .rereads import RECORD_PREFIX, Read, retrying
from .scrub import verify as _scrub
from .spans import Span, absolute, check_request, span_of, spans

_NREC = len(RECORD_PREFIX)
#: the block size of new records (see the package docstring for the measurements)
DEFAULT_BLOCK_SIZE = 64 * 1024
MIN_BLOCK_SIZE, MAX_BLOCK_SIZE = 64, 64 * 1024 * 1024
MISSING = ("fail", "warn", "trust")
#: a batch is checksummed on the worker pool from this many bytes, when its values are
#: big enough for the checksum to run without the GIL (crc32c releases it from 32 KiB)
_POOL_BYTES = 4 * 1024 * 1024
_POOL_MEAN = 32 * 1024
#: records read and written per batch by erase_prefix on a store without transactions
_BATCH = 1000


class _BadRecord:
    """A record that would not decode (kept in place of a Record: the value it protects
    cannot be verified, which only matters if the value is there)."""
    __slots__ = ("reason", "raw")

    def __init__(self, reason: str, raw: bytes) -> None:
        self.reason, self.raw = reason, raw


#: the outcome of a check of a value that has no record
UNPROTECTED_VALUE = "unprotected"
Found = Record | _BadRecord | None


class Checksum(Transformer):
    """CRC-32C of every block of every value, stored out of band under
    ``__kvzarr/crc/<key>`` in the same transaction as the value and verified on every read.

    ``block_size``: bytes per checksummed block of new records (a power of two from
    64 B to 64 MiB; default 64 KiB, chosen by measurement: package docstring). Records
    keep the block size they were written with.
    ``missing``: what a read does with a value that has no record (written by another
    tool): ``"fail"`` (default) raises :class:`~kvzarr.errors.ChecksumMissingError`,
    ``"warn"`` returns it with an :class:`~kvzarr.errors.UnprotectedValueWarning`,
    ``"trust"`` returns it silently. Every read counts them in :meth:`stats`.

    Thread-safe as far as the store under it is; a read that fails verification raises
    :class:`~kvzarr.errors.ChecksumMismatchError` (or its subclasses for a damaged record
    and a missing one) naming the key, the block and both checksums, and returns nothing.
    """

    name = "checksum"
    needs_write = False

    def __init__(self, base: Store | None = None, *, block_size: int = DEFAULT_BLOCK_SIZE,
                 missing: str = "fail", **unknown: Any) -> None:
        reject_unknown_options("Checksum", unknown)
        if isinstance(block_size, bool) or not isinstance(block_size, int) \
                or block_size & (block_size - 1) or not \
                MIN_BLOCK_SIZE <= block_size <= MAX_BLOCK_SIZE:
            raise StoreConfigError(
                f"block_size must be a power of two from {MIN_BLOCK_SIZE} to "
                f"{MAX_BLOCK_SIZE} bytes, not {block_size!r}", field="transformers.block_size")
        if missing not in MISSING:
            raise StoreConfigError(f"missing must be one of {', '.join(MISSING)}, not "
                                   f"{missing!r}", field="transformers.missing")
        self.block_size = block_size
        self.missing = missing
        self._stats = dict.fromkeys(
            ("values_verified", "range_reads_verified", "bytes_verified", "mismatches",
             "record_errors", "unprotected_reads", "records_written", "rereads"), 0)
        self._stats_lock = threading.Lock()
        self._transactional = False
        super().__init__(base)

    def bind(self, base: Store) -> "Checksum":
        super().bind(base)
        if base.max_key_bytes is not None:
            # a key must fit under the record prefix too: refused at the top, before
            # anything is written
            self.max_key_bytes = base.max_key_bytes - _NREC
            if self.max_key_bytes < 1:
                raise StoreConfigError("the store's keys are too short for checksum "
                                       "records", field="transformers")
        self._transactional = base.capabilities.transactional
        return self

    def options(self) -> dict[str, Any]:
        return {"block_size": self.block_size, "missing": self.missing}

    def stats(self) -> dict[str, int]:
        """``values_verified``: whole values read and verified; ``range_reads_verified``:
        keys read in part (all the ranges of a key in one call count once); ``bytes_verified``: bytes checksummed by reads; ``mismatches`` and
        ``record_errors``: failed checks; ``unprotected_reads``: values read without a
        record; ``records_written``; ``rereads``: extra reads on a
        store without transactions while a writer changed the key."""
        with self._stats_lock:
            return dict(self._stats)

    def _count(self, **n: int) -> None:
        with self._stats_lock:
            for name, value in n.items():
                self._stats[name] += value

    # -- keys ------------------------------------------------------------------------------

    def _key(self, key: str) -> str:
        check_key(key, self.max_key_bytes)
        if key.startswith(RECORD_PREFIX):
            raise InvalidKeyError(f"keys under {RECORD_PREFIX!r} hold checksum records",
                                  key=key)
        return key

    @staticmethod
    def _own_prefix(prefix: str) -> None:
        if prefix.startswith(RECORD_PREFIX):
            raise InvalidKeyError(f"keys under {RECORD_PREFIX!r} hold checksum records",
                                  key=prefix)

    # -- transactions: a transaction's records are read once -----------------------------

    def _begin(self, write: bool) -> TransformerTxn:
        handle = super()._begin(write)
        # On a store with snapshots a record read in a transaction stays valid until it
        # ends (this transformer's own writes update it): key -> Record | _BadRecord | None.
        handle.state = {} if self._transactional else None
        return handle

    def _cache(self) -> dict[str, Found] | None:
        handle = self._current_transaction()
        return None if handle is None else handle.state

    def _forget(self, keys: Iterable[str]) -> None:
        cache = self._cache()
        if cache:
            for k in keys:
                cache.pop(k, None)

    # -- records ---------------------------------------------------------------------------

    @staticmethod
    def _decode(raw: Any) -> Found:
        if raw is None:
            return None
        try:
            return rec.decode(raw)
        except RecordFormatError as e:
            return _BadRecord(str(e), bytes(raw))

    def _records(self, keys: Sequence[str]) -> dict[str, Found]:
        """The records of ``keys`` (unique), from this transaction's cache or the base."""
        cache = self._cache()
        want = [k for k in keys if cache is None or k not in cache]
        found = dict(zip(want, map(self._decode, self.base.get_many(
            [RECORD_PREFIX + k for k in want])))) if want else {}
        if cache is None:
            return found
        cache.update(found)
        return cache

    def _encode(self, states: Sequence[State], block_size: int | None = None) -> bytes:
        return rec.encode(block_size or self.block_size, states)

    # -- checks ----------------------------------------------------------------------------

    def _mismatch(self, key: str, m: Mismatch, block_size: int) -> ChecksumMismatchError:
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
            hint="the value changed after its checksum record was written: damaged "
                 "storage, or a rewrite by a tool that keeps no records; `kvzarr verify` "
                 "lists every such key")

    @staticmethod
    def _record_error(key: str, bad: _BadRecord) -> ChecksumRecordError:
        return ChecksumRecordError(
            f"the checksum record of this value is damaged: {bad.reason}", key=key,
            hint="the value cannot be verified; `kvzarr verify` lists every such key")

    def _outcome(self, key: str, found: Found, value: Any) -> Any:
        """Check a whole present value: None (good), UNPROTECTED_VALUE or an error."""
        if found is None:
            return UNPROTECTED_VALUE
        if type(found) is _BadRecord:
            return self._record_error(key, found)
        bs = found.block_size
        if found.final:
            m = rec.check_whole(found.state, value, bs)
            return None if m is None else self._mismatch(key, m, bs)
        # a pending record: a write on a store without transactions did not finish (or
        # is running): the value may hold any of the states
        if any(rec.matches(s, value, bs) for s in found.states):
            return None
        if any(s.kind == UNPROTECTED for s in found.states):
            return UNPROTECTED_VALUE
        newest = next(s for s in found.states if s.present)
        m = rec.check_whole(newest, value, bs)
        return None if m is None else self._mismatch(key, m, bs)

    def _settle(self, reads: dict[str, Read], ranges: bool = False) -> None:
        """Count what a read found and act on it: raise the first failure, apply the
        ``missing`` policy to values without records."""
        failed = [r.outcome for r in reads.values()
                  if r.outcome is not None and r.outcome is not UNPROTECTED_VALUE]
        unprotected = [k for k, r in reads.items() if r.outcome is UNPROTECTED_VALUE]
        good = [r for r in reads.values() if r.outcome is None and r.nbytes >= 0]
        self._count(**{"range_reads_verified" if ranges else "values_verified": len(good)},
                    bytes_verified=sum(r.nbytes for r in good),
                    mismatches=sum(type(e) is ChecksumMismatchError for e in failed),
                    record_errors=sum(type(e) is ChecksumRecordError for e in failed),
                    unprotected_reads=len(unprotected))
        if failed:
            raise failed[0]
        if not unprotected or self.missing == "trust":
            return
        if self.missing == "fail":
            raise ChecksumMissingError(
                "this value has no checksum record (it was not written through the "
                "checksum transformer)", key=unprotected[0],
                hint="add records with `kvzarr verify TARGET --repair-missing`, or open with "
                     "missing='warn' or 'trust'")
        for key in unprotected:
            warnings.warn(UnprotectedValueWarning(
                f"read a value that has no checksum record, unverified (key {key!r})"),
                stacklevel=4)

    def _parallel(self, count: int, total: int) -> bool:
        return count > 1 and total >= _POOL_BYTES and total >= count * _POOL_MEAN

    def _check_values(self, keys: Sequence[str], values: Sequence[Any],
                      found: dict[str, Found]) -> dict[str, Read]:
        """Check whole values (None where absent) against their records, on the pool
        when the batch is big."""
        items = [(k, v) for k, v in zip(keys, values) if v is not None]
        total = sum(len(v) for _, v in items)

        def check(item: tuple[str, Any]) -> Any:
            return self._outcome(item[0], found.get(item[0]), item[1])

        outcomes = workers.map_grouped(check, items, parallel=self._parallel(len(items), total))
        reads = {}
        for (k, v), outcome in zip(items, outcomes):
            reads[k] = Read(v, outcome, len(v), ())
        return reads

    # -- reading whole values ----------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        return self._get_values([self._key(key)], views=False)[0]

    def _get(self, key: str) -> bytes | None:
        return self._get_values([self._key(key)], views=False)[0]

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self._get_values([self._key(k) for k in keys], views=False)

    def get_many_views(self, keys: Sequence[str]) -> list[Any]:
        views = self._transactional and self._current_transaction() is not None
        return self._get_values([self._key(k) for k in keys], views=views)

    def iter_values(self, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """As :meth:`Store.iter_values`; over a store that streams, each value is
        verified as it arrives and handed out, so few are held at once."""
        checked = [self._key(k) for k in keys]
        if not (self.base.streams_values and self._transactional
                and self._current_transaction() is not None):
            yield from enumerate(self.get_many_views(checked))
            return
        found = self._records(list(dict.fromkeys(checked)))
        count = nbytes = 0
        try:
            for i, value in self.base.iter_values(checked):
                if value is not None:
                    key = checked[i]
                    outcome = self._outcome(key, found.get(key), value)
                    if outcome is not None:      # raises, or warns of an unprotected one
                        self._settle({key: Read(value, outcome, len(value), ())})
                    else:
                        count += 1
                        nbytes += len(value)
                yield i, value
        finally:
            self._count(values_verified=count, bytes_verified=nbytes)

    def _get_values(self, keys: list[str], views: bool) -> list[Any]:
        if not keys:
            return []
        if not self._transactional:
            return self._loose_values(keys)
        # values and the records not yet known, in one read of the base (one snapshot)
        cache = self._cache()
        want = [k for k in dict.fromkeys(keys) if cache is None or k not in cache]
        fetch = keys + [RECORD_PREFIX + k for k in want]
        got = self.base.get_many_views(fetch) if views else self.base.get_many(fetch)
        found = dict(zip(want, map(self._decode, got[len(keys):])))
        if cache is not None:
            cache.update(found)
            found = cache
        values = got[:len(keys)]
        self._settle(self._check_values(keys, values, found))
        return values

    # -- stores without transactions: records first, then values, then a re-read ---------

    def _loose_values(self, keys: list[str]) -> list[Any]:
        unique = list(dict.fromkeys(keys))

        def attempt(subset: list[str]) -> dict[str, Read]:
            # The record is read BEFORE the value: a writer changes the record before
            # and after the value, so a record that is the same on a re-read proves no
            # write happened in between (package docstring, "Stores without
            # transactions").
            found = dict(zip(subset, map(self._decode, self.base.get_many(
                [RECORD_PREFIX + k for k in subset]))))
            values = self.base.get_many(subset)
            reads = self._check_values(subset, values, found)
            for k, v in zip(subset, values):
                raw = getattr(found[k], "raw", None)
                reads.setdefault(k, Read(None, None, -1, ()))
                reads[k].seen = (raw, v)
            return reads

        reads = self._retrying(attempt, unique)
        self._settle(reads)
        return [reads[k].answer for k in keys]

    def _retrying(self, attempt: Callable[[list[str]], dict[str, Read]],
                  keys: list[str]) -> dict[str, Read]:
        reads, tries = retrying(attempt, keys)
        if tries:
            self._count(rereads=tries)
        return reads

    # -- reading byte ranges -----------------------------------------------------------------

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        return self.get_partial_values([(key, request)])[0]

    def get_partial_values(
            self, key_ranges: Iterable[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        """As :meth:`Store.get_partial_values`. Each request is widened to the whole blocks
        it touches (the record gives the value's length, so offsets and suffixes become
        absolute), overlapping blocks of one key are read once, every range of the call
        goes to the base in ONE ``get_partial_values`` (so a SQL store still serves all
        the ranges of a key in one statement), the blocks are verified and the requested
        bytes cut out."""
        items = [(self._key(k), check_request(r)) for k, r in key_ranges]
        if not items:
            return []
        by_key: dict[str, list[int]] = {}
        for i, (k, _) in enumerate(items):
            by_key.setdefault(k, []).append(i)
        if not self._transactional:
            def attempt(subset: list[str]) -> dict[str, Read]:
                return self._read_ranges(items, {k: by_key[k] for k in subset},
                                         self._records_loose(subset))
            reads = self._retrying(attempt, list(by_key))
        else:
            with self.transaction(write=False):
                reads = self._read_ranges(items, by_key, self._records(list(by_key)))
        self._settle(reads, ranges=True)
        out: list[bytes | None] = [None] * len(items)
        for k, where in by_key.items():
            for i, answer in zip(where, reads[k].answer):
                out[i] = answer
        return out

    def _records_loose(self, keys: list[str]) -> dict[str, Found]:
        return dict(zip(keys, map(self._decode, self.base.get_many(
            [RECORD_PREFIX + k for k in keys]))))

    def _read_ranges(self, items: list[tuple[str, ByteRequest | None]],
                     by_key: dict[str, list[int]], found: dict[str, Found]
                     ) -> dict[str, Read]:
        """One attempt at the ranges of ``by_key``'s keys: one base call for all of them;
        per key its answers (in the order of its requests) and what the check found."""
        asks: list[tuple[str, ByteRequest | None]] = []
        plans: dict[str, Any] = {}
        for key, where in by_key.items():
            f = found.get(key)
            if isinstance(f, Record) and f.final:
                length, bs = f.state.length, f.block_size
                bounds = [absolute(items[i][1], length) for i in where]
                sp = spans(bounds, length, bs)
                plans[key] = ("spans", len(asks), sp, bounds)
                # a key whose requests are all empty still needs an answer: is it there?
                asks.extend([(key, s.request()) for s in sp] or [(key, RangeRequest(0, 0))])
            elif isinstance(f, Record):
                plans[key] = ("whole", len(asks))        # pending: read it whole
                asks.append((key, None))
            else:                                        # no record, or a damaged one
                plans[key] = ("asked", len(asks))
                asks.extend((key, items[i][1]) for i in where)
        got = self.base.get_partial_values(asks)
        reads = {}
        for key, where in by_key.items():
            plan, f = plans[key], found.get(key)
            if plan[0] == "spans":
                reads[key] = self._check_spans(key, f, got, *plan[1:], where)
            elif plan[0] == "whole":
                value = got[plan[1]]
                if value is None:
                    reads[key] = Read([None] * len(where), None, -1, (f.raw, None))
                else:
                    answers = [apply_byte_request(value, items[i][1]) for i in where]
                    reads[key] = Read(answers, self._outcome(key, f, value), len(value),
                                       (f.raw, value))
            else:
                answers = got[plan[1]:plan[1] + len(where)]
                present = any(a is not None for a in answers)
                outcome = (None if not present else UNPROTECTED_VALUE if f is None
                           else self._record_error(key, f))
                reads[key] = Read(answers, outcome, -1,
                                   (getattr(f, "raw", None), *answers))
        return reads

    def _check_spans(self, key: str, f: Record, got: list[Any], at: int, sp: list[Span],
                     bounds: list[tuple[int, int]], where: list[int]) -> Read:
        answers = got[at:at + max(1, len(sp))]
        seen = (f.raw, *answers)
        if answers[0] is None:
            return Read([None] * len(where), None, -1, seen)
        state, bs = f.state, f.block_size
        nbytes = 0
        for s, data in zip(sp, answers):
            if data is None:        # gone between two ranges: a store without snapshots
                return Read([None] * len(where), None, -1, seen)
            expected = s.end - s.start
            if len(data) != expected:
                actual = (f"longer than {state.length}" if len(data) > expected
                          else str(s.start + len(data)))
                m = Mismatch(min(s.start + len(data), state.length) // bs, None, None,
                             f"the value is {actual} bytes long, its record says "
                             f"{state.length}")
                return Read(None, self._mismatch(key, m, bs), -1, seen)
            if s.first == 0 and s.end == state.length:
                m = rec.check_whole(state, data, bs)      # the whole value: one pass
            else:
                m = rec.first_bad_block(state, data, bs, s.first)
            if m is not None:
                return Read(None, self._mismatch(key, m, bs), -1, seen)
            nbytes += expected
        out = []
        for start, end in bounds:
            if start == end:
                out.append(b"")
                continue
            s = span_of(sp, start, end)
            data = answers[sp.index(s)]
            if start == s.start and end - start == len(data):
                out.append(data if type(data) is bytes else bytes(data))
            else:
                out.append(bytes(data[start - s.start:end - s.start]))
        return Read(out, None, nbytes, seen)

    # -- the rest of the reads: no bytes, nothing to verify ------------------------------

    def exists(self, key: str) -> bool:
        return self.base.exists(self._key(key))

    def _exists(self, key: str) -> bool:
        return self.base.exists(self._key(key))

    def exists_many(self, keys: Sequence[str]) -> list[bool]:
        return self.base.exists_many([self._key(k) for k in keys])

    def getsize(self, key: str) -> int | None:
        return self.base.getsize(self._key(key))

    def _getsize(self, key: str) -> int | None:
        return self.base.getsize(self._key(key))

    # -- listing: records are never shown -------------------------------------------------

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        self._own_prefix(prefix)
        if not RECORD_PREFIX.startswith(prefix):
            return super()._list_prefix(prefix)
        return self._visible(prefix)

    def _visible(self, prefix: str) -> Iterator[str]:
        """Every key under ``prefix`` (``""`` or ``"__kvzarr/"``, which hold the records)
        but the records: the children of ``prefix`` in order, each listed by its own
        prefix scan, so the records' subtree is skipped, never scanned."""
        for child in list(self.base.list_dir(prefix)):
            full = prefix + child
            if full == RECORD_PREFIX:
                continue
            if not child.endswith("/"):
                yield full
            elif RECORD_PREFIX.startswith(full):
                yield from self._visible(full)
            else:
                yield from self.base.list_prefix(full)

    def _list_dir(self, prefix: str) -> Iterator[str]:
        self._own_prefix(prefix)
        if prefix == "":
            children = list(self.base.list_dir(""))
            if RESERVED_PREFIX in children and not any(
                    c != "crc/" for c in self.base.list_dir(RESERVED_PREFIX)):
                children.remove(RESERVED_PREFIX)     # it holds nothing but records
            return iter(children)
        if prefix == RESERVED_PREFIX:
            return iter([c for c in self.base.list_dir(prefix) if c != "crc/"])
        return self.base.list_dir(prefix)

    # -- writing whole values ----------------------------------------------------------------

    def _set(self, key: str, value: bytes) -> None:
        self._write_values([(self._key(key), value)])

    def set_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        self._check_writable()
        value_of = _as_buffer if self.copies_values else _as_bytes
        self._write_values([(self._key(k), value_of(v)) for k, v in items])

    def _states(self, values: Sequence[Any]) -> list[State]:
        bs = self.block_size
        total = sum(len(memoryview(v).cast("B")) for v in values)
        return workers.map_grouped(lambda v: rec.state_of(v, bs), values,
                                   parallel=self._parallel(len(values), total))

    def _write_values(self, items: list[tuple[str, Any]]) -> None:
        if not items:
            return
        if not self._transactional:
            self._write_loose(items)
            return
        states = self._states([v for _, v in items])
        raws = [self._encode([s]) for s in states]
        pairs = []
        for (k, v), raw in zip(items, raws):
            pairs += [(k, v), (RECORD_PREFIX + k, raw)]
        try:
            self.base.set_many(pairs)            # one transaction: value and record
        except BaseException:
            self._forget(k for k, _ in items)
            raise
        cache = self._cache()
        if cache is not None:
            for (k, _), s, raw in zip(items, states, raws):
                cache[k] = Record(self.block_size, (s,), raw)
        self._count(records_written=len(items))

    # -- stores without transactions: a two-phase record --------------------------------------

    def _resolve(self, key: str, found: Found, exists: bool | None = None
                 ) -> State | None:
        """What the value of ``key`` holds now, as a state: its final record's state (not
        read again), the state of a pending record it matches (read to find out),
        ABSENT, or UNPROTECTED (no record, or a damaged one); None when it matches no
        state of its pending record (damaged)."""
        if found is None:
            if exists is None:
                exists = self.base.exists(key)
            return STATE_UNPROTECTED if exists else STATE_ABSENT
        if type(found) is _BadRecord:
            return STATE_UNPROTECTED
        if found.final:
            return found.state
        value = self.base.get(key)     # an earlier write did not finish: which state?
        if value is None:
            return STATE_ABSENT
        bs = found.block_size
        for s in found.states:
            if rec.matches(s, value, bs):
                return s
        return STATE_UNPROTECTED if any(s.kind == UNPROTECTED for s in found.states) \
            else None

    def _priors(self, keys: list[str]) -> tuple[dict[str, Found], dict[str, State]]:
        """The records of ``keys`` and what each value holds now (a value that matches
        nothing counts as unprotected: its content is unknown)."""
        found = self._records_loose(keys)
        missing = [k for k in keys if found[k] is None]
        exists = dict(zip(missing, self.base.exists_many(missing))) if missing else {}
        return found, {k: self._resolve(k, found[k], exists.get(k)) or STATE_UNPROTECTED
                       for k in keys}

    def _write_loose(self, items: list[tuple[str, Any]]) -> None:
        """Pending records (new and old state) first, then the values, then the final
        records: a crash anywhere leaves every value matching its record."""
        latest = dict(items)                     # later items win, as in set_many
        keys = list(latest)
        states = dict(zip(keys, self._states(list(latest.values()))))
        _, priors = self._priors(keys)
        pending = [(RECORD_PREFIX + k, self._encode([states[k], priors[k]]))
                   for k in keys if not priors[k].same(states[k])]
        if pending:
            self.base.set_many(pending)
        self.base.set_many(list(latest.items()))
        self.base.set_many([(RECORD_PREFIX + k, self._encode([states[k]])) for k in keys])
        self._count(records_written=len(keys))

    def _erase_loose(self, keys: list[str]) -> None:
        """Records become pending (absent, or what the value holds) first, then the values
        go, then the records."""
        keys = list(dict.fromkeys(keys))
        found, priors = self._priors(keys)
        self._mark(priors)
        self.base.erase_values(keys)
        recorded = [RECORD_PREFIX + k for k in keys if found[k] is not None]
        if recorded:
            self.base.erase_values(recorded)

    def _mark(self, priors: dict[str, State]) -> None:
        pending = [(RECORD_PREFIX + k, self._encode([STATE_ABSENT, p]))
                   for k, p in priors.items() if p.present]
        if pending:
            self.base.set_many(pending)

    # -- erasing ---------------------------------------------------------------------------

    def _erase(self, key: str) -> None:
        self.erase_values([key])

    def erase_values(self, keys: Iterable[str]) -> None:
        self._check_deletable()
        checked = [self._key(k) for k in keys]
        if not checked:
            return
        if not self._transactional:
            self._erase_loose(checked)
            return
        try:
            self.base.erase_values(checked + [RECORD_PREFIX + k for k in checked])
        finally:
            self._forget(checked)

    def _erase_prefix(self, prefix: str) -> None:
        # (Store.erase_prefix runs this inside self.transaction(): one base transaction)
        self._own_prefix(prefix)
        cache = self._cache()
        if cache:
            cache.clear()
        if not self._transactional:
            self._mark_erased(prefix)
        if prefix == "" and self._transactional:
            self.base.erase_prefix("")
            return
        self._erase_visible(prefix)
        self.base.erase_prefix(RECORD_PREFIX + prefix)

    def _mark_erased(self, prefix: str) -> None:
        """Before a prefix is erased on a store without transactions: every record under
        it becomes pending (absent, or what the value holds), so a crash half way through
        the erase leaves no record that contradicts what is left."""
        names = self.base.list_prefix(RECORD_PREFIX + prefix)
        batch: list[str] = []
        for name in names:
            batch.append(name[_NREC:])
            if len(batch) == _BATCH:
                self._mark_batch(batch)
                batch = []
        if batch:
            self._mark_batch(batch)

    def _mark_batch(self, keys: list[str]) -> None:
        self._mark(self._priors(keys)[1])

    def _erase_visible(self, prefix: str) -> None:
        """Erase every key under ``prefix`` except the records (which the caller erases
        by their own prefix)."""
        if not RECORD_PREFIX.startswith(prefix):
            self.base.erase_prefix(prefix)
            return
        keys = []
        for child in list(self.base.list_dir(prefix)):
            full = prefix + child
            if full == RECORD_PREFIX:
                continue
            if not child.endswith("/"):
                keys.append(full)
            elif RECORD_PREFIX.startswith(full):
                self._erase_visible(full)
            else:
                self.base.erase_prefix(full)
        if keys:
            self.base.erase_values(keys)

    # -- writing parts of values -----------------------------------------------------------

    def set_partial_values(self, key_start_values: Iterable[tuple[str, int, bytes]]) -> None:
        """As :meth:`Store.set_partial_values`. Only the blocks a write touches get new
        checksums; a block it covers in part is read and verified first (its new checksum
        must not vouch for damaged bytes), and the whole-value checksum is rebuilt from
        the block checksums. A value without a record stays without one."""
        self._check_writable()
        if not self.capabilities.partial_writes:
            raise UnsupportedOperationError(
                f"{self.base!r} does not support partial writes")
        items = [(self._key(k), int(o), _as_bytes(v)) for k, o, v in key_start_values]
        for key, offset, _ in items:
            if offset < 0:
                raise InvalidByteRangeError(f"negative offset {offset}", key=key)
        if not items:
            return
        by_key: dict[str, list[tuple[int, bytes]]] = {}
        for key, offset, value in items:
            by_key.setdefault(key, []).append((offset, value))
        with self.transaction():
            found = (self._records(list(by_key)) if self._transactional
                     else self._records_loose(list(by_key)))
            new: dict[str, State] = {}
            old: dict[str, State] = {}
            for key, writes in by_key.items():
                prior, bs = self._updatable(key, found.get(key))
                if prior.kind == UNPROTECTED:
                    continue                          # it stays without a record
                start = prior if prior.present else rec.state_of(b"", bs)
                old[key], new[key] = prior, self._patched(key, start, bs, writes)
            sizes = {k: self._bs(found.get(k)) for k in new}
            if not self._transactional:
                pending = [(RECORD_PREFIX + k, self._encode([new[k], old[k]], sizes[k]))
                           for k in new if not new[k].same(old[k])]
                if pending:
                    self.base.set_many(pending)
            self.base.set_partial_values(items)
            raws = {k: self._encode([s], sizes[k]) for k, s in new.items()}
            if raws:
                self.base.set_many([(RECORD_PREFIX + k, raw) for k, raw in raws.items()])
            cache = self._cache()
            if cache is not None:
                for k, raw in raws.items():
                    cache[k] = Record(sizes[k], (new[k],), raw)
            self._count(records_written=len(raws))

    def _bs(self, found: Found) -> int:
        return found.block_size if isinstance(found, Record) else self.block_size

    def _updatable(self, key: str, found: Found) -> tuple[State, int]:
        """What a value holds before a part of it is rewritten, and its block size; a
        damaged record, or a value that matches none of its pending record's states,
        refuses the update (its new record would vouch for bytes nobody verified)."""
        bs = self._bs(found)
        if type(found) is _BadRecord:
            raise self._record_error(key, found)
        prior = self._resolve(key, found)
        if prior is None:
            newest = next(s for s in found.states if s.present)
            value = self.base.get(key)
            raise self._mismatch(key, rec.check_whole(newest, value, bs) or Mismatch(
                None, None, None, "the value matches no state of its record"), bs)
        return prior, bs

    def _patched(self, key: str, state: State, bs: int,
                 writes: list[tuple[int, bytes]]) -> State:
        """The state after ``writes`` (applied in order) to a value in ``state``."""
        length = state.length
        new_length = max([length] + [o + len(v) for o, v in writes])
        n = rec.nblocks(new_length, bs)
        dirty = set()
        for o, v in writes:
            if v:
                dirty.update(range(o // bs, -(-(o + len(v)) // bs)))
        if new_length > length:          # grown: the old last block and everything after
            dirty.update(range(length // bs, n))
        # blocks written only in part keep old bytes: read them, verified
        partly = sorted(j for j in dirty if j * bs < length and not _covered(j, bs, writes,
                                                                         new_length))
        old_bytes: dict[int, bytes] = {}
        if partly:
            asks = [(key, RangeRequest(j * bs, min((j + 1) * bs, length))) for j in partly]
            for j, data in zip(partly, self.base.get_partial_values(asks)):
                expect = min((j + 1) * bs, length) - j * bs
                if data is None or len(data) != expect:
                    raise self._mismatch(key, rec.length_mismatch(
                        state, j * bs + (0 if data is None else len(data)), bs), bs)
                m = rec.first_bad_block(state, data, bs, j)
                if m is not None:
                    raise self._mismatch(key, m, bs)
                old_bytes[j] = data
        blocks = array("I", state.blocks)
        blocks.extend([0] * (n - len(blocks)))
        for j in sorted(dirty):
            start, end = j * bs, min((j + 1) * bs, new_length)
            block = bytearray(old_bytes.get(j, b""))
            block.extend(b"\x00" * (end - start - len(block)))
            for o, v in writes:
                lo, hi = max(o, start), min(o + len(v), end)
                if lo < hi:
                    block[lo - start:hi - start] = v[lo - o:hi - o]
            blocks[j] = rec.crc32c(block)
        return State(rec.PRESENT, new_length, rec.whole_from_blocks(blocks, new_length, bs),
                     blocks)

    # -- appending ---------------------------------------------------------------------------

    def append(self, key: str, data: bytes, *, expected_size: int) -> None:
        self._key(key)
        super().append(key, data, expected_size=expected_size)

    def _append(self, key: str, data: bytes, expected_size: int) -> None:
        """Compare-and-append (see :meth:`Store.append`) with the record extended in the
        same transaction. The checksum of the old last block is continued over the new
        bytes (CRC-32C continues from a stored checksum), as is the whole-value one: no
        old byte is read, and a damaged old block stays detectable, since the new record
        extends the stored checksum, not one computed from the damaged bytes."""
        with self.transaction():
            found = (self._records([key]) if self._transactional
                     else self._records_loose([key])).get(key)
            prior, bs = self._updatable(key, found)
            if prior.present and prior.length != expected_size \
                    and self.base.getsize(key) == expected_size:
                # the caller's size is the value's: the record is the one that is wrong
                raise self._mismatch(key, rec.length_mismatch(prior, expected_size, bs), bs)
            if not prior.present or prior.length != expected_size:
                # unprotected (it stays so), or the base refuses: absent, or another size
                self.base.append(key, data, expected_size=expected_size)
                return
            new = _appended(prior, data, bs)
            if not self._transactional:
                self.base.set(RECORD_PREFIX + key, self._encode([new, prior], bs))
            self.base.append(key, data, expected_size=expected_size)
            raw = self._encode([new], bs)
            self.base.set(RECORD_PREFIX + key, raw)
            cache = self._cache()
            if cache is not None:
                cache[key] = Record(bs, (new,), raw)
            self._count(records_written=1)

    # -- the scrub -------------------------------------------------------------------------

    def verify(self, prefix: str = "", *, repair_missing: bool = False,
               on_finding: Callable[[Any], None] | None = None,
               progress: Callable[[int, int], None] | None = None) -> Any:
        """Scrub every value under ``prefix``; see :func:`.scrub.verify`."""
        check_prefix(prefix)
        self._own_prefix(prefix)
        return _scrub(self, prefix, repair_missing=repair_missing, on_finding=on_finding,
                      progress=progress)


def _covered(j: int, bs: int, writes: list[tuple[int, bytes]], new_length: int) -> bool:
    """Whether one write alone covers block ``j`` (its extent in the new value)."""
    start, end = j * bs, min((j + 1) * bs, new_length)
    return any(o <= start and end <= o + len(v) for o, v in writes)


def _appended(state: State, data: bytes, bs: int) -> State:
    """``state`` after ``data`` is appended, by continuing the checksums."""
    length = state.length
    blocks = array("I", state.blocks)
    view = memoryview(data)
    at = 0
    tail = length % bs
    if tail and view:
        take = min(bs - tail, len(view))
        blocks[-1] = rec.crc32c(view[:take], blocks[-1])
        at = take
    blocks.extend(rec.block_crcs(view[at:], bs))
    return State(rec.PRESENT, length + len(view), rec.crc32c(view, state.whole), blocks)
