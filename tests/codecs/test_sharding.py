"""The sharding_indexed codec (sharding-indexed v1.0,
https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html):
configuration, byte layout, partial reads and writes, errors, and bit-exact interop with
zarr-python 3."""

from __future__ import annotations

import json
import struct
import threading

import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.stores.byteranges import RangeRequest, SuffixRequest, apply_byte_request
from kvzarr.codecs.base import ChunkArraySpec
from kvzarr.codecs.registry import codec_from_json
from kvzarr.runtime import workers as parallel
from kvzarr.codecs.sharding.layout import morton_order
from kvzarr.codecs.sharding_indexed import ShardingCodec
from kvzarr.errors import ChecksumMismatchError, CodecError, MetadataError
from kvzarr.metadata.dtypes import parse_data_type

MAX = 2**64 - 1
BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}
CRC = {"name": "crc32c"}


def sharding(chunk_shape, codecs=None, index_codecs=None, index_location="end", raw=False):
    config = {"chunk_shape": list(chunk_shape),
              "codecs": codecs if codecs is not None else [BYTES_LE],
              "index_codecs": index_codecs if index_codecs is not None else [BYTES_LE, CRC]}
    if index_location is not None:
        config["index_location"] = index_location
    doc = {"name": "sharding_indexed", "configuration": config}
    return doc if raw else codec_from_json(doc)


def make_spec(shape, dtype="int32", fill=0, write_empty=False):
    dt = parse_data_type(dtype)
    return ChunkArraySpec(tuple(shape), dt, dt.coerce_fill(fill), write_empty)


def ready(codec, spec):
    """The codec as an array would use it: evolved and validated for ``spec``."""
    codec = codec.evolve(spec)
    codec.validate(spec)
    return codec


def index_of(shard: bytes, n: int, location="end", crc=True) -> np.ndarray:
    """The (offset, nbytes) pairs of a little-endian index, parsed by hand."""
    size = 16 * n + (4 if crc else 0)
    raw = shard[:size] if location == "start" else shard[len(shard) - size:]
    return np.frombuffer(raw[:16 * n], dtype="<u8").reshape(n, 2)


class CountingSource:
    """An in-memory stored value that records every read it serves."""

    def __init__(self, value: bytes | None, key: str = "c/0/0") -> None:
        self.value, self.key = value, key
        self.gets = 0
        self.range_calls: list[list] = []
        self.lock = threading.Lock()

    def get(self):
        with self.lock:
            self.gets += 1
        return self.value

    def remembered(self, tag, compute, keepable):
        return compute()        # a source that keeps nothing between reads

    def get_ranges(self, requests):
        with self.lock:
            self.range_calls.append(list(requests))
        if self.value is None:
            return None
        return [apply_byte_request(self.value, r) for r in requests]


def sample(shape, dtype="int32", seed=0, empty_fraction=0.3, chunk_shape=None):
    """Random data where some inner chunks are entirely fill (0)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(1, 1000, size=shape).astype(dtype)
    if chunk_shape is not None:
        cps = [s // c for s, c in zip(shape, chunk_shape)]
        for coords in np.ndindex(*cps):
            if rng.random() < empty_fraction:
                data[tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, chunk_shape))] = 0
    return data


# --- configuration ----------------------------------------------------------------------

def test_config_round_trip_writes_all_four_members():
    doc = sharding([2, 3], codecs=[BYTES_LE, {"name": "gzip", "configuration": {"level": 1}}],
                   index_location=None, raw=True)
    codec = codec_from_json(doc)
    assert codec.index_location == "end"  # default when absent
    out = codec.to_json()
    assert out["configuration"]["index_location"] == "end"
    assert out["configuration"]["chunk_shape"] == [2, 3]
    assert out["configuration"]["codecs"][1]["name"] == "gzip"
    assert out["configuration"]["index_codecs"] == [BYTES_LE, CRC]
    assert codec_from_json(out) == codec


def test_default_constructor_matches_zarr_python_defaults():
    codec = ShardingCodec([4])
    cfg = codec.to_json()["configuration"]
    assert cfg["codecs"] == [BYTES_LE]
    assert cfg["index_codecs"] == [BYTES_LE, CRC]
    assert cfg["index_location"] == "end"


@pytest.mark.parametrize("config, field", [
    ({"chunk_shape": [2], "codecs": [BYTES_LE], "index_codecs": [BYTES_LE],
      "index_location": "middle"}, "sharding_indexed.index_location"),
    ({"chunk_shape": [2], "codecs": [BYTES_LE]}, "sharding_indexed.index_codecs"),
    ({"chunk_shape": [2], "index_codecs": [BYTES_LE]}, "sharding_indexed.codecs"),
    ({"codecs": [BYTES_LE], "index_codecs": [BYTES_LE]}, "sharding_indexed.chunk_shape"),
    ({"chunk_shape": [0], "codecs": [BYTES_LE], "index_codecs": [BYTES_LE]},
     "sharding_indexed.chunk_shape"),
    ({"chunk_shape": [2.5], "codecs": [BYTES_LE], "index_codecs": [BYTES_LE]},
     "sharding_indexed.chunk_shape"),
    ({"chunk_shape": 2, "codecs": [BYTES_LE], "index_codecs": [BYTES_LE]},
     "sharding_indexed.chunk_shape"),
    ({"chunk_shape": [2], "codecs": [BYTES_LE], "index_codecs": [BYTES_LE], "extra": 1},
     "sharding_indexed.extra"),
    # a compressor makes the index size depend on its content (spec: MUST NOT)
    ({"chunk_shape": [2], "codecs": [BYTES_LE],
      "index_codecs": [BYTES_LE, {"name": "gzip", "configuration": {"level": 1}}]},
     "sharding_indexed.index_codecs"),
])
def test_bad_configuration(config, field):
    with pytest.raises(MetadataError) as info:
        codec_from_json({"name": "sharding_indexed", "configuration": config})
    assert info.value.field == field


def test_inner_codecs_need_exactly_one_array_to_bytes_codec():
    with pytest.raises(MetadataError):
        sharding([2], codecs=[BYTES_LE, BYTES_LE])
    with pytest.raises(MetadataError):
        sharding([2], codecs=[CRC])
    with pytest.raises(MetadataError):
        sharding([2], index_codecs=[CRC])


def test_validate_divisibility_names_the_dimension():
    codec = sharding([5, 4])
    codec.validate(make_spec((10, 8)))
    with pytest.raises(MetadataError, match="dimension 1") as info:
        codec.validate(make_spec((10, 6)))
    assert "6" in str(info.value) and info.value.field == "sharding_indexed.chunk_shape"
    with pytest.raises(MetadataError, match="dimension"):
        codec.validate(make_spec((10,)))
    # rectilinear outer grid [[10, 12]] with inner [5]: the 12-wide shard is rejected
    one_d = sharding([5])
    one_d.validate(make_spec((10,), "uint8"))
    with pytest.raises(MetadataError, match="12 in dimension 0"):
        one_d.validate(make_spec((12,), "uint8"))
    with pytest.raises(MetadataError):
        one_d.encode(np.zeros(12, "u1"), make_spec((12,), "uint8"))


def test_validate_checks_inner_codecs_against_the_data_type():
    # int32 needs an endian in the bytes codec
    codec = sharding([2], codecs=[{"name": "bytes"}])
    with pytest.raises(MetadataError):
        codec.validate(make_spec((4,), "int32"))


# --- byte layout ------------------------------------------------------------------------

def test_worked_example_ex6_rectilinear_shard_sizes():
    # rectilinear shards of 10, 20, 5 uint8 with inner [5], index bytes+crc32c
    codec = sharding([5], codecs=[{"name": "bytes"}])
    for shard_len, index_size, total in [(10, 36, 46), (20, 68, 88), (5, 20, 25)]:
        spec = make_spec((shard_len,), "uint8")
        c = ready(codec, spec)
        data = np.arange(1, shard_len + 1, dtype="u1")
        shard = c.encode(data, spec)
        assert len(shard) == total
        assert c._layout(spec.shape).index_size == index_size
        np.testing.assert_array_equal(c.decode(shard, spec), data)


def test_index_offsets_count_from_shard_start_with_index_at_start():
    # offsets count from the shard's byte 0: shard [4] uint8, inner [2] -> first chunk at
    # (36, 2) with "start"
    data = np.array([1, 2, 3, 4], dtype="u1")
    spec = make_spec((4,), "uint8")
    start = ready(sharding([2], codecs=[{"name": "bytes"}], index_location="start"), spec)
    end = ready(sharding([2], codecs=[{"name": "bytes"}], index_location="end"), spec)
    s, e = start.encode(data, spec), end.encode(data, spec)
    assert index_of(s, 2, "start").tolist() == [[36, 2], [38, 2]]
    assert index_of(e, 2, "end").tolist() == [[0, 2], [2, 2]]
    assert s[36:] == e[:4] == data.tobytes()
    # the checksum is CRC-32C of the 32 index bytes, little-endian
    assert struct.unpack("<I", s[32:36])[0] == crc32c.crc32c(s[:32])
    np.testing.assert_array_equal(start.decode(s, spec), data)


def test_missing_inner_chunks_are_max_max_and_empty_shard_is_none():
    spec = make_spec((4, 4), "int32")
    codec = ready(sharding([2, 2]), spec)
    data = np.zeros((4, 4), "i4")
    assert codec.encode(data, spec) is None
    data[3, 3] = 7
    shard = codec.encode(data, spec)
    idx = index_of(shard, 4)
    assert idx[:3].tolist() == [[MAX, MAX]] * 3
    assert idx[3].tolist() == [0, 16]
    assert len(shard) == 16 + 68
    np.testing.assert_array_equal(codec.decode(shard, spec), data)


def test_write_empty_chunks_stores_every_inner_chunk():
    spec = make_spec((4, 4), "int32", write_empty=True)
    codec = ready(sharding([2, 2]), spec)
    shard = codec.encode(np.zeros((4, 4), "i4"), spec)
    assert shard is not None and len(shard) == codec.encoded_size(spec) == 4 * 16 + 68
    assert codec.encoded_size(make_spec((4, 4), "int32")) is None  # elision: size varies


def test_nan_fill_inner_chunks_are_elided():
    spec = make_spec((4,), "float64", fill="NaN")
    codec = ready(sharding([2]), spec)
    data = np.array([np.nan, np.nan, 1.5, np.nan])
    shard = codec.encode(data, spec)
    assert index_of(shard, 2)[0].tolist() == [MAX, MAX]
    np.testing.assert_array_equal(codec.decode(shard, spec), data)


def test_morton_order_matches_zarr_python():
    from zarr.core.indexing import _morton_order
    for shape in [(1,), (7,), (2, 2), (3, 5), (4, 4, 4), (2, 3, 5), (1, 8), (8, 1, 3)]:
        ours = np.array(np.unravel_index(morton_order(shape), shape)).T.reshape(-1, len(shape))
        np.testing.assert_array_equal(ours, np.asarray(_morton_order(shape)).reshape(-1, len(shape)))
    assert morton_order(()).tolist() == [0]


def test_zero_dimensional_shard():
    spec = make_spec((), "int32")
    codec = ready(sharding([]), spec)
    shard = codec.encode(np.array(7, "i4"), spec)
    assert len(shard) == 4 + 20 and index_of(shard, 1).tolist() == [[0, 4]]
    assert codec.decode(shard, spec).tolist() == 7
    assert codec.encode(np.array(0, "i4"), spec) is None


def test_big_endian_index_codec_is_honoured():
    spec = make_spec((4,), "uint8")
    codec = ready(sharding([2], codecs=[{"name": "bytes"}],
                           index_codecs=[{"name": "bytes", "configuration": {"endian": "big"}}]),
                  spec)
    shard = codec.encode(np.array([0, 0, 5, 6], "u1"), spec)
    assert np.frombuffer(shard[2:], ">u8").reshape(2, 2).tolist() == [[MAX, MAX], [0, 2]]
    np.testing.assert_array_equal(codec.decode(shard, spec), [0, 0, 5, 6])


# --- round trips ------------------------------------------------------------------------

ROUND_TRIP_CONFIGS = {
    "end-crc": dict(),
    "start-crc": dict(index_location="start"),
    "start-nocrc": dict(index_location="start", index_codecs=[BYTES_LE]),
    "gzip-inner": dict(codecs=[BYTES_LE, {"name": "gzip", "configuration": {"level": 5}}]),
    "transpose-inner": dict(codecs=[{"name": "transpose", "configuration": {"order": [1, 0]}},
                                    BYTES_LE, CRC]),
    "nested": dict(codecs=[sharding([1, 2], raw=True)], index_location="start"),
    "nested-gzip": dict(codecs=[sharding([2, 1], codecs=[
        BYTES_LE, {"name": "gzip", "configuration": {"level": 1}}], raw=True)]),
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_CONFIGS))
@pytest.mark.parametrize("shard_shape", [(4, 6), (8, 2), (2, 10)])
def test_round_trip(name, shard_shape):
    # different shard shapes through one codec: a rectilinear outer grid does this
    codec = sharding([2, 2], **ROUND_TRIP_CONFIGS[name])
    spec = make_spec(shard_shape, "int32")
    c = ready(codec, spec)
    data = sample(shard_shape, seed=len(name), chunk_shape=(2, 2))
    shard = c.encode(data, spec)
    got = c.decode(shard, spec)
    np.testing.assert_array_equal(got, data)
    # decode_partial over the whole shard and over a corner agree with numpy
    src = CountingSource(shard)
    np.testing.assert_array_equal(
        c.decode_partial(src, (slice(0, shard_shape[0]), slice(0, shard_shape[1])), spec), data)
    np.testing.assert_array_equal(
        c.decode_partial(src, (slice(1, 2), slice(0, shard_shape[1], 3)), spec),
        data[1:2, ::3])


def test_large_shard_uses_thread_pool_and_round_trips():
    spec = make_spec((256, 256), "float64")
    codec = ready(sharding([32, 32], codecs=[BYTES_LE, {"name": "gzip",
                                                        "configuration": {"level": 1}}]), spec)
    assert parallel.worth_threads(64, 64 * 32 * 32 * 8)
    data = np.random.default_rng(3).random((256, 256))
    data[:64, :64] = 0
    shard = codec.encode(data, spec)
    assert (index_of(shard, 64)[[0, 1, 8, 9]] == MAX).all()  # the four zero inner chunks
    np.testing.assert_array_equal(codec.decode(shard, spec), data)
    assert any(t.name.startswith("kvzarr-worker") for t in threading.enumerate())
    sel = (np.array([0, 5, 100, 255]), slice(3, 250, 7))
    np.testing.assert_array_equal(codec.decode_partial(CountingSource(shard), sel, spec),
                                  data[np.ix_(sel[0], np.arange(3, 250, 7))])


def test_nested_sharding_inside_thread_pool(monkeypatch):
    # nested shards decode inside pool workers; the inner level must not wait on the pool
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "MIN_ITEMS", 2)
    spec = make_spec((8, 8), "int32")
    codec = ready(sharding([4, 4], codecs=[sharding([2, 2], raw=True)]), spec)
    data = sample((8, 8), seed=5, chunk_shape=(2, 2))
    shard = codec.encode(data, spec)
    np.testing.assert_array_equal(codec.decode(shard, spec), data)


# --- partial reads ----------------------------------------------------------------------

@pytest.mark.parametrize("location", ["end", "start"])
def test_decode_partial_reads_index_then_only_needed_ranges(location):
    spec = make_spec((8, 8), "int32")
    codec = ready(sharding([2, 2], index_location=location), spec)
    data = sample((8, 8), seed=1)
    data[0:2, 2:4] = 0                         # inner chunk (0, 1) is not stored
    shard = codec.encode(data, spec)
    src = CountingSource(shard)
    sel = (slice(1, 3), slice(1, 6))             # inner rows 0-1, cols 0-2
    got = codec.decode_partial(src, sel, spec)
    np.testing.assert_array_equal(got, data[1:3, 1:6])
    assert src.gets == 0
    assert len(src.range_calls) == 2
    index_request = src.range_calls[0]
    assert index_request == ([SuffixRequest(16 * 16 + 4)] if location == "end"
                             else [RangeRequest(0, 16 * 16 + 4)])
    idx = index_of(shard, 16, location)
    needed = [r * 4 + c for r in (0, 1) for c in (0, 1, 2) if (r, c) != (0, 1)]
    expected = {(int(idx[i, 0]), int(idx[i, 0] + idx[i, 1])) for i in needed}
    assert {(r.start, r.end) for r in src.range_calls[1]} == expected
    assert len(src.range_calls[1]) == 5


def test_decode_partial_of_every_inner_chunk_is_one_get():
    spec = make_spec((4, 4), "int32")
    codec = ready(sharding([2, 2]), spec)
    data = sample((4, 4), seed=2)
    src = CountingSource(codec.encode(data, spec))
    got = codec.decode_partial(src, (np.array([0, 3]), slice(0, 4, 2)), spec)
    np.testing.assert_array_equal(got, data[np.ix_([0, 3], [0, 2])])
    assert src.gets == 1 and src.range_calls == []


def test_decode_partial_absent_shard_and_missing_inner_chunks():
    spec = make_spec((4, 4), "int32", fill=-1)
    codec = ready(sharding([2, 2]), spec)
    assert codec.decode_partial(CountingSource(None), (slice(0, 1), slice(0, 1)), spec) is None
    assert codec.decode_partial(CountingSource(None), (slice(0, 4), slice(0, 4)), spec) is None
    data = np.full((4, 4), -1, "i4")
    data[3, 3] = 9
    src = CountingSource(codec.encode(data, spec))
    got = codec.decode_partial(src, (slice(0, 2), slice(0, 3)), spec)
    np.testing.assert_array_equal(got, np.full((2, 3), -1))
    assert len(src.range_calls) == 1          # the index only: nothing stored is needed


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("inner", [[BYTES_LE],
                                   [BYTES_LE, {"name": "gzip", "configuration": {"level": 5}}]])
def test_decode_partial_of_one_inner_chunk_reads_the_index_and_that_chunk(location, inner):
    spec = make_spec((8, 8), "int32", fill=-1)
    codec = ready(sharding([2, 4], codecs=inner, index_location=location), spec)
    data = sample((8, 8), seed=3)
    data[2:4, 4:8] = -1                        # inner chunk (1, 1) is not stored
    shard = bytearray(codec.encode(data, spec))
    src = CountingSource(shard)
    idx = index_of(bytes(shard), 8, location)
    got = codec.decode_partial(src, (slice(4, 6), slice(0, 4)), spec)   # inner chunk 4
    np.testing.assert_array_equal(got, data[4:6, 0:4])
    assert src.gets == 0 and len(src.range_calls) == 2
    assert [(r.start, r.end) for r in src.range_calls[1]] == [
        (int(idx[4, 0]), int(idx[4, 0] + idx[4, 1]))]
    # the result is the caller's: writable, and no view of bytes a store lent out
    got[0, 0] = 12345
    assert codec.decode(bytes(shard), spec)[4, 0] == data[4, 0]
    shard[:] = b"\0" * len(shard)
    np.testing.assert_array_equal(got[1:], data[5:6, 0:4])
    # an inner chunk that is not stored reads as the fill value, from the index alone
    src = CountingSource(codec.encode(data, spec))
    got = codec.decode_partial(src, (slice(2, 4), slice(4, 8)), spec)
    np.testing.assert_array_equal(got, np.full((2, 4), -1))
    assert len(src.range_calls) == 1
    assert codec.decode_partial(CountingSource(None), (slice(2, 4), slice(4, 8)), spec) is None


@pytest.mark.parametrize("sel", [
    (slice(1, 3), slice(0, 4)),                # not on an inner chunk boundary
    (slice(0, 2), slice(0, 4, 2)),             # a step
    (slice(0, 2), slice(0, 8)),                # two inner chunks
    (slice(0, 2), np.array([0, 1, 2, 3])),     # an index array
])
def test_selections_near_one_inner_chunk_take_the_general_path(sel):
    spec = make_spec((8, 8), "int32")
    codec = ready(sharding([2, 4]), spec)
    data = sample((8, 8), seed=4)
    got = codec.decode_partial(CountingSource(codec.encode(data, spec)), sel, spec)
    np.testing.assert_array_equal(got, data[as_ix(sel, (8, 8))])


def orthogonal_selections(shape):
    def one(n):
        return st.one_of(
            st.builds(lambda a, b, s: slice(min(a, b), max(a, b), s),
                      st.integers(0, n), st.integers(0, n), st.integers(1, 3)),
            st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True).map(
                lambda v: np.array(sorted(v), dtype=np.intp)))
    return st.tuples(*(one(n) for n in shape))


def as_ix(sel, shape):
    return np.ix_(*(np.arange(n)[s] if isinstance(s, slice) else s for s, n in zip(sel, shape)))


@settings(max_examples=120, deadline=None)
@given(sel=orthogonal_selections((6, 8)), seed=st.integers(0, 1000),
       location=st.sampled_from(["start", "end"]))
def test_decode_and_encode_partial_agree_with_numpy(sel, seed, location):
    shape = (6, 8)
    spec = make_spec(shape, "int16")
    codec = ready(sharding([3, 2], index_location=location), spec)
    data = sample(shape, "int16", seed=seed, empty_fraction=0.4, chunk_shape=(3, 2))
    src = CountingSource(codec.encode(data, spec))
    ix = as_ix(sel, shape)
    np.testing.assert_array_equal(codec.decode_partial(src, sel, spec), data[ix])

    rng = np.random.default_rng(seed)
    value = rng.integers(-5, 5, size=data[ix].shape).astype("int16")
    new = codec.encode_partial(src, sel, value, spec)
    expected = data.copy()
    expected[ix] = value
    if not expected.any():
        assert new is None
    else:
        np.testing.assert_array_equal(codec.decode(new, spec), expected)
        assert new == codec.encode(expected, spec)   # same layout as a fresh write


# --- partial writes ---------------------------------------------------------------------

def chunk_bytes(shard, n, location="end"):
    idx = index_of(shard, n, location)
    return {i: shard[int(o):int(o + b)] for i, (o, b) in enumerate(idx.tolist())
            if (o, b) != (MAX, MAX)}


@pytest.mark.parametrize("location", ["end", "start"])
def test_encode_partial_copies_untouched_inner_chunks_verbatim(location):
    spec = make_spec((8, 8), "int32")
    codec = ready(sharding([2, 2], codecs=[BYTES_LE, {"name": "gzip",
                                                      "configuration": {"level": 9}}],
                           index_location=location), spec)
    data = sample((8, 8), seed=4)
    shard = codec.encode(data, spec)
    old = chunk_bytes(shard, 16, location)
    src = CountingSource(shard)
    # element (1, 1) lies in inner chunk 0 (partly covered); rows 4-5 x cols 2-3 is inner
    # chunk (2, 1) = 9, wholly covered
    value = np.array([[7, 8], [9, 10]], "i4")
    new = codec.encode_partial(src, (slice(4, 6), slice(2, 4)), value, spec)
    expected = data.copy()
    expected[4:6, 2:4] = value
    np.testing.assert_array_equal(codec.decode(new, spec), expected)
    fresh = chunk_bytes(new, 16, location)
    assert fresh[9] != old[9]
    for i in range(16):
        if i != 9:
            assert fresh[i] == old[i]
    # most of the shard is kept: it is read whole, in one request, and nothing else
    assert src.gets == 1 and src.range_calls == []
    # the same bytes as laying out every inner chunk one by one
    assert new == codec.encode(expected, spec)


@pytest.mark.parametrize("location", ["end", "start"])
def test_encode_partial_covering_most_of_the_shard_reads_only_what_it_keeps(location):
    spec = make_spec((8, 8), "int32")
    codec = ready(sharding([2, 2], index_location=location), spec)
    data = sample((8, 8), seed=5, empty_fraction=0)
    shard = codec.encode(data, spec)
    src = CountingSource(shard)
    # rows 0-5 cover inner chunks 0..11 whole; 12..15 are kept
    value = sample((6, 8), seed=6, empty_fraction=0)
    new = codec.encode_partial(src, (slice(0, 6), slice(0, 8)), value, spec)
    expected = data.copy()
    expected[0:6] = value
    assert new == codec.encode(expected, spec)
    # the index, then only the 4 inner chunks kept: none of the 12 written whole
    assert src.gets == 0 and len(src.range_calls) == 2
    idx = index_of(shard, 16, location)
    read = {(r.start, r.end) for r in src.range_calls[1]}
    assert read == {(int(idx[i, 0]), int(idx[i, 0] + idx[i, 1])) for i in range(12, 16)}


def test_encode_partial_reads_partly_covered_chunks_and_merges():
    spec = make_spec((4, 4), "int32")
    codec = ready(sharding([2, 2]), spec)
    data = sample((4, 4), seed=6)
    shard = codec.encode(data, spec)
    src = CountingSource(shard)
    new = codec.encode_partial(src, (slice(1, 2), slice(1, 3)), np.array([[-1, -2]], "i4"),
                               spec)
    expected = data.copy()
    expected[1, 1:3] = [-1, -2]
    np.testing.assert_array_equal(codec.decode(new, spec), expected)
    # every stored inner chunk was needed (2 merged + 2 copied): one whole read
    assert src.gets == 1
    assert chunk_bytes(new, 4)[2] == chunk_bytes(shard, 4)[2]


def test_encode_partial_covering_the_shard_reads_nothing():
    spec = make_spec((4, 4), "int32")
    codec = ready(sharding([2, 2]), spec)
    src = CountingSource(codec.encode(sample((4, 4), seed=7), spec))
    value = sample((4, 4), seed=8)
    new = codec.encode_partial(src, (slice(0, 4), slice(0, 4)), value, spec)
    assert src.gets == 0 and src.range_calls == []
    assert new == codec.encode(value, spec)


def test_encode_partial_drops_fill_chunks_and_empties_the_shard():
    spec = make_spec((4, 4), "int32")
    codec = ready(sharding([2, 2]), spec)
    data = np.zeros((4, 4), "i4")
    data[0, 0] = 1
    data[3, 3] = 2
    src = CountingSource(codec.encode(data, spec))
    new = codec.encode_partial(src, (slice(0, 1), slice(0, 1)), np.zeros((1, 1), "i4"), spec)
    assert index_of(new, 4)[:, 0].tolist() == [MAX, MAX, MAX, 0]
    src = CountingSource(new)
    assert codec.encode_partial(src, (slice(2, 4), slice(2, 4)), np.zeros((2, 2), "i4"),
                                spec) is None


def test_encode_partial_on_absent_shard_starts_from_fill():
    spec = make_spec((4, 4), "int32", fill=5)
    codec = ready(sharding([2, 2]), spec)
    src = CountingSource(None)
    new = codec.encode_partial(src, (slice(1, 2), slice(0, 1)), np.array([[3]], "i4"), spec)
    expected = np.full((4, 4), 5, "i4")
    expected[1, 0] = 3
    np.testing.assert_array_equal(codec.decode(new, spec), expected)
    assert len(index_of(new, 4)[index_of(new, 4)[:, 0] != MAX]) == 1


# --- errors -----------------------------------------------------------------------------

def encoded_4x4():
    spec = make_spec((4, 4), "int32")
    codec = ready(sharding([2, 2]), spec)
    return codec, spec, codec.encode(sample((4, 4), seed=9), spec)


def test_shard_shorter_than_its_index():
    codec, spec, shard = encoded_4x4()
    with pytest.raises(CodecError, match="truncated"):
        codec.decode(shard[-60:], spec)
    with pytest.raises(CodecError, match="truncated") as info:
        codec.decode_partial(CountingSource(shard[-60:], key="a/c/0"), (slice(0, 1),) * 2, spec)
    assert info.value.key == "a/c/0"


def test_corrupt_index_checksum():
    codec, spec, shard = encoded_4x4()
    bad = bytearray(shard)
    bad[-10] ^= 0xFF
    with pytest.raises(ChecksumMismatchError):
        codec.decode(bytes(bad), spec)
    with pytest.raises(ChecksumMismatchError):
        codec.decode_partial(CountingSource(bytes(bad)), (slice(0, 1),) * 2, spec)
    with pytest.raises(ChecksumMismatchError):
        codec.encode_partial(CountingSource(bytes(bad)), (slice(0, 1),) * 2,
                             np.ones((1, 1), "i4"), spec)


def forge_index(entries, chunks: bytes) -> bytes:
    raw = np.asarray(entries, dtype="<u8").tobytes()
    return chunks + raw + struct.pack("<I", crc32c.crc32c(raw))


def test_entry_past_the_end_of_the_shard():
    spec = make_spec((4,), "uint8")
    codec = ready(sharding([2], codecs=[{"name": "bytes"}]), spec)
    # the object is 4 + 36 = 40 bytes; [39, 41) reaches one byte past its end
    shard = forge_index([[0, 2], [39, 2]], b"\x01\x02\x03\x04")
    with pytest.raises(CodecError, match="truncated shard"):
        codec.decode(shard, spec)
    with pytest.raises(CodecError, match="truncated shard"):
        codec.decode_partial(CountingSource(shard), (slice(3, 4),), spec)
    # an overflowing offset + nbytes is caught too, and a half-missing entry is not missing
    for entry in ([MAX - 1, 4], [MAX, 0], [0, MAX]):
        with pytest.raises(CodecError, match="truncated shard"):
            codec.decode(forge_index([[0, 2], entry], b"\x01\x02\x03\x04"), spec)


def test_zero_nbytes_entry_is_not_missing():
    spec = make_spec((4,), "uint8")
    codec = ready(sharding([2], codecs=[{"name": "bytes"}]), spec)
    # a stored 0-byte inner chunk is decoded (and fails in the bytes codec), not filled
    with pytest.raises(CodecError):
        codec.decode(forge_index([[0, 2], [2, 0]], b"\x01\x02"), spec)
    got = codec.decode(forge_index([[0, 2], [MAX, MAX]], b"\x01\x02"), spec)
    assert got.tolist() == [1, 2, 0, 0]


def test_wrong_chunk_shape_and_value_shape():
    codec, spec, shard = encoded_4x4()
    with pytest.raises(CodecError):
        codec.encode(np.zeros((4, 5), "i4"), spec)
    from kvzarr.errors import ShapeMismatchError
    with pytest.raises(ShapeMismatchError):
        codec.encode_partial(CountingSource(shard), (slice(0, 2), slice(0, 2)),
                             np.zeros((3, 3), "i4"), spec)


# --- interop with zarr-python 3 ---------------------------------------------------------

zarr = pytest.importorskip("zarr")


def _stored_codec(store) -> dict:
    """The sharding codec object as zarr-python stored it in zarr.json."""
    return json.loads(store._store_dict["zarr.json"].to_bytes())["codecs"][0]


def _zarr_store_bytes(store) -> dict[str, bytes]:
    return {k: v.to_bytes() for k, v in store._store_dict.items() if k != "zarr.json"}


ZARR_CASES = {
    "plain-end": dict(shape=(20, 30), chunks=(4, 5), shards=(8, 10), dtype="int16",
                      compressors=None),
    "start": dict(shape=(16, 12), chunks=(2, 3), shards={"shape": (8, 6),
                                                         "index_location": "start"},
                  dtype="float32", compressors=None),
    "gzip": dict(shape=(24,), chunks=(3,), shards=(12,), dtype="uint32",
                 compressors=[{"name": "gzip", "configuration": {"level": 1}}]),
    "3d": dict(shape=(8, 8, 9), chunks=(2, 4, 3), shards=(4, 8, 9), dtype="int64",
               compressors=None),
}


def _zarr_data(case, shape, chunks, dtype):
    rng = np.random.default_rng(len(case))
    data = rng.integers(1, 100, size=shape).astype(dtype)
    # zero out a few inner chunks so elision shows in the index
    data[tuple(slice(0, c) for c in chunks)] = 0
    return data


@pytest.mark.parametrize("case", sorted(ZARR_CASES))
def test_zarr_python_shards_decode_and_reencode_bit_exact(case):
    from zarr.storage import MemoryStore
    kw = ZARR_CASES[case]
    store = MemoryStore()
    arr = zarr.create_array(store, fill_value=0, **kw)
    data = _zarr_data(case, kw["shape"], kw["chunks"], kw["dtype"])
    arr[...] = data
    codec_doc = _stored_codec(store)
    codec = codec_from_json(codec_doc)
    shard_shape = kw["shards"]["shape"] if isinstance(kw["shards"], dict) else kw["shards"]
    spec = make_spec(shard_shape, kw["dtype"])
    codec = ready(codec, spec)
    assert codec.to_json() == codec_doc
    stored = _zarr_store_bytes(store)
    assert stored
    for key, shard in stored.items():
        coords = tuple(int(c) for c in key.split("/")[1:])
        region = tuple(slice(c * s, (c + 1) * s) for c, s in zip(coords, shard_shape))
        padded = np.zeros(shard_shape, kw["dtype"])
        part = data[region]
        padded[tuple(slice(0, n) for n in part.shape)] = part
        np.testing.assert_array_equal(codec.decode(shard, spec), padded)
        mine = codec.encode(padded, spec)
        if case == "gzip":   # gzip streams may differ in header bytes; contents must not
            np.testing.assert_array_equal(codec.decode(mine, spec), padded)
            assert len(mine) > 0
        else:
            assert mine == shard, f"shard {key} differs from zarr-python's bytes"


@pytest.mark.parametrize("location", ["end", "start"])
def test_shards_written_by_kvzarr_are_read_by_zarr_python(tmp_path, location):
    from zarr.storage import LocalStore
    shape, shards, chunks = (10, 12), (4, 6), (2, 3)
    zarr.create_array(LocalStore(tmp_path), shape=shape, chunks=chunks,
                      shards={"shape": shards, "index_location": location},
                      dtype="int32", fill_value=-1,
                      compressors=[{"name": "gzip", "configuration": {"level": 1}}])
    codec_doc = json.loads((tmp_path / "zarr.json").read_text())["codecs"][0]
    spec = make_spec(shards, "int32", fill=-1)
    codec = ready(codec_from_json(codec_doc), spec)
    data = np.arange(120, dtype="int32").reshape(shape)
    data[0:2, 0:3] = -1                                   # one elided inner chunk
    expected = data.copy()
    for i in range(3):
        for j in range(2):
            padded = np.full(shards, -1, "int32")
            part = data[i * 4:(i + 1) * 4, j * 6:(j + 1) * 6]
            padded[:part.shape[0], :part.shape[1]] = part
            shard = codec.encode(padded, spec)
            path = tmp_path / "c" / str(i) / str(j)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(shard)
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path), mode="r")[...], expected)


def test_nested_sharding_interop_with_zarr_python():
    from zarr.codecs import BytesCodec as ZBytes, ShardingCodec as ZSharding
    from zarr.storage import MemoryStore
    store = MemoryStore()
    inner = ZSharding(chunk_shape=(2, 2), codecs=[ZBytes()], index_location="start")
    arr = zarr.create_array(store, shape=(8, 8), chunks=(8, 8), dtype="uint16", fill_value=0,
                            serializer=ZSharding(chunk_shape=(4, 4), codecs=[inner]),
                            compressors=None)
    data = sample((8, 8), "uint16", seed=11, chunk_shape=(2, 2))
    arr[...] = data
    codec_doc = _stored_codec(store)
    spec = make_spec((8, 8), "uint16")
    codec = ready(codec_from_json(codec_doc), spec)
    shard = store._store_dict["c/0/0"].to_bytes()
    np.testing.assert_array_equal(codec.decode(shard, spec), data)
    assert codec.encode(data, spec) == shard
