"""A directory or zip store written through a cache stack (writes, partial overwrites
read back through the warm cache, then the final state) is read bit-exactly by
zarr-python 3 and TensorStore: the cache is a runtime transformer and changes nothing
of what is stored."""

from __future__ import annotations

import pytest

import kvzarr
from kvzarr.stores.zip import ZipStore
from kvzarr.transformers import Cache

from .conftest import (NAME, REGIONS, Case, assert_bit_equal, creation_kwargs,
                       expected_array, read_tensorstore, read_zarr_python, sample)

ts = pytest.importorskip("tensorstore")
zarr = pytest.importorskip("zarr")

#: a covering few: default codecs, gzip, sharded with the index at the end and at the
#: start, blosc inside shards
CASES = [Case("float32", "nonzero"), Case("uint16", "nonzero", "gzip"),
         Case("uint16", "nonzero", "none", "end"), Case("float64", "nonzero", "gzip", "start"),
         Case("float32", "nan", "blosc-lz4-shuffle", "end")]


def _write_through_cache(case, store):
    cache = Cache(store, max_bytes=1 << 20)
    arr = kvzarr.create_array(cache, name=NAME, **creation_kwargs(case, "kvzarr"))
    data = sample(case.dtype, case.seed)
    first, second = REGIONS
    arr[first] = data[first]
    for _ in range(2):                               # the second read is from the cache
        assert_bit_equal(arr[first], data[first])
    arr[second] = data[second]                       # then write again through it
    assert_bit_equal(arr[second], data[second])
    assert_bit_equal(arr[first], data[first])
    assert cache.stats()["hits"] > 0 or store.change_counter() is None
    cache.close()
    return expected_array(case, data)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_directory_written_through_a_cache_is_read_by_the_peers(case, tmp_path):
    expected = _write_through_cache(case, kvzarr.FilesystemStore(tmp_path))
    assert_bit_equal(read_zarr_python(tmp_path), expected)
    assert_bit_equal(read_tensorstore(tmp_path), expected)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_zip_written_through_a_cache_is_read_by_the_peers(case, tmp_path):
    path = tmp_path / "data.zip"
    expected = _write_through_cache(case, ZipStore(path))
    with zarr.storage.ZipStore(path, mode="r") as zs:
        assert_bit_equal(zarr.open_array(zs, path=NAME, mode="r")[...], expected)
    spec = {"driver": "zarr3", "kvstore": {"driver": "zip", "path": f"{NAME}/",
                                           "base": f"file://{path}"}}
    assert_bit_equal(ts.open(spec, open=True, read=True).result().read().result(), expected)
