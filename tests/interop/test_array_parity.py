"""kvzarr's Array against zarr-python 3.1 on the same data in one directory: the codec
properties (``filters``, ``serializer``, ``compressors``, as tuples of codec objects;
kvzarr's own codec objects, compared by their Zarr JSON), ``order``, ``chunks``,
``shards``, ``nbytes_stored()`` and the rows ``info`` / ``info_complete()`` share; and
``chunks`` on a rectilinear grid (which zarr-python 3.1 cannot open) raising a kvzarr
error that points to ``chunk_sizes``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import RectilinearChunksError
from kvzarr.stores import graves

zarr = pytest.importorskip("zarr")
from zarr.storage import LocalStore  # noqa: E402

TRANSPOSE = {"name": "transpose", "configuration": {"order": [1, 0]}}
GZIP = {"name": "gzip", "configuration": {"level": 5}}
ZSTD = {"name": "zstd", "configuration": {"level": 3, "checksum": True}}

CASES = {
    "defaults": {},
    "no-compressor": {"compressors": None},
    "filter-and-two-compressors": {"filters": [TRANSPOSE], "compressors": [GZIP, ZSTD]},
    "sharded": {"shards": (8, 6)},
    "sharded-with-codecs": {"shards": (8, 6), "filters": [TRANSPOSE], "compressors": [GZIP]},
    "big-endian": {"serializer": {"name": "bytes", "configuration": {"endian": "big"}}},
}


def _json(codecs) -> list:
    """Codec objects of either library as plain JSON (tuples become lists)."""
    out = []
    for c in codecs:
        doc = c.to_json() if hasattr(c, "to_json") else c.to_dict()
        out.append(json.loads(json.dumps(doc)))
    return out


def _rows(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in
            (line.partition(" : ") for line in str(text).splitlines())}


@pytest.mark.parametrize("case", sorted(CASES))
def test_codec_properties_order_and_sizes_match_zarr_python(tmp_path, case):
    options = dict(CASES[case])
    z = zarr.create_array(LocalStore(tmp_path), name="a", shape=(13, 7), chunks=(4, 3),
                          dtype="int32", fill_value=0, **options)
    data = np.arange(13 * 7, dtype="int32").reshape(13, 7)
    z[:9, :5] = data[:9, :5]
    k = kvzarr.open_array(str(tmp_path), path="a")
    assert _json(k.filters) == _json(z.filters)
    assert _json([k.serializer]) == _json([z.serializer])
    assert _json(k.compressors) == _json(z.compressors)
    assert isinstance(k.filters, tuple) and isinstance(k.compressors, tuple)
    assert k.order == z.order == "C"
    assert k.chunks == z.chunks and k.shards == z.shards
    assert k.nbytes_stored() == z.nbytes_stored()
    # and after kvzarr writes more (both read the same directory), once the files its
    # writes replaced are unlinked (until then zarr-python counts them as objects)
    k[9:, :] = data[9:, :]
    graves.flush()
    assert k.nbytes_stored() == z.nbytes_stored()
    zi, ki = _rows(z.info_complete()), _rows(k.info_complete())
    for row in ("Type", "Zarr format", "Shape", "Chunk shape", "Shard shape", "Order",
                "Read-only", "No. bytes", "No. bytes stored", "Storage ratio"):
        assert ki.get(row) == zi.get(row), row
    initialized = "Shards Initialized" if "shards" in options else "Chunks Initialized"
    assert ki[initialized].split("/")[0] == zi[initialized]
    static = _rows(k.info)
    assert "No. bytes stored" not in static and initialized not in static


def test_nbytes_stored_counts_only_the_array(tmp_path):
    """Its zarr.json and chunks, nothing of a sibling whose name it prefixes."""
    root = kvzarr.open_group(str(tmp_path / "x.sqlite"), mode="w")
    a = root.create_array("a", shape=(10,), chunks=(5,), dtype="u1", compressors=None)
    b = root.create_array("ab", shape=(10,), chunks=(5,), dtype="u1")
    a[:] = 1
    b[:] = 2
    store = root.store
    own = [k for k in store.list() if k.startswith("a/")]
    assert own == ["a/c/0", "a/c/1", "a/zarr.json"]
    assert a.nbytes_stored() == sum(store.getsize(k) for k in own)
    assert a.nbytes_stored() == len(store.get("a/zarr.json")) + 10   # two raw chunks
    assert store.getsize_prefix("") == sum(len(store.get(k)) for k in store.list())


def test_nbytes_stored_through_a_checksum_stack_leaves_the_records_out(tmp_path):
    target = str(tmp_path / "x.lmdb")
    a = kvzarr.create_array(target, name="a", shape=(10,), chunks=(5,), dtype="u1",
                            compressors=None, transformers=["checksum"])
    a[:] = 3
    assert a.nbytes_stored() == len(a.store.get("a/zarr.json")) + 10
    with kvzarr.open_store(target, mode="r") as plain:
        assert plain.getsize_prefix("") > a.store.getsize_prefix("")   # the records


def test_chunks_of_a_rectilinear_array_raise_a_kvzarr_error_naming_chunk_sizes():
    a = kvzarr.create_array(None, shape=(10, 6), chunks=[[3, 3, 4], [6]], dtype="i2")
    with pytest.raises(RectilinearChunksError, match="chunk_sizes") as e:
        a.chunks
    assert isinstance(e.value, NotImplementedError)     # what zarr-python raises
    assert e.value.field == "chunks"
    assert a.chunk_sizes == ((3, 3, 4), (6,)) == a.write_chunk_sizes
    assert a.shards is None
    assert "rectilinear ((3, 3, 4), (6,))" in repr(a.info)


def test_shards_of_a_rectilinear_sharded_array_raise_naming_write_chunk_sizes():
    a = kvzarr.create_array(None, shape=(12, 4), chunks=(2, 4), shards=[[4, 8], [4]],
                            dtype="u1")
    assert a.chunks == (2, 4) and a.chunk_sizes == ((2,) * 6, (4,))
    with pytest.raises(RectilinearChunksError, match="write_chunk_sizes"):
        a.shards
    assert a.write_chunk_sizes == ((4, 8), (4,))
    assert _rows(a.info)["Shard shape"] == "rectilinear ((4, 8), (4,))"
