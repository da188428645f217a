"""The ZarrStore class: zarr-python's Store interface over a kvzarr store. What each
operation does is in :mod:`.operations`; the opened store its copies share, and the
transaction thread, in :mod:`.sharing`. See the package docstring for the promises.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from concurrent.futures import Future as ThreadFuture
from contextlib import contextmanager
from typing import Any, Callable

try:
    from zarr.abc.store import Store as _ZarrStore
    from zarr.core.buffer import Buffer, default_buffer_prototype
except ImportError as _e:  # pragma: no cover - the message is the point
    raise ImportError("kvzarr.ZarrStore needs zarr-python 3.1: pip install 'kvzarr[zarr]'"
                      ) from _e

from ..errors import NotPicklableError, ReadOnlyError, ValueTypeError
from ..stores.base import Store
from ..stores.keys import check_key
from ..stores.memory import MemoryStore
from . import operations as ops
from .sharing import TxnThread, absolute, bottom, origin_for, origin_of


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
      committed together (group commit, see the package docstring). Inside
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

    #: where kvzarr's calls run: reads and write groups of values smaller than this many
    #: bytes inline on zarr's event loop (a hand-off to a thread and back costs more
    #: than such a call), larger ones on the loop's thread pool, where their copies
    #: overlap zarr's decoding (the size of a read is guessed from the last ones). None:
    #: always inline; 0: always on the thread pool (zarr's LocalStore does that).
    #: The ``zarrstore-threads`` benchmark group compares the two ends.
    offload_bytes: int | None = 256 << 10

    def __init__(self, target: Any, *, read_only: bool = False,
                 transformers: Any = None, _token: str | None = None) -> None:
        if isinstance(target, Store):
            origin = origin_of(target, transformers, _token)
            read_only = bool(read_only or origin.read_only)
        elif target is None or isinstance(target, (str, os.PathLike)):
            origin = origin_for("memory://" if target is None else target, transformers)
        else:
            raise ValueTypeError(f"a ZarrStore target is a path, a URL or a kvzarr Store, "
                                 f"not {type(target).__name__}")
        super().__init__(read_only=bool(read_only))
        self._target = target
        self._transformers = transformers
        self._origin = origin
        self._open_lock = threading.Lock()
        #: the size of recent reads (a moving average): whether the next one goes to a
        #: thread (see offload_bytes)
        self._typical = 0
        #: the writes waiting for their group commit, per event loop
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[tuple, asyncio.Future]]] = {}
        #: the event loops with a group commit running on a thread
        self._committing: set[asyncio.AbstractEventLoop] = set()

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
        copy._committing = set()
        copy._typical = self._typical
        copy.offload_bytes = self.offload_bytes
        return copy

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZarrStore) and self._origin.token == other._origin.token

    def __hash__(self) -> int:
        return hash(self._origin.token)

    def __getstate__(self) -> dict[str, Any]:
        target = self._target
        memory = (bottom(target) if isinstance(target, Store) else None)
        if isinstance(memory, MemoryStore) or target is None or (
                not isinstance(target, Store) and os.fspath(target).startswith("memory://")):
            raise NotPicklableError(
                "a ZarrStore over a MemoryStore cannot be sent to another process: its "
                "data lives in this process's memory",
                hint="use a file store (.sqlite, .lmdb, .zip, a directory) to share data "
                     "between processes")
        if not isinstance(target, Store):
            target = absolute(target)
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

    async def _run(self, fn: Callable[..., Any], *args: Any, size: int = 0) -> Any:
        """``fn(kvzarr store, *args)``, moving ``size`` bytes: inline or on zarr's thread
        pool (``offload_bytes``), or on the thread of an open ``transaction()`` block."""
        store = self._kv()
        txn = self._origin.txn
        if txn is None or txn.here():
            if not self._offloads(size):
                return fn(store, *args)
            return await asyncio.get_running_loop().run_in_executor(None, fn, store, *args)
        return await asyncio.wrap_future(txn.submit(fn, store, *args))

    def _offloads(self, size: int) -> bool:
        limit = self.offload_bytes
        return limit is not None and size >= limit

    def _saw(self, values: list[Any]) -> None:
        """Fold the sizes of values just read into the moving average."""
        sizes = [len(v) for v in values if v is not None]
        if sizes:
            self._typical = (3 * self._typical + sum(sizes) // len(sizes)) >> 2

    def _run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        store = self._kv()
        txn = self._origin.txn
        if txn is None or txn.here():
            return fn(store, *args)
        return txn.submit(fn, store, *args).result()

    # -- reads -----------------------------------------------------------------------------

    async def get(self, key: str, prototype: Any = None,
                  byte_range: Any = None) -> Buffer | None:
        value = await self._run(ops.read_one, key, ops.byte_request(byte_range),
                                size=self._typical)
        if value is None:
            return None
        self._typical = (3 * self._typical + len(value)) >> 2
        return (prototype or default_buffer_prototype()).buffer.from_bytes(value)

    async def get_partial_values(self, prototype: Any,
                                 key_ranges: Iterable[tuple[str, Any]]) -> list[Buffer | None]:
        items = [(key, ops.byte_request(r)) for key, r in key_ranges]
        if not items:
            return []
        values = await self._run(ops.read_ranges, items, size=self._typical * len(items))
        self._saw(values)
        buffer = (prototype or default_buffer_prototype()).buffer
        return [None if v is None else buffer.from_bytes(v) for v in values]

    async def _get_many(self, requests: Iterable[tuple[str, Any, Any]]
                        ) -> Any:
        requests = list(requests)
        if not requests:
            return
        values = await self._run(ops.read_ranges,
                                 [(k, ops.byte_request(r)) for k, _, r in requests],
                                 size=self._typical * len(requests))
        self._saw(values)
        for (key, prototype, _), value in zip(requests, values):
            yield key, None if value is None else (
                prototype or default_buffer_prototype()).buffer.from_bytes(value)

    async def exists(self, key: str) -> bool:
        return await self._run(ops.exists, key)

    async def getsize(self, key: str) -> int:
        size = await self._run(ops.getsize, key)
        if size is None:
            raise FileNotFoundError(key)
        return size

    async def getsize_prefix(self, prefix: str) -> int:
        return await self._run(ops.size_under, ops.as_directory(prefix))

    async def is_empty(self, prefix: str) -> bool:
        return await self._run(ops.is_empty, ops.as_directory(prefix))

    async def list(self) -> AsyncIterator[str]:
        for key in await self._run(ops.list_keys, ""):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await self._run(ops.list_keys, prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        for name in await self._run(ops.list_children, ops.as_directory(prefix)):
            yield name

    # -- writes ----------------------------------------------------------------------------

    def _checked(self, key: str) -> str:
        self._check_writable()
        store = self._kv()
        return check_key(key, store.max_key_bytes, store.max_segment_bytes)

    async def set(self, key: str, value: Buffer) -> None:
        key = self._checked(key)
        await self._commit(("set", key, ops.buffer_bytes(value)))

    async def delete(self, key: str) -> None:
        key = self._checked(key)
        await self._commit(("erase", key, None))

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        key = self._checked(key)
        await self._run(ops.set_if_absent, key, ops.buffer_bytes(value))

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        await self._run(ops.erase_prefix, ops.as_directory(prefix))

    async def clear(self) -> None:
        self._check_writable()
        await self._run(ops.erase_prefix, "")

    def _commit(self, op: tuple) -> asyncio.Future:
        """Queue a write for the next group commit; the future is its outcome.

        Writes that arrive while a commit runs on a thread wait for it to end and then
        go together in the next one (a pipeline, not a barrier): zarr's tasks whose
        writes are committed go on encoding their next chunks meanwhile, as they would
        with a store that writes each value on its own thread."""
        loop = asyncio.get_running_loop()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = []
            if loop not in self._committing:
                loop.call_soon(self._flush, loop)
        future = loop.create_future()
        pending.append((op, future))
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commit the writes waiting on ``loop``: inline when they are small (one group
        commit), else on a thread, as a few groups (:meth:`_groups`) committed in turn,
        each caller resumed when its group is (then zarr encodes its next chunk while
        the next group is written). The next writes wait for this job to end; see
        :meth:`_commit`."""
        pending = self._pending.pop(loop, [])
        if not pending:
            return
        futures = [f for _, f in pending]
        try:
            store = self._kv()
            txn = self._origin.txn
            if txn is not None and not txn.here():
                job: Any = txn.submit(ops.write_group, store, [op for op, _ in pending])
                job.add_done_callback(lambda finished: loop.call_soon_threadsafe(
                    self._committed, loop, futures, finished))
            elif not self._offloads(sum(_size(op) for op, _ in pending)):
                _settle(futures, ops.write_group(store, [op for op, _ in pending]))
                return
            else:
                groups = self._groups(pending)

                def write_in_turn() -> None:
                    for group in groups:
                        outcomes = ops.write_group(store, [op for op, _ in group])
                        loop.call_soon_threadsafe(_settle, [f for _, f in group], outcomes)

                job = loop.run_in_executor(None, write_in_turn)
                job.add_done_callback(lambda finished: self._committed(loop, futures,
                                                                       finished))
        except BaseException as e:
            _settle(futures, [e] * len(futures))
            if not isinstance(e, Exception):
                raise
            return
        self._committing.add(loop)

    def _groups(self, pending: list[tuple[tuple, asyncio.Future]]
                ) -> list[list[tuple[tuple, asyncio.Future]]]:
        """``pending`` in order, cut into groups of at least ``offload_bytes`` each and
        at most four groups: zarr's next encodes overlap the later groups' commits, and
        a store that syncs each commit syncs a few times, not once per value."""
        limit = max(self.offload_bytes or 0, sum(_size(op) for op, _ in pending) // 4)
        groups: list[list[tuple[tuple, asyncio.Future]]] = [[]]
        size = 0
        for item in pending:
            if groups[-1] and size >= limit:
                groups.append([])
                size = 0
            groups[-1].append(item)
            size += _size(item[0])
        return groups

    def _committed(self, loop: asyncio.AbstractEventLoop, futures: list[asyncio.Future],
                   job: Any) -> None:
        """A commit job ended (on ``loop``): settle what it left unsettled (all of its
        futures when it failed as a whole), then commit what came meanwhile."""
        self._committing.discard(loop)
        _settle_job(futures, job)
        if loop in self._pending:
            self._flush(loop)

    # -- zarr's synchronous protocol (SupportsGetSync, SupportsSetSync, SupportsDeleteSync)

    def get_sync(self, key: str, *, prototype: Any = None,
                 byte_range: Any = None) -> Buffer | None:
        """:meth:`get` without an event loop (zarr-python's synchronous form): the value,
        or the bytes ``byte_range`` asks for, or None when the key is absent."""
        value = self._run_sync(ops.read_one, key, ops.byte_request(byte_range))
        if value is None:
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(value)

    def set_sync(self, key: str, value: Buffer) -> None:
        """:meth:`set` without an event loop: written and committed (one transaction, or
        the open ``transaction()`` block's) when it returns."""
        key = self._checked(key)
        self._run_sync(ops.write, [("set", key, ops.buffer_bytes(value))])

    def delete_sync(self, key: str) -> None:
        """:meth:`delete` without an event loop: erased and committed when it returns."""
        key = self._checked(key)
        self._run_sync(ops.write, [("erase", key, None)])

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
            runner = TxnThread()
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



def _size(op: tuple) -> int:
    """The bytes a queued write moves."""
    kind, _, value = op
    return len(value) if kind == "set" else 0


def _settle(futures: list[asyncio.Future], outcomes: list[BaseException | None]) -> None:
    for future, outcome in zip(futures, outcomes):
        if future.done():
            continue          # cancelled while waiting: the write happened all the same
        if outcome is None:
            future.set_result(None)
        else:
            future.set_exception(outcome)


def _settle_job(futures: list[asyncio.Future], job: Any) -> None:
    """Settle ``futures`` with a finished job's outcomes: its list of them, or its
    exception for each not yet settled (None: the job settled them itself)."""
    try:
        outcomes = job.result()
    except BaseException as e:
        outcomes = [e] * len(futures)
    if outcomes is not None:
        _settle(futures, outcomes)

