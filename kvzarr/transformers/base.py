"""The storage transformer base: a Store that wraps a Store (its ``base``) and delegates
every operation it does not change.

Transformers sit between the chunk engine and the stores (``tests/test_layers.py``): the
array above never knows they are there, and the store below never knows it is wrapped.
This module imports only the store interface.

Promises every transformer keeps:

* Delegation goes through the base's public operations, whole batches at a time, so a
  store's batch and range optimisations (one statement for all the ranges of a shard,
  zero-copy views inside an LMDB transaction) reach through the stack.
* ``with stack.transaction():`` is one transaction of the store at the bottom: the
  transformer's own bookkeeping (checksum records, appended index) is written inside
  it, so on a transactional store it commits or vanishes with the data.
* The stack owns its store: closing the top closes every layer down to the store.
* A transformer instance belongs to at most one stack (:meth:`Transformer.bind`).
* Keys under :data:`~kvzarr.stores.keys.RESERVED_PREFIX` belong to the transformers;
  the one that owns a part of it hides that part from listings and refuses writes to
  it from above.

A subclass overrides only what it changes, and says in its docstring what a crash in
the middle of a write leaves behind and how it stays coherent.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import StoreConfigError
from ..stores.base import Capabilities, Store
from ..stores.byteranges import ByteRequest


class _Aborted(Exception):
    """Handed to the base's transaction when one is aborted without an exception."""


@dataclass(slots=True)
class TransformerTxn:
    """The handle of a transformer's transaction: the base's transaction context, entered,
    and whether it writes. Subclasses keep their per-transaction state in ``state``."""
    context: AbstractContextManager
    write: bool
    state: Any = None


class Transformer(Store):
    """A Store over another Store. Construct it over a store, ``Cache(store, ...)``, or
    without one and let :func:`kvzarr.open_store` (``transformers=[...]``) bind it."""

    #: the name ``transformers=[...]`` knows this transformer by
    name: ClassVar[str] = ""
    #: the store below already left invalid keys out of its listings
    lists_foreign_keys = False
    #: whether the transformer itself must write to do its job (a read-only store under
    #: it is then a configuration error, found when the stack is built)
    needs_write: ClassVar[bool] = False

    def __init__(self, base: Store | None = None) -> None:
        super().__init__(read_only=False)
        self._base: Store | None = None
        if base is not None:
            self.bind(base)

    # -- the stack ---------------------------------------------------------------------

    def bind(self, base: Store) -> "Transformer":
        """Put this transformer on top of ``base``; returns self. Once only."""
        if self._base is not None:
            raise StoreConfigError(
                f"this {type(self).__name__} is already part of a stack over "
                f"{self._base!r}", field="transformers",
                hint="create a new transformer for each stack")
        if not isinstance(base, Store):
            raise StoreConfigError(f"a transformer wraps a Store, not {type(base).__name__}",
                                   field="transformers")
        if self.needs_write and base.read_only:
            raise StoreConfigError(
                f"the {self.name} transformer writes to its store, which is read-only",
                field="transformers", hint=f"open the store writable or leave {self.name!r} "
                                           f"out of a read-only stack")
        self._base = base
        self.read_only = base.read_only
        self.max_key_bytes = base.max_key_bytes
        self.copies_values = base.copies_values
        self.streams_values = base.streams_values
        self.batches_writes = base.batches_writes
        self.capabilities = self._capabilities(base.capabilities)
        return self

    @property
    def bound(self) -> bool:
        """Whether this transformer is part of a stack."""
        return self._base is not None

    @property
    def base(self) -> Store:
        """The store (or transformer) under this one."""
        base = self._base
        if base is None:
            raise StoreConfigError(
                f"this {type(self).__name__} is not part of a stack yet",
                hint="pass it in kvzarr.open_store(target, transformers=[...]) or "
                     "construct it over a store")
        return base

    def _capabilities(self, base: Capabilities) -> Capabilities:
        """What the stack can do at this layer, given the base's capabilities."""
        return base

    def options(self) -> dict[str, Any]:
        """The constructor options, for ``repr``, ``Array.info`` and pickling: a
        transformer pickles as ``type(self)(base, **self.options())``, so a subclass
        with options returns every one of them."""
        return {}

    def stats(self) -> dict[str, int]:
        """Counters of what this transformer did (hits, bytes verified, ...)."""
        return {}

    # -- transactions: one transaction of the store at the bottom ------------------------

    def _begin(self, write: bool) -> TransformerTxn:
        context = self.base.transaction(write)
        context.__enter__()
        return TransformerTxn(context, write)

    def _commit(self, handle: TransformerTxn) -> None:
        handle.context.__exit__(None, None, None)

    def _abort(self, handle: TransformerTxn) -> None:
        # Called while the exception that ends the transaction is current; a block left
        # by an explicit __exit__ with an exception (an ExitStack closing) has none, and
        # the base must abort all the same.
        exc = sys.exc_info()
        handle.context.__exit__(*(exc if exc[1] is not None else
                                  (_Aborted, _Aborted("transaction aborted"), None)))

    # -- reads -----------------------------------------------------------------------------

    def _get(self, key: str) -> bytes | None:
        return self.base.get(key)

    def get(self, key: str) -> bytes | None:
        return self.base.get(key)

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        return self.base.get_partial_values([(key, request)])[0]

    def get_partial_values(
            self, key_ranges: Iterable[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        return self.base.get_partial_values(key_ranges)

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self.base.get_many(keys)

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self.base.get_many(keys)

    def get_many_views(self, keys: Sequence[str]) -> list[Any]:
        return self.base.get_many_views(keys)

    def iter_values(self, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        return self.base.iter_values(keys)

    def exists(self, key: str) -> bool:
        return self.base.exists(key)

    def _exists(self, key: str) -> bool:
        return self.base.exists(key)

    def exists_many(self, keys: Sequence[str]) -> list[bool]:
        return self.base.exists_many(keys)

    def getsize(self, key: str) -> int | None:
        return self.base.getsize(key)

    def _getsize(self, key: str) -> int | None:
        return self.base.getsize(key)

    # -- listing ---------------------------------------------------------------------------

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        return self.base.list_prefix(prefix) if prefix else self.base.list()

    def _list_dir(self, prefix: str) -> Iterator[str]:
        return self.base.list_dir(prefix)

    # -- writes ----------------------------------------------------------------------------

    def _set(self, key: str, value: bytes) -> None:
        self.base.set(key, value)

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self.base.set_many(items)

    def set_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        self._check_writable()
        self.base.set_many(items)

    def expect_writes(self, nbytes: int) -> None:
        self.base.expect_writes(nbytes)

    def _set_range(self, key: str, offset: int, value: bytes) -> None:
        self.base.set_partial_values([(key, offset, value)])

    def set_partial_values(self, key_start_values: Iterable[tuple[str, int, bytes]]) -> None:
        self._check_writable()
        self.base.set_partial_values(key_start_values)

    def _erase(self, key: str) -> None:
        self.base.erase(key)

    def _erase_many(self, keys: Sequence[str]) -> None:
        self.base.erase_values(keys)

    def erase_values(self, keys: Iterable[str]) -> None:
        self._check_deletable()
        self.base.erase_values(keys)

    def _erase_prefix(self, prefix: str) -> None:
        self.base.erase_prefix(prefix)

    def _append(self, key: str, data: bytes, expected_size: int) -> None:
        self.base.append(key, data, expected_size=expected_size)

    # -- the rest --------------------------------------------------------------------------

    def _change_counter(self) -> Hashable | None:
        return self.base.change_counter()

    def in_read_transaction(self) -> bool:
        # the store below may be in a write transaction of this thread's (begun on it
        # directly) that this one's read joined
        return super().in_read_transaction() and self.base.in_read_transaction()

    def append_policy(self) -> Any:
        return self.base.append_policy()

    def key_lock(self, keys: Iterable[str]) -> Any:
        self._check_writable()
        return self.base.key_lock(keys)

    def _key_lock(self, keys: Sequence[str]) -> Any:
        return self.base.key_lock(keys)

    def _close(self) -> None:
        self.base.close()

    def _reopen_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # The stack pickles layer by layer: this transformer's options over the store
        # below, which pickles itself (a MemoryStore at the bottom refuses). What the
        # transformer holds (a cache's entries, counters) stays in this process.
        return (self.base,), self.options()

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        below = repr(self._base) if self._base is not None else "unbound"
        return f"{type(self).__name__}({opts}) > {below}"


def stack_layers(store: Store) -> list[Store]:
    """The layers of a stack from the top down to (and including) the store."""
    layers = [store]
    while isinstance(store, Transformer) and store.bound:
        store = store.base
        layers.append(store)
    return layers


def reject_unknown_options(cls_name: str, unknown: dict[str, Any]) -> None:
    """Raise StoreConfigError for constructor options a transformer does not have."""
    if unknown:
        names = ", ".join(sorted(unknown))
        raise StoreConfigError(f"{cls_name} has no option(s) {names}",
                               field=f"transformers.{sorted(unknown)[0]}")
