"""Cache: a storage transformer that keeps what its store read in memory, bounded by
bytes and least-recently-used, and serves it again while the store has not changed.

    >>> import kvzarr
    >>> from kvzarr.transformers import Cache
    >>> store = kvzarr.open_store("memory://", transformers=[Cache(max_bytes=1 << 20)])
    >>> store.set("a/zarr.json", b"{}")
    >>> store.get("a/zarr.json"), store.get("a/zarr.json")
    (b'{}', b'{}')
    >>> store.stats()["hits"]
    1

Registered as ``"cache"`` (``transformers=["cache"]`` or ``{"name": "cache",
"max_bytes": ...}``); ``max_bytes`` defaults to 64 MiB. A runtime transformer: nothing of
it is stored, so other Zarr readers see the store as it is.

What is kept (one LRU, :mod:`.entries`): a key's value; that a key is absent; byte
ranges of a value, by request (a sharded read asks for a shard's index by suffix and for
inner chunks by range); a key's size or existence; the names ``list_prefix``, ``list``
and ``list_dir`` returned, per prefix. Each entry is charged a fixed overhead plus its
bytes; inserting past ``max_bytes`` evicts the least recently used; an entry costing
more than a quarter of ``max_bytes`` is not kept, nor is what one read of several values
bringing more than an eighth of ``max_bytes`` reads (a scan of a whole array would push
out everything else).

Coherence, through the store's change counter (:meth:`Store.change_counter`):

* The entries all belong to one state of the store, named by a token. A read checks the
  token once per read transaction: a read outside a transaction asks the store for the
  token of its latest commit (about a dict lookup) and is served from the cache only if
  that is the cache's; what it misses it reads in a read transaction of the store and
  keeps under that transaction's snapshot token. A read transaction of the cache is one
  of the store, whose snapshot token it takes at its start. A token other than the
  cache's makes the cache drop everything and adopt it (if it may be newer; integer
  tokens are ordered, others are assumed newer). So once another process's commit is
  visible to a fresh read, its token is too, and the old entries are never served again.
* Inside a read transaction the cache never mixes snapshots: it serves entries only
  while they are those of the transaction's snapshot (a generation number, bumped
  whenever the entries change state), and keeps what it reads only then; a transaction
  whose snapshot is not the cache's reads through. A read outside a transaction that
  found some answers cached and then finds the store at another state reads them all
  from the store, in one snapshot.
* Writes go through to the store, inside a write transaction of the cache (a lone write
  is one). Reads inside it go to the store (which shows the transaction its own
  writes). The cache remembers the keys written and the prefixes erased; on commit, if
  its entries were of the state the transaction began from, it updates the keys it held
  (new value, or absent), drops those partially written or appended to, drops the
  listings that could change, and adopts the token the store said it will have after
  the commit; otherwise it drops everything. On abort it changes nothing.
* A store without a counter (``change_counter()`` is None, e.g. a directory): nothing
  is kept from one operation to the next; reads go to the store (counted as
  ``bypassed``). Such a cache is coherent and useless; there is no per-key check that
  could tell a file rewritten in the same clock tick with the same size from the old one.

Threads: one lock guards the entries; every method may be called from any thread. A
forked child keeps the entries (still checked against the store's token) with a new lock.
Crashes: the cache holds nothing durable; what a crash in the middle of a write leaves
behind is what the store's transaction leaves.

Costs: a hit outside a transaction is the store's counter check (LMDB and SQLite: a
read of a memory-mapped header) plus a dict lookup; inside a read transaction, a dict
lookup, the transaction itself being one of the store (on PostgreSQL two round trips:
``BEGIN`` with the counter, and ``COMMIT``).
"""

from .transformer import DEFAULT_MAX_BYTES, Cache

__all__ = ["Cache", "DEFAULT_MAX_BYTES"]
