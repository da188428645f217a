"""The change counter of the SQL store (``Store.change_counter``; stores/sql.md, "Change
counter"): a token that changes whenever a commit may have changed the store, cheap
enough to check once per read transaction of a cache.

SQLite (:class:`SQLiteCounter`), for a database in WAL mode: the token is the
wal-index header (https://www.sqlite.org/walformat.html, "The WAL-Index Header"),
48 bytes at the start of the ``-shm`` file, read through a read-only memory map. Every
committed write transaction rewrites it (``iChange`` counts them; ``mxFrame``, the frame
checksum and the salts follow the WAL's content), and a new read transaction takes its
snapshot from exactly this header, so "the header is unchanged" means "a read begun now
sees what a read begun then saw". SQLite writes the second copy of the header, then the
first; a reader takes the header only when both copies agree, as SQLite's own readers
do. Three things make this safe:

* a *keeper* connection of the store stays open with the WAL attached, so the ``-shm``
  file is never deleted and rebuilt under the map (SQLite deletes it when its last
  connection closes);
* the descriptors of the map are closed only when no connection of this process can
  hold a lock on the file (POSIX drops every lock a process holds on a file when any of
  its descriptors of that file closes: https://www.sqlite.org/howtocorrupt.html,
  section 2.2): :class:`_ShmMaps` shares one map per file between the stores of a process
  and closes it once the file is gone;
* after ``fork()`` a child sets up its own keeper and map and never closes the parent's.

Inside a read transaction the token is the header the snapshot was taken from: with
counters in use a read transaction is pinned at its ``BEGIN`` by a first statement,
bracketed by two header reads (equal reads name the snapshot). Inside a write
transaction that has written, the header after the commit cannot be known in advance,
so the token is a fresh name (a tuple) that the store attaches to that header once the
commit is done: the header is read right after ``COMMIT``, and ``PRAGMA data_version``
of the same connection, unchanged across it, proves that no other commit came in
between. Until the next commit the store reports that name for that header. If the
proof fails the name is never reported and a cache holding it just misses.

A database not in WAL mode (zarr-python 2's files use a rollback journal) has no such
header: its token is None (no counter).

PostgreSQL (:class:`PostgresCounter`), kvzarr's own layout: the row ``name =
'changes'`` of the ``T_info`` table holds a number. A write transaction reads it in the
round trip that takes the store's advisory lock, and writes it plus one in the round
trip of its ``COMMIT`` when it wrote anything (or the server says it did:
``txid_current_if_assigned()``, so a write path that forgot to say so still counts). A
read transaction reads the row inside its snapshot (REPEATABLE READ); outside a
transaction reading it is one round trip. The legacy layouts have no such table: None.
"""

from __future__ import annotations

import itertools
import mmap
import os
import sys
import threading
from collections.abc import Hashable
from typing import Any

from ...runtime import process as _process
from ...runtime.process import current_pid

#: ``iVersion`` of the wal-index header (native byte order) and the header's size
_WALINDEX_VERSION = 3007000
_HEADER = 48
#: bytes of the -shm file mapped (the two header copies and the checkpoint info)
_MAPPED = 4096
#: re-reads of the header while a writer is updating it
_TORN_RETRIES = 100


class _ShmMap:
    """A read-only map of the start of one ``-shm`` file, shared by the stores of this
    process that use that file."""

    __slots__ = ("key", "fd", "map", "refs", "version")

    def __init__(self, key: tuple[int, int], fd: int, m: mmap.mmap) -> None:
        self.key, self.fd, self.map, self.refs = key, fd, m, 0
        self.version = _WALINDEX_VERSION.to_bytes(4, sys.byteorder)  # native order

    def header(self) -> bytes | None:
        """The wal-index header now, or None while it is being written (too long) or
        not initialised."""
        m = self.map
        for _ in range(_TORN_RETRIES):
            first = m[0:_HEADER]
            if first == m[_HEADER:2 * _HEADER]:
                if first[12] != 1 or first[:4] != self.version:   # isInit, iVersion
                    return None
                return first
        return None

    def unlinked(self) -> bool:
        try:
            return os.fstat(self.fd).st_nlink == 0
        except OSError:
            return True

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


class _ShmMaps:
    """One :class:`_ShmMap` per ``-shm`` file per process. A map no store uses any more
    is closed once SQLite has deleted its file (then no connection can hold a lock on
    it); until then it waits in ``deferred`` and is checked again at the next release."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.maps: dict[tuple[int, int], _ShmMap] = {}
        self.deferred: list[_ShmMap] = []
        #: maps inherited over fork(): kept referenced, never closed (see module doc)
        self.inherited: list[_ShmMap] = []
        #: descriptors of -shm files that could not be mapped: never closed either
        self.kept_fds: list[int] = []

    def acquire(self, path: str) -> _ShmMap | None:
        with self.lock:
            try:
                st = os.stat(path)
            except OSError:
                return None
            key = (st.st_dev, st.st_ino)
            entry = self.maps.get(key)
            if entry is None:
                for i, old in enumerate(self.deferred):
                    if old.key == key:
                        entry = self.deferred.pop(i)
                        break
            if entry is None:
                entry = self._open(path, key)
                if entry is None:
                    return None
            self.maps[key] = entry
            entry.refs += 1
            return entry

    def _open(self, path: str, key: tuple[int, int]) -> _ShmMap | None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != key or st.st_size < _MAPPED:
                raise OSError("not the -shm file expected")
            if hasattr(mmap, "PROT_READ"):
                m = mmap.mmap(fd, _MAPPED, prot=mmap.PROT_READ)
            else:
                m = mmap.mmap(fd, _MAPPED, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            self.kept_fds.append(fd)   # closing it could drop this process's SQLite locks
            return None
        return _ShmMap(key, fd, m)

    def release(self, entry: _ShmMap) -> None:
        with self.lock:
            entry.refs -= 1
            if entry.refs > 0:
                return
            if self.maps.get(entry.key) is entry:
                del self.maps[entry.key]
            self.deferred.append(entry)
            keep = []
            for old in self.deferred:
                if old.unlinked():
                    old.close()
                else:
                    keep.append(old)
            self.deferred = keep

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()
        self.inherited.extend(self.maps.values())
        self.inherited.extend(self.deferred)
        self.maps, self.deferred = {}, []


_SHM = _ShmMaps()
#: keeper connections inherited over fork(): kept referenced, never used or closed
_INHERITED_KEEPERS: list[Any] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SHM.after_fork_in_child)


class SQLiteCounter:
    """The change counter of one SQLite store (see the module docstring)."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._pid = -1
        self._keeper: Any = None
        self._shm: _ShmMap | None = None
        self._map: Any = None               # the map of _shm (the hot path reads it)
        #: (header after one of our commits, the name handed out for it)
        self._alias: tuple[bytes, Hashable] | None = None
        self._names = itertools.count(1)
        self.supported = True

    # -- setting up ----------------------------------------------------------------------

    def _ready(self) -> _ShmMap | None:
        """The map of the -shm file, set up on first use in this process."""
        if self._pid == current_pid():
            return self._shm
        with self._lock:
            if self._pid != current_pid():
                self._setup()
        return self._shm

    def _setup(self) -> None:
        if self._keeper is not None:       # the parent's connection: never used or closed
            _INHERITED_KEEPERS.append(self._keeper)
        self._keeper, self._shm, self._map, self._alias = None, None, None, None
        self._pid = current_pid()
        backend = self._backend
        conn = backend.connect()
        try:
            cur = conn.cursor()
            cur.execute("PRAGMA journal_mode")
            wal = str(cur.fetchone()[0]).lower() == "wal"
            cur.execute("PRAGMA data_version")   # a read: attaches the WAL and -shm
            cur.fetchone()
        except backend.errors:
            backend.discard(conn)
            self.supported = False
            return
        if not wal:
            conn.close()
            self.supported = False
            return
        shm = _SHM.acquire(os.path.realpath(backend.path) + "-shm")
        if shm is None or shm.header() is None:
            if shm is not None:
                _SHM.release(shm)
            conn.close()
            self.supported = False
            return
        self._keeper, self._shm, self._map = conn, shm, shm.map

    def close_keeper(self) -> None:
        """Hand the keeper connection back (the store is closing). Never a parent's."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None and self._pid == current_pid():
            try:
                keeper.close()
            except self._backend.errors:
                pass

    def close(self) -> None:
        """Release the map, once every connection of the store is closed."""
        shm, self._shm, self._map = self._shm, None, None
        mine = self._pid == current_pid()
        self.supported = False          # closed: no counter from now on
        if shm is not None and mine:
            _SHM.release(shm)

    # -- tokens --------------------------------------------------------------------------

    def _named(self, header: bytes | None) -> Hashable | None:
        if header is None:
            return None
        alias = self._alias
        return alias[1] if alias is not None and alias[0] == header else header

    def latest(self) -> Hashable | None:
        """Outside a transaction: the token of the latest commit. (The hot path of a
        cache hit: :meth:`_ShmMap.header` and :meth:`_named` written out.)"""
        m = self._map
        if m is None or self._pid != _process._pid:
            shm = self._ready()
            if shm is None:
                return None
            m = shm.map
        header = m[0:_HEADER]
        if header != m[_HEADER:2 * _HEADER] or header[12] != 1:
            header = self._shm.header()      # being written, or not initialised
            if header is None:
                return None
        alias = self._alias
        if alias is not None and alias[0] == header:
            return alias[1]
        return header

    def pin(self, cur: Any, statement: str) -> Hashable | None:
        """At the start of a read transaction: begin its snapshot with ``statement`` (a
        read of the store's table that returns no row) between two header reads; the
        snapshot's token, or None if a commit came in between."""
        shm = self._ready()
        if shm is None:
            return None
        before = shm.header()
        cur.execute(statement)
        cur.fetchall()
        after = shm.header()
        return self._named(before) if before == after else None

    def before_write(self) -> Hashable | None:
        """In a write transaction that has written nothing: the current token (the
        header cannot change while this connection holds the write lock)."""
        shm = self._ready()
        return None if shm is None else self._named(shm.header())

    def new_name(self) -> Hashable:
        """A name no header has: the token promised to a write transaction's commit."""
        return ("sqlite-commit", next(self._names))

    @staticmethod
    def data_version(cur: Any) -> Any:
        cur.execute("PRAGMA data_version")
        return cur.fetchone()[0]

    def after_commit(self, cur: Any, name: Hashable, version_before: Any) -> None:
        """Right after ``COMMIT`` on ``cur``'s connection: give the header it left the
        name promised, if no other commit can have come in between."""
        shm = self._shm
        if shm is None or self._pid != current_pid():
            return
        header = shm.header()
        if header is not None and self.data_version(cur) == version_before:
            self._alias = (header, name)


class PostgresCounter:
    """The change counter of one PostgreSQL store in kvzarr's layout (module docstring)."""

    def __init__(self, table: str) -> None:
        self._info = info = f'"{table}_info"'
        #: reads the count (no row yet: 0)
        self.read_sql = f"SELECT value FROM {info} WHERE name = 'changes'"

    def commit_sql(self, count: int, wrote: bool) -> str:
        """``COMMIT``, preceded by writing ``count`` (what the transaction promised) if
        it wrote, or if the server says it did. Literals, not parameters: a statement
        list with parameters is refused by psycopg 3, and these are numbers of ours."""
        return (f"INSERT INTO {self._info} (name, value) SELECT 'changes', '{int(count)}' "
                f"WHERE {'true' if wrote else 'false'} "
                f"OR txid_current_if_assigned() IS NOT NULL "
                f"ON CONFLICT (name) DO UPDATE SET value = excluded.value; COMMIT")

    @staticmethod
    def parse(row: Any) -> int | None:
        if row is None:
            return 0
        try:
            return int(row[0])
        except (TypeError, ValueError):
            return None          # not a number kvzarr wrote: no counter
