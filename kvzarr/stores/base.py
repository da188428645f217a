"""The Store interface: the abstract store operations of the Zarr v3 core spec
(section "Abstract store interface"), plus batch forms and transactions.

A store maps ``str`` keys (see :mod:`kvzarr.stores.keys`) to ``bytes`` values and never
knows it is holding Zarr. Backends subclass :class:`Store` and implement the small set
of ``_``-prefixed primitives; the public methods validate keys, check capabilities and
call them, so every backend gets the same checks at the same boundary.

Contracts every backend keeps:

* ``get`` of a missing key returns ``None``; ``erase`` of a missing key is a no-op.
* ``list``, ``list_prefix`` and ``list_dir`` yield keys in ascending code-point order.
* ``list_dir(prefix)`` yields the direct children of ``prefix``: a child that is a key
  by its bare name (``"zarr.json"``), a child that has keys below it with a trailing
  ``/`` (``"a/"``). A name can appear in both forms.
* ``with store.transaction():`` makes what happens inside atomic and isolated where
  ``capabilities.transactional`` is true; elsewhere it only groups the work (each key is
  still written atomically). Transactions nest: an inner one joins the outer one.
  A write inside a ``transaction(write=False)`` raises :class:`UnsupportedOperationError`.
* An operation the store lacks raises :class:`UnsupportedOperationError`; a write to a
  read-only store raises :class:`ReadOnlyError`. Nothing silently does less.
* ``append`` (where ``capabilities.appends``) adds bytes to the end of a value without
  rewriting it, only if the value still has the size the caller read: atomic like
  ``set`` (a reader or a crash sees the old value or the new one).
* ``change_counter()`` tells a cache whether anything may have changed since it last
  looked (see its docstring for the exact promise).
* Byte requests are checked when they are made (:mod:`.byteranges`) and their type at
  this boundary; every backend then answers them alike: the bytes that exist, ``b""``
  for a range that starts at or past the end of the value.
* Keys are checked by :func:`.keys.check_key` with the store's declared limits
  (``max_key_bytes``, ``max_segment_bytes``): the same :class:`InvalidKeyError` for the
  same key on every operation. Listings leave out keys another program wrote that are
  not valid keys, with an :class:`~kvzarr.errors.InvalidStoredKeyWarning`.
* ``key_lock(keys)`` (where ``capabilities.key_locks``) makes a read-modify-write of
  those keys exclusive on a store without transactions; elsewhere it does nothing.
* ``close()`` (or leaving ``with store:``) releases what the store holds; closing twice
  is a no-op, and every operation on a closed store raises
  :class:`~kvzarr.errors.StoreClosedError`.
* A store pickles to what opens it again in the receiving process (its path or URL,
  mode and options; a transformer: its options and the store below), never to its
  connections, locks or thread state; see :mod:`.reopen`. A backend says how in
  ``_reopen_args``; one that cannot cross processes (MemoryStore) raises
  :class:`~kvzarr.errors.NotPicklableError` there.

A storage transformer (:mod:`kvzarr.transformers`) is a Store too, wrapping another.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from ..errors import (AppendConflictError, InvalidByteRangeError, NotPicklableError,
                      ReadOnlyError, StoreClosedError, UnsupportedOperationError,
                      ValueTypeError)
from .byteranges import ByteRequest, apply_byte_request, check_request, check_write_offset
from .keys import check_key, check_keys, check_prefix, valid_children, valid_keys
from .reopen import reopen


# --- capabilities ---------------------------------------------------------------------

@dataclass(frozen=True)
class Capabilities:
    """What a store can do. Positive flags only: a flag that is true is a promise."""
    writable: bool = True
    deletable: bool = True
    listable: bool = True
    #: byte ranges are read natively (not by reading the whole value and cutting it)
    partial_reads: bool = False
    partial_writes: bool = False
    #: ``transaction()`` is atomic and isolated across keys
    transactional: bool = False
    #: several processes may open and write the store at once
    multi_process: bool = False
    #: ``append`` adds bytes to the end of a value without rewriting what is there
    appends: bool = False
    #: ``key_lock(keys)`` excludes every other holder of the same keys in every thread
    #: and process: the read-modify-write lock of a store without transactions
    key_locks: bool = False


# --- the interface --------------------------------------------------------------------

class Store(ABC):
    """Base class of every store and storage transformer. See the module docstring."""

    capabilities: Capabilities = Capabilities()
    #: longest key in UTF-8 bytes the backend takes, or None for no limit
    max_key_bytes: int | None = None
    #: longest segment of a key in UTF-8 bytes (a file name), or None for no limit
    max_segment_bytes: int | None = None
    #: whether the backend's listings may meet keys written by another program, which
    #: the public listing methods then check (a store that holds only keys that came in
    #: through this interface, or a transformer over a checked store, skips the check)
    lists_foreign_keys: bool = True
    #: True when ``_set_many`` copies every value into the backend before it returns
    #: (LMDB into its map, an SQL driver when it binds): then ``set_many`` hands
    #: read-only memoryviews down as they are, where stores that keep the value object
    #: get a bytes copy. Such a view must not change until the transaction ends (LMDB
    #: replays a transaction's writes after growing its map).
    copies_values: bool = False
    #: True when storing many keys costs less per key through one ``set_many`` than
    #: through a ``set`` of each from the thread that encoded it (a durable filesystem
    #: store syncs each directory once per batch and several files at once): the engine
    #: then hands the store groups of encoded chunks, as it does a transactional store.
    batches_writes: bool = False

    def __init__(self, *, read_only: bool = False) -> None:
        self.read_only = read_only
        self._txn_state = _TxnState()
        self._closed = False

    # -- primitives a backend implements ------------------------------------------------

    @abstractmethod
    def _get(self, key: str) -> bytes | None: ...

    @abstractmethod
    def _set(self, key: str, value: bytes) -> None: ...

    @abstractmethod
    def _erase(self, key: str) -> None: ...

    @abstractmethod
    def _list_prefix(self, prefix: str) -> Iterator[str]:
        """Keys starting with ``prefix`` in ascending order (``""`` = every key)."""

    # -- primitives with a generic default a backend may override ------------------------

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        value = self._get(key)
        return None if value is None else apply_byte_request(value, request)

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [self._get(k) for k in keys]

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        for k, v in items:
            self._set(k, v)

    def _set_range(self, key: str, offset: int, value: bytes) -> None:
        """Generic partial write: read, splice, write back, inside one transaction. Used
        only by stores whose capabilities declare ``partial_writes``."""
        with self.transaction():
            old = self._get(key) or b""
            try:
                if offset > len(old):
                    old = old + b"\x00" * (offset - len(old))  # a gap reads as zero bytes
                new = old[:offset] + value + old[offset + len(value):]
            except (MemoryError, OverflowError):
                raise InvalidByteRangeError(
                    f"a write at offset {offset} makes a value too large to build in "
                    f"memory", key=key) from None
            self._set(key, new)

    def _erase_many(self, keys: Sequence[str]) -> None:
        for k in keys:
            self._erase(k)

    def _append(self, key: str, data: bytes, expected_size: int) -> None:
        """Native append; only stores whose capabilities declare ``appends`` have one."""
        raise UnsupportedOperationError(f"{type(self).__name__} cannot append to values",
                                        key=key)

    def _change_counter(self) -> Hashable | None:
        return None

    def _key_lock(self, keys: Sequence[str]) -> AbstractContextManager[None]:
        """The lock of ``keys``; only stores whose capabilities declare ``key_locks``
        have one."""
        return _NO_LOCK

    def _erase_prefix(self, prefix: str) -> None:
        self._erase_many(list(self._list_prefix(prefix)))

    def _exists(self, key: str) -> bool:
        return self._get(key) is not None

    def _getsize(self, key: str) -> int | None:
        value = self._get(key)
        return None if value is None else len(value)

    def _list_dir(self, prefix: str) -> Iterator[str]:
        """Generic walk over ``_list_prefix``; ordered backends replace it with a seek
        past each child subtree."""
        n = len(prefix)
        last_dir = None
        for key in self._list_prefix(prefix):
            rest = key[n:]
            cut = rest.find("/")
            if cut < 0:
                yield rest
            else:
                child = rest[:cut + 1]
                if child != last_dir:
                    last_dir = child
                    yield child

    # transaction hooks: a backend with real transactions overrides all three.
    def _begin(self, write: bool) -> Any:
        return None

    def _commit(self, handle: Any) -> None:
        pass

    def _abort(self, handle: Any) -> None:
        pass

    def _close(self) -> None:
        pass

    # -- public operations ---------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """The value of ``key``, or None if it is absent."""
        return self._get(check_key(key, self.max_key_bytes, self.max_segment_bytes))

    def get_partial_values(
            self, key_ranges: Iterable[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        """For each (key, byte request) the requested bytes, or None for an absent key.
        A request of None reads the whole value. More than one request is read in one
        read transaction: a writer committing meanwhile is seen by all or none."""
        kb, sb = self.max_key_bytes, self.max_segment_bytes
        items = [(check_key(key, kb, sb), check_request(request))
                 for key, request in key_ranges]
        if len(items) <= 1:
            return [self._get_requested(key, request) for key, request in items]
        with self.transaction(write=False):
            return [self._get_requested(key, request) for key, request in items]

    def _get_requested(self, key: str, request: ByteRequest | None) -> bytes | None:
        return self._get(key) if request is None else self._get_range(key, request)

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """Values of ``keys`` (None where absent), read in one read transaction."""
        check_keys(keys, self.max_key_bytes, self.max_segment_bytes)
        with self.transaction(write=False):
            return self._get_many(keys)

    def exists_many(self, keys: Sequence[str]) -> list[bool]:
        """For each key whether it exists, read in one read transaction (no values are
        fetched where the backend can avoid it)."""
        check_keys(keys, self.max_key_bytes, self.max_segment_bytes)
        with self.transaction(write=False):
            return self._exists_many(keys)

    def _exists_many(self, keys: Sequence[str]) -> list[bool]:
        return [v is not None for v in self._get_many(keys)]

    def get_many_views(self, keys: Sequence[str]) -> list[Any]:
        """Like :meth:`get_many`, but inside an open transaction the values may be
        zero-copy buffers (bytes-like, read-only) that are valid only until that
        transaction ends or writes again: use them before either. Outside a transaction
        this is :meth:`get_many`."""
        if self._current_transaction() is None:
            return self.get_many(keys)
        check_keys(keys, self.max_key_bytes, self.max_segment_bytes)
        return self._get_many_views(keys)

    def _get_many_views(self, keys: Sequence[str]) -> list[Any]:
        return self._get_many(keys)

    #: :meth:`iter_values` hands values out one at a time (not all read first)
    streams_values = False

    def iter_values(self, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """``(position in keys, value or None)`` for every key, in any order, inside an
        open transaction; each value may be valid only until the next is asked for. A
        store that reads values into new memory can hand them out one by one: a reader
        that copies each out before taking the next keeps one value's memory in use
        instead of all of them (fresh memory costs a page fault per 4 KiB). Here: the
        values of :meth:`get_many_views`."""
        return enumerate(self.get_many_views(keys))

    def read_many_into(self, keys: Sequence[str], buffer: Any, size: int) -> list[int | None]:
        """Read values of a known length straight into the caller's memory: the value of
        ``keys[i]`` is copied to ``buffer[i * size:(i + 1) * size]`` when it is exactly
        ``size`` bytes long. Returns each value's length (None: absent). The bytes for an
        absent key are left as they were; for a value of any other length they are
        undefined (a store may have read part of the value into them). One read transaction, as :meth:`get_many`. ``buffer``: a writable,
        C-contiguous bytes-like object of at least ``len(keys) * size`` bytes.

        The chunk engine reads a box of small plain chunks this way: no value object per
        chunk and no join of them (a store of files reads each one into place)."""
        try:
            view = memoryview(buffer)
        except TypeError:
            view = None
        if (view is None or view.readonly or not view.c_contiguous
                or view.nbytes < len(keys) * size):
            raise ValueTypeError(f"read_many_into needs a writable, C-contiguous buffer of "
                                 f"at least {len(keys)} x {size} bytes")
        check_keys(keys, self.max_key_bytes, self.max_segment_bytes)
        return self._read_many_into(keys, view.cast("B"), size)

    def _read_many_into(self, keys: Sequence[str], view: memoryview,
                        size: int) -> list[int | None]:
        # Through the public get_many_views: a transformer's reads (checksums, a cache)
        # apply, and a zero-copy view is copied before the transaction ends.
        # A memoryview of bytes (LMDB's) is copied as it is: casting each costs a
        # quarter of the copy for 4 KiB values.
        sizes: list[int | None] = []
        with self.transaction(write=False):
            for i, value in enumerate(self.get_many_views(keys)):
                kind = type(value)
                if value is None:
                    sizes.append(None)
                    continue
                if kind is not bytes and not (kind is memoryview and value.format == "B"
                                              and value.ndim == 1):
                    value = memoryview(value).cast("B")
                n = len(value)
                if n == size:
                    view[i * size:(i + 1) * size] = value
                sizes.append(n)
        return sizes

    def set(self, key: str, value: bytes) -> None:
        """Store ``value`` (any bytes-like object) under ``key``, replacing what was
        there. Atomic on every store: a reader, and a crash at any moment, see the old
        value or the new one. Outside a transaction it is a write transaction of its own
        (committed, and durable as the store's durability setting says, when it returns);
        inside one it commits with it. ReadOnlyError on a read-only store."""
        self._check_writable()
        self._set(check_key(key, self.max_key_bytes, self.max_segment_bytes), as_bytes(value))

    def set_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Store several values in one write transaction."""
        self._check_writable()
        value_of = as_buffer if self.copies_values else as_bytes
        kb, sb = self.max_key_bytes, self.max_segment_bytes
        checked = [(check_key(k, kb, sb), value_of(v)) for k, v in items]
        with self.transaction():
            self._set_many(checked)

    def expect_writes(self, nbytes: int) -> None:
        """A hint inside a write transaction: about ``nbytes`` more are about to be
        stored in it. A store that must make room ahead makes it once, now (LMDB grows
        its map, and each growth replays the transaction's writes so far); the others
        ignore it. Never needed for correctness: what does not fit grows the store as
        it would have without the hint."""

    def set_partial_values(self, key_start_values: Iterable[tuple[str, int, bytes]]) -> None:
        """Overwrite bytes of existing values starting at an offset (the spec's
        ``set_partial_values``). A value that does not exist yet is created."""
        self._check_writable()
        if not self.capabilities.partial_writes:
            raise UnsupportedOperationError(
                f"{type(self).__name__} does not support partial writes")
        kb, sb = self.max_key_bytes, self.max_segment_bytes
        items = []
        for k, o, v in key_start_values:
            key, value = check_key(k, kb, sb), as_bytes(v)
            items.append((key, check_write_offset(o, len(value), key), value))
        # each item is a read-modify-write: held under the key lock where there is one
        with self._key_lock([k for k, _, _ in items]), self.transaction():
            for key, offset, value in items:
                self._set_range(key, offset, value)

    def append(self, key: str, data: bytes, *, expected_size: int) -> None:
        """Add ``data`` to the end of the value of ``key``, which must exist and hold
        exactly ``expected_size`` bytes (what the caller read: a compare-and-append, so
        two writers appending from the same old value cannot both succeed); otherwise
        :class:`ConflictError` and nothing is written. Atomic like :meth:`set`: a reader,
        and a crash of the writer at any moment, see the old value or the new one. Only
        where ``capabilities.appends``."""
        self._check_writable()
        if not self.capabilities.appends:
            raise UnsupportedOperationError(f"{type(self).__name__} cannot append to values",
                                            key=key)
        key = check_key(key, self.max_key_bytes, self.max_segment_bytes)
        if isinstance(expected_size, bool) or not isinstance(expected_size, int) \
                or expected_size < 0:
            raise InvalidByteRangeError(f"expected_size must be an integer >= 0, not "
                                        f"{expected_size!r}", key=key)
        self._append(key, as_bytes(data), expected_size)

    def key_lock(self, keys: Iterable[str]) -> AbstractContextManager[None]:
        """``with store.key_lock(keys):`` holds an exclusive, advisory lock on each key
        for a read-modify-write, against every other ``key_lock`` of those keys in any
        thread or process, where ``capabilities.key_locks``. Elsewhere it does nothing:
        a transactional store isolates a read-modify-write inside ``transaction()``
        instead (the engine takes this lock only on stores without transactions).

        Advisory: a plain ``set`` or ``get`` does not wait for it, so every writer of a
        key must take it for the exclusion to hold (kvzarr's chunk, shard and metadata
        writers do). The keys are locked in one fixed order, so two holders of
        overlapping sets cannot deadlock; the lock is re-entrant in the holding thread.
        Do not take a second ``key_lock`` inside one for OTHER keys: against a thread
        doing the opposite that can deadlock. A process that dies holding the lock
        (SIGKILL included) releases it. Several keys may share one lock (see the
        store's documentation); a write to a read-only store raises ReadOnlyError."""
        self._check_writable()
        return self._key_lock([check_key(k, self.max_key_bytes) for k in keys])

    def change_counter(self) -> Hashable | None:
        """A token that differs whenever a commit (by this handle, another handle or
        another process) may have changed what this store holds; equal tokens mean
        nothing changed in between. What a cache checks once per read transaction:

        * outside a transaction: the token of the latest committed state, the one a read
          started now would see (read it BEFORE the data it is to vouch for);
        * inside a read transaction: the token of that transaction's snapshot;
        * inside a write transaction: the token the store will have once this
          transaction commits with the writes made so far, provided nobody else commits
          first (on a transactional store nobody can). Before its first write that is
          the token of the state it began from (a commit that writes nothing changes
          nothing); once it was asked after a write, the commit takes that token even if
          the writes changed no value (erasing a missing key).

        A token is never handed out for two different states of the store (a promise a
        commit failed to keep is never reported again). It must cost about a dict
        lookup outside a transaction. None: this store has no such counter (now, or in
        this transaction)."""
        return self._change_counter()

    def append_policy(self) -> Any:
        """How writers above this store should update values that end in an index (a
        shard): None to rewrite them (the default), or the policy of an append-only
        writer (:class:`kvzarr.transformers.AppendShards`) that is in the stack."""
        return None

    def erase(self, key: str) -> None:
        """Remove ``key``; a no-op if it is absent. Atomic and transactional as
        :meth:`set`."""
        self._check_deletable()
        self._erase(check_key(key, self.max_key_bytes, self.max_segment_bytes))

    def erase_values(self, keys: Iterable[str]) -> None:
        """Remove every key of ``keys`` (absent ones are skipped) in one write
        transaction: on a transactional store all of them go or, on an error or a
        crash, none."""
        self._check_deletable()
        checked = list(keys)
        check_keys(checked, self.max_key_bytes, self.max_segment_bytes)
        with self.transaction():
            self._erase_many(checked)

    def erase_prefix(self, prefix: str) -> None:
        """Erase every key starting with ``prefix`` (``""`` erases everything), in one
        write transaction (all or nothing on a transactional store)."""
        self._check_deletable()
        check_prefix(prefix, self.max_segment_bytes)
        with self.transaction():
            self._erase_prefix(prefix)

    def exists(self, key: str) -> bool:
        """Whether ``key`` holds a value (an empty value counts)."""
        return self._exists(check_key(key, self.max_key_bytes, self.max_segment_bytes))

    def getsize(self, key: str) -> int | None:
        """Size of the value in bytes, or None if the key is absent."""
        return self._getsize(check_key(key, self.max_key_bytes, self.max_segment_bytes))

    def getsize_prefix(self, prefix: str) -> int:
        """Total size in bytes of the values of every key starting with ``prefix``
        (``""``: the whole store), as zarr-python's ``Store.getsize_prefix``: one
        listing of the prefix and the size of each key in it, all in one read
        transaction, so a writer committing meanwhile is counted wholly or not at all.
        A backend may answer it in one query instead (``_getsize_prefix``)."""
        self._check_listable()
        prefix = check_prefix(prefix, self.max_segment_bytes)
        with self.transaction(write=False):
            return self._getsize_prefix(prefix)

    def _getsize_prefix(self, prefix: str) -> int:
        total = 0
        for key in self._valid_keys(self._list_prefix(prefix)):
            total += self._getsize(key) or 0
        return total

    def list(self) -> Iterator[str]:
        """Every key, in ascending code-point order (keys under
        :data:`~kvzarr.stores.keys.RESERVED_PREFIX` included, except those a transformer
        in the stack owns and hides)."""
        self._check_listable()
        return self._valid_keys(self._list_prefix(""))

    def list_prefix(self, prefix: str) -> Iterator[str]:
        """The keys starting with ``prefix``, whole, in ascending code-point order."""
        self._check_listable()
        return self._valid_keys(self._list_prefix(check_prefix(prefix,
                                                               self.max_segment_bytes)))

    def list_dir(self, prefix: str) -> Iterator[str]:
        """The direct children of ``prefix`` (which is ``""`` or ends in ``/``), in
        ascending order: a key's bare name (``"zarr.json"``), or a name with a trailing
        ``/`` when keys lie below it (``"c/"``). A name can appear in both forms."""
        self._check_listable()
        names = self._list_dir(check_prefix(prefix, self.max_segment_bytes))
        if not self.lists_foreign_keys:
            return names
        return valid_children(names, prefix, repr(self), self.max_segment_bytes)

    def _valid_keys(self, keys: Iterator[str]) -> Iterator[str]:
        """A listing without the keys another program wrote that are not valid keys
        (each reported by a warning), where the backend may hold such keys."""
        if not self.lists_foreign_keys:
            return keys
        return valid_keys(keys, repr(self), self.max_key_bytes, self.max_segment_bytes)

    # -- transactions --------------------------------------------------------------------

    def transaction(self, write: bool = True) -> "Transaction":
        """Group operations; atomic and isolated where ``capabilities.transactional``.
        A context manager: ``with store.transaction() as s:`` (``s`` is the store)."""
        return Transaction(self, write)

    def _current_transaction(self) -> Any:
        """The handle of this thread's open transaction, or None."""
        return getattr(self._txn_state, "handle", None)

    def _in_write_transaction(self) -> bool:
        st = self._txn_state
        return getattr(st, "depth", 0) > 0 and st.write

    def in_read_transaction(self) -> bool:
        """Whether this thread is inside a read-only transaction of this store (not one
        nested in a write transaction, which it joins). On a transactional store that
        is a snapshot: nothing this thread or any other commits changes what it reads,
        and this thread cannot write until it ends."""
        st = self._txn_state
        return getattr(st, "depth", 0) > 0 and not st.write

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Release what the store holds (connections, environments, lock files); a
        transformer closes the stack down to the store. Idempotent. Afterwards every
        operation raises StoreClosedError; nothing committed is lost (commits are
        durable when they return). Close a store only once no other thread is inside
        one of its transactions. Not needed for correctness at process exit, only to
        free resources (and, for LMDB, to let this process reopen the file with other
        options)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._close()
        finally:
            # The operations are shadowed on the instance by one that refuses, rather
            # than each checking a flag: an open store pays nothing on its hot paths.
            refuse = _refuse_closed(repr(self))
            for name in _OPERATIONS:
                setattr(self, name, refuse)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- crossing processes (see .reopen) ------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as ``reopen(class, *self._reopen_args())``: the receiving process
        opens the same data itself (once per process for the same arguments). An open
        transaction, a cache's contents or a lock held here do not travel. Only a store
        whose ``capabilities.multi_process`` is true crosses; any other raises
        NotPicklableError (a TypeError), as does a closed one (StoreClosedError)."""
        if self._closed:
            raise StoreClosedError(f"{self!r} is closed and cannot be pickled",
                                   hint="pickle an open store")
        args, kwargs = self._reopen_args()
        if not self.capabilities.multi_process:
            raise NotPicklableError(
                f"{self!r} may be used by one process only (its capabilities do not "
                f"include multi_process), so it is not sent to another",
                hint="open the store with the options that let processes share it")
        return (reopen, (type(self), args, kwargs))

    def _reopen_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments of ``type(self)`` that open this store's
        data in another process (absolute paths: the other process may run elsewhere).
        A backend that can cross processes overrides it."""
        raise NotPicklableError(
            f"{type(self).__name__} cannot be sent to another process: it does not say "
            f"how to open its data there", hint="override Store._reopen_args")

    # -- helpers -------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{self!r} is read-only")
        if not self.capabilities.writable:
            raise UnsupportedOperationError(f"{type(self).__name__} is not writable")
        if getattr(self._txn_state, "depth", 0) and not self._txn_state.write:
            raise UnsupportedOperationError("write inside a read-only transaction")

    def _check_deletable(self) -> None:
        self._check_writable()
        if not self.capabilities.deletable:
            raise UnsupportedOperationError(f"{type(self).__name__} cannot delete keys")

    def _check_listable(self) -> None:
        if not self.capabilities.listable:
            raise UnsupportedOperationError(f"{type(self).__name__} cannot list keys")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Transaction:
    """What ``Store.transaction(write)`` returns: entering begins a transaction of the
    store in this thread (or joins the one open), leaving commits it, or aborts it when
    an exception leaves the block (``_abort`` runs with that exception current). A class
    rather than a generator: read transactions are per operation on hot paths, and the
    generator machinery cost more than a transaction of an in-memory store."""

    __slots__ = ("store", "write", "_outer", "_handle")

    def __init__(self, store: Store, write: bool) -> None:
        self.store = store
        self.write = write
        self._outer = -1            # the depth joined (nested), or -1 for the outermost
        self._handle: Any = None

    def __enter__(self) -> Store:
        store = self.store
        state = store._txn_state
        depth = state.depth
        if depth:
            if self.write and not state.write:
                raise UnsupportedOperationError(
                    "a write transaction cannot start inside a read-only one")
            state.depth = depth + 1
            self._outer = depth
            return store
        if self.write:
            store._check_writable()
        handle = store._begin(self.write)
        state.depth, state.write, state.handle = 1, self.write, handle
        self._outer, self._handle = -1, handle
        return store

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        state = self.store._txn_state
        if self._outer >= 0:
            state.depth = self._outer
            return False
        state.depth, state.handle = 0, None
        handle, self._handle = self._handle, None
        if exc_type is not None:
            self.store._abort(handle)
        else:
            self.store._commit(handle)
        return False


#: the key lock of a store without one: a context manager that does nothing
_NO_LOCK = nullcontext()

#: what a closed store refuses: every public operation, and beginning a transaction
#: (a Transaction made before the close and entered after)
_OPERATIONS = ("get", "get_partial_values", "get_many", "exists_many", "get_many_views",
               "iter_values", "read_many_into", "set", "set_many", "set_partial_values",
               "append", "key_lock",
               "change_counter", "append_policy", "erase", "erase_values", "erase_prefix",
               "exists", "getsize", "getsize_prefix", "list", "list_prefix", "list_dir",
               "transaction",
               "_begin")


def _refuse_closed(name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StoreClosedError(f"{name} is closed; nothing was read or written",
                               hint="open the store again (kvzarr.open_store or "
                                    "kvzarr.open) to go on using its data")
    return refuse


class _TxnState(threading.local):
    """Each thread's open transaction of a store. The class attributes are the state of
    a thread that never opened one: reading them costs a lookup, where ``getattr`` with
    a default on a bare ``threading.local`` raises and catches AttributeError (~1 us)."""
    depth = 0
    write = False
    handle: Any = None


def as_buffer(value: Any) -> Any:
    """``value`` as bytes or a read-only, one-dimensional byte memoryview (no copy);
    writable buffers are copied, since the caller could change them before the
    transaction ends."""
    if type(value) is memoryview and value.readonly and value.ndim == 1 \
            and value.itemsize == 1 and value.c_contiguous:
        return value
    return as_bytes(value)


def as_bytes(value: Any) -> bytes:
    """``value`` (any bytes-like object) as bytes, copied only when it is not bytes;
    ValueTypeError for anything else. Public with :func:`as_buffer`: transformers that
    take values apply the same coercion as the stores."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    try:
        return memoryview(value).tobytes()
    except TypeError:
        raise ValueTypeError(f"store values are bytes-like, not {type(value).__name__}"
                             ) from None


def no_append_target(key: str) -> AppendConflictError:
    """The error of an append to a value that does not exist (every backend's words)."""
    return AppendConflictError("cannot append to a value that does not exist", key=key)


def check_append_size(key: str, size: int, expected_size: int) -> None:
    """The compare of a compare-and-append: AppendConflictError unless the value holds
    exactly the ``expected_size`` bytes the caller read."""
    if size != expected_size:
        raise AppendConflictError(f"the value holds {size} bytes, not the {expected_size} "
                                  f"the append expected", key=key)
