"""SQLStore's access paths (stores/sql.md): the adaptive ``list_dir`` walk, all the byte
ranges of one value in one statement, connections reused between operations, waiting for
the write lock, and the settings of a new SQLite file.

PostgreSQL runs the backend-independent tests when KVZARR_TEST_POSTGRES_URL names a
database; statement counts and file settings are checked on SQLite.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import re
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import event

from kvzarr.stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest, apply_byte_request
from kvzarr.errors import InvalidKeyError, InvalidStoredKeyWarning
from kvzarr.stores.sql import SQLStore
from kvzarr.stores.sql.store import BLOB_HANDLE_BYTES

PG_URL = os.environ.get("KVZARR_TEST_POSTGRES_URL")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    not PG_URL, reason="set KVZARR_TEST_POSTGRES_URL to test PostgreSQL"))])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        st = SQLStore(tmp_path / "store.db")
        yield st
        st.close()
        return
    table = f"t_{uuid.uuid4().hex[:12]}"
    st = SQLStore(PG_URL, table=table)
    yield st
    with st.transaction():  # leave nothing behind but empty tables
        st.erase_prefix("")
    st.close()
    import sqlalchemy as sa
    engine = sa.create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg2://", 1))
    with engine.begin() as conn:
        for name in (table, f"{table}_info", f"{table}_version"):
            conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{name}"')
    engine.dispose()


def _statements(store: SQLStore) -> list[str]:
    """Every SQL statement the store's SQLite connections run from now on."""
    seen: list[str] = []
    event.listen(store.engine, "connect",
                 lambda dbapi_conn, record: dbapi_conn.set_trace_callback(seen.append))
    store.engine.dispose()  # new connections, traced (the idle ones are dropped too)
    return seen


def _selects(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith("SELECT")]


def _reference_dir(keys: list[str], prefix: str) -> list[str]:
    children = set()
    for key in keys:
        if key.startswith(prefix):
            rest = key[len(prefix):]
            cut = rest.find("/")
            children.add(rest if cut < 0 else rest[:cut + 1])
    return sorted(children)


# --- list_dir ---------------------------------------------------------------------------

# Names around '/' in code-point order ('.' is just below it, '0' just above), quotes,
# spaces, non-ASCII and astral characters.
ODD = [" sp", "!x", "#", "%25", "'q", "-", ".h", ".hidden", "0", "A", "_", "a'b", "é",
       "日本", "\U0001F600", "~", "\uffff", "x\u0301"]


def _tree(rng: random.Random, prefix: str) -> list[str]:
    """Children of ``prefix`` with subtrees of sizes around the walk's page sizes,
    plain keys, and names that are both a key and a directory."""
    sizes = [1, 2, 15, 16, 17, 31, 127, 128, 129, 300, 1100]
    keys = []
    for i, name in enumerate(ODD):
        if i % 3 == 0:
            keys.append(prefix + name)  # a plain key
        if i % 3 != 1:  # a directory of some size, sometimes beside the plain key
            size = sizes[rng.randrange(len(sizes))]
            depth = "/d" * (i % 3)
            keys += [f"{prefix}{name}{depth}/k{j:05d}" for j in range(size)]
    for i in range(150):  # a run of small directories and plain keys
        keys.append(f"{prefix}n{i:03d}/zarr.json" if i % 4 else f"{prefix}n{i:03d}")
    return keys


def test_list_dir_matches_the_children_for_big_and_small_subtrees(store: SQLStore) -> None:
    rng = random.Random(7)
    keys = _tree(rng, "") + _tree(rng, "g/") + _tree(rng, "g/.hidden/d/")
    store.set_many((k, b"") for k in keys)
    for prefix in ("", "g/", "g/.hidden/", "g/.hidden/d/", "g/n001/", "g/日本/", "none/"):
        want = _reference_dir(keys, prefix)
        assert list(store.list_dir(prefix)) == want, prefix
        with store.transaction(write=False):  # read from the transaction's snapshot
            assert list(store.list_dir(prefix)) == want, prefix


def test_list_dir_with_every_page_boundary(store: SQLStore) -> None:
    # Pages end on every possible key: inside a subtree, on its last key, on the plain
    # key after it, on a name that is both a key and a directory.
    keys = []
    for n in range(100, 290, 3):
        p = f"p{n:03d}/"
        keys += [f"{p}a/{i:03d}" for i in range(n)] + [f"{p}b", f"{p}b/x", f"{p}b0"]
        keys += [f"{p}c/{i}" for i in range(5)] + [f"{p}d"] + [f"{p}e/{i:03d}" for i in range(40)]
    store.set_many((k, b"") for k in keys)
    for n in range(100, 290, 3):
        assert list(store.list_dir(f"p{n:03d}/")) == ["a/", "b", "b/", "b0", "c/", "d", "e/"]


def test_list_dir_stays_right_while_keys_change_between_pages(store: SQLStore) -> None:
    keys = [f"d/{i:04d}/x" for i in range(400)] + [f"d/{i:04d}" for i in range(0, 400, 3)]
    store.set_many((k, b"") for k in keys)
    walk = store.list_dir("d/")
    first = [next(walk) for _ in range(5)]
    store.erase_prefix("d/0300/")  # a child not read yet disappears
    store.set("d/0399/y", b"")  # one not read yet grows
    rest = list(walk)
    got = first + rest
    assert got == sorted(set(got))  # in order, each child once
    assert "0300/" not in got and "0399/" in got


def test_keys_and_values_another_program_wrote(tmp_path: Path) -> None:
    # kvzarr never writes a backslash in a key (its pages of keys are joined by one),
    # but a zarr table written by another program may hold such keys.
    path = tmp_path / "foreign.db"
    keys = ["a\\b", "c\\d/e", "c\\d/f", "g/h", "g/i/j"] + [f"m/{i:03d}/x" for i in range(300)]
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE zarr(k TEXT PRIMARY KEY, v BLOB)")
        db.executemany("INSERT INTO zarr VALUES (?, x'00')", [(k,) for k in keys])
        db.execute("INSERT INTO zarr VALUES ('n', NULL)")  # zarr-python 2's table allows it
    with SQLStore(path) as store:
        # keys with a backslash are not valid keys: left out, with a warning, after the
        # page that holds them was cut key by key
        with pytest.warns(InvalidStoredKeyWarning):
            assert list(store.list_dir("")) == ["g/", "m/", "n"]
        assert store.get("n") == b"" and store.get_many(["n"]) == [b""]
        assert store.get_many(["g/h", "n", "none", "g/h"]) == [b"\x00", b"", None, b"\x00"]
        assert list(store.list_dir("m/")) == [f"{i:03d}/" for i in range(300)]


def test_list_dir_reads_small_subtrees_through_in_few_statements(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "small.db")
    store.set_many([(f"g/a{i:05d}/zarr.json", b"{}") for i in range(300)] + [("g/zarr.json", b"")])
    statements = _statements(store)
    assert len(list(store.list_dir("g/"))) == 301
    assert len(_selects(statements)) <= 3  # pages of 128, 256, ...: not one seek per child
    store.close()


def test_list_dir_skips_big_subtrees_after_a_few_keys(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "big.db")
    store.set_many((f"r/{g:02d}/c/{i:04d}", b"") for g in range(40) for i in range(500))
    statements = _statements(store)
    assert list(store.list_dir("r/")) == [f"{g:02d}/" for g in range(40)]
    selects = _selects(statements)
    assert len(selects) <= 40 + 1  # one statement per child at most
    # every statement but the first reads only a few keys of the 20,000
    limits = [int(re.search(r"LIMIT (\d+)", s).group(1)) for s in selects]
    assert sum(limits) <= 128 + 40 * 32, limits
    store.close()


# --- byte ranges ------------------------------------------------------------------------

REQUESTS = [RangeRequest(0, 10), RangeRequest(100, 100), RangeRequest(10_000, 20_000),
            RangeRequest(7, 9000), OffsetRequest(5), OffsetRequest(20_000), OffsetRequest(0),
            SuffixRequest(7), SuffixRequest(0), SuffixRequest(99_999), None]


def test_byte_ranges_of_several_keys_match_python(store: SQLStore) -> None:
    values = {"s/0": bytes(range(256)) * 40, "s/1": b"short", "s/empty": b""}
    store.set_many(values.items())
    asks = [(k, r) for r in REQUESTS for k in ("s/0", "s/missing", "s/1", "s/empty")]
    want = [None if k not in values else
            values[k] if r is None else apply_byte_request(values[k], r) for k, r in asks]
    assert store.get_partial_values(asks) == want
    with store.transaction(write=False):
        assert store.get_partial_values(asks) == want
    many = [("s/0", RangeRequest(i, i + 3)) for i in range(150)]  # more than one statement
    assert store.get_partial_values(many) == [values["s/0"][i:i + 3] for i in range(150)]
    assert store.get_partial_values([]) == []
    with pytest.raises(InvalidKeyError):
        store.get_partial_values([("s/0", None), ("/bad", None)])
    with pytest.raises(TypeError):
        store.get_partial_values([("s/0", (0, 4))])


def test_byte_ranges_of_one_value_are_one_statement(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "ranges.db")
    value = os.urandom(50_000)
    store.set("shard", value)
    store.get_partial_values([("shard", SuffixRequest(1))])   # finds out about row ids
    statements = _statements(store)
    asks = [("shard", SuffixRequest(16))] + [("shard", RangeRequest(i * 4000, i * 4000 + 900))
                                             for i in range(12)]
    assert store.get_partial_values(asks) == [apply_byte_request(value, r) for _, r in asks]
    assert len(_selects(statements)) == 1
    store.close()


def test_ranges_of_large_values_are_read_through_blob_handles(tmp_path: Path) -> None:
    # from BLOB_HANDLE_BYTES on, no substr() (which loads the whole value) is run, and
    # values below it come back whole with their row: the answers are Python's either way
    store = SQLStore(tmp_path / "large.db")
    n = BLOB_HANDLE_BYTES
    values = {"b/big": os.urandom(3 * n + 17), "b/edge": os.urandom(n),
              "b/below": os.urandom(n - 1), "b/empty": b""}
    store.set_many(values.items())
    requests = REQUESTS + [RangeRequest(n - 5, n + 5), SuffixRequest(10 * n),
                           RangeRequest(3 * n + 16, 3 * n + 100), OffsetRequest(3 * n + 18),
                           RangeRequest(n, n)]
    asks = [(k, r) for r in requests for k in (*values, "b/missing")]
    want = [None if k not in values else apply_byte_request(values[k], r) for k, r in asks]
    statements = _statements(store)
    assert store.get_partial_values(asks) == want
    for key, request in asks:
        assert store.get_partial_values([(key, request)]) == \
            [None if key not in values else apply_byte_request(values[key], request)]
    assert not [s for s in statements if "substr(" in s]
    # inside a write transaction, its own writes are what the handle reads
    with store.transaction():
        store.set("b/big", b"x" * (2 * n))
        assert store.get_partial_values([("b/big", RangeRequest(n - 1, n + 1))]) == [b"xx"]
    assert store.get_partial_values([("b/big", SuffixRequest(3))]) == [b"xxx"]
    store.close()


def test_a_value_replaced_between_its_row_and_its_handle_is_read_from_one_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # outside a transaction the row that names the value is read on its own first; a
    # writer that replaces the value right then (the freed row id going to another key)
    # must not make the read return another value's bytes, or a mix
    path = tmp_path / "race.db"
    store, other = SQLStore(path), SQLStore(path)
    old, new, intruder = b"o" * 200_000, b"n" * 150_000, b"i" * 300_000
    store.set("k", old)
    store.get_partial_values([("k", SuffixRequest(1))])      # finds out about row ids
    real, fired = store._fetch_one, []

    def fetch(sql: str, params: object, key: object = None) -> object:
        row = real(sql, params, key)
        if sql == store._q.locate and not fired:
            fired.append(row)
            other.erase("k")
            other.set("x", intruder)       # SQLite gives it the freed row id
            other.set("k", new)
        return row
    monkeypatch.setattr(store, "_fetch_one", fetch)
    got = store.get_partial_values([("k", RangeRequest(149_990, 150_010)),
                                    ("k", SuffixRequest(5))])
    assert fired and got == [new[149_990:150_010], new[-5:]]
    monkeypatch.undo()
    assert other.get("x") == intruder
    store.close()
    other.close()


def test_a_table_without_row_ids_has_its_ranges_cut_by_the_database(tmp_path: Path) -> None:
    # another program's zarr table made WITHOUT ROWID: no BLOB handles, same answers
    path = tmp_path / "norowid.db"
    big = os.urandom(3 * BLOB_HANDLE_BYTES)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE zarr (k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID")
        db.execute("INSERT INTO zarr VALUES (?, ?)", ("a/c/0", big))
    db.close()
    store = SQLStore(path, read_only=True)
    asks = [("a/c/0", r) for r in REQUESTS]
    assert store.get_partial_values(asks) == [apply_byte_request(big, r) for _, r in asks]
    assert store._blob_handles is False
    store.close()


# --- connections ------------------------------------------------------------------------

def test_single_operations_reuse_an_idle_connection(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "reuse.db")
    store.set("a/b", b"1")
    store.get("a/b")
    checkouts: list[object] = []
    event.listen(store.engine, "checkout", lambda *args: checkouts.append(args))
    for _ in range(50):
        assert store.get("a/b") == b"1"
        assert store.exists("a/b") and store.getsize("a/b") == 1
        assert list(store.list_dir("a/")) == ["b"]
        assert store.get_partial_values([("a/b", SuffixRequest(1))]) == [b"1"]
        with store.transaction(write=False):
            store.get("a/b")
        store.set("w", b"2")
    assert checkouts == []  # not one trip through the pool
    store.close()


def test_a_connection_comes_back_clean_after_a_failed_transaction(store: SQLStore) -> None:
    store.set("a", b"1")
    for write in (True, False):
        with pytest.raises(RuntimeError):
            with store.transaction(write=write):
                assert store.get("a") == b"1"
                if write:
                    store.set("a", b"2")
                raise RuntimeError("boom")
    assert store.get("a") == b"1"  # rolled back
    # a write by another connection is seen at once: no connection kept an old snapshot
    other = SQLStore(store._backend.display if store._backend.name == "sqlite" else PG_URL,
                     table=store.table)
    other.set("a", b"3")
    assert store.get("a") == b"3" and store.get_many(["a"]) == [b"3"]
    with store.transaction():
        store.set("a", b"4")
    assert other.get("a") == b"4"
    other.close()


def _child_uses_the_store(store: SQLStore, out) -> None:
    store.set("child", str(os.getpid()).encode())
    out.put(store.get("child"))


def test_a_forked_child_opens_its_own_connections(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "fork.db")
    store.set("parent", b"1")
    assert store.get("parent") == b"1"  # an idle connection exists at the fork
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_uses_the_store, args=(store, out))
    child.start()
    got = out.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0 and got == str(child.pid).encode()
    assert store.get("child") == got  # the parent's connections still work
    store.set("parent", b"2")
    assert store.get("parent") == b"2"
    store.close()


def test_closing_the_store_closes_its_idle_connections(tmp_path: Path) -> None:
    store = SQLStore(tmp_path / "one.db")
    store.set("k", b"v")
    assert store.get("k") == b"v"
    store.close()  # the last connection to close removes the -wal and -shm files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.db"]


# --- waiting for the write lock -----------------------------------------------------------

def test_a_write_waits_for_a_lock_released_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "lock.db"
    store = SQLStore(path, busy_timeout=5.0, retries=0)
    store.set("a", b"1")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    held = threading.Timer(0.3, holder.rollback)
    held.start()
    start = time.monotonic()
    store.set("a", b"2")
    waited = time.monotonic() - start
    held.join()
    holder.close()
    assert 0.25 <= waited < 4.0
    assert store.get("a") == b"2"
    # Other statements keep SQLite's busy handler: the lock wait did not leave it at 0.
    with store.transaction():
        cur = store._current_transaction().cur
        assert cur.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    store.close()


# --- settings of a SQLite file ----------------------------------------------------------

def _pragma(path: Path, name: str):
    with sqlite3.connect(path) as db:
        return db.execute(f"PRAGMA {name}").fetchone()[0]


def test_a_new_file_gets_16_kib_pages_and_wal(tmp_path: Path) -> None:
    for path in (tmp_path / "new.db", tmp_path / "empty.db"):
        if path.name == "empty.db":
            path.write_bytes(b"")  # an empty file is a new database too
        with SQLStore(path) as store:
            store.set("a", os.urandom(100_000))
            with store.transaction(write=False):
                cur = store._current_transaction().cur
                assert cur.execute("PRAGMA mmap_size").fetchone()[0] == 1 << 30
        assert _pragma(path, "page_size") == 16384
        assert _pragma(path, "journal_mode") == "wal"


def test_an_existing_file_keeps_its_page_size_and_journal(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # a file made elsewhere, with SQLite's defaults
        db.execute("PRAGMA page_size = 4096")
        db.execute("CREATE TABLE zarr(k TEXT PRIMARY KEY, v BLOB)")
    with SQLStore(path) as store:
        store.set("a", os.urandom(100_000))
        assert store.get("a") is not None
    assert _pragma(path, "page_size") == 4096
    assert _pragma(path, "journal_mode") == "delete"
