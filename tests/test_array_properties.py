"""Property tests of the whole stack: random arrays, chunkings (regular and rectilinear,
sharded or not) and selections of every kind, read and written through a real store and
real codecs, compared with numpy doing the same."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def arrays(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim)))
    chunks = []
    for n in shape:
        if n > 1 and draw(st.booleans()):
            # rectilinear: random edges covering the extent, and sometimes passing it (the
            # last edge longer than the rest, or whole cells past the end)
            edges, left = [], n
            while left:
                e = draw(st.integers(1, left))
                edges.append(e)
                left -= e
            if draw(st.booleans()):
                edges[-1] += draw(st.integers(0, 3))
                edges += draw(st.lists(st.integers(1, 4), max_size=2))
            chunks.append(edges)
        else:
            chunks.append(draw(st.integers(1, 5)))
    return shape, chunks


def slice_for(draw, n):
    start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
    stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
    step = draw(st.one_of(st.none(), st.integers(1, 4)))
    return slice(start, stop, step)


@st.composite
def basic_selection(draw, shape):
    sel = []
    for n in shape:
        if n and draw(st.booleans()):
            sel.append(draw(st.integers(-n, n - 1)))
        else:
            sel.append(slice_for(draw, n))
    return tuple(sel)


@st.composite
def orthogonal_selection(draw, shape):
    sel = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "ints", "bools"]))
        if kind == "ints" and n:
            sel.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=6))))
        elif kind == "bools":
            sel.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool))
        else:
            sel.append(slice_for(draw, n))
    return tuple(sel)


def new_array(shape, chunks, sharded, dtype="int32"):
    store = kvzarr.MemoryStore()
    kwargs = {}
    if sharded and all(isinstance(c, int) for c in chunks):
        kwargs["shards"] = tuple(2 * c for c in chunks)
    a = kvzarr.create_array(store, name="a", shape=shape, chunks=chunks, dtype=dtype,
                            fill_value=-7, **kwargs)
    return a


@SETTINGS
@given(data=st.data(), spec=arrays(), sharded=st.booleans())
def test_basic_and_orthogonal_get_set(data, spec, sharded):
    shape, chunks = spec
    a = new_array(shape, chunks, sharded)
    ref = np.full(shape, -7, dtype="int32")
    init = np.arange(int(np.prod(shape)), dtype="int32").reshape(shape)
    # write part of the array so that some chunks stay missing
    sel = data.draw(basic_selection(shape))
    a[sel] = init[sel]
    ref[sel] = init[sel]
    np.testing.assert_array_equal(a[...], ref)
    sel = data.draw(basic_selection(shape))
    np.testing.assert_array_equal(a[sel], ref[sel])
    osel = data.draw(orthogonal_selection(shape))
    np.testing.assert_array_equal(a.oindex[osel], ref[np.ix_(*_ix(osel, shape))])
    value = np.asarray(ref[np.ix_(*_ix(osel, shape))]) + 1000
    a.oindex[osel] = value
    ref[np.ix_(*_ix(osel, shape))] = value
    np.testing.assert_array_equal(a[...], ref)


def _ix(sel, shape):
    """Orthogonal selection as index arrays for np.ix_."""
    out = []
    for s, n in zip(sel, shape):
        if isinstance(s, slice):
            out.append(np.arange(n)[s])
        elif isinstance(s, np.ndarray) and s.dtype == bool:
            out.append(np.nonzero(s)[0])
        else:
            out.append(np.asarray(s) % n if n else np.asarray(s))
    return out


@SETTINGS
@given(data=st.data(), spec=arrays(), sharded=st.booleans())
def test_coordinate_and_mask_get_set(data, spec, sharded):
    shape, chunks = spec
    if 0 in shape:
        return
    a = new_array(shape, chunks, sharded)
    ref = np.arange(int(np.prod(shape)), dtype="int32").reshape(shape)
    a[...] = ref
    npts = data.draw(st.integers(1, 8))
    coords = tuple(np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=npts,
                                               max_size=npts))) for n in shape)
    np.testing.assert_array_equal(a.vindex[coords], ref[coords])
    values = np.arange(npts, dtype="int32") + 5000
    a.vindex[coords] = values
    ref[coords] = values  # numpy: last write wins for duplicates, as zarr-python
    np.testing.assert_array_equal(a[...], ref)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=ref.size, max_size=ref.size)),
                    dtype=bool).reshape(shape)
    np.testing.assert_array_equal(a.vindex[mask], ref[mask])
    a.vindex[mask] = -1
    ref[mask] = -1
    np.testing.assert_array_equal(a[...], ref)


@SETTINGS
@given(data=st.data(), spec=arrays())
def test_block_selection(data, spec):
    shape, chunks = spec
    if 0 in shape:
        return  # no blocks to select (zarr-python raises BoundsCheckError there too)
    a = new_array(shape, chunks, sharded=False)
    ref = np.arange(int(np.prod(shape)), dtype="int32").reshape(shape)
    a[...] = ref
    grid = a.metadata.chunk_grid
    sel = []
    for dim in grid.dimensions:
        n = dim.nchunks
        lo = data.draw(st.integers(0, n - 1))
        hi = data.draw(st.integers(lo, n))
        sel.append(slice(lo, hi))
    starts = [d.chunk_offset(s.start) if s.start is not None and s.start < d.nchunks else 0
              for d, s in zip(grid.dimensions, sel)]
    ends = [min(d.extent, d.chunk_offset(s.stop - 1) + d.chunk_size(s.stop - 1))
            if s.stop is not None and s.stop > s.start else st_ for d, s, st_ in
            zip(grid.dimensions, sel, starts)]
    expected = ref[tuple(slice(b, e) for b, e in zip(starts, ends))]
    np.testing.assert_array_equal(a.blocks[tuple(sel)], expected)


@settings(SETTINGS, max_examples=30)
@given(data=st.data(), spec=arrays(), sharded=st.booleans(), n=st.integers(1, 6))
def test_null_terminated_bytes_get_set(data, spec, sharded, n):
    """numpy ``S<n>``: any bytes, NULs inside and at the end (padding) included, read
    back byte for byte; missing chunks read as the fill."""
    shape, chunks = spec
    dtype = f"S{n}"
    fill = data.draw(st.binary(max_size=n))
    size = int(np.prod(shape))
    store = kvzarr.MemoryStore()
    kwargs = {"shards": tuple(2 * c for c in chunks)} if (
        sharded and all(isinstance(c, int) for c in chunks)) else {}
    a = kvzarr.create_array(store, name="a", shape=shape, chunks=chunks, dtype=dtype,
                            fill_value=fill, **kwargs)
    assert a.dtype == np.dtype(dtype)
    ref = np.full(shape, fill, dtype=dtype)
    values = np.array(data.draw(st.lists(st.binary(max_size=n), min_size=size,
                                         max_size=size)), dtype=dtype).reshape(shape)
    sel = data.draw(basic_selection(shape))
    a[sel] = values[sel]
    ref[sel] = values[sel]
    assert a[...].tobytes() == ref.tobytes()
    osel = data.draw(orthogonal_selection(shape))
    assert a.oindex[osel].tobytes() == ref[np.ix_(*_ix(osel, shape))].tobytes()
    reopened = kvzarr.open_array(store, path="a", mode="r")
    assert reopened.fill_value == np.array(fill, dtype=dtype)[()]
    assert reopened[...].tobytes() == ref.tobytes()


@pytest.mark.parametrize("compressors", [None, "auto", [{"name": "gzip", "configuration": {"level": 1}}]])
def test_codecs_round_trip_through_array(tmp_path, compressors):
    store = kvzarr.FilesystemStore(tmp_path / "d")
    data = np.random.default_rng(0).normal(size=(37, 21)).astype(">f8")
    a = kvzarr.create_array(store, name="x", data=data, chunks=(8, 5), compressors=compressors)
    b = kvzarr.open_array(kvzarr.FilesystemStore(tmp_path / "d"), path="x", mode="r")
    np.testing.assert_array_equal(b[...], data)
    assert a.dtype == np.dtype("float64")
