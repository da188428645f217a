"""kvzarr against TensorStore's ``zarr3`` driver over a shared directory (``file``
kvstore); core spec codecs, chunk key encodings, fill values and ``sharding_indexed``
(https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html).

Promises checked here: over the numeric case matrix of ``conftest``, what kvzarr writes
TensorStore reads bit-exactly (with the same fill value, NaN payloads included) and what
TensorStore writes kvzarr reads bit-exactly; TensorStore's terser metadata (key
encodings without configuration, no ``attributes``) is read; both sides store the same
chunk keys; shards rewritten in part by one side read correctly on the other.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvzarr

from .conftest import (CHUNKS, NAME, NUMERIC_CASES, SHAPE, SHARDS, Case, assert_bit_equal,
                       bits, expected_chunk_keys, fill_scalar, numpy_dtype, read_json,
                       read_kvzarr, read_tensorstore, stored_keys, write_kvzarr,
                       write_tensorstore)

ts = pytest.importorskip("tensorstore")


def _ts_open(root):
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / NAME) + "/"}}
    return ts.open(spec, open=True).result()


def _fill_bits(value, case):
    return bits(np.array(value, dtype=numpy_dtype(case.dtype))).tolist()


@pytest.mark.parametrize("case", NUMERIC_CASES, ids=str)
def test_kvzarr_writes_tensorstore_reads(case, tmp_path):
    expected = write_kvzarr(case, tmp_path)
    assert stored_keys(tmp_path / NAME) == expected_chunk_keys(case, expected)
    t = _ts_open(tmp_path)
    assert t.dtype.numpy_dtype == expected.dtype
    assert_bit_equal(t.read().result(), expected)
    assert _fill_bits(t.fill_value, case) == _fill_bits(fill_scalar(case.dtype, case.fill),
                                                        case)
    # a read that touches only boundary and missing chunks
    assert_bit_equal(t[11:13, 5:7].read().result(), expected[11:13, 5:7])


@pytest.mark.parametrize("case", NUMERIC_CASES, ids=str)
def test_tensorstore_writes_kvzarr_reads(case, tmp_path):
    expected = write_tensorstore(case, tmp_path)
    assert stored_keys(tmp_path / NAME) == expected_chunk_keys(case, expected)
    arr = kvzarr.open_array(kvzarr.FilesystemStore(tmp_path), path=NAME, mode="r")
    assert_bit_equal(arr[...], expected)
    assert _fill_bits(arr.fill_value, case) == _fill_bits(
        fill_scalar(case.dtype, case.fill), case)
    assert_bit_equal(arr[12, ::2], expected[12, ::2])
    assert_bit_equal(arr.vindex[[0, 12, 5], [6, 6, 2]], expected[[0, 12, 5], [6, 6, 2]])


def test_tensorstore_terse_metadata_is_read(tmp_path):
    """TensorStore writes ``{"name": "default"}`` / ``{"name": "v2"}`` without a
    configuration and no ``attributes``; the spec defaults ("/" and ".") apply."""
    for keys, want in (("default/", {"name": "default"}), ("v2.", {"name": "v2"})):
        root = tmp_path / keys.replace("/", "slash").replace(".", "dot")
        case = Case("int32", "nonzero", "zstd", keys=keys)
        expected = write_tensorstore(case, root)
        doc = read_json(root / NAME / "zarr.json")
        assert doc["chunk_key_encoding"] == want
        assert "attributes" not in doc
        arr = kvzarr.open_array(str(root), path=NAME, mode="r")
        assert dict(arr.attrs) == {}
        assert_bit_equal(arr[...], expected)


def test_nan_payload_fill_from_tensorstore(tmp_path):
    case = Case("float32", "nan-payload", "gzip", "end")
    write_tensorstore(case, tmp_path)
    assert read_json(tmp_path / NAME / "zarr.json")["fill_value"] == "0x7fc00001"
    ours = read_kvzarr(tmp_path)
    assert ours.view(np.uint32)[12, 0] == 0x7FC00001  # a missing shard
    assert ours.view(np.uint32)[9, 6] == 0x7FC00001  # padding of a written shard
    assert_bit_equal(ours, read_tensorstore(tmp_path))


# ------------------------------------------------------------------------ partial shards

_EDITS = (((slice(1, 3), slice(1, 2)), 5.5),      # inside one inner chunk
          ((slice(4, 8), slice(0, 3)), -2.5),     # a whole inner chunk set to the fill
          ((slice(12, 13), slice(0, 1)), np.inf),  # into the shard that was missing
          ((slice(7, 10), slice(5, 7)), -3.25))   # across four shards


@pytest.mark.parametrize("shard", ["end", "start"])
@pytest.mark.parametrize("writer", ["kvzarr-edits", "tensorstore-edits"])
def test_partial_shard_writes(writer, shard, tmp_path):
    case = Case("float32", "nonzero", "zstd-crc32c", shard)  # fill -2.5
    model = np.arange(91, dtype=np.float32).reshape(SHAPE) + 1
    model[8:, :6] = -2.5  # shard (1, 0) stays missing
    if writer == "kvzarr-edits":
        write_tensorstore(case, tmp_path)
        _ts_open(tmp_path).write(model).result()
        arr = kvzarr.open_array(str(tmp_path), path=NAME, mode="r+")
        for sel, value in _EDITS:
            arr[sel] = value
            model[sel] = value
    else:
        write_kvzarr(case, tmp_path)
        kvzarr.open_array(str(tmp_path), path=NAME, mode="r+")[...] = model
        t = _ts_open(tmp_path)
        for sel, value in _EDITS:
            t[sel].write(np.full(model[sel].shape, value, dtype=np.float32)).result()
            model[sel] = value
    assert_bit_equal(read_tensorstore(tmp_path), model)
    assert_bit_equal(read_kvzarr(tmp_path), model)
    assert_bit_equal(read_kvzarr(tmp_path, (slice(6, 11), slice(4, 7))), model[6:11, 4:7])
    assert len(stored_keys(tmp_path / NAME)) == 4


def test_kvzarr_resize_read_by_tensorstore(tmp_path):
    arr = kvzarr.create_array(str(tmp_path), name=NAME, shape=SHAPE, chunks=CHUNKS,
                              shards=SHARDS, dtype="int64", fill_value=-9)
    data = np.arange(91, dtype=np.int64).reshape(SHAPE) * -(2**40)
    arr[...] = data
    arr.resize((9, 4))
    arr.append(np.full((2, 4), 2**62, dtype=np.int64), axis=0)
    expected = np.full((11, 4), -9, dtype=np.int64)
    expected[:9] = data[:9, :4]
    expected[9:] = 2**62
    t = _ts_open(tmp_path)
    assert tuple(t.shape) == (11, 4)
    assert_bit_equal(t.read().result(), expected)



@pytest.mark.parametrize("level", range(10))
def test_tensorstore_reads_gzip_chunks_at_every_level(level, tmp_path):
    """Level 0 stores, levels 1..9 deflate with libdeflate (``kvzarr.codecs.gzip``):
    TensorStore inflates every one. Data from noise to runs, so that every strategy of
    the deflater is used."""
    rng = np.random.default_rng(level)
    y, x = np.mgrid[0:128, 0:128]
    data = np.concatenate([
        rng.integers(0, 65535, (64, 128)),                                  # noise
        (1000 + 300 * np.sin(x / 9) + rng.normal(0, 2, (128, 128)))[:32],  # smooth
        (x // 16 + y // 8)[:32],                                            # runs
    ]).astype("uint16")
    a = kvzarr.create_array(str(tmp_path), name=NAME, shape=data.shape, chunks=(32, 32),
                            dtype="uint16", fill_value=0,
                            compressors=[{"name": "gzip", "configuration": {"level": level}}])
    a[...] = data
    np.testing.assert_array_equal(_ts_open(tmp_path).read().result(), data)
