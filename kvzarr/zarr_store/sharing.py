"""The kvzarr store the ZarrStores on one target share in a process, and the thread
that holds a ``transaction()`` block. No zarr-python here: what is shared is kvzarr's.

ZarrStores on the same path or URL (with the same transformers) share one
:class:`Origin`: one opened kvzarr store, opened on the first one's first use and closed
when the last one is closed, and one transaction block. So do ZarrStores on one Store
object, and a ZarrStore's ``with_read_only`` copies. A store the caller passed as an
object is never closed here: it stays the caller's.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
import weakref
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from ..api import open_store
from ..errors import ReadOnlyError
from ..stores.base import Store


class Origin:
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
        self.txn: TxnThread | None = None
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


_origins: dict[str, Origin] = {}
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


def absolute(target: Any) -> Any:
    """A path target as an absolute path (a pickled ZarrStore opens the same file in a
    process with another working directory); a URL as it is."""
    text = os.fspath(target)
    return text if "://" in text else os.path.abspath(text)


def origin_for(target: Any, transformers: Any) -> Origin:
    target = absolute(target)

    def opener(read_only: bool) -> Store:
        return open_store(target, mode="r" if read_only else "a", transformers=transformers)
    location = _location(target, transformers)
    if location is None:
        return Origin(opener, uuid.uuid4().hex)
    with _origins_lock:
        origin = _origins.get(location)
        if origin is None:
            origin = _origins[location] = Origin(opener, location)
        return origin


#: the origins of Store objects passed without transformers, by the object's id:
#: ZarrStores on one object share it (and its transaction block). Weak values: an
#: origin (which holds its store, so the id stays taken) goes with its last ZarrStore.
_object_origins: "weakref.WeakValueDictionary[int, Origin]" = weakref.WeakValueDictionary()


def origin_of(store: Store, transformers: Any, token: str | None) -> Origin:
    """The origin of a Store object target; ``token``: the one of the ZarrStore this
    one is a pickled copy of."""
    if transformers is not None:       # a new stack on the store: its own origin
        stack = open_store(store, transformers=transformers)
        return Origin(None, token or uuid.uuid4().hex, stack)
    with _origins_lock:
        origin = _object_origins.get(id(store))
        if origin is None or origin.store is not store:
            origin = Origin(None, token or uuid.uuid4().hex, store)
            _object_origins[id(store)] = origin
        return origin


def _after_fork_in_child() -> None:
    # a lock another thread of the parent held stays held in the child; a transaction
    # thread does not exist there
    global _origins_lock
    _origins_lock = threading.Lock()
    for origin in [*_origins.values(), *_object_origins.values()]:
        origin.lock, origin.txn_lock, origin.txn = threading.Lock(), threading.RLock(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def bottom(store: Store) -> Store:
    """The store at the bottom of a transformer stack."""
    while True:
        base = getattr(store, "_base", None)
        if not isinstance(base, Store):
            return store
        store = base


class TxnThread:
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
