"""Writes that encode on the worker pool while a transactional store writes the batches
already encoded (kvzarr/engine/encode_ahead.py): the same stored bytes as a store written
without the pipeline, and a failure half way through leaves the store unchanged."""

from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest
from sqlalchemy import event

import kvzarr
from kvzarr.engine import chunk_io
from kvzarr.errors import StoreFullError
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.sql import SQLStore

BLOSC = [{"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3,
                                             "shuffle": "shuffle", "typesize": 4,
                                             "blocksize": 0}}]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of a few chunks, so a 1 MiB write is many batches in flight."""
    monkeypatch.setattr(chunk_io, "_PIPELINE_BATCH_BYTES", 48 * 1024)


def _contents(store) -> dict[str, bytes]:
    return {k: store.get(k) for k in store.list()}


def _transactional(kind: str, tmp_path):
    if kind == "memory":
        return kvzarr.MemoryStore()
    if kind == "lmdb":
        return LMDBStore(tmp_path / "a.lmdb")
    return SQLStore(tmp_path / "a.db")


@pytest.mark.parametrize("kind", ["memory", "lmdb", "sql"])
def test_pipelined_write_stores_what_a_chunk_by_chunk_write_stores(kind, tmp_path,
                                                                   small_batches) -> None:
    rng = np.random.default_rng(16)
    data = rng.normal(size=(600, 520)).astype("float32")
    data[64:192, :] = 0          # whole chunks equal to the fill value: erased, not stored
    stores = {"pipelined": _transactional(kind, tmp_path),
              # the directory store has no transactions: each chunk stored by itself
              "reference": kvzarr.FilesystemStore(tmp_path / "ref.zarr")}
    for store in stores.values():
        a = kvzarr.create_array(store, shape=data.shape, chunks=(64, 64), dtype="float32",
                                compressors=BLOSC, fill_value=0)
        a[...] = 1               # every chunk stored, so the zeros must erase some
        a[...] = data            # whole chunks plus partial edge chunks (600, 520)
        a[10:590, 3:517] = data[10:590, 3:517] * 2   # partial chunks on every side
        np.testing.assert_array_equal(a[...][10:590, 3:517], data[10:590, 3:517] * 2)
    pipelined, reference = (_contents(s) for s in stores.values())
    assert pipelined.keys() == reference.keys()
    assert pipelined == reference
    assert "c/1/0" not in pipelined     # rows 64-127: zeros, erased


def test_store_failure_half_way_through_a_pipelined_write_keeps_nothing(
        tmp_path, small_batches) -> None:
    store = SQLStore(tmp_path / "full.db")
    a = kvzarr.create_array(store, shape=(512, 512), chunks=(64, 64), dtype="float32",
                            compressors=BLOSC)
    a[0:64, :] = 5
    before = _contents(store)
    with sqlite3.connect(tmp_path / "full.db") as db:
        pages = db.execute("PRAGMA page_count").fetchone()[0]

    @event.listens_for(store.engine, "connect")
    def _small(dbapi_conn, record):   # room for about a third of the new chunks
        dbapi_conn.execute(f"PRAGMA max_page_count = {pages + 20}")

    store.engine.dispose()
    noise = np.frombuffer(os.urandom(512 * 512 * 4), dtype="float32").copy()
    noise[np.isnan(noise)] = 1
    with pytest.raises(StoreFullError):
        a[...] = noise.reshape(512, 512)     # incompressible: ~1 MiB to store
    assert _contents(store) == before
    np.testing.assert_array_equal(a[0:64, :], 5)
    store.close()
