"""``Store.append`` beyond the conformance suite: a model-based property test on every
store that appends, the filesystem store's append marker (a killed append, other hard
links, processes appending and reading at once, a full disk), and the SQL store's
appendable layout (what an append writes, the upgrade from schema 2, legacy tables).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvzarr.errors import (AppendConflictError, InvalidKeyError, SchemaVersionError,
                           StoreFullError, UnsupportedOperationError)
from kvzarr.stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest
from kvzarr.stores.filesystem import APPEND_MARKER, APPENDS_XATTR, TEMP_MARKER, FilesystemStore
from kvzarr.stores.sql import SCHEMA_VERSION, SQLStore, migrations_dir, upgrade

from .conftest import BACKENDS
from .test_disk_full import tiny_disk  # noqa: F401  (a fixture)
from .test_sql import PG_URL, _drop_pg_tables, _zarr_python_2_file, _zarr_sqlite_file

APPENDING = [b for b in sorted(BACKENDS) if b in ("memory", "filesystem", "sql", "postgresql")]


# --- the contract against a model ------------------------------------------------------

_requests = st.one_of(
    st.none(),
    st.builds(lambda a, n: RangeRequest(a, a + n), st.integers(0, 300), st.integers(0, 300)),
    st.builds(OffsetRequest, st.integers(0, 300)),
    st.builds(SuffixRequest, st.integers(0, 300)))
_ops = st.lists(st.one_of(
    st.tuples(st.just("set"), st.sampled_from("abc"), st.binary(max_size=120)),
    st.tuples(st.just("append"), st.sampled_from("abc"), st.binary(max_size=90)),
    st.tuples(st.just("stale append"), st.sampled_from("abc"), st.binary(min_size=1,
                                                                         max_size=9)),
    st.tuples(st.just("erase"), st.sampled_from("abc"), st.just(b"")),
    st.tuples(st.just("read"), st.sampled_from("abc"), st.lists(_requests, max_size=5))),
    max_size=25)


@pytest.fixture(params=APPENDING)
def appending_store(request, tmp_path):
    """One store per test (not per example: each example starts by erasing it)."""
    factory = BACKENDS[request.param](tmp_path)
    try:
        yield factory.make()
    finally:
        factory.close_all()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=_ops)
def test_appends_behave_like_a_dict_of_bytes(appending_store, ops):
    store = appending_store
    store.erase_prefix("")
    model: dict[str, bytes] = {}
    for op, key, arg in ops:
        k = f"m/{key}"
        if op == "set":
            store.set(k, arg)
            model[k] = arg
        elif op == "append":
            if k in model:
                store.append(k, arg, expected_size=len(model[k]))
                model[k] += arg
            else:
                with pytest.raises(AppendConflictError):
                    store.append(k, arg, expected_size=0)
        elif op == "stale append":      # a size read before someone else wrote
            with pytest.raises(AppendConflictError):
                store.append(k, arg, expected_size=len(model.get(k, b"")) + len(arg))
        elif op == "erase":
            store.erase(k)
            model.pop(k, None)
        else:
            want = model.get(k)
            got = store.get_partial_values([(k, r) for r in arg])
            assert got == [None if want is None else _cut(want, r) for r in arg]
        assert store.get(k) == model.get(k)
        assert store.getsize(k) == (None if k not in model else len(model[k]))
    assert dict(zip(sorted(model), store.get_many(sorted(model)))) == model
    assert list(store.list_prefix("m/")) == sorted(model)


def _cut(value: bytes, r) -> bytes:
    if r is None:
        return value
    if isinstance(r, RangeRequest):
        return value[r.start:r.end]
    if isinstance(r, OffsetRequest):
        return value[r.offset:]
    return value[max(0, len(value) - r.suffix):] if r.suffix else b""


# --- filesystem: the append marker ------------------------------------------------------

def _killed_append(root: Path, key: str, torn: bytes) -> Path:
    """What a writer killed in the middle of appending leaves: its marker (a hard link
    naming the size before the append) and part of the new bytes."""
    path = root / key
    marker = path.with_name(f".{path.name}{APPEND_MARKER}{path.stat().st_size}")
    if hasattr(os, "setxattr"):          # an appender marks the root before its marker
        os.setxattr(root, APPENDS_XATTR, b"1")
    os.link(path, marker)
    with open(path, "ab") as f:
        f.write(torn)
    return marker


def test_a_killed_append_is_served_as_the_old_value_then_repaired(tmp_path):
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set("a/k", b"0123456789")
    store.append("a/k", b"abc", expected_size=10)
    marker = _killed_append(root, "a/k", b"TORN-BYTES")
    for s in (store, FilesystemStore(root, read_only=True)):
        assert s.get("a/k") == b"0123456789abc"
        assert s.getsize("a/k") == 13
        assert s.get_partial_values([("a/k", SuffixRequest(4)), ("a/k", OffsetRequest(11)),
                                     ("a/k", RangeRequest(9, 99))]) == [b"9abc", b"bc",
                                                                        b"9abc"]
        assert s.get_many(["a/k"]) == [b"0123456789abc"]
        buffer = bytearray(2 * 13)          # a bulk read into place sees the old value
        assert s.read_many_into(["a/k", "a/k"], buffer, 13) == [13, 13]
        assert bytes(buffer) == b"0123456789abc" * 2
        assert s.read_many_into(["a/k"], bytearray(23), 23) == [13]
        assert list(s.list()) == ["a/k"] and list(s.list_dir("a/")) == ["k"]
    assert (root / "a" / "k").stat().st_size == 23        # the file itself is torn
    with pytest.raises(AppendConflictError):              # the torn size is not a size
        store.append("a/k", b"x", expected_size=23)
    assert not marker.exists()                            # ... but the file was repaired
    assert (root / "a" / "k").read_bytes() == b"0123456789abc"
    store.append("a/k", b"d", expected_size=13)
    assert store.get("a/k") == b"0123456789abcd"
    assert sorted(os.listdir(root / "a")) == ["k"]


@pytest.mark.parametrize("how", ["set", "erase", "erase_prefix"])
def test_writes_over_a_killed_append_drop_its_marker(tmp_path, how):
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set_many([("a/k", b"old value"), ("a/other", b"o")])
    marker = _killed_append(root, "a/k", b"torn")
    {"set": lambda: store.set("a/k", b"new"), "erase": lambda: store.erase("a/k"),
     "erase_prefix": lambda: store.erase_prefix("a/")}[how]()
    assert not marker.exists()              # it would keep the old file's bytes alive
    assert store.get("a/k") == (b"new" if how == "set" else None)
    if how == "set":
        store.append("a/k", b"!", expected_size=3)
        assert store.get("a/k") == b"new!"


def test_marker_and_temporary_names_are_not_keys(tmp_path):
    store = FilesystemStore(tmp_path / "d")
    for key in (f"a/.k{APPEND_MARKER}3", f"x{APPEND_MARKER}", f"a/b{TEMP_MARKER}1"):
        with pytest.raises(InvalidKeyError):
            store.set(key, b"v")
        with pytest.raises(InvalidKeyError):
            store.get(key)
    store.set("a/my.kvzarr-file", b"kept")                # a name merely alike is a key
    assert list(store.list()) == ["a/my.kvzarr-file"]


def _has_xattrs(directory: Path) -> bool:
    if not hasattr(os, "setxattr"):
        return False
    probe = directory / "xattr-probe"
    probe.mkdir()
    try:
        os.setxattr(probe, "user.probe", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.rmdir()


def test_the_first_append_marks_the_root_for_good(tmp_path):
    if not _has_xattrs(tmp_path):
        pytest.skip("no extended attributes here: bulk reads always check link counts")
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set_many([("a/x", b"abcd"), ("b", b"v")])
    with pytest.raises(OSError):
        os.getxattr(root, APPENDS_XATTR)                   # no append, no mark
    store.append("b", b"w", expected_size=1)
    assert os.getxattr(root, APPENDS_XATTR) == b"1"        # made before the marker
    assert sorted(os.listdir(root)) == ["a", "b"]          # nothing a reader can see
    store.erase_prefix("")
    assert os.getxattr(root, APPENDS_XATTR) == b"1" and list(store.list()) == []


def test_a_bulk_read_without_link_counts_reads_again_when_an_append_began(tmp_path,
                                                                           monkeypatch):
    """Where no append was ever made, read_many_into reads each file without its link
    count; an append that begins during the read (it flags the root before it makes its
    marker) has the files read again with their link counts: a torn append of exactly
    the requested length is never served."""
    root = tmp_path / "d"
    store, other = FilesystemStore(root), FilesystemStore(root)
    keys = [f"a/{i}" for i in range(10)] + ["a", "a/missing"]
    store.set_many([(k, b"0123456789abc") for k in keys[:10]] + [("a/3", b"0123456789"),
                                                                   ("b", b"1")])
    plain = FilesystemStore._read_run_unlinked
    calls = []

    def racing(self, *args):
        if not calls:          # another writer appends, and is killed, during the read
            other.append("b", b"2", expected_size=1)
            _killed_append(root, "a/3", b"abc")            # 13 bytes, 10 of them the value
        calls.append(args[3:])
        return plain(self, *args)
    monkeypatch.setattr(FilesystemStore, "_read_run_unlinked", racing)
    buffer = bytearray(13 * len(keys))
    sizes = store.read_many_into(keys, buffer, 13)
    assert calls == [(0, len(keys))]                       # the unlinked read ran ...
    assert sizes == [13, 13, 13, 10] + [13] * 6 + [None, None]   # ... and was not used
    assert bytes(buffer[:13]) == b"0123456789abc"
    calls.append("no more")                                # flagged: link counts from now
    assert store.read_many_into(keys, buffer, 13) == sizes and calls[-1] == "no more"


def test_an_append_meeting_a_set_half_done_starts_again(tmp_path):
    """A set gives the file it replaces a second name (its grave) just before its
    rename: an appender that meets the file then waits for the new one, and gives up
    with a conflict if the rename never comes (not "other hard links")."""
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set("k", b"value")
    grave = root / f".k{TEMP_MARKER}{'0' * 32}"
    os.link(root / "k", grave)                   # a set stopped between link and rename
    with pytest.raises(AppendConflictError, match="again and again"):
        store.append("k", b"!", expected_size=5)
    assert store.get("k") == b"value"
    os.unlink(grave)                             # the set's sync thread took it away
    store.append("k", b"!", expected_size=5)
    assert store.get("k") == b"value!"


def test_a_file_with_other_hard_links_is_not_appended_in_place(tmp_path):
    root = tmp_path / "d"
    store = FilesystemStore(root)
    store.set("k", b"shared")
    os.link(root / "k", tmp_path / "snapshot")
    with pytest.raises(UnsupportedOperationError, match="hard links"):
        store.append("k", b"!", expected_size=6)
    assert (tmp_path / "snapshot").read_bytes() == b"shared" == store.get("k")
    assert store.getsize("k") == 6
    store.set("k", b"own")                                # replaced: its own file again
    store.append("k", b"!", expected_size=3)
    assert store.get("k") == b"own!" and (tmp_path / "snapshot").read_bytes() == b"shared"


def test_fsync_appends(tmp_path):
    store = FilesystemStore(tmp_path / "d", fsync=True)
    store.set("k", b"a")
    for i in range(5):
        store.append("k", bytes([66 + i]), expected_size=1 + i)
    assert store.get("k") == b"aBCDEF"
    assert sorted(os.listdir(tmp_path / "d")) == ["k"]


def _append_records(root: str, worker: int, n: int) -> None:
    store = FilesystemStore(root)
    for i in range(n):
        record = f"<{worker}:{i}:{'x' * (37 * worker + i)}>".encode()
        while True:                   # the compare-and-append loop of any appender
            size = store.getsize("log")
            try:
                store.append("log", record, expected_size=size)
                break
            except AppendConflictError:
                continue


def _read_log(root: str, stop, out) -> None:
    store = FilesystemStore(root, read_only=True)
    bad = reads = 0
    while not stop.is_set():
        value = store.get("log")
        reads += 1
        # only whole records, each ending the value where the next starts
        if not value.startswith(b"log") or (len(value) > 3 and not value.endswith(b">")) \
                or value.count(b"<") != value.count(b">"):
            bad += 1
    out.put((bad, reads))


def test_processes_append_at_once_and_a_reader_never_sees_half_a_record(tmp_path):
    root = str(tmp_path / "d")
    FilesystemStore(root).set("log", b"log")
    ctx = mp.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    reader = ctx.Process(target=_read_log, args=(root, stop, out))
    reader.start()
    writers = [ctx.Process(target=_append_records, args=(root, w, 150)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(60)
        assert p.exitcode == 0
    stop.set()
    bad, reads = out.get(timeout=30)
    reader.join(30)
    assert bad == 0 and reads > 10
    value = FilesystemStore(root).get("log")
    records = value[3:].split(b">")[:-1]
    assert sorted(records) == sorted(f"<{w}:{i}:{'x' * (37 * w + i)}".encode()
                                     for w in range(4) for i in range(150))


def test_a_full_disk_during_an_append_keeps_the_old_value(tiny_disk):  # noqa: F811
    store = FilesystemStore(tiny_disk / "d")
    store.set("k", b"old")
    with pytest.raises(StoreFullError):
        store.append("k", os.urandom(4 << 20), expected_size=3)
    assert store.get("k") == b"old" and (tiny_disk / "d" / "k").stat().st_size == 3
    assert sorted(os.listdir(tiny_disk / "d")) == ["k"]
    store.append("k", b"+", expected_size=3)
    assert store.get("k") == b"old+"


def test_a_full_disk_during_a_sqlite_append_keeps_the_old_value(tiny_disk):  # noqa: F811
    store = SQLStore(tiny_disk / "d.db")
    store.set("k", b"old")
    with pytest.raises(StoreFullError):
        store.append("k", os.urandom(4 << 20), expected_size=3)
    assert store.get("k") == b"old" and store.getsize("k") == 3
    store.append("k", b"+", expected_size=3)
    assert store.get("k") == b"old+"


# --- SQL: the appendable layout ---------------------------------------------------------

def test_a_sqlite_append_writes_only_the_new_bytes(tmp_path):
    store = SQLStore(tmp_path / "x.db")
    big = os.urandom(4 << 20)
    store.set("k", big)
    store.append("k", b"first", expected_size=len(big))   # moves the value once
    statements: list[str] = []
    conn = store._backend.acquire()
    conn.set_trace_callback(statements.append)
    store._backend.release(conn)
    with store._reading() as cur:
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cur.fetchall()
    wal = Path(f"{tmp_path / 'x.db'}-wal")
    size = len(big) + 5
    for i in range(20):
        store.append("k", b"%04d" % i * 256, expected_size=size)    # 1 KiB each
        size += 1024
    writes = [s for s in statements if s.split()[0] in ("INSERT", "UPDATE", "DELETE")]
    assert writes and all("||" not in s for s in writes)
    assert all(s.startswith('INSERT INTO "kvzarr_segments"') for s in writes)
    # 20 KiB appended to a 4 MiB value: the WAL holds a few pages per append, not the value
    assert wal.stat().st_size < 20 * 4 * 16384
    assert store.get("k") == big + b"first" + b"".join(b"%04d" % i * 256 for i in range(20))


def _sql_targets():
    out = ["sqlite"]
    if PG_URL:
        out.append("postgresql")
    return out


@pytest.fixture(params=_sql_targets())
def sql_target(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'v2.db'}", "kvzarr"
    else:
        table = f"t_{uuid.uuid4().hex[:12]}"
        yield PG_URL, table
        _drop_pg_tables(PG_URL, table)


def test_a_schema_2_store_is_upgraded_to_appendable_values(sql_target):
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    url, table = sql_target
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg2://", 1))
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["table"] = table
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002")
        conn.exec_driver_sql(f"INSERT INTO \"{table}\" (k, v) VALUES ('a/c/0', "
                             + ("decode('0102', 'hex'))" if url.startswith("postgresql")
                                else "x'0102')"))
    engine.dispose()
    with pytest.raises(SchemaVersionError, match="schema version 2"):
        SQLStore(url, table=table)
    assert upgrade(url, table=table) == (2, SCHEMA_VERSION)
    with SQLStore(url, table=table) as store:
        assert store.capabilities.appends
        assert store.get("a/c/0") == b"\x01\x02"
        store.append("a/c/0", b"\x03", expected_size=2)
        assert store.get("a/c/0") == b"\x01\x02\x03"
    with SQLStore(url, table=table, read_only=True) as store:
        assert store.get_partial_values([("a/c/0", SuffixRequest(2))]) == [b"\x02\x03"]


@pytest.mark.parametrize("make", [_zarr_python_2_file, _zarr_sqlite_file])
def test_legacy_tables_get_no_appends(tmp_path, make):
    path = tmp_path / "legacy.db"
    data = make(path)
    with sqlite3.connect(path) as db:
        before = sorted(db.execute("SELECT name FROM sqlite_master"))
    with SQLStore(path) as store:
        assert not store.capabilities.appends
        key = sorted(data)[-1]
        with pytest.raises(UnsupportedOperationError):
            store.append(key, b"x", expected_size=len(data[key]))
        store.set("e", b"")                  # an empty value there is just that
        assert store.get("e") == b"" and store.getsize("e") == 0
        assert store.get(key) == data[key]
    with sqlite3.connect(path) as db:
        assert sorted(db.execute("SELECT name FROM sqlite_master")) == before
