"""The cache's memory: one LRU of entries bounded by bytes, knowing nothing of stores,
transactions or coherence (the transformer in :mod:`.transformer` decides what goes in
and when everything goes out). Not thread-safe by itself: every method that changes it
is called with the transformer's lock held.

Entries, all in one ``OrderedDict`` in least-recently-used order:

* a key (``str``) -> its whole value (``bytes``); or :data:`ABSENT`; or a
  :class:`KeyEntry` holding what else is known of it: its size, byte ranges of it
  (``ByteRequest -> bytes``);
* a listing (``("list", prefix)`` or ``("dir", prefix)``) -> ``(names, cost)``, the names
  ``list_prefix`` / ``list_dir`` returned.

Whole values and listings are plain bytes and tuples on purpose: the garbage collector
does not track them, so a cache of many small values adds nothing to every collection
(an object per entry did, and showed in loops of single-element reads).

Every entry is charged :data:`ENTRY_COST` bytes plus the length of its key and of the
bytes it holds (a range :data:`RANGE_COST` plus its bytes; a listed name
:data:`NAME_COST` plus its length), an estimate of what CPython keeps for it. Inserting
past ``max_bytes`` evicts from the least recently used end; an entry that would cost
more than a quarter of ``max_bytes`` is not kept at all (one huge value would otherwise
push out everything else).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

#: bytes charged per entry, per cached byte range, per listed name (besides their data)
ENTRY_COST = 160
RANGE_COST = 120
NAME_COST = 60

LIST, DIR = "list", "dir"


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


#: the entry of a key known to be absent
ABSENT: Any = _Absent()


class KeyEntry:
    """What is known of a key that exists, short of its whole value."""

    __slots__ = ("size", "ranges", "cost")

    def __init__(self, cost: int) -> None:
        self.size: int | None = None
        self.ranges: dict[Any, bytes] | None = None
        self.cost = cost


def cost_of(key: Any, entry: Any) -> int:
    """The bytes charged for ``entry`` under ``key``."""
    if type(entry) is bytes:
        return ENTRY_COST + len(key) + len(entry)
    if entry is ABSENT:
        return ENTRY_COST + len(key)
    if type(entry) is tuple:              # a listing: (names, cost)
        return entry[1]
    return entry.cost


class Lru:
    """Entries bounded by ``max_bytes`` (see the module docstring) and the counters the
    cache reports."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.max_entry = max(1, max_bytes // 4)
        self.entries: OrderedDict[Any, Any] = OrderedDict()
        self.bytes = 0
        self.evictions = 0
        self.invalidations = 0

    def __len__(self) -> int:
        return len(self.entries)

    # -- finding -------------------------------------------------------------------------

    def listing(self, kind: str, prefix: str) -> tuple[str, ...] | None:
        entry = self.entries.get((kind, prefix))
        if entry is None:
            return None
        self.entries.move_to_end((kind, prefix))
        return entry[0]

    # -- adding --------------------------------------------------------------------------

    def _replace(self, key: Any, entry: Any, cost: int) -> None:
        old = self.entries.pop(key, None)
        if old is not None:
            self.bytes -= cost_of(key, old)
        self.entries[key] = entry
        self.bytes += cost
        self._evict()

    def put_value(self, key: str, value: bytes) -> None:
        cost = ENTRY_COST + len(key) + len(value)
        if cost > self.max_entry:
            self.drop(key)           # what was known of the old value is wrong now
            return
        self._replace(key, value, cost)

    def put_absent(self, key: str) -> None:
        self._replace(key, ABSENT, ENTRY_COST + len(key))

    def _partial(self, key: str) -> KeyEntry | None:
        """The key's KeyEntry (made if need be), or None when its whole value is held."""
        entry = self.entries.get(key)
        if type(entry) is bytes:
            self.entries.move_to_end(key)
            return None
        if type(entry) is not KeyEntry:
            entry = KeyEntry(ENTRY_COST + len(key))
            self._replace(key, entry, entry.cost)
        else:
            self.entries.move_to_end(key)
        return entry

    def put_range(self, key: str, request: Any, data: bytes) -> None:
        cost = RANGE_COST + len(data)
        entry = self._partial(key)
        if entry is None:
            return                   # the whole value serves every range already
        if entry.cost + cost > self.max_entry:
            if entry.ranges is None and entry.size is None:
                self._remove(key)    # do not keep an entry that knows nothing
            return
        if entry.ranges is None:
            entry.ranges = {}
        old = entry.ranges.get(request)
        if old is not None:
            entry.cost -= RANGE_COST + len(old)
            self.bytes -= RANGE_COST + len(old)
        entry.ranges[request] = data
        entry.cost += cost
        self.bytes += cost
        self._evict()

    def put_size(self, key: str, size: int | None) -> None:
        """That ``key`` exists with ``size`` bytes (None: exists, size unknown)."""
        entry = self._partial(key)
        if entry is not None and size is not None:
            entry.size = size

    def put_listing(self, kind: str, prefix: str, names: Sequence[str]) -> None:
        cost = ENTRY_COST + len(prefix) + sum(NAME_COST + len(n) for n in names)
        if cost > self.max_entry:
            return
        self._replace((kind, prefix), (tuple(names), cost), cost)

    def _evict(self) -> None:
        entries = self.entries
        while self.bytes > self.max_bytes and entries:
            key, entry = entries.popitem(last=False)
            self.bytes -= cost_of(key, entry)
            self.evictions += 1

    # -- dropping ------------------------------------------------------------------------

    def _remove(self, key: Any) -> Any:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.bytes -= cost_of(key, entry)
        return entry

    def drop(self, key: str) -> bool:
        """Forget ``key``; whether anything was known of it."""
        if self._remove(key) is None:
            return False
        self.invalidations += 1
        return True

    def clear(self) -> None:
        self.invalidations += len(self.entries)
        self.entries.clear()
        self.bytes = 0

    def drop_prefix(self, prefix: str) -> None:
        """Forget every key under ``prefix`` and every listing that could include one."""
        doomed = [k for k in self.entries
                  if (k.startswith(prefix) if type(k) is str
                      else k[1].startswith(prefix) or prefix.startswith(k[1]))]
        for k in doomed:
            self._remove(k)
        self.invalidations += len(doomed)

    def drop_listings_of(self, keys: Iterable[str]) -> None:
        """Forget every listing whose prefix some of ``keys`` start with (a write of
        one of them may add or remove a name there)."""
        listings = [k for k in self.entries if type(k) is not str]
        if not listings:
            return
        written = sorted(keys)
        for k in listings:
            prefix = k[1]
            i = bisect_left(written, prefix)
            if i < len(written) and written[i].startswith(prefix):
                self._remove(k)
                self.invalidations += 1

    def stats(self) -> dict[str, int]:
        return {"bytes": self.bytes, "entries": len(self.entries),
                "max_bytes": self.max_bytes, "evictions": self.evictions,
                "invalidations": self.invalidations}
