"""Decoded shard indexes kept between reads of an array, each vouched for by the
store's change counter.

Reading one tile of a shard is two reads: the shard's index (its end, or its start),
then the tile's bytes. The index is the same for every tile of the shard until the
shard is written again, and reading and decoding it was about a quarter of a tile read
on LMDB and in memory (1,000 random 64 x 64 gzip tiles of 1024 x 1024 shards: 3,100 -
3,600 tiles/s with it read every time, 4,100 - 4,250 with it kept).

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
nothing); the oldest used entries go first. Kept indexes are made read-only: a caller
that changed one would change it for every later read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class IndexCache:
    """``(key, tag) -> value`` entries with a store token each, at most ``max_bytes``
    of them by ``nbytes_of``; safe to share between threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[Hashable, Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, token: Hashable) -> Any:
        """The value kept under ``key`` for ``token``, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != token:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def keep(self, key: Hashable, token: Hashable, value: Any, nbytes: int) -> None:
        """Keep ``value`` (``nbytes`` large) under ``key`` as read at ``token``,
        dropping the least recently used entries past the bound."""
        if nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (token, value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes:
                _, (_, _, n) = self._entries.popitem(last=False)
                self._bytes -= n

    def __len__(self) -> int:
        return len(self._entries)


def remembered(cache: IndexCache | None, store: Any, key: Hashable,
               compute: Callable[[], Any], nbytes_of: Callable[[Any], int]) -> Any:
    """``compute()``, or what it returned before for ``key`` if the store's change
    counter says nothing changed since; None results are not kept (an absent shard).
    Outside a read-only transaction of ``store``, always ``compute()``."""
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
        cache.keep(key, token, value, nbytes_of(value))
    return value
