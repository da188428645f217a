"""AppendShards at the array level: partial shard writes append instead of rewriting,
read back exactly what numpy holds, keep garbage under ``max_garbage`` (automatic
compaction), compact on demand to the bytes a plain rewrite writes, fall back to a
rewrite where they cannot append, and refuse bad input without changing the store.

Backends are real: memory, a directory, a SQLite file, the PostgreSQL server (when
KVZARR_TEST_POSTGRES_URL is set); LMDB and zip for the fallback."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import struct
import uuid
from pathlib import Path

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr.codecs.sharding.append import garbage
from kvzarr.engine.chunk_io import APPEND_ATTEMPTS
from kvzarr.errors import (AppendConflictError, CodecError, ReadOnlyError, StoreConfigError)
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.memory import MemoryStore
from kvzarr.stores.sql import SQLStore
from kvzarr.stores.zip import ZipStore
from kvzarr.transformers import AppendShards, Transformer

PG_URL = os.environ.get("KVZARR_TEST_POSTGRES_URL")

APPENDING = ["memory", "filesystem", "sqlite"] + (["postgresql"] if PG_URL else [])


def open_plain(kind: str, tmp: Path, *, read_only: bool = False):
    """A store of ``kind`` under ``tmp`` (the same data on every call)."""
    if kind == "memory":
        return MemoryStore(read_only=read_only)
    if kind == "filesystem":
        return kvzarr.FilesystemStore(tmp / "data.zarr", read_only=read_only)
    if kind == "sqlite":
        return SQLStore(tmp / "data.db", read_only=read_only)
    if kind == "postgresql":
        table = "t_" + uuid.uuid5(uuid.NAMESPACE_URL, str(tmp)).hex[:12]
        return SQLStore(PG_URL, table=table, read_only=read_only)
    if kind == "lmdb":
        return LMDBStore(tmp / "data.lmdb", read_only=read_only)
    if kind == "zip":
        return ZipStore(tmp / "data.zip", read_only=read_only)
    raise ValueError(kind)


def sharded(store, name="a", shape=(128, 128), chunks=(16, 16), shards=(64, 64),
            dtype="uint16", compressors=None, **kw):
    return kvzarr.create_array(store, name=name, shape=shape, chunks=chunks, shards=shards,
                               dtype=dtype, fill_value=0, compressors=compressors,
                               overwrite=True, **kw)


def shard_garbage(array, key: str) -> tuple[int, int]:
    """(garbage bytes, size) of the stored shard ``key`` of ``array``."""
    data = array.store.get(key)
    codec = array._pipeline.array_bytes
    layout = codec._layout(array.metadata.chunk_grid.chunk_shape)
    view, index = codec._parse_whole(data, layout, key)
    return garbage(index, view.nbytes, layout.index_size), view.nbytes


def shard_keys(array) -> list[str]:
    return [array._io.key(c) for c in array._io.stored_chunk_coords()]


def dump(store) -> dict[str, bytes]:
    return {k: store.get(k) for k in store.list()}


@pytest.fixture
def cleanup_pg():
    tables = []
    yield tables
    if PG_URL:
        from tests.stores.test_sql import _drop_pg_tables
        for t in tables:
            _drop_pg_tables(PG_URL, t)


def stack(kind: str, tmp: Path, cleanup_pg, **options):
    plain = open_plain(kind, tmp)
    if kind == "postgresql":
        cleanup_pg.append(plain.table)
    return kvzarr.open_store(plain, transformers=[{"name": "append_shards", **options}])


# --- appending ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", APPENDING)
def test_a_tile_write_appends_one_inner_chunk_and_an_index(kind, tmp_path, cleanup_pg):
    store = stack(kind, tmp_path, cleanup_pg, max_garbage=0.9)
    a = sharded(store)
    rng = np.random.default_rng(1)
    want = rng.integers(0, 60000, (128, 128), dtype="uint16")
    a[:] = want
    key = "a/c/0/0"
    size = store.getsize(key)
    index_size = 16 * 16 + 4
    assert size == 16 * 16 * 16 * 2 + index_size       # dense: 16 inner chunks of 512 B
    tile = rng.integers(0, 60000, (16, 16), dtype="uint16")
    a[16:32, 32:48] = tile
    want[16:32, 32:48] = tile
    assert store.getsize(key) == size + 512 + index_size
    assert shard_garbage(a, key) == (512 + index_size, size + 512 + index_size)
    stats = store.stats()
    assert (stats["appends"], stats["bytes_appended"], stats["garbage_bytes"]) == (
        1, 512 + index_size, 512 + index_size)
    assert stats["native_appends"] == 1 and stats["fallback_rewrites"] == 0
    # a part of one inner chunk: that chunk is read, merged and appended
    a[40, 3:9] = 7
    want[40, 3:9] = 7
    np.testing.assert_array_equal(a[:], want)
    np.testing.assert_array_equal(a[16:32, 32:48], tile)
    if kind == "memory":
        return
    store.close()
    reopened = kvzarr.open_array(open_plain(kind, tmp_path, read_only=True), path="a",
                                 mode="r")
    np.testing.assert_array_equal(reopened[:], want)


@pytest.mark.parametrize("kind", APPENDING)
def test_garbage_stays_under_max_garbage_by_compacting(kind, tmp_path, cleanup_pg):
    store = stack(kind, tmp_path, cleanup_pg, max_garbage=0.3)
    a = sharded(store, compressors=[{"name": "gzip", "configuration": {"level": 1}}])
    rng = np.random.default_rng(2)
    want = rng.integers(0, 60000, (128, 128), dtype="uint16")
    a[:] = want
    for k in range(40):
        y, x = rng.integers(0, 8, 2) * 16
        tile = rng.integers(0, 60000, (16, 16), dtype="uint16")
        a[y:y + 16, x:x + 16] = tile
        want[y:y + 16, x:x + 16] = tile
        for key in shard_keys(a):
            waste, size = shard_garbage(a, key)
            assert waste <= 0.3 * size
    stats = store.stats()
    assert stats["compactions"] > 0 and stats["appends"] > stats["compactions"]
    assert stats["appends"] + stats["compactions"] == 40
    np.testing.assert_array_equal(a[:], want)


def _plain_shards(final: np.ndarray, tmp: Path, **array_options) -> dict[str, bytes]:
    """The shards a plain store holds after the whole of ``final`` is written at once."""
    plain = MemoryStore()
    b = sharded(plain, **array_options)
    b[:] = final
    return {k: v for k, v in dump(plain).items() if "/c/" in k}


@pytest.mark.parametrize("kind", APPENDING)
def test_compaction_on_demand_gives_the_bytes_of_a_plain_rewrite(kind, tmp_path, cleanup_pg):
    options = {"compressors": [{"name": "zstd", "configuration": {"level": 3}}]}
    store = stack(kind, tmp_path, cleanup_pg, max_garbage=1.0)    # never compacts itself
    a = sharded(store, **options)
    rng = np.random.default_rng(3)
    want = np.zeros((128, 128), dtype="uint16")
    want[:, :70] = rng.integers(0, 9, (128, 70))
    a[:] = want
    for _ in range(30):
        y, x = rng.integers(0, 120, 2)
        h, w = rng.integers(1, 30, 2)
        block = rng.integers(0, 9, (min(h, 128 - y), min(w, 128 - x)), dtype="uint16")
        a[y:y + h, x:x + w] = block
        want[y:y + h, x:x + w] = block
    a[0:16, 0:16] = 0              # an inner chunk back to the fill value: dropped
    want[0:16, 0:16] = 0
    before = {k: v for k, v in dump(store).items() if "/c/" in k}
    plain = _plain_shards(want, tmp_path, **options)
    assert before.keys() == plain.keys() and before != plain     # garbage in there
    dry = a.compact(dry_run=True)
    assert {k: v for k, v in dump(store).items() if "/c/" in k} == before
    report = kvzarr.compact(store, "a")
    assert (report.compacted, report.reclaimed) == (dry.compacted, dry.reclaimed)
    assert report.compacted == len(plain) and report.reclaimed > 0 and not report.corrupt
    after = {k: v for k, v in dump(store).items() if "/c/" in k}
    assert after == plain                          # byte for byte
    np.testing.assert_array_equal(a[:], want)
    again = kvzarr.compact(store)
    assert again.compacted == 0 and again.chunks == len(plain) and again.reclaimed == 0


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(),
       max_garbage=st.sampled_from([0.0, 0.2, 0.5, 1.0]),
       compressed=st.booleans(),
       writes=st.integers(1, 12))
def test_random_writes_through_the_stack_equal_numpy(data, max_garbage, compressed, writes):
    store = kvzarr.open_store(MemoryStore(), transformers=[
        {"name": "append_shards", "max_garbage": max_garbage}])
    options = {"compressors": [{"name": "gzip", "configuration": {"level": 1}}]} \
        if compressed else {}
    a = sharded(store, shape=(40, 36), chunks=(4, 6), shards=(16, 12), dtype="int16",
                **options)
    want = np.zeros((40, 36), dtype="int16")
    for _ in range(writes):
        y0 = data.draw(st.integers(0, 39))
        x0 = data.draw(st.integers(0, 35))
        y1 = data.draw(st.integers(y0 + 1, 40))
        x1 = data.draw(st.integers(x0 + 1, 36))
        fill = data.draw(st.sampled_from(["random", "zero", "const"]))
        shape = (y1 - y0, x1 - x0)
        value = (np.zeros(shape, "int16") if fill == "zero" else
                 np.full(shape, data.draw(st.integers(-5, 5)), "int16") if fill == "const"
                 else np.random.default_rng(y0 * 100 + x0).integers(-9, 9, shape)
                 .astype("int16"))
        a[y0:y1, x0:x1] = value
        want[y0:y1, x0:x1] = value
        for key in shard_keys(a):
            waste, size = shard_garbage(a, key)
            assert waste <= max_garbage * size
    np.testing.assert_array_equal(a[:], want)
    if max_garbage == 0.0:
        assert store.stats()["appends"] == 0
    kvzarr.compact(store)
    assert {k: v for k, v in dump(store).items() if "/c/" in k} == \
        _plain_shards(want, Path("."), shape=(40, 36), chunks=(4, 6), shards=(16, 12),
                      dtype="int16", **options)


# --- where appending is not possible: a correct rewrite ----------------------------------

@pytest.mark.parametrize("kind", ["lmdb", "zip"])
def test_stores_without_native_appends_rewrite(kind, tmp_path):
    store = kvzarr.open_store(open_plain(kind, tmp_path), transformers=["append_shards"])
    assert store.append_policy() is None
    a = sharded(store)
    a[:] = 5
    size = store.getsize("a/c/0/0")
    a[16:32, 0:16] = 9
    assert store.getsize("a/c/0/0") == size        # rewritten, not grown
    assert a[16, 0] == 9 and a[15, 0] == 5
    assert store.stats() == {"appends": 0, "bytes_appended": 0, "garbage_bytes": 0,
                             "compactions": 0, "bytes_reclaimed": 0, "fallback_rewrites": 0,
                             "conflict_retries": 0, "native_appends": 0}
    store.close()


@pytest.mark.parametrize("config, reason", [
    ({"index_location": "start"}, "at the start"),
    ({"index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]},
     "no crc32c"),
])
def test_shards_that_cannot_take_an_append_are_rewritten(tmp_path, config, reason):
    store = kvzarr.open_store(kvzarr.FilesystemStore(tmp_path / "d"),
                              transformers=["append_shards"])
    sharding = {"name": "sharding_indexed", "configuration": {
        "chunk_shape": [8, 8], "codecs": [{"name": "bytes", "configuration":
                                           {"endian": "little"}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}], "index_location": "end", **config}}
    a = kvzarr.create_array(store, name="a", shape=(32, 32), chunks=(32, 32), dtype="uint8",
                            fill_value=0, codecs=[sharding])
    a[:] = 1
    size = store.getsize("a/c/0/0")
    a[0:8, 0:8] = 2
    a[9, 9] = 3
    assert store.getsize("a/c/0/0") == size
    stats = store.stats()
    assert (stats["appends"], stats["fallback_rewrites"]) == (0, 2)
    assert reason in store.append_policy().last_fallback
    want = np.ones((32, 32), "uint8")
    want[0:8, 0:8] = 2
    want[9, 9] = 3
    np.testing.assert_array_equal(a[:], want)


def test_a_hard_linked_shard_file_is_rewritten_not_changed_in_place(tmp_path):
    store = kvzarr.open_store(kvzarr.FilesystemStore(tmp_path / "d"),
                              transformers=["append_shards"])
    a = sharded(store)
    a[:] = 1
    shard = tmp_path / "d" / "a" / "c" / "0" / "0"
    backup = tmp_path / "backup-of-shard"
    os.link(shard, backup)                 # e.g. a hard-link snapshot of the store
    kept = backup.read_bytes()
    a[0:16, 0:16] = 2
    assert backup.read_bytes() == kept     # the snapshot did not change
    assert a[0, 0] == 2 and a[16, 16] == 1
    stats = store.stats()
    assert stats["fallback_rewrites"] == 1 and stats["appends"] == 0
    assert "hard links" in store.append_policy().last_fallback
    a[0:16, 16:32] = 3                     # the file is its own again: appended
    assert store.stats()["appends"] == 1


def test_the_policy_is_seen_through_other_transformers():
    from tests.transformers.test_stack import Passing
    top = kvzarr.open_store(MemoryStore(), transformers=[Passing(), "append_shards",
                                                         Passing()])
    assert top.append_policy() is top.base.append_policy() is not None
    a = sharded(top)
    a[:] = 3
    a[0:16, 0:16] = 4
    assert top.base.stats()["appends"] == 1
    assert a[0, 0] == 4 and a[0, 16] == 3


class Interloper(Transformer):
    """Under AppendShards: before each of the first ``times`` appends, another writer
    (a second stack on the same store) appends to the same shard first."""
    name = "interloper"

    def __init__(self, base=None, *, times=1):
        self.times = times
        self.other = None
        super().__init__(base)

    def _append(self, key, data, expected_size):
        if self.times:
            self.times -= 1
            self.other[0:16, 48:64] = self.times + 100     # same shard, other chunk
        self.base.append(key, data, expected_size=expected_size)


@pytest.mark.parametrize("times, lost", [(1, False), (APPEND_ATTEMPTS - 1, False),
                                         (APPEND_ATTEMPTS, True)])
def test_an_append_that_lost_the_race_is_computed_again(tmp_path, times, lost):
    plain = kvzarr.FilesystemStore(tmp_path / "d")
    spy = Interloper(times=times)
    store = kvzarr.open_store(plain, transformers=["append_shards", spy])
    a = sharded(store)
    a[:] = 1
    spy.other = kvzarr.open_array(kvzarr.open_store(plain, transformers=["append_shards"]),
                                  path="a")
    if lost:
        with pytest.raises(AppendConflictError):
            a[0:16, 0:16] = 2
        assert a[0, 0] == 1
        assert store.stats()["conflict_retries"] == APPEND_ATTEMPTS - 1
    else:
        a[0:16, 0:16] = 2
        assert a[0, 0] == 2
        assert store.stats()["conflict_retries"] == times
    assert a[0, 48] == 100                    # the other writer's last write survives


def _write_tiles(path: str, kind: str, worker: int, rounds: int) -> None:
    store = kvzarr.open_store(kvzarr.FilesystemStore(path) if kind == "filesystem"
                              else SQLStore(path, busy_timeout=20, retries=20),
                              transformers=[{"name": "append_shards", "max_garbage": 1.0}])
    a = kvzarr.open_array(store, path="a")
    for r in range(rounds):
        # every worker writes its own inner chunks of the same shards
        a[worker * 16:(worker + 1) * 16, (r % 4) * 16:(r % 4 + 1) * 16] = worker * 100 + r
    store.close()


@pytest.mark.parametrize("kind", ["filesystem", "sqlite"])
def test_processes_appending_to_the_same_shards_lose_nothing(kind, tmp_path):
    path = str(tmp_path / ("d" if kind == "filesystem" else "d.db"))
    plain = kvzarr.FilesystemStore(path) if kind == "filesystem" else SQLStore(path)
    a = sharded(plain)
    a[:] = 1
    plain.close()
    ctx = mp.get_context("fork")
    rounds = 12
    procs = [ctx.Process(target=_write_tiles, args=(path, kind, w, rounds)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    a = kvzarr.open_array(path, path="a", mode="r")
    for w in range(4):
        for col in range(4):
            last = max(r for r in range(rounds) if r % 4 == col)
            assert (a[w * 16:(w + 1) * 16, col * 16:(col + 1) * 16] == w * 100 + last).all()


# --- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [-0.1, 1.01, math.nan, math.inf, "0.5", True, None, [0.5]])
def test_a_bad_max_garbage_is_refused(bad):
    with pytest.raises(StoreConfigError, match="max_garbage") as info:
        AppendShards(max_garbage=bad)
    assert info.value.field == "transformers.max_garbage"
    store = MemoryStore()
    with pytest.raises(StoreConfigError):
        kvzarr.open_store(store, transformers=[{"name": "append_shards", "max_garbage": bad}])
    assert not store._closed


def test_unknown_options_and_read_only_stores_are_refused(tmp_path):
    with pytest.raises(StoreConfigError, match="no option"):
        AppendShards(max_garbag=0.5)
    with pytest.raises(StoreConfigError, match="no option"):
        kvzarr.open_store("memory://", transformers=[{"name": "append_shards", "level": 1}])
    kvzarr.FilesystemStore(tmp_path / "d").set("k", b"v")
    with pytest.raises(StoreConfigError, match="read-only"):
        kvzarr.open_store(str(tmp_path / "d"), mode="r", transformers=["append_shards"])
    with pytest.raises(ReadOnlyError):
        kvzarr.compact(kvzarr.FilesystemStore(tmp_path / "d", read_only=True))


def _with_index(shard: bytes, n_entries: int, change) -> bytes:
    """``shard`` with its (bytes + crc32c) index changed by ``change(entries)`` and a
    valid checksum again."""
    index_size = 16 * n_entries + 4
    body, index = shard[:-index_size], shard[-index_size:-4]
    entries = list(struct.unpack(f"<{2 * n_entries}Q", index))
    change(entries)
    raw = struct.pack(f"<{2 * n_entries}Q", *entries)
    return body + raw + struct.pack("<I", crc32c.crc32c(raw))


@pytest.mark.parametrize("kind", APPENDING)
def test_an_index_pointing_past_the_end_is_a_codec_error_and_nothing_changes(
        kind, tmp_path, cleanup_pg):
    store = stack(kind, tmp_path, cleanup_pg)
    a = sharded(store)
    a[:] = 2
    shard = store.get("a/c/0/0")

    def past_the_end(e):
        e[2 * 5] = len(shard) + 100          # inner chunk 5 starts past the end

    store.set("a/c/0/0", _with_index(shard, 16, past_the_end))
    before = dump(store)
    with pytest.raises(CodecError, match="past") as info:
        a[0:16, 0:16] = 3                    # an append needs every entry in bounds
    assert info.value.key == "a/c/0/0"
    with pytest.raises(CodecError):
        a[0:4, 0:4] = 3
    assert dump(store) == before
    assert store.stats()["appends"] == 0


def test_compaction_reports_an_unreadable_shard_and_leaves_it(tmp_path):
    path = tmp_path / "d"
    store = kvzarr.open_store(kvzarr.FilesystemStore(path), transformers=["append_shards"])
    a = sharded(store)
    a[:] = 2
    a[0:16, 0:16] = 3
    a[64:80, 0:16] = 3
    store.set("a/c/1/1", store.get("a/c/1/1")[:-1] + b"\x00")      # bad checksum
    before = dump(store)
    report = kvzarr.compact(str(path))
    assert [k for k, _ in report.corrupt] == ["a/c/1/1"]
    assert "crc32c mismatch" in report.corrupt[0][1]
    assert report.compacted == 2
    after = dump(store)
    assert after["a/c/1/1"] == before["a/c/1/1"]
    assert after["a/c/0/0"] != before["a/c/0/0"] and after["a/c/1/0"] != before["a/c/1/0"]
