"""The cache transformer on every store backend: what it keeps (values, absent keys,
byte ranges, sizes, listings), how writes through it update it, how commits of another
handle make it let go, its LRU bound, its statistics, its options. Processes and the
model-based test are in test_cache_processes.py and test_cache_model.py."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import InvalidKeyError, StoreConfigError
from kvzarr.stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest
from kvzarr.stores.memory import MemoryStore
from kvzarr.transformers import Cache, stack_layers
from kvzarr.transformers.cache.entries import ENTRY_COST, RANGE_COST

from ..stores.conftest import StoreFactory, store_factory  # noqa: F401  (the fixture)


def cached(factory: StoreFactory, max_bytes: int = 1 << 20) -> Cache:
    return Cache(factory.make(), max_bytes=max_bytes)


def counts(cache: Cache) -> tuple[int, int]:
    s = cache.stats()
    return s["hits"], s["misses"]


def has_counter(cache: Cache) -> bool:
    return cache.base.change_counter() is not None


# -- what is kept -------------------------------------------------------------------------

def test_values_and_absent_keys_are_kept_and_updated_by_writes(store_factory):
    cache = cached(store_factory)
    if not has_counter(cache):
        pytest.skip("store has no change counter: nothing is kept (see test_no_counter)")
    cache.set("a/b", b"one")
    assert cache.get("a/b") == b"one" and cache.get("a/nope") is None   # misses
    hits, misses = counts(cache)
    assert cache.get("a/b") == b"one" and cache.get("a/nope") is None   # hits
    assert counts(cache) == (hits + 2, misses)
    cache.set("a/nope", b"now here")          # an absent key written through the cache
    cache.set("a/b", b"two")
    assert cache.get("a/nope") == b"now here" and cache.get("a/b") == b"two"
    assert counts(cache) == (hits + 4, misses)   # updated in place, not re-read
    cache.erase("a/b")
    assert cache.get("a/b") is None
    assert counts(cache) == (hits + 5, misses)
    assert cache.base.get("a/b") is None and cache.base.get("a/nope") == b"now here"


def test_byte_ranges_are_kept_and_dropped_with_their_key(store_factory):
    cache = cached(store_factory)
    if not has_counter(cache):
        pytest.skip("store has no change counter")
    cache.set("s/0", bytes(range(200)))
    asks = [("s/0", SuffixRequest(10)), ("s/0", RangeRequest(5, 9)), ("s/0", OffsetRequest(190))]
    want = [bytes(range(190, 200)), bytes(range(5, 9)), bytes(range(190, 200))]
    assert cache.get_partial_values(asks) == want
    hits, misses = counts(cache)
    assert misses == 3
    with cache.transaction(write=False):
        assert cache.get_partial_values(asks) == want
    assert counts(cache) == (hits + 3, misses)
    cache.set("s/0", bytes(200))              # a new value: the ranges of the old go
    assert cache.get_partial_values(asks[:1]) == [bytes(10)]
    cache.set_partial_values([("s/0", 195, b"\xff")]) if cache.capabilities.partial_writes \
        else cache.set("s/0", bytes(195) + b"\xff" + bytes(4))
    assert cache.get_partial_values(asks[:1]) == [bytes(5) + b"\xff" + bytes(4)]
    cache.erase("s/0")
    assert cache.get_partial_values(asks[:1]) == [None]


def test_a_whole_value_serves_its_ranges_sizes_and_existence(store_factory):
    cache = cached(store_factory)
    if not has_counter(cache):
        pytest.skip("store has no change counter")
    cache.set("v", b"0123456789")
    assert cache.get("v") == b"0123456789"
    hits, misses = counts(cache)
    assert cache.get_partial_values([("v", RangeRequest(2, 4)), ("v", None)]) == \
        [b"23", b"0123456789"]
    assert cache.getsize("v") == 10 and cache.exists("v")
    assert cache.get_many(["v"]) == [b"0123456789"]
    assert counts(cache) == (hits + 5, misses)


def test_sizes_and_existence_are_kept(store_factory):
    cache = cached(store_factory)
    if not has_counter(cache):
        pytest.skip("store has no change counter")
    cache.set_many([("x/1", b"abc"), ("x/2", b"")])
    assert cache.exists_many(["x/1", "x/2", "x/3"]) == [True, True, False]
    assert cache.getsize("x/1") == 3
    hits, misses = counts(cache)
    assert cache.exists_many(["x/1", "x/2", "x/3"]) == [True, True, False]
    assert cache.exists("x/3") is False and cache.getsize("x/1") == 3
    assert cache.get("x/3") is None           # known absent: no read
    assert counts(cache) == (hits + 6, misses)
    cache.erase("x/1")
    assert not cache.exists("x/1") and cache.getsize("x/1") is None


def test_listings_are_kept_and_dropped_by_writes_below_them(store_factory):
    cache = cached(store_factory)
    if not has_counter(cache):
        pytest.skip("store has no change counter")
    cache.set_many([("g/a/zarr.json", b"{}"), ("g/b/zarr.json", b"{}"), ("h", b"1")])
    assert list(cache.list_dir("g/")) == ["a/", "b/"]
    assert list(cache.list_prefix("g/")) == ["g/a/zarr.json", "g/b/zarr.json"]
    assert list(cache.list()) == ["g/a/zarr.json", "g/b/zarr.json", "h"]
    assert list(cache.list_dir("")) == ["g/", "h"]
    hits, misses = counts(cache)
    for _ in range(2):
        assert list(cache.list_dir("g/")) == ["a/", "b/"]
        assert list(cache.list()) == ["g/a/zarr.json", "g/b/zarr.json", "h"]
    assert counts(cache) == (hits + 4, misses)
    cache.set("g/c/zarr.json", b"{}")          # below g/ and the root: both listings go
    assert list(cache.list_dir("g/")) == ["a/", "b/", "c/"]
    assert list(cache.list()) == ["g/a/zarr.json", "g/b/zarr.json", "g/c/zarr.json", "h"]
    assert list(cache.list_dir("")) == ["g/", "h"]
    cache.erase_prefix("g/a/")
    assert list(cache.list_dir("g/")) == ["b/", "c/"]
    cache.erase_values(["h"])
    assert list(cache.list_dir("")) == ["g/"]
    cache.erase_prefix("")
    assert list(cache.list()) == [] and list(cache.list_dir("g/")) == []


def test_erase_prefix_drops_the_keys_below_it(store_factory):
    cache = cached(store_factory)
    if not has_counter(cache):
        pytest.skip("store has no change counter")
    cache.set_many([("p/1", b"1"), ("p/q/2", b"2"), ("pz", b"3")])
    assert cache.get_many(["p/1", "p/q/2", "pz"]) == [b"1", b"2", b"3"]
    cache.erase_prefix("p/")
    assert cache.get_many(["p/1", "p/q/2", "pz"]) == [None, None, b"3"]


def test_an_aborted_write_transaction_changes_nothing(store_factory):
    cache = cached(store_factory)
    cache.set("k", b"before")
    assert cache.get("k") == b"before"
    with pytest.raises(RuntimeError):
        with cache.transaction():
            cache.set("k", b"inside")
            cache.set("new", b"x")
            assert cache.get("k") == b"inside"        # the transaction sees its writes
            raise RuntimeError("abort")
    if cache.capabilities.transactional:
        assert cache.get("k") == b"before" and cache.get("new") is None
        assert cache.base.get("k") == b"before"
    else:                                             # writes are not undone there
        assert cache.get("k") == cache.base.get("k")


def test_reads_inside_a_write_transaction_see_its_writes(store_factory):
    cache = cached(store_factory)
    cache.set_many([("w/a", b"a"), ("w/b", b"b")])
    cache.get_many(["w/a", "w/b"])
    list(cache.list_dir("w/"))
    with cache.transaction():
        cache.set("w/a", b"A")
        cache.erase("w/b")
        cache.set("w/c", b"c")
        assert cache.get_many(["w/a", "w/b", "w/c"]) == [b"A", None, b"c"]
        assert list(cache.list_dir("w/")) == ["a", "c"]
        assert cache.get_partial_values([("w/a", None)]) == [b"A"]
    assert cache.get_many(["w/a", "w/b", "w/c"]) == [b"A", None, b"c"]
    assert list(cache.list_dir("w/")) == ["a", "c"]


def test_invalid_keys_are_refused_before_and_after_caching(store_factory):
    cache = cached(store_factory)
    cache.set("ok", b"1")
    cache.get("ok")
    for bad in ("", "a//b", "/a", 1, ("ok",), ["ok"]):
        with pytest.raises(InvalidKeyError):
            cache.get(bad)
        with pytest.raises(InvalidKeyError):
            cache.get_many([bad])
        with pytest.raises(InvalidKeyError):
            cache.get_partial_values([(bad, None)])


# -- coherence with other handles ---------------------------------------------------------

def test_a_commit_of_another_handle_is_seen_at_once(store_factory):
    cache = cached(store_factory)
    other = store_factory.reopen() or stack_layers(cache)[-1]
    cache.set_many([("k", b"v0"), ("d/x", b"1")])
    for i in range(1, 20):
        assert cache.get("k") == f"v{i - 1}".encode()
        assert list(cache.list_dir("d/")) == sorted({"x"} | {f"n{j}" for j in range(1, i)})
        assert cache.get_partial_values([("k", OffsetRequest(1))]) == [f"{i - 1}".encode()]
        other.set("k", f"v{i}".encode())
        other.set(f"d/n{i}", b"")
        assert cache.get("k") == f"v{i}".encode()
        assert f"n{i}" in list(cache.list_dir("d/"))
        assert cache.get_partial_values([("k", OffsetRequest(1))]) == [f"{i}".encode()]


def test_a_read_transaction_never_mixes_snapshots(store_factory):
    """Values cached before and read inside a read transaction are all of its snapshot,
    while another handle commits; after it, the commit is seen."""
    cache = cached(store_factory)
    if not cache.capabilities.transactional:
        pytest.skip("store lacks capability 'transactional'")
    other = store_factory.reopen() or stack_layers(cache)[-1]
    keys = [f"s/{i}" for i in range(6)]
    cache.set_many([(k, b"old") for k in keys])
    cache.get_many(keys[:3])                  # half of them cached
    with cache.transaction(write=False):
        assert cache.get(keys[0]) == b"old"
        writer = threading.Thread(target=lambda: other.set_many([(k, b"new") for k in keys]))
        writer.start()
        writer.join(0.5)                      # stores whose readers block writers wait
        # another thread reads through the cache meanwhile: the cache moves on to the
        # new state, this transaction must not
        seen = []
        reader = threading.Thread(target=lambda: seen.append(cache.get_many(keys)))
        reader.start()
        reader.join(0.5)
        assert cache.get_many(keys) == [b"old"] * 6
        assert [cache.get(k) for k in reversed(keys)] == [b"old"] * 6
        assert list(cache.list_prefix("s/")) == keys
    writer.join(30)
    reader.join(30)
    assert seen in ([[b"old"] * 6], [[b"new"] * 6])
    assert cache.get_many(keys) == [b"new"] * 6
    with cache.transaction(write=False):
        assert cache.get_many(keys) == [b"new"] * 6


def test_cached_answers_of_another_state_are_read_again_in_one_snapshot(store_factory):
    """A read outside a transaction finds some answers cached, then the store moves on
    before its read transaction for the rest begins: it reads them all again."""
    cache = cached(store_factory)
    if not has_counter(cache) or not cache.capabilities.transactional:
        pytest.skip("needs a change counter and transactions")
    other = store_factory.reopen() or stack_layers(cache)[-1]
    cache.set_many([("a", b"a0"), ("b", b"b0")])
    assert cache.get("a") == b"a0"            # cached; "b" is not
    base = cache.base
    begin = base.transaction

    def commit_first(write=True):
        base.transaction = begin              # once
        other.set_many([("a", b"a1"), ("b", b"b1")])
        return begin(write)

    base.transaction = commit_first
    try:
        # the counter check happens before the hook: "a" is answered from the cache,
        # then the store's read transaction shows another state
        got = cache.get_many(["a", "b"])
    finally:
        base.transaction = begin
    assert got in ([b"a1", b"b1"],)
    assert cache.get_many(["a", "b"]) == [b"a1", b"b1"]


def test_no_counter_means_nothing_is_kept(store_factory):
    cache = cached(store_factory)
    if has_counter(cache):
        pytest.skip("store has a change counter")
    cache.set("k", b"1")
    for _ in range(3):
        assert cache.get("k") == b"1"
        assert list(cache.list()) == ["k"]
    stats = cache.stats()
    assert stats["hits"] == 0 and stats["entries"] == 0 and stats["bypassed"] >= 6
    cache.base.set("k", b"2")                 # behind the cache's back
    assert cache.get("k") == b"2"


def test_threads_reading_and_writing_through_one_cache(store_factory):
    """Readers in several threads while writers count up through the cache and through
    another handle (each commit one higher than the last): on a transactional store a
    reader sees every commit whole and never a state older than one it saw before; the
    cache ends equal to the store."""
    cache = cached(store_factory, max_bytes=64 << 10)
    other = store_factory.reopen() or stack_layers(cache)[-1]
    transactional = cache.capabilities.transactional
    keys = [f"t/{i}" for i in range(8)]
    cache.set_many([(k, (0).to_bytes(4, "big")) for k in keys])
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(store):
        try:
            for _ in range(20):
                with store.transaction():
                    n = int.from_bytes(store.get(keys[0]), "big") + 1
                    store.set_many([(k, n.to_bytes(4, "big")) for k in keys])
        except BaseException as e:          # pragma: no cover - reported below
            errors.append(e)

    def reader():
        try:
            last = 0
            while not stop.is_set():
                if transactional:
                    with cache.transaction(write=False):
                        got = [int.from_bytes(v, "big") for v in cache.get_many(keys)]
                    assert len(set(got)) == 1, got        # one commit, whole
                    alone = int.from_bytes(cache.get(keys[3]), "big")
                    assert alone >= got[0] >= last, (alone, got, last)
                    last = alone
                else:
                    [cache.get(k) for k in keys]
        except BaseException as e:          # pragma: no cover - reported below
            errors.append(e)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    writers = [threading.Thread(target=writer, args=(cache,)),
               threading.Thread(target=writer, args=(other,))]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join(120)
    stop.set()
    for t in readers:
        t.join(120)
    assert not errors, errors
    assert cache.get_many(keys) == cache.base.get_many(keys)
    if transactional:
        assert cache.get(keys[0]) == (40).to_bytes(4, "big")


# -- the bound --------------------------------------------------------------------------

def test_least_recently_used_entries_go_first_and_bytes_stay_bounded():
    value = bytes(1000)
    per = ENTRY_COST + len("k/00") + len(value)
    cache = Cache(MemoryStore(), max_bytes=5 * per)
    cache.set_many([(f"k/{i:02}", value) for i in range(10)])
    for i in range(5):
        cache.get(f"k/{i:02}")
    assert cache.stats()["entries"] == 5 and cache.stats()["bytes"] == 5 * per
    cache.get("k/00")                         # now the most recently used
    cache.get("k/05")                         # evicts k/01, the least recently used
    stats = cache.stats()
    assert stats["evictions"] == 1 and stats["bytes"] <= 5 * per
    hits = stats["hits"]
    cache.get("k/00")
    assert cache.stats()["hits"] == hits + 1
    cache.get("k/01")
    assert cache.stats()["hits"] == hits + 1  # it was gone
    for i in range(10):
        cache.get_partial_values([(f"k/{i:02}", SuffixRequest(100))])
        assert cache.stats()["bytes"] <= 5 * per


def test_an_entry_bigger_than_a_quarter_of_the_bound_is_not_kept():
    cache = Cache(MemoryStore(), max_bytes=4000)
    cache.set("small", bytes(100))
    cache.set("big", bytes(1100))             # > 4000 / 4 with its overhead
    cache.get("small"), cache.get("big")
    assert cache.stats()["entries"] == 1
    assert cache.get("big") == bytes(1100)    # still read, from the store


def test_one_read_of_more_than_an_eighth_of_the_bound_is_not_kept():
    """A scan (one read bringing in more than max_bytes / 8) passes through: it would
    push out everything else. Smaller reads are kept."""
    cache = Cache(MemoryStore(), max_bytes=16_000)       # a scan: over 2,000 bytes
    cache.set_many([(f"k/{i:02}", bytes(300)) for i in range(10)])
    keys = [f"k/{i:02}" for i in range(10)]
    with cache.transaction(write=False):
        assert cache.get_many(keys) == [bytes(300)] * 10
    assert cache.get_many(keys) == [bytes(300)] * 10
    assert cache.stats()["entries"] == 0 and cache.stats()["hits"] == 0
    assert cache.get_many(keys[:3]) == [bytes(300)] * 3    # 900 bytes: kept
    assert cache.stats()["entries"] == 3
    cache.clear()
    with cache.transaction(write=False):                   # a stream keeps its start
        assert [v for _, v in sorted(cache.iter_values(keys))] == [bytes(300)] * 10
    assert 0 < cache.stats()["entries"] < 10


def test_ranges_are_charged_to_their_key_and_bounded():
    cache = Cache(MemoryStore(), max_bytes=2000)
    cache.set("r", bytes(10_000))
    for i in range(40):
        cache.get_partial_values([("r", RangeRequest(i * 100, i * 100 + 100))])
        assert cache.stats()["bytes"] <= 500  # one key may hold a quarter of the bound
    held = cache.stats()["bytes"]
    assert held == ENTRY_COST + 1 + 3 * (RANGE_COST + 100) or held < 500


# -- statistics, options, clearing ------------------------------------------------------------

def test_stats_count_what_happened():
    cache = Cache(MemoryStore(), max_bytes=1 << 20)
    assert set(cache.stats()) >= {"hits", "misses", "evictions", "bytes", "entries",
                                  "invalidations", "bypassed", "adoptions", "max_bytes"}
    cache.set("a", b"1")
    cache.get("a"), cache.get("a"), cache.get("b")
    s = cache.stats()
    assert (s["hits"], s["misses"], s["entries"]) == (1, 2, 2)
    cache.base.set("a", b"2")                 # behind its back: all entries dropped
    assert cache.get("a") == b"2"
    s = cache.stats()
    assert s["invalidations"] == 2 and s["adoptions"] == 1
    cache.clear()
    assert cache.stats()["entries"] == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, "64MiB", None, True, [1]])
def test_a_bad_max_bytes_is_a_config_error(bad):
    with pytest.raises(StoreConfigError, match="max_bytes"):
        Cache(max_bytes=bad)
    with pytest.raises(StoreConfigError):
        kvzarr.open_store(MemoryStore(), transformers=[{"name": "cache", "max_bytes": bad}])


def test_unknown_options_are_config_errors():
    with pytest.raises(StoreConfigError, match="no option"):
        Cache(max_entries=10)
    with pytest.raises(StoreConfigError):
        kvzarr.open_store(MemoryStore(), transformers=[{"name": "cache", "size": 10}])


def test_the_cache_is_registered_and_shown():
    store = kvzarr.open_store("memory://", transformers=["cache"])
    assert isinstance(store, Cache) and store.max_bytes == 64 << 20
    store = kvzarr.open_store("memory://", transformers=[{"name": "cache", "max_bytes": 4096}])
    assert store.options() == {"max_bytes": 4096}
    assert repr(store).startswith("Cache(max_bytes=4096) > MemoryStore")
    assert kvzarr.transformers.Cache is Cache


def test_arrays_read_through_a_cache_are_what_was_written(store_factory):
    cache = cached(store_factory, max_bytes=4 << 20)
    data = np.arange(64 * 64, dtype="uint16").reshape(64, 64)
    a = kvzarr.create_array(cache, name="a", shape=data.shape, chunks=(8, 8), shards=(32, 32),
                            dtype="uint16", fill_value=0)
    a[...] = data
    b = kvzarr.create_array(cache, name="b", shape=data.shape, chunks=(8, 8), dtype="uint16",
                            compressors=None, fill_value=0)
    b[...] = data
    r = kvzarr.open_array(cache, path="a", mode="r")
    for _ in range(2):                        # cold, then warm
        np.testing.assert_array_equal(r[8:16, 40:48], data[8:16, 40:48])
        np.testing.assert_array_equal(r[...], data)
        assert b[5, 7] == data[5, 7]
    a[8:16, 40:48] = 7                        # a write through the cache
    np.testing.assert_array_equal(r[8:16, 40:48], 7)
    if has_counter(cache):
        assert cache.stats()["hits"] > 0


def test_a_write_transaction_closed_by_an_exit_stack_with_an_error_rolls_back(store_factory):
    """``ExitStack.__exit__(type, error, tb)`` ends the cache's transaction with no
    exception current: the store under it must still abort, not commit."""
    from contextlib import ExitStack
    cache = cached(store_factory)
    if not cache.capabilities.transactional:
        pytest.skip("store lacks capability 'transactional'")
    cache.set("k", b"before")
    stack = ExitStack()
    stack.enter_context(cache.transaction())
    cache.set("k", b"abandoned")
    stack.__exit__(RuntimeError, RuntimeError("abandoned"), None)
    assert cache.get("k") == b"before" and cache.base.get("k") == b"before"
