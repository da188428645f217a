"""Point-cloud queries against brute force, with hypothesis.

Every write carries an attribute ``idx`` holding each point's input row, so an answer
names exactly which input points it returned. The expected answer is computed here from
the input alone with numpy: a closed box keeps ``lo <= p <= hi`` on every axis (in
float64, of the positions as stored in float32); a chunk whitelist keeps the points
whose chunk ``floor(p / chunk_shape)`` it lists; an object query returns each requested
id in turn (unknown ids skipped, repeats repeated), its points by chunk and then input
order; a group query returns the sorted union of its members. Spatial answers come in
stored order: by chunk, then bin (or object id), then input order.

Coordinates are multiples of 12.5 and chunk and bin edges multiples of 12.5 too, so
points fall on chunk and bin boundaries often and every comparison is exact in binary.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr.vectors import points, read_points, write_points

STEP = 12.5


@st.composite
def clouds(draw):
    ndim = draw(st.integers(1, 4))
    n = draw(st.integers(1, 120))
    grid = draw(st.lists(st.lists(st.integers(-24, 24), min_size=ndim, max_size=ndim),
                         min_size=n, max_size=n))
    pos = np.array(grid, dtype=np.float64) * STEP
    chunk = [draw(st.sampled_from([25.0, 50.0, 100.0])) for _ in range(ndim)]
    bins = [c / draw(st.sampled_from([1, 2, 4 if c >= 50 else 2])) for c in chunk]
    with_ids = draw(st.booleans())
    ids = np.array(draw(st.lists(st.sampled_from([0, 3, 7, 1000, 2 ** 40]), min_size=n,
                                 max_size=n))) if with_ids else None
    return pos, chunk, bins, ids


@st.composite
def boxes(draw, ndim):
    def corner():
        return [draw(st.one_of(st.integers(-26, 26).map(lambda k: k * STEP),
                               st.sampled_from([-math.inf, math.inf])))
                for _ in range(ndim)]
    return np.array(corner()), np.array(corner())


def _chunks(pos, chunk):
    return np.floor(pos / np.asarray(chunk)).astype(np.int64)


def _bins(pos, chunk, bins):
    bpc = np.round(np.asarray(chunk) / np.asarray(bins)).astype(np.int64)
    local = np.floor(pos / np.asarray(bins)).astype(np.int64) - _chunks(pos, chunk) * bpc
    return np.ravel_multi_index(tuple(local.T), tuple(bpc))


def _stored_order(pos, chunk, bins, ids):
    second = ids if ids is not None else _bins(pos, chunk, bins)
    return np.lexsort((np.arange(len(pos)), second, *_chunks(pos, chunk).T[::-1]))


def _object_order(pos, chunk, ids, wanted):
    out = []
    for oid in wanted:
        rows = np.flatnonzero(ids == oid)
        c = _chunks(pos[rows], chunk)
        out.extend(rows[np.lexsort((rows, *c.T[::-1]))].tolist())
    return np.array(out, dtype=np.int64)


def _filter(rows, pos, chunk, box, whitelist):
    keep = np.ones(len(rows), dtype=bool)
    if box is not None:
        p = pos[rows]
        keep &= np.all((p >= box[0]) & (p <= box[1]), axis=1)
    if whitelist is not None:
        listed = {tuple(c) for c in whitelist}
        keep &= np.array([tuple(c) in listed for c in _chunks(pos[rows], chunk).tolist()],
                         dtype=bool)
    return rows[keep]


def _check(answer, stored, expected_rows, ids=None):
    got = answer["vertex_attributes"]["idx"]
    assert got.tolist() == expected_rows.tolist()
    assert answer["vertex_count"] == len(expected_rows)
    np.testing.assert_array_equal(answer["positions"], stored[expected_rows])
    if ids is not None:
        assert answer["object_ids"].tolist() == ids[expected_rows].tolist()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clouds(), st.data())
def test_queries_equal_brute_force(cloud, data):
    pos, chunk, bins, ids = cloud
    ndim = pos.shape[1]
    store = kvzarr.MemoryStore()
    write_points(store, pos, chunk_shape=chunk, bin_shape=bins, object_ids=ids,
                 vertex_attributes={"idx": np.arange(len(pos))},
                 axes=[f"a{i}" for i in range(ndim)])
    stored = pos.astype(np.float32)
    order = _stored_order(stored.astype(np.float64), chunk, bins, ids)
    p64 = stored.astype(np.float64)

    _check(read_points(store, attribute_names=["idx"]), stored, order)
    for _ in range(4):
        box = data.draw(boxes(ndim))
        _check(read_points(store, bbox=box, attribute_names=["idx"]), stored,
               _filter(order, p64, chunk, box, None))
    held = np.unique(_chunks(p64, chunk), axis=0)
    some = held[data.draw(st.lists(st.integers(0, len(held) - 1), max_size=3))]
    whitelist = [tuple(c) for c in some] + [tuple([99] * ndim)]
    box = data.draw(boxes(ndim))
    _check(read_points(store, chunks=whitelist, bbox=box, attribute_names=["idx"]), stored,
           _filter(order, p64, chunk, box, whitelist))

    if ids is not None:
        wanted = data.draw(st.lists(st.sampled_from([0, 3, 7, 1000, 2 ** 40, 5, -1]),
                                    max_size=5))
        known = [w for w in wanted if w in set(ids.tolist())]
        expected = _object_order(p64, chunk, ids, known)
        answer = read_points(store, object_ids=wanted, attribute_names=["idx"])
        _check(answer, stored, expected, ids)
        expected = _filter(expected, p64, chunk, box, whitelist)
        answer = read_points(store, object_ids=wanted, bbox=box, chunks=whitelist,
                             attribute_names=["idx"])
        _check(answer, stored, expected, ids)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=60), st.data())
def test_groups_are_the_sorted_union_of_their_members(ids, data):
    ids = np.array(ids)
    pos = np.column_stack([np.arange(len(ids)) * STEP, np.zeros(len(ids))])
    present = np.unique(ids)
    groups = {g: data.draw(st.lists(st.sampled_from(present.tolist()), max_size=4))
              for g in range(data.draw(st.integers(1, 4)))}
    store = kvzarr.MemoryStore()
    write_points(store, pos, chunk_shape=(100, 100), object_ids=ids, groups=groups,
                 vertex_attributes={"idx": np.arange(len(ids))})
    asked = data.draw(st.lists(st.integers(0, 6), max_size=3))
    members = sorted({m for g in asked if g in groups for m in groups[g]})
    expected = _object_order(pos, (100, 100), ids, members)
    _check(read_points(store, group_ids=asked, attribute_names=["idx"]),
           pos.astype(np.float32), expected, ids)
    also = data.draw(st.lists(st.integers(0, 9), max_size=4))
    both = sorted(set(members) & set(also))
    _check(read_points(store, group_ids=asked, object_ids=also, attribute_names=["idx"]),
           pos.astype(np.float32), _object_order(pos, (100, 100), ids, both), ids)


@pytest.mark.parametrize("suffix", [".lmdb", ".sqlite", ".zip", ".zarr"])
@settings(max_examples=8, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cloud=clouds(), data=st.data())
def test_every_store_answers_alike(tmp_path_factory, suffix, cloud, data):
    pos, chunk, bins, ids = cloud
    ndim = pos.shape[1]
    path = tmp_path_factory.mktemp("s") / f"x{suffix}"
    with kvzarr.open_store(str(path)) as store:
        write_points(store, pos, chunk_shape=chunk, bin_shape=bins, object_ids=ids,
                     vertex_attributes={"idx": np.arange(len(pos))},
                     axes=[f"a{i}" for i in range(ndim)], compressor=data.draw(
                         st.sampled_from([None, "zstd"])),
                     shard_shape=data.draw(st.sampled_from([None, 2])))
    stored = pos.astype(np.float32)
    order = _stored_order(stored.astype(np.float64), chunk, bins, ids)
    box = data.draw(boxes(ndim))
    with kvzarr.open_store(str(path), mode="r") as store:
        _check(read_points(store, attribute_names=["idx"]), stored, order)
        _check(read_points(store, bbox=box, attribute_names=["idx"]), stored,
               _filter(order, stored.astype(np.float64), chunk, box, None))


def test_a_point_on_the_upper_bound_of_a_tiny_decimal_grid_is_found():
    # 0.3 / 0.1 is 2.999... in binary: the bin arithmetic puts 0.3 in chunk 0, while
    # floor(0.3 / 0.3) says chunk 1. A box around it must still find it.
    pos = np.array([[0.0], [0.3], [0.6]])
    store = kvzarr.MemoryStore()
    write_points(store, pos, chunk_shape=(0.3,), bin_shape=(0.1,), dtype="float64")
    for lo, hi in ((0.3, 0.3), (0.29, 0.31), (0.3, 0.6)):
        got = read_points(store, bbox=([lo], [hi]))["positions"].ravel().tolist()
        assert got == [v for v in (0.0, 0.3, 0.6) if lo <= v <= hi]


def test_reading_only_the_bins_a_box_touches_equals_brute_force(monkeypatch):
    # big cells read only the bins a box may touch; make every cell "big"
    monkeypatch.setattr(points, "PRUNE_ROWS", 0)
    rng = np.random.default_rng(7)
    for trial in range(40):
        ndim = int(rng.integers(1, 5))
        pos = rng.integers(-24, 25, size=(int(rng.integers(1, 300)), ndim)) * STEP
        chunk = [100.0] * ndim
        bins = [float(rng.choice([25.0, 50.0, 100.0])) for _ in range(ndim)]
        store = kvzarr.MemoryStore()
        write_points(store, pos, chunk_shape=chunk, bin_shape=bins,
                     vertex_attributes={"idx": np.arange(len(pos))},
                     axes=[f"a{i}" for i in range(ndim)])
        order = _stored_order(pos, chunk, bins, None)
        for _ in range(5):
            lo = rng.integers(-26, 27, ndim) * STEP
            box = (lo, lo + rng.integers(0, 20, ndim) * STEP)
            _check(read_points(store, bbox=box, attribute_names=["idx"]),
                   pos.astype(np.float32), _filter(order, pos, chunk, box, None))
