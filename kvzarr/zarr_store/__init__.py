"""kvzarr stores inside zarr-python 3: :class:`ZarrStore`, a ``zarr.abc.store.Store``
over any kvzarr store, so that zarr-python, xarray and dask read and write a single-file
dataset (``data.sqlite``, ``data.lmdb``, ``data.zip``) with kvzarr's transactions.

    >>> import zarr, kvzarr
    >>> z = zarr.create_array(kvzarr.ZarrStore("data.sqlite"), shape=(100,),
    ...                       chunks=(10,), dtype="f8")

This package is the only part of kvzarr that imports zarr-python (the ``zarr`` extra:
``pip install "kvzarr[zarr]"``); ``kvzarr.ZarrStore`` loads it on first use. Modules:
``store`` (the class), ``operations`` (what each zarr operation does to the kvzarr
store), ``sharing`` (the opened store ZarrStores share, the transaction thread).

How zarr's store operations map onto kvzarr's (:mod:`.operations`, and nowhere else):

* ``get(key, byte_range)``: ``Store.get``, or a one-request ``get_partial_values`` with
  zarr's Range/Offset/SuffixByteRequest turned into kvzarr's byte requests (served as
  native byte ranges where ``capabilities.partial_reads``: SQL ``substr``, a file seek).
* ``get_partial_values`` (and zarr's ``_get_many``): ONE kvzarr ``get_partial_values``
  call, so one read transaction: a writer committing meanwhile is seen by all or none.
* ``set`` and ``delete``: group commit. The writes zarr issues together (it runs up to
  ``async.concurrency`` chunk writes at once with ``asyncio.gather``) are collected for
  one turn of the event loop and committed in ONE write transaction (``set_many`` /
  ``erase_values``). Each ``await store.set(...)`` returns only once its write is
  committed (durable where the store syncs its commits), and each key is written
  atomically, as with a transaction per key: what the grouping saves is one commit, and
  one sync, per key. If the group's transaction fails, every write of it is tried again
  alone, so each caller gets its own outcome (a bad key fails only its own ``set``).
* ``set_if_not_exists``: the check and the write in one transaction (under the key lock
  on a store without transactions).
* ``delete_dir``, ``clear``: ``erase_prefix`` (one transaction); ``list``,
  ``list_prefix``, ``list_dir``, ``exists``, ``getsize``, ``getsize_prefix`` (one read
  transaction), ``is_empty``: the kvzarr listings and lookups.
* ``supports_writes`` / ``supports_deletes`` / ``supports_listing``: the store's
  ``capabilities`` (``writable``, ``deletable``, ``listable``); partial writes: never
  (zarr-python 3 no longer makes them).

Keys: every key goes through kvzarr's own check (:func:`kvzarr.stores.keys.check_key`),
so zarr gets :class:`~kvzarr.errors.InvalidKeyError` (a ValueError) for a key no kvzarr
store holds ("a//b", "../x", a NUL), and a transformer in the stack refuses writes under
the reserved ``__kvzarr/`` prefix it owns and leaves it out of listings. zarr-python
never writes such keys itself.

Threads, processes and the event loop. zarr-python runs a store's coroutines on its
own event-loop thread and starts up to ``async.concurrency`` chunk reads or writes at
once. ZarrStore runs a kvzarr call that moves little data inline on that loop: a small
read is a few microseconds (LMDB) to a few tens (SQLite), less than handing it to a
thread and back. A call that moves ``ZarrStore.offload_bytes`` (256 KiB) or more (a
read, judged by the size of the last ones; a group commit, by its bytes) runs on the
loop's thread pool instead, where the copy of one chunk overlaps zarr's work on the
others (the ``zarrstore-threads`` benchmark group compares both ends). A call that
waits (a writer lock held by another process, a commit's sync) holds the loop for that
time when it runs inline. Several threads may use one ZarrStore at once (kvzarr's stores are
thread-safe); a ZarrStore may be pickled and used in another process (it reopens its
target there), except one over a MemoryStore, whose data lives in this process only.

The ZarrStores on one path or URL (same transformers) in one process share one opened
kvzarr store, and so does :meth:`ZarrStore.with_read_only`'s copy; it is closed when the
last of them is closed. LMDB allows one environment per file per process: a writable
ZarrStore on a file that ZarrStores of this process opened read-only reopens it writable
for all of them (do that while none of them is in the middle of an operation).
"""

from .store import ZarrStore

__all__ = ["ZarrStore"]
