"""AppendShards (``"append_shards"``): the sharding specification's append-only write
strategy (codecs/sharding-indexed v1.0, "Binary shard format": *Append-only*) for the
stack below it.

Without it, writing one inner chunk of a shard rewrites the whole shard. With it, the
sharding codec appends the changed inner chunks and a new index to the shard through the
store's native ``append`` (``Capabilities.appends``: the filesystem, SQL and memory
stores), and what they replace becomes garbage; once garbage would pass ``max_garbage``
of a shard's size, that write rewrites the shard densely instead (automatic compaction).
``kvzarr.compact`` / ``kvzarr compact`` compact on demand.

    >>> import kvzarr, numpy as np
    >>> a = kvzarr.create_array("memory://", shape=(256, 256), chunks=(32, 32),
    ...                         shards=(256, 256), dtype="uint8", fill_value=0,
    ...                         transformers=[{"name": "append_shards", "max_garbage": 0.5}])
    >>> a[:] = 1
    >>> a[0:32, 0:32] = 2                       # one inner chunk and an index appended
    >>> a.store.stats()["appends"]
    1

The transformer is thin: it offers its policy (``max_garbage`` and the counters of
:meth:`stats`) through ``append_policy()`` when the store under it appends natively, and
None otherwise, so over LMDB and zip stores every shard write stays a rewrite (correct,
just not cheaper). Everything else is delegated unchanged; nothing is recorded besides
the shards themselves, and what another Zarr reader sees is a valid shard at every
moment: chunks, then the index that locates them, at the end.

Crash behaviour: an append is one ``Store.append`` (atomic: a reader, or a crash at any
moment, sees the shard before or after it, never between), a compaction one ``set``.
A shard's garbage is computed from its index, so it is exact after any crash and needs
no record that could disagree with it. Processes and threads may each stack their own
AppendShards on one store: appends are compare-and-append on the shard's size, and a
writer that lost the race computes its update again from the shard as it is now.

``max_garbage`` is the fraction of a shard's size that may be garbage (default 0.5).
Appending one inner chunk of ``c`` bytes with an index of ``i`` bytes adds about
``c + i`` bytes and turns about as many into garbage, so with a limit ``g`` the shard
stays within ``1 / (1 - g)`` of its dense size (2x at 0.5) and each update writes about
``(c + i) / g`` bytes on average, the compactions included (2 (c + i) at 0.5), where a
rewrite writes the whole shard every time. 0 rewrites on every update; 1 never compacts
automatically.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from ..errors import StoreConfigError
from ..stores.base import Store
from .base import Transformer, reject_unknown_options

DEFAULT_MAX_GARBAGE = 0.5


class ShardAppendPolicy:
    """The policy AppendShards offers the sharding codec (``Store.append_policy()``): the
    garbage limit, and thread-safe counters of what was done under it."""

    def __init__(self, max_garbage: float) -> None:
        self.max_garbage = max_garbage
        self._lock = threading.Lock()
        self._counts = {"appends": 0, "bytes_appended": 0, "garbage_bytes": 0,
                        "compactions": 0, "bytes_reclaimed": 0, "fallback_rewrites": 0,
                        "conflict_retries": 0}
        #: the last reason a shard was rewritten instead of appended to
        self.last_fallback: str | None = None

    def appended(self, nbytes: int, garbage_added: int) -> None:
        with self._lock:
            c = self._counts
            c["appends"] += 1
            c["bytes_appended"] += nbytes
            c["garbage_bytes"] += garbage_added

    def compacted(self, reclaimed: int) -> None:
        with self._lock:
            self._counts["compactions"] += 1
            self._counts["bytes_reclaimed"] += reclaimed

    def fell_back(self, reason: str) -> None:
        with self._lock:
            self._counts["fallback_rewrites"] += 1
            self.last_fallback = reason

    def retried(self) -> None:
        with self._lock:
            self._counts["conflict_retries"] += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class AppendShards(Transformer):
    """Partial shard writes append instead of rewriting; see the module docstring."""

    name = "append_shards"
    needs_write = True

    def __init__(self, base: Store | None = None, *,
                 max_garbage: float = DEFAULT_MAX_GARBAGE, **unknown: Any) -> None:
        reject_unknown_options("AppendShards", unknown)
        if isinstance(max_garbage, bool) or not isinstance(max_garbage, (int, float)) \
                or not math.isfinite(max_garbage) or not 0 <= max_garbage <= 1:
            raise StoreConfigError(
                f"max_garbage is the fraction of a shard that may be garbage, a number "
                f"from 0 to 1, not {max_garbage!r}", field="transformers.max_garbage")
        self._policy = ShardAppendPolicy(float(max_garbage))
        super().__init__(base)

    @property
    def max_garbage(self) -> float:
        """The largest fraction of a shard's bytes that may be garbage (replaced inner
        chunks and indexes) before a write rewrites the shard densely."""
        return self._policy.max_garbage

    def append_policy(self) -> ShardAppendPolicy | None:
        """The policy when the store below appends natively; None (rewrite) otherwise."""
        return self._policy if self.base.capabilities.appends else None

    def options(self) -> dict[str, Any]:
        return {"max_garbage": self._policy.max_garbage}

    def stats(self) -> dict[str, int]:
        """``appends`` and ``bytes_appended`` (shards appended to through this stack),
        ``garbage_bytes`` (what those appends turned into garbage), ``compactions`` and
        ``bytes_reclaimed`` (automatic dense rewrites), ``fallback_rewrites`` (shards
        rewritten because they could not be appended to: an index at the start or
        without crc32c, a value the store cannot append to), ``conflict_retries``
        (appends computed again after another writer appended first) and
        ``native_appends`` (1 when the store below appends, else every shard write is a
        plain rewrite and nothing is counted)."""
        out = self._policy.counts()
        out["native_appends"] = int(self.bound and self.base.capabilities.appends)
        return out
