"""Model-based test of the cache: random operations through a Cache, and commits of
another handle behind its back, compared with the same operations on a plain dict.
A small bound makes the cache evict all the time; read transactions check that what
they read is the state they began in, while the other handle commits in the middle."""

from __future__ import annotations

import shutil
import tempfile
import threading

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kvzarr.stores.byteranges import (OffsetRequest, RangeRequest, SuffixRequest,
                                      apply_byte_request)
from kvzarr.stores.memory import MemoryStore
from kvzarr.transformers import Cache

KEYS = ["a", "a/b", "a/c", "a/b/d", "b/x/y", "b/z", "c", "zarr.json"]
PREFIXES = ["", "a/", "a/b/", "b/", "b/x/", "c/"]
keys = st.sampled_from(KEYS)
prefixes = st.sampled_from(PREFIXES)
values = st.binary(max_size=40)
requests = st.one_of(
    st.none(),
    st.builds(lambda a, n: RangeRequest(a, a + n), st.integers(0, 45), st.integers(0, 20)),
    st.builds(OffsetRequest, st.integers(0, 45)),
    st.builds(SuffixRequest, st.integers(0, 45)))


def _open(kind: str, root: str):
    """(the store under the cache, another handle on the same data)."""
    if kind == "memory":
        store = MemoryStore()
        return store, store
    if kind == "sqlite":
        from kvzarr.stores.sql import SQLStore
        return SQLStore(f"{root}/m.db"), SQLStore(f"{root}/m.db")
    from kvzarr.stores.lmdb import LMDBStore
    return (LMDBStore(f"{root}/m.lmdb", durability="none"),
            LMDBStore(f"{root}/m.lmdb", durability="none"))


class CacheModel(RuleBasedStateMachine):
    kind = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp()
        self.base, self.other = _open(self.kind, self.root)
        self.cache: Cache | None = None          # made by the first rule, bound()
        self.model: dict[str, bytes] = {}
        self.separate = self.other is not self.base

    @initialize(bound=st.sampled_from([700, 1500, 1 << 20]))
    def bound(self, bound):
        # a few entries (evictions all along; big listings not kept), or plenty
        self.cache = Cache(self.base, max_bytes=bound)

    def teardown(self) -> None:
        if self.cache is not None:
            self.cache.close()
        self.base.close()
        if self.separate:
            self.other.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- writes through the cache -------------------------------------------------------------

    @rule(key=keys, value=values)
    def set(self, key, value):
        self.cache.set(key, value)
        self.model[key] = value

    @rule(key=keys)
    def erase(self, key):
        self.cache.erase(key)
        self.model.pop(key, None)

    @rule(items=st.lists(st.tuples(keys, values), max_size=4))
    def set_many(self, items):
        self.cache.set_many(items)
        self.model.update(items)

    @rule(prefix=prefixes)
    def erase_prefix(self, prefix):
        self.cache.erase_prefix(prefix)
        for k in [k for k in self.model if k.startswith(prefix)]:
            del self.model[k]

    @rule(key=keys, offset=st.integers(0, 45), value=st.binary(min_size=1, max_size=8))
    def set_partial(self, key, offset, value):
        self.cache.set_partial_values([(key, offset, value)])
        old = self.model.get(key, b"")
        old = old + bytes(max(0, offset - len(old)))
        self.model[key] = old[:offset] + value + old[offset + len(value):]

    @rule(ops=st.lists(st.tuples(st.booleans(), keys, values), min_size=1, max_size=4),
          abort=st.booleans(), read_first=st.booleans())
    def write_transaction(self, ops, abort, read_first):
        pending = dict(self.model)
        try:
            with self.cache.transaction():
                if read_first:
                    assert self.cache.get_many(KEYS) == [pending.get(k) for k in KEYS]
                for is_set, key, value in ops:
                    if is_set:
                        self.cache.set(key, value)
                        pending[key] = value
                    else:
                        self.cache.erase(key)
                        pending.pop(key, None)
                    assert self.cache.get(key) == pending.get(key)
                if abort:
                    raise _Abort()
        except _Abort:
            return
        self.model = pending

    # -- commits of another handle, behind the cache's back -----------------------------------

    @rule(key=keys, value=values)
    def other_set(self, key, value):
        self.other.set(key, value)
        self.model[key] = value

    @rule(key=keys)
    def other_erase(self, key):
        self.other.erase(key)
        self.model.pop(key, None)

    # -- reads ---------------------------------------------------------------------------------

    @rule(key=keys)
    def get(self, key):
        assert self.cache.get(key) == self.model.get(key)

    @rule(ks=st.lists(keys, max_size=5))
    def get_many(self, ks):
        assert self.cache.get_many(ks) == [self.model.get(k) for k in ks]

    @rule(asks=st.lists(st.tuples(keys, requests), min_size=1, max_size=4))
    def get_partial(self, asks):
        want = [None if self.model.get(k) is None else apply_byte_request(self.model[k], r)
                for k, r in asks]
        assert self.cache.get_partial_values(asks) == want

    @rule(key=keys)
    def sizes(self, key):
        value = self.model.get(key)
        assert self.cache.exists(key) == (value is not None)
        assert self.cache.getsize(key) == (None if value is None else len(value))
        assert self.cache.exists_many([key, "c"]) == [value is not None, "c" in self.model]

    @rule(prefix=prefixes)
    def listings(self, prefix):
        under = sorted(k for k in self.model if k.startswith(prefix))
        assert list(self.cache.list_prefix(prefix)) == under
        children = sorted({k[len(prefix):].split("/")[0] + ("/" if "/" in k[len(prefix):]
                                                               else "") for k in under})
        assert list(self.cache.list_dir(prefix)) == children

    @rule(ks=st.lists(keys, min_size=1, max_size=4), key=keys, value=values,
          asks=st.lists(st.tuples(keys, requests), max_size=3))
    def read_transaction(self, ks, key, value, asks):
        """Reads in one read transaction see the state it began in, also after another
        handle commits in the middle (where the store lets it commit meanwhile)."""
        snapshot = dict(self.model)
        with self.cache.transaction(write=False):
            assert self.cache.get_many(ks) == [snapshot.get(k) for k in ks]
            if self.separate:
                writer = threading.Thread(target=self.other.set, args=(key, value))
                writer.start()
                writer.join(30)
                self.model[key] = value
            assert [self.cache.get(k) for k in ks] == [snapshot.get(k) for k in ks]
            assert self.cache.get_many(KEYS) == [snapshot.get(k) for k in KEYS]
            want = [None if snapshot.get(k) is None else apply_byte_request(snapshot[k], r)
                    for k, r in asks]
            assert self.cache.get_partial_values(asks) == want
            assert list(self.cache.list_prefix("")) == sorted(snapshot)

    @invariant()
    def within_its_bound(self):
        if self.cache is None:
            return
        stats = self.cache.stats()
        assert stats["bytes"] <= stats["max_bytes"]


class _Abort(Exception):
    pass


class CacheModelSQLite(CacheModel):
    kind = "sqlite"


class CacheModelLMDB(CacheModel):
    kind = "lmdb"


_SETTINGS = settings(max_examples=40, stateful_step_count=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("machine", [CacheModel, CacheModelSQLite, CacheModelLMDB],
                         ids=["memory", "sqlite", "lmdb"])
def test_cache_behaves_like_a_dict(machine):
    machine.TestCase.settings = _SETTINGS
    machine.TestCase().runTest()


def test_the_model_test_catches_a_stale_cache(monkeypatch):
    """The machine above fails if the cache stops checking the store's counter."""
    from kvzarr.transformers.cache import transformer
    monkeypatch.setattr(transformer.Cache, "_usable", lambda self, token: self._gen)
    monkeypatch.setattr(MemoryStore, "_change_counter", lambda self: 0)
    CacheModel.TestCase.settings = settings(
        _SETTINGS, max_examples=200, database=None, report_multiple_bugs=False,
        phases=[Phase.generate])                     # no shrinking: just find it
    try:
        with pytest.raises(AssertionError):
            CacheModel.TestCase().runTest()
    finally:
        CacheModel.TestCase.settings = _SETTINGS
