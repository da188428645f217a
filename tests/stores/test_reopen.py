"""Stores crossing real processes (spawn and fork): each backend pickles to what opens
it again, the other process reads and writes the same data, a read-only store stays
read-only there, and a MemoryStore refuses with a clear error. (The in-process contract
is in the conformance suite, kvzarr.testing.)"""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

import kvzarr
from kvzarr.errors import NotPicklableError, ReadOnlyError

from .conftest import StoreFactory


def read_and_write(blob: bytes) -> tuple[str, bool, bytes | None, str]:
    """In the other process: unpickle the store, read a key, try to write one."""
    store = pickle.loads(blob)
    got = store.get("a/parent")
    try:
        store.set("a/child", b"from the child")
        wrote = "wrote"
    except ReadOnlyError:
        wrote = "ReadOnlyError"
    return type(store).__name__, store.read_only, got, wrote


def test_every_store_reopens_in_another_process(store_factory: StoreFactory,
                                                other_process: ProcessPoolExecutor) -> None:
    store = store_factory.make()
    store.set("a/parent", b"from the parent")
    if not store_factory.persistent:          # its data lives in this process only
        with pytest.raises(NotPicklableError, match="MemoryStore"):
            pickle.dumps(store)
        return
    got = other_process.submit(read_and_write, pickle.dumps(store)).result(60)
    assert got == (type(store).__name__, False, b"from the parent", "wrote")
    assert store.get("a/child") == b"from the child"


def test_a_read_only_store_stays_read_only_in_another_process(
        store_factory: StoreFactory, other_process: ProcessPoolExecutor) -> None:
    if not store_factory.persistent:
        pytest.skip("a store whose data lives in its handle has no read-only reopening")
    store_factory.make().set("a/parent", b"p")
    read_only = store_factory.reopen(read_only=True)
    got = other_process.submit(read_and_write, pickle.dumps(read_only)).result(60)
    assert got == (type(read_only).__name__, True, b"p", "ReadOnlyError")
    assert read_only.get("a/child") is None


def test_a_transformer_stack_pickles_with_its_options(
        tmp_path, other_process: ProcessPoolExecutor) -> None:
    stack = kvzarr.open_store(tmp_path / "s.sqlite", transformers=[
        {"name": "cache", "max_bytes": 1 << 16}, {"name": "checksum", "block_size": 1024}])
    stack.set("a/parent", b"p" * 5000)
    got = other_process.submit(describe_stack, pickle.dumps(stack)).result(60)
    assert got == [("Cache", {"max_bytes": 1 << 16}),
                   ("Checksum", {"block_size": 1024, "missing": "fail"}),
                   ("SQLStore", {})]
    # the other process wrote through its checksum layer: the record verifies here
    assert stack.get("a/child") == b"c" * 3000
    stack.close()


def describe_stack(blob: bytes) -> list[tuple[str, dict]]:
    from kvzarr.transformers import stack_layers
    stack = pickle.loads(blob)
    assert stack.get("a/parent") == b"p" * 5000      # read through the checksum layer
    stack.set("a/child", b"c" * 3000)
    return [(type(layer).__name__, layer.options() if hasattr(layer, "options") else {})
            for layer in stack_layers(stack)]


def test_memory_store_refusal_says_what_to_do() -> None:
    with pytest.raises(NotPicklableError) as info:
        pickle.dumps(kvzarr.MemoryStore())
    text = str(info.value)
    assert isinstance(info.value, TypeError)
    assert "MemoryStore" in text and "this process's memory" in text
    assert ".lmdb" in text and "threads" in text          # the hint: how to fix it


def test_a_store_opened_for_one_process_only_is_not_sent_to_another(tmp_path) -> None:
    from kvzarr.stores.lmdb import LMDBStore
    with LMDBStore(tmp_path / "x.lmdb", lock=False) as store:
        with pytest.raises(NotPicklableError, match="one process only"):
            pickle.dumps(store)
