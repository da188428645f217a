"""What ZarrStore promises beyond zarr's StoreTests: transactions, group commit, pickling,
key checks, opening read-only and writable in one process, and the lazy import."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest  # noqa: E402
from zarr.core.buffer import cpu, default_buffer_prototype  # noqa: E402

import kvzarr  # noqa: E402
from kvzarr.errors import InvalidKeyError, NotPicklableError, ReadOnlyError  # noqa: E402
from kvzarr.stores import open_store  # noqa: E402
from kvzarr.stores.memory import MemoryStore  # noqa: E402
from kvzarr.zarr_store import ZarrStore  # noqa: E402

from .conftest import BACKEND_NAMES, make_target  # noqa: E402

PROTO = default_buffer_prototype()


def buf(data: bytes) -> cpu.Buffer:
    return cpu.Buffer.from_bytes(data)


def kv_of(target):
    """A second, independent kvzarr handle on the target's data."""
    return target if isinstance(target, kvzarr.Store) else open_store(target)


def test_importing_kvzarr_does_not_import_zarr() -> None:
    code = ("import sys, kvzarr; assert 'zarr' not in sys.modules, 'imported early'; "
            "kvzarr.ZarrStore; assert 'zarr' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_only_the_adapter_imports_zarr() -> None:
    from tests.test_layers import SOURCES, imported_modules, module_name
    importers = sorted(module_name(p) for p in SOURCES
                       if any(m == "zarr" or m.startswith("zarr.") for m in imported_modules(p)))
    assert importers and all(m.startswith("kvzarr.zarr_store") for m in importers), importers


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_transaction_block_commits_all_zarr_writes_or_none(backend: str, tmp_path: Path
                                                           ) -> None:
    target = make_target(backend, tmp_path)
    zs = ZarrStore(target)
    if not zs.store.capabilities.transactional:
        pytest.skip("the store only groups the writes of a transaction")
    root = zarr.open_group(zs, mode="w")
    with pytest.raises(RuntimeError, match="stop"):
        with zs.transaction():
            a = root.create_array("a", shape=(40,), chunks=(4,), dtype="int32")
            a[:] = np.arange(40, dtype="int32")
            # zarr's loop thread reads what the block wrote
            assert (a[:] == np.arange(40)).all()
            raise RuntimeError("stop")
    assert "a" not in zarr.open_group(zs, mode="r")
    assert not any(k.startswith("a/") for k in zs.store.list())
    with zs.transaction():
        a = root.create_array("a", shape=(40,), chunks=(4,), dtype="int32")
        a[:] = np.arange(40, dtype="int32")
    assert (zarr.open_array(zs, path="a", mode="r")[:] == np.arange(40)).all()
    zs.close()


def test_transaction_block_is_invisible_to_another_handle_until_it_commits(
        tmp_path: Path) -> None:
    path = str(tmp_path / "x.sqlite")
    zs = ZarrStore(path)
    zs.store.set("x", b"")                # the file exists: open a reader on it
    other = open_store(path, mode="r")
    with zs.transaction():
        zarr.create_array(zs, name="a", shape=(8,), chunks=(2,), dtype="f8")[:] = 1.5
        assert other.get("a/zarr.json") is None
    assert other.get("a/zarr.json") is not None
    assert (zarr.open_array(ZarrStore(path, read_only=True), path="a")[:] == 1.5).all()
    other.close()
    zs.close()


def test_transaction_block_covers_writes_from_other_threads(tmp_path: Path) -> None:
    """dask writes chunks from its worker threads: they join the open block."""
    from concurrent.futures import ThreadPoolExecutor
    path = str(tmp_path / "x.lmdb")
    zs = ZarrStore(path)
    a = zarr.create_array(zs, name="a", shape=(64,), chunks=(8,), dtype="int64")
    with pytest.raises(RuntimeError):
        with zs.transaction():
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda i: a.__setitem__(slice(8 * i, 8 * i + 8), i + 1),
                              range(8)))
            raise RuntimeError("roll back")
    assert (a[:] == 0).all()
    assert not any(k.startswith("a/c/") for k in zs.store.list())
    zs.close()


def test_group_commit_shares_commits_between_concurrent_writes(tmp_path: Path) -> None:
    path = str(tmp_path / "x.lmdb")
    zs = ZarrStore(path)
    a = zarr.create_array(zs, name="a", shape=(400,), chunks=(4,), dtype="int32",
                          compressors=None)
    env = zs.store._env().env
    before = env.info()["last_txnid"]
    a[:] = np.arange(400, dtype="int32")
    commits = env.info()["last_txnid"] - before
    assert 0 < commits <= 100 // 5, commits      # 100 chunks; zarr writes 10 at a time
    assert (ZarrStore(path, read_only=True).store.get_many(
        [f"a/c/{i}" for i in range(100)]) == [
        np.arange(4 * i, 4 * i + 4, dtype="<i4").tobytes() for i in range(100)])
    zs.close()


def test_group_commit_failure_fails_only_the_bad_write(tmp_path: Path) -> None:
    """A write the stack refuses at commit time (the checksum transformer owns its
    reserved keys) fails alone: the writes grouped with it are committed."""
    zs = ZarrStore(str(tmp_path / "x.sqlite"), transformers=["checksum"])

    async def both():
        return await asyncio.gather(zs.set("a/c/0", buf(b"fine")),
                                    zs.set("__kvzarr/crc/x", buf(b"bad")),
                                    zs.set("a/c/1", buf(b"also fine")),
                                    return_exceptions=True)
    outcomes = asyncio.run(both())
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], Exception)
    assert zs.store.get("a/c/0") == b"fine" and zs.store.get("a/c/1") == b"also fine"
    zs.close()


def test_large_writes_commit_in_groups_of_offload_bytes_in_order(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """Writes at least offload_bytes big go to a thread as groups of about that many
    bytes, each its own commit, in the order zarr issued them."""
    from kvzarr.zarr_store import operations
    batches = []
    real = operations.write_group
    monkeypatch.setattr(operations, "write_group",
                        lambda store, ops: batches.append([k for _, k, _ in ops])
                        or real(store, ops))
    zs = ZarrStore(str(tmp_path / "x.lmdb"))
    zs.offload_bytes = 8
    env = zs.store._env().env
    before = env.info()["last_txnid"]

    async def six():
        await asyncio.gather(*[zs.set(f"k{i}", buf(b"%4d" % i)) for i in range(6)])
    asyncio.run(six())
    assert batches == [["k0", "k1"], ["k2", "k3"], ["k4", "k5"]]
    assert env.info()["last_txnid"] - before == 3
    assert zs.store.get_many([f"k{i}" for i in range(6)]) == [b"%4d" % i for i in range(6)]
    zs.close()


def test_writes_during_a_commit_on_a_thread_wait_for_it(tmp_path: Path, monkeypatch
                                                        ) -> None:
    """One commit job at a time per event loop: a write issued while one runs goes in
    the next, after it (a pipeline: the store never sees two of ours at once)."""
    import threading

    from kvzarr.zarr_store import operations
    release = threading.Event()
    started, running, most = [], [0], [0]
    real = operations.write_group

    def slow(store, ops):
        started.append([k for _, k, _ in ops])
        running[0] += 1
        most[0] = max(most[0], running[0])
        if len(started) == 1:
            release.wait(10)
        try:
            return real(store, ops)
        finally:
            running[0] -= 1
    monkeypatch.setattr(operations, "write_group", slow)
    zs = ZarrStore(str(tmp_path / "x.sqlite"))
    zs.offload_bytes = 1

    async def overlapping():
        first = asyncio.ensure_future(zs.set("a", buf(b"1")))
        while not started:
            await asyncio.sleep(0.001)
        second = asyncio.ensure_future(zs.set("b", buf(b"2")))
        await asyncio.sleep(0.05)
        assert started == [["a"]] and not first.done() and not second.done()
        release.set()
        await asyncio.gather(first, second)
    asyncio.run(overlapping())
    assert started == [["a"], ["b"]] and most[0] == 1
    assert zs.store.get_many(["a", "b"]) == [b"1", b"2"]
    zs.close()


def test_invalid_key_is_refused_with_kvzarr_error_and_nothing_written(tmp_path: Path
                                                                      ) -> None:
    zs = ZarrStore(str(tmp_path / "x.sqlite"))
    for key in ("a//b", "../x", "/abs", "a\\b"):
        with pytest.raises(InvalidKeyError):
            asyncio.run(zs.set(key, buf(b"x")))
    assert list(zs.store.list()) == []
    zs.close()


def test_read_only_zarr_store_refuses_writes_as_zarr_stores_do(tmp_path: Path) -> None:
    path = str(tmp_path / "x.sqlite")
    ZarrStore(path).set_sync("k", buf(b"v"))
    ro = ZarrStore(path, read_only=True)
    with pytest.raises(ValueError, match="read-only"):
        ro.set_sync("k", buf(b"w"))
    with pytest.raises(ValueError, match="read-only"):
        asyncio.run(ro.delete_dir(""))
    assert ro.get_sync("k").to_bytes() == b"v"


def test_lmdb_read_only_then_writable_zarr_store_in_one_process(tmp_path: Path) -> None:
    """xarray opens a dataset read-only, then the user appends to it: LMDB allows one
    environment per file per process, so the ZarrStores' shared one reopens writable."""
    path = str(tmp_path / "x.lmdb")
    zarr.create_array(ZarrStore(path), name="a", shape=(4,), chunks=(2,), dtype="i4")[:] = 7
    ro = ZarrStore(path, read_only=True)
    reader = zarr.open_array(ro, path="a", mode="r")
    assert (reader[:] == 7).all()
    writer = zarr.open_array(ZarrStore(path), path="a", mode="r+")
    writer[:2] = 9
    assert reader[:].tolist() == [9, 9, 7, 7]       # the reader goes on working
    with pytest.raises(ValueError, match="read-only"):
        reader[:] = 0


def test_with_read_only_over_a_read_only_store_object_refuses_a_writer(tmp_path: Path
                                                                       ) -> None:
    path = str(tmp_path / "x.sqlite")
    open_store(path).close()
    zs = ZarrStore(open_store(path, mode="r"))
    assert zs.read_only
    with pytest.raises(ReadOnlyError):
        zs.with_read_only(False)


def test_memory_zarr_store_refuses_to_pickle_with_a_clear_error() -> None:
    for zs in (ZarrStore(MemoryStore()), ZarrStore("memory://")):
        with pytest.raises(NotPicklableError, match="MemoryStore"):
            pickle.dumps(zs)


def _read_back(zs: ZarrStore) -> list:
    return zarr.open_array(zs, path="a", mode="r")[:].tolist()


def test_zarr_store_pickles_to_another_process(tmp_path: Path) -> None:
    import multiprocessing
    stores = []
    for i, name in enumerate(["x.sqlite", "x.lmdb", "x.zip", "dir"]):
        zs = ZarrStore(str(tmp_path / name), read_only=False)
        zarr.create_array(zs, name="a", shape=(6,), chunks=(2,), dtype="i2")[:] = i
        copy = pickle.loads(pickle.dumps(zs))
        assert copy == zs and hash(copy) == hash(zs) and copy.read_only == zs.read_only
        stores.append(zs.with_read_only(True))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.map(_read_back, stores) == [[i] * 6 for i in range(4)]


def test_equality_names_the_data(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    assert ZarrStore(str(path)) == ZarrStore(path) == ZarrStore(str(path), read_only=True)
    assert ZarrStore(str(path)) != ZarrStore(str(tmp_path / "y.sqlite"))
    assert ZarrStore(str(path)) != ZarrStore(str(path), transformers=["cache"])
    mem = MemoryStore()
    assert ZarrStore(mem) == ZarrStore(mem) != ZarrStore(MemoryStore())
    assert ZarrStore("memory://") != ZarrStore("memory://")   # two new, empty stores


def test_zarr_store_closes_the_kvzarr_store_with_the_last_user(tmp_path: Path) -> None:
    path = str(tmp_path / "x.sqlite")
    a, b = ZarrStore(path), ZarrStore(path)
    a.set_sync("k", buf(b"1"))
    assert b.get_sync("k").to_bytes() == b"1"
    shared = a.store
    assert b.store is shared
    a.close()
    assert b.get_sync("k").to_bytes() == b"1"       # still open for b
    b.close()
    assert a._origin.store is None                  # the last one closed it
    assert a.get_sync("k").to_bytes() == b"1"       # and a reopens on use


# --- a model: ranges and prefixes as zarr means them ----------------------------------

KEYS = st.lists(st.text(alphabet="ab/c0.", min_size=1, max_size=6).filter(
    lambda k: "//" not in k and not k.startswith("/") and not k.endswith("/")
    and all(s not in (".", "..") for s in k.split("/"))), max_size=8, unique=True)


PREFIXES = st.text(alphabet="ab/c0", max_size=4).filter(
    lambda p: "//" not in p and not p.startswith("/"))


def model_range(data: bytes, request) -> bytes:
    """What zarr's store interface documents for each byte request (zarr's LocalStore
    answers so; its MemoryStore wraps a suffix longer than the value around)."""
    if request is None:
        return data
    if isinstance(request, RangeByteRequest):
        return data[request.start:request.end]
    if isinstance(request, OffsetByteRequest):
        return data[request.offset:]
    return data[max(0, len(data) - request.suffix):] if request.suffix else b""


def model_children(keys: list[str], prefix: str) -> list[str]:
    base = prefix.rstrip("/")
    below = keys if not base else [k[len(base) + 1:] for k in keys if k.startswith(base + "/")]
    return sorted({k.split("/")[0] for k in below})


@settings(max_examples=40, deadline=None)
@given(keys=KEYS, data=st.binary(max_size=40), prefix=PREFIXES,
       start=st.integers(0, 50), length=st.integers(0, 50))
def test_ranges_and_prefixes_match_the_store_interface(keys, data, prefix, start, length):
    ours = ZarrStore(MemoryStore())
    # zarr may hold both "a" and "a/b"; a kvzarr directory store could not: keep leaves
    keys = [k for k in keys if not any(o.startswith(k + "/") for o in keys)]

    async def check():
        for k in keys:
            await ours.set(k, buf(data))
        for request in (None, RangeByteRequest(start, start + length),
                        OffsetByteRequest(start), SuffixByteRequest(length)):
            for k in keys[:2]:
                got = await ours.get(k, PROTO, request)
                assert got.to_bytes() == model_range(data, request)
            assert await ours.get("missing", PROTO, request) is None
        got = sorted([k async for k in ours.list_prefix(prefix)])
        assert got == sorted(k for k in keys if k.startswith(prefix))
        if not prefix.endswith("/"):
            assert sorted([k async for k in ours.list_dir(prefix)]) == \
                model_children(keys, prefix)
    asyncio.run(check())


@pytest.mark.parametrize("offload_bytes", [None, 0, 1 << 10])
def test_inline_and_thread_pool_calls_give_the_same_answers(offload_bytes, tmp_path: Path
                                                            ) -> None:
    """offload_bytes picks where kvzarr's calls run (inline, zarr's thread pool, by
    size); reads, group commits and a transaction block answer alike on each."""
    zs = ZarrStore(str(tmp_path / "x.sqlite"))
    zs.offload_bytes = offload_bytes
    data = np.arange(4096, dtype="int64").reshape(64, 64)       # 2 KiB chunks
    a = zarr.create_array(zs, name="a", shape=data.shape, chunks=(8, 32), dtype="int64")
    a[...] = data
    reader = zarr.open_array(zs, path="a", mode="r")
    assert reader.store.offload_bytes == offload_bytes        # kept by with_read_only
    np.testing.assert_array_equal(reader[...], data)
    with pytest.raises(RuntimeError):
        with zs.transaction():
            a[...] = 0
            raise RuntimeError("roll back")
    np.testing.assert_array_equal(a[...], data)
    zs.close()
