"""The cache across real processes: another process commits, tells this one over a
pipe, and this one's warm cache must answer with the new value at once, on every store
that has a change counter (LMDB, SQLite, PostgreSQL when KVZARR_TEST_POSTGRES_URL names
a server, zip) and on a directory (no counter: nothing is kept). Also: a read transaction
open in this process keeps its snapshot while the other commits; a forked child's cache
stays coherent; a SQLite store's shared -shm map outlives the stores that close."""

from __future__ import annotations

import multiprocessing
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kvzarr
from kvzarr.stores.byteranges import SuffixRequest
from kvzarr.transformers import Cache

SPAWN = multiprocessing.get_context("spawn")
#: commits of the other process per backend
ROUNDS = 60
TILE = (slice(16, 24), slice(8, 16))


def _open(kind: str, where: str, table: str | None) -> Any:
    if kind == "lmdb":
        from kvzarr.stores.lmdb import LMDBStore
        return LMDBStore(where)
    if kind in ("sql", "postgresql"):
        from kvzarr.stores.sql import SQLStore
        return SQLStore(where, table=table)
    if kind == "zip":
        from kvzarr.stores.zip import ZipStore
        return ZipStore(where)
    return kvzarr.FilesystemStore(where)


def _other_process(kind: str, where: str, table: str | None, conn: Any) -> None:
    """Commit round after round when told to, through a cache of its own, and say when
    each commit is done."""
    store = Cache(_open(kind, where, table), max_bytes=1 << 20)
    arr = kvzarr.open_array(store, path="a", mode="r+")
    try:
        while True:
            n = conn.recv()
            if n is None:
                break
            with store.transaction():
                store.set("k", f"value {n}".encode())
                store.set(f"d/n{n}", b"")
                arr[TILE] = n
            conn.send(n)
    finally:
        store.close()
        conn.close()


@pytest.fixture(params=["lmdb", "sql", "postgresql", "zip", "filesystem"])
def location(request, tmp_path: Path) -> tuple[str, str, str | None]:
    kind = request.param
    if kind == "postgresql":
        url = os.environ.get("KVZARR_TEST_POSTGRES_URL")
        if not url:
            pytest.skip("KVZARR_TEST_POSTGRES_URL names no server")
        return kind, url, f"t_{uuid.uuid4().hex[:12]}"
    name = {"lmdb": "x.lmdb", "sql": "x.db", "zip": "x.zip", "filesystem": "x.zarr"}[kind]
    return kind, str(tmp_path / name), None


def test_another_process_commit_is_seen_at_once(location):
    kind, where, table = location
    cache = Cache(_open(kind, where, table), max_bytes=4 << 20)
    cache.set("k", b"value 0")
    arr = kvzarr.create_array(cache, name="a", shape=(64, 64), chunks=(8, 8), shards=(32, 32),
                              dtype="int32", fill_value=0)
    arr[...] = 0
    parent, child_end = SPAWN.Pipe()
    child = SPAWN.Process(target=_other_process, args=(kind, where, table, child_end))
    child.start()
    try:
        for n in range(1, ROUNDS + 1):
            # warm: what the other process is about to change is cached here
            for _ in range(2):
                assert cache.get("k") == f"value {n - 1}".encode()
                assert f"n{n}" not in list(cache.list_dir("d/"))
                assert (arr[TILE] == n - 1).all()
            if n % 10 == 0 and cache.capabilities.transactional:
                # a read transaction open while the other commits keeps its snapshot
                with cache.transaction(write=False):
                    assert cache.get("k") == f"value {n - 1}".encode()
                    parent.send(n)
                    assert parent.poll(60)
                    assert parent.recv() == n
                    assert cache.get("k") == f"value {n - 1}".encode()
                    assert (arr[TILE] == n - 1).all()
            else:
                parent.send(n)
                assert parent.poll(60)
                assert parent.recv() == n
            # the commit is visible to a fresh read now: so must it be through the cache
            assert cache.get("k") == f"value {n}".encode()
            assert f"n{n}" in list(cache.list_dir("d/"))
            assert (arr[TILE] == n).all()
            with cache.transaction(write=False):
                assert cache.get_many(["k", f"d/n{n}"]) == [f"value {n}".encode(), b""]
                assert cache.get_partial_values([("k", SuffixRequest(len(str(n))))]) == \
                    [str(n).encode()]
        parent.send(None)
        child.join(60)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
        cache.close()
    stats = cache.stats()
    if kind == "filesystem":
        assert stats["hits"] == 0 and stats["bypassed"] > 0
    else:
        assert stats["hits"] > ROUNDS      # the warm reads were served from memory


def _forked(fn) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = fn()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("kind", ["lmdb", "sql", "zip"])
def test_a_forked_child_cache_stays_coherent(kind, tmp_path):
    where = str(tmp_path / {"lmdb": "x.lmdb", "sql": "x.db", "zip": "x.zip"}[kind])
    cache = Cache(_open(kind, where, None), max_bytes=1 << 20)
    cache.set("k", b"parent")
    assert cache.get("k") == b"parent"

    def child() -> int:
        if cache.get("k") != b"parent":
            return 3
        cache.set("k", b"child")                   # through the inherited cache
        other = _open(kind, where, None)
        ok = other.get("k") == b"child"
        other.set("k", b"behind")                  # and behind its back
        ok = ok and cache.get("k") == b"behind"
        other.close()
        return 0 if ok else 4
    assert _forked(child) == 0
    assert cache.get("k") == b"behind"
    cache.close()


def test_sqlite_shm_map_is_shared_and_closed_with_the_last_store(tmp_path):
    from kvzarr.stores.sql import SQLStore
    from kvzarr.stores.sql.counter import _SHM
    path = str(tmp_path / "x.db")
    first, second = Cache(SQLStore(path)), Cache(SQLStore(path))
    first.set("k", b"1")
    assert second.get("k") == b"1" and first.get("k") == b"1"
    maps = [m for m in _SHM.maps.values()]
    shm = os.path.realpath(path) + "-shm"
    mine = [m for m in maps if m.key == (os.stat(shm).st_dev, os.stat(shm).st_ino)]
    assert len(mine) == 1 and mine[0].refs == 2     # one map for both stores
    first.close()
    assert mine[0].refs == 1
    second.set("k", b"2")                            # still coherent after the other closed
    assert second.get("k") == b"2"
    fd = mine[0].fd
    second.close()                                   # the last connection removes -shm
    assert not os.path.exists(shm)
    with pytest.raises(OSError):
        os.fstat(fd)                                 # so the map's descriptor is closed
    assert mine[0] not in _SHM.deferred


def test_a_rollback_journal_sqlite_file_has_no_counter(tmp_path):
    """zarr-python 2's SQLite files keep their rollback journal: no counter, so a cache
    over one keeps nothing (and is never stale)."""
    import sqlite3
    from kvzarr.stores.sql import SQLStore
    path = tmp_path / "legacy.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE zarr(k TEXT PRIMARY KEY, v BLOB)")
        db.execute("INSERT INTO zarr VALUES ('k', x'01')")
    store = SQLStore(str(path))
    assert store.change_counter() is None
    cache = Cache(store)
    assert cache.get("k") == b"\x01" and cache.get("k") == b"\x01"
    with sqlite3.connect(path) as db:
        db.execute("UPDATE zarr SET v = x'02' WHERE k = 'k'")
    assert cache.get("k") == b"\x02"
    assert cache.stats()["hits"] == 0
    cache.close()


def test_lmdb_counter_survives_map_growth_and_reads_the_meta_pages(tmp_path):
    from kvzarr.stores.lmdb import LMDBStore
    store = LMDBStore(str(tmp_path / "x.lmdb"), map_size_start=1 << 16)
    cache = Cache(store, max_bytes=1 << 20)
    assert store._shared._meta is not None           # read from the meta pages
    before = store.change_counter()
    cache.set("small", b"1")
    assert cache.get("small") == b"1"
    cache.set("big", np.arange(1 << 18, dtype="int64").tobytes())   # grows the map
    assert store.change_counter() == store._shared.env.info()["last_txnid"] > before
    assert cache.get("big") == np.arange(1 << 18, dtype="int64").tobytes()
    cache.close()
