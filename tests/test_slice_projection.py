"""A slice over a few chunks is projected in plain integers, a longer one with numpy
(kvzarr.indexing.dims): both give the same projection, and that projection picks out
what numpy's own slicing does, on regular and rectilinear dimensions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.grid import FixedDimension, VaryingDimension
from kvzarr.indexing import dims
from kvzarr.indexing.dims import normalize_slice, project_slice


@st.composite
def dimensions(draw):
    length = draw(st.integers(1, 300))
    if draw(st.booleans()):
        return FixedDimension(draw(st.integers(1, 40)), length)
    edges: list[int] = []
    while sum(edges) < length:
        edges.append(draw(st.integers(1, 40)))
    return VaryingDimension(edges, length)


@st.composite
def dimension_and_slice(draw):
    dim = draw(dimensions())
    bound = st.none() | st.integers(-dim.extent - 3, dim.extent + 3)
    return dim, slice(draw(bound), draw(bound), draw(st.none() | st.integers(1, 50)))


def fields(p: dims.DimProjection) -> tuple:
    return (p.kind, p.nitems, p.coords, p.chunk_sel, p.out_sel, p.complete)


@settings(max_examples=400, deadline=None)
@given(dimension_and_slice())
def test_both_ways_give_the_same_projection(case):
    dim, sel = case
    s, e, k = normalize_slice(sel, dim.extent)
    n = max(0, -(-(e - s) // k))
    if n == 0:
        return
    t = s + (n - 1) * k
    j0, j1 = dim.index_to_chunk(s), dim.index_to_chunk(t)
    vectorised = dims._slice_vectorised(dim, s, t, k, n, j0, j1)
    if j1 - j0 + 1 <= n:      # the dense case, the only one the plain loop takes
        assert fields(dims._slice_over_few_chunks(dim, s, t, k, n, j0, j1)) == \
            fields(vectorised)
    assert fields(project_slice(sel, dim)) == fields(vectorised)


@settings(max_examples=400, deadline=None)
@given(dimension_and_slice())
def test_projection_picks_out_what_numpy_slicing_does(case):
    dim, sel = case
    data = np.arange(dim.extent)
    p = project_slice(sel, dim)
    out = np.full(p.nitems, -1)
    for j, chunk_sel, out_sel, complete in zip(p.coords, p.chunk_sel, p.out_sel,
                                               p.complete):
        start = dim.chunk_offset(j)
        chunk = data[start:start + dim.data_size(j)]
        out[out_sel] = chunk[chunk_sel]
        assert complete == (len(range(*chunk_sel.indices(chunk.size))) == chunk.size)
    np.testing.assert_array_equal(out, data[sel])
