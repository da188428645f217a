"""Faults from outside, with real processes and the real server: permission denied, an
LMDB map that fills while another process holds a reader, SQLite busy beyond its timeout,
a PostgreSQL connection terminated in the middle of a transaction. Each must raise a
clear kvzarr error, leave the store as it was, and let the next operation work. (A full
disk: test_disk_full.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from kvzarr.errors import ConflictError, StoreError, StoreFullError
from kvzarr.stores.filesystem import FilesystemStore
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.sql import SQLStore
from kvzarr.stores.zip import ZipStore

REPO = Path(__file__).resolve().parents[2]


def _python(script: str, *args: str, unprivileged: bool = False,
            **popen: object) -> subprocess.Popen:
    """A Python child running ``script``; ``unprivileged``: without the capabilities that
    let root ignore file permissions (root would write a read-only file)."""
    cmd = [sys.executable, "-c", script, *args]
    if unprivileged and os.geteuid() == 0:
        cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *cmd]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(cmd, env=env, text=True, **popen)


# --- permission denied ---------------------------------------------------------------

OPENERS = {
    "filesystem": lambda d: FilesystemStore(d / "data.zarr"),
    "zip": lambda d: ZipStore(d / "data.zip"),
    "sqlite": lambda d: SQLStore(d / "data.sqlite"),
    "lmdb": lambda d: LMDBStore(d / "data.lmdb"),
}

_TRY_WRITES = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from kvzarr.errors import KvzarrError
    kind, where = sys.argv[1], Path(sys.argv[2])
    out = {}

    def attempt(name, fn):
        try:
            value = fn()
            out[name] = {"ok": True, "value": value.decode() if isinstance(value, bytes)
                         else None}
            return value
        except KvzarrError as e:
            out[name] = {"ok": False, "kvzarr": True, "type": type(e).__name__,
                         "permission": isinstance(e, PermissionError), "message": str(e)}
        except Exception as e:
            out[name] = {"ok": False, "kvzarr": False, "type": type(e).__name__,
                         "message": str(e)}

    def opener(read_only=False):
        if kind == "filesystem":
            from kvzarr.stores.filesystem import FilesystemStore
            return FilesystemStore(where / "data.zarr", read_only=read_only)
        if kind == "zip":
            from kvzarr.stores.zip import ZipStore
            return ZipStore(where / "data.zip", read_only=read_only)
        if kind == "sqlite":
            from kvzarr.stores.sql import SQLStore
            return SQLStore(where / "data.sqlite", read_only=read_only)
        from kvzarr.stores.lmdb import LMDBStore
        return LMDBStore(where / "data.lmdb", read_only=read_only)

    store = attempt("open", opener)
    if store is not None:
        attempt("get", lambda: store.get("keep"))
        attempt("set", lambda: store.set("new", b"x"))
        attempt("get after", lambda: store.get("keep"))
        attempt("set again", lambda: store.set("keep", b"changed"))
    reader = attempt("open read-only", lambda: opener(read_only=True))
    if reader is not None:
        attempt("get read-only", lambda: reader.get("keep"))
    print(json.dumps(out))
""")


def _chmod_tree(top: Path, file_mode: int, dir_mode: int) -> None:
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), file_mode)
        os.chmod(dirpath, dir_mode)


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None,
                    reason="running as root without setpriv: permissions do not bind")
@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_permission_denied_is_a_clear_error_and_changes_nothing(tmp_path, kind):
    where = tmp_path / "ro"
    where.mkdir()
    store = OPENERS[kind](where)
    store.set("keep", b"old")
    store.close()
    _chmod_tree(where, 0o444, 0o555)
    try:
        child = _python(_TRY_WRITES, kind, str(where), unprivileged=True,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout, stderr = child.communicate(timeout=60)
        assert child.returncode == 0, stderr
        out = json.loads(stdout)
    finally:
        _chmod_tree(where, 0o644, 0o755)
    failures = {name: r for name, r in out.items() if not r["ok"]}
    assert failures, f"{kind}: a read-only store took a write: {out}"
    for name, r in failures.items():
        assert r["kvzarr"] and r["permission"], (kind, name, r)     # one clear error class
    if out["open"]["ok"]:
        # the handle stays usable: reads answer, each write is refused the same way
        assert out["get"] == {"ok": True, "value": "old"}, out
        assert out["get after"] == {"ok": True, "value": "old"}, out
        assert not out["set"]["ok"] and not out["set again"]["ok"], out
    if out["open read-only"]["ok"]:       # else refused with the same clear error class
        assert out["get read-only"] == {"ok": True, "value": "old"}, out
    store = OPENERS[kind](where)             # permissions back: nothing changed, writes work
    try:
        assert store.get("keep") == b"old" and store.get("new") is None
        store.set("new", b"now")
        assert store.get("new") == b"now"
    finally:
        store.close()


# --- LMDB: the map fills while another process holds a reader --------------------------

_LMDB_READER = textwrap.dedent("""
    import sys
    from kvzarr.stores.lmdb import LMDBStore
    store = LMDBStore(sys.argv[1])
    with store.transaction(write=False):
        before = store.get("v")
        print("reading", flush=True)
        sys.stdin.readline()                  # the writer fills the map meanwhile
        after = store.get("v")
    print("same" if before == after else "changed", flush=True)
""")


def test_lmdb_map_full_while_another_process_holds_a_reader(tmp_path):
    """A reader in another process pins the pages of its snapshot, so rewriting a value
    again and again cannot reuse them: the map fills at map_size_max. The failing commit
    raises StoreFullError and keeps nothing; the reader's snapshot stays intact; once
    the reader ends, the same write succeeds."""
    path = str(tmp_path / "data.lmdb")
    limit = 1 << 20
    store = LMDBStore(path, map_size_start=256 << 10, map_size_max=limit)
    store.set("keep", b"old")
    store.set("v", b"0" * (64 << 10))
    reader = _python(_LMDB_READER, path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert reader.stdout.readline().strip() == "reading"
        last = None
        with pytest.raises(StoreFullError):
            for i in range(1, 64):               # 64 x 64 KiB: far past 1 MiB
                value = bytes([i]) * (64 << 10)
                with store.transaction():
                    store.set("v", value)
                    store.set("keep", b"old")
                last = value
        assert last is not None, "the map was full before any rewrite"
        assert store.get("v") == last and store.get("keep") == b"old"
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "same"
        assert reader.wait(30) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait(30)
    store.set("v", b"after the reader")          # its pages are free again
    assert store.get("v") == b"after the reader" and store.get("keep") == b"old"
    store.close()


# --- SQLite: busy beyond the timeout ---------------------------------------------------

_SQLITE_LOCKER = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("UPDATE kvzarr SET v = x'00' WHERE k = 'keep'")   # never committed
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    conn.close()
""")


def test_sqlite_busy_beyond_its_timeout(tmp_path):
    path = str(tmp_path / "data.sqlite")
    store = SQLStore(path, busy_timeout=0.2, retries=1)
    store.set("keep", b"old")
    locker = _python(_SQLITE_LOCKER, path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert locker.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        with pytest.raises(ConflictError) as info:
            with store.transaction():
                store.set("new", b"x")
        assert time.monotonic() - t0 < 10, "the wait was not bounded by busy_timeout"
        assert "lock" in str(info.value)
        assert store.get("keep") == b"old" and store.get("new") is None   # reads go on
        locker.stdin.write("\n")
        locker.stdin.flush()
        assert locker.wait(30) == 0
    finally:
        if locker.poll() is None:
            locker.kill()
            locker.wait(30)
    store.set("new", b"now")                      # the next write works
    assert store.get("new") == b"now" and store.get("keep") == b"old"
    store.close()


# --- PostgreSQL: the connection is terminated ------------------------------------------

@pytest.fixture
def pg_store():
    url = os.environ.get("KVZARR_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("set KVZARR_TEST_POSTGRES_URL to run against PostgreSQL")
    table = f"t_fault_{uuid.uuid4().hex[:12]}"
    store = SQLStore(url, table=table)
    yield store, url, table
    store.close()
    with _admin(url) as cur:
        for name in (table, f"{table}_version", f"{table}_info", f"{table}_segments"):
            cur.execute(f'DROP TABLE IF EXISTS "{name}"')


@contextmanager
def _admin(url: str):
    """A cursor on a connection of its own (autocommit), as another client would have."""
    import psycopg2
    scheme, sep, rest = url.partition("://")
    conn = psycopg2.connect(f"{scheme.split('+')[0]}{sep}{rest}")
    conn.autocommit = True
    try:
        yield conn.cursor()
    finally:
        conn.close()


def _terminate(url: str, table: str, state: str) -> int:
    """Terminate, from a connection of its own, the backends in ``state`` whose last
    statement named ``table`` (this test's store only; tests run in parallel)."""
    with _admin(url) as cur:
        cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE pid <> pg_backend_pid() AND state = %s AND query LIKE %s",
                    (state, f"%{table}%"))
        return len(cur.fetchall())


def test_postgresql_connection_terminated_in_a_transaction(pg_store):
    store, url, table = pg_store
    store.set("keep", b"old")
    with pytest.raises(StoreError):
        with store.transaction():
            store.set("new", b"x")
            assert _terminate(url, table, "idle in transaction") == 1
            store.set("newer", b"y")              # the connection is gone
    # nothing of the transaction was kept, and the same store goes on working
    assert store.get("keep") == b"old" and store.get("new") is None
    store.set("after", b"fine")
    assert store.get("after") == b"fine"
    with store.transaction():
        store.set("after", b"again")
    assert store.get("after") == b"again"


def test_postgresql_idle_connections_terminated(pg_store):
    """Connections the store keeps between operations die (a server restart, an
    administrator): the next operations get fresh ones instead of failing."""
    store, url, table = pg_store
    store.set("keep", b"old")
    assert store.get("keep") == b"old"            # leaves an idle connection behind
    assert _terminate(url, table, "idle") >= 1
    assert store.get("keep") == b"old"
    store.set("after", b"fine")
    assert store.get("after") == b"fine"
