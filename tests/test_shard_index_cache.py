"""Shard indexes kept between reads of an array (kvzarr/engine/index_cache.py): read once
per shard while the store's change counter vouches for them, never stale after a write
by another handle, another process, or the reader's own transaction, never kept where
the store has no counter."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr.codecs import sharding_indexed
from kvzarr.engine.index_cache import IndexCache
from kvzarr.stores.byteranges import SuffixRequest
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.sql import SQLStore
from kvzarr.stores.zip import ZipStore

SHAPE, TILE, SHARD = (64, 64), 8, 32
#: the stores with a change counter (PostgreSQL where CI names a server)
COUNTED = ["memory", "lmdb", "sqlite", "zip"] + (
    ["postgresql"] if os.environ.get("KVZARR_TEST_POSTGRES_URL") else [])


def _open(kind, tmp_path):
    if kind == "memory":
        return kvzarr.MemoryStore()
    if kind == "lmdb":
        return LMDBStore(str(tmp_path / "a.lmdb"))
    if kind == "sqlite":
        return SQLStore(str(tmp_path / "a.db"))
    if kind == "zip":
        return ZipStore(str(tmp_path / "a.zip"))
    if kind == "postgresql":      # a fresh table per test on the one server
        return SQLStore(os.environ["KVZARR_TEST_POSTGRES_URL"],
                        table=f"t_{uuid.uuid4().hex[:12]}")
    return kvzarr.FilesystemStore(str(tmp_path / "d"))


def _create(store, **kwargs):
    a = kvzarr.create_array(store, name="a", shape=SHAPE, chunks=(TILE, TILE),
                            shards=(SHARD, SHARD), dtype="int32", fill_value=-1,
                            compressors=[{"name": "gzip", "configuration": {"level": 1}}],
                            **kwargs)
    data = np.arange(64 * 64, dtype="int32").reshape(SHAPE)
    a[...] = data
    return a, data


def _tile(i, j):
    return slice(i * TILE, (i + 1) * TILE), slice(j * TILE, (j + 1) * TILE)


@pytest.fixture
def index_reads(monkeypatch):
    """How many times a shard's index was read from its store."""
    count = [0]
    read = sharding_indexed.ShardingCodec._read_index_now

    def counting(self, *args):
        count[0] += 1
        return read(self, *args)

    monkeypatch.setattr(sharding_indexed.ShardingCodec, "_read_index_now", counting)
    return count


@pytest.mark.parametrize("kind", COUNTED)
def test_an_index_is_read_once_per_shard_while_nothing_changes(kind, tmp_path, index_reads):
    store = _open(kind, tmp_path)
    a, data = _create(store)
    r = kvzarr.open_array(store, path="a", mode="r")
    index_reads[0] = 0
    for _ in range(3):
        for i in range(8):
            for j in range(8):
                np.testing.assert_array_equal(r[_tile(i, j)], data[_tile(i, j)])
    # 4 shards, each index read once for 192 tiles (SQLite pins a read transaction's
    # token at its BEGIN once a counter was asked for: its first one has none)
    assert index_reads[0] == 4 + (kind == "sqlite")
    store.close()


def test_a_store_without_a_counter_reads_the_index_every_time(tmp_path, index_reads):
    store = _open("fs", tmp_path)
    a, data = _create(store)
    index_reads[0] = 0
    for _ in range(2):
        np.testing.assert_array_equal(a[_tile(1, 1)], data[_tile(1, 1)])
    assert index_reads[0] == 2
    assert store.change_counter() is None


def test_a_config_of_zero_keeps_nothing(tmp_path, index_reads):
    store = _open("lmdb", tmp_path)
    _, data = _create(store)
    a = kvzarr.open_array(store, path="a", mode="r", config={"shard_index_cache_bytes": 0})
    index_reads[0] = 0
    for _ in range(3):
        np.testing.assert_array_equal(a[_tile(2, 3)], data[_tile(2, 3)])
    assert index_reads[0] == 3
    store.close()


@pytest.mark.parametrize("kind", COUNTED)
def test_a_write_by_another_handle_is_seen(kind, tmp_path):
    store = _open(kind, tmp_path)
    a, data = _create(store)
    reader = kvzarr.open_array(store, path="a", mode="r")
    np.testing.assert_array_equal(reader[_tile(0, 0)], data[_tile(0, 0)])   # kept
    # the tile's shard rewritten with the tile at another place in it (its index moves)
    a[_tile(0, 1)] = 7
    a[_tile(0, 0)] = np.full((TILE, TILE), 5, dtype="int32")
    data[_tile(0, 1)] = 7
    data[_tile(0, 0)] = 5
    for i in range(4):
        for j in range(4):
            np.testing.assert_array_equal(reader[_tile(i, j)], data[_tile(i, j)])
    # the shard erased: the fill value, not the kept index's ranges
    a[:SHARD, :SHARD] = -1
    np.testing.assert_array_equal(reader[_tile(1, 1)], np.full((TILE, TILE), -1))
    store.close()


def _rewrite_tile(path, kind, value):
    store = LMDBStore(path) if kind == "lmdb" else SQLStore(path)
    a = kvzarr.open_array(store, path="a", mode="r+")
    a[0:TILE, 0:TILE] = value
    a[0:TILE, TILE:2 * TILE] = value + 1
    store.close()


@pytest.mark.parametrize("kind", ["lmdb", "sqlite"])
def test_a_write_by_another_process_is_seen(kind, tmp_path, other_process):
    store = _open(kind, tmp_path)
    _, data = _create(store)
    reader = kvzarr.open_array(store, path="a", mode="r")
    np.testing.assert_array_equal(reader[_tile(0, 0)], data[_tile(0, 0)])
    path = str(tmp_path / ("a.lmdb" if kind == "lmdb" else "a.db"))
    other_process.submit(_rewrite_tile, path, kind, 11).result(timeout=120)
    np.testing.assert_array_equal(reader[_tile(0, 0)], np.full((TILE, TILE), 11))
    np.testing.assert_array_equal(reader[_tile(0, 1)], np.full((TILE, TILE), 12))
    np.testing.assert_array_equal(reader[_tile(1, 1)], data[_tile(1, 1)])
    store.close()


@pytest.mark.parametrize("kind", COUNTED)
def test_reads_inside_a_write_transaction_keep_nothing(kind, tmp_path, index_reads):
    """Inside a write transaction the counter names what the commit will hold, so an
    index read there, then changed by a later write of the same transaction, would be
    wrong under that very token after the commit."""
    store = _open(kind, tmp_path)
    a, data = _create(store)
    reader = kvzarr.open_array(store, path="a", mode="r")
    writer = kvzarr.open_array(store, path="a", mode="r+")
    index_reads[0] = 0
    with store.transaction():
        writer[_tile(0, 1)] = 3                    # the transaction has written
        got = reader[_tile(0, 0)]                  # read in it, after a write
        writer[_tile(0, 0)] = 4                    # the same shard again
        got_again = reader[_tile(0, 0)]
    np.testing.assert_array_equal(got, data[_tile(0, 0)])
    np.testing.assert_array_equal(got_again, np.full((TILE, TILE), 4))
    np.testing.assert_array_equal(reader[_tile(0, 0)], np.full((TILE, TILE), 4))
    np.testing.assert_array_equal(reader[_tile(0, 1)], np.full((TILE, TILE), 3))
    store.close()


_OPS = st.lists(st.tuples(st.sampled_from(["read", "write", "erase", "txn"]),
                          st.integers(0, 7), st.integers(0, 7), st.integers(0, 1),
                          st.integers(-5, 5)), min_size=1, max_size=40)


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_interleaved_reads_and_writes_of_two_handles_match_numpy(kind, tmp_path_factory,
                                                                ops):
    store = _open(kind, tmp_path_factory.mktemp("s"))
    try:
        a, model = _create(store)
        handles = [kvzarr.open_array(store, path="a", mode="r+"),
                   kvzarr.open_array(store, path="a", mode="r+")]
        for op, i, j, h, v in ops:
            t = _tile(i, j)
            if op == "read":
                np.testing.assert_array_equal(handles[h][t], model[t])
            elif op == "write":
                handles[h][t] = v
                model[t] = v
            elif op == "erase":             # a whole shard to the fill value
                s = (slice(i // 4 * SHARD, (i // 4 + 1) * SHARD),
                     slice(j // 4 * SHARD, (j // 4 + 1) * SHARD))
                handles[h][s] = -1
                model[s] = -1
            else:                           # read, write, read in one write transaction
                with store.transaction():
                    np.testing.assert_array_equal(handles[h][t], model[t])
                    handles[1 - h][t] = v
                    model[t] = v
                    np.testing.assert_array_equal(handles[h][t], model[t])
        for h in handles:
            np.testing.assert_array_equal(h[...], model)
    finally:
        store.close()


def test_the_cache_is_bounded_in_bytes():
    cache = IndexCache(100)
    cache.keep("a", 1, "A", 40)
    cache.keep("b", 1, "B", 40)
    assert cache.get("a", 1) == "A" and cache.get("b", 1) == "B"
    assert cache.get("a", 2) is None      # another token: not this entry
    cache.keep("a", 2, "A2", 40)          # replaced in place: still two entries
    assert cache.get("a", 2) == "A2" and cache.get("a", 1) is None and len(cache) == 2
    cache.keep("c", 1, "C", 40)           # a third of 40 bytes passes 100: emptied first
    assert len(cache) == 1 and cache.get("c", 1) == "C" and cache.get("b", 1) is None
    cache.keep("d", 1, "D", 101)          # larger than the bound: not kept
    assert cache.get("d", 1) is None and len(cache) == 1


def test_a_kept_index_is_read_only(tmp_path):
    store = _open("memory", tmp_path)
    _create(store)
    r = kvzarr.open_array(store, path="a", mode="r")
    r[_tile(0, 0)]
    (_, index), = r._io._index_cache._entries.values()
    with pytest.raises(ValueError):
        index.entries[0, 0] = 1
    store.close()


def test_an_index_read_asks_the_store_for_its_suffix(tmp_path):
    # (what the cache saves: the suffix request of every tile read after the first)
    class Recording(kvzarr.MemoryStore):
        def __init__(self):
            super().__init__()
            self.suffixes = 0

        def _get_range(self, key, request):
            self.suffixes += isinstance(request, SuffixRequest)
            return super()._get_range(key, request)

    store = Recording()
    _, data = _create(store)
    r = kvzarr.open_array(store, path="a", mode="r")
    store.suffixes = 0
    for j in range(4):
        np.testing.assert_array_equal(r[_tile(0, j)], data[_tile(0, j)])
    assert store.suffixes == 1
