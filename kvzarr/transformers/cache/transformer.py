"""The cache transformer: what a store read, kept in a bounded LRU (:mod:`.entries`),
served again while the store's change counter says nothing changed. The contract is in
the package docstring (:mod:`kvzarr.transformers.cache`)."""

from __future__ import annotations

import operator
import os
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

from ...errors import StoreConfigError
from ...stores.base import Store
from ...stores.byteranges import ByteRequest, apply_byte_request
from ..base import Transformer, TransformerTxn, reject_unknown_options
from .entries import ABSENT, DIR, LIST, Lru

#: the default bound of a cache's memory
DEFAULT_MAX_BYTES = 64 << 20

#: what a batch read asks of each key (a listing: of each prefix)
VALUE, RANGE, EXISTS, SIZE, LISTING = "value", "range", "exists", "size", "listing"
#: an answer the cache does not have
_MISS: Any = object()
#: a write whose resulting value the cache does not know (a partial write, an append)
_CHANGED: Any = object()
#: a write that erased the key
_ERASED: Any = object()


class _WriteState:
    """A write transaction of the cache: the token of the state it began from, and what
    it wrote (key -> new value, :data:`_ERASED` or :data:`_CHANGED`; erased prefixes)."""
    __slots__ = ("start", "writes", "prefixes")

    def __init__(self, start: Hashable | None) -> None:
        self.start = start
        self.writes: dict[str, Any] = {}
        self.prefixes: list[str] = []


def _newer(a: Hashable, b: Hashable) -> bool:
    """Whether token ``a`` may name a later state than ``b``. Only integer counters are
    ordered; of other tokens nothing is known, so the later one is assumed (a wrong
    guess costs the cache its entries, never a stale answer: entries always belong to
    the token they were read under)."""
    if type(a) is int and type(b) is int:
        return a > b
    return True


def _as_bytes(value: Any) -> bytes:
    return value if type(value) is bytes else bytes(value)


#: every live cache, so a forked child can replace their locks
_CACHES: "weakref.WeakSet[Cache]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for cache in list(_CACHES):
        cache._lock = threading.Lock()   # a parent's thread may have held it at fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Cache(Transformer):
    """A bounded LRU cache of a store's values, absent keys, byte ranges and listings,
    coherent with writes through it and with commits of other handles and processes (see
    :mod:`kvzarr.transformers.cache`). ``max_bytes``: the bound of its memory."""

    name = "cache"

    def __init__(self, base: Store | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 **unknown: Any) -> None:
        reject_unknown_options("Cache", unknown)
        self.max_bytes = _check_max_bytes(max_bytes)
        self._lru = Lru(self.max_bytes)
        #: the most bytes one read may bring into the cache (see _worth_keeping)
        self._scan_bytes = max(1, self.max_bytes // 8)
        self._entries = self._lru.entries    # (the hot path reads it directly)
        self._lock = threading.Lock()
        #: the store state every entry belongs to (None: no state adopted yet)
        self._token: Hashable | None = None
        #: bumped whenever the entries stop being those of one unbroken state
        self._gen = 0
        self._hits = self._misses = self._bypassed = self._adoptions = 0
        super().__init__(base)
        _CACHES.add(self)

    def options(self) -> dict[str, Any]:
        return {"max_bytes": self.max_bytes}

    def stats(self) -> dict[str, int]:
        """``hits`` and ``misses`` (answers per key, range or listing), ``bypassed``
        (answers read through: the store had no counter, or a transaction's snapshot was
        not the cache's), ``evictions``, ``invalidations`` (entries dropped because the
        store changed or was written), ``adoptions`` (times the cache moved to a new
        store state), ``bytes`` held, ``entries``, ``max_bytes``."""
        with self._lock:
            return {"hits": self._hits, "misses": self._misses,
                    "bypassed": self._bypassed, "adoptions": self._adoptions,
                    **self._lru.stats()}

    def clear(self) -> None:
        """Forget everything cached."""
        with self._lock:
            self._lru.clear()
            self._gen += 1

    # -- coherence (called with the lock held) -------------------------------------------

    def _usable(self, token: Hashable | None) -> int:
        """The generation a read of the store state ``token`` may use and fill, after
        adopting ``token`` if it is not older than the cache's; -1 if it may not."""
        if token is None:
            return -1
        if token != self._token:
            if self._token is not None and not _newer(token, self._token):
                return -1
            self._lru.clear()
            self._token = token
            self._gen += 1
            self._adoptions += 1
        return self._gen

    def _learn(self, what: str, key: str, request: Any, answer: Any) -> None:
        lru = self._lru
        if what is LISTING:
            lru.put_listing(request, key, answer)
        elif what is VALUE or (what is RANGE and request is None):
            if answer is None:
                lru.put_absent(key)
            else:
                lru.put_value(key, _as_bytes(answer))
        elif what is RANGE:
            if answer is None:
                lru.put_absent(key)
            else:
                lru.put_range(key, request, _as_bytes(answer))
        elif what is EXISTS:
            if answer:
                lru.put_size(key, None)
            else:
                lru.put_absent(key)
        elif answer is None:          # SIZE
            lru.put_absent(key)
        else:
            lru.put_size(key, answer)

    def _known(self, what: str, key: Any, request: Any) -> Any:
        """The cached answer, or :data:`_MISS` (a listing: ``key`` is its prefix,
        ``request`` its kind)."""
        if what is LISTING:
            names = self._lru.listing(request, key)
            return _MISS if names is None else names
        if type(key) is not str:
            return _MISS
        entry = self._entries.get(key)
        if entry is None:
            return _MISS
        self._entries.move_to_end(key)
        if entry is ABSENT:
            return False if what is EXISTS else None
        whole = type(entry) is bytes
        if what is VALUE or (what is RANGE and request is None):
            return entry if whole else _MISS
        if what is RANGE:
            if whole:
                return apply_byte_request(entry, request)
            ranges = entry.ranges
            return _MISS if ranges is None else ranges.get(request, _MISS)
        if what is EXISTS:
            return True
        if whole:
            return len(entry)
        return _MISS if entry.size is None else entry.size

    # -- transactions ----------------------------------------------------------------------

    def _begin(self, write: bool) -> TransformerTxn:
        """A transaction of the store under it; a read transaction's state is the
        generation of the cache it may use (-1: none, it reads through), a write
        transaction's a :class:`_WriteState`."""
        base = self._base if self._base is not None else self.base
        context = base.transaction(write)
        context.__enter__()
        try:
            token = base.change_counter()   # the snapshot's (a write: the start state's)
        except BaseException as e:
            context.__exit__(type(e), e, e.__traceback__)
            raise
        if write:
            return TransformerTxn(context, True, _WriteState(token))
        with self._lock:
            gen = self._gen if token == self._token and token is not None \
                else self._usable(token)
        return TransformerTxn(context, False, gen)

    # (an aborted transaction: the base aborts; nothing of the cache changed meanwhile)

    def _commit(self, handle: TransformerTxn) -> None:
        if not handle.write:
            handle.context.__exit__(None, None, None)
            return
        state: _WriteState = handle.state
        wrote = bool(state.writes or state.prefixes)
        try:
            # the token the store has once this commits (asked after the last write)
            promised = self.base.change_counter() if wrote else None
        except BaseException as e:
            handle.context.__exit__(type(e), e, e.__traceback__)
            self._forget_writes(state)
            raise
        try:
            handle.context.__exit__(None, None, None)
        except BaseException:
            self._forget_writes(state)      # it may have half happened on a plain store
            raise
        if wrote:
            self._committed(state, promised)

    def _committed(self, state: _WriteState, promised: Hashable | None) -> None:
        """A write transaction through the cache committed: bring the entries to the
        state ``promised`` names, or drop them where that cannot be done exactly."""
        with self._lock:
            lru = self._lru
            self._gen += 1                  # readers of the old state stop using it
            if promised is None or state.start is None or self._token != state.start:
                # Another commit came between the cache's state and this one (or the
                # store cannot name its states): nothing cached is known to be current.
                lru.clear()
                self._token = promised
                return
            for prefix in state.prefixes:
                lru.drop_prefix(prefix)
            for key, value in state.writes.items():
                known = lru.drop(key)
                if known and value is _ERASED:
                    lru.put_absent(key)
                elif known and value is not _CHANGED:
                    lru.put_value(key, _as_bytes(value))
            lru.drop_listings_of(state.writes)
            self._token = promised

    def _forget_writes(self, state: _WriteState) -> None:
        with self._lock:
            self._gen += 1
            self._lru.clear()
            self._token = None

    def _writes(self) -> _WriteState | None:
        """This thread's write transaction state, or None outside one."""
        h = self._current_transaction()
        return h.state if h is not None and h.write else None

    # -- reads -----------------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        # The hot path of a cached single-element read: the store's counter and one
        # dict lookup, without the lock. Safe because entries of another state go in
        # only after the generation has moved (and the old ones are out): an entry is
        # used only if the token matched and the generation did not move meanwhile.
        if self._txn_state.handle is None and type(key) is str:
            base = self._base
            token = base.change_counter() if base is not None else None
            gen = self._gen
            if token is not None and token == self._token:
                entries = self._entries
                entry = entries.get(key)
                if entry is not None and gen == self._gen:
                    whole = type(entry) is bytes
                    if whole or entry is ABSENT:
                        try:
                            entries.move_to_end(key)
                        except KeyError:    # dropped by another thread just now
                            pass
                        self._hits += 1     # (may miss a count under contention)
                        return entry if whole else None
            if token is not None:
                # a miss outside a transaction: read it in a read transaction of the
                # store, whose snapshot names what is kept (_serve, written out)
                with base.transaction(write=False):
                    snapshot = base.change_counter()
                    value = base.get(key)
                with self._lock:
                    if self._usable(snapshot) >= 0:
                        self._misses += 1
                        self._learn(VALUE, key, None, value)
                    else:
                        self._bypassed += 1
                return value
        return self._serve(VALUE, [(key, None)], self._fetch_values)[0]

    def _get(self, key: str) -> bytes | None:
        return self.get(key)

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self._serve(VALUE, [(k, None) for k in keys], self._fetch_values)

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self.get_many(keys)

    def get_many_views(self, keys: Sequence[str]) -> list[Any]:
        h = self._current_transaction()
        if h is None:
            return self.get_many(keys)
        return self._serve(VALUE, [(k, None) for k in keys],
                           lambda items: self.base.get_many_views([k for k, _ in items]))

    def iter_values(self, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        h = self._current_transaction()
        if h is None or h.write or h.state < 0:
            if h is not None and not h.write:
                self._count_bypass(len(keys))
            return self.base.iter_values(keys)
        return self._iter_values(h.state, keys)

    def _iter_values(self, gen: int, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        misses: list[int] = []
        hits: list[tuple[int, Any]] = []
        with self._lock:
            usable = gen == self._gen
            for i, key in enumerate(keys):
                answer = self._known(VALUE, key, None) if usable else _MISS
                if answer is _MISS:
                    misses.append(i)
                else:
                    hits.append((i, answer))
            self._hits += len(hits)
            if usable:
                self._misses += len(misses)
            else:
                self._bypassed += len(misses)
        yield from hits
        if not misses:
            return
        miss_keys = [keys[i] for i in misses]
        room = self._scan_bytes
        for j, value in self.base.iter_values(miss_keys):
            if usable and room > 0:
                room -= 0 if value is None else len(value)
                with self._lock:
                    if gen == self._gen:
                        self._learn(VALUE, miss_keys[j], None, value)
            yield misses[j], value

    def get_partial_values(
            self, key_ranges: Iterable[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        items = [(k, r) for k, r in key_ranges]
        if len(items) == 1:
            # The hot path of a sharded read inside its read transaction (a shard's
            # index, then its inner chunks as one range): one lookup, without the lock,
            # as in get().
            h = self._txn_state.handle
            if h is not None and not h.write:
                gen = h.state
                key, request = items[0]
                if gen == self._gen and type(key) is str:
                    entries = self._entries
                    entry = entries.get(key)
                    if entry is not None and gen == self._gen:
                        if entry is ABSENT:
                            answer = None
                        elif type(entry) is bytes:
                            answer = entry if request is None else \
                                apply_byte_request(entry, request)
                        else:
                            ranges = entry.ranges
                            answer = _MISS if ranges is None or request is None \
                                else ranges.get(request, _MISS)
                        if answer is not _MISS:
                            try:
                                entries.move_to_end(key)
                            except KeyError:
                                pass
                            self._hits += 1
                            return [answer]
        return self._serve(RANGE, items, self._fetch_ranges)

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        return self.get_partial_values([(key, request)])[0]

    def exists(self, key: str) -> bool:
        return self._serve(EXISTS, [(key, None)], self._fetch_exists)[0]

    def _exists(self, key: str) -> bool:
        return self.exists(key)

    def exists_many(self, keys: Sequence[str]) -> list[bool]:
        return self._serve(EXISTS, [(k, None) for k in keys], self._fetch_exists)

    def getsize(self, key: str) -> int | None:
        return self._serve(SIZE, [(key, None)], self._fetch_sizes)[0]

    def _getsize(self, key: str) -> int | None:
        return self.getsize(key)

    # what the base is asked for the answers the cache lacks: one batch call each
    def _fetch_values(self, items: list[tuple[str, Any]]) -> list[Any]:
        keys = [k for k, _ in items]
        return [self.base.get(keys[0])] if len(keys) == 1 else self.base.get_many(keys)

    def _fetch_ranges(self, items: list[tuple[str, Any]]) -> list[Any]:
        return self.base.get_partial_values(items)

    def _fetch_exists(self, items: list[tuple[str, Any]]) -> list[Any]:
        keys = [k for k, _ in items]
        return [self.base.exists(keys[0])] if len(keys) == 1 else self.base.exists_many(keys)

    def _fetch_sizes(self, items: list[tuple[str, Any]]) -> list[Any]:
        return [self.base.getsize(k) for k, _ in items]

    def _worth_keeping(self, answers: list[Any]) -> bool:
        """Whether answers read from the store go into the cache: not those of one read
        of several values bigger than an eighth of the cache together (a scan of a whole
        array would push out everything else, and copy every value it reads)."""
        if len(answers) < 2:
            return True
        room = self._scan_bytes
        for answer in answers:
            if isinstance(answer, (bytes, memoryview)):
                room -= len(answer)
                if room < 0:
                    return False
        return True

    def _count_bypass(self, n: int) -> None:
        with self._lock:
            self._bypassed += n

    def _serve(self, what: str, items: list[tuple[str, Any]],
               fetch: Callable[[list[tuple[str, Any]]], list[Any]]) -> list[Any]:
        """Answer ``items`` (key, byte request) for ``what``: from the cache where it
        holds the answer for the state being read, the rest from the store in one
        ``fetch``; the store's answers are kept for that state. One snapshot always: a
        read outside a transaction whose cached answers turn out to be of another state
        than the store's read transaction reads them all from the store."""
        h = self._current_transaction()
        if h is not None:
            if h.write:
                return fetch(items)          # own writes visible; nothing kept yet
            return self._serve_in(h.state, what, items, fetch)
        base = self.base
        token = base.change_counter()
        if token is None:
            self._count_bypass(len(items))
            return fetch(items)
        out, misses, hit_token = self._look(what, items, token)
        if not misses:
            return out
        with base.transaction(write=False):
            snapshot = base.change_counter()
            if hit_token is not None and snapshot != hit_token:
                misses = list(range(len(items)))   # hits of another state: read all
            got = fetch([items[i] for i in misses])
        keep = self._worth_keeping(got)
        with self._lock:
            gen = self._usable(snapshot) if keep else -1
            if gen < 0 and keep:
                self._bypassed += len(misses)
            else:
                self._misses += len(misses)
            for i, answer in zip(misses, got):
                out[i] = answer
                if gen >= 0:
                    self._learn(what, items[i][0], items[i][1], answer)
        return out

    def _look(self, what: str, items: list[tuple[str, Any]], token: Hashable
              ) -> tuple[list[Any], list[int], Hashable | None]:
        """Outside a transaction: the cached answers if the store is still at the
        cache's state ``token`` names; (answers, indices missing, the state they are of)."""
        out: list[Any] = [None] * len(items)
        misses: list[int] = []
        with self._lock:
            if token != self._token:
                return out, list(range(len(items))), None
            for i, (key, request) in enumerate(items):
                answer = self._known(what, key, request)
                if answer is _MISS:
                    misses.append(i)
                else:
                    out[i] = answer
            self._hits += len(items) - len(misses)
            return out, misses, (token if len(misses) < len(items) else None)

    def _serve_in(self, gen: int, what: str, items: list[tuple[str, Any]],
                  fetch: Callable[[list[tuple[str, Any]]], list[Any]]) -> list[Any]:
        """Inside a read transaction of the cache (and so of the store): cached answers
        if the cache still holds the state of its snapshot, the rest from the store."""
        out: list[Any] = [None] * len(items)
        misses: list[int] = []
        with self._lock:
            usable = gen == self._gen
            if usable:
                known = self._known
                for i, (key, request) in enumerate(items):
                    answer = known(what, key, request)
                    if answer is _MISS:
                        misses.append(i)
                    else:
                        out[i] = answer
                self._hits += len(items) - len(misses)
            else:
                self._bypassed += len(items)
        if not usable:
            return fetch(items)
        if not misses:
            return out
        got = fetch([items[i] for i in misses])
        worth = self._worth_keeping(got)
        with self._lock:
            keep = gen == self._gen and worth
            if keep or not worth:
                self._misses += len(misses)
            else:
                self._bypassed += len(misses)
            for i, answer in zip(misses, got):
                out[i] = answer
                if keep:
                    self._learn(what, items[i][0], items[i][1], answer)
        return out

    # -- listings --------------------------------------------------------------------------

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        return iter(self._serve(LISTING, [(prefix, LIST)], self._fetch_listing)[0])

    def _list_dir(self, prefix: str) -> Iterator[str]:
        return iter(self._serve(LISTING, [(prefix, DIR)], self._fetch_listing)[0])

    def _fetch_listing(self, items: list[tuple[str, Any]]) -> list[Any]:
        """The names of one listing, read whole (one snapshot inside a transaction)."""
        (prefix, kind), = items
        base = self.base
        if kind is DIR:
            return [tuple(base.list_dir(prefix))]
        return [tuple(base.list_prefix(prefix) if prefix else base.list())]

    # -- writes: through to the store, remembered until the commit --------------------------

    def _set(self, key: str, value: bytes) -> None:
        state = self._writes()
        if state is None:
            with self.transaction():
                self._set(key, value)
            return
        state.writes[key] = value
        self.base.set(key, value)

    def set_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        Store.set_many(self, items)         # checks, then _set_many in a transaction

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        state = self._writes()
        writes = state.writes
        for key, value in items:
            writes[key] = value
        self.base.set_many(items)

    def set_partial_values(self, key_start_values: Iterable[tuple[str, int, bytes]]) -> None:
        Store.set_partial_values(self, key_start_values)

    def _set_range(self, key: str, offset: int, value: bytes) -> None:
        self._writes().writes[key] = _CHANGED
        self.base.set_partial_values([(key, offset, value)])

    def _erase(self, key: str) -> None:
        state = self._writes()
        if state is None:
            with self.transaction():
                self._erase(key)
            return
        state.writes[key] = _ERASED
        self.base.erase(key)

    def erase_values(self, keys: Iterable[str]) -> None:
        Store.erase_values(self, keys)

    def _erase_many(self, keys: Sequence[str]) -> None:
        writes = self._writes().writes
        for key in keys:
            writes[key] = _ERASED
        self.base.erase_values(keys)

    def _erase_prefix(self, prefix: str) -> None:
        self._writes().prefixes.append(prefix)
        self.base.erase_prefix(prefix)

    def _append(self, key: str, data: bytes, expected_size: int) -> None:
        state = self._writes()
        if state is None:
            with self.transaction():
                self._append(key, data, expected_size)
            return
        state.writes[key] = _CHANGED
        self.base.append(key, data, expected_size=expected_size)

    # -- the rest ----------------------------------------------------------------------------

    def _close(self) -> None:
        with self._lock:
            self._lru.clear()
            self._token = None
            self._gen += 1
        super()._close()


def _check_max_bytes(value: Any) -> int:
    if isinstance(value, bool):
        raise StoreConfigError(f"max_bytes must be a positive integer, not {value!r}",
                               field="transformers.max_bytes")
    try:
        n = operator.index(value)
    except TypeError:
        raise StoreConfigError(f"max_bytes must be a positive integer, not {value!r}",
                               field="transformers.max_bytes") from None
    if n <= 0:
        raise StoreConfigError(f"max_bytes must be a positive integer, not {value!r}",
                               field="transformers.max_bytes")
    return n
