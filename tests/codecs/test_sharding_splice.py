"""kvzarr.codecs.sharding.splice: a stored shard laid out again with some inner chunks
replaced, copying runs of kept chunks as one slice each. Held against the plain layout
of every stored inner chunk one by one in write order, on old shards of every shape a
store can hold: dense in write order (as written whole), in another order, with gaps
(garbage left by appends), with empty inner chunks, and with the index first or last."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.codecs.sharding.layout import MISSING, ShardIndex, make_layout
from kvzarr.codecs.sharding.splice import splice

SHAPES = [(4,), (2, 2), (4, 4), (2, 3, 2), (8, 8)]


def layout_of(cps):
    return make_layout(tuple(c * 2 for c in cps), (2,) * len(cps), lambda spec: 16)


def reference(layout, old, new, base):
    """Every stored inner chunk laid out one by one, in write order (what the sharding
    codec's plain assembly does)."""
    entries = np.full((layout.nchunks, 2), MISSING, dtype=np.uint64)
    pieces, at = [], base
    for i in layout.write_order.tolist():
        data = new[i] if i in new else old.get(i)
        if data is None:
            continue
        entries[i] = (at, len(data))
        pieces.append(data)
        at += len(data)
    return entries, b"".join(pieces)


@st.composite
def cases(draw):
    cps = draw(st.sampled_from(SHAPES))
    layout = layout_of(cps)
    n = layout.nchunks
    base = draw(st.sampled_from([0, 16]))
    stored = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    old = {i: draw(st.binary(min_size=0, max_size=12)) for i in range(n) if stored[i]}
    # the old shard's layout: write order (a whole-shard write), or any order with gaps
    dense = draw(st.booleans())
    ids = [i for i in layout.write_order.tolist() if i in old]
    if not dense:
        ids = draw(st.permutations(ids))
    buf, entries = bytearray(b"\xee" * base), np.full((n, 2), MISSING, dtype=np.uint64)
    for i in ids:
        if not dense:
            buf += b"\xaa" * draw(st.integers(0, 3))      # garbage between inner chunks
        entries[i] = (len(buf), len(old[i]))
        buf += old[i]
    replaced = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    new = {i: draw(st.none() | st.binary(min_size=0, max_size=12)) for i in replaced}
    return layout, ShardIndex(entries), bytes(buf), old, new, base


@settings(max_examples=400, deadline=None)
@given(cases())
def test_splice_lays_out_what_the_plain_assembly_does(case):
    layout, index, shard, old, new, base = case
    want_entries, want_bytes = reference(layout, old, new, base)
    done = splice(layout, index, memoryview(shard), new, base)
    if not want_bytes and (want_entries == MISSING).all():
        assert done is None
        return
    got_index, pieces = done
    np.testing.assert_array_equal(got_index.entries, want_entries)
    assert b"".join(pieces) == want_bytes


def test_kept_runs_are_one_piece_each():
    """A dense shard with one inner chunk replaced is three pieces: the run before it,
    the new chunk and the run after it, whatever the number of inner chunks."""
    layout = layout_of((8, 8))
    order = layout.write_order.tolist()
    old = {i: bytes([i]) * 3 for i in range(64)}
    entries = np.full((64, 2), MISSING, dtype=np.uint64)
    for rank, i in enumerate(order):
        entries[i] = (rank * 3, 3)
    shard = b"".join(old[i] for i in order)
    target = order[20]
    got_index, pieces = splice(layout, ShardIndex(entries), memoryview(shard),
                               {target: b"new!"}, 0)
    assert len(pieces) == 3
    assert bytes(pieces[0]) == shard[:60] and pieces[1] == b"new!"
    assert bytes(pieces[2]) == shard[63:]
    assert int(got_index.entries[order[21], 0]) == 64


@pytest.mark.parametrize("replacement", [None, b"x"])
def test_a_shard_left_without_stored_chunks_is_none_only_when_empty(replacement):
    layout = layout_of((2,))
    entries = np.full((2, 2), MISSING, dtype=np.uint64)
    entries[0] = (0, 2)
    done = splice(layout, ShardIndex(entries), memoryview(b"ab"), {0: replacement}, 0)
    if replacement is None:
        assert done is None
    else:
        assert b"".join(done[1]) == b"x"
