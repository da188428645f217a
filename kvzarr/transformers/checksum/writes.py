"""The write half of :class:`~.transformer.Checksum`: values and their records in one
transaction of the base, or, on a store without transactions, a pending record (new and
old state) before the values and the final record after; erasures the same way; partial
writes and appends that update only the blocks they touch. A mixin: the state it uses
(``base``, ``_transactional``, the transaction's record cache, the stats) belongs to the
class.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from ...errors import UnsupportedOperationError
from ...runtime import workers
from ...stores.base import as_buffer, as_bytes
from ...stores.byteranges import RangeRequest, check_write_offset
from . import record as rec
from .checks import BadRecord, Found, decode_found, mismatch_error, record_error
from .record import STATE_ABSENT, STATE_UNPROTECTED, UNPROTECTED, Mismatch, Record, State
from .rereads import RECORD_PREFIX

_NREC = len(RECORD_PREFIX)

#: records read and written per batch by erase_prefix on a store without transactions
_BATCH = 1000


class Writes:
    """Every write of the checksum transformer (see the module docstring)."""

    # -- writing whole values --------------------------------------------------------------

    def _set(self, key: str, value: bytes) -> None:
        self._write_values([(self._key(key), value)])

    def set_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        self._check_writable()
        value_of = as_buffer if self.copies_values else as_bytes
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
        # values first, then records: a store that inserts in order (LMDB's putmulti)
        # stays in one region of its tree at a time
        pairs = items + [(RECORD_PREFIX + k, raw) for (k, _), raw in zip(items, raws)]
        try:
            self.base.set_many(pairs)            # one transaction: values and records
        except BaseException:
            self._forget(k for k, _ in items)
            raise
        cache = self._cache()
        if cache is not None:
            for (k, _), raw in zip(items, raws):
                cache[k] = raw
        self._count(records_written=len(items))

    # -- stores without transactions: a two-phase record -----------------------------------

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
        if type(found) is BadRecord:
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
        items = []
        for k, o, v in key_start_values:
            key, value = self._key(k), as_bytes(v)
            items.append((key, check_write_offset(o, len(value), key), value))
        if not items:
            return
        by_key: dict[str, list[tuple[int, bytes]]] = {}
        for key, offset, value in items:
            by_key.setdefault(key, []).append((offset, value))
        with self.transaction():
            found = self._found(list(by_key))
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
                cache.update(raws)
            self._count(records_written=len(raws))

    def _found(self, keys: list[str]) -> dict[str, Found]:
        """The decoded records of ``keys`` (from this transaction's cache or the base)."""
        if not self._transactional:
            return self._records_loose(keys)
        stored = self._records(keys)
        return {k: decode_found(stored[k]) for k in keys}

    def _bs(self, found: Found) -> int:
        return found.block_size if isinstance(found, Record) else self.block_size

    def _updatable(self, key: str, found: Found) -> tuple[State, int]:
        """What a value holds before a part of it is rewritten, and its block size; a
        damaged record, or a value that matches none of its pending record's states,
        refuses the update (its new record would vouch for bytes nobody verified)."""
        bs = self._bs(found)
        if type(found) is BadRecord:
            raise record_error(key, found)
        prior = self._resolve(key, found)
        if prior is None:
            newest = next(s for s in found.states if s.present)
            value = self.base.get(key)
            raise mismatch_error(key, rec.check_whole(newest, value, bs) or Mismatch(
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
                    raise mismatch_error(key, rec.length_mismatch(
                        state, j * bs + (0 if data is None else len(data)), bs), bs)
                m = rec.first_bad_block(state, data, bs, j)
                if m is not None:
                    raise mismatch_error(key, m, bs)
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

    # -- appending -------------------------------------------------------------------------

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
            found = self._found([key])[key]
            prior, bs = self._updatable(key, found)
            if prior.present and prior.length != expected_size \
                    and self.base.getsize(key) == expected_size:
                # the caller's size is the value's: the record is the one that is wrong
                raise mismatch_error(key, rec.length_mismatch(prior, expected_size, bs), bs)
            if not prior.present or prior.length != expected_size:
                # unprotected (it stays so), or the base refuses: absent, or another size
                self.base.append(key, data, expected_size=expected_size)
                return
            new = _appended(prior, data, bs)
            if self._transactional:
                self.base.append(key, data, expected_size=expected_size)
            else:
                self.base.set(RECORD_PREFIX + key, self._encode([new, prior], bs))
                try:
                    self.base.append(key, data, expected_size=expected_size)
                except BaseException:
                    # refused (another writer changed its size meanwhile) or failed:
                    # the value is as it was, and so is its record again
                    self.base.set(RECORD_PREFIX + key, self._encode([prior], bs))
                    raise
            raw = self._encode([new], bs)
            self.base.set(RECORD_PREFIX + key, raw)
            cache = self._cache()
            if cache is not None:
                cache[key] = raw
            self._count(records_written=1)


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
