"""Processes creating arrays in one consolidated group at once: every array appears in
the group's consolidated metadata (no lost update of the shared document), on the
transactional stores (LMDB, SQLite, PostgreSQL when ``KVZARR_TEST_POSTGRES_URL`` names a
server) and on the directory store (which takes its key lock around each update of the
member). Two writer processes take every store in turn, starting together on each."""

from __future__ import annotations

import multiprocessing as mp
import os

import kvzarr

from .conftest import assert_member_true, stored_member

CONTEXT = mp.get_context("spawn")
EACH = 8


def _targets(tmp_path):
    targets = [("lmdb", str(tmp_path / "data.lmdb")), ("sqlite", str(tmp_path / "data.sqlite")),
               ("directory", str(tmp_path / "data.zarr"))]
    if os.environ.get("KVZARR_TEST_POSTGRES_URL"):
        targets.append(("postgresql", os.environ["KVZARR_TEST_POSTGRES_URL"]))
    return targets


def _open(target, table):
    if target.startswith("postgresql"):
        from kvzarr.stores.sql import SQLStore
        return SQLStore(target, table=table)
    return kvzarr.open_store(target)


def _creator(targets, table, prefix, barrier):
    for _, target in targets:
        store = _open(target, table)
        root = kvzarr.open_group(store, mode="r+")
        barrier.wait(60)                       # both writers start on this store together
        for i in range(EACH):
            name = f"{prefix}{i:02d}"
            root.create_array(name, shape=(2,), dtype="int32", attributes={"i": i})
            if i % 4 == 0:
                root[name].attrs["touched"] = prefix
        store.close()


def test_processes_creating_arrays_all_appear_in_the_member(tmp_path):
    targets = _targets(tmp_path)
    table = f"t_cm_{os.getpid()}"
    for _, target in targets:
        store = _open(target, table)
        kvzarr.open_group(store, mode="w")
        kvzarr.consolidate_metadata(store)
        store.close()

    barrier = CONTEXT.Barrier(2)
    procs = [CONTEXT.Process(target=_creator, args=(targets, table, p, barrier)) for p in "pq"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0, 0]

    for kind, target in targets:
        store = _open(target, table)
        try:
            names = set(stored_member(store)["metadata"])
            assert names == {f"{p}{i:02d}" for p in "pq" for i in range(EACH)}, kind
            assert_member_true(store)
        finally:
            if kind == "postgresql":
                kvzarr.open_group(store, mode="w")
            store.close()
