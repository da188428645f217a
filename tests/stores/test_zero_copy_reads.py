"""Reads from LMDB decode chunks straight from the memory map (Store.get_many_views):
every codec must decode such buffers exactly as it decodes bytes, and no view may be
used after its transaction ends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.stores.lmdb import LMDBStore

NUMERIC = {
    "plain": dict(compressors=None),
    "big-endian": dict(serializer={"name": "bytes", "configuration": {"endian": "big"}},
                       compressors=None),
    "gzip": dict(compressors=[{"name": "gzip", "configuration": {"level": 1}}]),
    "zstd": dict(compressors=[{"name": "zstd", "configuration": {"level": 1}}]),
    "blosc": dict(compressors=[{"name": "blosc", "configuration": {
        "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}]),
    "crc32c": dict(compressors=[{"name": "crc32c"}]),
    "transpose": dict(filters=[{"name": "transpose", "configuration": {"order": [1, 0]}}],
                      compressors=None),
    "numcodecs.zlib": dict(compressors=[{"name": "numcodecs.zlib",
                                         "configuration": {"level": 1}}]),
    "sharded": dict(shards=(8, 12), compressors=[{"name": "zstd",
                                                  "configuration": {"level": 1}}]),
}


@pytest.fixture
def store(tmp_path: Path):
    with LMDBStore(tmp_path / "x.lmdb") as s:
        yield s


@pytest.mark.parametrize("codec", sorted(NUMERIC))
def test_every_codec_decodes_views_of_the_map(store, codec: str) -> None:
    data = np.arange(16 * 24, dtype="float32").reshape(16, 24) * 1.5
    a = kvzarr.create_array(store, name="a", shape=data.shape, chunks=(4, 6),
                            dtype="float32", **NUMERIC[codec])
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[3:13, ::5], data[3:13, ::5])
    with store.transaction():          # a read inside a user's write transaction
        np.testing.assert_array_equal(a[...], data)


@pytest.mark.parametrize("dtype,codec", [("string", "vlen-utf8"), ("bytes", "vlen-bytes")])
def test_variable_length_chunks_decode_from_views(store, dtype: str, codec: str) -> None:
    words = ["", "a", "zarr", "ünïcode", "x" * 300] * 4
    value = np.array(words if dtype == "string" else [w.encode() for w in words],
                     dtype=object)
    a = kvzarr.create_array(store, name="v", shape=(20,), chunks=(6,), dtype=dtype)
    a[...] = value
    assert list(a[...]) == list(value)


def test_views_outside_a_transaction_are_copies(store) -> None:
    store.set("k", b"value")
    got = store.get_many_views(["k", "missing"])
    assert got == [b"value", None] and type(got[0]) is bytes
    with store.transaction(write=False):
        view = store.get_many_views(["k"])[0]
        assert type(view) is not bytes and bytes(view) == b"value"   # a view of the map
