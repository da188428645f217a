"""The transformer base and the stack builder: order, binding, errors, transactions and
closing through a stack. A pass-through transformer (the base class as it is, plus a
counter) stands in for the real ones, whose own tests live beside this file."""

from __future__ import annotations

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import StoreConfigError
from kvzarr.stores.memory import MemoryStore
from kvzarr.transformers import Transformer, build_stack, stack_layers
from kvzarr.transformers.base import reject_unknown_options


class Passing(Transformer):
    """Delegates everything; counts the gets that reach it."""
    name = "passing"

    def __init__(self, base=None, *, tag="p", **unknown):
        reject_unknown_options("Passing", unknown)
        self.tag = tag
        self.gets = 0
        super().__init__(base)

    def get(self, key):
        self.gets += 1
        return super().get(key)

    def options(self):
        return {"tag": self.tag}

    def stats(self):
        return {"gets": self.gets}


class Writer(Passing):
    name = "writer"
    needs_write = True


def test_items_are_listed_from_the_array_down_to_the_store():
    store = MemoryStore()
    top, middle = Passing(tag="top"), Passing(tag="middle")
    stack = build_stack(store, [top, middle])
    assert stack is top
    assert stack_layers(stack) == [top, middle, store]
    assert top.base is middle and middle.base is store


def test_a_stack_reads_and_writes_what_its_store_holds():
    store = MemoryStore()
    stack = build_stack(store, [Passing(), Passing()])
    stack.set("a/b", b"1")
    stack.set_many([("a/c", b"2"), ("d", b"3")])
    assert store.get("a/b") == b"1"
    assert stack.get_many(["a/b", "a/c", "x"]) == [b"1", b"2", None]
    assert list(stack.list()) == ["a/b", "a/c", "d"]
    assert list(stack.list_dir("")) == ["a/", "d"]
    stack.erase_prefix("a/")
    assert list(store.list()) == ["d"]


def test_a_transaction_of_the_stack_is_one_transaction_of_the_store():
    store = MemoryStore()
    stack = build_stack(store, [Passing()])
    with pytest.raises(RuntimeError):
        with stack.transaction():
            stack.set("k", b"v")
            assert stack.get("k") == b"v"          # visible inside
            raise RuntimeError("abort")
    assert store.get("k") is None                  # rolled back in the store
    with stack.transaction():
        stack.set("k", b"v")
        with stack.transaction():                  # nested: joins
            stack.set("j", b"w")
    assert store.get_many(["k", "j"]) == [b"v", b"w"]


def test_closing_the_top_closes_the_store(tmp_path):
    store = kvzarr.FilesystemStore(tmp_path / "d")
    stack = build_stack(store, [Passing()])
    stack.close()
    assert store._closed


def test_a_transformer_belongs_to_one_stack():
    t = Passing()
    build_stack(MemoryStore(), [t])
    with pytest.raises(StoreConfigError, match="already part of a stack"):
        build_stack(MemoryStore(), [t])
    u = Passing()
    with pytest.raises(StoreConfigError, match="listed twice"):
        build_stack(MemoryStore(), [u, u])
    assert not u.bound                              # a bad list binds nothing


def test_an_unbound_transformer_says_so():
    with pytest.raises(StoreConfigError, match="not part of a stack"):
        Passing().get("k")


@pytest.mark.parametrize("item, match", [
    ("nope", "unknown storage transformer"),
    ({"name": "nope"}, "unknown storage transformer"),
    ({"max_bytes": 1}, "unknown storage transformer"),
    (42, "a transformer is a name"),
])
def test_bad_items_are_kvzarr_errors_and_leave_the_store_open(tmp_path, item, match):
    store = MemoryStore()
    store.set("k", b"v")
    with pytest.raises(StoreConfigError, match=match):
        kvzarr.open_store(store, transformers=[item])
    assert store.get("k") == b"v" and not store._closed


def test_unknown_options_are_kvzarr_errors():
    with pytest.raises(StoreConfigError, match="no option"):
        Passing(bogus=1)


def test_a_store_opened_for_a_bad_stack_is_closed_again(tmp_path):
    path = tmp_path / "x.lmdb"
    with pytest.raises(StoreConfigError):
        kvzarr.open_store(str(path), transformers=["nope"])
    # the environment was released: it opens again in this process, writable
    with kvzarr.open_store(str(path)) as store:
        store.set("k", b"v")


def test_a_writing_transformer_over_a_read_only_store_is_refused(tmp_path):
    path = tmp_path / "d"
    kvzarr.FilesystemStore(path).set("k", b"v")
    with pytest.raises(StoreConfigError, match="read-only"):
        build_stack(kvzarr.FilesystemStore(path, read_only=True), [Writer()])
    stack = build_stack(kvzarr.FilesystemStore(path, read_only=True), [Passing()])
    assert stack.read_only and stack.get("k") == b"v"
    with pytest.raises(kvzarr.errors.ReadOnlyError):
        stack.set("k", b"w")


def test_arrays_open_through_a_stack_and_info_shows_it(tmp_path):
    t = Passing(tag="x")
    a = kvzarr.create_array(str(tmp_path / "a.zarr"), shape=(8,), chunks=(4,), dtype="i4",
                            transformers=[t])
    a[:] = np.arange(8)
    assert a.store is t
    b = kvzarr.open_array(str(tmp_path / "a.zarr"), mode="r", transformers=[Passing()])
    np.testing.assert_array_equal(b[:], np.arange(8))
    info = repr(a.info)
    assert "passing(tag='x') [gets " in info and "FilesystemStore(" in info
    g = kvzarr.create_group(str(tmp_path / "g.zarr"), transformers=[Passing(tag="g")])
    child = g.create_array("c", shape=(2,), dtype="u1")
    assert child.store is g.store and child.store.tag == "g"   # children share the stack
    h = kvzarr.open(str(tmp_path / "g.zarr"), mode="r", transformers=[])
    assert list(h.keys()) == ["c"]
