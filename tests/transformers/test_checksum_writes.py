"""Writes through the checksum transformer on every backend: records go and come with
their values in one transaction, a failed write leaves values and records as they were,
partial writes and appends keep records right (and refuse to vouch for damaged bytes),
records are never listed and their keys are refused from above, options are checked."""

from __future__ import annotations

import dataclasses
import os

import pytest

import kvzarr
from kvzarr.errors import (ChecksumMismatchError, ChecksumRecordError, ConflictError,
                           InvalidByteRangeError, InvalidKeyError, StoreConfigError,
                           StoreFullError, ValueTypeError)
from kvzarr.stores.byteranges import RangeRequest
from kvzarr.stores.filesystem import FilesystemStore
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.memory import MemoryStore
from kvzarr.transformers import Checksum, build_stack
from kvzarr.transformers.checksum import RECORD_PREFIX

from .checksum_helpers import everything, flip, record_of, stacked
from .conftest import StoreFactory

BS = 64


def _records(raw) -> set[str]:
    return {k[len(RECORD_PREFIX):] for k in raw.list_prefix(RECORD_PREFIX)}


def _values(raw) -> set[str]:
    return {k for k in raw.list() if not k.startswith(RECORD_PREFIX)}


def test_records_follow_their_values(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set("a/1", b"x" * 500)
    stack.set_many([("a/2", b"y" * 10), ("b/1", b""), ("a/1", b"z" * 70)])
    assert _records(raw) == _values(raw) == {"a/1", "a/2", "b/1"}
    assert stack.get("a/1") == b"z" * 70                 # the later item won, both
    stack.erase("a/2")
    stack.erase("never/there")
    stack.erase_values(["b/1", "nope"])
    assert _records(raw) == _values(raw) == {"a/1"}
    stack.set_many([("p/q/1", b"1"), ("p/q/2", b"2"), ("pq", b"3")])
    stack.erase_prefix("p/")
    assert _records(raw) == _values(raw) == {"a/1", "pq"}
    stack.erase_prefix("")
    assert everything(raw) == {}
    assert stack.stats()["records_written"] == 7


def test_a_failed_transaction_leaves_values_and_records(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    if not stack.capabilities.transactional:
        pytest.skip("no transactions")
    stack.set_many([("t/a", b"a" * 100), ("t/b", b"b" * 100)])
    before = everything(raw)
    with pytest.raises(RuntimeError):
        with stack.transaction():
            stack.set("t/a", b"changed")
            stack.set_many([("t/new", b"new"), ("t/b", b"B" * 300)])
            stack.erase("t/b")
            stack.erase_prefix("t/")
            assert stack.get("t/a") is None
            raise RuntimeError("abort")
    assert everything(raw) == before
    assert stack.get_many(["t/a", "t/b"]) == [b"a" * 100, b"b" * 100]


def test_records_read_in_a_transaction_follow_its_writes(store_factory: StoreFactory):
    stack, _ = stacked(store_factory, block_size=BS)
    stack.set("c/x", b"1" * 200)
    with stack.transaction():
        assert stack.get_partial_values([("c/x", RangeRequest(0, 3))]) == [b"111"]
        stack.set("c/x", b"2" * 90)
        assert stack.get_partial_values([("c/x", RangeRequest(80, 100))]) == [b"2" * 10]
        stack.erase("c/x")
        assert stack.get_partial_values([("c/x", RangeRequest(0, 1))]) == [None]
        stack.set_many([("c/x", b"3" * 65)])
        assert stack.get("c/x") == b"3" * 65
    assert stack.get("c/x") == b"3" * 65


@pytest.mark.parametrize("bad", [
    [("ok/1", b"1"), ("../escape", b"2")],
    [("ok/1", b"1"), ("ok/2", "text is not bytes")],
    [("ok/1", b"1"), (RECORD_PREFIX + "ok/1", b"forged")],
    [("ok/1", b"1"), ("ok/2", 12345)],
])
def test_a_failed_batch_changes_nothing(store_factory: StoreFactory, bad):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set("ok/1", b"old")
    before = everything(raw)
    with pytest.raises((InvalidKeyError, ValueTypeError)):
        stack.set_many(bad)
    with pytest.raises(InvalidKeyError):
        stack.erase_values(["ok/1", "/abs"])
    assert everything(raw) == before


def test_a_full_lmdb_map_keeps_neither_value_nor_record(tmp_path):
    raw = LMDBStore(tmp_path / "small.lmdb", map_size_start=1 << 20, map_size_max=1 << 21)
    stack = build_stack(raw, [Checksum()])
    stack.set("small", b"s")
    before = everything(raw)
    with pytest.raises(StoreFullError):
        stack.set("big", os.urandom(3 << 20))
    assert everything(raw) == before
    stack.close()


def test_keys_too_long_for_their_record_are_refused_first(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    limit = raw.max_key_bytes
    if limit is None:
        pytest.skip("the store takes keys of any length")
    assert stack.max_key_bytes == limit - len(RECORD_PREFIX)
    longest = "k/" + "x" * (stack.max_key_bytes - 2)
    stack.set(longest, b"fits")
    assert stack.get(longest) == b"fits"
    too_long = longest + "y"
    raw.set(too_long, b"the raw store takes it")      # so the stack is the one refusing
    before = everything(raw)
    for op in (lambda: stack.set(too_long, b"v"), lambda: stack.get(too_long),
               lambda: stack.set_many([("k/ok", b"1"), (too_long, b"2")])):
        with pytest.raises(InvalidKeyError, match="longer than"):
            op()
    assert everything(raw) == before


# -- records are the transformer's ---------------------------------------------------------

def test_records_are_never_listed(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set_many([("a/b", b"1"), ("z", b"2"), ("_x", b"3")])
    assert list(stack.list()) == ["_x", "a/b", "z"]
    assert list(stack.list_prefix("")) == ["_x", "a/b", "z"]
    assert list(stack.list_dir("")) == ["_x", "a/", "z"]
    assert list(stack.list_dir("__kvzarr/")) == []
    assert list(stack.list_prefix("__kvzarr/")) == []
    # another reserved key (a transformer above this one keeps its bookkeeping there)
    stack.set("__kvzarr/other/log", b"bookkeeping")
    assert list(stack.list_dir("")) == ["__kvzarr/", "_x", "a/", "z"]
    assert list(stack.list_dir("__kvzarr/")) == ["other/"]
    assert list(stack.list()) == ["__kvzarr/other/log", "_x", "a/b", "z"]
    assert list(stack.list_prefix("__kvzarr/")) == ["__kvzarr/other/log"]
    assert record_of(raw, "__kvzarr/other/log") is not None     # protected like any value
    assert stack.get("__kvzarr/other/log") == b"bookkeeping"
    # erasing the other reserved keys keeps every other value's record
    stack.erase_prefix("__kvzarr/")
    assert list(stack.list()) == ["_x", "a/b", "z"]
    assert _records(raw) == {"_x", "a/b", "z"}
    assert stack.get_many(["_x", "a/b", "z"]) == [b"3", b"1", b"2"]


def test_record_keys_are_refused_from_above(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set("v", b"value")
    before = everything(raw)
    name = RECORD_PREFIX + "v"
    ops = [lambda: stack.get(name), lambda: stack.set(name, b"x"), lambda: stack.erase(name),
           lambda: stack.exists(name), lambda: stack.getsize(name),
           lambda: stack.get_many([name]), lambda: stack.set_many([(name, b"x")]),
           lambda: stack.erase_values([name]), lambda: stack.exists_many([name]),
           lambda: stack.get_partial_values([(name, RangeRequest(0, 1))]),
           lambda: list(stack.list_prefix(RECORD_PREFIX)),
           lambda: list(stack.list_dir(RECORD_PREFIX)),
           lambda: stack.erase_prefix(RECORD_PREFIX),
           lambda: stack.erase_prefix(RECORD_PREFIX + "x/"),
           lambda: stack.verify(RECORD_PREFIX)]
    if stack.capabilities.partial_writes:
        ops.append(lambda: stack.set_partial_values([(name, 0, b"x")]))
    for op in ops:
        with pytest.raises(InvalidKeyError, match="checksum records"):
            op()
    assert everything(raw) == before


@pytest.mark.parametrize("options, field", [
    ({"bogus": 1}, "transformers.bogus"),
    ({"block_size": 0}, "transformers.block_size"),
    ({"block_size": 100}, "transformers.block_size"),
    ({"block_size": 32}, "transformers.block_size"),
    ({"block_size": 1 << 27}, "transformers.block_size"),
    ({"block_size": True}, "transformers.block_size"),
    ({"block_size": "64"}, "transformers.block_size"),
    ({"block_size": 4096.0}, "transformers.block_size"),
    ({"missing": "ignore"}, "transformers.missing"),
    ({"missing": None}, "transformers.missing"),
])
def test_bad_options_are_refused(options, field):
    with pytest.raises(StoreConfigError) as e:
        Checksum(**options)
    assert e.value.field == field
    store = MemoryStore()
    with pytest.raises(StoreConfigError):
        kvzarr.open_store(store, transformers=[{"name": "checksum", **options}])
    assert list(store.list()) == []


def test_names_options_and_info():
    stack = kvzarr.open_store(None, transformers=[{"name": "checksum", "block_size": 4096,
                                                    "missing": "warn"}])
    assert isinstance(stack, Checksum) and stack.options() == {"block_size": 4096,
                                                               "missing": "warn"}
    assert kvzarr.transformers.Checksum is Checksum
    assert repr(stack).startswith("Checksum(block_size=4096, missing='warn') > MemoryStore")
    a = kvzarr.create_array(stack, name="a", shape=(4,), dtype="u1")
    assert "checksum(block_size=4096, missing='warn')" in repr(a.info)


def test_reading_needs_no_writable_store(tmp_path):
    path = tmp_path / "d"
    kvzarr.open_store(str(path), transformers=["checksum"]).set("k", b"v")
    ro = kvzarr.open_store(str(path), mode="r", transformers=["checksum"])
    assert ro.read_only and ro.get("k") == b"v"


# -- partial writes ------------------------------------------------------------------------

def test_partial_writes_update_only_their_blocks(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    if not stack.capabilities.partial_writes:
        pytest.skip("no partial writes")
    model = bytearray(os.urandom(5 * BS + 10))
    stack.set("p/x", bytes(model))
    writes = [(3, b"abc"), (BS - 2, b"across"), (2 * BS, b"z" * BS), (5 * BS + 8, b"ends"),
              (8 * BS, b"after a gap")]
    stack.set_partial_values([("p/x", o, v) for o, v in writes] + [("p/new", 5, b"fresh")])
    for o, v in writes:
        model[len(model):o] = bytes(max(0, o - len(model)))
        model[o:o + len(v)] = v
    assert stack.get("p/x") == bytes(model)
    assert stack.get("p/new") == b"\x00" * 5 + b"fresh"
    assert stack.get_partial_values([("p/x", RangeRequest(6 * BS, 7 * BS))]) == [
        bytes(model[6 * BS:7 * BS])]
    assert stack.verify().ok and stack.verify().values == 2


def test_partial_writes_refuse_to_vouch_for_damaged_bytes(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    if not stack.capabilities.partial_writes:
        pytest.skip("no partial writes")
    stack.set("d/x", bytes(4 * BS))
    flip(raw, "d/x", BS + 5)
    before = everything(raw)
    with pytest.raises(ChecksumMismatchError) as e:     # block 1 is written in part
        stack.set_partial_values([("d/x", BS + 10, b"patch")])
    assert e.value.block == 1
    assert everything(raw) == before
    # a write that covers the damaged block whole replaces it: nothing to vouch for
    stack.set_partial_values([("d/x", BS, b"w" * BS)])
    assert stack.get("d/x") == bytes(BS) + b"w" * BS + bytes(2 * BS)
    raw.set(RECORD_PREFIX + "d/x", b"KVCR junk")
    before = everything(raw)
    with pytest.raises(ChecksumRecordError):
        stack.set_partial_values([("d/x", 0, b"x")])
    assert everything(raw) == before
    with pytest.raises(InvalidByteRangeError):
        stack.set_partial_values([("d/x", -1, b"x")])
    assert everything(raw) == before


def test_partial_writes_leave_unprotected_values_unprotected(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS, missing="trust")
    if not stack.capabilities.partial_writes:
        pytest.skip("no partial writes")
    raw.set("u/x", b"0123456789")
    stack.set_partial_values([("u/x", 2, b"AB")])
    assert raw.get("u/x") == b"01AB456789" and record_of(raw, "u/x") is None


# -- appends -------------------------------------------------------------------------------

class AppendingMemoryStore(MemoryStore):
    """A MemoryStore with the Store interface's compare-and-append, where the backend does
    not have one yet (the value is rewritten in memory; the contract is the same)."""
    capabilities = dataclasses.replace(MemoryStore.capabilities, appends=True)

    def _append(self, key, data, expected_size):
        with self.transaction():
            old = self._get(key)
            if old is None or len(old) != expected_size:
                raise ConflictError("the value changed size", key=key)
            self._set(key, old + data)


class AppendingFilesystemStore(FilesystemStore):
    """The same on a store without transactions (each rewrite atomic, by rename)."""
    capabilities = dataclasses.replace(FilesystemStore.capabilities, appends=True)

    def _append(self, key, data, expected_size):
        old = self._get(key)
        if old is None or len(old) != expected_size:
            raise ConflictError("the value changed size", key=key)
        self._set(key, old + data)


@pytest.fixture(params=["memory", "filesystem", "backend"])
def appending(request, store_factory, tmp_path):
    """A store with appends: the two above, and each backend that has them natively."""
    if request.param == "memory":
        if store_factory.name != "memory":
            pytest.skip("one run is enough")
        return AppendingMemoryStore()
    if request.param == "filesystem":
        if store_factory.name != "filesystem":
            pytest.skip("one run is enough")
        return AppendingFilesystemStore(tmp_path / "appending")
    raw = store_factory.make()
    if not raw.capabilities.appends:
        pytest.skip("the store has no appends")
    return raw


def test_appends_extend_the_record(appending):
    stack = build_stack(appending, [Checksum(block_size=BS)])
    assert stack.capabilities.appends
    model = b"start" * 20
    stack.set("ap/x", model)
    for piece in (b"", b"1", b"x" * (BS - 1), os.urandom(3 * BS + 7), b"yz"):
        stack.append("ap/x", piece, expected_size=len(model))
        model += piece
        assert stack.get("ap/x") == model
        assert stack.get_partial_values([("ap/x", RangeRequest(len(model) - 9, len(model)))]) \
            == [model[-9:]]
    assert stack.verify().ok


def test_appends_that_cannot_be_made_change_nothing(appending):
    stack = build_stack(appending, [Checksum(block_size=BS)])
    stack.set("ap/x", b"12345")
    before = everything(appending)
    for wrong in (4, 6, 0):
        with pytest.raises(ConflictError):
            stack.append("ap/x", b"more", expected_size=wrong)
    with pytest.raises(ConflictError):
        stack.append("ap/missing", b"more", expected_size=0)
    with pytest.raises(InvalidKeyError):
        stack.append(RECORD_PREFIX + "ap/x", b"more", expected_size=5)
    assert everything(appending) == before
    # the value was rewritten to the caller's size by another tool: the record is stale
    appending.set("ap/x", b"1234567")
    with pytest.raises(ChecksumMismatchError, match="its record says 5"):
        stack.append("ap/x", b"more", expected_size=7)
    assert appending.get("ap/x") == b"1234567"


def test_a_damaged_tail_stays_detectable_after_an_append(appending):
    stack = build_stack(appending, [Checksum(block_size=BS)])
    stack.set("ap/x", bytes(BS + 10))
    flip(appending, "ap/x", BS + 3)                  # in the last, partial block
    stack.append("ap/x", b"new bytes", expected_size=BS + 10)
    with pytest.raises(ChecksumMismatchError) as e:
        stack.get("ap/x")
    assert e.value.block == 1
    assert stack.get_partial_values([("ap/x", RangeRequest(0, 5))]) == [bytes(5)]


def test_appends_to_unprotected_values_keep_them_unprotected(appending):
    stack = build_stack(appending, [Checksum(block_size=BS, missing="trust")])
    appending.set("ap/u", b"abc")
    stack.append("ap/u", b"def", expected_size=3)
    assert appending.get("ap/u") == b"abcdef" and record_of(appending, "ap/u") is None


def test_a_refused_append_puts_the_record_back(tmp_path):
    """On a store without transactions a pending record goes before the append. When the
    store refuses the compare-and-append (the value changed size between the look at its
    record and the append: here a byte lands under the stack at that moment), the old
    record is put back: nothing claims the append happened."""
    raw = AppendingFilesystemStore(tmp_path / "d")
    stack = build_stack(raw, [Checksum(block_size=BS)])
    stack.set("k", b"12345")
    before = record_of(raw, "k")
    real_append = raw._append

    def raced(key, data, expected_size):
        real_append(key, b"!", expected_size)     # another writer's byte lands first
        real_append(key, data, expected_size)     # so ours is refused
    raw._append = raced
    with pytest.raises(ConflictError):
        stack.append("k", b"abc", expected_size=5)
    assert raw.get("k") == b"12345!" and record_of(raw, "k") == before
