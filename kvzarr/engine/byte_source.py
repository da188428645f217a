"""A byte source over one key of a store: what the sharding codec reads a shard through
(its index, then only the inner chunks it needs), with nearby ranges merged into one read,
how it learns the store's append policy, and where it keeps a shard's decoded index
between reads (:mod:`.index_cache`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ..stores.base import Store
from ..stores.byteranges import ByteRequest, RangeRequest, coalesce_ranges
from .config import ArrayConfig
from .index_cache import IndexCache, remembered


class StoreByteSource:
    """A ByteSource over one key of a store; nearby ranges are read as one."""

    def __init__(self, store: Store, key: str, config: ArrayConfig,
                 append_policy: Any = None, cache: IndexCache | None = None) -> None:
        self.store, self.key, self._config = store, key, config
        #: ``store.append_policy()``, asked once per array by the caller
        self.append_policy = append_policy
        self._cache = cache

    def remembered(self, tag: Hashable, compute: Callable[[], Any],
                   keepable: Callable[[Any], tuple[Any, int]]) -> Any:
        return remembered(self._cache, self.store, (self.key, tag), compute, keepable)

    def get(self) -> bytes | None:
        return self.store.get(self.key)

    def size(self) -> int | None:
        return self.store.getsize(self.key)

    def get_ranges(self, requests: Sequence[ByteRequest]) -> list[bytes] | None:
        if len(requests) == 1:    # a shard's index, or one tile: nothing to merge
            got = self.store.get_partial_values([(self.key, requests[0])])
            return None if got[0] is None else got
        ranges = [(i, r) for i, r in enumerate(requests) if isinstance(r, RangeRequest)]
        others = [(i, r) for i, r in enumerate(requests) if not isinstance(r, RangeRequest)]
        groups = coalesce_ranges([r for _, r in ranges], self._config.coalesce_max_gap,
                                 self._config.coalesce_max_bytes)
        asks = [(self.key, g) for g, _ in groups] + [(self.key, r) for _, r in others]
        got = self.store.get_partial_values(asks)
        if any(v is None for v in got):
            return None
        out: list[bytes] = [b""] * len(requests)
        for (merged, members), data in zip(groups, got):
            for m in members:
                idx, r = ranges[m]
                out[idx] = data[r.start - merged.start:r.end - merged.start]
        for (idx, _), data in zip(others, got[len(groups):]):
            out[idx] = data
        return out
