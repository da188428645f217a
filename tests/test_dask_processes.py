"""kvzarr arrays in dask: ``da.from_array(kvzarr_array)`` reads, ``da.store(x,
kvzarr_array)`` writes, with dask's ``processes`` scheduler and with a
``distributed.LocalCluster`` of two worker processes.

The dask chunks never line up with the storage chunks, so tasks in different processes
write into the same stored chunk (or shard) at once: each such write is a
read-modify-write of the chunk in one store transaction, so no update is lost. Every
comparison is with numpy, on a target that starts out as a fill value no source element
has, so a lost update shows."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvzarr

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

SHAPE = (37, 29)
#: dask chunks, against storage chunks of (8, 8) (or shards of (16, 16) of (8, 8))
DASK_CHUNKS = (5, 7)
FILL = -1
TARGETS = ["x.sqlite", "x.lmdb"]


def source() -> np.ndarray:
    return np.arange(np.prod(SHAPE), dtype="i4").reshape(SHAPE)


def target(path, sharded: bool = False) -> kvzarr.Array:
    return kvzarr.create_array(path, shape=SHAPE, dtype="i4", fill_value=FILL,
                               chunks=(8, 8), shards=(16, 16) if sharded else None)


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    """The processes of dask's ``processes`` scheduler: two, started as dask starts them
    (spawn), kept for the module (dask would otherwise start new ones for every compute;
    forked processes are tried with pickled arrays in tests/test_node_processes.py)."""
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as executor:
        yield executor


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_from_array_looks_like_an_array_to_dask(tmp_path):
    a = target(tmp_path / "x.lmdb")
    a[...] = source()
    x = da.from_array(a)          # "auto": whole multiples of the stored chunks
    assert x.shape == SHAPE and x.dtype == np.dtype("i4")
    assert all(c % 8 == 0 or c == n for c, n in zip(x.chunksize, SHAPE))
    assert np.array_equal(x.compute(scheduler="threads"), source())
    assert da.from_array(a, chunks=a.chunks).chunksize == (8, 8)
    sharded = target(tmp_path / "s.lmdb", sharded=True)
    sharded[...] = source()
    x = da.from_array(sharded, chunks=(20, 20))   # 20 cuts across the shards' 16
    assert np.array_equal(x.compute(scheduler="threads"), source())
    sharded.close()
    y = da.from_array(a, chunks=DASK_CHUNKS)
    assert np.array_equal((y + 1).compute(scheduler="threads"), source() + 1)
    a.close()


def test_from_array_of_an_array_in_memory_works_with_threads():
    a = kvzarr.create_array("memory://", shape=(10,), chunks=(4,), dtype="f8")
    a[...] = np.linspace(0, 1, 10)
    assert np.allclose(da.from_array(a, chunks=3).compute(), np.linspace(0, 1, 10))


def test_from_array_of_a_rectilinear_array_with_explicit_chunks():
    """Regression: dask's from_array asks ``getattr(x, "chunks", None)``, which swallows
    only AttributeError; ``chunks`` of a rectilinear array raised NotImplementedError
    alone, so from_array failed even with chunks given."""
    a = kvzarr.create_array("memory://", shape=(10,), dtype="i4", chunks=[[3, 3, 4]])
    a[...] = np.arange(10)
    assert getattr(a, "chunks", None) is None
    np.testing.assert_array_equal(da.from_array(a, chunks=(5,)).compute(), np.arange(10))


@pytest.mark.parametrize("name", TARGETS)
def test_store_with_the_processes_scheduler_loses_no_update(tmp_path, name, pool):
    a = target(tmp_path / name)
    x = da.from_array(source(), chunks=DASK_CHUNKS)
    da.store(x, a, lock=False, scheduler="processes", pool=pool)
    assert np.array_equal(a[...], source())
    a.close()


def test_store_into_shards_with_the_processes_scheduler_loses_no_update(tmp_path, pool):
    a = target(tmp_path / "x.lmdb", sharded=True)
    da.store(da.from_array(source(), chunks=DASK_CHUNKS), a, lock=False,
             scheduler="processes", pool=pool)
    assert np.array_equal(a[...], source())
    a.close()


def test_from_array_and_store_between_kvzarr_arrays_in_processes(tmp_path, pool):
    src = target(tmp_path / "src.sqlite")
    src[...] = source()
    dst = target(tmp_path / "dst.lmdb")
    x = da.from_array(src, chunks=DASK_CHUNKS) * 2
    da.store(x, dst, lock=False, scheduler="processes", pool=pool)
    assert np.array_equal(dst[...], source() * 2)
    src.close()
    dst.close()


@pytest.mark.parametrize("name", TARGETS)
def test_store_with_a_distributed_cluster_loses_no_update(tmp_path, name, client):
    a = target(tmp_path / name, sharded=name.endswith(".lmdb"))
    x = da.from_array(source(), chunks=DASK_CHUNKS)
    da.store(x, a, lock=False, scheduler=client)
    assert np.array_equal(a[...], source())
    # and back: the workers read the array they wrote
    back = da.from_array(a, chunks=DASK_CHUNKS).sum().compute(scheduler=client)
    assert int(back) == int(source().sum())
    a.close()


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_store_and_from_array_agree_with_numpy_for_any_chunking(data):
    """Any shape, storage chunks, dask chunks and region, with dask's threads: what
    ``da.store`` writes and ``da.from_array`` reads back is what numpy gives."""
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(data.draw(st.integers(1, n + 2)) for n in shape)
    dask_chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
    region = tuple(slice(*sorted(data.draw(st.lists(st.integers(0, n), min_size=2,
                                                         max_size=2)))) for n in shape)
    model = np.full(shape, FILL, dtype="i4")
    values = np.arange(model[region].size, dtype="i4").reshape(model[region].shape)
    model[region] = values
    a = kvzarr.create_array(None, shape=shape, chunks=chunks, dtype="i4", fill_value=FILL)
    if values.size:
        da.store(da.from_array(values, chunks=dask_chunks), a, regions=region,
                 lock=False, scheduler="threads")
    assert np.array_equal(a[...], model)
    assert np.array_equal(da.from_array(a, chunks=dask_chunks).compute(scheduler="threads"),
                          model)
