"""LMDBStore beyond the shared conformance suite (stores/lmdb.md): long keys against a
MemoryStore model, map growth, read-only and zarr-python 2 files. Forks and processes
racing, reading and being killed are in test_lmdb_processes.py.

Peers: MemoryStore (the model for ordering and listing), py-lmdb itself (files written
the way zarr-python 2 wrote them), apply_byte_request (byte ranges).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvzarr.stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest, apply_byte_request
from kvzarr.errors import (InvalidKeyError, ReadOnlyError, StoreError, StoreFullError,
                           UnsupportedOperationError)
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.lmdb.keymap import CUT, MAX_KEY_BYTES, stored_key
from kvzarr.stores.memory import MemoryStore

from .payloads import payload


@pytest.fixture
def store(tmp_path: Path):
    with LMDBStore(tmp_path / "data.lmdb", durability="none") as s:
        yield s


# --- files, options, basics -----------------------------------------------------------

def test_new_store_is_one_data_file_and_its_lock_file(tmp_path: Path) -> None:
    with LMDBStore(tmp_path / "sub" / "data.lmdb") as s:
        s.set("zarr.json", b"{}")
    assert sorted(os.listdir(tmp_path / "sub")) == ["data.lmdb", "data.lmdb-lock"]
    with LMDBStore(tmp_path / "sub" / "data.lmdb", read_only=True) as s:
        assert s.get("zarr.json") == b"{}"


def test_values_are_bytes_copied_out_of_the_transaction(store: LMDBStore) -> None:
    store.set("a", bytearray(b"abc"))
    store.set("b", memoryview(b"xyz"))
    with store.transaction(write=False):
        got = [store.get("a"), store.get_many(["b"])[0],
               store.get_partial_values([("a", RangeRequest(1, 3))])[0]]
    assert got == [b"abc", b"xyz", b"bc"]
    assert all(type(v) is bytes for v in got)


def test_partial_reads_match_apply_byte_request(store: LMDBStore) -> None:
    value = bytes(range(256)) * 40
    long_key = "g/" + "r" * 1500
    store.set("v", value)
    store.set(long_key, value)
    requests = [RangeRequest(0, 0), RangeRequest(5, 17), RangeRequest(10_000, 20_000),
                OffsetRequest(0), OffsetRequest(10_239), OffsetRequest(50_000),
                SuffixRequest(0), SuffixRequest(3), SuffixRequest(99_999)]
    for key in ("v", long_key):
        got = store.get_partial_values([(key, r) for r in requests] + [("missing", None)])
        assert got == [apply_byte_request(value, r) for r in requests] + [None]
        assert store.getsize(key) == len(value) and store.exists(key)


@pytest.mark.parametrize("bad", [
    {"durability": "sync"}, {"durability": None}, {"map_size_start": 0},
    {"map_size_max": -1}, {"map_size_start": 1 << 30, "map_size_max": 1 << 20},
    {"max_readers": True},
])
def test_bad_options_are_refused(tmp_path: Path, bad: dict) -> None:
    with pytest.raises(StoreError) as info:
        LMDBStore(tmp_path / "x.lmdb", **bad)
    assert info.value.field in bad
    assert not (tmp_path / "x.lmdb").exists()


@pytest.mark.parametrize("durability,flags", [
    ("full", (True, True)), ("relaxed", (True, False)), ("none", (False, False))])
def test_durability_sets_lmdb_flags(tmp_path: Path, durability: str, flags: tuple) -> None:
    with LMDBStore(tmp_path / "x.lmdb", durability=durability) as s:
        s.set("k", b"v")
        s.flush()
        got = s._shared.env.flags()
        assert (got["sync"], got["metasync"]) == flags
    assert LMDBStore.__init__.__kwdefaults__["durability"] == "full"


def test_same_file_twice_in_one_process_shares_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "x.lmdb"
    with LMDBStore(path) as a, LMDBStore(str(path)) as b:
        assert a._shared is b._shared
        a.set("k", b"1")
        assert b.get("k") == b"1"
        with pytest.raises(StoreError) as info:
            LMDBStore(path, durability="none")
        assert info.value.field == "durability"
    with LMDBStore(path, read_only=True) as ro:
        with LMDBStore(path) as rw:         # takes over the read-only environment
            assert rw._shared is ro._shared
            rw.set("k2", b"2")
        assert ro.get("k") == b"1" and ro.get("k2") == b"2"
        with pytest.raises(ReadOnlyError):
            ro.set("k", b"x")
    with LMDBStore(path) as again:          # everything closed: opens afresh
        assert again.get("k") == b"1"


def test_closed_store_refuses_operations(tmp_path: Path) -> None:
    s = LMDBStore(tmp_path / "x.lmdb")
    s.close()
    with pytest.raises(StoreError):
        s.get("a")
    with pytest.raises(StoreError):
        s.set("a", b"1")


# --- read-only and zarr-python 2 files ------------------------------------------------

def test_read_only_store_refuses_every_write(tmp_path: Path) -> None:
    path = tmp_path / "x.lmdb"
    with LMDBStore(path) as s:
        s.set_many([("a/b", b"1"), ("c", b"2")])
    with LMDBStore(path, read_only=True) as ro:
        for write in (lambda: ro.set("a/b", b"x"), lambda: ro.set_many([("n", b"1")]),
                      lambda: ro.erase("a/b"), lambda: ro.erase_values(["c"]),
                      lambda: ro.erase_prefix(""),
                      lambda: ro.set_partial_values([("c", 0, b"z")]),
                      lambda: ro.transaction().__enter__()):
            with pytest.raises(ReadOnlyError):
                write()
        assert {k: ro.get(k) for k in ro.list()} == {"a/b": b"1", "c": b"2"}
        with ro.transaction(write=False):
            assert ro.get_many(["a/b", "c", "zz"]) == [b"1", b"2", None]


def test_read_only_open_of_a_missing_store_fails(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as info:
        LMDBStore(tmp_path / "nothing.lmdb", read_only=True)
    assert info.value.path is not None
    assert not (tmp_path / "nothing.lmdb").exists()


def test_opens_a_directory_environment_written_like_zarr_python_2(tmp_path: Path) -> None:
    # zarr-python 2's LMDBStore: lmdb.open(path, map_size=2**40, meminit=False,
    # writemap=<linux>, metasync=False, sync=False, map_async=False), subdir default
    # True; key.encode('ascii') -> raw value.
    path = tmp_path / "old.lmdb"
    written = {".zgroup": b'{"zarr_format": 2}', "arr/.zarray": b'{"chunks": [2]}',
               "arr/0": bytes(range(16)), "arr/1": b"\x00" * 16, "arr/.zattrs": b"{}"}
    env = lmdb.open(str(path), map_size=2 ** 30, meminit=False, writemap=True,
                    metasync=False, sync=False, map_async=False, max_spare_txns=2)
    with env.begin(write=True, buffers=True) as txn:
        for k, v in written.items():
            txn.put(k.encode("ascii"), v)
    env.close()
    assert sorted(os.listdir(path)) == ["data.mdb", "lock.mdb"]

    with LMDBStore(path, read_only=True) as s:
        assert list(s.list()) == sorted(written)
        assert list(s.list_dir("")) == [".zgroup", "arr/"]
        assert list(s.list_dir("arr/")) == [".zarray", ".zattrs", "0", "1"]
        assert s.get_many(list(written)) == list(written.values())
    with LMDBStore(path) as s:                       # and writable, as a directory env
        s.set("arr/2", b"new")
        s.erase("arr/1")
    assert sorted(os.listdir(path)) == ["data.mdb", "lock.mdb"]
    env = lmdb.open(str(path), readonly=True)
    with env.begin() as txn:
        assert txn.get(b"arr/2") == b"new" and txn.get(b"arr/1") is None
        assert txn.get(b"arr/0") == bytes(range(16))
    env.close()


# --- long keys ------------------------------------------------------------------------

def test_a_2000_byte_key_is_stored_listed_and_erased(store: LMDBStore) -> None:
    long_key = "deep/" + "/".join(f"level{i:04d}" for i in range(200))
    long_key = long_key[:2000].rstrip("/")
    assert len(long_key.encode()) == 2000
    raw_txn = store._shared.env.begin(write=True)
    try:
        with pytest.raises(lmdb.BadValsizeError):   # why the mapping exists
            raw_txn.put(long_key.encode(), b"x")
    finally:
        raw_txn.abort()
    store.set(long_key, b"long value")
    store.set("deep/level0000/short", b"short")
    store.set("deep/zz", b"after")
    assert store.get(long_key) == b"long value"
    assert list(store.list()) == sorted([long_key, "deep/level0000/short", "deep/zz"])
    far = long_key[:long_key.index("/", 1500) + 1]        # a prefix longer than CUT
    assert list(store.list_prefix(far)) == [long_key]
    assert list(store.list_dir(far)) == [long_key[len(far):].split("/")[0] + "/"]
    assert list(store.list_dir("deep/")) == ["level0000/", "zz"]
    deepest = long_key.rsplit("/", 1)[0] + "/"
    assert list(store.list_dir(deepest)) == [long_key.rsplit("/", 1)[1]]
    assert list(store.list_prefix(deepest)) == [long_key]
    # Stored under a 511-byte key with the real key in its value header.
    raw = store._shared.env.begin().get(stored_key(long_key.encode()))
    assert len(stored_key(long_key.encode())) == MAX_KEY_BYTES
    assert raw[4:2004] == long_key.encode() and raw.endswith(b"long value")
    store.erase_prefix("deep/level0000/level0001/")
    assert store.get(long_key) is None
    assert list(store.list()) == ["deep/level0000/short", "deep/zz"]
    store.set(long_key, b"again")
    store.erase(long_key)
    assert not store.exists(long_key) and store.getsize(long_key) is None


def test_long_keys_with_one_head_list_in_order(store: LMDBStore) -> None:
    head = "h/" + "x" * (CUT - 2)                    # exactly CUT bytes
    keys = [head, head + "a", head + "/" + "q" * 600, head + "b" * 40,
            head + "a" * 40 + "/1", head + "\U0001F600" * 10, head + "a" * 200 + "/z",
            head + "0", head + "a" * 34]
    for i, k in enumerate(keys):
        store.set(k, str(i).encode())
    assert list(store.list()) == sorted(keys)
    model = MemoryStore()
    model.set_many([(k, b"") for k in keys])
    for prefix in ("", "h/", head + "/", head + "a" * 40 + "/", head + "a" * 200 + "/"):
        assert list(store.list_prefix(prefix)) == list(model.list_prefix(prefix)), prefix
        assert list(store.list_dir(prefix)) == list(model.list_dir(prefix)), prefix
    assert list(store.list_dir("h/")) == ["x" * (CUT - 2)] + sorted(
        {k[2:].split("/")[0] + ("/" if "/" in k[2:] else "") for k in keys[1:]})
    store.erase_prefix(head + "a" * 40 + "/")
    assert head + "a" * 40 + "/1" not in list(store.list())
    assert store.get(head + "a" * 200 + "/z") == b"6"


# Keys built around the 478-byte cut, so that heads, groups and '/' at every side of
# the cut all occur. A multi-byte character lets the cut fall inside one.
_STEMS = ["s/" + "a" * n for n in (CUT - 12, CUT - 5, CUT - 4, CUT - 3, CUT - 2, CUT + 1)]
_FILLERS = ["", "b" * 30, "/" + "b" * 60, "a" * 100]   # push keys past 511 bytes or not
_bits = st.text(alphabet="ab/é", max_size=6)


@st.composite
def _keys(draw) -> str:
    key = (draw(st.sampled_from(_STEMS)) + draw(_bits) + draw(st.sampled_from(_FILLERS))
           + draw(_bits))
    return "/".join(seg for seg in key.split("/") if seg)


def _prefixes(keys: list[str]) -> list[str]:
    out = {""}
    for k in keys:
        parts = k.split("/")
        for i in range(1, len(parts)):
            out.add("/".join(parts[:i]) + "/")
    return sorted(out)


@settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(st.sampled_from(["set", "set", "set", "erase", "erase_prefix"]),
                              _keys(), st.integers(0, 3)), min_size=1, max_size=30))
def test_long_key_mapping_behaves_like_a_sorted_dict(tmp_path_factory, ops) -> None:
    path = tmp_path_factory.mktemp("model") / "m.lmdb"
    model = MemoryStore()
    with LMDBStore(path, durability="none") as s:
        for op, key, n in ops:
            if op == "set":
                for target in (s, model):
                    target.set(key, key.encode()[-5:] + bytes([n]))
            elif op == "erase":
                s.erase(key)
                model.erase(key)
            else:
                parts = key.split("/")
                prefix = "/".join(parts[:n % len(parts)]) + "/" if n % len(parts) else ""
                s.erase_prefix(prefix)
                model.erase_prefix(prefix)
        keys = list(model.list())
        assert list(s.list()) == keys
        assert s.get_many(keys) == model.get_many(keys)
        for prefix in _prefixes(keys + [k for _, k, _ in ops]):
            assert list(s.list_prefix(prefix)) == list(model.list_prefix(prefix)), prefix
            assert list(s.list_dir(prefix)) == list(model.list_dir(prefix)), prefix


# --- transactions, map growth ---------------------------------------------------------

def test_transaction_is_atomic_and_reads_its_own_writes(store: LMDBStore) -> None:
    store.set("a", b"old")
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.set("a", b"new")
            store.set("b", b"new")
            assert store.get("a") == b"new"
            assert list(store.list()) == ["a", "b"]
            raise RuntimeError("abort")
    assert store.get("a") == b"old" and store.get("b") is None
    with store.transaction(write=False):
        with pytest.raises(UnsupportedOperationError):
            store.set("a", b"x")


def test_map_grows_inside_a_transaction_and_replays_its_writes(tmp_path: Path) -> None:
    with LMDBStore(tmp_path / "x.lmdb", durability="none", map_size_start=64 << 10) as s:
        start = s.map_size
        s.set("before", b"committed")
        with s.transaction():
            # Each value is below the pre-grow threshold, so growth happens on the
            # MapFullError of a put and the writes before it are replayed.
            for i in range(300):
                s.set(f"v/{i:04d}", payload("t", i, 20_000))
                if i % 50 == 0:
                    assert s.get("v/0000") == payload("t", 0, 20_000)
            s.erase("before")
            assert s.get("before") is None
        assert s.map_size > 16 * start
        assert list(s.list_prefix("v/")) == [f"v/{i:04d}" for i in range(300)]
        assert all(s.get(f"v/{i:04d}") == payload("t", i, 20_000) for i in range(0, 300, 7))
        s.set_many([(f"w/{i}", payload("w", i, 5000)) for i in range(2000)])   # pre-grows
        assert s.get("w/1999") == payload("w", 1999, 5000)


def test_full_map_at_its_cap_raises_store_full_and_keeps_the_old_state(tmp_path: Path) -> None:
    with LMDBStore(tmp_path / "x.lmdb", durability="none", map_size_start=256 << 10,
                   map_size_max=1 << 20) as s:
        s.set("keep", b"old")
        with pytest.raises(StoreFullError) as info:
            with s.transaction():
                s.set("keep", b"new")
                for i in range(100):
                    s.set(f"big/{i}", payload("b", i, 30_000))
        assert "map_size_max" in str(info.value)
        assert s.get("keep") == b"old" and list(s.list_prefix("big/")) == []
        with pytest.raises(StoreFullError):
            s.set_many([(f"big/{i}", payload("b", i, 30_000)) for i in range(100)])
        s.set("small", b"still works")
        assert s.get("small") == b"still works"


def test_threads_each_get_their_own_write_transaction(store: LMDBStore) -> None:
    store.set("n", b"0")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(100):
                with store.transaction():
                    store.set("n", str(int(store.get("n")) + 1).encode())
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.get("n") == b"400"


def test_growth_waits_for_reader_threads(tmp_path: Path) -> None:
    with LMDBStore(tmp_path / "x.lmdb", durability="none", map_size_start=64 << 10) as s:
        s.set_many([(f"r/{i}", b"%d" % i) for i in range(50)])
        stop = threading.Event()
        seen: list[int] = []

        def read() -> None:
            while not stop.is_set():
                with s.transaction(write=False):
                    vals = s.get_many([f"r/{i}" for i in range(50)])
                seen.append(len([v for v in vals if v is not None]))
        reader = threading.Thread(target=read)
        reader.start()
        try:
            for i in range(40):
                s.set(f"g/{i}", payload("g", i, 40_000))
        finally:
            stop.set()
            reader.join()
        assert set(seen) == {50} and s.map_size >= 1 << 20


def test_growth_lets_a_thread_that_holds_a_transaction_go_on(tmp_path: Path) -> None:
    # Thread W must grow the map and waits for the reader's transaction; the reader then
    # reads through a second store object on the same file. Holding that read back
    # until the resize would deadlock, so the scenario runs in a thread with a timeout.
    path = tmp_path / "x.lmdb"
    a = LMDBStore(path, durability="none", map_size_start=64 << 10)
    b = LMDBStore(path, durability="none")
    a.set("x", b"1")
    results: list[object] = []

    def grow() -> None:
        a.set_many([(f"g/{i}", payload("g", i, 40_000)) for i in range(30)])
        results.append("grown")

    def scenario() -> None:
        writer = threading.Thread(target=grow, daemon=True)
        with a.transaction(write=False):
            writer.start()
            deadline = time.monotonic() + 20
            while not a._shared.gate._resizing and time.monotonic() < deadline:
                time.sleep(0.001)
            results.append(a._shared.gate._resizing)
            results.append(b.get("x"))
        writer.join(20)
    runner = threading.Thread(target=scenario, daemon=True)
    runner.start()
    runner.join(40)
    assert not runner.is_alive(), "deadlock: a read waited for a resize waiting for it"
    assert results == [True, b"1", "grown"]
    assert a.get("g/29") == payload("g", 29, 40_000)
    a.close()
    b.close()


def test_pickled_store_reopens_in_another_process(tmp_path: Path) -> None:
    import pickle
    with LMDBStore(tmp_path / "x.lmdb", durability="relaxed") as s:
        s.set("k", b"v")
        clone = pickle.loads(pickle.dumps(s))       # same process: shares the env
        assert clone is not s and clone._shared is s._shared and clone.get("k") == b"v"
        assert clone.durability == "relaxed"
        clone.close()
        assert s.get("k") == b"v"


def test_invalid_keys_are_refused_before_lmdb(store: LMDBStore) -> None:
    for bad in ("", "a//b", "/a", "a\x00b", "../x"):
        with pytest.raises(InvalidKeyError):
            store.set(bad, b"x")
    assert list(store.list()) == []


def test_digest_collision_is_reported_not_served(store: LMDBStore) -> None:
    # Forge a collision: put a different real key under the stored key of `key`.
    key = "c/" + "q" * 700
    other = "c/" + "q" * 699 + "r"
    sk = stored_key(key.encode())
    with store._shared.env.begin(write=True) as txn:
        txn.put(sk, len(other.encode()).to_bytes(4, "big") + other.encode() + b"v")
    with pytest.raises(StoreError):
        store.get(key)
    assert hashlib.sha256(key.encode()).digest() == sk[CUT + 1:]
