"""Whole-array reads on every store: SQL and zip stores hand the chunks out one at a time
(Store.iter_values; plain chunks are copied out on the spot, compressed ones decoded on
the pool in batches while the next are fetched), LMDB as views into its map, the rest as
a list. Every way gives numpy's answer, missing chunks read as the fill value, and a
missing chunk with read_missing_chunks off fails the read whichever thread finds it."""

from __future__ import annotations

from itertools import count

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr import ArrayConfig
from kvzarr.errors import ChunkNotFoundError
from kvzarr.stores.lmdb import LMDBStore

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


GZIP = [{"name": "gzip", "configuration": {"level": 1}}]


def test_big_compressed_read_decodes_every_chunk(store_factory: StoreFactory) -> None:
    store = store_factory.make()
    rng = np.random.default_rng(2)
    want = rng.integers(0, 1 << 20, (400, 512), dtype="int64")    # ~1.6 MB of chunks
    a = kvzarr.create_array(store, name="gz", shape=want.shape, chunks=(50, 64),
                            dtype="int64", compressors=GZIP, fill_value=-1)
    a[...] = want
    a[100:150, 0:64] = -1                        # one chunk at the fill value: not stored
    want[100:150, 0:64] = -1
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(a[7:393, 5:500:3], want[7:393, 5:500:3])
    strict = kvzarr.open_array(store, path="gz", config=ArrayConfig(read_missing_chunks=False))
    with pytest.raises(ChunkNotFoundError):
        strict[...]


def test_a_failed_parallel_read_leaves_nothing_running(tmp_path) -> None:
    """When one chunk's decode fails, the others are still running on the pool: none may
    outlive the read. On LMDB they decode views of the memory map, which closing the
    store right after the failure unmaps (a crash, not an exception, if one is left)."""
    path = tmp_path / "x.lmdb"
    want = np.random.default_rng(3).integers(0, 1 << 20, (400, 512), dtype="int64")
    with LMDBStore(path) as store:
        a = kvzarr.create_array(store, name="gz", shape=want.shape, chunks=(50, 64),
                                dtype="int64", compressors=GZIP, fill_value=-1)
        a[...] = want
        a[0:50, 0:64] = -1                       # the first chunk is missing
    for _ in range(20):
        store = LMDBStore(path)
        strict = kvzarr.open_array(store, path="gz",
                                   config=ArrayConfig(read_missing_chunks=False))
        with pytest.raises(ChunkNotFoundError):
            strict[...]
        store.close()                            # the map goes with the last handle
