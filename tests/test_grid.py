"""ChunkGrid: regular and rectilinear forms, sizes, lookups, resize (zarr-python's
``design/chunk-grid.md``; zarr-extensions ``chunk-grids/rectilinear``)."""

import numpy as np
import pytest

from kvzarr.errors import MetadataError, UnsupportedExtensionError
from kvzarr.grid import (ChunkGrid, FixedDimension, VaryingDimension, chunk_grid_to_json,
                         compress_rle, expand_rle, parse_chunk_grid)


def rect(specs):
    return {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": specs}}


def test_regular_grid_shape_and_sizes():
    grid, name = parse_chunk_grid({"name": "regular", "configuration": {"chunk_shape": [5, 20, 400]}},
                                  (10, 200, 3000))
    assert name == "regular"
    assert grid.grid_shape == (2, 10, 8)
    assert grid.is_regular and grid.chunk_shape == (5, 20, 400)
    spec = grid[1, 7, 7]
    assert spec.slices == (slice(5, 10), slice(140, 160), slice(2800, 3000))
    assert spec.codec_shape == (5, 20, 400) and spec.shape == (5, 20, 200) and spec.is_boundary
    assert grid[2, 0, 0] is None and grid[-1, 0, 0] is None


def test_spec_example_every_form():
    # every dimension-spec form of the rectilinear grid in one array
    grid, name = parse_chunk_grid(rect([3, [2, 4, 3], [[4, 2]], [[2, 3], 4], [2, 2, 2, 2]]),
                                  (7, 9, 8, 10, 5))
    assert name == "rectilinear"
    assert grid.grid_shape == (3, 3, 2, 4, 3)
    assert grid.chunk_sizes == ((3, 3, 1), (2, 4, 3), (4, 4), (2, 2, 2, 4), (2, 2, 1))
    spec = grid[2, 2, 1, 3, 2]
    assert spec.codec_shape == (3, 3, 4, 4, 2)
    assert spec.shape == (1, 3, 4, 4, 1)
    assert not grid.is_regular
    with pytest.raises(NotImplementedError):
        grid.chunk_shape


def test_calendar_axis_and_trimmed_last_chunk():
    grid, _ = parse_chunk_grid(rect([[31, 28, 31, 30, 31, 30, [31, 2], 30, 31, 30, 31]]), (365,))
    assert grid.chunk_sizes == ((31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31),)
    grid, _ = parse_chunk_grid(rect([[[64, 15], 40], [[32, 31], 8]]), (1000, 1000))
    assert grid.grid_shape == (16, 32)
    assert grid[15, 31].shape == grid[15, 31].codec_shape == (40, 8)


def test_overflowing_last_edge_and_zero_extent():
    grid, _ = parse_chunk_grid(rect([[[5, 3], 2]]), (16,))
    assert grid.grid_shape == (4,)
    assert grid[3].codec_shape == (2,) and grid[3].shape == (1,)
    with pytest.raises(MetadataError):
        parse_chunk_grid(rect([[[5, 3], 2]]), (18,))  # edges sum to 17 < 18
    grid, _ = parse_chunk_grid(rect([5, [[2, 2]]]), (0, 4))
    assert grid.grid_shape == (0, 2) and grid.nchunks == 0


def test_cells_wholly_outside_are_not_addressed():
    grid, _ = parse_chunk_grid(rect([[4, 4, 4]]), (6,))
    assert grid.grid_shape == (2,)
    assert grid[2] is None


@pytest.mark.parametrize("bad", [
    rect([[0, 5]]), rect([[[2, 0]]]), rect([[[2, 3, 1]]]), rect([[2.5]]),
    {"name": "rectilinear", "configuration": {"chunk_shapes": [[2]]}},
    {"name": "rectilinear", "configuration": {"kind": "reference", "chunk_shapes": [[2]]}},
    rect([[2], [2]]),
    {"name": "regular", "configuration": {"chunk_shape": [0]}},
    {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
    {"name": "regular", "configuration": {"chunk_shape": "2"}},
    {"name": "regular", "configuration": {"chunk_shape": [True]}},
    {"name": "regular", "must_understand": False, "configuration": {"chunk_shape": [2]}},
])
def test_invalid_grids(bad):
    with pytest.raises(MetadataError):
        parse_chunk_grid(bad, (4,))


def test_unknown_grid():
    with pytest.raises(UnsupportedExtensionError):
        parse_chunk_grid({"name": "zarrs.regular_bounded", "configuration": {}}, (4,))


def test_rle_round_trip_and_compression_rule():
    assert expand_rle([[10, 3], 5]) == [10, 10, 10, 5]
    assert compress_rle([10, 10, 10, 5]) == [[10, 3], 5]
    assert compress_rle([10, 20, 30]) == [10, 20, 30]
    assert compress_rle([25, 25, 25, 25]) == [[25, 4]]
    assert compress_rle([4, 4, 5]) == [[4, 2], 5]


def test_serialization_round_trip():
    grid = ChunkGrid.from_sizes((60, 100, 7), [[10, 20, 30], [25, 25, 25, 25], 3])
    doc = chunk_grid_to_json(grid, "rectilinear")
    # explicit edges stay explicit inside a rectilinear grid, run-length compressed
    assert doc["configuration"]["chunk_shapes"] == [[10, 20, 30], [[25, 4]], 3]
    again, _ = parse_chunk_grid(doc, (60, 100, 7))
    assert again.chunk_sizes == grid.chunk_sizes
    assert ChunkGrid.from_sizes((60,), [[10, 20, 30]]).dimensions[0] == VaryingDimension(
        [10, 20, 30], 60)


def test_uniform_nested_lists_collapse_to_a_regular_grid():
    grid = ChunkGrid.from_sizes((30, 8), [[10, 10, 10], [4, 4]])
    assert grid.is_regular and grid.chunk_shape == (10, 4)


def test_resize_regular_stays_regular_rectilinear_appends():
    grid = ChunkGrid.from_sizes((60, 10), [[10, 20, 30], 4])
    grown = grid.with_shape((70, 13))
    assert grown.dimensions[0].edges == (10, 20, 30, 10)
    assert grown.dimensions[1] == FixedDimension(4, 13)
    shrunk = grid.with_shape((25, 3))
    assert shrunk.dimensions[0].edges == (10, 20, 30)
    assert shrunk.grid_shape == (2, 1)
    assert shrunk.chunk_sizes == ((10, 15), (3,))


def test_vectorised_lookup_matches_scalar():
    dim = VaryingDimension([3, 1, 4, 1, 5, 9], 23)
    idx = np.arange(23)
    assert list(dim.indices_to_chunks(idx)) == [dim.index_to_chunk(int(i)) for i in idx]
    fixed = FixedDimension(4, 23)
    assert list(fixed.indices_to_chunks(idx)) == [i // 4 for i in range(23)]
    assert list(dim.offsets(np.arange(6))) == [dim.chunk_offset(i) for i in range(6)]


def test_zero_dimensional_grid_has_one_chunk():
    grid = ChunkGrid(())
    assert grid.grid_shape == () and grid.nchunks == 1
    assert grid[()].codec_shape == ()
