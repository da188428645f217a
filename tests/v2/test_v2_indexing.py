"""Indexing a Zarr v2 array works as on v3: hypothesis draws the geometry, the order (C
or F), the compressor, the chunk key separator and selections; kvzarr's reads and writes
are compared with numpy's, and what kvzarr wrote with what zarr-python 3 reads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

import kvzarr  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

COMPRESSORS = [None, {"id": "zlib", "level": 1}, {"id": "blosc", "cname": "lz4",
                                                  "clevel": 3, "shuffle": 2}]


@st.composite
def v2_arrays(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, n + 2)) for n in shape)
    return dict(shape=shape, chunks=chunks, order=draw(st.sampled_from("CF")),
                dtype=draw(st.sampled_from(["<i4", ">f8", "<u2"])),
                compressors=draw(st.sampled_from(COMPRESSORS)),
                chunk_key_encoding={"name": "v2",
                                    "separator": draw(st.sampled_from("./"))})


@st.composite
def slices(draw, n):
    start = draw(st.integers(-n, n))
    stop = draw(st.integers(-n, n + 2))
    step = draw(st.sampled_from([None, 1, 2, 3]))
    return slice(start, stop, step)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=v2_arrays(), data=st.data())
def test_v2_reads_and_writes_match_numpy_and_zarr_python(spec, data) -> None:
    store = kvzarr.MemoryStore()
    a = kvzarr.create_array(store, name="a", fill_value=0, zarr_format=2, **spec)
    want = (np.arange(np.prod(spec["shape"])) * 7 % 251).astype(spec["dtype"]).reshape(
        spec["shape"])
    a[...] = want
    sel = tuple(data.draw(slices(n)) for n in spec["shape"])
    np.testing.assert_array_equal(a[sel], want[sel])
    picks = [np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4)))
             for n in spec["shape"]]
    np.testing.assert_array_equal(a.oindex[tuple(picks)], want[np.ix_(*picks)])
    region = tuple(data.draw(slices(n)) for n in spec["shape"])
    a[region] = 5
    want[region] = 5
    np.testing.assert_array_equal(a[...], want)
    theirs = zarr.open_array(kvzarr.ZarrStore(store, read_only=True), path="a", mode="r",
                             zarr_format=2)
    np.testing.assert_array_equal(theirs[...], want)
