"""Golden formats: stores written by the peers, and the rectilinear chunk grid's worked
examples (zarr-extensions ``chunk-grids/rectilinear``; zarr-python's ``design/chunk-grid.md``).

``golden/zarr_python`` (zarr-python 3.1) and ``golden/tensorstore`` are raw filesystem
stores made by ``make_golden.py``; the values kvzarr must read from them are literals
here, so a format change on either side shows up as a failure rather than being
recomputed away. Rectilinear grids have no peer that writes them (zarr-python 3.1 has
none), so they are pinned by hand-written metadata documents and kvzarr's own round trip.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import MetadataError

from .conftest import assert_bit_equal, stored_keys

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture
def golden(tmp_path):
    """A scratch copy, so that nothing can change the checked-in files."""
    shutil.copytree(GOLDEN, tmp_path / "golden")
    return tmp_path / "golden"


def _open(root, name):
    return kvzarr.open_array(str(root), path=name, mode="r")


def _f64(bits):
    return np.array(bits, dtype=np.uint64).view(np.float64)


# ------------------------------------------------------------------------ zarr-python 3.1


def test_zarr_python_group(golden):
    root = kvzarr.open_group(str(golden / "zarr_python"), mode="r")
    assert dict(root.attrs) == {"written_by": "zarr-python", "note": "golden ✓"}
    assert sorted(root.keys()) == ["blosc_f64_nan", "bytes_vlen", "sharded_u16", "strings",
                                   "structured_legacy", "v2keys_i8"]


def test_zarr_python_sharded_uint16(golden):
    arr = _open(golden / "zarr_python", "sharded_u16")
    assert (arr.shape, arr.chunks, arr.shards, arr.fill_value) == ((6, 5), (2, 2), (4, 4), 7)
    assert arr.dimension_names == ("y", "x")
    expected = np.array([[65535, 3000, 6000, 9000, 12000],
                         [15000, 18000, 21000, 24000, 27000],
                         [7, 7, 36000, 39000, 42000],
                         [7, 7, 51000, 54000, 57000],
                         [7, 7, 7, 7, 7],
                         [7, 7, 7, 7, 7]], dtype=np.uint16)
    assert_bit_equal(arr[...], expected)
    assert_bit_equal(arr[3:5, 1:4], expected[3:5, 1:4])
    assert stored_keys(golden / "zarr_python" / "sharded_u16") == {"c/0/0", "c/0/1"}


def test_zarr_python_blosc_float64_nan_fill(golden):
    arr = _open(golden / "zarr_python", "blosc_f64_nan")
    nan = 0x7FF8000000000000
    expected = _f64([[0x3FF8000000000000, 0x8000000000000000, 0x7FF0000000000000],
                     [0xFFF0000000000000, 0x0000000000000001, 0x7E37E43C8800759C],
                     [0x7FF8000000000001, 0xBFF4000000000000, 0x3FB999999999999A],
                     [nan, nan, nan], [nan, nan, nan]])
    assert_bit_equal(arr[...], expected)
    assert [c.name for c in arr.codecs] == ["bytes", "blosc"]


def test_zarr_python_v2_key_encoding_int8(golden):
    arr = _open(golden / "zarr_python", "v2keys_i8")
    expected = np.array([[-128, 127, 0, 1], [2, 3, -1, -2], [5, 6, 7, 8],
                         [-1, -1, -1, -1], [-1, -1, -1, -1]], dtype=np.int8)
    assert_bit_equal(arr[...], expected)
    assert stored_keys(golden / "zarr_python" / "v2keys_i8") == {"0.0", "0.1", "1.0", "1.1"}


def test_zarr_python_strings(golden):
    arr = _open(golden / "zarr_python", "strings")
    assert arr[...].tolist() == ["", "a", "héllo", "🙂", ""]


def test_zarr_python_variable_length_bytes(golden):
    doc = json.loads((golden / "zarr_python" / "bytes_vlen" / "zarr.json").read_text())
    assert doc["data_type"] == "variable_length_bytes"  # zarr-python's own name
    assert _open(golden / "zarr_python", "bytes_vlen")[...].tolist() == [
        b"", b"\x00\x01", b"abc", b""]


def test_zarr_python_legacy_structured(golden):
    arr = _open(golden / "zarr_python", "structured_legacy")
    dt = np.dtype([("a", "<i2"), ("b", "<f4")])
    expected = np.array([(-3, 1.5), (300, -0.0), (0, 0.0)], dtype=dt)
    assert_bit_equal(arr[...], expected)


# ------------------------------------------------------------------------ TensorStore


def test_tensorstore_sharded_index_at_start(golden):
    root = golden / "tensorstore"
    arr = _open(root, "sharded_start_i32")
    expected = np.full((5, 6), -5, dtype=np.int32)
    expected[:3] = [[-9000, -8000, -7000, -6000, -5000, -4000],
                    [-3000, -2000, -1000, 0, 1000, 2000],
                    [3000, 4000, 5000, 6000, 7000, 8000]]
    assert_bit_equal(arr[...], expected)
    assert_bit_equal(arr[1:5:2, 3:6], expected[1:5:2, 3:6])
    shard = (root / "sharded_start_i32" / "c" / "0" / "0").read_bytes()
    assert struct.unpack_from("<Q", shard)[0] == 4 * 16 + 4  # first chunk right after the index


def test_tensorstore_hex_nan_fill(golden):
    arr = _open(golden / "tensorstore", "hexnan_f32")
    got = arr[...].view(np.uint32).tolist()
    # 1.5, -0.0, a signalling NaN, then the fill 0x7fc00001 as padding and missing chunk
    assert got == [0x3FC00000, 0x80000000, 0x7FA00000, 0x7FC00001, 0x7FC00001]


def test_tensorstore_transpose_big_endian_complex(golden):
    arr = _open(golden / "tensorstore", "transpose_be_c64")
    parts = np.array([[[1, 2], [-0.0, -3.5], [0, 0], [4, 0]],
                      [[5, -5], [6, 0], [-7.25, 0.5], [0, 8]],
                      [[1, -1], [1, -1], [1, -1], [1, -1]]], dtype=np.float32)
    assert_bit_equal(arr[...], parts.view(np.complex64)[..., 0])
    assert stored_keys(golden / "tensorstore" / "transpose_be_c64") == {"c.0.0", "c.0.1"}


# ------------------------------------------------------------------------ rectilinear grids


def _write_doc(root: Path, doc: dict, name: str = "r") -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "zarr.json").write_text(json.dumps(doc))


def _rect_doc(shape, chunk_shapes, dtype="uint8", codecs=None):
    return {"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
            "chunk_grid": {"name": "rectilinear",
                           "configuration": {"kind": "inline", "chunk_shapes": chunk_shapes}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": codecs or [{"name": "bytes"}]}


def _sizes(root: Path, name: str = "r") -> dict[str, int]:
    return {k: (root / name / k).stat().st_size for k in stored_keys(root / name)}


def test_rectilinear_round_trip(tmp_path):
    arr = kvzarr.create_array(str(tmp_path), name="r", shape=(13, 7), dtype="int16",
                              chunks=[[4, 4, 5], [3, 4]], compressors=None, fill_value=-1)
    data = np.arange(91, dtype=np.int16).reshape(13, 7) * 7
    arr[:, :3] = data[:, :3]
    arr[12, 5] = data[12, 5]
    doc = json.loads((tmp_path / "r" / "zarr.json").read_text())
    assert doc["chunk_grid"] == {"name": "rectilinear", "configuration": {
        "kind": "inline", "chunk_shapes": [[[4, 2], 5], [3, 4]]}}
    expected = np.full((13, 7), -1, dtype=np.int16)
    expected[:, :3] = data[:, :3]
    expected[12, 5] = data[12, 5]
    again = kvzarr.open_array(str(tmp_path), path="r", mode="r")
    assert again.write_chunk_sizes == ((4, 4, 5), (3, 4))
    assert_bit_equal(again[...], expected)
    assert_bit_equal(again[3:10:2, 2:6], expected[3:10:2, 2:6])
    # every chunk is stored at its own full size: 2 bytes x edge product
    assert _sizes(tmp_path) == {"c/0/0": 24, "c/1/0": 24, "c/2/0": 30, "c/2/1": 40}


@pytest.mark.parametrize("chunks, shape, want", [
    ([[10, 20, 30], [25, 25, 25, 25]], (60, 100), [[10, 20, 30], [[25, 4]]]),  # as zarr-python
    ([[10, 20, 30], 25], (60, 100), [[10, 20, 30], 25]),  # a bare integer stays bare
    ([[2, 2, 3, 3, 3]], (13,), [[[2, 2], [3, 3]]]),  # RLE only when it is shorter
    ([[1, 2, 1]], (4,), [[1, 2, 1]]),
])
def test_rectilinear_metadata_form(chunks, shape, want, tmp_path):
    kvzarr.create_array(str(tmp_path), name="r", shape=shape, chunks=chunks, dtype="uint8")
    doc = json.loads((tmp_path / "r" / "zarr.json").read_text())
    assert doc["chunk_grid"]["configuration"] == {"kind": "inline", "chunk_shapes": want}


def test_rectilinear_equal_edges_collapse_to_regular(tmp_path):
    kvzarr.create_array(str(tmp_path), name="r", shape=(30,), chunks=[[10, 10, 10]],
                        dtype="uint8")
    doc = json.loads((tmp_path / "r" / "zarr.json").read_text())
    assert doc["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": [10]}}


def test_rectilinear_resize_appends_one_chunk(tmp_path):
    """zarr-python 3.3: growing an explicit dimension past its edge sum appends one chunk."""
    arr = kvzarr.create_array(str(tmp_path), name="r", shape=(60, 100), dtype="uint8",
                              chunks=[[10, 20, 30], [25, 25, 25, 25]])
    arr.resize((70, 110))
    doc = json.loads((tmp_path / "r" / "zarr.json").read_text())
    assert doc["chunk_grid"]["configuration"]["chunk_shapes"] == [[10, 20, 30, 10],
                                                                  [[25, 4], 10]]


def test_rectilinear_creation_needs_edges_covering_the_extent(tmp_path):
    """Edges must reach the extent; passing it is allowed (zarr-python 3.3's creation API
    asks for an exact sum, its reader and the specification do not)."""
    with pytest.raises(MetadataError):
        kvzarr.create_array(str(tmp_path), name="r", shape=(25,), chunks=[[10, 10]],
                            dtype="uint8")
    # equal edges whose last cell overlaps the extent are the regular grid
    kvzarr.create_array(str(tmp_path), name="u", shape=(25,), chunks=[[10, 10, 10]],
                        dtype="uint8")
    doc = json.loads((tmp_path / "u" / "zarr.json").read_text())
    assert doc["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": [10]}}


def test_edges_past_the_extent_store_what_a_regular_grid_reader_reads(tmp_path):
    """``[[4, 4, 4]]`` over 6 stores exactly what zarr-python 3.3 stores for it (keys
    ``c/0`` and ``c/1`` only, each 4 elements, the second padded with the fill), and that
    is what the regular grid of 4 stores too: zarr-python 3.1, which has no rectilinear
    grid, reads kvzarr's chunks through that regular view bit for bit."""
    zarr = pytest.importorskip("zarr")
    arr = kvzarr.create_array(str(tmp_path), name="r", shape=(6,), chunks=[[4, 4, 4]],
                              dtype="int16", fill_value=-3, compressors=None)
    data = np.array([1, -2, 3, -4, 5, -6], dtype=np.int16)
    arr[...] = data
    assert _sizes(tmp_path) == {"c/0": 8, "c/1": 8}
    assert (tmp_path / "r" / "c" / "1").read_bytes() == np.array(
        [5, -6, -3, -3], dtype="<i2").tobytes()
    doc = json.loads((tmp_path / "r" / "zarr.json").read_text())
    doc["chunk_grid"] = {"name": "regular", "configuration": {"chunk_shape": [4]}}
    (tmp_path / "r" / "zarr.json").write_text(json.dumps(doc))
    assert_bit_equal(zarr.open_array(str(tmp_path / "r"), mode="r")[...], data)
    # and an array whose edges collapse to that regular grid is read by zarr-python as is
    kvzarr.create_array(str(tmp_path), name="u", shape=(6,), chunks=[[4, 4]],
                        dtype="int16", fill_value=-3)[...] = data
    assert_bit_equal(zarr.open_array(str(tmp_path / "u"), mode="r")[...], data)


def test_spec_example_1_every_form(tmp_path):
    _write_doc(tmp_path, _rect_doc([7, 9, 8, 10, 5],
                                   [3, [2, 4, 3], [[4, 2]], [[2, 3], 4], [2, 2, 2, 2]]))
    arr = kvzarr.open_array(str(tmp_path), path="r", mode="r+")
    assert arr.cdata_shape == (3, 3, 2, 4, 3) and arr.nchunks == 216
    assert arr.write_chunk_sizes == ((3, 3, 1), (2, 4, 3), (4, 4), (2, 2, 2, 4), (2, 2, 1))
    data = (np.arange(7 * 9 * 8 * 10 * 5) % 251 + 1).astype(np.uint8).reshape(7, 9, 8, 10, 5)
    arr[...] = data
    sizes = _sizes(tmp_path)
    assert len(sizes) == 216
    assert sizes["c/2/2/1/3/2"] == 3 * 3 * 4 * 4 * 2  # 288 bytes, 1x3x4x4x1 of them valid
    assert sizes["c/0/0/0/0/0"] == 3 * 2 * 4 * 2 * 2
    assert_bit_equal(kvzarr.open_array(str(tmp_path), path="r", mode="r")[...], data)


def test_spec_example_2_calendar(tmp_path):
    months = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    _write_doc(tmp_path, _rect_doc(
        [365], [[31, 28, 31, 30, 31, 30, [31, 2], 30, 31, 30, 31]], "uint16",
        [{"name": "bytes", "configuration": {"endian": "little"}}]))
    # March (chunk 2) written by hand: day-of-year 59..89
    (tmp_path / "r" / "c").mkdir()
    (tmp_path / "r" / "c" / "2").write_bytes(np.arange(59, 90, dtype="<u2").tobytes())
    arr = kvzarr.open_array(str(tmp_path), path="r", mode="r+")
    assert arr.write_chunk_sizes == (tuple(months),)
    got = arr[...]
    assert got[59:90].tolist() == list(range(59, 90))
    assert not got[:59].any() and not got[90:].any()
    arr[...] = np.arange(365, dtype=np.uint16)
    assert _sizes(tmp_path) == {f"c/{i}": 2 * m for i, m in enumerate(months)}


def test_spec_example_3_trimmed_last_chunk(tmp_path):
    _write_doc(tmp_path, _rect_doc([1000, 1000], [[[64, 15], 40], [[32, 31], 8]]))
    arr = kvzarr.open_array(str(tmp_path), path="r", mode="r+")
    assert arr.cdata_shape == (16, 32)
    arr[960:, 992:] = 5
    assert _sizes(tmp_path) == {"c/15/31": 40 * 8}  # no padding at all
    assert int(arr[950:, 990:].sum()) == 5 * 40 * 8


def test_spec_example_4_overflowing_last_edge(tmp_path):
    _write_doc(tmp_path, _rect_doc([16], [[[5, 3], 2]]))
    (tmp_path / "r" / "c").mkdir()
    (tmp_path / "r" / "c" / "3").write_bytes(bytes([200, 201]))  # codec size 2, 1 valid
    arr = kvzarr.open_array(str(tmp_path), path="r", mode="r")
    assert arr.write_chunk_sizes == ((5, 5, 5, 1),)
    assert arr[...].tolist() == [0] * 15 + [200]
    _write_doc(tmp_path, _rect_doc([18], [[[5, 3], 2]]), name="bad")  # sum 17 < 18
    with pytest.raises(MetadataError):
        kvzarr.open_array(str(tmp_path), path="bad", mode="r")


def test_spec_example_5_zero_extent(tmp_path):
    _write_doc(tmp_path, _rect_doc([0, 4], [5, [[2, 2]]]))
    arr = kvzarr.open_array(str(tmp_path), path="r", mode="r")
    assert arr.nchunks == 0
    assert arr[...].shape == (0, 4)


def test_spec_example_6_rectilinear_shards(tmp_path):
    sharding = {"name": "sharding_indexed", "configuration": {
        "chunk_shape": [5], "codecs": [{"name": "bytes"}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}],
        "index_location": "end"}}
    _write_doc(tmp_path, _rect_doc([35], [[10, 20, 5]], codecs=[sharding]))
    arr = kvzarr.open_array(str(tmp_path), path="r", mode="r+")
    data = np.arange(1, 36, dtype=np.uint8)
    arr[...] = data
    # 2, 4, 1 inner chunks: index 36, 68, 20 bytes
    assert _sizes(tmp_path) == {"c/0": 46, "c/1": 88, "c/2": 25}
    assert_bit_equal(kvzarr.open_array(str(tmp_path), path="r", mode="r")[...], data)
    bad = json.loads(json.dumps(_rect_doc([22], [[10, 12]], codecs=[sharding])))
    _write_doc(tmp_path, bad, name="bad")  # 12 is not a multiple of the inner 5
    with pytest.raises(MetadataError):
        kvzarr.open_array(str(tmp_path), path="bad", mode="r")


@pytest.mark.parametrize("shape, grid_config", [
    ([5], {"kind": "inline", "chunk_shapes": [[0, 5]]}),          # edge 0
    ([6], {"kind": "inline", "chunk_shapes": [[[2, 0]]]}),        # RLE count 0
    ([6], {"kind": "inline", "chunk_shapes": [[[2, 3, 1]]]}),     # pair with 3 items
    ([6], {"chunk_shapes": [[2, 4]]}),                             # kind missing
    ([6], {"kind": "reference", "chunk_shapes": [[2, 4]]}),       # unknown kind
    ([6, 2], {"kind": "inline", "chunk_shapes": [[2, 4]]}),       # one spec for 2 dims
    ([6], {"kind": "inline", "chunk_shapes": [[]]}),              # no edges: no cover
], ids=["edge-0", "rle-count-0", "rle-3-items", "no-kind", "kind-reference",
        "ndim-mismatch", "empty-edges"])
def test_invalid_rectilinear_documents(shape, grid_config, tmp_path):
    doc = _rect_doc(shape, None)
    doc["chunk_grid"]["configuration"] = grid_config
    _write_doc(tmp_path, doc)
    with pytest.raises(MetadataError):
        kvzarr.open_array(str(tmp_path), path="r", mode="r")
