"""Reads of uncompressed (plain-bytes) arrays on every store: SQL and zip stores hand the
chunks out one at a time (Store.iter_values), LMDB as views into its map, the rest as a
list; every way gives numpy's answer, with missing chunks read as the fill value."""

from __future__ import annotations

from itertools import count

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr

from .conftest import StoreFactory

_NAMES = count()


def _slices(draw, shape):
    out = []
    for n in shape:
        start = draw(st.integers(0, n - 1))
        stop = draw(st.integers(start + 1, n))
        out.append(slice(start, stop, draw(st.sampled_from([1, 1, 2, 5]))))
    return tuple(out)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_plain_reads_match_numpy(store_factory: StoreFactory, data) -> None:
    store = store_factory.make()
    shape = (data.draw(st.integers(1, 40)), data.draw(st.integers(1, 40)))
    chunks = (data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12)))
    name = f"a{next(_NAMES)}"          # the store lives across examples
    a = kvzarr.create_array(store, name=name, shape=shape, chunks=chunks, dtype="int32",
                            fill_value=-7, compressors=None)
    want = np.full(shape, -7, dtype="int32")
    # some chunks written, some left missing
    region = _slices(data.draw, shape)
    values = np.arange(np.prod(want[region].shape), dtype="int32").reshape(
        want[region].shape) + 1
    a[region] = values
    want[region] = values
    np.testing.assert_array_equal(a[...], want)
    sel = _slices(data.draw, shape)
    np.testing.assert_array_equal(a[sel], want[sel])


def test_big_plain_read_streams_every_chunk(store_factory: StoreFactory) -> None:
    store = store_factory.make()
    rng = np.random.default_rng(1)
    want = rng.integers(0, 1 << 30, (300, 520), dtype="int64")
    a = kvzarr.create_array(store, name="big", shape=want.shape, chunks=(64, 64),
                            dtype="int64", compressors=None)
    a[...] = want
    a[64:128, 128:192] = 0                      # ... and one chunk back at the fill value
    want[64:128, 128:192] = 0
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(a[10:290, 3:517], want[10:290, 3:517])
