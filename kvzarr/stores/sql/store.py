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
* Listing is a range scan of the primary key; ``list_dir`` reads pages of keys and
  seeks past a child's subtree whenever a page ends inside it, so its cost follows the
  number of children, not the number of keys below.
* Byte ranges are cut by the database (``substr``/``substring``): all the ranges asked
  of one key in one call come back as the columns of one row. No number of 2**31 or
  more reaches either function (both take 32-bit integers; queries.py clips them, which
  changes no answer). On SQLite, ranges of a value of :data:`BLOB_HANDLE_BYTES` or more
  are read through a BLOB handle instead (incremental I/O,
  https://sqlite.org/c3ref/blob_open.html), in one read snapshot with the row that names
  it: ``substr`` loads the whole value before it cuts, ~160 us a range of a 1.6 MB shard
  against ~25 us. Partial writes are spliced by the database, inside one write
  transaction.
* A value that is not a BLOB (a TEXT, INTEGER or REAL another program stored in a SQLite
  file) is refused on every read, ``getsize`` included, with :class:`StoreError` naming
  its key and type: kvzarr neither guesses its bytes nor returns what SQLite's
  ``length`` and ``substr`` count in characters.
* SQLite in WAL mode: a write transaction that stored 8 MiB or more commits without
  the automatic checkpoint and leaves it to a thread of the store (checkpoint.py): the
  commit is as durable, the writer does not wait for the second copy of its pages.
* Thread-safe: each thread's transaction has its own connection; connections are kept
  between operations, so a single operation is one statement.
* ``change_counter()``: on SQLite in WAL mode the wal-index header, on PostgreSQL a
  count in the ``T_info`` table that every write transaction moves on (counter.py);
  None for SQLite files in rollback-journal mode and the legacy layouts on PostgreSQL.
* ``append`` (kvzarr's own layout, schema version 3) inserts the new bytes as one row of
  the segments table: nothing already stored is rewritten. The first append to a value
  moves its bytes to the segments table inside the database and leaves its row with an
  empty ``v``, which every read already fetches: an empty ``v`` sends a read to the
  segments (in one snapshot), any other value is served as before. Every write of a key
  drops its segments. Legacy layouts have no appends.

Hot paths run on the raw DBAPI connection (SQLAlchemy supplies the URL handling, the
connection pool and the events that configure each connection): per-row SQLAlchemy Core
processing would cost more than the database work for small values.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from itertools import chain
from typing import Any

from ...errors import StoreError
from ..byteranges import ByteRequest, check_request, request_span
from ..base import Capabilities, Store, check_append_size, no_append_target
from ..keys import check_key, check_keys, prefix_successor
from .backends import Backend, Txn, open_backend, translate
from .counter import PostgresCounter, SQLiteCounter
from .queries import BATCH, MAX_RANGES, SQL_INT_MAX, Queries
from .schema import KVZARR, Layout, open_layout, segments_table

#: SQLite: values at least this long have their byte ranges read through a BLOB handle;
#: shorter ones come back whole with their row id and are cut here
BLOB_HANDLE_BYTES = 64 * 1024
#: keys fetched per query by lazy listings, and the most ``list_dir`` reads at once
_PAGE = 1000
#: first and smallest page of ``list_dir``
_DIR_FIRST, _DIR_MIN = 128, 16
#: the rest of a key after its first "/" (keys are joined by backslashes)
_AFTER_SLASH = re.compile(r"/[^\\]*")


class SQLStore(Store):
    """A store in a SQL database.

    ``url_or_path``: a SQLite file path, ``sqlite:///PATH`` or ``postgresql://...``.
    ``busy_timeout`` (seconds): how long one attempt waits for the write lock;
    ``retries``: further attempts, with exponential backoff, before
    :class:`~kvzarr.errors.ConflictError`. ``table``: the key/value table (default
    ``kvzarr``, or the ``zarr`` table of a zarr-python 2 / zarr-sqlite file found in the
    database). ``synchronous`` (SQLite): ``"FULL"`` (durable, default) or ``"NORMAL"``
    (in WAL mode never corrupt, but the last commits may be lost on power failure).
    ``journal_mode`` (SQLite): None (default: a new file gets ``"WAL"``, an existing
    file keeps its mode), ``"WAL"`` or ``"DELETE"``, set on the file (persistently)
    when the store opens it. ``"DELETE"``, the rollback journal, is for bulk loading:
    new pages are written once instead of twice (large writes ~2-3x faster), equally
    durable and crash-safe, but a commit waits for readers to finish and readers wait
    while it commits (within ``busy_timeout``), and there is no change counter.
    Leaving WAL needs the file closed by every other connection (else
    :class:`~kvzarr.errors.ConflictError`). See stores/sql.md, "Bulk loading".
    """

    capabilities = Capabilities(partial_reads=True, partial_writes=True, transactional=True,
                                multi_process=True)
    copies_values = True   # the driver binds each value (SQLite copies it, psycopg2 quotes it)

    def __init__(self, url_or_path: str | os.PathLike, *, read_only: bool = False,
                 busy_timeout: float = 5.0, retries: int = 5, table: str | None = None,
                 synchronous: str = "FULL", journal_mode: str | None = None) -> None:
        super().__init__(read_only=read_only)
        self._backend: Backend = open_backend(
            url_or_path, read_only=read_only, busy_timeout=busy_timeout, retries=retries,
            synchronous=synchronous, journal_mode=journal_mode)
        try:
            self.layout: Layout = open_layout(self._backend, table)
        except BaseException:
            self._backend.dispose()
            raise
        self._backend.set_table(self.layout.table)
        #: what opens this store in another process (``_reopen_args``): a SQLite file by
        #: its absolute path, a server by the URL as given (with its password, if any);
        #: never a journal mode (the file has it; switching needs the file to itself)
        self._reopen = ((getattr(self._backend, "path", None) or os.fspath(url_or_path),),
                        dict(read_only=read_only, busy_timeout=busy_timeout,
                             retries=retries, table=table, synchronous=synchronous))
        self.max_key_bytes = self._backend.max_key_bytes
        #: kvzarr's own layout has the segments table; the legacy layouts get no appends
        self._appendable = self.layout.kind == KVZARR
        if self._appendable:
            self.capabilities = replace(type(self).capabilities, appends=True)
        self._q = Queries(self._backend.name, self._backend.placeholder, self.layout.table,
                          segments_table(self.layout.table) if self._appendable else None)
        self._blob = self._backend.blob
        #: SQLite: whether ranges may be read through BLOB handles (the table has row
        #: ids); None until the first range read finds out
        self._blob_handles: bool | None = None if self._backend.name == "sqlite" else False
        #: the driver hands values over as bytes (sqlite3 does; psycopg a buffer)
        self._bytes_native = self._backend.name == "sqlite"
        self._errors = self._backend.errors
        #: SQLite's change counter, set up on the first change_counter() (a cache's)
        self._sqlite_counter: SQLiteCounter | None = None
        #: change_counter() was asked for: read transactions name their snapshot as
        #: they begin (a cache asks once per read transaction)
        self._counting = False
        if self._backend.name == "postgresql" and self.layout.kind == KVZARR:
            # always on: another process's cache relies on every commit counting
            self._backend.counter = PostgresCounter(self.layout.table)

    @property
    def engine(self) -> Any:
        """The SQLAlchemy engine (for inspection; the store manages its transactions)."""
        return self._backend.engine

    @property
    def table(self) -> str:
        """The name of the key/value table this store uses (``kvzarr`` by default; other
        tables of the database belong to other stores)."""
        return self.layout.table

    # -- transactions --------------------------------------------------------------------

    def _begin(self, write: bool) -> Txn:
        # counters in use on PostgreSQL: the snapshot's count comes with its BEGIN
        txn = self._backend.begin(write, read_counter=self._counting)
        counter = self._sqlite_counter
        if not write and counter is not None and counter.supported:
            # counters in use: name the snapshot now, before anything reads it
            try:
                txn.counter = counter.pin(txn.cur, self._q.pin)
            except BaseException as e:
                self._backend.rollback(txn)
                if isinstance(e, self._errors):
                    raise translate(e, path=self._backend.display) from e
                raise
        return txn

    def _commit(self, handle: Txn) -> None:
        counter = self._sqlite_counter
        if handle.promised is None or counter is None:
            self._backend.commit(handle)
            return
        # a change counter was promised for this commit: name the header it leaves
        try:
            version = counter.data_version(handle.cur)
        except BaseException as e:
            self._backend.rollback(handle)
            if isinstance(e, self._errors):
                raise translate(e, path=self._backend.display) from e
            raise
        promised = handle.promised
        self._backend.commit(handle, after=lambda cur: counter.after_commit(
            cur, promised, version))

    def _change_counter(self) -> Hashable | None:
        """See counter.py: the token of the latest commit, of this thread's read
        transaction's snapshot, or promised to its write transaction's commit."""
        txn = self._txn_state.handle
        counter = self._sqlite_counter
        if txn is None and counter is not None:
            return counter.latest()       # the hot path of a cache hit
        backend = self._backend
        if backend.name == "postgresql":
            pg = backend.counter
            if pg is None:
                return None
            self._counting = True
            if txn is None:
                return pg.parse(self._fetch_one(pg.read_sql, ()))
            if txn.write:
                return None if txn.counter is None else txn.counter + (1 if txn.dirty else 0)
            if txn.counter is None:     # inside the snapshot, once per transaction
                txn.counter = pg.parse(self._fetch_one(pg.read_sql, ()))
            return txn.counter
        if counter is None:
            counter = self._sqlite_counter = SQLiteCounter(backend)
        try:
            if txn is None:
                token = counter.latest()
            elif not txn.write:
                token = txn.counter     # pinned at BEGIN (None: begun before counting)
            elif not txn.dirty:
                token = counter.before_write()
            else:
                if txn.promised is None:
                    txn.promised = counter.new_name()
                token = txn.promised
        except self._errors as e:
            raise translate(e, path=backend.display) from e
        return token if counter.supported else None

    def _abort(self, handle: Txn) -> None:
        # runs with the exception that ends the transaction current: a lost connection
        # is dropped instead of rolled back (the server rolled it back)
        self._backend.rollback(handle, sys.exc_info()[1])

    def _fetch_one(self, sql: str, params: Sequence[Any], key: str | None = None) -> Any:
        """The row of a read statement that returns at most one (a primary-key lookup, a
        page of keys as one string), in this thread's transaction or, outside one, as a
        statement of its own on an idle connection (a single statement in autocommit
        mode reads one snapshot; no BEGIN needed). :meth:`_reading` written out without
        its generator: this is every single-key read's path."""
        txn = self._current_transaction()
        try:
            if txn is not None:
                cur = txn.cur
                cur.execute(sql, params)
                return cur.fetchone()
            def fetch(cur: Any) -> Any:
                cur.execute(sql, params)
                return cur.fetchone()
            # a connection the server closed while idle is replaced, the read run again
            return self._backend.outside_transaction(fetch)
        except self._errors as e:
            raise translate(e, key=key, path=self._backend.display) from e

    @contextmanager
    def _reading(self, key: str | None = None) -> Iterator[Any]:
        """A cursor: the open transaction's, or one of an idle connection (each statement
        in autocommit mode reads one snapshot). Callers fetch every row they execute."""
        txn = self._current_transaction()
        try:
            if txn is not None:
                yield txn.cur
                return
            conn = self._backend.acquire()
            try:
                yield conn.cursor()
            except BaseException as e:
                self._backend.discard(conn, e)   # a dead connection is dropped
                raise
            self._backend.release(conn)
        except self._errors as e:
            raise translate(e, key=key, path=self._backend.display) from e

    @contextmanager
    def _writing(self, key: str | None = None, nbytes: int = 0) -> Iterator[Any]:
        """A cursor inside a write transaction: the open one, or a new one committed when
        the block ends; ``nbytes``: the bytes of the values this block stores (counted
        per transaction: a large one's commit leaves the checkpoint to a thread)."""
        txn = self._current_transaction()
        if txn is not None:
            txn.dirty = True
            try:
                yield txn.cur
            except self._errors as e:
                raise translate(e, key=key, path=self._backend.display) from e
            if nbytes:
                self._backend.stored(txn, nbytes)
            return
        txn = self._backend.begin(write=True)
        txn.dirty = True
        txn.written = nbytes
        try:
            yield txn.cur
        except BaseException as e:
            self._backend.rollback(txn, e)
            if isinstance(e, self._errors):
                raise translate(e, key=key, path=self._backend.display) from e
            raise
        self._backend.commit(txn)

    # -- reads ---------------------------------------------------------------------------

    def _get(self, key: str) -> bytes | None:
        row = self._fetch_one(self._q.get, (key,), key)
        if row is None:
            return None
        v = row[0]
        if not v and self._appendable and not isinstance(v, (str, int, float)):
            return self._get_appended(key)   # an appended value, or an empty one
        return self._value(v, key)

    def _get_range(self, key: str, request: ByteRequest) -> bytes | None:
        return self._get_ranges(key, [request])[0]

    def _get_ranges(self, key: str, requests: Sequence[ByteRequest | None]) -> list[Any]:
        """Byte ranges of one value, cut by the database, in one statement per
        :data:`~.queries.MAX_RANGES` requests; a list of Nones if the key is absent."""
        if self._blob_handles is not False and self._can_use_blob_handles():
            got = self._ranges_by_handle(key, requests)
            if got is not None:
                return got
        out: list[Any] = []
        for i in range(0, len(requests), MAX_RANGES):
            part = requests[i:i + MAX_RANGES]
            sql, params = self._q.ranges(key, part)
            row = self._fetch_one(sql, params, key)
            if row is None:
                return [None] * len(requests)
            if self._appendable:
                if row[-1]:       # the segment map of an appended value
                    return self._ranges_appended(key, requests, row[-1])
                row = row[:-1]
            out.extend(self._value(v, key) for v in row)
        return out

    def _can_use_blob_handles(self) -> bool:
        if self._blob_handles is None:
            try:
                with self._reading() as cur:
                    cur.execute(self._q.has_rowid)
                    cur.fetchall()
                self._blob_handles = True
            except StoreError:
                self._blob_handles = False     # a WITHOUT ROWID table another program made
        return self._blob_handles

    def _ranges_by_handle(self, key: str, requests: Sequence[ByteRequest | None]
                          ) -> list[Any] | None:
        """SQLite: the ranges of one value, read through a BLOB handle if it is long
        (module docstring), else cut from the value the row brought along. None for
        what is not a BLOB: the statement path refuses it with the right message."""
        row = self._fetch_one(self._q.locate, (BLOB_HANDLE_BYTES, key), key)
        if row is None:
            return [None] * len(requests)
        rowid, size, kind, value = row[:4]
        if self._appendable and row[4]:       # the segment map of an appended value
            return self._ranges_appended(key, requests, row[4])
        if kind != "blob":
            return None
        spans = [request_span(r, size) for r in requests]
        if value is not None:
            return [value[start:end] for start, end in spans]
        txn = self._current_transaction()
        if txn is None:
            # the row id and the handle must come from one snapshot: another writer may
            # replace the value between two statements of their own
            with self.transaction(write=False):
                return self._ranges_by_handle(key, requests)
        try:
            with txn.cur.connection.blobopen(self.layout.table, "v", rowid,
                                             readonly=True) as blob:
                return [blob[start:end] if end > start else b"" for start, end in spans]
        except self._errors as e:
            raise translate(e, key=key, path=self._backend.display) from e

    # -- appended values (stores/sql.md, "Appended values") --------------------------------

    def _get_appended(self, key: str) -> bytes | None:
        """The whole value of a key whose row was empty: its segments, read in the
        snapshot that read the row (outside a transaction, both read again in one)."""
        if self._current_transaction() is None:
            with self.transaction(write=False):
                return self._get(key)
        with self._reading(key) as cur:
            cur.execute(self._q.seg_values, (key,))
            return b"".join(self._value(r[0]) for r in cur.fetchall())

    def _ranges_appended(self, key: str, requests: Sequence[ByteRequest | None],
                         segment_map: str) -> list[Any]:
        """Byte ranges of an appended value whose segment map (``"e:length ..."``) the
        ranges statement returned: the pieces of the segments each range overlaps, in one
        statement, in the snapshot that read the map (outside a transaction, both are
        read again in one)."""
        if self._current_transaction() is None:
            with self.transaction(write=False):
                return self._get_ranges(key, requests)
        segments = sorted(tuple(map(int, item.split(":"))) for item in segment_map.split())
        size = segments[-1][0] if segments else 0
        pieces: list[tuple[int, int, int]] = []
        owners: list[int] = []
        for which, request in enumerate(requests):
            start, end = request_span(request, size)
            for e, n in segments:
                lo, hi = max(start, e - n), min(end, e)
                if lo < hi:
                    pieces.append((e, lo - (e - n), hi - lo))
                    owners.append(which)
        with self._reading(key) as cur:
            got = self._q.segment_pieces(cur, key, pieces) if pieces else []
        parts: list[list[bytes]] = [[] for _ in requests]
        for which, piece in zip(owners, got):
            parts[which].append(self._value(piece))
        return [b"".join(p) for p in parts]

    def get_partial_values(
            self, key_ranges: Iterable[tuple[str, ByteRequest | None]]) -> list[bytes | None]:
        """As :meth:`Store.get_partial_values`; all the requests on one key are served by
        one statement (a shard's inner chunks come back as the columns of one row), and
        several keys are read in one read transaction."""
        items = list(key_ranges)
        by_key: dict[str, list[int]] = {}
        for i, (key, request) in enumerate(items):
            check_key(key, self.max_key_bytes)
            check_request(request)
            by_key.setdefault(key, []).append(i)
        out: list[bytes | None] = [None] * len(items)
        with self.transaction(write=False) if len(by_key) > 1 else nullcontext():
            for key, where in by_key.items():
                for i, value in zip(where,
                                    self._get_ranges(key, [items[i][1] for i in where])):
                    out[i] = value
        return out

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """As :meth:`Store.get_many`. Outside a transaction, a batch one SELECT answers
        (at most :data:`BATCH` keys, none of them appended to) is read without a
        BEGIN/COMMIT around it: one statement reads one snapshot by itself, and the
        transaction cost more than the lookups of a node's few metadata documents."""
        if self._current_transaction() is not None or not 1 < len(keys) <= BATCH:
            return super().get_many(keys)
        check_keys(keys, self.max_key_bytes, self.max_segment_bytes)
        with self._reading() as cur:
            found = self._q.get_many(cur, keys)
        if self._appendable and b"" in found.values():
            return super().get_many(keys)      # appended values: read in one transaction
        return self._ordered(found, keys)

    def exists_many(self, keys: Sequence[str]) -> list[bool]:
        """As :meth:`Store.exists_many`; one SELECT, without a transaction around it,
        for at most :data:`BATCH` keys outside one (see :meth:`get_many`)."""
        if self._current_transaction() is not None or len(keys) > BATCH:
            return super().exists_many(keys)
        check_keys(keys, self.max_key_bytes, self.max_segment_bytes)
        return self._exists_many(keys)

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if len(keys) == 1:  # one chunk (a tile, an element): the plain lookup
            return [self._get(keys[0])]
        with self._reading() as cur:
            found = self._q.get_many(cur, keys)
        if self._appendable and b"" in found.values():
            for k in [k for k, v in found.items() if not v]:
                found[k] = self._get_appended(k)    # in get_many's read transaction
        return self._ordered(found, keys)

    def _ordered(self, found: dict[str, Any], keys: Sequence[str]) -> list[bytes | None]:
        """The values of ``keys`` in order from the rows ``found`` (None: absent)."""
        get = found.get
        out = [get(k) for k in keys]
        if self._bytes_native and None not in out and _all_bytes(out):
            return out
        # absent keys, NULL values (legacy tables) or driver buffers (PostgreSQL)
        value = self._value
        return [value(found[k], k) if k in found else None for k in keys]

    streams_values = True

    def iter_values(self, keys: Sequence[str]) -> Iterator[tuple[int, Any]]:
        """As :meth:`Store.iter_values`: rows come off the cursor one at a time. (Fetching
        every row first put each value in fresh memory: 256 MiB of plain chunks read at
        ~0.4-1.7 GB/s instead of ~6.)"""
        where: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            where.setdefault(check_key(k, self.max_key_bytes), []).append(i)
        found: set[str] = set()
        empty: list[str] = []    # appended (or empty) values: read after the others
        with self._reading() as cur:
            for k, v in self._q.iter_many(cur, list(where)):
                if not v and self._appendable:
                    empty.append(k)
                    continue
                found.add(k)
                value = self._value(v, k)
                for i in where[k]:
                    yield i, value
        for k in empty:
            value = self._get_appended(k)
            if value is not None:
                found.add(k)
                for i in where[k]:
                    yield i, value
        for k, places in where.items():
            if k not in found:
                for i in places:
                    yield i, None

    def _value(self, v: Any, key: str | None = None) -> bytes:
        if type(v) is bytes:
            return v
        if v is None:
            return b""
        if isinstance(v, (str, int, float)):   # SQLite's other storage classes
            raise _not_a_blob(v, key, self._backend.display)
        return self._blob(v)

    def _exists_many(self, keys: Sequence[str]) -> list[bool]:
        with self._reading() as cur:
            found = self._q.existing(cur, keys)
        return [k in found for k in keys]

    def _exists(self, key: str) -> bool:
        return self._fetch_one(self._q.exists, (key,), key) is not None

    def _getsize(self, key: str) -> int | None:
        row = self._fetch_one(self._q.size, (key,), key)
        if row is None:
            return None
        if len(row) > 1 and row[1] not in ("blob", "null"):   # SQLite's typeof(v)
            raise _not_a_blob(row[1], key, self._backend.display)
        return int(row[0] or 0)

    # -- writes --------------------------------------------------------------------------

    def _has_segments(self, cur: Any) -> bool:
        """Whether the store holds appended values, whose segments a write of their key
        must drop: asked once per transaction (one indexed probe), so a store that never
        appended pays one statement per write transaction, not one per key."""
        if not self._appendable:
            return False
        txn = self._current_transaction()
        if txn is not None and txn.segments is not None:
            return txn.segments
        cur.execute(self._q.seg_any)
        found = cur.fetchone() is not None
        if txn is not None:
            txn.segments = found
        return found

    def _set(self, key: str, value: bytes) -> None:
        with self._writing(key, len(value)) as cur:
            cur.execute(self._q.upsert, (key, value))
            if self._has_segments(cur):
                cur.execute(self._q.seg_delete, (key,))

    def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        with self._writing(nbytes=sum([len(v) for _, v in items])) as cur:
            self._q.set_many(cur, items)
            if self._has_segments(cur):
                self._q.delete_segments(cur, (k for k, _ in items))

    def _set_range(self, key: str, offset: int, value: bytes) -> None:
        if offset + len(value) >= SQL_INT_MAX:
            raise StoreError(f"a write at offset {offset} would make a value of "
                             f"{offset + len(value)} bytes, longer than the database holds",
                             key=key, path=self._backend.display)
        with self._writing(key) as cur:
            if self._has_segments(cur):
                cur.execute(self._q.seg_of, (key,))
                if cur.fetchone() is not None:
                    # an appended value: spliced here and written back whole (dropping
                    # its segments), as SQL cannot splice across segments
                    cur.execute(self._q.seg_values, (key,))
                    old = b"".join(self._value(r[0]) for r in cur.fetchall())
                    if offset > len(old):
                        old += b"\x00" * (offset - len(old))
                    cur.execute(self._q.upsert,
                                (key, old[:offset] + value + old[offset + len(value):]))
                    cur.execute(self._q.seg_delete, (key,))
                    return
            self._q.set_range(cur, key, offset, value)

    def _erase(self, key: str) -> None:
        with self._writing(key) as cur:
            cur.execute(self._q.delete, (key,))
            if self._has_segments(cur):
                cur.execute(self._q.seg_delete, (key,))

    def _erase_many(self, keys: Sequence[str]) -> None:
        with self._writing() as cur:
            self._q.erase_many(cur, keys)
            if self._has_segments(cur):
                self._q.delete_segments(cur, keys)

    def _erase_prefix(self, prefix: str) -> None:
        high = prefix_successor(prefix)
        with self._writing() as cur:
            self._q.erase_range(cur, prefix, high)
            if self._has_segments(cur):
                if high is None:
                    cur.execute(self._q.seg_delete_from, (prefix,))
                else:
                    cur.execute(self._q.seg_delete_range, (prefix, high))

    def _append(self, key: str, data: bytes, expected_size: int) -> None:
        with self._writing(key) as cur:
            cur.execute(self._q.length, (key,))
            row = cur.fetchone()
            if row is None:
                raise no_append_target(key)
            size = int(row[0] or 0)
            plain = size > 0
            if not plain:                 # appended before, or empty
                cur.execute(self._q.seg_size, (key,))
                size = int(cur.fetchone()[0] or 0)
            check_append_size(key, size, expected_size)
            if not data:
                return
            if plain:   # first append: the row's bytes become the first segment
                cur.execute(self._q.seg_delete, (key,))
                cur.execute(self._q.seg_take, (key,))
                cur.execute(self._q.mark_appended, (key,))
            cur.execute(self._q.seg_insert, (key, size + len(data), data))
            txn = self._current_transaction()
            if txn is not None:
                txn.segments = True

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
        pages = chain.from_iterable(self._dir_pages(prefix))  # no Python frame per child
        if self._current_transaction() is not None:
            return iter(list(pages))
        return pages

    def _dir_pages(self, prefix: str) -> Iterator[list[str]]:
        """Direct children of ``prefix``, a list per page of keys in order. A key with no
        further ``/`` is a child by name, a key below a child directory yields ``name/``
        once. A page that ends inside a child directory's subtree is followed by a seek
        past that whole subtree, so each page after the first starts at a new child and
        the number of statements is at most the number of children plus one. The page
        size adapts: it doubles while pages hold many children (small subtrees are read
        through) and shrinks when one or two subtrees fill a page (big subtrees are
        skipped after reading only a few of their keys). A page arrives as one string
        (keys joined by a backslash, which no key holds) and is cut into children by
        string methods, not a Python loop per key."""
        n = len(prefix)
        high = prefix_successor(prefix)
        low, inclusive, step = prefix, True, _DIR_FIRST
        while True:
            sql, params = self._q.joined_keys(low, high, inclusive=inclusive, limit=step)
            joined, count = self._fetch_one(sql, params)
            if not count:
                return
            if joined.count("\\") == count - 1:
                # every key starts with the prefix: keep what follows it, and of that the
                # name up to its first "/"; then one entry per child
                rest = joined.replace("\\" + prefix, "\\")[n:] if n else joined
                children = list(dict.fromkeys(_AFTER_SLASH.sub("/", rest).split("\\")))
                children.sort()  # in key order already (one pass) unless reordered
                last = max(joined.split("\\")) if count == step else ""
            else:  # a key with a backslash, written by another program: key by key
                with self._reading() as cur:
                    keys = self._q.keys(cur, low, high, inclusive=inclusive, limit=step)
                children = list(dict.fromkeys(
                    k[:k.find("/", n) + 1] if k.find("/", n) >= 0 else k for k in keys))
                children = [c[n:] for c in children]
                last = keys[-1] if keys else ""
                count = len(keys)
            yield children
            if count < step:
                return
            cut = last.find("/", n)
            if cut >= 0:  # the page ends inside a subtree: skip the rest of it
                low, inclusive = prefix_successor(last[:cut + 1]), True
            else:
                low, inclusive = last, False
            if len(children) * 4 >= step:
                step = min(2 * step, _PAGE)  # small subtrees: read more of them at once
            elif len(children) <= 2:
                step = max(step // 4, _DIR_MIN)  # big subtrees: read less of each

    # -- lifecycle -----------------------------------------------------------------------

    def _close(self) -> None:
        counter = self._sqlite_counter
        if counter is not None:
            counter.close_keeper()
        self._backend.dispose()
        if counter is not None:
            counter.close()       # its map only once every connection is closed

    def _reopen_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return self._reopen[0], dict(self._reopen[1])

    def __repr__(self) -> str:
        ro = ", read_only=True" if self.read_only else ""
        return f"SQLStore({self._backend.display!r}, table={self.layout.table!r}{ro})"


def _all_bytes(values: list[Any]) -> bool:
    """Whether every value is ``bytes`` (one pass in C: the batch read's fast path)."""
    return not values or (type(values[0]) is bytes and len(set(map(type, values))) == 1)


def _not_a_blob(v: Any, key: str | None, display: str) -> StoreError:
    """The error for a value SQLite holds as TEXT, INTEGER or REAL (``v`` is the value,
    or the name ``typeof`` gave)."""
    kind = v.upper() if isinstance(v, str) and v in ("text", "integer", "real") else {
        str: "TEXT", int: "INTEGER", float: "REAL"}.get(type(v), type(v).__name__)
    return StoreError(f"the value is stored as {kind}, not as a BLOB (written by another "
                      f"program?); kvzarr reads values as BLOBs only", key=key, path=display,
                      hint="rewrite it as a BLOB, e.g. UPDATE <table> SET v = CAST(v AS BLOB)")
