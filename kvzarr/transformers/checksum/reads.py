"""The read half of :class:`~.transformer.Checksum`: whole values (one read of values and
records, verified with one pass of the whole-value checksum), values streamed and
verified ahead of the reader, byte ranges widened to whole blocks, and the re-reads of a
store without transactions. A mixin: the state it uses (``base``, ``_transactional``,
the transaction's record cache, the stats) belongs to the class.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...runtime import workers
from ...stores.byteranges import ByteRequest, RangeRequest, apply_byte_request, check_request
from . import record as rec
from .checks import (UNPROTECTED_VALUE, Found, check_value, decode_found, mismatch_error,
                     record_error)
from .record import Mismatch, Record
from .rereads import RECORD_PREFIX, Read, retrying
from .spans import Span, absolute, span_of, spans

#: a batch is checksummed on the worker pool from this many bytes, when its values are
#: big enough for the checksum to run without the GIL (crc32c releases it from 32 KiB)
_POOL_BYTES = 4 * 1024 * 1024
_POOL_MEAN = 32 * 1024
#: values handed out by iter_values are verified in groups of this many bytes, this
#: many groups ahead of the consumer (measured: package docstring, "Speed")
_AHEAD_BYTES = 4 * 1024 * 1024
_AHEAD_GROUPS = 1


class Reads:
    """Every read of the checksum transformer (see the module docstring)."""

    def _parallel(self, count: int, total: int) -> bool:
        return count > 1 and total >= _POOL_BYTES and total >= count * _POOL_MEAN

    def _check_values(self, keys: Sequence[str], values: Sequence[Any],
                      found: dict[str, Found]) -> dict[str, Read]:
        """Check whole values (None where absent) against their records, on the pool
        when the batch is big."""
        items = [(k, v) for k, v in zip(keys, values) if v is not None]
        total = sum(len(v) for _, v in items)
        if self._parallel(len(items), total):
            outcomes = workers.map_grouped(
                lambda item: check_value(item[0], found.get(item[0]), item[1]), items,
                parallel=True)
        else:
            outcomes = [check_value(k, found.get(k), v) for k, v in items]
        return {k: Read(v, outcome, len(v), ()) for (k, v), outcome in zip(items, outcomes)}

    # -- whole values ----------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """One value: outside a transaction its record and then the value as two plain
        reads of the store (no transaction to begin and end: on SQL that is two
        statements instead of four); a check that fails there is decided on one
        snapshot (a writer may have come between the two reads)."""
        key = self._key(key)
        if not self._transactional or self._current_transaction() is not None:
            return self._get_values([key], views=False)[0]
        found = self.base.get(RECORD_PREFIX + key)
        value = self.base.get(key)
        if value is None:
            return None
        outcome = check_value(key, found, value)
        if outcome is not None:
            return self._get_values([key], views=False)[0]
        with self._stats_lock:
            self._stats["values_verified"] += 1
            self._stats["bytes_verified"] += len(value)
        return value

    _get = get

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self._get_values([self._key(k) for k in keys], views=False)

    def get_many_views(self, keys: Sequence[str]) -> list[Any]:
        views = self._transactional and self._current_transaction() is not None
        return self._get_values([self._key(k) for k in keys], views=views)

    def iter_values(self, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """As :meth:`Store.iter_values`, every value verified before it is handed out.
        Inside a transaction of a store with snapshots the values are verified ahead
        of the consumer, in groups on the worker pool, while it uses the ones before:
        a reader that copies values out one by one (the engine does, for plain chunks)
        then pays little more than its copies (package docstring, "Speed")."""
        checked = [self._key(k) for k in keys]
        if not checked:
            return
        if not (self._transactional and self._current_transaction() is not None):
            yield from enumerate(self.get_many_views(checked))
            return
        found = self._records(list(dict.fromkeys(checked)))
        streamed = self.base.streams_values
        source = (self.base.iter_values(checked) if streamed
                  else enumerate(self.base.get_many_views(checked)))
        yield from self._verified_ahead(source, checked, found, streamed)

    def _verified_ahead(self, source: Iterable[tuple[int, Any]], keys: list[str],
                        found: dict[str, Found], streamed: bool
                        ) -> Iterator[tuple[int, Any]]:
        """``source``'s values, each handed out once verified. Over a base that hands
        out views of its snapshot (not ``streamed``), values of at least
        :data:`_POOL_MEAN` bytes (the checksum runs without the GIL) are verified on the
        pool in groups of :data:`_AHEAD_BYTES`, :data:`_AHEAD_GROUPS` groups ahead of
        the consumer, each group shared with the reader (:class:`_Shared`), so busy
        cores cost no more than checking inline. Values a streaming base fetches into
        new memory are verified on
        the spot, while they are in the cache: holding a few megabytes of them made
        every read fault in new pages, and a worker waits for the GIL the fetching
        thread holds (both measured: package docstring, "Speed")."""
        pending: deque[_Shared] = deque()
        group: list[tuple[int, Any]] = []
        size = 0
        verified = [0, 0]
        # (a worker waiting on the pool could wait on itself)
        ahead = not streamed and not workers.in_worker()

        def check(item: tuple[int, Any]) -> Any:
            return check_value(keys[item[0]], found.get(keys[item[0]]), item[1])

        def settle(shared: _Shared) -> Iterator[tuple[int, Any]]:
            for (i, value), outcome in zip(shared.items, shared.finish()):
                if outcome is None:
                    verified[0] += 1
                    verified[1] += len(value)
                else:       # raises, or warns of (or trusts) a value without a record
                    self._settle({keys[i]: Read(value, outcome, len(value), ())})
                yield i, value

        try:
            for i, value in source:
                if value is None:
                    yield i, None
                    continue
                n = len(value)
                if not ahead or n < _POOL_MEAN:
                    key = keys[i]
                    outcome = check_value(key, found.get(key), value)
                    if outcome is None:
                        verified[0] += 1
                        verified[1] += n
                    else:
                        self._settle({key: Read(value, outcome, n, ())})
                    yield i, value
                    continue
                group.append((i, value))
                size += n
                if size >= _AHEAD_BYTES:
                    pending.append(_Shared(group, check))
                    group, size = [], 0
                    while len(pending) > _AHEAD_GROUPS:
                        yield from settle(pending.popleft())
            if group:
                pending.append(_Shared(group, check))
            while pending:
                yield from settle(pending.popleft())
        finally:
            # (a consumer that stops early, or a failure: no check may still read a
            # value of the transaction once it ends)
            for shared in pending:
                shared.abandon()
            if verified[0]:
                self._count(values_verified=verified[0], bytes_verified=verified[1])

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
        found = {k: raw if raw is None or type(raw) is bytes else bytes(raw)
                 for k, raw in zip(want, got[len(keys):])}
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
            found = dict(zip(subset, self.base.get_many(
                [RECORD_PREFIX + k for k in subset])))
            values = self.base.get_many(subset)
            reads = self._check_values(subset, values, found)
            for k, v in zip(subset, values):
                reads.setdefault(k, Read(None, None, -1, ()))
                reads[k].seen = (found[k], v)
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

    # -- reading byte ranges ---------------------------------------------------------------

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
        elif self._current_transaction() is not None:
            reads = self._read_ranges(items, by_key, self._records(list(by_key)))
        else:
            # the records, then the ranges, without a transaction around them (on SQL a
            # BEGIN and a COMMIT fewer); a check that fails is decided on one snapshot
            reads = self._read_ranges(items, by_key, self._records(list(by_key)))
            if any(r.outcome is not None for r in reads.values()):
                with self.transaction(write=False):
                    reads = self._read_ranges(items, by_key,
                                              self._records(list(by_key)))
        self._settle(reads, ranges=True)
        out: list[bytes | None] = [None] * len(items)
        for k, where in by_key.items():
            for i, answer in zip(where, reads[k].answer):
                out[i] = answer
        return out

    def _records_loose(self, keys: list[str]) -> dict[str, Found]:
        return dict(zip(keys, map(decode_found, self.base.get_many(
            [RECORD_PREFIX + k for k in keys]))))

    def _read_ranges(self, items: list[tuple[str, ByteRequest | None]],
                     by_key: dict[str, list[int]], found: dict[str, Found]
                     ) -> dict[str, Read]:
        """One attempt at the ranges of ``by_key``'s keys: one base call for all of them;
        per key its answers (in the order of its requests) and what the check found."""
        asks: list[tuple[str, ByteRequest | None]] = []
        plans: dict[str, Any] = {}
        found = {k: decode_found(f) if type(f) is bytes else f
                 for k, f in ((k, found.get(k)) for k in by_key)}
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
                    reads[key] = Read(answers, check_value(key, f, value), len(value),
                                       (f.raw, value))
            else:
                answers = got[plan[1]:plan[1] + len(where)]
                present = any(a is not None for a in answers)
                outcome = (None if not present else UNPROTECTED_VALUE if f is None
                           else record_error(key, f))
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
                # (the last span asks for a byte more: an answer that long is a longer value)
                size = (f"more than {state.length}" if len(data) > expected
                        else str(s.start + len(data)))
                m = Mismatch(min(s.start + len(data), state.length) // bs, None, None,
                             f"the value is {size} bytes long, its record says "
                             f"{state.length}")
                return Read(None, mismatch_error(key, m, bs), -1, seen)
            if s.first == 0 and s.end == state.length:
                m = rec.check_whole(state, data, bs)      # the whole value
            else:
                m = rec.check_span(state, data, bs, s.first)
            if m is not None:
                return Read(None, mismatch_error(key, m, bs), -1, seen)
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



class _Shared:
    """One group of values checked by a pool worker from the front and, once the reader
    needs their outcomes, by the reader from the back (as :func:`workers.share` shares a
    batch): neither waits for a value the other has not started, and the reader waits at
    most for the one value the worker is checking. When the cores are busy elsewhere and
    the worker starts late or runs slowly, the reader does nearly all of it, as if it
    checked every value on the spot."""

    def __init__(self, items: list[tuple[int, Any]], check: Callable[[Any], Any]) -> None:
        self.items = items
        self.outcomes: list[Any] = [None] * len(items)
        self._check = check
        self._front, self._back = 0, len(items)
        self._running = 0                   # values the worker is checking (0 or 1)
        self._cond = threading.Condition()
        workers.POOL.submit(self._work)

    def _one(self, i: int) -> None:
        try:
            self.outcomes[i] = self._check(self.items[i])
        except BaseException as e:     # (a failure of the check itself: raised in settle)
            self.outcomes[i] = e

    def _work(self) -> None:
        while True:
            with self._cond:
                if self._front >= self._back:
                    return
                i = self._front
                self._front += 1
                self._running += 1
            try:
                self._one(i)
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()

    def finish(self) -> list[Any]:
        """Every outcome, checking what the worker has not started."""
        while True:
            with self._cond:
                if self._front >= self._back:
                    break
                self._back -= 1
                i = self._back
            self._one(i)
        self.abandon()
        return self.outcomes

    def abandon(self) -> None:
        """Start nothing more; return once the worker checks nothing any more."""
        with self._cond:
            self._back = self._front
            while self._running:
                self._cond.wait()
