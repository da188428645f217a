"""The :class:`Checksum` storage transformer: CRC-32C per block of every value, kept in
records beside the values and verified on every read. The design, what a crash leaves
behind and the measurements are in the package docstring
(:mod:`kvzarr.transformers.checksum`); the record format in :mod:`.record`, the reads in
:mod:`.reads`, the writes in :mod:`.writes`, the scrub in :mod:`.scrub`.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...errors import (ChecksumMismatchError, ChecksumMissingError, ChecksumRecordError,
                       InvalidKeyError, StoreConfigError, UnprotectedValueWarning)
from ...stores.base import Store
from ...stores.keys import RESERVED_PREFIX, check_key, check_prefix
from ..base import Transformer, TransformerTxn, reject_unknown_options
from . import record as rec
from .checks import UNPROTECTED_VALUE
from .reads import Reads
from .record import State
from .rereads import RECORD_PREFIX, Read
from .scrub import Finding, VerifyReport
from .scrub import verify as _scrub
from .writes import Writes

_NREC = len(RECORD_PREFIX)
#: the block size of new records (see the package docstring for the measurements)
DEFAULT_BLOCK_SIZE = 16 * 1024
MIN_BLOCK_SIZE, MAX_BLOCK_SIZE = 64, 64 * 1024 * 1024
MISSING = ("fail", "warn", "trust")


class Checksum(Reads, Writes, Transformer):
    """CRC-32C of every block of every value, stored out of band under
    ``__kvzarr/crc/<key>`` in the same transaction as the value and verified on every read.

    ``block_size``: bytes per checksummed block of new records (a power of two from
    64 B to 64 MiB; default 16 KiB, chosen by measurement: package docstring). Records
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
        # With snapshots, values stream out of iter_values verified ahead of the reader
        # (see there); without, a read of many values goes key by key anyway.
        self.streams_values = base.streams_values or self._transactional
        return self

    def options(self) -> dict[str, Any]:
        return {"block_size": self.block_size, "missing": self.missing}

    def stats(self) -> dict[str, int]:
        """``values_verified``: whole values read and verified; ``range_reads_verified``:
        keys read in part (all the ranges of a key in one call count once);
        ``bytes_verified``: bytes checksummed by reads; ``mismatches`` and
        ``record_errors``: failed checks; ``unprotected_reads``: values read without a
        record; ``records_written``; ``rereads``: extra reads on a store without
        transactions while a writer changed the key."""
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
        # ends (this transformer's own writes update it): key -> stored bytes or None.
        handle.state = {} if self._transactional else None
        return handle

    def _cache(self) -> dict[str, bytes | None] | None:
        handle = self._current_transaction()
        return None if handle is None else handle.state

    def _forget(self, keys: Iterable[str]) -> None:
        cache = self._cache()
        if cache:
            for k in keys:
                cache.pop(k, None)

    # -- records ---------------------------------------------------------------------------

    def _records(self, keys: Sequence[str]) -> dict[str, bytes | None]:
        """The stored records of ``keys`` (unique; None: none), from this transaction's
        cache or the base. Decoded only where needed (:func:`.checks.decode_found`)."""
        cache = self._cache()
        want = [k for k in keys if cache is None or k not in cache]
        found = dict(zip(want, map(_stored, self.base.get_many(
            [RECORD_PREFIX + k for k in want])))) if want else {}
        if cache is None:
            return found
        cache.update(found)
        return cache

    def _encode(self, states: Sequence[State], block_size: int | None = None) -> bytes:
        if len(states) == 1:
            return rec.encode_final(block_size or self.block_size, states[0])
        return rec.encode(block_size or self.block_size, states)

    # -- checks ----------------------------------------------------------------------------

    def _settle(self, reads: dict[str, Read], ranges: bool = False) -> None:
        """Count what a read found and act on it: raise the first failure, apply the
        ``missing`` policy to values without records. (Every read goes through here:
        one pass, one update of the counters.)"""
        good = nbytes = 0
        failed: list[Any] = []
        unprotected: list[str] = []
        for key, r in reads.items():
            outcome = r.outcome
            if outcome is None:
                if r.nbytes >= 0:
                    good += 1
                    nbytes += r.nbytes
            elif outcome is UNPROTECTED_VALUE:
                unprotected.append(key)
            else:
                failed.append(outcome)
        with self._stats_lock:
            stats = self._stats
            stats["range_reads_verified" if ranges else "values_verified"] += good
            stats["bytes_verified"] += nbytes
            if failed or unprotected:
                stats["mismatches"] += sum(type(e) is ChecksumMismatchError for e in failed)
                stats["record_errors"] += sum(type(e) is ChecksumRecordError for e in failed)
                stats["unprotected_reads"] += len(unprotected)
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

    # -- the scrub -------------------------------------------------------------------------

    def verify(self, prefix: str = "", *, repair_missing: bool = False,
               on_finding: Callable[[Finding], None] | None = None,
               progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Scrub every value under ``prefix`` (``""``: the whole store) and say what is
        wrong; ``repair_missing`` gives unprotected values records (the store must be
        writable). See :mod:`.scrub` for what is reported and how."""
        check_prefix(prefix)
        self._own_prefix(prefix)
        return _scrub(self, prefix, repair_missing=repair_missing, on_finding=on_finding,
                      progress=progress)




def _stored(raw: object) -> bytes | None:
    """A record as the base returned it, as bytes (a view would end with the
    transaction)."""
    return raw if raw is None or type(raw) is bytes else bytes(raw)
