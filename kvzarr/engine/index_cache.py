"""Decoded shard indexes kept between reads of an array, each vouched for by the
store's change counter.

Reading one tile of a shard is two reads: the shard's index (its end, or its start),
then the tile's bytes. The index is the same for every tile of the shard until the
shard is written again. Kept, the CPU time of a read of one 64 x 64 gzip tile of a
1024 x 1024 shard (1,000 random tiles of a 4096 x 4096 image, the best of 6 passes by
``time.process_time``, 3-4 runs of each tree taking turns) went from 210-212 to 172-186
us on LMDB and from 340-386 to 251-281 us on SQLite (a statement and a BLOB read fewer);
in memory, where the index is a slice of a value in the process, it did not move
beyond the noise (175-228 against 172-230 us).

Only reads inside a read-only transaction use it (an array's reads of parts of shards
run in one). Each entry is kept with the token ``Store.change_counter()`` gave for
that transaction's snapshot when the index was read, and is used only by a later
snapshot with the same token: the store never gives one token to two different
states, so the shard is the one the index was read from, and the tile bytes read next
come from that same snapshot. Never inside a write transaction: there the token
names what the commit will hold, and a write after the index was read (by this array
handle or another) would make a kept index wrong under the very token it was kept
with. A store without a counter (a directory, whose files other programs may rewrite
in place) gives None, and nothing is kept for it.

Per array handle, bounded in bytes (``ArrayConfig.shard_index_cache_bytes``; 0 keeps
nothing): the indexes of one array's shards all have one size, so the bound is a
number of entries, and a full cache is emptied rather than kept in recency order (a
shared memo's way, runtime/memo.py). No lock: each step is one dict operation, atomic
under the GIL, so a thread (or a forked child) never waits on another. Kept indexes
are made read-only: a caller that changed one would change it for every later read.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


class IndexCache:
    """``(key, tag) -> value`` entries with a store token each, at most ``max_bytes``
    of them counted by the size of the one being kept; safe to share between threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: dict[Hashable, tuple[Hashable, Any]] = {}

    def get(self, key: Hashable, token: Hashable) -> Any:
        """The value kept under ``key`` for ``token``, or None."""
        entry = self._entries.get(key)
        return entry[1] if entry is not None and entry[0] == token else None

    def keep(self, key: Hashable, token: Hashable, value: Any, nbytes: int) -> None:
        """Keep ``value`` (``nbytes`` large) under ``key`` as read at ``token``; a
        cache that holds as many such values as the bound allows is emptied first."""
        if nbytes > self.max_bytes:
            return
        entries = self._entries
        if key not in entries and len(entries) >= self.max_bytes // max(1, nbytes):
            entries.clear()
        entries[key] = (token, value)

    def __len__(self) -> int:
        return len(self._entries)


def remembered(cache: IndexCache | None, store: Any, key: Hashable,
               compute: Callable[[], Any],
               keepable: Callable[[Any], tuple[Any, int]]) -> Any:
    """``compute()``, or what it returned before for ``key`` if the store's change
    counter says nothing changed since. What is kept is ``keepable(result)``'s form
    of it (made only when it is kept), of the size that call gives; None results are
    not kept (an absent shard). Outside a read-only transaction of ``store``, always
    ``compute()``."""
    if cache is None or not store.in_read_transaction():
        return compute()
    token = store.change_counter()      # the snapshot's
    if token is None:
        return compute()
    value = cache.get(key, token)
    if value is not None:
        return value
    value = compute()
    if value is not None:
        value, nbytes = keepable(value)
        cache.keep(key, token, value, nbytes)
    return value
