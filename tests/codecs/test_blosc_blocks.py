"""Blosc compressed block by block on the codec workers must give the bytes of
single-threaded Blosc (numcodecs with its threads off), whatever the data and settings."""

from __future__ import annotations

import numcodecs.blosc as nc_blosc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvzarr.runtime import workers
from kvzarr.codecs import blosc_blocks
from kvzarr.codecs.base import ChunkArraySpec
from kvzarr.codecs.blosc import BloscCodec
from kvzarr.metadata.dtypes import parse_data_type

CNAMES = [b"blosclz", b"lz4", b"lz4hc", b"zlib", b"zstd"]


@pytest.fixture(autouse=True)
def one_idle_core(monkeypatch):
    # the parallel path is taken however busy the machine is (or on one core), so the
    # tests mean the same everywhere
    monkeypatch.setattr(workers, "idle_cores", lambda: 1)
    assert nc_blosc.use_threads is False


def serial(data, cname, clevel, shuffle, blocksize, typesize) -> bytes:
    return nc_blosc.compress(data, cname, clevel, shuffle, blocksize, typesize)


def make_data(kind: str, n: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    if kind == "random":
        return rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    if kind == "zeros":
        return bytes(n)
    if kind == "smooth":
        x = np.linspace(0, 50, n // 4 + 1, dtype="float32")
        return (np.sin(x) * 100 + 101).astype("float32").tobytes()[:n]
    if kind == "runs":
        return np.repeat(rng.integers(0, 4, n // 64 + 1, dtype=np.uint8), 64).tobytes()[:n]
    # compressible data with an incompressible stretch in the middle
    out = np.zeros(n, np.uint8)
    out[n // 3: n // 2] = rng.integers(0, 256, n // 2 - n // 3, dtype=np.uint8)
    return out.tobytes()


def took_parallel_path(data, cname, clevel, shuffle, blocksize, typesize) -> bool:
    plan = blosc_blocks._parts(len(data), cname, clevel, shuffle, blocksize, typesize)
    return plan is not None and blosc_blocks._assemble(
        memoryview(data), plan, cname, clevel, shuffle, typesize) is not None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cname=st.sampled_from(CNAMES), clevel=st.integers(0, 9),
       shuffle=st.integers(0, 2), typesize=st.sampled_from([1, 2, 4, 8, 16, 3]),
       blocksize=st.sampled_from([0, 0, 0, 65536, 100_000]),
       kind=st.sampled_from(["random", "zeros", "smooth", "runs", "mixed"]),
       n=st.sampled_from([256 * 1024, 1 << 20, (1 << 20) + 37, 3 << 19, 2_000_003]),
       seed=st.integers(0, 3))
def test_same_bytes_as_single_threaded_blosc(cname, clevel, shuffle, typesize, blocksize,
                                              kind, n, seed):
    data = make_data(kind, n, seed)
    expected = serial(data, cname, clevel, shuffle, blocksize, typesize)
    assert blosc_blocks.compress(data, cname, clevel, shuffle, blocksize, typesize) == expected
    assert nc_blosc.decompress(expected) == data


@pytest.mark.parametrize("cname", CNAMES)
@pytest.mark.parametrize("kind", ["smooth", "runs", "mixed"])
def test_parallel_path_is_taken_and_exact(cname, kind):
    """Whole numbers of blocks of compressible data go the parallel way (else the
    property test above would prove little), and still give the serial bytes."""
    data = make_data(kind, 4 << 20, 0)
    args = (cname, 5, 1, 0, 4)
    assert took_parallel_path(data, *args)
    assert blosc_blocks.compress(data, *args) == serial(data, *args)


def test_serial_where_blocks_would_differ():
    n = (1 << 20) + 37   # a shorter last block: Blosc compresses it differently
    assert not took_parallel_path(make_data("smooth", n, 0), b"zstd", 3, 1, 0, 4)
    # incompressible data is stored as a plain copy: no parallel frame for it
    assert not took_parallel_path(make_data("random", 1 << 20, 0), b"lz4", 5, 1, 0, 4)
    # below the size worth handing out
    assert not took_parallel_path(make_data("smooth", 64 * 1024, 0), b"zstd", 1, 1, 0, 4)


def test_on_a_worker_it_compresses_in_place():
    """Called from a codec worker (a multi-chunk write), it must not wait on the pool."""
    data = make_data("smooth", 4 << 20, 1)
    args = (b"zstd", 3, 1, 0, 4)
    assert workers.POOL.submit(workers.in_worker).result() is True
    assert not workers.in_worker()
    assert workers.POOL.submit(blosc_blocks._parts, len(data), *args).result() is None
    futures = [workers.POOL.submit(blosc_blocks.compress, data, *args)
               for _ in range(workers.WORKERS * 2)]
    assert {f.result(timeout=60) for f in futures} == {serial(data, *args)}


def test_blosc_codec_encodes_the_serial_bytes():
    spec = ChunkArraySpec(shape=(512, 1024), data_type=parse_data_type("float32"),
                          fill_value=0.0)
    codec = BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", typesize=4)
    data = make_data("smooth", 512 * 1024 * 4, 2)
    assert took_parallel_path(data, b"zstd", 3, 1, 0, 4)
    encoded = codec.encode(data, spec)
    assert encoded == serial(data, b"zstd", 3, 1, 0, 4)
    assert bytes(codec.decode(encoded, spec)) == data


def test_a_forked_child_gets_workers_of_its_own(tmp_path):
    """After a fork the child has none of the parent's pool threads: a big chunk written
    there must not wait forever on a pool that only exists in the parent."""
    import multiprocessing as mp

    import kvzarr

    path = str(tmp_path / "forked.lmdb")
    data = np.frombuffer(make_data("smooth", 4 << 20, 3), dtype="float32").reshape(1024, 1024)
    blosc = [{"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3,
                                                 "shuffle": "shuffle"}}]
    array = kvzarr.create_array(path, name="a", shape=(2048, 1024), dtype="float32",
                                chunks=(1024, 1024), compressors=blosc)
    array[:1024] = data                       # the parent's pool threads are running now
    assert workers.POOL.submit(workers.in_worker).result()

    def child() -> None:
        kvzarr.open(path, path="a")[1024:] = data

    proc = mp.get_context("fork").Process(target=child)
    proc.start()
    proc.join(timeout=60)
    if proc.is_alive():
        proc.kill()
        pytest.fail("the forked child hung on the codec pool")
    assert proc.exitcode == 0
    np.testing.assert_array_equal(kvzarr.open(path, path="a")[:], np.vstack([data, data]))
