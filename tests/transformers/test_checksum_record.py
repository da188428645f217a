"""The checksum record format and its CRC-32C arithmetic (kvzarr.transformers.checksum.
record), against plain models: CRC-32C of the bytes computed directly (the crc32c
package, and google-crc32c as an independent implementation), block by block."""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.transformers.checksum import record as rec
from kvzarr.transformers.checksum.record import (STATE_ABSENT, STATE_UNPROTECTED,
                                                 RecordFormatError)
from kvzarr.transformers.checksum.writes import _appended

block_sizes = st.sampled_from([16, 32, 64, 256, 4096])
values = st.binary(max_size=3000)


def crc(data: bytes) -> int:
    return google_crc32c.value(bytes(data))      # an implementation other than ours


def test_known_answer():
    # RFC 3720, appendix B.4: 32 bytes of zeros
    assert rec.crc32c(bytes(32)) == 0x8A9136AA
    assert crc(bytes(32)) == 0x8A9136AA


@settings(max_examples=200, deadline=None)
@given(data=values, block_size=block_sizes)
def test_state_of_is_the_checksum_of_every_block(data, block_size):
    state = rec.state_of(data, block_size)
    assert state.length == len(data)
    assert state.whole == crc(data)
    assert list(state.blocks) == [crc(data[i:i + block_size])
                                  for i in range(0, len(data), block_size)]
    assert rec.check_whole(state, data, block_size) is None
    assert rec.whole_from_blocks(state.blocks, len(data), block_size) == state.whole


@settings(max_examples=200, deadline=None)
@given(a=values, b=values)
def test_combine(a, b):
    assert rec.combine(crc(a), crc(b), len(b)) == crc(a + b)


@settings(max_examples=200, deadline=None)
@given(old=values, new=values, block_size=block_sizes)
def test_an_appended_state_is_the_state_of_the_whole_value(old, new, block_size):
    grown = _appended(rec.state_of(old, block_size), new, block_size)
    assert grown.same(rec.state_of(old + new, block_size))


@settings(max_examples=100, deadline=None)
@given(data=values, older=st.one_of(values, st.just(None), st.just(b"unprotected")),
       block_size=block_sizes)
def test_records_round_trip(data, older, block_size):
    states = [rec.state_of(data, block_size)]
    if older is None:
        states.append(STATE_ABSENT)
    elif older == b"unprotected":
        states.append(STATE_UNPROTECTED)
    elif older != data:
        states.append(rec.state_of(older, block_size))
    raw = rec.encode(block_size, states)
    got = rec.decode(raw)
    assert got.block_size == block_size and got.raw == raw
    assert got.final == (len(states) == 1)
    assert len(got.states) == len(states)
    assert all(a.same(b) for a, b in zip(got.states, states))


@settings(max_examples=15, deadline=None)
@given(data=st.binary(max_size=600), block_size=block_sizes)
def test_every_single_bit_flip_of_a_record_is_caught(data, block_size):
    raw = rec.encode(block_size, [rec.state_of(data, block_size), STATE_ABSENT])
    for bit in range(len(raw) * 8):
        damaged = bytearray(raw)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(RecordFormatError):
            rec.decode(bytes(damaged))


@settings(max_examples=100, deadline=None)
@given(data=st.binary(min_size=1, max_size=2000), block_size=block_sizes,
       where=st.integers(min_value=0), bit=st.integers(0, 7))
def test_a_flipped_bit_is_found_in_its_block(data, block_size, where, bit):
    state = rec.state_of(data, block_size)
    at = where % len(data)
    damaged = bytearray(data)
    damaged[at] ^= 1 << bit
    m = rec.check_whole(state, damaged, block_size)
    assert m is not None and m.block == at // block_size
    assert m.stored == state.blocks[m.block] != m.computed
    assert m.computed == crc(damaged[m.block * block_size:(m.block + 1) * block_size])
    first = m.block
    span = damaged[first * block_size:(first + 2) * block_size]
    assert rec.first_bad_block(state, span, block_size, first).block == m.block


def test_lengths_that_differ_are_mismatches():
    state = rec.state_of(b"x" * 100, 32)
    assert rec.check_whole(state, b"x" * 99, 32).block == 3
    assert rec.check_whole(state, b"x" * 101, 32).block == 3
    assert "101 bytes long, its record says 100" in rec.check_whole(state, b"x" * 101,
                                                                    32).detail
    assert not rec.matches(state, b"x" * 99, 32) and rec.matches(state, b"x" * 100, 32)


def _sealed(body: bytes) -> bytes:
    return body + rec.crc32c(body).to_bytes(4, "little")


@pytest.mark.parametrize("raw, reason", [
    (b"", "too short"),
    (b"KVCR\x01\x06\x01\x00" + bytes(8), "too short"),
    (_sealed(b"XXXX\x01\x06\x01\x00" + struct.pack("<QI", 0, 0)), "does not start"),
    (_sealed(b"KVCR\x02\x06\x01\x00" + struct.pack("<QI", 0, 0)), "version 2"),
    (_sealed(b"KVCR\x01\x40\x01\x00" + struct.pack("<QI", 0, 0)), "impossible"),
    (_sealed(b"KVCR\x01\x06\x00\x00" + struct.pack("<QI", 0, 0)), "impossible"),
    (_sealed(b"KVCR\x01\x06\x01\x00" + struct.pack("<QI", 100, 0)), "inside its block"),
    (_sealed(b"KVCR\x01\x06\x01\x00" + struct.pack("<QI", 0, 0) + b"x"), "after its last"),
    (_sealed(b"KVCR\x01\x06\x01\x00" + struct.pack("<QI", 2**64 - 1, 0)), "describes no"),
    (_sealed(b"KVCR\x01\x06\x02\x00" + struct.pack("<QI", 0, 0)), "ends inside a state"),
])
def test_malformed_records_say_what_is_wrong(raw, reason):
    with pytest.raises(RecordFormatError, match=reason):
        rec.decode(raw)


def test_encode_refuses_what_no_record_can_say():
    s = rec.state_of(b"abc", 64)
    with pytest.raises(ValueError, match="present value"):
        rec.encode(64, [STATE_ABSENT])
    with pytest.raises(ValueError, match="1 to 2 states"):
        rec.encode(64, [s, STATE_ABSENT, STATE_UNPROTECTED])
    with pytest.raises(ValueError, match="power of two"):
        rec.encode(48, [s])
    assert rec.decode(rec.encode(64, [s, s])).final       # a repeated state is dropped


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=1, max_size=3000), block_size=block_sizes,
       span=st.tuples(st.integers(0, 60), st.integers(1, 60)), flip_at=st.integers(-1, 3000))
def test_a_span_is_checked_as_its_blocks_are(data, block_size, span, flip_at):
    """check_span (one pass, stored checksums combined) answers as block by block."""
    state = rec.state_of(data, block_size)
    n = len(state.blocks)
    first = span[0] % n
    stop = min(n, first + span[1])
    piece = bytearray(data[first * block_size:stop * block_size])
    if 0 <= flip_at < len(piece):
        piece[flip_at] ^= 0x40
    assert rec.check_span(state, piece, block_size, first) == rec.first_bad_block(
        state, piece, block_size, first)


@settings(max_examples=100, deadline=None)
@given(data=values, block_size=block_sizes)
def test_the_final_record_fast_path_writes_what_encode_writes(data, block_size):
    state = rec.state_of(data, block_size)
    assert rec.encode_final(block_size, state) == rec.encode(block_size, [state])


@settings(max_examples=100, deadline=None)
@given(data=values, block_size=block_sizes, flip=st.integers(min_value=0))
def test_the_direct_check_agrees_with_decoding(data, block_size, flip):
    """final_matches (no decoding) accepts exactly what decode + check_whole accept."""
    raw = rec.encode_final(block_size, rec.state_of(data, block_size))
    assert rec.final_matches(raw, data)
    for damaged_raw, damaged_data in ((raw, data + b"x"), (raw[:-1], data)):
        assert not rec.final_matches(damaged_raw, damaged_data)
    if data:
        wrong = bytearray(data)
        wrong[flip % len(data)] ^= 1
        assert not rec.final_matches(raw, bytes(wrong))
    bad = bytearray(raw)
    bad[flip % len(raw)] ^= 4
    assert not rec.final_matches(bytes(bad), data)
    pending = rec.encode(block_size, [rec.state_of(data, block_size), rec.STATE_ABSENT])
    assert not rec.final_matches(pending, data)
