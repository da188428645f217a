"""The parallel encoder of whole shards (kvzarr.codecs.sharding.encoder): the inner chunks
of many shards as one batch of pool tasks, each shard assembled once and handed over as
soon as it is ready; its bytes equal a serial encoding's and zarr-python's."""

from __future__ import annotations

import gzip
import tempfile
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr.codecs.sharding import encoder
from kvzarr.errors import CodecError
from kvzarr.runtime import workers

from .test_sharding import BYTES_LE, index_of, make_spec, ready, sample, sharding

GZIP5 = {"name": "gzip", "configuration": {"level": 5}}
MAX = 2**64 - 1


@pytest.fixture
def small_tasks(monkeypatch):
    """Every batch on the pool, each task a couple of inner chunks: many tasks per shard
    and shards finished by different threads, even for small test data."""
    monkeypatch.setattr(workers, "MIN_ITEMS", 2)
    monkeypatch.setattr(workers, "MIN_BYTES", 0)
    monkeypatch.setattr(encoder, "TASK_BYTES", 1)


def test_encode_many_equals_encoding_each_shard_alone_serially(small_tasks):
    spec = make_spec((16, 12), "uint16")
    codec = ready(sharding([4, 3], codecs=[BYTES_LE, GZIP5]), spec)
    shards = [sample((16, 12), "uint16", seed=s, chunk_shape=(4, 3)) for s in range(5)]
    shards.append(np.zeros((16, 12), "uint16"))          # nothing stored: None
    many = codec.encode_many(shards, [spec] * len(shards))
    alone = codec.encode_many(shards, [spec] * len(shards), parallel=False)
    assert many == alone
    assert many[-1] is None
    for data, shard in zip(shards[:-1], many):
        np.testing.assert_array_equal(codec.decode(shard, spec), data)


def test_done_gets_each_shard_once_as_soon_as_it_is_assembled(small_tasks):
    spec = make_spec((8, 8), "int32")
    codec = ready(sharding([2, 2], codecs=[BYTES_LE, GZIP5]), spec)
    shards = [sample((8, 8), seed=s, chunk_shape=(2, 2)) for s in range(7)]
    got: dict[int, bytes | None] = {}
    threads = set()
    lock = threading.Lock()

    def done(i, data):
        with lock:
            assert i not in got
            got[i] = data
            threads.add(threading.current_thread().name)

    out = codec.encode_many(shards, [spec] * 7, done)
    assert got == dict(enumerate(out))
    assert any(name.startswith("kvzarr-worker") for name in threads)


def test_an_inner_chunk_that_fails_to_encode_fails_the_batch_and_not_its_shard(
        small_tasks):
    spec = make_spec((8, 8), "int32")
    codec = ready(sharding([2, 2]), spec)
    good = sample((8, 8), seed=1)
    bad = good.astype(object)
    bad[5, 5] = "not a number"                # one inner chunk cannot become int32
    handed = []
    with pytest.raises(ValueError):
        codec.encode_many([good, bad, good], [spec] * 3, lambda i, d: handed.append(i))
    assert 1 not in handed
    # a shard of the wrong shape is refused before any inner chunk is encoded
    handed.clear()
    with pytest.raises(CodecError, match="expected"):
        codec.encode_many([good, np.ones((8, 4), "int32")], [spec, spec],
                          lambda i, d: handed.append(i))
    assert handed == []


def test_zero_sized_edge_shard_is_encoded_without_tasks():
    spec = make_spec((0, 4), "int32")
    codec = ready(sharding([2, 2]), make_spec((2, 4), "int32"))
    assert codec.encode_many([np.zeros((0, 4), "int32")], [spec]) == [None]


def _inner_chunks(shard: bytes, n: int) -> dict[int, tuple[int, bytes]]:
    """Each stored inner chunk of ``shard`` (index at the end): id -> (offset, bytes)."""
    return {i: (off, shard[off:off + nbytes])
            for i, (off, nbytes) in enumerate(index_of(shard, n).tolist())
            if (off, nbytes) != (MAX, MAX)}


def test_w3_layout_shards_are_laid_out_as_zarr_pythons(small_tasks):
    """Shards of gzip level 5 tiles written through the parallel encoder: the same inner
    chunks stored (one elided), holding the same data, in the order zarr-python lays them
    out (Morton order). The deflated bytes differ: kvzarr's gzip is libdeflate's."""
    zarr = pytest.importorskip("zarr")
    from zarr.storage import MemoryStore
    rng = np.random.default_rng(7)
    data = (np.add.outer(np.arange(256), np.arange(256)) * 97
            + rng.integers(0, 64, (256, 256))).astype("uint16")
    data[:32, 32:64] = 0                       # one inner chunk elided
    options = dict(shape=data.shape, chunks=(32, 32), shards=(128, 128), dtype="uint16",
                   fill_value=0, compressors=[GZIP5])
    zp = MemoryStore()
    zarr.create_array(zp, **options)[...] = data
    ours = kvzarr.open_store("memory://")
    kvzarr.create_array(ours, name="a", **options)[...] = data
    keys = sorted(k for k in zp._store_dict if k != "zarr.json")
    assert keys == ["c/0/0", "c/0/1", "c/1/0", "c/1/1"]
    for key in keys:
        mine = _inner_chunks(bytes(ours.get(f"a/{key}")), 16)
        theirs = _inner_chunks(zp._store_dict[key].to_bytes(), 16)
        assert {i: gzip.decompress(c) for i, (_, c) in mine.items()} == \
            {i: gzip.decompress(c) for i, (_, c) in theirs.items()}
        assert sorted(mine, key=lambda i: mine[i][0]) == \
            sorted(theirs, key=lambda i: theirs[i][0]), key
    assert len(mine) == 16 and len(_inner_chunks(bytes(ours.get("a/c/0/0")), 16)) == 15


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shards=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       inner=st.sampled_from([(2, 2), (4, 2), (4, 4)]),
       edge=st.tuples(st.integers(0, 3), st.integers(0, 3)),
       seed=st.integers(0, 2**16), empty=st.floats(0, 1),
       kind=st.sampled_from(["memory", "filesystem"]))
def test_whole_shard_writes_with_the_parallel_encoder_agree_with_numpy(
        small_tasks, shards, inner, edge, seed, empty, kind):
    shard_shape = (8, 8)
    # whole shards, and ragged edge shards past the array's end
    shape = tuple(n * s - e for n, s, e in zip(shards, shard_shape, edge))
    data = sample(shape, "int32", seed=seed, empty_fraction=empty)
    rng = np.random.default_rng(seed)
    for _ in range(int(empty * 4)):            # inner chunks of fill values
        r, c = rng.integers(0, shape[0]), rng.integers(0, shape[1])
        data[r:r + inner[0], c:c + inner[1]] = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = (kvzarr.open_store("memory://") if kind == "memory"
                 else kvzarr.FilesystemStore(tmp))
        a = kvzarr.create_array(store, name="a", shape=shape, chunks=inner,
                                shards=shard_shape, dtype="int32", fill_value=0,
                                compressors=[GZIP5])
        a[...] = data
        np.testing.assert_array_equal(kvzarr.open_array(store, path="a", mode="r")[...],
                                      data)
        # every stored shard is what the codec writes for it alone, serially
        codec = a._pipeline.array_bytes
        spec = make_spec(shard_shape, "int32")
        for i in range(shards[0]):
            for j in range(shards[1]):
                padded = np.zeros(shard_shape, "int32")
                part = data[i * 8:(i + 1) * 8, j * 8:(j + 1) * 8]
                padded[:part.shape[0], :part.shape[1]] = part
                want = codec.encode_many([padded], [spec], parallel=False)[0]
                got = store.get(f"a/c/{i}/{j}")
                assert (None if got is None else bytes(got)) == want
