"""kvzarr against zarr-python 3.1 over a shared directory (core spec "Array metadata",
"Chunk key encoding", codecs, sharding; zarr-python's ``resize`` and ``write_empty_chunks``).

Promises checked here: what kvzarr writes zarr-python reads bit-exactly and what
zarr-python writes kvzarr reads bit-exactly, over the case matrix of ``conftest``
(data types x codecs x sharding x key encodings x fill values, with boundary and missing
chunks); kvzarr stores exactly the chunk keys zarr's empty-chunk rule asks for; the
metadata kvzarr writes equals zarr-python's for the same creation arguments, except for
the documented differences; hierarchies, resized arrays and partly rewritten shards pass
both ways.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import kvzarr

from .conftest import (CHUNKS, NAME, NUMERIC_CASES, SHAPE, SHARDS, SPECIAL_CASES,
                       STRUCT_CASES, Case, assert_bit_equal, bits, creation_kwargs,
                       expected_chunk_keys, fill_json, fill_scalar, full_codecs,
                       key_encoding_json, numpy_dtype, read_json, read_kvzarr,
                       read_zarr_python, stored_keys, write_kvzarr, write_zarr_python)

zarr = pytest.importorskip("zarr")
from zarr.storage import LocalStore  # noqa: E402

# zarr-python warns that string, bytes and struct types are not in the core spec
pytestmark = pytest.mark.filterwarnings(
    "ignore:The data type .* does not have a Zarr V3 specification")

ALL_CASES = NUMERIC_CASES + SPECIAL_CASES


def _fill_bits_equal(actual: object, case: Case) -> bool:
    want = fill_scalar(case.dtype, case.fill)
    dt = numpy_dtype(case.dtype)
    if dt.kind in "OT":
        return actual == want
    return bool(np.array_equal(bits(np.array(actual, dtype=dt)), bits(np.array(want, dtype=dt))))


# ------------------------------------------------------------------------ data, both ways


@pytest.mark.parametrize("case", ALL_CASES, ids=str)
def test_kvzarr_writes_zarr_python_reads(case, tmp_path):
    expected = write_kvzarr(case, tmp_path)
    assert stored_keys(tmp_path / NAME) == expected_chunk_keys(case, expected)
    z = zarr.open_array(LocalStore(tmp_path, read_only=True), path=NAME, mode="r")
    assert_bit_equal(z[...], expected)
    assert _fill_bits_equal(z.fill_value, case)


@pytest.mark.parametrize("case", ALL_CASES + STRUCT_CASES, ids=str)
def test_zarr_python_writes_kvzarr_reads(case, tmp_path):
    expected = write_zarr_python(case, tmp_path)
    arr = kvzarr.open_array(kvzarr.FilesystemStore(tmp_path), path=NAME, mode="r")
    assert_bit_equal(arr[...], expected)
    assert _fill_bits_equal(arr.fill_value, case)
    # partial reads: a strided slice across boundary chunks and an orthogonal selection
    assert_bit_equal(arr[1:13:3, 2:], expected[1:13:3, 2:])
    rows, cols = [12, 0, 5, 9], [6, 1, 3]
    assert_bit_equal(arr.oindex[rows, cols], expected[np.ix_(rows, cols)])


def test_structured_is_read_as_legacy_structured(tmp_path):
    """zarr-python 3.1 writes the legacy "structured" name with a base64 fill and a
    bytes codec without endian; kvzarr reads the fields by name."""
    case = STRUCT_CASES[1]
    expected = write_zarr_python(case, tmp_path)
    doc = read_json(tmp_path / NAME / "zarr.json")
    assert doc["data_type"]["name"] == "structured"
    assert isinstance(doc["fill_value"], str)
    arr = kvzarr.open_array(str(tmp_path), path=NAME, mode="r")
    assert arr.dtype.names == ("id", "score", "flag")
    assert_bit_equal(arr["score"], expected["score"])
    assert_bit_equal(arr[3:5, "id"], expected[3:5]["id"])


def test_nan_payload_fill_survives_both_ways(tmp_path):
    """The fill 0x7fc00001 keeps its payload: in kvzarr's metadata, in the padding of
    boundary chunks zarr-python writes, and in missing chunks each side reads."""
    case = Case("float32", "nan-payload")
    kv_root, zp_root = tmp_path / "kv", tmp_path / "zp"
    write_kvzarr(case, kv_root)
    assert read_json(kv_root / NAME / "zarr.json")["fill_value"] == "0x7fc00001"
    write_zarr_python(case, zp_root)
    for root in (kv_root, zp_root):
        ours, theirs = read_kvzarr(root), read_zarr_python(root)
        assert_bit_equal(ours, theirs)
        assert ours.view(np.uint32)[12, 0] == 0x7FC00001  # a missing chunk
    padded = zarr.open_array(LocalStore(zp_root), path=NAME, mode="r+")
    padded[12, 0] = 1.0  # zarr-python pads the rest of chunk (3, 0) with the fill
    assert read_kvzarr(zp_root).view(np.uint32)[12, 1] == 0x7FC00001


# ------------------------------------------------------------------------ metadata


def _metadata_pair(case, tmp_path):
    kvzarr.create_array(str(tmp_path / "kv"), name=NAME, **creation_kwargs(case, "kvzarr"))
    zarr.create_array(LocalStore(tmp_path / "zp"), name=NAME, **creation_kwargs(case, "zarr"))
    return (read_json(tmp_path / "kv" / NAME / "zarr.json"),
            read_json(tmp_path / "zp" / NAME / "zarr.json"))


@pytest.mark.parametrize("case", ALL_CASES, ids=str)
def test_metadata_matches_zarr_python(case, tmp_path):
    ours, theirs = _metadata_pair(case, tmp_path)
    assert ours["chunk_grid"] == theirs["chunk_grid"] == {
        "name": "regular", "configuration": {"chunk_shape": list(case.grid)}}
    assert ours["chunk_key_encoding"] == theirs["chunk_key_encoding"] == key_encoding_json(case)
    assert ours["codecs"] == theirs["codecs"] == full_codecs(case)
    assert ours["shape"] == theirs["shape"] == list(SHAPE)
    if case.dtype == "bytes":  # zarr-python's own name; kvzarr writes the registered one
        assert (ours["data_type"], theirs["data_type"]) == ("bytes", "variable_length_bytes")
    else:
        assert ours["data_type"] == theirs["data_type"]
    if case.fill == "nan-payload":  # zarr-python writes every NaN as "NaN"
        assert (ours["fill_value"], theirs["fill_value"]) == (fill_json(case.dtype, case.fill),
                                                              "NaN")
    else:
        assert ours["fill_value"] == theirs["fill_value"]
        if case in NUMERIC_CASES:
            assert ours["fill_value"] == fill_json(case.dtype, case.fill)
    assert ours["attributes"] == theirs["attributes"] == {}
    assert ours["storage_transformers"] == theirs["storage_transformers"] == []


def test_struct_metadata_is_the_registered_name(tmp_path):
    """kvzarr writes ``struct`` (the legacy ``structured`` must not be written), which
    zarr-python 3.1 cannot read; the packed bytes layout is the same."""
    case = STRUCT_CASES[1]
    kvzarr.create_array(str(tmp_path), name=NAME, **creation_kwargs(case, "kvzarr"))
    doc = read_json(tmp_path / NAME / "zarr.json")
    assert doc["data_type"] == {"name": "struct", "configuration": {"fields": [
        {"name": "id", "data_type": "int32"}, {"name": "score", "data_type": "float64"},
        {"name": "flag", "data_type": "uint8"}]}}
    assert doc["fill_value"] == {"id": -1, "score": "NaN", "flag": 7}


# ------------------------------------------------------------------------ hierarchies

ROOT_ATTRS = {"title": "tést ✓", "n": 3, "nested": {"a": [1, 2.5, None, True], "b": {}}}


def _check_tree_kvzarr(root_path):
    root = kvzarr.open_group(str(root_path), mode="r")
    assert dict(root.attrs) == ROOT_ATTRS
    assert sorted(root.keys()) == ["b", "g1"]
    assert sorted(name for name, _ in root.members(max_depth=None)) == [
        "b", "g1", "g1/a", "g1/g2"]
    assert dict(root["g1"].attrs) == {"kind": "sub"}
    a = root["g1/a"]
    assert a.dimension_names == ("y", "x")
    assert dict(a.attrs) == {"units": "m", "scale": [0.5, 2]}
    assert_bit_equal(a[...], np.arange(20, dtype=np.int16).reshape(5, 4) - 7)
    b = root["b"]
    assert b.dimension_names == (None,)
    assert_bit_equal(b[...], np.array([1.5, np.nan, np.nan]))


def _check_tree_zarr(root_path):
    root = zarr.open_group(LocalStore(root_path, read_only=True), mode="r")
    assert root.attrs.asdict() == ROOT_ATTRS
    assert sorted(root.group_keys()) == ["g1"] and sorted(root.array_keys()) == ["b"]
    assert sorted(name for name, _ in root.members(max_depth=None)) == [
        "b", "g1", "g1/a", "g1/g2"]
    assert root["g1"].attrs.asdict() == {"kind": "sub"}
    a = root["g1/a"]
    assert tuple(a.metadata.dimension_names) == ("y", "x")
    assert a.attrs.asdict() == {"units": "m", "scale": [0.5, 2]}
    assert_bit_equal(a[...], np.arange(20, dtype=np.int16).reshape(5, 4) - 7)
    assert tuple(root["b"].metadata.dimension_names) == (None,)
    assert_bit_equal(root["b"][...], np.array([1.5, np.nan, np.nan]))


def _build_tree(root):
    """The same hierarchy through either library's group API."""
    g1 = root.create_group("g1", attributes={"kind": "sub"})
    g1.create_group("g2")
    a = g1.create_array("a", shape=(5, 4), chunks=(2, 2), dtype="int16",
                        dimension_names=["y", "x"], attributes={"units": "m", "scale": [0.5, 2]})
    a[...] = np.arange(20, dtype=np.int16).reshape(5, 4) - 7
    b = root.create_array("b", shape=(3,), chunks=(2,), dtype="float64", fill_value=np.nan,
                          dimension_names=[None])
    b[0] = 1.5


def test_zarr_python_hierarchy_read_by_kvzarr(tmp_path):
    root = zarr.open_group(LocalStore(tmp_path), mode="w", attributes=ROOT_ATTRS)
    _build_tree(root)
    _check_tree_kvzarr(tmp_path)


def test_kvzarr_hierarchy_read_by_zarr_python(tmp_path):
    root = kvzarr.open_group(str(tmp_path), mode="w", attributes=ROOT_ATTRS)
    _build_tree(root)
    _check_tree_zarr(tmp_path)
    _check_tree_kvzarr(tmp_path)


def test_attribute_update_by_kvzarr_read_by_zarr_python(tmp_path):
    zarr.create_array(LocalStore(tmp_path), name=NAME, shape=(3,), dtype="uint8",
                      attributes={"keep": 1})
    arr = kvzarr.open_array(str(tmp_path), path=NAME, mode="r+")
    arr.attrs.update({"added": ["x", None], "keep": 2})
    z = zarr.open_array(LocalStore(tmp_path, read_only=True), path=NAME, mode="r")
    assert z.attrs.asdict() == {"keep": 2, "added": ["x", None]}


# ------------------------------------------------------------------------ resize / append


def _resize_steps(arr):
    """Shrink (erases whole chunks, keeps straddling ones), grow (shows their old
    values), append along both axes."""
    arr[...] = np.arange(91, dtype=np.int32).reshape(SHAPE) * 3 - 100
    arr.resize((6, 5))
    arr.resize((10, 9))
    arr.append(np.full((3, 9), 42, dtype=np.int32), axis=0)
    arr.append(np.arange(26, dtype=np.int32).reshape(13, 2), axis=1)


@pytest.mark.parametrize("shards", [None, SHARDS], ids=["chunks", "shards"])
def test_zarr_python_reads_after_kvzarr_resize_and_append(shards, tmp_path):
    kw = dict(shape=SHAPE, chunks=CHUNKS, shards=shards, dtype="int32", fill_value=-1)
    ours = kvzarr.create_array(str(tmp_path / "kv"), name=NAME, **kw)
    _resize_steps(ours)
    theirs = zarr.create_array(LocalStore(tmp_path / "zp"), name=NAME, **kw)
    _resize_steps(theirs)
    assert ours.shape == theirs.shape == (13, 11)
    expected = theirs[...]
    z = zarr.open_array(LocalStore(tmp_path / "kv", read_only=True), path=NAME, mode="r")
    assert z.shape == (13, 11)
    assert_bit_equal(z[...], expected)
    assert_bit_equal(ours[...], expected)
    assert stored_keys(tmp_path / "kv" / NAME) == stored_keys(tmp_path / "zp" / NAME)
    assert expected[7, 4] == 7 * 3 * 7 + 4 * 3 - 100  # kept beyond the shrunk edge
    assert expected[8, 0] == -1 and expected[10, 8] == 42


# ------------------------------------------------------------------------ partial shards

_SHARD_EDITS = (
    ((slice(1, 3), slice(1, 2)), 5.5),        # inside one inner chunk
    ((slice(4, 8), slice(0, 3)), 0.0),        # a whole inner chunk set to the fill: dropped
    ((slice(12, 13), slice(0, 1)), np.nan),   # into the shard that was missing
    ((slice(7, 10), slice(5, 7)), -3.25),     # across four shards
)


def _sharded_kwargs(location):
    kw = dict(shape=SHAPE, dtype="float32", fill_value=0.0)
    if location == "end":
        return dict(kw, chunks=CHUNKS, shards=SHARDS)
    sharding = {"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(CHUNKS), "codecs": [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "zstd", "configuration": {"level": 1, "checksum": False}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}], "index_location": "start"}}
    return dict(kw, chunks=SHARDS, serializer=sharding, compressors=[], filters=[])


def _initial():
    data = np.arange(91, dtype=np.float32).reshape(SHAPE) + 1
    data[8:, :6] = 0.0  # shard (1, 0) stays missing
    return data


def _apply_edits(target, model):
    for sel, value in _SHARD_EDITS:
        target[sel] = value
        model[sel] = value


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("writer", ["kvzarr-edits", "zarr-edits"])
def test_partial_shard_writes(writer, location, tmp_path):
    kw = _sharded_kwargs(location)
    model = _initial()
    if writer == "kvzarr-edits":  # zarr-python writes the shards, kvzarr edits them
        zarr.create_array(LocalStore(tmp_path), name=NAME, **kw)[...] = model
        _apply_edits(kvzarr.open_array(str(tmp_path), path=NAME, mode="r+"), model)
    else:
        kvzarr.create_array(str(tmp_path), name=NAME, **kw)[...] = model
        _apply_edits(zarr.open_array(LocalStore(tmp_path), path=NAME, mode="r+"), model)
    assert_bit_equal(read_zarr_python(tmp_path), model)
    assert_bit_equal(read_kvzarr(tmp_path), model)
    assert_bit_equal(read_kvzarr(tmp_path, (slice(6, 11), slice(4, 7))), model[6:11, 4:7])
    assert len(stored_keys(tmp_path / NAME)) == 4


def test_shard_index_marks_dropped_inner_chunk_missing(tmp_path):
    """After kvzarr writes the fill over a whole inner chunk, its index entry is the
    missing marker (both words 2^64-1) that zarr-python reads as fill."""
    kw = _sharded_kwargs("end")
    zarr.create_array(LocalStore(tmp_path), name=NAME, **kw)[...] = _initial()
    arr = kvzarr.open_array(str(tmp_path), path=NAME, mode="r+")
    arr[4:8, 0:3] = 0.0  # inner chunk (1, 0) of shard (0, 0)
    shard = (tmp_path / NAME / "c" / "0" / "0").read_bytes()
    index = np.frombuffer(shard[-(16 * 4 + 4):-4], dtype="<u8").reshape(2, 2, 2)
    assert index[1, 0].tolist() == [2**64 - 1, 2**64 - 1]
    assert all(index[i, j, 1] > 0 and index[i, j, 0] + index[i, j, 1] <= len(shard) - 68
               for i, j in [(0, 0), (0, 1), (1, 1)])
    assert json.loads((tmp_path / NAME / "zarr.json").read_text())["shape"] == list(SHAPE)
    assert math.isclose(read_zarr_python(tmp_path)[4, 0], 0.0)
