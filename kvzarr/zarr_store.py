"""kvzarr stores inside zarr-python 3: :class:`ZarrStore`, a ``zarr.abc.store.Store``
over any kvzarr store, so that zarr-python, xarray and dask read and write a single-file
dataset (``data.sqlite``, ``data.lmdb``, ``data.zip``) with kvzarr's transactions.

    >>> import zarr, kvzarr
    >>> z = zarr.create_array(kvzarr.ZarrStore("data.sqlite"), shape=(100,),
    ...                       chunks=(10,), dtype="f8")

This is the one module that imports zarr-python (the ``zarr`` extra: ``pip install
"kvzarr[zarr]"``); ``kvzarr.ZarrStore`` loads it on first use.

How zarr's store operations map onto kvzarr's (the functions ``_read_*``, ``_write_*``,
``_list_*`` below, and nowhere else):

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
own event-loop thread. ZarrStore runs kvzarr's synchronous calls inline on that loop
rather than on a worker thread: a kvzarr read is a few microseconds (LMDB) to a few
tens (SQLite), less than what handing it to a thread and back costs, and zarr's
decoding already runs on its thread pool (measured: see ``docs/xarray-and-dask.md``).
A call that waits (a writer lock held by another process, a commit's sync) holds the
loop for that time. Several threads may use one ZarrStore at once (kvzarr's stores
are thread-safe); a ZarrStore may be pickled and used in another process (it reopens
its target there), except one over a MemoryStore, whose data lives in this process only.

The ZarrStores on one path or URL (same transformers) in one process share one opened
kvzarr store, and so does :meth:`ZarrStore.with_read_only`'s copy; it is closed when the
last of them is closed. LMDB allows one environment per file per process: a writable
ZarrStore on a file that ZarrStores of this process opened read-only reopens it writable
for all of them (do that while none of them is in the middle of an operation).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable

try:
    from zarr.abc.store import (OffsetByteRequest, RangeByteRequest, Store as _ZarrStore,
                                SuffixByteRequest)
    from zarr.core.buffer import Buffer, default_buffer_prototype
except ImportError as _e:  # pragma: no cover - the message is the point
    raise ImportError("kvzarr.ZarrStore needs zarr-python 3.1: pip install 'kvzarr[zarr]'"
                      ) from _e

from .api import open_store
from .errors import NotPicklableError, ReadOnlyError, ValueTypeError
from .stores.base import Store
from .stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest
from .stores.keys import check_key
from .stores.memory import MemoryStore


# --- the mapping of zarr's operations onto kvzarr's --------------------------------------

def _request(byte_range: Any) -> Any:
    """zarr's byte request as kvzarr's (None: the whole value)."""
    if byte_range is None:
        return None
    if isinstance(byte_range, RangeByteRequest):
        return RangeRequest(byte_range.start, byte_range.end)
    if isinstance(byte_range, OffsetByteRequest):
        return OffsetRequest(byte_range.offset)
    if isinstance(byte_range, SuffixByteRequest):
        return SuffixRequest(byte_range.suffix)
    # the words zarr's own stores use, which zarr's store tests look for
    raise ValueTypeError(f"Unexpected byte_range, got {byte_range!r}: a byte range is "
                         f"a RangeByteRequest, OffsetByteRequest or SuffixByteRequest")


def _value(value: Any) -> memoryview:
    """A zarr Buffer's bytes as a read-only byte view, without a copy (a store that
    keeps values copies it; see ``Store.copies_values``)."""
    if not isinstance(value, Buffer):
        raise ValueTypeError(f"ZarrStore.set takes a zarr Buffer, not "
                             f"{type(value).__name__}")
    view = memoryview(value.as_buffer_like())
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view.toreadonly()


def _read_one(store: Store, key: str, request: Any) -> Any:
    if request is None:
        return store.get(key)
    return store.get_partial_values([(key, request)])[0]


def _read_ranges(store: Store, items: list[tuple[str, Any]]) -> list[Any]:
    return store.get_partial_values(items)


def _exists(store: Store, key: str) -> bool:
    return store.exists(key)


def _getsize(store: Store, key: str) -> int | None:
    return store.getsize(key)


def _size_under(store: Store, prefix: str) -> int:
    with store.transaction(write=False):
        keys = store.list_prefix(prefix) if prefix else store.list()
        return sum(store.getsize(k) or 0 for k in list(keys))


def _list_keys(store: Store, prefix: str) -> list[str]:
    """Keys starting with ``prefix``, which for zarr is any string: the listing of the
    directory it lies in (kvzarr lists ``""`` or ``"dir/"``), cut to the prefix."""
    cut = prefix.rfind("/") + 1
    directory, rest = prefix[:cut], prefix[cut:]
    keys = store.list_prefix(directory) if directory else store.list()
    return [k for k in keys if k.startswith(prefix)] if rest else list(keys)


def _list_children(store: Store, prefix: str) -> list[str]:
    """The names of ``prefix``'s children as zarr names them: no trailing ``/``, each
    once (kvzarr lists a name that is both a key and a directory twice)."""
    names = []
    seen = set()
    for name in store.list_dir(prefix):
        name = name[:-1] if name.endswith("/") else name
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def _is_empty(store: Store, prefix: str) -> bool:
    return next(iter(store.list_dir(prefix)), None) is None


def _erase_prefix(store: Store, prefix: str) -> None:
    store.erase_prefix(prefix)


def _set_if_absent(store: Store, key: str, value: memoryview) -> None:
    with store.key_lock([key]), store.transaction():
        if not store.exists(key):
            store.set(key, value)


def _write(store: Store, ops: list[tuple[str, str, Any]]) -> None:
    """Apply ``("set", key, value)`` / ``("erase", key, None)`` in order, runs of one kind
    as one batch call."""
    i = 0
    while i < len(ops):
        kind, j = ops[i][0], i
        while j < len(ops) and ops[j][0] == kind:
            j += 1
        if kind == "set":
            if j - i == 1:
                store.set(ops[i][1], ops[i][2])
            else:
                store.set_many([(k, v) for _, k, v in ops[i:j]])
        elif j - i == 1:
            store.erase(ops[i][1])
        else:
            store.erase_values([k for _, k, _ in ops[i:j]])
        i = j


def _write_group(store: Store, ops: list[tuple[str, str, Any]]) -> list[Exception | None]:
    """Group commit: ``ops`` in one write transaction; if that fails, each alone, so that
    each caller gets its own outcome. Never raises an Exception: returns one per op."""
    if len(ops) > 1:
        try:
            with store.transaction():
                _write(store, ops)
            return [None] * len(ops)
        except Exception:
            pass      # tried one by one below: the group's failure may be one op's
    outcomes: list[Exception | None] = []
    for op in ops:
        try:
            _write(store, [op])
            outcomes.append(None)
        except Exception as e:
            outcomes.append(e)
    return outcomes


# --- the opened kvzarr store, shared ----------------------------------------------------

class _Origin:
    """The kvzarr store that the ZarrStores on one target share in this process: opened
    on the first one's first use, closed when the last one is closed (only a store this
    module opened; a Store object the caller passed stays the caller's). Also the open
    ``transaction()`` block of that store, which every ZarrStore on it joins."""

    def __init__(self, opener: Callable[[bool], Store] | None, token: str,
                 store: Store | None = None) -> None:
        self.opener = opener
        self.token = token
        self.store = store
        self.read_only = True if store is None else store.read_only
        self.refs = 0
        self.lock = threading.Lock()
        #: the thread running the open ``transaction()`` block, or None
        self.txn: _TxnThread | None = None
        self.txn_lock = threading.RLock()

    def acquire(self, read_only: bool) -> None:
        with self.lock:
            if self.store is None:
                assert self.opener is not None
                self.store = self.opener(read_only)
                self.read_only = read_only
            elif self.read_only and not read_only:
                self._reopen_writable()
            self.refs += 1

    def _reopen_writable(self) -> None:
        if self.opener is None:
            raise ReadOnlyError(f"{self.store!r} is read-only: a writable ZarrStore cannot "
                                f"be made on it", hint="pass a writable store")
        if self.txn is not None:
            raise ReadOnlyError("cannot reopen the store writable while a read-only "
                                "transaction() block is open on it")
        old = self.store
        assert old is not None
        # LMDB takes one environment per file per process: the read-only one goes first
        old.close()
        try:
            self.store = self.opener(False)
        except BaseException:
            self.store = self.opener(True)
            raise
        self.read_only = False

    def release(self) -> None:
        with self.lock:
            self.refs -= 1
            if self.refs <= 0 and self.opener is not None and self.store is not None:
                store, self.store = self.store, None
                store.close()


_origins: dict[str, _Origin] = {}
_origins_lock = threading.Lock()


def _location(target: Any, transformers: Any) -> str | None:
    """What names the data of a path or URL target (with its transformers) in this
    process, or None when no other ZarrStore can share it (memory://, transformer
    instances)."""
    text = os.fspath(target)
    if text.startswith("memory://"):
        return None
    if "://" not in text:
        text = "file:" + os.path.realpath(text)
    try:
        spec = json.dumps(transformers, sort_keys=True)
    except TypeError:          # transformer instances: one stack each
        return None
    return f"{text} {spec}"


def _origin_for(target: Any, transformers: Any) -> _Origin:
    def opener(read_only: bool) -> Store:
        return open_store(target, mode="r" if read_only else "a", transformers=transformers)
    location = _location(target, transformers)
    if location is None:
        return _Origin(opener, uuid.uuid4().hex)
    with _origins_lock:
        origin = _origins.get(location)
        if origin is None:
            origin = _origins[location] = _Origin(opener, location)
        return origin


#: the origins of Store objects passed without transformers: ZarrStores on one object
#: share it (and its transaction block)
_object_origins: "weakref.WeakKeyDictionary[Store, _Origin]" = weakref.WeakKeyDictionary()


def _origin_of(store: Store, transformers: Any, token: str | None) -> _Origin:
    """The origin of a Store object target; ``token``: the one of the ZarrStore this
    one is a pickled copy of."""
    if transformers is not None:       # a new stack on the store: its own origin
        stack = open_store(store, transformers=transformers)
        return _Origin(None, token or uuid.uuid4().hex, stack)
    with _origins_lock:
        origin = _object_origins.get(store)
        if origin is None:
            origin = _object_origins[store] = _Origin(None, token or uuid.uuid4().hex, store)
        return origin


def _bottom(store: Store) -> Store:
    """The store at the bottom of a transformer stack."""
    while True:
        base = getattr(store, "_base", None)
        if not isinstance(base, Store):
            return store
        store = base


class _TxnThread:
    """The thread that holds a ``transaction()`` block's kvzarr transaction (kvzarr's
    transactions belong to the thread that began them, and zarr's calls arrive on its
    event-loop thread): every operation of the block runs here, one at a time."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kvzarr-zarrstore-txn")
        self._ident: int | None = None
        self._context: Any = None

    def begin(self, context: Any) -> None:
        def enter() -> None:
            self._ident = threading.get_ident()
            context.__enter__()
        self._context = context
        self._pool.submit(enter).result()

    def end(self, exc: BaseException | None) -> None:
        """Commit (``exc`` None) or roll back, on the thread that began it."""
        def leave() -> None:
            if exc is None:
                self._context.__exit__(None, None, None)
                return
            try:               # a store aborts with the exception current, as in a with
                raise exc
            except BaseException:
                self._context.__exit__(type(exc), exc, exc.__traceback__)
        self._pool.submit(leave).result()

    def submit(self, fn: Callable[..., Any], *args: Any) -> ThreadFuture:
        return self._pool.submit(fn, *args)

    def here(self) -> bool:
        return threading.get_ident() == self._ident

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


# --- the store ----------------------------------------------------------------------

class ZarrStore(_ZarrStore):
    """A zarr-python 3 store over a kvzarr store.

    ``target``: a path (``"data.sqlite"``, ``"data.lmdb"``, ``"data.zip"``, a directory),
    a URL (``"sqlite:///data.db"``, ``"postgresql://..."``), or a kvzarr Store object or
    transformer stack; ``transformers``: a transformer stack to put on it, as
    :func:`kvzarr.open_store` takes it. ``read_only=True`` refuses writes (as zarr's
    stores do, with ValueError) and opens a path or URL read-only; over a read-only
    Store object the ZarrStore is read-only whatever ``read_only`` says.

    The store is opened on first use (zarr's ``_open``), not by the constructor.

    Promises:

    * Writes: each ``set``/``delete`` is atomic and committed (durable where the store
      syncs commits) when its ``await`` returns; writes zarr issues together are
      committed together (group commit, see the module docstring). Inside
      ``with zstore.transaction():`` every write is part of that one transaction
      instead: all of them or none.
    * Reads: a ``get_partial_values`` (and zarr's ``_get_many``) reads in one read
      transaction: one consistent state of the store.
    * Threads: any number of threads may use one ZarrStore. Processes: it pickles to
      what opens the same target in the receiving process (a Store object target
      pickles as that store does); one over a MemoryStore raises NotPicklableError.
    * Equality: two ZarrStores are equal when they are on the same data: the same path
      or URL with the same transformers, the same Store object, or copies
      (``with_read_only``, pickling) of one ZarrStore. ``read_only`` does not count.
    """

    def __init__(self, target: Any, *, read_only: bool = False,
                 transformers: Any = None, _token: str | None = None) -> None:
        if isinstance(target, Store):
            origin = _origin_of(target, transformers, _token)
            read_only = bool(read_only or origin.read_only)
        elif target is None or isinstance(target, (str, os.PathLike)):
            origin = _origin_for("memory://" if target is None else target, transformers)
        else:
            raise ValueTypeError(f"a ZarrStore target is a path, a URL or a kvzarr Store, "
                                 f"not {type(target).__name__}")
        super().__init__(read_only=bool(read_only))
        self._target = target
        self._transformers = transformers
        self._origin = origin
        self._open_lock = threading.Lock()
        #: the writes waiting for their group commit, per event loop
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[tuple, asyncio.Future]]] = {}

    # -- opening, closing, copies ----------------------------------------------------------

    async def _open(self) -> None:
        if self._is_open:
            raise ValueError("store is already open")
        self._open_now()

    def _open_now(self) -> None:
        with self._open_lock:
            if not self._is_open:
                self._origin.acquire(self._read_only)
                self._is_open = True

    def _kv(self) -> Store:
        """The kvzarr store, opened if this ZarrStore is not yet."""
        store = self._origin.store
        if store is None or not self._is_open:
            self._open_now()
            store = self._origin.store
            assert store is not None
        return store

    def close(self) -> None:
        """Close this ZarrStore; the kvzarr store closes with the last ZarrStore on it
        (never a Store object the caller passed). Using it again opens it again."""
        with self._open_lock:
            if self._is_open:
                self._is_open = False
                self._origin.release()

    def with_read_only(self, read_only: bool = False) -> "ZarrStore":
        """A ZarrStore on the same data with another ``read_only``, sharing the opened
        kvzarr store (not opened yet itself; this one stays open)."""
        copy = object.__new__(type(self))
        _ZarrStore.__init__(copy, read_only=read_only)
        if not read_only and self._origin.opener is None and self._origin.read_only:
            raise ReadOnlyError(f"{self._origin.store!r} is read-only: a writable ZarrStore "
                                f"cannot be made on it", hint="pass a writable store")
        copy._target, copy._transformers = self._target, self._transformers
        copy._origin = self._origin
        copy._open_lock = threading.Lock()
        copy._pending = {}
        return copy

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZarrStore) and self._origin.token == other._origin.token

    def __hash__(self) -> int:
        return hash(self._origin.token)

    def __getstate__(self) -> dict[str, Any]:
        target = self._target
        memory = (_bottom(target) if isinstance(target, Store) else None)
        if isinstance(memory, MemoryStore) or target is None or (
                not isinstance(target, Store) and os.fspath(target).startswith("memory://")):
            raise NotPicklableError(
                "a ZarrStore over a MemoryStore cannot be sent to another process: its "
                "data lives in this process's memory",
                hint="use a file store (.sqlite, .lmdb, .zip, a directory) to share data "
                     "between processes")
        return {"target": target, "transformers": self._transformers,
                "read_only": self._read_only, "token": self._origin.token}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a Store object target keeps the token: the copy equals the ZarrStore pickled
        self.__init__(state["target"], read_only=state["read_only"],
                      transformers=state["transformers"], _token=state["token"])

    def __repr__(self) -> str:
        ro = ", read_only=True" if self._read_only else ""
        return f"ZarrStore({self._target!r}{ro})"

    __str__ = __repr__

    # -- capabilities ----------------------------------------------------------------------

    @property
    def supports_writes(self) -> bool:
        return self._kv().capabilities.writable

    @property
    def supports_deletes(self) -> bool:
        return self._kv().capabilities.deletable

    @property
    def supports_listing(self) -> bool:
        return self._kv().capabilities.listable

    @property
    def store(self) -> Store:
        """The kvzarr store (or transformer stack) under this ZarrStore, opened."""
        return self._kv()

    # -- running kvzarr's calls ------------------------------------------------------------

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(kvzarr store, *args)``: inline, or on the thread of an open
        ``transaction()`` block."""
        store = self._kv()
        txn = self._origin.txn
        if txn is None or txn.here():
            return fn(store, *args)
        return await asyncio.wrap_future(txn.submit(fn, store, *args))

    def _run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        store = self._kv()
        txn = self._origin.txn
        if txn is None or txn.here():
            return fn(store, *args)
        return txn.submit(fn, store, *args).result()

    # -- reads -----------------------------------------------------------------------------

    async def get(self, key: str, prototype: Any = None,
                  byte_range: Any = None) -> Buffer | None:
        value = await self._run(_read_one, key, _request(byte_range))
        if value is None:
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(value)

    async def get_partial_values(self, prototype: Any,
                                 key_ranges: Iterable[tuple[str, Any]]) -> list[Buffer | None]:
        items = [(key, _request(r)) for key, r in key_ranges]
        if not items:
            return []
        values = await self._run(_read_ranges, items)
        buffer = (prototype or default_buffer_prototype()).buffer
        return [None if v is None else buffer.from_bytes(v) for v in values]

    async def _get_many(self, requests: Iterable[tuple[str, Any, Any]]
                        ) -> Any:
        requests = list(requests)
        if not requests:
            return
        values = await self._run(_read_ranges, [(k, _request(r)) for k, _, r in requests])
        for (key, prototype, _), value in zip(requests, values):
            yield key, None if value is None else (
                prototype or default_buffer_prototype()).buffer.from_bytes(value)

    async def exists(self, key: str) -> bool:
        return await self._run(_exists, key)

    async def getsize(self, key: str) -> int:
        size = await self._run(_getsize, key)
        if size is None:
            raise FileNotFoundError(key)
        return size

    async def getsize_prefix(self, prefix: str) -> int:
        return await self._run(_size_under, _as_directory(prefix))

    async def is_empty(self, prefix: str) -> bool:
        return await self._run(_is_empty, _as_directory(prefix))

    async def list(self) -> AsyncIterator[str]:
        for key in await self._run(_list_keys, ""):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await self._run(_list_keys, prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        for name in await self._run(_list_children, _as_directory(prefix)):
            yield name

    # -- writes ----------------------------------------------------------------------------

    def _checked(self, key: str) -> str:
        self._check_writable()
        store = self._kv()
        return check_key(key, store.max_key_bytes, store.max_segment_bytes)

    async def set(self, key: str, value: Buffer) -> None:
        key = self._checked(key)
        await self._commit(("set", key, _value(value)))

    async def delete(self, key: str) -> None:
        key = self._checked(key)
        await self._commit(("erase", key, None))

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        key = self._checked(key)
        await self._run(_set_if_absent, key, _value(value))

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        await self._run(_erase_prefix, _as_directory(prefix))

    async def clear(self) -> None:
        self._check_writable()
        await self._run(_erase_prefix, "")

    def _commit(self, op: tuple) -> asyncio.Future:
        """Queue a write for this loop turn's group commit; the future is its outcome."""
        loop = asyncio.get_running_loop()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = []
            loop.call_soon(self._flush, loop)
        future = loop.create_future()
        pending.append((op, future))
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        pending = self._pending.pop(loop, [])
        if not pending:
            return
        ops = [op for op, _ in pending]
        futures = [f for _, f in pending]
        try:
            store = self._kv()
            txn = self._origin.txn
            if txn is None or txn.here():
                _settle(futures, _write_group(store, ops))
                return
            job = txn.submit(_write_group, store, ops)
        except BaseException as e:
            _settle(futures, [e] * len(futures))
            if not isinstance(e, Exception):
                raise
            return
        job.add_done_callback(lambda done: loop.call_soon_threadsafe(_settle_job, futures, done))

    # -- zarr's synchronous protocol (SupportsGetSync, SupportsSetSync, SupportsDeleteSync)

    def get_sync(self, key: str, *, prototype: Any = None,
                 byte_range: Any = None) -> Buffer | None:
        value = self._run_sync(_read_one, key, _request(byte_range))
        if value is None:
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(value)

    def set_sync(self, key: str, value: Buffer) -> None:
        key = self._checked(key)
        self._run_sync(_write, [("set", key, _value(value))])

    def delete_sync(self, key: str) -> None:
        key = self._checked(key)
        self._run_sync(_write, [("erase", key, None)])

    # -- transactions ----------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator["ZarrStore"]:
        """``with zstore.transaction():`` makes every operation on the kvzarr store under
        this ZarrStore, until the block ends, one transaction of that store: atomic and
        isolated where its ``capabilities.transactional`` (LMDB, SQL, zip, memory), only
        grouped elsewhere (a directory). It commits when the block ends, and an exception
        leaving the block rolls it all back. On a read-only ZarrStore it is one read
        transaction: every read in it sees one state of the store.

        The block covers every ZarrStore on that kvzarr store in this process (this one,
        its ``with_read_only`` copies, other ZarrStores on the same path or URL), from
        any thread: zarr's event loop, dask's worker threads. The operations run one at a
        time on a thread that holds the transaction. A second block in another thread
        waits for this one to end; a block in the same thread joins it. Another process,
        and a kvzarr handle opened separately, see nothing of it until it commits."""
        store = self._kv()
        origin = self._origin
        with origin.txn_lock:
            if origin.txn is not None:       # nested in the thread that holds the block
                yield self
                return
            runner = _TxnThread()
            try:
                runner.begin(store.transaction(write=not self._read_only))
            except BaseException:
                runner.shutdown()
                raise
            origin.txn = runner
            try:
                yield self
            except BaseException as e:
                origin.txn = None
                runner.end(e)
                raise
            else:
                origin.txn = None
                runner.end(None)
            finally:
                origin.txn = None
                runner.shutdown()


def _as_directory(prefix: str) -> str:
    """zarr's ``"group"`` or ``"group/"`` as kvzarr's prefix ``"group/"`` (``""``: all)."""
    if prefix and not prefix.endswith("/"):
        return prefix + "/"
    return prefix


def _settle(futures: list[asyncio.Future], outcomes: list[BaseException | None]) -> None:
    for future, outcome in zip(futures, outcomes):
        if future.done():
            continue          # cancelled while waiting: the write happened all the same
        if outcome is None:
            future.set_result(None)
        else:
            future.set_exception(outcome)


def _settle_job(futures: list[asyncio.Future], job: ThreadFuture) -> None:
    try:
        outcomes = job.result()
    except BaseException as e:
        outcomes = [e] * len(futures)
    _settle(futures, outcomes)


__all__ = ["ZarrStore"]
