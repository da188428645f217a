"""Database backends of the SQL store: connecting, beginning and ending transactions, and
the one translation of backend errors into :mod:`kvzarr.errors`.
Specification: stores/sql.md, sections "Transactions", "Concurrency" and "Durability".

Promises:

* Transactions are driven by explicit SQL on the raw DBAPI connection (the driver runs
  in autocommit mode, so it never emits a BEGIN or COMMIT of its own).
* Connections come from SQLAlchemy's pool and are kept checked out in a small list of
  idle ones between uses: a single read costs one statement, not a pool round trip.
  A SQLite file's engine and pool are shared by the stores of a process open on it with
  the same settings, and kept for the next one once all are closed (sqlite_engines.py).
  A connection goes back to that list only between transactions; one that failed in a
  way that may leave it inside a transaction is closed instead.
* SQLite: a write transaction starts with ``BEGIN IMMEDIATE`` (it takes the one write
  lock before it reads, so a read-modify-write cannot lose an update); a read transaction
  starts with a deferred ``BEGIN`` and reads one snapshot. ``BEGIN IMMEDIATE`` polls for
  the lock with a short backoff (0.2 ms doubling to 2 ms) for up to ``busy_timeout`` and
  is retried ``retries`` times with exponential backoff before :class:`ConflictError` is
  raised. Every other statement waits through SQLite's own busy handler.
* SQLite: a new database file gets 16 KiB pages (set before its first table; an existing
  file keeps its page size) and WAL, or the journal mode asked for; an existing file keeps
  its journal mode unless one is asked for, which is set before any other connection of
  the store opens (SQLite switches a file out of WAL only while no other connection has
  it open: else :class:`ConflictError`). Every connection reads through a memory map.
* SQLite: a transaction that stores many bytes has its log flushed on a thread while it
  goes on, every 4 MiB (stores/writeback.py); a large one's checkpoint runs on the store's
  thread (checkpoint.py).
* PostgreSQL: a write transaction takes the transaction-level advisory lock of its store
  (``pg_advisory_xact_lock``) before anything else, so writers of one store run one at a
  time; waiting for it is bounded by ``lock_timeout`` = ``busy_timeout`` and retried like
  SQLite's. A read transaction is ``REPEATABLE READ READ ONLY`` (one snapshot).
* A connection the server closed (a restart, ``pg_terminate_backend``, a network cut) is
  thrown away with every idle one, never reused: the operation that met it fails with a
  StoreError (inside a transaction: the transaction is lost, nothing of it kept), except
  a read or a BEGIN on an idle connection, which runs again on a new one.
* :func:`translate` is the only place that maps driver exceptions to kvzarr errors.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import sqlite3
import time
import weakref
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from ...errors import (ConflictError, KvzarrError, ReadOnlyError, StoreConfigError, StoreError,
                       StoreFullError, UnsupportedOperationError)
from ...runtime.process import on_fork_in_child
from . import sqlite_engines
from .checkpoint import AUTOCHECKPOINT_PAGES, LARGE_COMMIT_BYTES, BackgroundCheckpoints
from .counter import PostgresCounter
from .journal import JOURNAL_MODES, switch_journal
from .sqlite_file import check_database_file
from ..writeback import WRITEBACK_BYTES, FileWriteback

# SQLite primary result codes (https://sqlite.org/rescode.html)
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 5, 6, 8
_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 11, 13, 14, 26
# PostgreSQL SQLSTATEs that mean "another transaction was in the way"
_PG_CONFLICT = {"40001", "40P01", "55P03"}

#: idle connections kept checked out of the pool, per store
_IDLE_MAX = 8
#: page size of a new SQLite file (an existing file keeps its own): a 1 MiB chunk is a
#: chain of 64 overflow pages instead of 256 (each one a WAL frame and a checkpoint copy),
#: and a chunk of a few KiB fits in its leaf page. Larger pages cost more per small
#: update: rewriting one 8 KiB chunk writes ~39 KiB at 16 KiB pages, ~156 KiB at 32 KiB.
SQLITE_PAGE_SIZE = 16384
#: bytes of a SQLite file read through a memory map instead of read() calls
SQLITE_MMAP_SIZE = 1 << 30
#: what SQLite does with the bytes of an erased or replaced value
#: (https://www.sqlite.org/pragma.html#pragma_secure_delete). Some builds (Debian's
#: among them) default to ON: every freed overflow page is zeroed and written, through
#: the WAL and then the checkpoint. Erasing a 1 MiB chunk then writes 2 MiB of zeros;
#: replacing a 4 MiB value by one of another size (a shard with a tile rewritten) logged
#: 8.1 MB instead of 3.9; overwriting W3's 26 MB array made the COMMIT of its erase take
#: 190 ms instead of 20 ms. (A value replaced by one of the same size is overwritten in
#: place either way.) FAST (SQLite 3.20+) zeroes only what it writes anyway, close to
#: upstream's OFF default; a freed page's old bytes stay in the file until the page is
#: reused.
SQLITE_SECURE_DELETE = "FAST"
#: first and longest sleep between attempts at the SQLite write lock, in seconds
_POLL_FIRST, _POLL_MAX = 0.0002, 0.002
#: connections inherited over fork(): kept referenced and never used or closed
_INHERITED: list[Any] = []


def translate(exc: BaseException, *, key: str | None = None, path: str | None = None,
              during: str | None = None, attempts: int | None = None) -> KvzarrError:
    """The kvzarr error for a backend exception (raise it ``from exc``)."""
    if isinstance(exc, KvzarrError):
        return exc
    orig = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's exception
    text = " ".join(str(orig).split()) or type(orig).__name__
    if during:
        text = f"{text} (while {during}" + (f", {attempts} attempts)" if attempts else ")")
    code = getattr(orig, "sqlite_errorcode", None)
    if code is not None:
        primary = code & 0xFF
        if primary == _SQLITE_FULL:
            return StoreFullError(f"the database is full: {text}", key=key, path=path,
                                  hint="free disk space; nothing of the failed write was kept")
        if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return ConflictError(f"the database is locked by another writer: {text}",
                                 key=key, path=path,
                                 hint="retry later, or raise busy_timeout / retries")
        if primary == _SQLITE_READONLY:
            return ReadOnlyError(f"the database cannot be written: {text}", key=key, path=path)
        if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
            return StoreError(f"not a SQLite database, or a damaged one: {text}",
                              key=key, path=path)
        if primary == _SQLITE_CANTOPEN:
            return StoreError(f"cannot open the database file: {text}", key=key, path=path)
        return StoreError(f"SQLite error: {text}", key=key, path=path)
    state = getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)
    if state:
        if state == "53100":
            return StoreFullError(f"the database server's disk is full: {text}",
                                  key=key, path=path)
        if state in _PG_CONFLICT:
            return ConflictError(f"conflict with another transaction: {text}",
                                 key=key, path=path,
                                 hint="retry later, or raise busy_timeout / retries")
        if state == "25006":
            return ReadOnlyError(f"the database is read-only: {text}", key=key, path=path)
        if state == "54000":
            return StoreError(f"a key or value exceeds a database limit: {text}",
                              key=key, path=path)
        return StoreError(f"PostgreSQL error {state}: {text}", key=key, path=path)
    if isinstance(orig, OSError) and orig.errno == errno.ENOSPC:
        return StoreFullError(f"no space left on the device: {text}", key=key, path=path)
    return StoreError(f"{type(orig).__name__}: {text}", key=key, path=path)


class Txn:
    """The handle of an open transaction: a pooled connection and its cursor, what the
    change counter (counter.py) keeps per transaction (whether the store wrote in it, the
    token of its snapshot -- a write transaction: of the state it began from -- and the
    token promised to its commit), whether the store holds appended values (asked
    once per transaction by the store; None until then), and the bytes of the values
    it stored in bulk (``written``: a large commit checkpoints in the background)."""
    __slots__ = ("conn", "cur", "write", "dirty", "counter", "promised", "segments",
                 "written")

    def __init__(self, conn: Any, cur: Any, write: bool, counter: Any = None) -> None:
        self.conn, self.cur, self.write = conn, cur, write
        self.dirty = False
        self.counter = counter
        self.promised: Any = None
        self.segments: bool | None = None
        self.written = 0


class Backend:
    """One database engine behind a store: a pool of connections in autocommit mode and
    explicit transactions on them."""

    name = ""
    #: the driver's placeholder, substituted for ``?`` in the SQL of :mod:`.queries`
    placeholder = "?"
    #: longest key in UTF-8 bytes, or None
    max_key_bytes: int | None = None

    def __init__(self, engine: sa.Engine, display: str, *, read_only: bool,
                 busy_timeout: float, retries: int, shared_engine: bool = False) -> None:
        """``shared_engine``: the engine serves other backends too, and whoever shares
        it calls :meth:`drop_idle` when a caller disposes it (sqlite_engines.py)."""
        self.engine = engine
        self.display = display  # URL with any password hidden
        self.read_only = read_only
        self.busy_timeout = busy_timeout
        self.retries = retries
        dbapi = engine.dialect.loaded_dbapi
        self.errors: tuple[type[BaseException], ...] = (dbapi.Error, sa.exc.SQLAlchemyError)
        #: pooled connections between uses, outside any transaction (LIFO: list.pop and
        #: list.append are atomic, so threads share it without a lock)
        self._idle: list[Any] = []
        on_fork_in_child(self._forget_parent_connections)
        if not shared_engine:
            ref = weakref.WeakMethod(self.drop_idle)

            @event.listens_for(engine, "engine_disposed")
            def _drop_idle(engine: sa.Engine) -> None:  # engine.dispose() by a caller
                drop = ref()
                if drop is not None:
                    drop()

    def _forget_parent_connections(self) -> None:
        # A forked child must not use the parent's connections (SQLAlchemy's pooling
        # docs), nor close them: that could release the parent's file locks.
        _INHERITED.extend(self._idle)
        self._idle = []
        self.engine.dispose(close=False)

    def drop_idle(self) -> None:
        """Close the idle connections: a caller disposed the engine, their pool is gone."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.invalidate()  # its pool is gone: close the connection itself

    # -- connections ---------------------------------------------------------------------

    def connect(self) -> Any:
        """A pooled connection (return it with ``.close()``)."""
        try:
            return self.engine.raw_connection()
        except self.errors as e:
            raise translate(e, path=self.display, during="connecting") from e

    def acquire(self) -> Any:
        """A connection outside any transaction: an idle one, else a new one from the pool.
        Hand it back with :meth:`release` (or :meth:`discard`)."""
        try:
            return self._idle.pop()
        except IndexError:
            return self.connect()

    def release(self, conn: Any) -> None:
        """Keep ``conn`` (outside any transaction) for the next :meth:`acquire`."""
        if len(self._idle) < _IDLE_MAX:
            self._idle.append(conn)
        else:
            self._discard(conn)

    def discard(self, conn: Any, error: BaseException | None = None) -> None:
        """Give ``conn`` back to the pool, whose reset ends whatever it was doing; if
        ``error`` says the server closed it, drop it (and the idle ones) instead."""
        if error is not None and self.lost_connection(error, conn):
            self.drop_dead(conn)
        else:
            self._discard(conn)

    def lost_connection(self, error: BaseException, conn: Any) -> bool:
        """Whether ``error`` means the connection is gone (the server closed it: a
        restart, ``pg_terminate_backend``, a network cut), by the dialect's own test."""
        if isinstance(error, KvzarrError):     # translated: the driver's error is the cause
            error = error.__cause__
        if not isinstance(error, self.errors[0]):
            return False
        try:
            return bool(self.engine.dialect.is_disconnect(
                error, getattr(conn, "dbapi_connection", conn), None))
        except Exception:
            return False

    def drop_dead(self, conn: Any) -> None:
        """Throw away a connection the server closed, and every idle one with it (what
        closed one usually closed all: a restart); the next use connects afresh."""
        conn.invalidate()
        idle, self._idle = self._idle, []
        for other in idle:
            other.invalidate()

    def outside_transaction(self, work: Callable[[Any], Any]) -> Any:
        """``work(cursor)`` (a read) on an idle connection outside any transaction. A
        connection the server closed since its last use is thrown away and the read runs
        again on a new one: nothing was done on the dead one."""
        for attempt in range(2):
            conn = self.acquire()
            try:
                result = work(conn.cursor())
            except BaseException as e:
                lost = self.lost_connection(e, conn)
                self.discard(conn, e)
                if attempt == 0 and lost:
                    continue
                raise
            self.release(conn)
            return result

    def dispose(self) -> None:
        """Close every connection (the store is closing)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            self._discard(conn)
        self._close_engine()

    def _close_engine(self) -> None:
        self.engine.dispose()

    def blob(self, value: Any) -> bytes:
        return value if type(value) is bytes else bytes(value)

    # -- transactions --------------------------------------------------------------------

    def begin(self, write: bool, read_counter: bool = False) -> Txn:
        """A transaction on a connection of its own. ``read_counter`` (PostgreSQL, a
        read transaction): read the change counter in the snapshot, in the round trip
        of ``BEGIN``."""
        for attempt in range(2):
            conn = self.acquire()
            counter = None
            try:
                cur = conn.cursor()
                if write:
                    counter = self._retry(lambda: self._begin_write(cur), cur,
                                          "starting a write transaction", conn)
                elif read_counter and self.counter is not None:
                    cur.execute(f"{self.begin_read_sql}; {self.counter.read_sql}")
                    counter = self.counter.parse(self._last_row(cur))
                else:
                    cur.execute(self.begin_read_sql)
            except BaseException as e:
                lost = self.lost_connection(e, conn)
                self.discard(conn, e)
                if attempt == 0 and lost:
                    continue        # an idle connection the server closed: take a new one
                if isinstance(e, self.errors):
                    raise translate(e, path=self.display,
                                    during="starting a transaction") from e
                raise
            return Txn(conn, cur, write, counter)
        raise AssertionError("unreachable")

    def commit(self, txn: Txn, after: Callable[[Any], None] | None = None) -> None:
        """Commit ``txn``; ``after(cursor)`` runs on its connection once the commit is
        done, before the connection serves anyone else."""
        try:
            if self.commit_may_wait and txn.write:  # ending a read never waits
                self._retry(lambda: self._commit_write(txn), None, "committing")
            else:
                self._commit_statement(txn)
        except BaseException as e:
            self.rollback(txn, e)
            if isinstance(e, self.errors):
                raise translate(e, path=self.display, during="committing") from e
            raise
        if after is not None:
            try:
                after(txn.cur)
            except self.errors:
                self._discard(txn.conn)
                return
        self.release(txn.conn)

    def _commit_statement(self, txn: Txn) -> None:
        txn.cur.execute("COMMIT")

    def stored(self, txn: Txn, nbytes: int) -> None:
        """The store stored values of ``nbytes`` in all in the open ``txn``."""
        txn.written += nbytes

    def _commit_write(self, txn: Txn) -> None:
        """COMMIT a write transaction where the commit may wait (and be retried)."""
        txn.cur.execute("COMMIT")

    def rollback(self, txn: Txn, error: BaseException | None = None) -> None:
        """End ``txn`` without keeping anything; ``error`` is what ended it, if known."""
        if error is not None and self.lost_connection(error, txn.conn):
            self.drop_dead(txn.conn)    # nothing to roll back: the server did
            return
        try:
            txn.cur.execute("ROLLBACK")
        except self.errors as e:
            # the engine may have rolled back already (e.g. after SQLITE_FULL); the pool's
            # reset ends anything left
            self.discard(txn.conn, e)
            return
        self.release(txn.conn)

    def _reset(self, cur: Any) -> None:
        """End whatever a failed BEGIN left open (PostgreSQL keeps an aborted transaction;
        the pool's reset cannot end it while the driver is in autocommit mode)."""
        try:
            cur.execute("ROLLBACK")
        except self.errors:
            pass

    def _discard(self, conn: Any) -> None:
        try:
            conn.close()
        except self.errors:
            conn.invalidate()

    def _retry(self, attempt: Callable[[], Any], cur: Any, during: str,
               conn: Any = None) -> Any:
        """Run ``attempt`` until it succeeds (returning what it returns); on a lock
        conflict back off exponentially and try again, ``retries`` times, then raise
        :class:`ConflictError`."""
        for n in range(self.retries + 1):
            try:
                return attempt()
            except self.errors as e:
                err = translate(e, path=self.display, during=during, attempts=n + 1)
                if conn is not None and self.lost_connection(e, conn):
                    raise err from e              # no connection left to reset
                if cur is not None:
                    self._reset(cur)
                if not isinstance(err, ConflictError) or n == self.retries:
                    raise err from e
                time.sleep(min(2.0, 0.02 * 2 ** n) * (0.5 + random.random()))

    # -- per backend ---------------------------------------------------------------------

    begin_read_sql = "BEGIN"
    #: whether COMMIT can fail for a lock and be retried with the transaction intact
    #: (SQLite with a rollback journal; a failed PostgreSQL COMMIT has already rolled back)
    commit_may_wait = False

    def _begin_write(self, cur: Any) -> Any:
        """Begin a write transaction holding the store's write lock; return the change
        counter of the state it begins from where the backend reads it here (else None)."""
        raise NotImplementedError

    #: the change counter's SQL (counter.py), where the backend counts in a table
    counter: PostgresCounter | None = None

    def _last_row(self, cur: Any) -> Any:
        """The first row of the last result of a multi-statement execute (psycopg2 keeps
        only the last result; psycopg 3 steps through them with ``nextset``)."""
        try:
            while cur.nextset():
                pass
        except self.errors:
            pass                     # psycopg2: nextset is not supported
        return cur.fetchone()

    def set_table(self, table: str) -> None:
        """Called once the store's table is known."""

    def lock_in_sa(self, conn: sa.Connection, table: str) -> None:
        """Inside a SQLAlchemy transaction, take the store's write lock (for migrations)."""


class SQLiteBackend(Backend):
    name = "sqlite"
    commit_may_wait = True

    def __init__(self, path: str, display: str, *, read_only: bool, busy_timeout: float,
                 retries: int, synchronous: str, journal_mode: str | None = None) -> None:
        self.path = path
        check_database_file(path, display)      # a file cut short reads wrong, silently
        #: the journal mode asked for (None: a new file's default, WAL; an existing one
        #: keeps its own)
        self.journal_mode = journal_mode
        if journal_mode is not None and not read_only and os.path.exists(path):
            _switch_journal(path, journal_mode, busy_timeout, display)
        # A read-only store still opens the file read-write when it may (query_only keeps
        # it from writing): only then can the last connection to close remove the -wal and
        # -shm files, leaving the dataset as the single file it is.
        if not read_only:
            mode = "rwc"
        else:
            mode = "rw" if os.access(path, os.W_OK) and os.access(
                os.path.dirname(os.path.abspath(path)), os.W_OK) else "ro"
        uri = f"file:{_quote_path(path)}?mode={mode}"

        self._busy_ms = max(0, int(busy_timeout * 1000))
        #: the checkpoints that large commits leave to a thread (checkpoint.py)
        self.checkpoints = BackgroundCheckpoints(self._checkpoint)
        #: the log's early flushes during large transactions (stores/writeback.py), where
        #: a COMMIT syncs the log (not with synchronous=NORMAL: its log is synced at
        #: checkpoints, which run on a thread of their own anyway)
        self.writeback = (FileWriteback(path + "-wal", "kvzarr-sqlite-writeback")
                          if not read_only and synchronous.upper() in ("FULL", "EXTRA")
                          else None)
        # the engine, shared with the other stores on this file and settings
        # (sqlite_engines.py); acquired last: nothing after it can fail
        self._engine_key: Any = (path, mode, busy_timeout, synchronous, read_only)
        engine = sqlite_engines.acquire(
            self._engine_key,
            lambda: _sqlite_engine(uri, busy_timeout, synchronous, read_only), self)
        super().__init__(engine, display, read_only=read_only, busy_timeout=busy_timeout,
                         retries=retries, shared_engine=True)

    def _begin_write(self, cur: Any) -> None:
        """``BEGIN IMMEDIATE``, polling for the write lock for up to ``busy_timeout``.
        SQLite's own busy handler sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms
        between attempts, so a queue of writers leaves the lock free for most of a sleep
        after each commit; short sleeps hand it on at once."""
        cur.execute("PRAGMA busy_timeout = 0")
        try:
            deadline = None
            delay = _POLL_FIRST
            while True:
                try:
                    cur.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as e:
                    if (getattr(e, "sqlite_errorcode", 0) & 0xFF) != _SQLITE_BUSY:
                        raise
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + self.busy_timeout
                    if now >= deadline:
                        raise
                    time.sleep(min(delay * (0.5 + random.random()), deadline - now))
                    delay = min(2 * delay, _POLL_MAX)
        finally:
            cur.execute(f"PRAGMA busy_timeout = {self._busy_ms}")

    def _commit_write(self, txn: Txn) -> None:
        """COMMIT; after a transaction of :data:`LARGE_COMMIT_BYTES` or more, without
        the automatic checkpoint, which then runs on the store's thread (checkpoint.py):
        the log is synced by the COMMIT either way."""
        cur = txn.cur
        if txn.written < LARGE_COMMIT_BYTES:
            cur.execute("COMMIT")
            return
        cur.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            cur.execute("COMMIT")
        finally:   # before the connection serves anyone else, committed or not
            try:
                cur.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
            except self.errors:
                pass   # never an error after a commit that succeeded; close checkpoints
        self.checkpoints.request()

    def stored(self, txn: Txn, nbytes: int) -> None:
        """Counts the bytes; every WRITEBACK_BYTES of them, starts a flush of the
        log (stores/writeback.py): SQLite has put most of them there by now."""
        before = txn.written
        super().stored(txn, nbytes)
        if self.writeback is not None and \
                before // WRITEBACK_BYTES != txn.written // WRITEBACK_BYTES:
            self.writeback.request()

    def _checkpoint(self) -> None:
        """One passive checkpoint (it never waits for readers or writers), on a
        connection outside any transaction; a no-op for a rollback-journal file."""
        conn = self.acquire()
        try:
            conn.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except BaseException as e:
            self.discard(conn, e)
            raise
        self.release(conn)

    def dispose(self) -> None:
        self.checkpoints.wait()    # its connection comes back before all are closed
        super().dispose()

    def _close_engine(self) -> None:
        key, self._engine_key = self._engine_key, None
        if key is not None:        # once, however often the store is disposed
            sqlite_engines.release(key, self)

    def prepare_new_file(self) -> None:
        """Settings of a new database, before its first table: the page size (fixed once
        the file has content) and the journal mode, WAL unless another was asked for
        (persistent)."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute(f"PRAGMA page_size = {SQLITE_PAGE_SIZE}")
            cur.execute(f"PRAGMA journal_mode = {self.journal_mode or 'WAL'}")
        except self.errors as e:
            raise translate(e, path=self.display, during="setting up the new file") from e
        finally:
            conn.close()


def _sqlite_engine(uri: str, busy_timeout: float, synchronous: str,
                   read_only: bool) -> sa.Engine:
    """A new engine on the SQLite file ``uri`` (sqlite_engines.py keeps it)."""

    def creator() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=busy_timeout, check_same_thread=False)

    # QueuePool with unbounded overflow: one connection per concurrent thread.
    engine = sa.create_engine("sqlite://", creator=creator, poolclass=QueuePool,
                              pool_size=5, max_overflow=-1)

    # Take control of BEGIN as the SQLAlchemy SQLite docs describe: the driver stays in
    # autocommit mode (it emits no BEGIN), we emit BEGIN [IMMEDIATE] ourselves.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute(f"PRAGMA synchronous = {synchronous}")
        dbapi_conn.execute(f"PRAGMA secure_delete = {SQLITE_SECURE_DELETE}")
        # Reads copy pages straight out of the OS page cache, without a read() call per
        # page (SQLite maps the file read-only; writes still go through write()).
        dbapi_conn.execute(f"PRAGMA mmap_size = {SQLITE_MMAP_SIZE}")
        if read_only:
            dbapi_conn.execute("PRAGMA query_only = ON")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:  # SQLAlchemy-level use (migrations)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


class PostgresBackend(Backend):
    name = "postgresql"
    placeholder = "%s"
    # A btree entry is at most ~2700 bytes; keep keys well inside it.
    max_key_bytes = 2048
    begin_read_sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

    def __init__(self, url: sa.URL, display: str, *, read_only: bool, busy_timeout: float,
                 retries: int, for_migrations: bool = False) -> None:
        if url.drivername == "postgresql":
            url = url.set(drivername=f"postgresql+{_default_pg_driver()}")
        try:
            # pre-ping: a pooled connection the server closed is replaced on checkout (a
            # round trip per checkout, rare: connections stay checked out between uses)
            engine = sa.create_engine(url, pool_size=5, max_overflow=-1, pool_pre_ping=True)
        except ImportError as e:
            raise StoreError(f"the PostgreSQL driver is not installed: {e}", path=display,
                             hint="pip install psycopg2-binary (or psycopg)") from e
        if engine.dialect.loaded_dbapi.paramstyle not in ("format", "pyformat"):
            raise UnsupportedOperationError(
                f"the PostgreSQL driver {engine.dialect.driver!r} is not supported",
                path=display, hint="use postgresql+psycopg2:// or postgresql+psycopg://")
        if not for_migrations:
            @event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn: Any, record: Any) -> None:
                dbapi_conn.autocommit = True
        self.lock_id = 0
        super().__init__(engine, display, read_only=read_only, busy_timeout=busy_timeout,
                         retries=retries)

    def set_table(self, table: str) -> None:
        self.lock_id = advisory_lock_id(table)

    def _begin_write(self, cur: Any) -> int | None:
        ms = max(1, int(self.busy_timeout * 1000))
        sql = (f"BEGIN; SET LOCAL lock_timeout = {ms}; "
               f"SELECT pg_advisory_xact_lock({self.lock_id})")
        counter = self.counter
        if counter is None:
            cur.execute(sql)
            return None
        # the change counter, read under the lock in the same round trip
        cur.execute(f"{sql}; {counter.read_sql}")
        return counter.parse(self._last_row(cur))

    def _commit_statement(self, txn: Txn) -> None:
        counter = self.counter
        if not txn.write or counter is None or txn.counter is None:
            txn.cur.execute("COMMIT")
            return
        # the change counter, written in the round trip of the COMMIT (counter.py)
        txn.cur.execute(counter.commit_sql(txn.counter + 1, txn.dirty))

    def lock_in_sa(self, conn: sa.Connection, table: str) -> None:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({advisory_lock_id(table)})")


def advisory_lock_id(table: str) -> int:
    """The 64-bit advisory lock key of the store in ``table`` (stable across processes)."""
    digest = hashlib.blake2b(f"kvzarr.sql:{table}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def open_backend(target: Any, *, read_only: bool, busy_timeout: float, retries: int,
                 synchronous: str = "FULL", journal_mode: str | None = None,
                 for_migrations: bool = False, must_exist: bool = False) -> Backend:
    """The backend for a path or SQLAlchemy URL. A SQLite file is created on first use
    when writable, unless ``must_exist`` (then a missing file is StoreError, and
    nothing is created). ``journal_mode`` (SQLite only): see :data:`JOURNAL_MODES`."""
    text = os.fspath(target)
    if busy_timeout < 0 or retries < 0:
        raise StoreConfigError("busy_timeout and retries must not be negative", path=text,
                         field="busy_timeout" if busy_timeout < 0 else "retries")
    if "://" not in text:
        path, display = os.path.abspath(text), text
        name = "sqlite"
    else:
        try:
            url = make_url(text)
        except sa.exc.ArgumentError as e:
            raise StoreError(f"not a database URL: {e}", path=text) from e
        display = url.render_as_string(hide_password=True)
        name = url.get_backend_name()
        if name == "sqlite":
            if not url.database or url.database == ":memory:" or url.database.startswith("file:"):
                raise StoreError("a SQLite store needs a database file", path=display,
                                 hint="use MemoryStore for an in-memory store")
            path = os.path.abspath(url.database)
    if name == "sqlite":
        sync = synchronous.upper()
        if sync not in ("FULL", "NORMAL", "EXTRA"):
            raise StoreConfigError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}",
                             path=display, field="synchronous")
        journal = None if journal_mode is None else str(journal_mode).upper()
        if journal is not None and journal not in JOURNAL_MODES:
            raise StoreConfigError(f"journal_mode must be one of {', '.join(JOURNAL_MODES)} "
                                   f"(or None: the file's own), not {journal_mode!r}",
                                   path=display, field="journal_mode")
        if journal is not None and read_only:
            raise StoreConfigError("journal_mode cannot be set on a read-only store",
                                   path=display, field="journal_mode")
        if read_only and not os.path.exists(path):
            raise StoreError("no database file to open read-only", path=display)
        if must_exist and not os.path.exists(path):
            raise StoreError("no database file here", path=display)
        if not read_only:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            except OSError as e:
                raise translate(e, path=display, during="creating the directory") from e
        return SQLiteBackend(path, display, read_only=read_only, busy_timeout=busy_timeout,
                             retries=retries, synchronous=sync, journal_mode=journal)
    if journal_mode is not None:
        raise StoreConfigError("journal_mode is a setting of SQLite files only", path=display,
                               field="journal_mode")
    if name == "postgresql":
        return PostgresBackend(url, display, read_only=read_only, busy_timeout=busy_timeout,
                               retries=retries, for_migrations=for_migrations)
    raise UnsupportedOperationError(
        f"the SQL store supports SQLite and PostgreSQL, not {name!r}", path=display)


def _switch_journal(path: str, mode: str, busy_timeout: float, display: str) -> None:
    """Put the existing file at ``path`` in journal ``mode`` (journal.py), before the
    store opens any connection; a mode that did not change is a conflict with the other
    connections that have the file open."""
    try:
        now = switch_journal(f"file:{_quote_path(path)}?mode=rw", mode, busy_timeout)
    except sqlite3.Error as e:
        err = translate(e, path=display, during=f"setting journal_mode = {mode}")
        if not isinstance(err, ConflictError):
            raise err from e
        cause: BaseException | None = e
    else:
        if now == mode:
            return
        cause = None
    raise ConflictError(f"the file's journal mode could not be changed to {mode}: SQLite "
                        f"changes it only while no other connection has the file open",
                        path=display, field="journal_mode",
                        hint="close the other stores and processes using it, then retry"
                        ) from cause


def _default_pg_driver() -> str:
    """SQLAlchemy's default driver differs between versions; take whichever is installed,
    psycopg (3) first."""
    import importlib.util
    return "psycopg" if importlib.util.find_spec("psycopg") is not None else "psycopg2"


def _quote_path(path: str) -> str:
    # SQLite URI filenames: '%', '?' and '#' must be escaped (https://sqlite.org/uri.html)
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
