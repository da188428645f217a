"""MemoryStore: keys and values in a sorted in-process dict. Specification: stores/memory.md.

Transactions are atomic and isolated between threads: a write transaction holds the
store's lock and keeps its writes in an overlay that is applied on commit and dropped on
abort; a read transaction holds the lock too, so it never sees half a commit. Nothing
survives the process.

``append`` is native: an appended value is kept as its parts (:class:`Appended`), so an
append copies none of the bytes already stored; byte ranges are cut across the parts and
a whole read joins them.

Change counter: a count of commits, bumped under the lock by every write transaction
that wrote anything and by every write outside one, BEFORE the new values are put in
place, so a reader that finds the count unchanged has seen none of them. Every write
path must go through :meth:`MemoryStore._bump` first.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from sortedcontainers import SortedDict

from ..errors import NotPicklableError
from .byteranges import ByteRequest, apply_byte_request, request_span
from .base import Capabilities, Store, check_append_size, no_append_target
from .keys import prefix_successor
from .overlay import DELETED, merged_keys


class Appended:
    """A value that was appended to: its parts in order (immutable, so a transaction's
    overlay and the committed dictionary can share them)."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: tuple[bytes, ...]) -> None:
        self.parts = parts
        self.size = sum(len(p) for p in parts)

    def join(self) -> bytes:
        return b"".join(self.parts)

    def cut(self, request: ByteRequest) -> bytes:
        """The bytes of ``request``, taken from the parts it overlaps only."""
        start, end = request_span(request, self.size)
        out = []
        at = 0
        for part in self.parts:
            stop = at + len(part)
            if stop > start and at < end:
                out.append(part[max(start - at, 0):min(end, stop) - at])
            at = stop
            if at >= end:
                break
        return b"".join(out)


def _whole(value: Any) -> Any:
    return value if value is None or type(value) is bytes else value.join()


class MemoryStore(Store):
    """Keys and values in this process's memory (``"memory://"`` or ``None`` as a
    target). Transactions are atomic and isolated between threads (one transaction at
    a time: each holds the store's lock); nothing survives the process, and another
    process cannot see it. Specification: ``stores/memory.md``."""

    capabilities = Capabilities(partial_reads=True, partial_writes=True, transactional=True,
                                appends=True)
    lists_foreign_keys = False     # every key came in through check_key

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        self._data: SortedDict = SortedDict()
        self._lock = threading.RLock()
        self._commits = 0   # the change counter

    def _reopen_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Never: another process could only get an empty store, and writes made there
        would silently vanish."""
        raise NotPicklableError(
            "a MemoryStore cannot be sent to another process (pickled): its data lives "
            "in this process's memory only, so the arrays and groups on it cannot "
            "either", hint="keep the data in a file store the other processes can open "
                           "(a path ending in .lmdb, .sqlite or .zip, or a directory), "
                           "or use threads (dask's default threaded scheduler)")

    # The overlay of this thread's write transaction, or None.
    def _overlay(self) -> dict[str, Any] | None:
        handle = self._current_transaction()
        return handle if isinstance(handle, dict) else None

    def _begin(self, write: bool) -> Any:
        self._lock.acquire()
        return {} if write else None

    def _bump(self) -> None:
        """Count a commit; called under the lock before its values are put in place."""
        self._commits += 1

    def _change_counter(self) -> int:
        # A read transaction holds the lock (nothing commits meanwhile); a write
        # transaction that wrote something commits as exactly one more.
        overlay = self._overlay()
        return self._commits + 1 if overlay else self._commits

    def _commit(self, handle: Any) -> None:
        try:
            if handle:
                self._bump()
                for key, value in handle.items():
                    if value is DELETED:
                        self._data.pop(key, None)
                    else:
                        self._data[key] = value
        finally:
            self._lock.release()

    def _abort(self, handle: Any) -> None:
        self._lock.release()

    def _stored(self, key: str) -> Any:
        """What is stored for ``key`` as this thread sees it: bytes, Appended or None."""
        overlay = self._overlay()
        if overlay is not None and key in overlay:
            value = overlay[key]
            return None if value is DELETED else value
        return self._data.get(key)

    def _get(self, key: str) -> bytes | None:
        return _whole(self._stored(key))

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        value = self._stored(key)
        if value is None:
            return None
        if type(value) is bytes:
            return apply_byte_request(value, request)
        return value.cut(request)

    def _exists(self, key: str) -> bool:
        return self._stored(key) is not None

    def _getsize(self, key: str) -> int | None:
        value = self._stored(key)
        if value is None:
            return None
        return len(value) if type(value) is bytes else value.size

    def _append(self, key: str, data: bytes, expected_size: int) -> None:
        with self._lock:   # the check and the write as one step (re-entrant in a transaction)
            value = self._stored(key)
            if value is None:
                raise no_append_target(key)
            size = len(value) if type(value) is bytes else value.size
            check_append_size(key, size, expected_size)
            if not data:
                return
            parts = (value,) if type(value) is bytes else value.parts
            self._set(key, Appended(parts + (data,)))

    def _set(self, key: str, value: bytes) -> None:
        overlay = self._overlay()
        if overlay is not None:
            overlay[key] = value
        else:
            with self._lock:
                self._bump()
                self._data[key] = value

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        for key, value in items:
            self._set(key, value)

    def _erase(self, key: str) -> None:
        overlay = self._overlay()
        if overlay is not None:
            overlay[key] = DELETED
        else:
            with self._lock:
                self._bump()
                self._data.pop(key, None)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        with self._lock:
            keys = list(self._data.irange(prefix, prefix_successor(prefix),
                                          inclusive=(True, False)))
        overlay = self._overlay()
        if overlay:
            keys = merged_keys(keys, overlay, prefix)
        return iter(keys)

    def _list_dir(self, prefix: str) -> Iterator[str]:
        if self._overlay():  # inside a write transaction: the generic walk sees the overlay
            return super()._list_dir(prefix)
        end = prefix_successor(prefix)
        names: list[str] = []
        cursor = prefix
        with self._lock:
            while True:
                key = next(iter(self._data.irange(cursor, end, inclusive=(True, False))), None)
                if key is None:
                    break
                rest = key[len(prefix):]
                cut = rest.find("/")
                if cut < 0:
                    names.append(rest)
                    cursor = key + "\x00"  # the next key after this one (keys hold no NUL)
                else:
                    child = rest[:cut + 1]
                    names.append(child)
                    cursor = prefix_successor(prefix + child)  # skip the child's subtree
        return iter(names)

    def __repr__(self) -> str:
        return f"MemoryStore(keys={len(self._data)})"
