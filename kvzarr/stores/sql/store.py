"""SQLStore: keys and values in one table of a SQL database (SQLite file by default, or
PostgreSQL), through SQLAlchemy. Specification: stores/sql.md.

Implements the Zarr v3 abstract store interface (core spec, "Abstract store interface")
on ``table(k TEXT PRIMARY KEY, v BLOB)``. Promises, per process and across processes:

* ``with store.transaction():`` is atomic, isolated and durable (SQLite with
  ``synchronous=FULL``, the default): other readers see all of it or none of it, also
  when the writing process is killed half way. Write transactions of one store run one
  at a time (SQLite ``BEGIN IMMEDIATE``; PostgreSQL an advisory lock), so a
  read-modify-write inside one never loses a concurrent update. Read transactions
  (``transaction(write=False)``, ``get_many``) read one snapshot.
* A single operation outside a transaction is its own transaction.
* Listing is a range scan of the primary key; ``list_dir`` seeks past each child's
  subtree, so its cost follows the number of children, not the number of keys below.
* Byte ranges are cut by the database (``substr``/``substring``) and partial writes are
  spliced by it, inside one write transaction.
* Thread-safe: each thread's transaction has its own connection from a pool.

Hot paths run on the raw DBAPI connection (SQLAlchemy supplies the URL handling, the
connection pool and the events that configure each connection): per-row SQLAlchemy Core
processing would cost more than the database work for small values.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ...byteranges import ByteRequest, SuffixRequest
from ..base import Capabilities, Store
from ..keys import prefix_successor
from .backends import Backend, Txn, open_backend, translate
from .queries import Queries
from .schema import Layout, open_layout

#: keys fetched per query by lazy listings and per seek step of ``list_dir``
_PAGE = 1000
_DIR_STEP = 32


class SQLStore(Store):
    """A store in a SQL database.

    ``url_or_path``: a SQLite file path, ``sqlite:///PATH`` or ``postgresql://...``.
    ``busy_timeout`` (seconds): how long one attempt waits for the write lock;
    ``retries``: further attempts, with exponential backoff, before
    :class:`~kvzarr.errors.ConflictError`. ``table``: the key/value table (default
    ``kvzarr``, or the ``zarr`` table of a zarr-python 2 / zarr-sqlite file found in the
    database). ``synchronous`` (SQLite): ``"FULL"`` (durable, default) or ``"NORMAL"``
    (in WAL mode never corrupt, but the last commits may be lost on power failure).
    """

    capabilities = Capabilities(partial_reads=True, partial_writes=True, transactional=True,
                                multi_process=True)

    def __init__(self, url_or_path: str | os.PathLike, *, read_only: bool = False,
                 busy_timeout: float = 5.0, retries: int = 5, table: str | None = None,
                 synchronous: str = "FULL") -> None:
        super().__init__(read_only=read_only)
        self._backend: Backend = open_backend(
            url_or_path, read_only=read_only, busy_timeout=busy_timeout, retries=retries,
            synchronous=synchronous)
        try:
            self.layout: Layout = open_layout(self._backend, table)
        except BaseException:
            self._backend.engine.dispose()
            raise
        self._backend.set_table(self.layout.table)
        self.max_key_bytes = self._backend.max_key_bytes
        self._q = Queries(self._backend.name, self._backend.placeholder, self.layout.table)
        self._blob = self._backend.blob
        self._errors = self._backend.errors

    @property
    def engine(self) -> Any:
        """The SQLAlchemy engine (for inspection; the store manages its transactions)."""
        return self._backend.engine

    @property
    def table(self) -> str:
        return self.layout.table

    # -- transactions --------------------------------------------------------------------

    def _begin(self, write: bool) -> Txn:
        return self._backend.begin(write)

    def _commit(self, handle: Txn) -> None:
        self._backend.commit(handle)

    def _abort(self, handle: Txn) -> None:
        self._backend.rollback(handle)

    @contextmanager
    def _reading(self, key: str | None = None) -> Iterator[Any]:
        """A cursor: the open transaction's, or one of a pooled connection (a single
        statement in autocommit mode reads one snapshot)."""
        txn = self._current_transaction()
        try:
            if txn is not None:
                yield txn.cur
                return
            conn = self._backend.connect()
            try:
                yield conn.cursor()
            finally:
                conn.close()
        except self._errors as e:
            raise translate(e, key=key, path=self._backend.display) from e

    @contextmanager
    def _writing(self, key: str | None = None) -> Iterator[Any]:
        """A cursor inside a write transaction: the open one, or a new one committed when
        the block ends."""
        txn = self._current_transaction()
        if txn is not None:
            try:
                yield txn.cur
            except self._errors as e:
                raise translate(e, key=key, path=self._backend.display) from e
            return
        txn = self._backend.begin(write=True)
        try:
            yield txn.cur
        except BaseException as e:
            self._backend.rollback(txn)
            if isinstance(e, self._errors):
                raise translate(e, key=key, path=self._backend.display) from e
            raise
        self._backend.commit(txn)

    # -- reads ---------------------------------------------------------------------------

    def _get(self, key: str) -> bytes | None:
        with self._reading(key) as cur:
            cur.execute(self._q.get, (key,))
            row = cur.fetchone()
        return None if row is None else self._value(row[0])

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        if isinstance(request, SuffixRequest) and request.suffix == 0:
            return None if not self._exists(key) else b""
        with self._reading(key) as cur:
            row = self._q.get_range(cur, key, request)
        return None if row is None else self._value(row[0])

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        with self._reading() as cur:
            found = self._q.get_many(cur, keys)
        value = self._value
        return [value(found[k]) if k in found else None for k in keys]

    def _value(self, v: Any) -> bytes:
        return b"" if v is None else self._blob(v)

    def _exists(self, key: str) -> bool:
        with self._reading(key) as cur:
            cur.execute(self._q.exists, (key,))
            return cur.fetchone() is not None

    def _getsize(self, key: str) -> int | None:
        with self._reading(key) as cur:
            cur.execute(self._q.size, (key,))
            row = cur.fetchone()
        return None if row is None else int(row[0] or 0)

    # -- writes --------------------------------------------------------------------------

    def _set(self, key: str, value: bytes) -> None:
        with self._writing(key) as cur:
            cur.execute(self._q.upsert, (key, value))

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        with self._writing() as cur:
            self._q.set_many(cur, items)

    def _set_range(self, key: str, offset: int, value: bytes) -> None:
        with self._writing(key) as cur:
            self._q.set_range(cur, key, offset, value)

    def _erase(self, key: str) -> None:
        with self._writing(key) as cur:
            cur.execute(self._q.delete, (key,))

    def _erase_many(self, keys: Sequence[str]) -> None:
        with self._writing() as cur:
            self._q.erase_many(cur, keys)

    def _erase_prefix(self, prefix: str) -> None:
        with self._writing() as cur:
            self._q.erase_range(cur, prefix, prefix_successor(prefix))

    # -- listing -------------------------------------------------------------------------

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        high = prefix_successor(prefix)
        if self._current_transaction() is not None:
            # Inside a transaction: read it all now, from the transaction's snapshot.
            return iter(list(self._pages(prefix, high)))
        return self._pages(prefix, high)

    def _pages(self, low: str, high: str | None) -> Iterator[str]:
        """Keys in ``[low, high)``, one page per query (keyset pagination: a page starts
        after the last key of the previous one, so erasing while iterating is safe)."""
        inclusive = True
        while True:
            with self._reading() as cur:
                page = self._q.keys(cur, low, high, inclusive=inclusive, limit=_PAGE)
            yield from page
            if len(page) < _PAGE:
                return
            low, inclusive = page[-1], False

    def _list_dir(self, prefix: str) -> Iterator[str]:
        if self._current_transaction() is not None:
            return iter(list(self._walk_dir(prefix)))
        return self._walk_dir(prefix)

    def _walk_dir(self, prefix: str) -> Iterator[str]:
        """Direct children of ``prefix``: read a few keys from the cursor on; a key with no
        further ``/`` is a child by name; a key below a child directory yields ``name/``
        and the cursor jumps past that child's whole subtree in one seek."""
        n = len(prefix)
        high = prefix_successor(prefix)
        low, inclusive, step = prefix, True, _DIR_STEP
        while True:
            with self._reading() as cur:
                keys = self._q.keys(cur, low, high, inclusive=inclusive, limit=step)
            if not keys:
                return
            for key in keys:
                cut = key.find("/", n)
                if cut < 0:
                    yield key[n:]
                    low, inclusive = key, False
                    continue
                yield key[n:cut + 1]
                low, inclusive = prefix_successor(key[:cut + 1]), True  # skip the subtree
                step = _DIR_STEP
                break
            else:
                if len(keys) < step:
                    return
                step = min(2 * step, _PAGE)  # a run of plain keys: read bigger pages

    # -- lifecycle -----------------------------------------------------------------------

    def _close(self) -> None:
        self._backend.engine.dispose()

    def __repr__(self) -> str:
        ro = ", read_only=True" if self.read_only else ""
        return f"SQLStore({self._backend.display!r}, table={self.layout.table!r}{ro})"
