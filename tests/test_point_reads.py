"""The a[i, j] fast path (kvzarr/engine/point_reads.py) gives exactly what the general indexing
path gives: same value, same scalar type, same errors, for every codec and data type."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr.engine.config import ArrayConfig
from kvzarr.errors import BoundsCheckError, ChunkNotFoundError, CodecError
from kvzarr.stores.lmdb import LMDBStore

CODECS = {
    "plain": dict(compressors=None),
    "big-endian": dict(serializer={"name": "bytes", "configuration": {"endian": "big"}},
                       compressors=None),
    "gzip": dict(compressors=[{"name": "gzip", "configuration": {"level": 1}}]),
    "transpose": "transpose",
}
DTYPES = ["int8", "uint16", "int64", "float32", "float64", "complex64", "bool"]


@st.composite
def arrays(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, n)) for n in shape)
    dtype = draw(st.sampled_from(DTYPES))
    codec = draw(st.sampled_from(sorted(CODECS)))
    seed = draw(st.integers(0, 2 ** 16))
    return shape, chunks, dtype, codec, seed


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return (rng.random(shape) * 100 - 50).astype(dtype)


@settings(max_examples=150, deadline=None)
@given(arrays(), st.data())
def test_point_reads_match_numpy_and_the_general_path(spec, data):
    shape, chunks, dtype, codec, seed = spec
    fill = np.zeros((), dtype)[()] + (1 if dtype != "bool" else 0)
    codecs = CODECS[codec]
    if codecs == "transpose":
        order = list(range(len(shape)))[::-1]
        codecs = dict(filters=[{"name": "transpose", "configuration": {"order": order}}],
                      compressors=None)
    a = kvzarr.create_array(kvzarr.MemoryStore(), shape=shape, chunks=chunks, dtype=dtype,
                            fill_value=fill, **codecs)
    expected = np.full(shape, fill, dtype=dtype)
    # write only part of the array: some chunks stay missing and read as the fill value
    cut = tuple(slice(0, max(1, n // 2)) for n in shape)
    expected[cut] = _data(shape, dtype, seed)[cut]
    a[cut] = expected[cut]
    for _ in range(10):
        index = tuple(data.draw(st.integers(-n, n - 1)) for n in shape)
        if data.draw(st.booleans()):
            index = tuple(np.int64(i) for i in index)
        got = a[index if len(index) > 1 or data.draw(st.booleans()) else index[0]]
        general = a.get_basic_selection(index)
        want = expected[index]
        assert type(got) is type(want) is type(general)
        assert got.tobytes() == want.tobytes() == general.tobytes()


def test_out_of_bounds_and_non_integers_take_the_general_path():
    a = kvzarr.create_array(kvzarr.MemoryStore(), shape=(4, 5), chunks=(2, 2), dtype="int32")
    a[...] = np.arange(20, dtype="int32").reshape(4, 5)
    with pytest.raises(BoundsCheckError):
        a[4, 0]
    with pytest.raises(BoundsCheckError):
        a[0, -6]
    assert a[1, 2:4].tolist() == [7, 8]
    assert a[np.int32(3), np.uint8(4)] == 19
    assert a[-1, -1] == 19


def test_missing_chunk_with_read_missing_chunks_off_raises():
    store = kvzarr.MemoryStore()
    kvzarr.create_array(store, name="a", shape=(4,), chunks=(2,), dtype="int16")
    a = kvzarr.open_array(store, path="a", config=ArrayConfig(read_missing_chunks=False))
    with pytest.raises(ChunkNotFoundError):
        a[3]


def test_a_stored_value_of_the_wrong_length_is_a_codec_error(tmp_path):
    with LMDBStore(tmp_path / "x.lmdb") as store:
        a = kvzarr.create_array(store, name="a", shape=(4, 4), chunks=(2, 2), dtype="float64",
                                compressors=None)
        a[...] = 1.5
        store.set("a/c/1/1", b"\x00" * 7)          # truncated chunk
        assert a[0, 0] == 1.5
        with pytest.raises(CodecError) as info:
            a[3, 3]
        assert info.value.key == "a/c/1/1"


def test_sharded_and_rectilinear_arrays_read_points_correctly():
    store = kvzarr.MemoryStore()
    data = np.arange(64, dtype="uint16").reshape(8, 8)
    s = kvzarr.create_array(store, name="s", shape=(8, 8), chunks=(2, 2), shards=(4, 4),
                            dtype="uint16")
    s[...] = data
    r = kvzarr.create_array(store, name="r", shape=(8, 8), chunks=[[3, 5], [1, 7]],
                            dtype="uint16")
    r[...] = data
    for i, j in [(0, 0), (3, 5), (7, 7), (-2, 4)]:
        assert s[i, j] == data[i, j] and r[i, j] == data[i, j]
