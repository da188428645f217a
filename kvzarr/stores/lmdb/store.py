"""LMDBStore: keys and values in one LMDB environment. Specification: stores/lmdb.md.

Promises (the spec says why each holds):

* ``with store.transaction():`` is one LMDB write transaction, begun at the top of the
  block under LMDB's writer lock and a ``flock`` on the data file, so a read-modify-write
  inside it cannot lose another process's update; it is all visible at once or not at
  all, also when the process is killed half way. Readers never wait.
* The map starts small and grows on demand. A write that does not fit aborts, grows the
  map and replays the transaction's writes (kept in a log) under the same locks; a map
  another process grew is adopted. ``MapFullError`` never reaches the caller; at
  ``map_size_max`` the caller gets :class:`StoreFullError` and nothing was written.
* Keys longer than LMDB's 511 bytes are stored under a mapped key (keymap.py) and read,
  listed and erased like any other.
* After ``fork()`` the child reopens the environment before its first operation.
* Values returned are ``bytes`` copied inside the transaction; no zero-copy buffer
  escapes it. Byte ranges are cut from the memory map without copying the rest.
* ``change_counter()`` is LMDB's transaction id: of the last commit outside a
  transaction (read from the meta pages, meta.py), of the snapshot inside a read
  transaction, and inside a write transaction the id it commits as once it has written
  something (a commit that changed no page would keep the old id, so such a
  transaction is made to change one; see :meth:`LMDBStore._change_counter`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import lmdb

from ..byteranges import ByteRequest, apply_byte_request
from ...errors import (ConflictError, KvzarrError, StoreClosedError, StoreConfigError,
                       StoreError, StoreFullError)
from ..base import Capabilities, Store
from ..keys import check_keys
from ...runtime import process as _process
from ...runtime.process import current_pid
from . import env as _env
from . import keymap
from .env import DURABILITY, SharedEnv, _translate, default_write_map

_BACKEND_ERRORS = (lmdb.Error, OSError, LookupError)
#: Writes estimated at this many bytes or more check the free map space first.
_PREGROW_BYTES = 1 << 20
#: the most one expect_writes hint grows the map by
_HINT_MAX_BYTES = 1 << 30

#: Transaction operations replayed after the map grows: (function(txn, arg), arg).
_Op = Callable[[Any, Any], Any]


class _Txn:
    """The handle ``_begin`` returns: the py-lmdb transaction and, for a write, the log
    of its writes (replayed if the map has to grow)."""
    __slots__ = ("shared", "txn", "write", "generation", "pid", "txn_id", "log", "log_bytes",
                 "advance", "put")

    def __init__(self, shared: SharedEnv, txn: Any, write: bool) -> None:
        self.shared = shared
        self.txn = txn
        self.write = write
        self.generation = shared.generation
        self.pid = shared.pid
        self.txn_id = txn.id() if write else 0
        self.log: list[tuple[_Op, Any]] = []
        self.log_bytes = 0
        #: a change counter was handed out that promises this commit a new id
        self.advance = False
        #: a value was put (which always changes a page; erases may change none)
        self.put = False


def _copy(value: Any) -> bytes:
    return value if type(value) is bytes else bytes(value)


class LMDBStore(Store):
    """A store in an LMDB environment: ``data.lmdb`` + ``data.lmdb-lock`` for a new
    store, or an existing directory environment (``data.mdb`` + ``lock.mdb``, as
    zarr-python 2's LMDBStore wrote)."""

    capabilities = Capabilities(partial_reads=True, partial_writes=True, transactional=True,
                                multi_process=True)
    max_key_bytes = None
    copies_values = True   # puts copy into the map (a replay after map growth keeps them)

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False,
                 durability: str = "full", map_size_start: int = 1 << 20,
                 map_size_max: int | None = None, lock: bool = True,
                 subdir: bool | None = None, max_readers: int = 126,
                 write_map: bool | None = None) -> None:
        """``durability``: ``"full"`` (default: every commit is on disk when it returns),
        ``"relaxed"`` (a power loss may undo the last commits, never corrupts) or
        ``"none"`` (no fsync; see stores/lmdb.md). ``map_size_start``: the first map
        size in bytes; it doubles on demand (by at most 1 GiB a step) up to
        ``map_size_max`` (1 TiB on 64-bit).
        ``lock=False`` turns LMDB's locking off: only for a file no other process uses.
        ``subdir``: None detects it (an existing directory is a directory environment).
        ``write_map``: on Linux, write through LMDB's shared map (``MDB_WRITEMAP``, the
        file's blocks allocated before they are mapped) instead of copying each page
        into the file at commit. It saves a copy of each page, but the kernel writes a
        page changed through the map back as its whole page-cache folio (up to 2 MiB
        on recent kernels), which a durable commit waits for. None (default): on with
        ``durability="none"``, off otherwise; see stores/lmdb.md, "Write map"."""
        super().__init__(read_only=read_only)
        self.path = os.fspath(path)
        if durability not in DURABILITY:
            raise StoreConfigError(f"unknown durability {durability!r}; choose one of "
                             f"{sorted(DURABILITY)}", path=self.path, field="durability")
        if map_size_max is None:
            map_size_max = max(_env.default_map_size_max(), map_size_start)
        for name, value in (("map_size_start", map_size_start),
                            ("map_size_max", map_size_max), ("max_readers", max_readers)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise StoreConfigError(f"{name} must be a positive integer, not {value!r}",
                                 path=self.path, field=name)
        if map_size_max < map_size_start:
            raise StoreConfigError("map_size_max is smaller than map_size_start", path=self.path,
                             field="map_size_max")
        if subdir is None:
            subdir = os.path.isdir(self.path)
        if read_only and not os.path.exists(self.path):
            raise StoreError("no LMDB environment at this path", path=self.path)
        if read_only:
            # LMDB makes its lock file before it reads the data file: a file that cannot
            # be an environment is refused here, so a read-only open creates nothing
            # (a file of another kind is refused by check_data_file, also before LMDB)
            data_file = os.path.join(self.path, "data.mdb") if subdir else self.path
            if not os.path.isfile(data_file) or os.path.getsize(data_file) == 0:
                raise StoreError("not an LMDB environment (no data file, or an empty "
                                 "one): nothing to open read-only", path=self.path)
        if not read_only and not subdir:
            parent = os.path.dirname(os.path.abspath(self.path))
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as e:
                raise _translate(e, path=self.path) from e
        self.durability = durability
        self._options = dict(read_only=read_only, durability=durability,
                             map_size_start=map_size_start, map_size_max=map_size_max,
                             lock=lock, subdir=subdir, max_readers=max_readers,
                             write_map=default_write_map(durability, write_map))
        if not lock:
            self.capabilities = dataclasses.replace(type(self).capabilities,
                                                    multi_process=False)
        self._shared = _env.acquire(self.path, **self._options)

    # -- plumbing ------------------------------------------------------------------------

    def _env(self) -> SharedEnv:
        if self._closed:
            raise StoreClosedError("the store is closed", path=self.path)
        shared = self._shared
        if current_pid() != shared.pid:
            shared.check_fork()
        return shared

    def _live(self, h: _Txn) -> Any:
        if h.txn is None or h.pid != current_pid() or h.generation != h.shared.generation:
            raise StoreError("this transaction can no longer be used (it failed, or the "
                             "process forked inside it)", path=self.path)
        return h.txn

    def _read(self, fn: Callable[[Any], Any], key: str | None = None,
              buffers: bool = False) -> Any:
        """Run ``fn(txn)`` in this thread's transaction, or in a short read transaction.
        ``buffers=True`` reads zero-copy views (for ranges, sizes, listings)."""
        h = self._current_transaction()
        try:
            if h is not None:
                return fn(self._live(h))
            shared = self._env()
            txn = shared.begin(False, buffers)
            try:
                return fn(txn)
            finally:
                shared.end(txn)
        except KvzarrError:
            raise
        except _BACKEND_ERRORS as e:
            raise _translate(e, key=key, path=self.path) from e

    def _write(self, op: _Op, arg: Any, size: int, key: str | None = None) -> None:
        """Apply one write in this thread's write transaction (an implicit one if none
        is open), growing the map when it does not fit."""
        h = self._current_transaction()
        if h is None:
            with self.transaction():
                self._write(op, arg, size, key)
            return
        txn = self._live(h)
        try:
            if size >= _PREGROW_BYTES and h.shared.lacks_room(size):
                # Grow before a big write rather than fail half way through it.
                self._regrow(h, size)
                txn = h.txn
            while True:
                try:
                    op(txn, arg)
                    break
                except lmdb.MapFullError:
                    self._regrow(h, size)
                    txn = h.txn
            h.log.append((op, arg))
            h.log_bytes += size
            if size:
                h.put = True
        except KvzarrError:
            raise
        except _BACKEND_ERRORS as e:
            raise _translate(e, key=key, path=self.path) from e

    def expect_writes(self, nbytes: int) -> None:
        """Grow the map now if ``nbytes`` more may not fit, while this transaction has
        little to replay (Store.expect_writes). At most _HINT_MAX_BYTES at a time: the
        hint is an estimate, and with a write map the whole map is allocated on disk."""
        h = self._current_transaction()
        if h is None or not h.write or h.txn is None or nbytes < _PREGROW_BYTES:
            return
        nbytes = min(nbytes, _HINT_MAX_BYTES)
        try:
            if h.shared.lacks_room(nbytes):
                self._regrow(h, nbytes, headroom=1, hint=True)
        except KvzarrError:
            raise
        except _BACKEND_ERRORS as e:
            raise _translate(e, path=self.path) from e

    def _regrow(self, h: _Txn, extra: int, headroom: int = 2, hint: bool = False) -> None:
        """Abort ``h``'s LMDB transaction, grow the map and replay ``h``'s log in a new
        one. Other kvzarr writers are shut out by the flock held since ``_begin``; a
        writer that ignores it is detected by the transaction id and refused. ``hint``:
        only a hint asked for the room, so where the map cannot grow (map_size_max, a
        full disk) the transaction goes on in the map it has."""
        shared = h.shared
        while True:
            self._finish(h, commit=False)
            try:
                shared.grow(h.log_bytes + extra, headroom)
            except StoreFullError:
                if not hint:
                    raise
            hint = False        # tried once: the log fitted this map, so it fits again
            h.txn = shared.begin(True)
            if h.txn.id() != h.txn_id:
                raise ConflictError(
                    "another writer committed to this LMDB file while the map was being "
                    "grown for this transaction; nothing of it was written", path=self.path,
                    hint="every writer of the file must go through kvzarr")
            try:
                for op, arg in h.log:
                    op(h.txn, arg)
                return
            except lmdb.MapFullError:
                continue

    @staticmethod
    def _finish(h: _Txn, commit: bool) -> None:
        txn, h.txn = h.txn, None
        if txn is None:
            return
        if commit:
            h.shared.end(txn, commit=True)
            return
        try:
            h.shared.end(txn)
        except lmdb.Error:
            pass   # a transaction LMDB already failed has nothing left to undo

    # -- transactions --------------------------------------------------------------------

    def _begin(self, write: bool) -> _Txn:
        shared = self._env()
        if not write:
            try:
                return _Txn(shared, shared.begin(False), False)
            except lmdb.Error as e:
                raise _translate(e, path=self.path) from e
        shared.acquire_writer()
        try:
            return _Txn(shared, shared.begin(True), True)
        except BaseException as e:
            shared.release_writer()
            if isinstance(e, lmdb.Error):
                raise _translate(e, path=self.path) from e
            raise

    def _commit(self, h: _Txn) -> None:
        if h.pid != current_pid():
            raise StoreError("a transaction begun before fork() cannot be committed in the "
                             "child; nothing of it was written", path=self.path)
        if not h.write:
            self._finish(h, commit=False)
            return
        try:
            if h.advance and not h.put:
                self._touch(h)
            while True:
                try:
                    self._finish(h, commit=True)
                    return
                except lmdb.MapFullError:
                    self._regrow(h, 0)
        except KvzarrError:
            raise
        except _BACKEND_ERRORS as e:
            raise _translate(e, path=self.path) from e
        finally:
            if h.txn is not None:
                self._finish(h, commit=False)
            h.log = []
            h.shared.release_writer()

    def _abort(self, h: _Txn) -> None:
        if h.pid != current_pid():
            return   # the parent's transaction: leave it alone
        try:
            self._finish(h, commit=False)
        finally:
            h.log = []
            if h.write:
                h.shared.release_writer()

    def _touch(self, h: _Txn) -> None:
        """Make ``h`` change a page, so that committing it moves the transaction id
        (LMDB commits a transaction that changed no page, e.g. one that only erased
        missing keys, without a new id). Logged, so a replay after map growth has it."""
        txn = self._live(h)
        while True:
            try:
                _touch(txn, None)
                break
            except lmdb.MapFullError:
                self._regrow(h, 4096)
                txn = h.txn
        h.log.append((_touch, None))

    def _change_counter(self) -> int:
        """The LMDB transaction id this thread's reads see or its commit will have.

        Outside a transaction the last committed id (never behind what a read begun now
        sees; see meta.py); in a read transaction its snapshot's id; in a write
        transaction that has written nothing the last committed id (the state it started
        from, unchanged by a commit), else its own id, which its commit is then made to
        take even if no page changed (:meth:`_touch`)."""
        h = self._txn_state.handle
        if h is None:
            shared = self._shared
            meta = shared._meta
            if meta is not None and not self._closed and shared.pid == _process._pid:
                return meta.last_txnid()     # the hot path of a cache hit
            return self._env().last_txnid()
        if not h.write:
            try:
                return self._live(h).id()
            except _BACKEND_ERRORS as e:
                raise _translate(e, path=self.path) from e
        if not h.log:
            return h.txn_id - 1
        h.advance = True
        return h.txn_id

    # -- reads ---------------------------------------------------------------------------

    def _get(self, key: str) -> bytes | None:
        kb = key.encode("utf-8")

        def get(txn: Any) -> bytes | None:
            value = keymap.read(txn, kb)
            return None if value is None else _copy(value)
        return self._read(get, key)

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """As :meth:`Store.get_many`; outside a transaction the batch is read in the one
        short read transaction of :meth:`_read`, without a store transaction around it
        (which cost more than the lookups of a node's few metadata documents)."""
        if self._current_transaction() is not None:
            return super().get_many(keys)
        check_keys(keys, self.max_key_bytes, self.max_segment_bytes)
        return self._get_many(keys)

    def exists_many(self, keys: Sequence[str]) -> list[bool]:
        """As :meth:`Store.exists_many`, in one short read transaction (see
        :meth:`get_many`)."""
        if self._current_transaction() is not None:
            return super().exists_many(keys)
        check_keys(keys, self.max_key_bytes, self.max_segment_bytes)
        return self._exists_many(keys)

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        encoded = [k.encode("utf-8") for k in keys]
        limit = keymap.MAX_KEY_BYTES

        def get_many(txn: Any) -> list[bytes | None]:
            get = txn.get
            out: list[bytes | None] = []
            append = out.append
            for kb in encoded:
                value = get(kb) if len(kb) <= limit else keymap.read(txn, kb)
                append(value if value is None or type(value) is bytes else bytes(value))
            return out
        return self._read(get_many)

    def _exists_many(self, keys: Sequence[str]) -> list[bool]:
        encoded = [k.encode("utf-8") for k in keys]
        return self._read(lambda txn: [keymap.read(txn, kb) is not None for kb in encoded],
                          buffers=True)

    def _get_many_views(self, keys: Sequence[str]) -> list[Any]:
        # Views into the map: valid while this thread's transaction is open and the map
        # cannot be resized (a resize waits for every open transaction of the process).
        txn = self._live(self._current_transaction())
        limit = keymap.MAX_KEY_BYTES
        get = txn.get
        try:
            return [get(kb) if len(kb) <= limit else keymap.read(txn, kb)
                    for kb in (k.encode("utf-8") for k in keys)]
        except KvzarrError:
            raise
        except _BACKEND_ERRORS as e:
            raise _translate(e, path=self.path) from e

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        kb = key.encode("utf-8")

        def get_range(txn: Any) -> bytes | None:
            value = keymap.read(txn, kb)
            return None if value is None else _copy(apply_byte_request(value, request))
        return self._read(get_range, key, buffers=True)

    def _exists(self, key: str) -> bool:
        kb = key.encode("utf-8")
        return self._read(lambda txn: keymap.read(txn, kb) is not None, key, buffers=True)

    def _getsize(self, key: str) -> int | None:
        kb = key.encode("utf-8")

        def size(txn: Any) -> int | None:
            value = keymap.read(txn, kb)
            return None if value is None else len(value)
        return self._read(size, key, buffers=True)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        # Listed in one transaction (a consistent snapshot), then handed out.
        pb = prefix.encode("utf-8")
        keys = self._read(lambda txn: keymap.scan(txn, pb), buffers=True)
        # surrogateescape: a key another program wrote that is not UTF-8 is listed as a
        # str holding lone surrogates, which the listing's key check then leaves out
        return iter([k.decode("utf-8", "surrogateescape") for k in keys])

    def _list_dir(self, prefix: str) -> Iterator[str]:
        pb = prefix.encode("utf-8")
        names = self._read(lambda txn: keymap.scan_dir(txn, pb), buffers=True)
        return iter([n.decode("utf-8", "surrogateescape") for n in names])

    # -- writes --------------------------------------------------------------------------

    def _set(self, key: str, value: bytes) -> None:
        kb = key.encode("utf-8")
        self._write(_put, (kb, value), keymap.footprint(len(kb), len(value)), key)

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        pairs, size = keymap.prepare_many(items)
        self._write(keymap.put_stored, pairs, size)

    def _erase(self, key: str) -> None:
        self._write(keymap.delete, key.encode("utf-8"), 0, key)

    def _erase_many(self, keys: Sequence[str]) -> None:
        self._write(_delete_many, [k.encode("utf-8") for k in keys], 0)

    def _erase_prefix(self, prefix: str) -> None:
        self._write(self._erase_prefix_op, prefix.encode("utf-8"), 0)

    def _erase_prefix_op(self, txn: Any, pb: bytes) -> None:
        keymap.erase_prefix(txn, pb, self._shared.db)

    # -- the rest ------------------------------------------------------------------------

    def flush(self) -> None:
        """Force committed data to disk (matters only with ``durability="none"``)."""
        try:
            self._env().env.sync(True)
        except _BACKEND_ERRORS as e:
            raise _translate(e, path=self.path) from e

    @property
    def map_size(self) -> int:
        """This process's current map size in bytes."""
        return self._env().env.info()["map_size"]

    def _close(self) -> None:
        _env.release(self._shared)

    def _reopen_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Another process opens the file itself; an environment never crosses processes.
        return (os.path.abspath(self.path),), dict(self._options)

    def __repr__(self) -> str:
        return f"LMDBStore({self.path!r})"


def _put(txn: Any, arg: tuple[bytes, bytes]) -> None:
    keymap.put(txn, arg[0], arg[1])


#: a key no kvzarr key can be (keys hold no NUL): put and deleted again by _touch
_TOUCH_KEY = b"\x00kvzarr-commit"


def _touch(txn: Any, arg: None) -> None:
    txn.put(_TOUCH_KEY, b"")
    txn.delete(_TOUCH_KEY)


def _delete_many(txn: Any, keys: list[bytes]) -> None:
    for kb in keys:
        keymap.delete(txn, kb)
