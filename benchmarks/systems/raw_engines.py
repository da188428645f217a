"""The raw storage engines with no Zarr on top: a dict in memory, one plain file per key,
py-lmdb, sqlite3 and a PostgreSQL table through psycopg2. Each offers the few operations a chunk engine needs, done the
fastest plain way: one transaction per batch, batched lookups, a thread pool for file
I/O. They are the "raw limit" the Zarr systems are measured against.

Durability matches kvzarr's defaults for the same engine (LMDB: sync and metasync on;
SQLite: WAL, synchronous=FULL; files: no fsync), so the limit is a like-for-like one.
"""

from __future__ import annotations

import bisect
import os
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                          thread_name_prefix="raw-codec")
#: file writes wait on the kernel more than on the CPU: more of them in flight
IO_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="raw-files")
#: below this many bytes in a batch, threads cost more than they save
PARALLEL_BYTES = 512 * 1024


def parallel_map(fn, items: Sequence, nbytes: int, pool: ThreadPoolExecutor = POOL) -> list:
    """``[fn(x) for x in items]``, split into one slice per pool thread when the batch
    is big enough to pay for threads (one future per slice, not per item)."""
    n = pool._max_workers
    if len(items) < 2 or nbytes < PARALLEL_BYTES:
        return [fn(x) for x in items]
    step = -(-len(items) // n)
    parts = pool.map(lambda part: [fn(x) for x in part],
                     [items[i:i + step] for i in range(0, len(items), step)])
    return [y for part in parts for y in part]


class KV:
    """One store of str keys and bytes values."""

    def put(self, key: str, value: bytes) -> None:
        self.put_many([(key, value)])

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        raise NotImplementedError

    def get(self, key: str) -> bytes | None:
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        raise NotImplementedError

    def children(self, prefix: str) -> list[str]:
        """Names directly below ``prefix`` (which ends with "/" or is "")."""
        raise NotImplementedError

    def close(self) -> None:
        pass


def _children_of_sorted(keys: Sequence[str], prefix: str) -> list[str]:
    out: list[str] = []
    i = bisect.bisect_left(keys, prefix)
    n = len(prefix)
    while i < len(keys) and keys[i].startswith(prefix):
        rest = keys[i][n:]
        cut = rest.find("/")
        if cut < 0:
            i += 1
            continue
        child = rest[:cut]
        out.append(child)
        # skip the child's whole subtree: "/" + 1 is "0"
        i = bisect.bisect_left(keys, prefix + child + "0", i)
    return out


class MemoryKV(KV):
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self._sorted: list[str] | None = None

    def put_many(self, items):
        for k, v in items:
            self.data[k] = bytes(v)   # the one memcpy a store must make
        self._sorted = None

    def get_many(self, keys):
        get = self.data.get
        return [get(k) for k in keys]

    def children(self, prefix):
        if self._sorted is None:
            self._sorted = sorted(self.data)
        return _children_of_sorted(self._sorted, prefix)


class FilesKV(KV):
    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._dirs: set[str] = set()

    def _write(self, item: tuple[str, bytes]) -> None:
        key, value = item
        with open(os.path.join(self.root, key), "wb") as f:
            f.write(value)

    def _read(self, key: str) -> bytes | None:
        try:
            with open(os.path.join(self.root, key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def put_many(self, items):
        for key, _ in items:
            parent = key.rpartition("/")[0]
            if parent and parent not in self._dirs:
                os.makedirs(os.path.join(self.root, parent), exist_ok=True)
                self._dirs.add(parent)
        # files: several in flight even when small, the kernel work releases the GIL
        parallel_map(self._write, items, PARALLEL_BYTES * (len(items) >= 8), IO_POOL)

    def get_many(self, keys):
        # reads from the page cache are CPU work: one thread per core is fastest here
        return parallel_map(self._read, keys, PARALLEL_BYTES * (len(keys) >= 8))

    def children(self, prefix):
        with os.scandir(os.path.join(self.root, prefix)) as it:
            return sorted(e.name for e in it if e.is_dir())


class LmdbKV(KV):
    """``write_map``: write through LMDB's shared map (MDB_WRITEMAP), as kvzarr's LMDB
    store does with ``write_map=True`` (by default it copies pages into the file, as
    this does without)."""

    def __init__(self, path: str, write_map: bool = False) -> None:
        import lmdb
        self.env = lmdb.open(path, subdir=False, map_size=1 << 40, sync=True,
                             metasync=True, lock=True, max_dbs=0, writemap=write_map)

    def put_many(self, items):
        with self.env.begin(write=True) as txn:
            for k, v in items:
                txn.put(k.encode(), v)

    def get_many(self, keys):
        with self.env.begin(buffers=False) as txn:
            get = txn.get
            return [get(k.encode()) for k in keys]

    def children(self, prefix):
        out: list[str] = []
        p = prefix.encode()
        with self.env.begin() as txn, txn.cursor() as cur:
            ok = cur.set_range(p)
            while ok:
                key = cur.key()
                if not key.startswith(p):
                    break
                rest = key[len(p):]
                cut = rest.find(b"/")
                if cut < 0:
                    ok = cur.next()
                    continue
                child = rest[:cut]
                out.append(child.decode())
                ok = cur.set_range(p + child + b"0")   # past the child's subtree
        return out

    def close(self):
        self.env.close()


class SqliteKV(KV):
    _BATCH = 500   # keys per IN (...) lookup

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                  timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        # a rowid table, as kvzarr's and zarr-python 2's: WITHOUT ROWID tables keep
        # values in the key's B-tree, which is slow for values of many pages
        self.db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB)")

    def put_many(self, items):
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?)", items)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def get_many(self, keys):
        if len(keys) == 1:
            row = self.db.execute("SELECT v FROM kv WHERE k = ?", (keys[0],)).fetchone()
            return [None if row is None else row[0]]
        found: dict[str, bytes] = {}
        self.db.execute("BEGIN")
        try:
            for i in range(0, len(keys), self._BATCH):
                part = keys[i:i + self._BATCH]
                q = f"SELECT k, v FROM kv WHERE k IN ({','.join('?' * len(part))})"
                found.update(self.db.execute(q, part).fetchall())
        finally:
            self.db.execute("COMMIT")
        return [found.get(k) for k in keys]

    def children(self, prefix):
        rows = self.db.execute("SELECT k FROM kv WHERE k >= ? AND k < ? ORDER BY k",
                               (prefix, prefix + "\U0010ffff")).fetchall()
        return _children_of_sorted([r[0] for r in rows], prefix)

    def close(self):
        self.db.close()


class PostgresKV(KV):
    """One table on a PostgreSQL server through psycopg2, in autocommit: a lookup is
    one round trip, a batch of puts one transaction."""
    _BATCH = 500

    def __init__(self, url: str, table: str) -> None:
        import psycopg2

        from .postgres import libpq_url
        self.db = psycopg2.connect(libpq_url(url))
        self.db.autocommit = True
        self.table = table
        self.cur = self.db.cursor()
        self.cur.execute(f'CREATE TABLE IF NOT EXISTS "{table}" '
                         f'(k TEXT COLLATE "C" PRIMARY KEY, v BYTEA NOT NULL)')
        self.cur.execute(f'ALTER TABLE "{table}" ALTER COLUMN v SET STORAGE EXTERNAL')

    def put_many(self, items):
        from psycopg2.extras import execute_values
        rows = list(dict(items).items())
        cur = self.cur
        cur.execute("BEGIN")
        try:
            for i in range(0, len(rows), self._BATCH):
                execute_values(cur, f'INSERT INTO "{self.table}" (k, v) VALUES %s '
                                    f'ON CONFLICT (k) DO UPDATE SET v = excluded.v',
                               rows[i:i + self._BATCH], page_size=self._BATCH)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    def get_many(self, keys):
        cur = self.cur
        if len(keys) == 1:
            cur.execute(f'SELECT v FROM "{self.table}" WHERE k = %s', (keys[0],))
            row = cur.fetchone()
            return [None if row is None else bytes(row[0])]
        found: dict[str, bytes] = {}
        for i in range(0, len(keys), self._BATCH):
            cur.execute(f'SELECT k, v FROM "{self.table}" WHERE k = ANY(%s)',
                        (list(keys[i:i + self._BATCH]),))
            found.update((k, bytes(v)) for k, v in cur.fetchall())
        return [found.get(k) for k in keys]

    def children(self, prefix):
        self.cur.execute(f'SELECT k FROM "{self.table}" WHERE k >= %s AND k < %s ORDER BY k',
                         (prefix, prefix + "\U0010ffff"))
        return _children_of_sorted([r[0] for r in self.cur.fetchall()], prefix)

    def close(self):
        self.db.close()


def open_kv(engine: str, loc: str, url: str | None = None) -> KV:
    if engine == "memory":
        return MemoryKV()
    if engine == "files":
        return FilesKV(loc)
    if engine == "lmdb":
        return LmdbKV(loc)
    if engine == "lmdb-writemap":
        return LmdbKV(loc, write_map=True)
    if engine == "sqlite":
        return SqliteKV(loc)
    if engine == "postgresql":
        return PostgresKV(url, loc)
    raise ValueError(engine)
