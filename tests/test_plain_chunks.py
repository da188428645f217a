"""Bulk encoding of whole plain-bytes chunks (kvzarr/plain_chunks.py): the box, the chunks
outside it, the keys, and whole writes that store exactly the bytes the chunk-by-chunk
path stores (a filesystem store takes that path; memory and LMDB take the bulk one)."""

from __future__ import annotations

import contextlib
import tempfile
import threading
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr.grid import ChunkGrid
from kvzarr.indexing import BasicIndexer
from kvzarr.metadata.chunk_keys import ChunkKeyEncoding
from kvzarr.engine.plain_chunks import find_box, slabs
from kvzarr.stores.filesystem import FilesystemStore
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.memory import MemoryStore


@st.composite
def selections(draw, shape):
    """A basic selection of slices (mostly step 1, sometimes a step over chunks of 1)."""
    out = []
    for n in shape:
        start = draw(st.integers(0, n - 1))
        stop = draw(st.integers(start + 1, n))
        step = draw(st.sampled_from([1, 1, 1, 2]))
        out.append(slice(start, stop, step))
    return tuple(out)


@st.composite
def layouts(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 12)) for _ in range(ndim))
    chunks = tuple(draw(st.sampled_from([1, 2, 3, n])) if n > 1 else 1 for n in shape)
    chunks = tuple(min(c, n) for c, n in zip(chunks, shape))
    return shape, chunks


@settings(max_examples=200, deadline=None)
@given(layouts(), st.data())
def test_box_and_outside_are_every_projection_once(layout, data):
    shape, chunks = layout
    sel = data.draw(selections(shape))
    ix = BasicIndexer(sel, ChunkGrid.from_sizes(shape, chunks))
    every = {p.chunk_coords: p for p in ix}
    box = find_box(ix, chunks)
    if box is None:
        assert not any(p.is_complete_chunk and _full(p, chunks) for p in every.values())
        return
    inside = {tuple(d.coords[i] for d, i in zip(ix.dim_projections, pos))
              for pos in product(*box)}
    outside = list(ix.projections_outside(box))
    assert len(outside) + len(inside) == len(every)
    assert {p.chunk_coords for p in outside} | inside == set(every)
    for p in outside:
        assert p == every[p.chunk_coords]
    for coords in inside:   # the box holds only chunks written whole
        assert every[coords].is_complete_chunk and _full(every[coords], chunks)
    pieces = list(slabs(box, 7, 20))
    assert [i for piece in pieces for i in piece[0]] == list(box[0])


def _full(p, chunks):
    return all(s.stop - s.start == c for s, c in zip(p.out_selection, chunks))


@given(st.lists(st.lists(st.integers(0, 120), min_size=1, max_size=4), max_size=3),
       st.sampled_from([("default", "/"), ("default", "."), ("v2", "."), ("v2", "/")]))
def test_encode_grid_is_encode_of_each(coords, encoding):
    enc = ChunkKeyEncoding(*encoding)
    assert enc.encode_grid(coords) == [enc.encode(c) for c in product(*coords)]


@given(st.integers(0, 4).flatmap(lambda ndim: st.lists(
           st.tuples(*[st.integers(0, 10 ** 6)] * ndim), max_size=20)),
       st.sampled_from([("default", "/"), ("default", "."), ("v2", "."), ("v2", "/")]),
       st.sampled_from(["", "a/", "deep/er/"]))
def test_encode_many_is_encode_of_each(coords, encoding, prefix):
    enc = ChunkKeyEncoding(*encoding)
    assert enc.encode_many(coords, prefix) == [prefix + enc.encode(c) for c in coords]


DTYPES = ["uint8", "<i2", ">i4", "float32", ">f8", "complex64", "bool"]


@settings(max_examples=60, deadline=None)
@given(layouts(), st.sampled_from(DTYPES), st.booleans(), st.data())
def test_bulk_writes_store_what_chunk_by_chunk_writes_store(layout, dtype, empty, data):
    shape, chunks = layout
    endian = "big" if dtype.startswith(">") else "little"
    writes = []
    for _ in range(data.draw(st.integers(1, 3))):
        sel = data.draw(selections(shape))
        part = np.zeros(shape, dtype=dtype)[sel].shape
        seed = data.draw(st.integers(0, 2 ** 16))
        zeros = data.draw(st.booleans())     # fill-valued chunks are erased, not written
        writes.append((sel, np.zeros(part, dtype) if zeros else _random(part, dtype, seed)))
    want = np.zeros(shape, dtype=dtype)
    for sel, value in writes:
        want[sel] = value
    # slabs of a few chunks: a box is laid out and stored slab by slab, streamed
    slab = data.draw(st.sampled_from([None, 1, 3 * np.dtype(dtype).itemsize * 16]))
    with tempfile.TemporaryDirectory() as tmp, _box_slabs(slab):
        # (the durable directory store takes boxes too, under its key locks)
        stores = {"fs": FilesystemStore(Path(tmp) / "fs"), "memory": MemoryStore(),
                  "lmdb": LMDBStore(Path(tmp) / "a.lmdb"),
                  "fs-durable": FilesystemStore(Path(tmp) / "fsd", fsync=True)}
        for store in stores.values():
            a = kvzarr.create_array(
                store, name="a", shape=shape, dtype=np.dtype(dtype).newbyteorder("="),
                chunks=chunks, fill_value=0, compressors=None,
                serializer={"name": "bytes", "configuration": {"endian": endian}},
                config={"write_empty_chunks": empty})
            for sel, value in writes:
                a[sel] = value
            np.testing.assert_array_equal(a[...], want)
        reference = _chunks(stores.pop("fs"))
        for name, store in stores.items():
            assert _chunks(store) == reference, name
        stores["lmdb"].close()


@contextlib.contextmanager
def _box_slabs(nbytes):
    from kvzarr.engine import chunk_io
    old = chunk_io._BOX_SLAB_BYTES
    chunk_io._BOX_SLAB_BYTES = old if nbytes is None else nbytes
    try:
        yield
    finally:
        chunk_io._BOX_SLAB_BYTES = old


def _random(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize,
                       dtype=np.uint8)
    return np.frombuffer(raw.tobytes(), dtype=np.dtype(dtype).newbyteorder("=")).reshape(shape)


def _chunks(store):
    return {k: store.get(k) for k in store.list_prefix("a/c/")}


@pytest.mark.parametrize("on_worker", [False, True], ids=["streamed", "on a pool worker"])
def test_a_write_of_more_than_one_slab_stores_every_slab(monkeypatch, on_worker):
    # Cut the box (10 x 2 whole chunks) into slabs of three rows of chunks: each is
    # laid out on the stream's thread while the store takes the one before; a call on a
    # pool worker (which may not wait for a stream) lays them out itself, in turn.
    from kvzarr.engine import chunk_io
    from kvzarr.runtime import workers
    monkeypatch.setattr(chunk_io, "_BOX_SLAB_BYTES", 3 * 2 * 4 * 4 * 8)
    threads: list[str] = []
    real = chunk_io.ChunkIO._encode_box

    def encode_box(self, *args):
        threads.append(threading.current_thread().name)
        return real(self, *args)
    monkeypatch.setattr(chunk_io.ChunkIO, "_encode_box", encode_box)
    store = MemoryStore()
    a = kvzarr.create_array(store, name="a", shape=(40, 9), dtype="float64", chunks=(4, 4),
                            compressors=None)
    value = np.arange(360, dtype="float64").reshape(40, 9) + 1
    if on_worker:
        workers.POOL.submit(a.__setitem__, Ellipsis, value).result()
    else:
        a[...] = value
    np.testing.assert_array_equal(a[...], value)
    assert len(list(store.list_prefix("a/c/"))) == 10 * 3
    assert len(threads) == 4                                  # 10 rows, 3 a slab
    assert all(t.startswith("kvzarr-worker" if on_worker else "kvzarr-encode")
               for t in threads), threads


@settings(max_examples=80, deadline=None)
@given(layout=layouts(), dtype=st.sampled_from(["<i4", ">f8", "u1", "<c8", ">i2"]),
       data=st.data())
def test_plain_chunk_reads_match_numpy_and_the_pipeline(layout, dtype, data):
    """Reads of plain chunks skip the codec pipeline (ChunkIO._decode_one, and the box of
    small whole chunks copied out at once: plain_chunks.decode_box): the same values as
    numpy and as the pipeline, for whole chunks inside the array, edge chunks, parts of
    chunks, a missing chunk, selections with integers (an axis dropped), steps and
    points, and every byte order, on a store of files (no transactions), one that hands
    out bytes and one that lends views."""
    shape, chunks = layout
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    values = (rng.random(shape) * 100).astype(dtype)
    sel = data.draw(selections(shape))
    ints = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    sel = tuple(s.start if i else s for s, i in zip(sel, ints))
    values[tuple(slice(0, c) for c in chunks)] = 0          # chunk 0 is the fill: not stored
    with tempfile.TemporaryDirectory() as d:
        for store in (FilesystemStore(Path(d) / "x"), MemoryStore(),
                      LMDBStore(Path(d) / "x.lmdb")):
            a = kvzarr.create_array(store, name="a", shape=shape, chunks=chunks, dtype=dtype,
                                    compressors=None, fill_value=0)
            a[...] = values
            points = tuple(rng.integers(0, n, 5) for n in shape)
            got, got_points = a[sel], a.vindex[points]
            np.testing.assert_array_equal(got, values[sel])
            np.testing.assert_array_equal(got_points, values[points])
            a._io._plain_chunk = None                 # the pipeline, for every chunk
            np.testing.assert_array_equal(a[sel], got)
            np.testing.assert_array_equal(a.vindex[points], got_points)
            store.close()


@settings(max_examples=40, deadline=None)
@given(layout=layouts(), dtype=st.sampled_from(["<i4", ">f8", "u1"]), data=st.data())
def test_points_gathered_from_plain_chunks_match_numpy(layout, dtype, data):
    """Coordinate and mask selections of plain chunks are picked out of the chunks' bytes
    laid end to end (ChunkIO._gather_points), batch by batch: the same values as numpy,
    with repeated and unsorted points, missing chunks read as the fill value, on a
    store of files (no transactions), one of bytes and one of views."""
    shape, chunks = layout
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    values = (rng.random(shape) * 100 + 1).astype(dtype)
    values[tuple(slice(0, c) for c in chunks)] = 7          # chunk 0 is the fill: not stored
    npoints = data.draw(st.integers(2, 40))
    points = tuple(rng.integers(0, n, npoints) for n in shape)
    mask = rng.random(shape) < 0.3
    with tempfile.TemporaryDirectory() as d:
        for store in (FilesystemStore(Path(d) / "x"), MemoryStore(),
                      LMDBStore(Path(d) / "x.lmdb")):
            a = kvzarr.create_array(store, name="a", shape=shape, chunks=chunks, dtype=dtype,
                                    compressors=None, fill_value=7)
            a[...] = values
            np.testing.assert_array_equal(a.vindex[points], values[points])
            np.testing.assert_array_equal(a.vindex[mask], values[mask])
            store.close()


def test_points_and_boxes_are_read_in_batches_and_bad_chunks_raise(monkeypatch, tmp_path):
    from kvzarr.engine import chunk_io
    from kvzarr.errors import ChunkNotFoundError, CodecError
    monkeypatch.setattr(chunk_io, "_GATHER_BYTES", 3 * 16)    # three 4 x 1 chunks a batch
    values = np.arange(40, dtype="<i4").reshape(10, 4)
    points = (np.array([9, 0, 5, 5, 2, 8, 1]), np.array([3, 0, 1, 2, 2, 0, 3]))
    for store in (FilesystemStore(tmp_path / "x"), LMDBStore(tmp_path / "x.lmdb")):
        a = kvzarr.create_array(store, name="a", shape=(10, 4), chunks=(1, 4), dtype="<i4",
                                compressors=None, fill_value=0)
        a[...] = values
        np.testing.assert_array_equal(a.vindex[points], values[points])
        np.testing.assert_array_equal(a[1:9], values[1:9])   # a box of 8, in 3 slabs
        store.set("a/c/5/0", b"\0" * 15)                      # cut short
        for read in (lambda: a.vindex[points], lambda: a[1:9]):
            with pytest.raises(CodecError) as e:
                read()
            assert e.value.key == "a/c/5/0"
        store.erase("a/c/5/0")
        want, whole = values[points].copy(), values.copy()
        want[2:4] = whole[5] = 0
        np.testing.assert_array_equal(a.vindex[points], want)  # missing: the fill value
        np.testing.assert_array_equal(a[1:9], whole[1:9])
        strict = kvzarr.open_array(store, path="a", mode="r",
                                   config={"read_missing_chunks": False})
        for read in (lambda: strict.vindex[points], lambda: strict[1:9]):
            with pytest.raises(ChunkNotFoundError):
                read()
        store.close()
