"""Listing is a range scan on every ordered store: listing one small prefix, and the children
of a directory, cost about the same among 1,000,000 keys as among 1,000 (the SQL store's
own test also checks its query plan)."""

from __future__ import annotations

import time

import pytest

from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.memory import MemoryStore
from kvzarr.stores.zip import ZipStore

WANTED = [f"arr/target/c/{i}" for i in range(10)]


def fill(store, n: int) -> None:
    store.set_many([(f"arr/other/c/{i:07d}", b"") for i in range(n)]
                   + [(k, b"") for k in WANTED])


def best_time(store) -> float:
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(50):
            assert list(store.list_prefix("arr/target/")) == sorted(WANTED)
            assert list(store.list_dir("arr/")) == ["other/", "target/"]
        best = min(best, time.perf_counter() - t)
    return best


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: MemoryStore(), id="memory"),
    pytest.param(lambda p: LMDBStore(p / "x.lmdb", durability="none"), id="lmdb"),
    pytest.param(lambda p: ZipStore(p / "x.zip", fsync=False), id="zip"),
])
def test_listing_a_prefix_costs_the_same_in_a_million_keys(tmp_path, make):
    (tmp_path / "small").mkdir()
    (tmp_path / "big").mkdir()
    small, big = make(tmp_path / "small"), make(tmp_path / "big")
    fill(small, 1_000)
    fill(big, 1_000_000)
    assert best_time(big) < 5 * best_time(small)
    small.close()
    big.close()
