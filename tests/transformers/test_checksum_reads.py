"""Reads through the checksum transformer on every backend: single bits flipped in stored
values and records (through the raw store under the stack) are caught by every read that
touches them, whole or ranged, batched or streamed, and by array reads of plain and
sharded arrays; reads that touch only good blocks still succeed; values without records
follow ``missing=``."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import (ChecksumMismatchError, ChecksumMissingError, ChecksumRecordError,
                           UnprotectedValueWarning)
from kvzarr.stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest
from kvzarr.transformers import Checksum, build_stack
from kvzarr.transformers.checksum import RECORD_PREFIX

from .checksum_helpers import flip, record_of, stacked
from .conftest import StoreFactory

BS = 256
VALUE = os.urandom(5 * BS + 100)          # six blocks, the last one short
#: first and last byte of blocks and of the value, and one inside a block
POSITIONS = [0, BS - 1, BS, 2 * BS - 1, 3 * BS + 17, 5 * BS, len(VALUE) - 1]
OTHER = b"another value, never damaged"


def _ranges_touching(at: int) -> list:
    return [RangeRequest(at, at + 1), RangeRequest(max(0, at - 3), at + 3),
            OffsetRequest(at), SuffixRequest(len(VALUE) - at), None]


def _good_range(at: int) -> RangeRequest:
    """A range inside a block other than the damaged one."""
    block = at // BS
    other = 0 if block else 1
    return RangeRequest(other * BS + 5, other * BS + 50)


@pytest.mark.parametrize("at", POSITIONS)
def test_every_read_that_touches_a_flipped_bit_fails(store_factory: StoreFactory, at: int):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set_many([("v/x", VALUE), ("v/other", OTHER)])
    for bit in (0, 7):
        raw.set("v/x", VALUE)
        flip(raw, "v/x", at, bit)
        with pytest.raises(ChecksumMismatchError) as e:
            stack.get("v/x")
        err = e.value
        assert type(err) is ChecksumMismatchError
        assert err.key == "v/x" and err.block == at // BS
        assert err.stored != err.computed and err.stored is not None
        assert f"block {at // BS}" in str(err) and f"{err.stored:08x}" in str(err) \
            and f"{err.computed:08x}" in str(err) and "'v/x'" in str(err)
        with pytest.raises(ChecksumMismatchError, match="block"):
            stack.get_many(["v/other", "v/x"])
        with stack.transaction(write=False):
            with pytest.raises(ChecksumMismatchError):
                stack.get_many_views(["v/other", "v/x"])
        with stack.transaction(write=False):
            with pytest.raises(ChecksumMismatchError):
                for _, value in stack.iter_values(["v/other", "v/x"]):
                    bytes(value)
        for request in _ranges_touching(at):
            with pytest.raises(ChecksumMismatchError) as e:
                stack.get_partial_values([("v/other", None), ("v/x", request)])
            assert e.value.block == at // BS, request
        # ranges that touch only good blocks are served, right
        good = _good_range(at)
        assert stack.get_partial_values([("v/x", good), ("v/other", RangeRequest(0, 7))]) \
            == [VALUE[good.start:good.end], OTHER[:7]]
    assert stack.stats()["mismatches"] >= 2 * (3 + len(_ranges_touching(at)))


def test_a_flipped_bit_in_a_record_names_the_value(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set("r/x", VALUE)
    good = record_of(raw, "r/x")
    for at in (0, 4, 5, 8, 12, 20, len(good) // 2, len(good) - 5, len(good) - 1):
        damaged = bytearray(good)
        damaged[at] ^= 0x10
        raw.set(RECORD_PREFIX + "r/x", bytes(damaged))
        for read in (lambda: stack.get("r/x"), lambda: stack.get_many(["r/x"]),
                     lambda: stack.get_partial_values([("r/x", RangeRequest(0, 10))])):
            with pytest.raises(ChecksumRecordError, match="record of this value is damaged") \
                    as e:
                read()
            assert e.value.key == "r/x"
    raw.set(RECORD_PREFIX + "r/x", good)
    assert stack.get("r/x") == VALUE
    assert stack.stats()["record_errors"] == 27


def test_a_value_shorter_or_longer_than_its_record_fails(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set("l/x", VALUE)
    for changed in (VALUE[:-1], VALUE + b"!", VALUE[:2 * BS], VALUE + bytes(BS)):
        raw.set("l/x", changed)
        with pytest.raises(ChecksumMismatchError, match="bytes long, its record says"):
            stack.get("l/x")
        # the last block is read with one byte more than the record has, so a range
        # there sees a longer value too
        with pytest.raises(ChecksumMismatchError, match="its record says"):
            stack.get_partial_values([("l/x", SuffixRequest(3))])
    raw.set("l/x", VALUE[:BS * 3])        # ends at a block boundary
    with pytest.raises(ChecksumMismatchError):
        stack.get_partial_values([("l/x", RangeRequest(3 * BS - 2, 3 * BS + 10))])
    assert stack.get_partial_values([("l/x", RangeRequest(0, 10))]) == [VALUE[:10]]


def test_empty_values_and_empty_requests(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set_many([("e/empty", b""), ("e/v", VALUE)])
    assert stack.get("e/empty") == b""
    assert stack.get_partial_values([
        ("e/empty", RangeRequest(0, 5)), ("e/empty", SuffixRequest(0)), ("e/v", SuffixRequest(0)),
        ("e/v", RangeRequest(7, 7)), ("e/missing", RangeRequest(0, 0))]) == [b"", b"", b"", b"",
                                                                            None]
    raw.set("e/empty", b"x")             # an empty value that grew
    with pytest.raises(ChecksumMismatchError):
        stack.get("e/empty")


def test_absent_values_are_none_with_or_without_a_record(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set("a/x", VALUE)
    raw.erase("a/x")                     # a record without its value reads as absent
    assert stack.get("a/x") is None
    assert stack.get_many(["a/x", "a/never"]) == [None, None]
    assert stack.get_partial_values([("a/x", RangeRequest(0, 1)), ("a/x", None)]) == [None,
                                                                                       None]


# -- values without records ----------------------------------------------------------------

def _foreign(factory: StoreFactory, missing: str):
    stack, raw = stacked(factory, block_size=BS, missing=missing)
    raw.set("f/x", VALUE)                # written by another tool: no record
    stack.set("f/mine", OTHER)
    return stack


def _all_reads(stack):
    """Every way to read ``f/x``, each a callable returning its bytes."""
    def views():
        with stack.transaction(write=False):
            return bytes(stack.get_many_views(["f/x"])[0])

    def streamed():
        with stack.transaction(write=False):
            return dict((i, bytes(v)) for i, v in stack.iter_values(["f/mine", "f/x"]))[1]

    return [lambda: stack.get("f/x"), lambda: stack.get_many(["f/mine", "f/x"])[1],
            lambda: stack.get_partial_values([("f/x", RangeRequest(1, 4)),
                                              ("f/mine", None)])[0], views, streamed]


def test_missing_fail_refuses_values_without_records(store_factory: StoreFactory):
    stack = _foreign(store_factory, "fail")
    for read in _all_reads(stack):
        with pytest.raises(ChecksumMissingError, match="no checksum record") as e:
            read()
        assert e.value.key == "f/x" and isinstance(e.value, ChecksumMismatchError)
    assert stack.get("f/mine") == OTHER
    assert stack.stats()["unprotected_reads"] == 5


def test_missing_warn_returns_them_with_a_warning(store_factory: StoreFactory):
    stack = _foreign(store_factory, "warn")
    with pytest.warns(UnprotectedValueWarning, match="f/x") as caught:
        got = [read() for read in _all_reads(stack)]
    assert got == [VALUE, VALUE, VALUE[1:4], VALUE, VALUE]
    assert len(caught) == 5
    assert stack.stats()["unprotected_reads"] == 5


def test_missing_trust_returns_them_silently(store_factory: StoreFactory):
    stack = _foreign(store_factory, "trust")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [read() for read in _all_reads(stack)] == [VALUE, VALUE, VALUE[1:4], VALUE, VALUE]
    stats = stack.stats()
    assert stats["unprotected_reads"] == 5 and stats["mismatches"] == 0


def test_stats_count_what_was_verified(store_factory: StoreFactory):
    stack, _ = stacked(store_factory, block_size=BS)
    stack.set_many([("s/a", VALUE), ("s/b", OTHER)])
    stack.get_many(["s/a", "s/b", "s/none"])
    stack.get_partial_values([("s/a", RangeRequest(0, 1)), ("s/a", RangeRequest(BS + 1, BS + 2))])
    s = stack.stats()
    assert s["values_verified"] == 2 and s["range_reads_verified"] == 1
    assert s["bytes_verified"] == len(VALUE) + len(OTHER) + 2 * BS
    assert s["records_written"] == 2 and s["mismatches"] == 0


# -- arrays --------------------------------------------------------------------------------

def test_array_reads_of_plain_chunks(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=64)
    data = np.arange(40 * 40, dtype="u2").reshape(40, 40)
    a = kvzarr.create_array(stack, name="p", shape=data.shape, chunks=(10, 10), dtype="u2",
                            compressors=None, fill_value=0)
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    flip(raw, "p/c/1/2", 150, 3)
    with pytest.raises(ChecksumMismatchError) as e:
        a[...]
    assert e.value.key == "p/c/1/2" and e.value.block == 2
    with pytest.raises(ChecksumMismatchError):
        a[12, 25]
    np.testing.assert_array_equal(a[:10, :], data[:10, :])     # other chunks read fine
    np.testing.assert_array_equal(a[10:20, :20], data[10:20, :20])


def test_array_tile_reads_of_sharded_arrays(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=64)
    data = (np.arange(32 * 32, dtype="u2") * 7).reshape(32, 32)
    a = kvzarr.create_array(stack, name="s", shape=data.shape, chunks=(8, 8), shards=(32, 32),
                            dtype="u2", compressors=None, fill_value=0)
    a[...] = data
    shard = raw.get("s/c/0/0")
    entries = np.frombuffer(shard[-(16 * 16 + 4):-4], "<u8").reshape(4, 4, 2)
    offset, nbytes = (int(x) for x in entries[2, 1])
    assert nbytes == 128
    # a bit in inner chunk (2, 1): a tile read of it fails, tiles elsewhere do not
    flip(raw, "s/c/0/0", offset + 100, 1)
    with pytest.raises(ChecksumMismatchError) as e:
        a[16:24, 8:16]
    assert e.value.key == "s/c/0/0"
    assert e.value.block == (offset + 100) // 64
    far = [(i, j) for i in range(4) for j in range(4)
           if abs(int(entries[i, j, 0]) - offset) >= 3 * 64]
    for i, j in far:
        np.testing.assert_array_equal(a[8 * i:8 * i + 8, 8 * j:8 * j + 8],
                                      data[8 * i:8 * i + 8, 8 * j:8 * j + 8])
    with pytest.raises(ChecksumMismatchError):
        a[...]
    # a bit in the shard index: every tile read fails (each reads the index first)
    raw.set("s/c/0/0", shard)
    np.testing.assert_array_equal(a[...], data)
    flip(raw, "s/c/0/0", len(shard) - 30)
    for i, j in far[:3]:
        with pytest.raises(ChecksumMismatchError):
            a[8 * i:8 * i + 8, 8 * j:8 * j + 8]
    assert stack.stats()["range_reads_verified"] > 0


def test_tile_reads_read_and_verify_only_blocks_they_touch(store_factory: StoreFactory):
    """A tile of a big shard costs its blocks and the index's, not the shard."""
    stack, raw = stacked(store_factory, block_size=1024)
    data = np.arange(256 * 256, dtype="u2").reshape(256, 256)
    a = kvzarr.create_array(stack, name="t", shape=data.shape, chunks=(16, 16),
                            shards=(256, 256), dtype="u2", compressors=None, fill_value=0)
    a[...] = data
    before = stack.stats()["bytes_verified"]
    np.testing.assert_array_equal(a[16:32, 48:64], data[16:32, 48:64])
    verified = stack.stats()["bytes_verified"] - before
    assert 512 <= verified <= 4 * 1024 + 4096          # chunk and index blocks only
    assert raw.getsize("t/c/0/0") > 100_000


def test_a_stack_reads_what_another_stack_wrote(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=64)
    stack.set("x", VALUE)
    again = build_stack(raw, [Checksum(block_size=4096)])   # records keep their block size
    assert again.get("x") == VALUE
    assert again.get_partial_values([("x", RangeRequest(100, 200))]) == [VALUE[100:200]]


def test_bulk_reads_catch_a_flipped_bit_in_any_value(store_factory: StoreFactory):
    """Whole-array reads of big plain chunks: on stores with snapshots the values are
    verified ahead of the copies, in 4 MiB groups shared with a pool worker; on the
    others as they come. Either way every damaged value fails the read, with its key."""
    stack, raw = stacked(store_factory)
    data = np.arange(24 * 64 * 1024, dtype="f4").reshape(24 * 64, 1024)  # 256 KiB chunks
    a = kvzarr.create_array(stack, name="b", shape=data.shape, chunks=(64, 1024), dtype="f4",
                            compressors=None, fill_value=0)
    a[...] = data
    before = stack.stats()["values_verified"]
    np.testing.assert_array_equal(a[...], data)
    assert stack.stats()["values_verified"] - before == 24
    for victim, at in ((0, 0), (13, 70_000), (23, 256 * 1024 - 1)):
        old = flip(raw, f"b/c/{victim}/0", at, 6)
        with pytest.raises(ChecksumMismatchError) as e:
            a[...]
        assert e.value.key == f"b/c/{victim}/0" and e.value.block == at // (16 * 1024)
        raw.set(f"b/c/{victim}/0", old)
    np.testing.assert_array_equal(a[...], data)
    # a reader that stops early leaves no check running on the transaction's values
    keys = [f"b/c/{i}/0" for i in range(24)]
    with stack.transaction(write=False):
        values = stack.iter_values(keys)
        i, first = next(values)
        assert bytes(first) == data[64 * i:64 * (i + 1)].tobytes()
        values.close()
    stack.close()
