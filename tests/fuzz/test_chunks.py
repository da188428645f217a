"""Fuzzing chunks and shards: damaged stored values read through the public API on every
store.

Arrays of several codec pipelines are written once per store; each input damages one
stored chunk or shard (bit flips, truncation, bytes appended, random bytes, a
decompression bomb in the chunk's own format, a forged shard index), reads the array
whole and in part, and puts the value back. Every read must give the array's data or a
kvzarr.errors exception, within a time bound; where a checksum covers the bytes (crc32c,
gzip's CRC-32, zstd's content checksum, bz2's, zlib's Adler-32, a shard index's crc32c),
a read that succeeds must give the data that was written. A bomb must be refused with
DecodedSizeError.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvzarr
from kvzarr.codecs.crc32c import Crc32cCodec
from kvzarr.errors import DecodedSizeError, KvzarrError

from .bombs import MiB, blosc_bomb, gzip_bomb, zlib_bomb, zstd_bomb
from tests.stores.conftest import store_factory  # noqa: F401 (every store backend)

from .guard import bounded_time, only_kvzarr_errors
from .settings import fuzz_settings

_GZIP = {"name": "gzip", "configuration": {"level": 1}}
_ZSTD = {"name": "zstd", "configuration": {"level": 1}}
_CRC = {"name": "crc32c"}
_BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
_INDEX_CRC = [_BYTES, _CRC]


def _sharded(inner, index_codecs=_INDEX_CRC, location="end"):
    return [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [4, 4], "codecs": [_BYTES, *inner], "index_codecs": index_codecs,
        "index_location": location}}]


#: name -> (create_array keywords, a checksum covers every stored byte that matters,
#:          the bomb builder for the chunk's outermost format or None)
CONFIGS = {
    "plain": (dict(compressors=None), False, None),
    "crc32c": (dict(compressors=[_CRC]), True, None),
    "gzip": (dict(compressors=[_GZIP]), True, gzip_bomb),
    "gzip_crc32c": (dict(compressors=[_GZIP, _CRC]), True, None),
    "zstd": (dict(compressors=[_ZSTD]), False, zstd_bomb),
    "zstd_checksum": (dict(compressors=[{"name": "zstd", "configuration": {
        "level": 1, "checksum": True}}]), True, zstd_bomb),
    "blosc": (dict(compressors=[{"name": "blosc", "configuration": {
        "cname": "lz4", "clevel": 1}}]), False, blosc_bomb),
    "transpose_zstd": (dict(codecs=[{"name": "transpose", "configuration": {"order": [1, 0]}},
                                    _BYTES, _ZSTD]), False, zstd_bomb),
    "numcodecs_zlib": (dict(compressors=[{"name": "numcodecs.zlib",
                                          "configuration": {"level": 1}}]), True, zlib_bomb),
    "numcodecs_bz2": (dict(compressors=[{"name": "numcodecs.bz2",
                                         "configuration": {"level": 1}}]), True, None),
    "numcodecs_lz4": (dict(compressors=[{"name": "numcodecs.lz4",
                                         "configuration": {"acceleration": 1}}]), False, None),
    "shard_crc32c": (dict(codecs=_sharded([_CRC])), True, None),
    "shard_gzip": (dict(codecs=_sharded([_GZIP])), True, None),
    "shard_start_zstd": (dict(codecs=_sharded([_ZSTD], location="start")), False, None),
    "shard_no_index_crc": (dict(codecs=_sharded([], index_codecs=[_BYTES])), False, None),
    # vlen-utf8 + zstd: the bound is what the format allows (4 GiB per element), so a
    # bomb of this size is inflated, then refused by the vlen decoder
    "text": (dict(dtype=str), False, None),
}
SHAPE = (16, 16)


def _data(name):
    values = np.arange(256, dtype="int32").reshape(SHAPE) * 7 - 100
    return values.astype(str) if name == "text" else values


def _build(store_factory):
    """The store with every config's array written, and each array's stored values (one
    store per test: hypothesis runs every input with the same factory)."""
    built = getattr(store_factory, "fuzz_chunks", None)
    if built is None:
        store = store_factory.make()
        originals = {}
        for name, (kw, _, _) in CONFIGS.items():
            kw = dict(kw)
            kw.setdefault("dtype", "int32")
            chunks = (8, 8) if "codecs" not in kw or not name.startswith("shard") else (16, 8)
            a = kvzarr.create_array(store, name=name, shape=SHAPE, chunks=chunks, **kw)
            a[...] = _data(name)
            originals[name] = {k: store.get(k) for k in store.list_prefix(f"{name}/c/")}
        built = store_factory.fuzz_chunks = (store, originals)
    return built


@st.composite
def damage(draw, value: bytes, sharded: bool, index_location: str, index_crc: bool, bomb):
    """(how, damaged value)."""
    kinds = ["flip", "flip", "truncate", "extend", "random"]
    if sharded:
        kinds += ["forge_index", "forge_index"]
    if bomb is not None:
        kinds.append("bomb")
    how = draw(st.sampled_from(kinds))
    data = bytearray(value)
    if how == "flip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
    elif how == "truncate":
        del data[draw(st.integers(0, len(data) - 1)):]
    elif how == "extend":
        data += draw(st.binary(min_size=1, max_size=64))
    elif how == "random":
        data = bytearray(draw(st.binary(max_size=2 * len(value))))
    elif how == "bomb":
        data = bytearray(_bomb(bomb))
    else:
        # an index entry forged by someone who also recomputes the index checksum
        size = 8 * 16 + (4 if index_crc else 0)
        at = 0 if index_location == "start" else len(data) - size
        index = np.frombuffer(bytes(data[at:at + 128]), dtype="<u8").reshape(8, 2).copy()
        for _ in range(draw(st.integers(1, 3))):
            entry = draw(st.integers(0, 7))
            index[entry] = [draw(st.one_of(
                st.sampled_from([0, 1, len(data), len(data) - 1, 2**31, 2**32, 2**63,
                                 2**64 - 1]),
                st.integers(0, 2**64 - 1))) for _ in range(2)]
        raw = index.tobytes()
        data[at:at + size] = Crc32cCodec().encode(raw, None) if index_crc else raw
    return how, bytes(data)


@functools.lru_cache(maxsize=None)
def _bomb(builder) -> bytes:
    """A bomb of 64 MiB in ``builder``'s format (blosc: a header declaring 2 GiB)."""
    return builder() if builder is blosc_bomb else builder(64 * MiB)


def _read(a):
    return a[...], a[1:3, 2:13], a.oindex[[0, 15, 9], 4:12]


def _expected(name):
    data = _data(name)
    return data, data[1:3, 2:13], data[[0, 15, 9], 4:12]


@fuzz_settings(100)
@given(data=st.data())
def test_damaged_chunks_give_the_data_or_a_kvzarr_error(store_factory, data):
    store, originals = _build(store_factory)
    name = data.draw(st.sampled_from(sorted(CONFIGS)))
    kw, checksummed, bomb = CONFIGS[name]
    key = data.draw(st.sampled_from(sorted(originals[name])))
    sharded = name.startswith("shard")
    location = "start" if "start" in name else "end"
    how, value = data.draw(damage(originals[name][key], sharded, location,
                                  name != "shard_no_index_crc", bomb))
    store.set(key, value)
    try:
        a = kvzarr.open_array(store, path=name, mode="r")
        got = only_kvzarr_errors(_read, a)
    finally:
        store.set(key, originals[name][key])
    if how == "bomb":
        assert isinstance(got, DecodedSizeError), got
    if isinstance(got, KvzarrError):
        return
    if checksummed and how != "forge_index":
        for g, e in zip(got, _expected(name)):
            np.testing.assert_array_equal(g, e)
    for g, e in zip(got, _expected(name)):
        assert g.shape == e.shape and g.dtype == a.dtype


def test_every_config_reads_back_undamaged(store_factory):
    """The fuzz target's baseline: every array reads what was written."""
    store, originals = _build(store_factory)
    for name in CONFIGS:
        a = kvzarr.open_array(store, path=name, mode="r")
        assert originals[name], name
        with bounded_time():
            for g, e in zip(_read(a), _expected(name)):
                np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name", ["shard_crc32c", "shard_gzip"])
def test_shard_index_bit_flip_is_caught_by_its_checksum(name):
    store = kvzarr.MemoryStore()
    kw = dict(CONFIGS[name][0], dtype="int32")
    a = kvzarr.create_array(store, name="a", shape=SHAPE, chunks=(16, 8), **kw)
    a[...] = _data(name)
    value = bytearray(store.get("a/c/0/0"))
    value[-10] ^= 0x10
    store.set("a/c/0/0", bytes(value))
    with pytest.raises(KvzarrError):
        a[...]
    with pytest.raises(KvzarrError):
        a[0:2, 0:2]
