"""Every decoder stops at the size a chunk can have (issue 13, "Hangs and unbounded
memory"): decompression bombs fail fast, in little memory, with DecodedSizeError.

The two bombs of the issue are read in a separate process whose peak resident memory
(``resource.getrusage``) and time are measured around the read: an unbounded decoder
needs 3 GiB (and took 13 s) for each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numcodecs
import numpy as np
import pytest

import kvzarr
from kvzarr.codecs.bounds import compressed_bound
from kvzarr.codecs.decoders import declared_size
from kvzarr.errors import CodecError, DecodedSizeError
from tests.fuzz.bombs import GiB, MiB, blosc_bomb, gzip_bomb, zlib_bomb, zstd_bomb

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_MEASURE = textwrap.dedent("""
    import json, resource, sys, time
    import kvzarr
    from kvzarr.errors import DecodedSizeError
    from tests.fuzz.bombs import gzip_bomb, zstd_bomb
    bomb = {"gzip": gzip_bomb, "zstd": zstd_bomb}[sys.argv[1]]()
    store = kvzarr.MemoryStore()
    a = kvzarr.create_array(store, name="a", shape=(2**18,), chunks=(2**18,),
                            dtype="float32", compressors=[{"name": sys.argv[1],
                            "configuration": {"level": 1}}])
    store.set("a/c/0", bomb)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    try:
        a[...]
        outcome = "read"
    except DecodedSizeError as e:
        outcome = type(e).__name__
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"outcome": outcome, "bomb_bytes": len(bomb), "seconds": elapsed,
                      "rss_growth_kib": after - before}))
""")


def _measure(codec: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, codec], cwd=REPO, check=True,
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("codec, bomb_max", [("gzip", 4 * MiB), ("zstd", 100_000)])
def test_issue_bombs_inflating_to_3_gib_fail_fast_in_little_memory(codec, bomb_max):
    """The issue's 3 MB gzip chunk and 98 KB zstd chunk, each 3 GiB inflated, in a 1 MiB
    chunk: refused after at most about one chunk of output."""
    got = _measure(codec)
    assert got["outcome"] == "DecodedSizeError"
    assert got["bomb_bytes"] <= bomb_max
    # the chunk is 1 MiB: a decoder that inflated the bomb would grow by 3 GiB
    assert got["rss_growth_kib"] < 64 * 1024, got
    # unbounded: 13 s for gzip. Generous for a loaded machine, far below that.
    assert got["seconds"] < 5, got


def test_bombs_are_what_they_claim():
    """The builders make real bombs: the gzip member and zstd frame inflate to what they
    say (checked on smaller sizes, with the plain libraries)."""
    import gzip as gzip_module
    import zstandard
    assert gzip_module.decompress(gzip_bomb(8 * MiB)) == bytes(8 * MiB)
    import zlib
    assert zlib.decompress(zlib_bomb(4 * MiB)) == bytes(4 * MiB)
    frame = zstd_bomb(4 * MiB)
    assert zstandard.ZstdDecompressor().decompress(frame) == bytes(4 * MiB)
    assert declared_size(zstd_bomb(3 * GiB)) == 3 * GiB
    assert len(zstd_bomb(3 * GiB)) < 100_000
    streamed = zstd_bomb(4 * MiB, content_size=False)
    assert declared_size(streamed) is None
    assert zstandard.ZstdDecompressor().decompressobj().decompress(streamed) == bytes(4 * MiB)


def _array(compressors, shape=(1024,), dtype="float32", **kw):
    store = kvzarr.MemoryStore()
    a = kvzarr.create_array(store, name="a", shape=shape, chunks=shape, dtype=dtype,
                            compressors=compressors, **kw)
    return store, a


def test_gzip_bomb_in_a_small_chunk_is_refused():
    store, a = _array([{"name": "gzip", "configuration": {"level": 1}}])
    store.set("a/c/0", gzip_bomb(64 * MiB))
    with pytest.raises(DecodedSizeError) as info:
        a[...]
    assert info.value.key == "a/c/0"
    assert info.value.limit == 4096


def test_gzip_of_one_byte_more_than_the_chunk_is_refused_and_exact_size_is_read():
    store, a = _array([{"name": "gzip", "configuration": {"level": 1}}])
    import gzip as gzip_module
    store.set("a/c/0", gzip_module.compress(bytes(4097)))
    with pytest.raises(DecodedSizeError):
        a[...]
    store.set("a/c/0", gzip_module.compress(np.arange(1024, dtype="<f4").tobytes()))
    np.testing.assert_array_equal(a[...], np.arange(1024, dtype="f4"))


def test_gzip_members_together_past_the_chunk_are_refused():
    import gzip as gzip_module
    store, a = _array([{"name": "gzip", "configuration": {"level": 1}}])
    member = gzip_module.compress(bytes(3000))
    store.set("a/c/0", member + member)
    with pytest.raises(DecodedSizeError):
        a[...]


def test_zstd_frame_declaring_more_than_the_chunk_is_refused_before_decoding():
    store, a = _array([{"name": "zstd", "configuration": {"level": 1}}])
    store.set("a/c/0", zstd_bomb(3 * GiB))
    with pytest.raises(DecodedSizeError) as info:
        a[...]
    assert info.value.declared == 3 * GiB


def test_zstd_frame_without_content_size_is_bounded():
    store, a = _array([{"name": "zstd", "configuration": {"level": 1}}])
    store.set("a/c/0", zstd_bomb(256 * MiB, content_size=False))
    with pytest.raises(DecodedSizeError):
        a[...]


def test_zstd_concatenated_frames_declaring_more_than_the_chunk_are_refused():
    import zstandard
    store, a = _array([{"name": "zstd", "configuration": {"level": 1}}])
    frame = zstandard.ZstdCompressor().compress(bytes(4000))
    store.set("a/c/0", frame + frame)
    with pytest.raises(DecodedSizeError):
        a[...]


def test_zstd_streamed_frame_of_the_right_size_is_read():
    import zstandard
    store, a = _array([{"name": "zstd", "configuration": {"level": 1}}])
    data = np.arange(1024, dtype="<f4").tobytes()
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert declared_size(frame) is None
    store.set("a/c/0", frame)
    np.testing.assert_array_equal(a[...], np.arange(1024, dtype="f4"))


def test_blosc_header_declaring_more_than_the_chunk_is_refused_before_decoding():
    store, a = _array([{"name": "blosc", "configuration": {"cname": "zstd", "clevel": 1}}])
    store.set("a/c/0", blosc_bomb())
    with pytest.raises(DecodedSizeError) as info:
        a[...]
    assert info.value.declared == 2**31 - 1 - 16


@pytest.mark.parametrize("codec, bomb", [
    (numcodecs.Zlib(1), lambda: zlib_bomb(64 * MiB)),
    (numcodecs.GZip(1), lambda: gzip_bomb(64 * MiB)),
    (numcodecs.BZ2(1), lambda: __import__("bz2").compress(bytes(8 * MiB))),
    (numcodecs.LZMA(), lambda: __import__("lzma").compress(bytes(8 * MiB))),
    (numcodecs.LZ4(), lambda: numcodecs.LZ4().encode(bytes(8 * MiB))),
    (numcodecs.Zstd(1), lambda: zstd_bomb(64 * MiB)),
    (numcodecs.Blosc(), lambda: blosc_bomb()),
], ids=lambda x: getattr(x, "codec_id", ""))
def test_numcodecs_compressors_are_bounded(codec, bomb):
    store, a = _array([kvzarr.codecs.numcodecs_codec(codec)])
    store.set("a/c/0", bomb())
    with pytest.raises(DecodedSizeError):
        a[...]
    # and the codec still reads what it wrote
    a[...] = np.arange(1024)
    np.testing.assert_array_equal(a[...], np.arange(1024, dtype="f4"))


def test_crc32c_payload_past_the_chunk_is_refused_before_hashing():
    from kvzarr.codecs.crc32c import Crc32cCodec
    with pytest.raises(DecodedSizeError):
        Crc32cCodec().decode_bounded(bytes(5000), None, 4096)


def test_bound_above_a_compressor_is_its_worst_case():
    """gzip under crc32c: the gzip member is bounded by a compressor's worst case, and a
    chunk of incompressible data at level 0 (stored blocks, the largest encoding) fits."""
    store, a = _array([{"name": "gzip", "configuration": {"level": 0}}, {"name": "crc32c"}],
                      shape=(65536,), dtype="uint8")
    data = np.random.default_rng(1).integers(0, 256, 65536, dtype=np.uint8)
    a[...] = data
    assert len(store.get("a/c/0")) <= compressed_bound(65536) + 4
    np.testing.assert_array_equal(a[...], data)


def test_gzip_bomb_inside_a_shard_is_refused():
    store = kvzarr.MemoryStore()
    a = kvzarr.create_array(store, name="a", shape=(64,), chunks=(16,), shards=(64,),
                            dtype="float32", compressors=[{"name": "gzip",
                                                           "configuration": {"level": 1}}])
    a[...] = np.arange(64)
    shard = store.get("a/c/0")
    # rebuild the shard with inner chunk 0 replaced by a bomb (index: 4 entries + crc)
    from kvzarr.codecs.crc32c import Crc32cCodec
    bomb = gzip_bomb(16 * MiB)
    index = np.frombuffer(shard[-68:-4], dtype="<u8").reshape(4, 2).copy()
    body = bytearray(bomb)
    for i in range(1, 4):
        off, n = index[i]
        index[i] = (len(body), n)
        body += shard[off:off + n]
    index[0] = (0, len(bomb))
    store.set("a/c/0", bytes(body) + Crc32cCodec().encode(index.tobytes(), None))
    with pytest.raises(DecodedSizeError):
        a[...]
    with pytest.raises(DecodedSizeError):
        a[:4]          # a partial read goes through the same bounded inner pipeline
    np.testing.assert_array_equal(a[16:], np.arange(16, 64, dtype="f4"))


def test_vlen_chunk_is_bounded_by_what_its_format_allows():
    store, a = _array([{"name": "zstd", "configuration": {"level": 1}}], shape=(4,),
                      dtype=str)
    a[...] = np.array(["a", "bb", "", "dddd"])
    assert list(a[...]) == ["a", "bb", "", "dddd"]
    pipeline = a._pipeline
    bound = pipeline.max_encoded_size(a._io.spec((0,)))
    assert bound >= 4 + 4 * (4 + 2**32 - 1)


def test_decoded_size_error_is_a_codec_error_and_a_value_error():
    assert issubclass(DecodedSizeError, CodecError)
    assert issubclass(DecodedSizeError, ValueError)
