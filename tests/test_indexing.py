"""Selections -> chunk projections, checked against numpy.

The harness splits a numpy array into the chunks of a grid (regular or rectilinear, padded
to the codec shape with a sentinel), applies the projections exactly as the array layer
does, and compares with numpy's own indexing, for get and for set.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kvzarr.errors import (ArrayIndexError, BoundsCheckError, InvalidSelectionError,
                           NegativeStepError, ShapeMismatchError, VindexInvalidSelectionError)
from kvzarr.grid import ChunkGrid, FixedDimension, VaryingDimension
from kvzarr.indexing import (BasicIndexer, BlockIndexer, ChunkProjection, CoordinateIndexer,
                             MaskIndexer, OrthogonalIndexer, apply_orthogonal,
                             classify_selection, prepare_value, to_orthogonal,
                             vindex_indexer)
from kvzarr.indexing.dims import project_bool_array, project_int_array, project_slice

SENTINEL = -1
PROPS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much])
MAX_LEN = {0: 0, 1: 14, 2: 9, 3: 6, 4: 4}


# --- strategies -----------------------------------------------------------------------

@st.composite
def dimensions(draw, max_len):
    length = draw(st.integers(0, max_len))
    if draw(st.booleans()):
        return FixedDimension(draw(st.integers(1, 6)), length)
    edges: list[int] = []
    while not edges or sum(edges) < length:
        edges.append(draw(st.integers(1, 5)))
    edges += draw(st.lists(st.integers(1, 5), max_size=2))   # cells beyond the extent
    return VaryingDimension(edges, length)


@st.composite
def grids(draw, min_ndim=0):
    ndim = draw(st.integers(min_ndim, 4))
    return ChunkGrid(tuple(draw(dimensions(MAX_LEN[ndim])) for _ in range(ndim)))


def int_items(length):
    return st.integers(-length, length - 1)


def slice_items(length):
    bound = st.none() | st.integers(-length - 3, length + 3)
    return st.builds(slice, bound, bound, st.none() | st.integers(1, length + 3))


def int_arrays(length, max_size=6):
    if length == 0:
        return st.just(np.array([], dtype=np.int64))
    return st.lists(st.integers(-length, length - 1), max_size=max_size).map(
        lambda xs: np.array(xs, dtype=np.int64)) | st.lists(
        st.integers(-length, length - 1), min_size=1, max_size=max_size)


@st.composite
def basic_selections(draw, grid):
    items = [draw(slice_items(n) | int_items(n)) if n else draw(slice_items(n))
             for n in grid.shape]
    mode = draw(st.sampled_from(["full", "truncated", "ellipsis", "bare"]))
    ref = list(items)
    if mode == "truncated":
        r = draw(st.integers(0, len(items)))
        ref[r:] = [slice(None)] * (len(items) - r)
        return tuple(items[:r]), tuple(ref)
    if mode == "ellipsis":
        i = draw(st.integers(0, len(items)))
        j = draw(st.integers(i, len(items)))
        ref[i:j] = [slice(None)] * (j - i)
        return tuple(items[:i]) + (Ellipsis,) + tuple(items[j:]), tuple(ref)
    if mode == "bare" and len(items) == 1:
        return items[0], tuple(ref)
    return tuple(items), tuple(ref)


@st.composite
def orthogonal_selections(draw, grid):
    sel = []
    for n in grid.shape:
        kinds = [slice_items(n), int_arrays(n), hnp.arrays(np.bool_, (n,))]
        if n:   # an empty list becomes a float array, which zarr-python refuses too
            kinds += [int_items(n), hnp.arrays(np.bool_, (n,)).map(list)]
        sel.append(draw(st.one_of(kinds)))
    return tuple(sel)


@st.composite
def coordinate_selections(draw, grid):
    bshape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    if any(n == 0 for n in grid.shape):
        bshape = (0,) + bshape
    sel = []
    for n in grid.shape:
        if n == 0:
            sel.append(np.zeros(bshape, dtype=np.int64))    # bshape starts with 0
            continue
        if draw(st.integers(0, 4)) == 0:
            sel.append(draw(int_items(n)))
            continue
        # Right-aligned numpy broadcasting: drop leading axes, shrink some to 1.
        lead = draw(st.integers(0, len(bshape)))
        shp = tuple(1 if draw(st.booleans()) else s for s in bshape[lead:])
        sel.append(draw(hnp.arrays(np.int64, shp, elements=int_items(n))))
    return tuple(sel)


@st.composite
def block_selections(draw, grid):
    sel = []
    for dim in grid.dimensions:
        nch = dim.nchunks
        start = st.none() | st.integers(-nch, nch - 1)
        stop = st.none() | st.integers(-nch - 2, nch + 2)
        sel.append(draw(st.integers(-nch, nch - 1) | st.builds(slice, start, stop)))
    return tuple(sel)


# --- harness --------------------------------------------------------------------------

def make_array(grid):
    return np.arange(math.prod(grid.shape), dtype=np.int64).reshape(grid.shape)


def split(arr, grid):
    chunks = {}
    for coords in grid.all_chunk_coords():
        spec = grid[coords]
        c = np.full(spec.codec_shape, SENTINEL, dtype=arr.dtype)
        c[tuple(slice(0, n) for n in spec.shape)] = arr[spec.slices]
        chunks[coords] = c
    return chunks


def assemble(chunks, grid):
    out = np.empty(grid.shape, dtype=np.int64)
    for coords in grid.all_chunk_coords():
        spec = grid[coords]
        c = chunks[coords].copy()
        valid = tuple(slice(0, n) for n in spec.shape)
        out[spec.slices] = c[valid]
        c[valid] = SENTINEL
        assert (c == SENTINEL).all(), f"padding of chunk {coords} was written"
    return out


def check_projection(p, grid, chunk):
    assert isinstance(p, ChunkProjection)
    spec = grid[p.chunk_coords]
    assert spec is not None and chunk.shape == spec.codec_shape
    # is_complete_chunk <=> the selection enumerates the valid region once, in C order.
    idx = np.arange(chunk.size).reshape(chunk.shape)
    picked = np.asarray(idx[p.chunk_selection]).reshape(-1)
    region = idx[tuple(slice(0, n) for n in spec.shape)].reshape(-1)
    covers = picked.shape == region.shape and bool((picked == region).all())
    assert p.is_complete_chunk == covers, p
    # The shard read path: an orthogonal box, then a sub-selection.
    orth, sub = to_orthogonal(p.chunk_selection, chunk.shape)
    for s in orth:
        if isinstance(s, slice):
            assert s.step >= 1
        else:
            assert s.ndim == 1 and (np.diff(s) > 0).all()
    np.testing.assert_array_equal(apply_orthogonal(chunk, orth)[sub], chunk[p.chunk_selection])


def run_get(ix, arr, grid):
    chunks = split(arr, grid)
    buf = np.full(ix.buffer_shape, -7, dtype=arr.dtype)
    seen = np.zeros(ix.buffer_shape, dtype=np.int64)
    projections = list(ix)
    assert len(projections) == ix.nchunks()
    assert len({p.chunk_coords for p in projections}) == len(projections)
    for p in projections:
        chunk = chunks[p.chunk_coords]
        check_projection(p, grid, chunk)
        buf[p.out_selection] = chunk[p.chunk_selection]
        np.add.at(seen, p.out_selection, 1)
    assert (seen == 1).all(), "output is not tiled exactly once"
    return buf.reshape(ix.shape)


def run_set(ix, arr, grid, value):
    chunks = split(arr, grid)
    v = prepare_value(value, ix, arr.dtype)
    assert v.shape == ix.buffer_shape
    for p in ix:
        chunks[p.chunk_coords][p.chunk_selection] = v[p.out_selection]
    return assemble(chunks, grid)


@st.composite
def values_for(draw, shape):
    """A distinct-valued array of ``shape``, a scalar, or a size-1-axes broadcastable one."""
    kind = draw(st.sampled_from(["full", "scalar", "ones"]))
    if kind == "scalar":
        return 777
    full = 1000 + np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    if kind == "ones" and shape:
        axes = tuple(i for i in range(len(shape)) if draw(st.booleans()))
        return full[tuple(slice(0, 1) if i in axes else slice(None)
                          for i in range(len(shape)))]
    return full


def oindex_ref(arr, sel):
    """numpy orthogonal indexing via np.ix_ (ints kept as size-1 axes, squeezed after)."""
    idx, keep = [], []
    for item, n in zip(sel, arr.shape):
        if isinstance(item, slice):
            idx.append(np.arange(*item.indices(n)))
            keep.append(True)
        elif isinstance(item, (int, np.integer)):
            idx.append(np.array([item % n]))
            keep.append(False)
        else:
            a = np.asarray(item)
            idx.append(np.flatnonzero(a) if a.dtype == bool else a.astype(np.int64))
            keep.append(True)
    return np.ix_(*idx) if idx else (), keep


# --- property tests: every selection kind, get and set ------------------------------

@PROPS
@given(st.data())
def test_basic_get_set(data):
    grid = data.draw(grids())
    sel, ref_sel = data.draw(basic_selections(grid))
    arr = make_array(grid)
    ix = BasicIndexer(sel, grid)
    expected = arr[ref_sel]
    got = run_get(ix, arr, grid)
    assert got.shape == expected.shape == ix.shape
    np.testing.assert_array_equal(got, expected)

    value = data.draw(values_for(ix.shape))
    ref = arr.copy()
    ref[ref_sel] = value
    np.testing.assert_array_equal(run_set(ix, arr, grid, value), ref)


@PROPS
@given(st.data())
def test_orthogonal_get_set(data):
    grid = data.draw(grids())
    sel = data.draw(orthogonal_selections(grid))
    arr = make_array(grid)
    ix = OrthogonalIndexer(sel, grid)
    ixs, keep = oindex_ref(arr, sel)
    kept_shape = tuple(n for n, k in zip(arr[ixs].shape, keep) if k)
    expected = arr[ixs].reshape(kept_shape)
    got = run_get(ix, arr, grid)
    assert got.shape == expected.shape == ix.shape
    np.testing.assert_array_equal(got, expected)

    value = data.draw(values_for(ix.shape))
    ref = arr.copy()
    full_shape = arr[ixs].shape
    ref[ixs] = np.broadcast_to(value, ix.shape).reshape(full_shape)
    np.testing.assert_array_equal(run_set(ix, arr, grid, value), ref)


@PROPS
@given(st.data())
def test_coordinate_get_set(data):
    grid = data.draw(grids(min_ndim=1))
    sel = data.draw(coordinate_selections(grid))
    arr = make_array(grid)
    ix = vindex_indexer(sel, grid)
    assert isinstance(ix, CoordinateIndexer)
    ref_sel = tuple(np.asarray([s]) if isinstance(s, int) else s for s in sel)
    expected = arr[ref_sel]
    got = run_get(ix, arr, grid)
    assert got.shape == expected.shape == ix.shape
    assert ix.buffer_shape == (expected.size,)
    np.testing.assert_array_equal(got, expected)

    value = data.draw(values_for(ix.shape))
    ref = arr.copy()
    ref[ref_sel] = value                  # duplicates: the last value wins in both
    np.testing.assert_array_equal(run_set(ix, arr, grid, value), ref)


@PROPS
@given(st.data())
def test_mask_get_set(data):
    grid = data.draw(grids())
    mask = data.draw(hnp.arrays(np.bool_, grid.shape))
    arr = make_array(grid)
    ix = MaskIndexer(mask, grid)
    expected = arr[mask]
    got = run_get(ix, arr, grid)
    assert got.shape == expected.shape == ix.shape
    np.testing.assert_array_equal(got, expected)

    value = data.draw(values_for(ix.shape))
    ref = arr.copy()
    ref[mask] = value
    np.testing.assert_array_equal(run_set(ix, arr, grid, value), ref)


@PROPS
@given(st.data())
def test_block_get_set(data):
    grid = data.draw(grids())
    assume(all(d.nchunks for d in grid.dimensions))
    sel = data.draw(block_selections(grid))
    arr = make_array(grid)
    ref_sel = []
    for item, dim in zip(sel, grid.dimensions):
        blocks = list(range(dim.nchunks))[item]
        blocks = blocks if isinstance(blocks, list) else [blocks]
        if not blocks:
            ref_sel.append(slice(0, 0))
            continue
        ref_sel.append(slice(dim.chunk_offset(blocks[0]),
                             dim.chunk_offset(blocks[-1]) + dim.data_size(blocks[-1])))
    ref_sel = tuple(ref_sel)
    ix = BlockIndexer(sel, grid)
    expected = arr[ref_sel]
    got = run_get(ix, arr, grid)
    assert got.shape == expected.shape == ix.shape
    np.testing.assert_array_equal(got, expected)

    value = data.draw(values_for(ix.shape))
    ref = arr.copy()
    ref[ref_sel] = value
    np.testing.assert_array_equal(run_set(ix, arr, grid, value), ref)


@PROPS
@given(st.data())
def test_classified_dispatch_matches_numpy(data):
    """What ``a[sel]`` will do: classify, build that indexer, compare with numpy."""
    grid = data.draw(grids(min_ndim=1))
    arr = make_array(grid)
    sel = data.draw(orthogonal_selections(grid))
    kind = classify_selection(sel, grid.shape)
    if kind == "orthogonal":
        ixs, keep = oindex_ref(arr, sel)
        expected = arr[ixs].reshape(tuple(n for n, k in zip(arr[ixs].shape, keep) if k))
        np.testing.assert_array_equal(run_get(OrthogonalIndexer(sel, grid), arr, grid),
                                      expected)
    elif kind == "vindex":
        try:
            ix = vindex_indexer(sel, grid)
        except (VindexInvalidSelectionError, InvalidSelectionError):
            return
        expected = arr[tuple(np.asarray([s]) if isinstance(s, int) else np.asarray(s)
                             for s in sel)]
        np.testing.assert_array_equal(run_get(ix, arr, grid), expected)
    else:
        try:
            ix = BasicIndexer(sel, grid)
        except ArrayIndexError:
            return
        np.testing.assert_array_equal(run_get(ix, arr, grid), arr[sel])


# --- per-dimension projection: invariants and three worked examples -----------------

def rows(proj):
    return [(c, s, o) for c, s, o in zip(proj.coords, proj.chunk_sel, proj.out_sel)]


@PROPS
@given(st.data())
def test_slice_projection_invariants(data):
    dim = data.draw(dimensions(40))
    sel = data.draw(slice_items(dim.extent))
    proj = project_slice(sel, dim)
    points = np.arange(dim.extent)[sel]
    assert proj.nitems == points.size
    # Σm = n, the output slices tile [0, n) in order, each chunk's points are the truth.
    pos = 0
    for c, cs, os in rows(proj):
        m = len(range(cs.start, cs.stop, cs.step))
        assert m > 0, "a chunk without points must be skipped"
        assert (os.start, os.stop, os.step) == (pos, pos + m, None)
        local = np.arange(cs.start, cs.stop, cs.step)
        assert local.max() < dim.data_size(c)
        np.testing.assert_array_equal(dim.chunk_offset(c) + local, points[os])
        pos += m
    assert pos == points.size
    assert proj.coords == sorted(set(proj.coords))


@PROPS
@given(st.data())
def test_int_array_projection_invariants(data):
    dim = data.draw(dimensions(40))
    sel = np.asarray(data.draw(int_arrays(dim.extent, max_size=30)), dtype=np.int64)
    proj = project_int_array(sel, dim)
    wrapped = np.where(sel < 0, sel + dim.extent, sel)
    out = np.empty(sel.size, dtype=np.int64)
    for c, cs, os in rows(proj):
        out[os] = dim.chunk_offset(c) + cs
    np.testing.assert_array_equal(out, wrapped)
    assert sum(len(cs) for cs in proj.chunk_sel) == proj.nitems == sel.size


def test_example_a_stride_not_dividing_chunk():
    proj = project_slice(slice(1, 20, 3), FixedDimension(5, 20))
    assert proj.nitems == 7
    assert rows(proj) == [
        (0, slice(1, 5, 3), slice(0, 2)), (1, slice(2, 3, 3), slice(2, 3)),
        (2, slice(0, 4, 3), slice(3, 5)), (3, slice(1, 5, 3), slice(5, 7))]


def test_example_b_slice_ends_mid_chunk():
    proj = project_slice(slice(4, 4 + 13), FixedDimension(10, 23))
    assert proj.nitems == 13
    assert rows(proj) == [(0, slice(4, 10, 1), slice(0, 6)), (1, slice(0, 7, 1), slice(6, 13))]


@pytest.mark.parametrize("dim", [FixedDimension(4, 30), VaryingDimension([4] * 8, 30)])
def test_example_c_stride_longer_than_chunk(dim):
    proj = project_slice(slice(6, 6 + 4 * 7, 7), dim)
    assert proj.nitems == 4
    assert rows(proj) == [
        (1, slice(2, 3, 7), slice(0, 1)), (3, slice(1, 2, 7), slice(1, 2)),
        (5, slice(0, 1, 7), slice(2, 3)), (6, slice(3, 4, 7), slice(3, 4))]


def test_dense_walk_skips_empty_rectilinear_chunk():
    # Chunk 2 ([11, 12)) holds no even index: skipped although the range walk visits it.
    proj = project_slice(slice(0, 22, 2), VaryingDimension([1, 10, 1, 10], 22))
    assert proj.coords == [0, 1, 3]
    assert rows(proj)[2] == (3, slice(0, 9, 2), slice(6, 11))


def test_boundary_and_overhanging_edges_complete():
    # Regular boundary chunk: valid 2 of 4; rectilinear last edge overhangs the extent.
    for dim in (FixedDimension(4, 10), VaryingDimension([3, 5, 6], 10)):
        proj = project_slice(slice(None), dim)
        assert all(proj.complete)
        last = proj.chunk_sel[-1]
        assert last.stop - last.start == dim.data_size(dim.nchunks - 1)
    assert project_slice(slice(0, 9), FixedDimension(4, 10)).complete == [True, True, False]
    assert project_bool_array(np.ones(10, bool), VaryingDimension([3, 5, 6], 10)).complete \
        == [True, True, True]
    assert project_int_array([0, 2, 1], FixedDimension(3, 3)).complete == [False]


# --- shapes and special cases -------------------------------------------------------

def test_zero_d_array():
    grid = ChunkGrid(())
    arr = np.array(5)
    for sel in ((), Ellipsis):
        ix = BasicIndexer(sel, grid)
        assert ix.shape == () and ix.nchunks() == 1
        assert [p.chunk_coords for p in ix] == [()]
        assert run_get(ix, arr, grid) == 5
    for m in (True, False):
        np.testing.assert_array_equal(run_get(MaskIndexer(np.array(m), grid), arr, grid),
                                      arr[np.array(m)])
    with pytest.raises(ArrayIndexError):
        BasicIndexer(0, grid)


def test_zero_length_selection_has_no_projections():
    grid = ChunkGrid.from_sizes((10, 0), (3, 2))
    ix = BasicIndexer((slice(2, 8), slice(None)), grid)
    assert ix.shape == (6, 0) and ix.nchunks() == 0 and list(ix) == []
    ix = OrthogonalIndexer((np.array([], dtype=int), 1), ChunkGrid.from_sizes((4, 5), (2, 2)))
    assert ix.shape == (0,) and list(ix) == []


def test_orthogonal_selections_combine_like_ix():
    grid = ChunkGrid.from_sizes((6, 7, 8), (4, [3, 4], 3))
    arr = make_array(grid)
    # An int separated from the array by a slice would make numpy move the axis.
    sel = (1, slice(None), [7, 0, 3])
    np.testing.assert_array_equal(run_get(OrthogonalIndexer(sel, grid), arr, grid),
                                  arr[1][:, [7, 0, 3]])
    sel = ([5, 0, 0], slice(1, 6, 2), [2, 7, 1, 3])
    np.testing.assert_array_equal(run_get(OrthogonalIndexer(sel, grid), arr, grid),
                                  arr[np.ix_([5, 0, 0], [1, 3, 5], [2, 7, 1, 3])])
    sel = (np.array([4, 1], dtype=np.uint8), 2, np.array([7, 6], dtype=np.uint64))
    np.testing.assert_array_equal(run_get(OrthogonalIndexer(sel, grid), arr, grid),
                                  arr[np.ix_([4, 1], [2], [7, 6])][:, 0])


def test_coordinate_broadcast_shape():
    grid = ChunkGrid.from_sizes((5, 6), (2, [1, 5]))
    arr = make_array(grid)
    ix = CoordinateIndexer(([[0], [1]], [[0, 1, 2]]), grid)
    assert ix.shape == (2, 3) and ix.buffer_shape == (6,)
    np.testing.assert_array_equal(run_get(ix, arr, grid), arr[[[0], [1]], [[0, 1, 2]]])


def test_complete_coordinate_and_mask_chunks():
    grid = ChunkGrid.from_sizes((4, 5), (2, 3))
    ix = MaskIndexer(np.ones((4, 5), bool), grid)
    assert all(p.is_complete_chunk for p in ix)
    rr, cc = np.nonzero(np.ones((2, 3), bool))
    ix = CoordinateIndexer((rr[::-1], cc[::-1]), grid)   # reversed: not in order
    assert [p.is_complete_chunk for p in ix] == [False]


def test_many_chunks_stay_lean():
    grid = ChunkGrid.from_sizes((1_000_000,), (10,))
    ix = BasicIndexer(slice(None), grid)
    assert ix.nchunks() == 100_000
    ps = list(ix)
    assert ps[-1].chunk_coords == (99_999,) and ps[-1].out_selection == (slice(999_990, 10**6),)
    # A stride far longer than a chunk only visits chunks holding a point.
    grid = ChunkGrid.from_sizes((10**12,), (1,))
    ix = BasicIndexer(slice(5, None, 10**7), grid)
    assert ix.nchunks() == 100_000


# --- prepare_value -------------------------------------------------------------------

def test_prepare_value():
    grid = ChunkGrid.from_sizes((4, 5), (2, 2))
    ix = BasicIndexer((slice(0, 2), slice(None)), grid)
    v = prepare_value(3, ix, np.int16)
    assert v.shape == (2, 5) and v.dtype == np.int16 and (v == 3).all()
    np.testing.assert_array_equal(prepare_value(np.arange(5)[None], ix, int),
                                  np.broadcast_to(np.arange(5), (2, 5)))
    for bad in (np.arange(5), np.zeros((3, 5)), np.zeros((1, 2, 5)), np.zeros((2, 4))):
        with pytest.raises(ShapeMismatchError):
            prepare_value(bad, ix, int)
    with pytest.raises(IndexError):
        prepare_value(np.arange(5), ix, int)     # zarr-python raises IndexError here
    # Coordinate selections also take a value of the right size in C order (zarr-python).
    cix = CoordinateIndexer((1, [0, 4]), grid)
    np.testing.assert_array_equal(prepare_value([[7], [8]], cix, int), [7, 8])
    with pytest.raises(ShapeMismatchError):
        prepare_value(np.arange(4).reshape(2, 2), cix, int)
    sdt = np.dtype([("a", "i4"), ("b", "f8")])
    v = prepare_value((1, 2.5), BasicIndexer(slice(0, 3), ChunkGrid.from_sizes((4,), (2,))), sdt)
    assert v.shape == (3,) and v["b"][2] == 2.5


# --- error types (zarr-python's) -----------------------------------------------------

G2 = ChunkGrid.from_sizes((10, 6), (3, [2, 4]))


@pytest.mark.parametrize("make, sel, err", [
    (BasicIndexer, (10, 0), BoundsCheckError),
    (BasicIndexer, (-11, 0), BoundsCheckError),
    (OrthogonalIndexer, ([0, 10], slice(None)), BoundsCheckError),
    (OrthogonalIndexer, ([-11], slice(None)), BoundsCheckError),
    (OrthogonalIndexer, (np.array([10], dtype=np.uint64), 0), BoundsCheckError),
    (vindex_indexer, ([0, 1], [0, 6]), BoundsCheckError),
    (vindex_indexer, ([0, 1], [-7, 0]), BoundsCheckError),
    (BasicIndexer, (slice(None, None, -1),), NegativeStepError),
    (OrthogonalIndexer, (slice(None, None, -2), [0]), NegativeStepError),
    (BasicIndexer, (0, 0, 0), ArrayIndexError),
    (OrthogonalIndexer, (0, 0, [0]), ArrayIndexError),
    (BasicIndexer, (Ellipsis, 0, Ellipsis), ArrayIndexError),
    (BasicIndexer, (None,), ArrayIndexError),
    (BasicIndexer, (1.0,), ArrayIndexError),
    (BasicIndexer, (True,), ArrayIndexError),
    (BasicIndexer, ([0, 1],), ArrayIndexError),
    (OrthogonalIndexer, (None, 0), ArrayIndexError),
    (OrthogonalIndexer, (np.ones(9, bool), 0), ArrayIndexError),
    (OrthogonalIndexer, (np.zeros((2, 2), int), 0), ArrayIndexError),
    (OrthogonalIndexer, (np.ones((10, 6), bool),), ArrayIndexError),
    (OrthogonalIndexer, ([], 0), ArrayIndexError),
    (vindex_indexer, ([0, 1], slice(None)), VindexInvalidSelectionError),
    (vindex_indexer, (np.ones(10, bool),), VindexInvalidSelectionError),
    (vindex_indexer, (Ellipsis,), VindexInvalidSelectionError),
    (CoordinateIndexer, ([0, 1],), VindexInvalidSelectionError),
    (MaskIndexer, (np.ones((10, 5), bool),), VindexInvalidSelectionError),
    (vindex_indexer, ([1, 3], [0, 1, 2]), InvalidSelectionError),
    (BasicIndexer, (slice(None, None, 0),), InvalidSelectionError),
    (OrthogonalIndexer, (slice(0, 5, 0), [1]), InvalidSelectionError),
    (BlockIndexer, (4, 0), BoundsCheckError),
    (BlockIndexer, (-5, 0), BoundsCheckError),
    (BlockIndexer, (0, 2), BoundsCheckError),
    (BlockIndexer, (slice(4, None), 0), BoundsCheckError),
    (BlockIndexer, (slice(0, 4, 2), 0), ArrayIndexError),
    (BlockIndexer, (0.5, 0), ArrayIndexError),
])
def test_error_table(make, sel, err):
    with pytest.raises(err) as info:
        make(sel, G2)
    assert type(info.value) is err
    # Callers written against zarr-python catch the builtins it raises.
    builtin = ValueError if err is InvalidSelectionError else IndexError
    assert isinstance(info.value, builtin)


def test_errors_match_zarr_python():
    """The same selections on a real zarr-python array raise the matching builtin."""
    zarr = pytest.importorskip("zarr")
    z = zarr.zeros((10, 6), chunks=(3, 2), dtype="i4", store={})
    grid = ChunkGrid.from_sizes((10, 6), (3, 2))
    cases = [
        (lambda: z[10, 0], lambda: BasicIndexer((10, 0), grid)),
        (lambda: z[::-1], lambda: BasicIndexer(slice(None, None, -1), grid)),
        (lambda: z[0, 0, 0], lambda: BasicIndexer((0, 0, 0), grid)),
        (lambda: z[..., 0, ...], lambda: BasicIndexer((Ellipsis, 0, Ellipsis), grid)),
        (lambda: z[None], lambda: BasicIndexer((None,), grid)),
        (lambda: z.oindex[np.ones(9, bool)], lambda: OrthogonalIndexer(np.ones(9, bool), grid)),
        (lambda: z.oindex[np.zeros((2, 2), int)],
         lambda: OrthogonalIndexer(np.zeros((2, 2), int), grid)),
        (lambda: z.vindex[[0, 1], :], lambda: vindex_indexer(([0, 1], slice(None)), grid)),
        (lambda: z.vindex[np.ones(10, bool)], lambda: vindex_indexer(np.ones(10, bool), grid)),
        (lambda: z[[1, 3], [0, 1, 2]], lambda: vindex_indexer(([1, 3], [0, 1, 2]), grid)),
        (lambda: z[::0], lambda: BasicIndexer(slice(None, None, 0), grid)),
        (lambda: z.blocks[4], lambda: BlockIndexer(4, grid)),
        (lambda: z.blocks[0:2:2], lambda: BlockIndexer(slice(0, 2, 2), grid)),
    ]
    for theirs, ours in cases:
        with pytest.raises(Exception) as t:
            theirs()
        with pytest.raises(Exception) as o:
            ours()
        tname = type(t.value).__name__
        if tname in ("BoundsCheckError", "NegativeStepError", "VindexInvalidSelectionError"):
            assert type(o.value).__name__ == tname
        else:
            assert isinstance(o.value, type(t.value)), (tname, o.value)


# --- dispatch (zarr-python's a[sel]) --------------------------------------------------

@pytest.mark.parametrize("shape, sel, kind", [
    ((5, 6), [1, 3], "orthogonal"),
    ((5, 6), ([1, 3], [2, 4]), "vindex"),
    ((5, 6), ([1, 3], [0, 1, 2]), "vindex"),
    ((5, 6), (1, [0, 4]), "vindex"),
    ((5, 6), [True, False, True, False, True], "orthogonal"),
    ((5, 6), np.array([True, False, True, False, True]), "vindex"),
    ((5, 6), np.ones((5, 6), bool), "vindex"),
    ((5, 6), (slice(None), [1, 2]), "orthogonal"),
    ((5, 6), ([1, 2], np.ones(6, bool)), "orthogonal"),
    ((5, 6), (1, slice(2, 4)), "orthogonal"),   # zarr-python: ints and slices only
    ((5, 6), Ellipsis, "basic"),
    ((5, 6), ([1, 2], Ellipsis), "basic"),
    ((5, 6, 7), (np.int64(1), [0, 1], slice(None)), "basic"),
    ((5, 6, 7), (1, [0, 1], slice(None)), "orthogonal"),
    ((5, 6, 7), ([0, 1], [0, 1]), "basic"),
    ((5,), [1, 2], "vindex"),
    ((5,), np.array([1, 2]), "vindex"),
    ((5,), [True, False, True, False, True], "vindex"),
    ((5,), 3, "orthogonal"),
    ((5, 6), ("f0", slice(None), [1, 2]), "orthogonal"),
    ((5, 6), ("f0", 1, [0, 4]), "vindex"),
    ((), (), "basic"),
    ((), Ellipsis, "basic"),
])
def test_classify_selection(shape, sel, kind):
    assert classify_selection(sel, shape) == kind
    idx = pytest.importorskip("zarr.core.indexing")
    _, pure = idx.pop_fields(sel)
    theirs = ("vindex" if idx.is_pure_fancy_indexing(pure, len(shape)) else
              "orthogonal" if idx.is_pure_orthogonal_indexing(pure, len(shape)) else "basic")
    assert theirs == kind


def test_vindex_dispatch():
    assert isinstance(vindex_indexer(np.ones((10, 6), bool), G2), MaskIndexer)
    assert isinstance(vindex_indexer(([1], [2]), G2), CoordinateIndexer)
    assert not isinstance(vindex_indexer(([1], [2]), G2), MaskIndexer)
