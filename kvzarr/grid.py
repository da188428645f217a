"""The chunk grid: one class for regular and rectilinear grids (zarr-python's
``design/chunk-grid.md``, "Unified Chunk Grid"; core spec "regular" grid; zarr-extensions
``chunk-grids/rectilinear``,
https://github.com/zarr-developers/zarr-extensions/tree/main/chunk-grids/rectilinear).

A :class:`ChunkGrid` is bound to the array shape: each dimension is a
:class:`FixedDimension` (uniform chunk size, boundary chunk padded) or a
:class:`VaryingDimension` (explicit edge lengths, prefix sums for lookup). Both answer
every question about a chunk (offset, codec size, data size) without outside parameters.

The grid does not know its JSON name. :func:`parse_chunk_grid` turns either metadata form
into a grid plus the name it came from; :func:`chunk_grid_to_json` writes a grid in a
given form (rectilinear edges run-length compressed, as zarr-python writes them).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .errors import MetadataError

#: the largest extent, chunk size or edge sum a dimension may have: indices are int64
#: in numpy (and a Zarr array's shape is a list of uint64; past this numpy cannot index)
MAX_INDEX = 2**63 - 1


def _numpy_max_ndim() -> int:
    """numpy's limit on dimensions (``NPY_MAXDIMS``: 64 since numpy 2, 32 before)."""
    for n in (64, 32):
        try:
            np.empty((1,) * n, dtype=np.uint8)
            return n
        except ValueError:
            continue
    return 32


#: the most dimensions an array may have: numpy cannot make an array of more
MAX_NDIM = _numpy_max_ndim()


@dataclass(frozen=True)
class FixedDimension:
    """Chunks of one ``size``; the last one overhangs ``extent`` and is padded."""
    size: int
    extent: int

    def __post_init__(self) -> None:
        if not 1 <= self.size <= MAX_INDEX:
            raise MetadataError(f"chunk size must be in 1..{MAX_INDEX}, got {self.size}",
                                field="chunk_shape")
        if not 0 <= self.extent <= MAX_INDEX:
            raise MetadataError(f"array extent must be in 0..{MAX_INDEX}, got {self.extent}",
                                field="shape")

    @property
    def nchunks(self) -> int:
        return -(-self.extent // self.size)

    ngridcells = nchunks

    def index_to_chunk(self, idx: int) -> int:
        return idx // self.size

    def chunk_offset(self, ix: int) -> int:
        self._check(ix)
        return ix * self.size

    def chunk_size(self, ix: int) -> int:
        self._check(ix)
        return self.size

    def data_size(self, ix: int) -> int:
        self._check(ix)
        return min(self.size, self.extent - ix * self.size)

    def _check(self, ix: int) -> None:
        if not 0 <= ix < self.nchunks:
            raise IndexError(f"chunk index {ix} out of range for {self.nchunks} chunks")

    @property
    def unique_edge_lengths(self) -> tuple[int, ...]:
        return (self.size,)

    def indices_to_chunks(self, indices: np.ndarray) -> np.ndarray:
        return indices // self.size

    def offsets(self, chunk_ixs: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`chunk_offset` (no bounds check)."""
        return chunk_ixs * self.size

    def data_sizes(self) -> tuple[int, ...]:
        n = self.nchunks
        if n == 0:
            return ()
        return (self.size,) * (n - 1) + (self.extent - (n - 1) * self.size,)

    def with_extent(self, new_extent: int) -> "FixedDimension":
        return FixedDimension(self.size, new_extent)

    resize = with_extent


@dataclass(frozen=True, init=False)
class VaryingDimension:
    """Explicit chunk edges; ``sum(edges) >= extent`` (trailing cells may lie outside).

    The edges are kept as runs ``(edge, count)``, as the metadata writes them
    (``[value, count]``), never expanded: ``[[1, 2**32]]`` is one run, not four billion
    integers. Index <-> chunk lookups are a bisection over the run boundaries and
    arithmetic inside a run, so every question costs ``O(log runs)``."""
    #: (edge length, number of chunks) per run; adjacent runs have different edges
    runs: tuple[tuple[int, int], ...]
    extent: int

    def __init__(self, edges: Sequence[int], extent: int) -> None:
        runs: list[list[int]] = []
        for e in edges:
            e = int(e)
            if runs and runs[-1][0] == e:
                runs[-1][1] += 1
            else:
                runs.append([e, 1])
        self._setup(runs, extent)

    @classmethod
    def from_runs(cls, runs: Sequence[Sequence[int]], extent: int) -> "VaryingDimension":
        """The dimension of ``runs`` (``(edge, count)`` pairs) over ``extent``."""
        dim = cls.__new__(cls)
        dim._setup(runs, extent)
        return dim

    def _setup(self, runs: Sequence[Sequence[int]], extent: int) -> None:
        if not runs:
            raise MetadataError("a rectilinear dimension needs at least one edge",
                                field="chunk_shapes")
        merged: list[tuple[int, int]] = []
        for edge, count in runs:
            if edge < 1:
                raise MetadataError(f"chunk edge lengths must be >= 1, got {edge}",
                                    field="chunk_shapes")
            if count < 1:
                raise MetadataError(f"RLE repeat count must be >= 1, got {count}",
                                    field="chunk_shapes")
            if merged and merged[-1][0] == edge:
                merged[-1] = (edge, merged[-1][1] + count)
            else:
                merged.append((edge, count))
        chunk0, off0 = [0], [0]      # first chunk and first element of each run, and the ends
        for edge, count in merged:
            chunk0.append(chunk0[-1] + count)
            off0.append(off0[-1] + edge * count)
        if off0[-1] > MAX_INDEX:
            raise MetadataError(f"chunk edges sum to {off0[-1]}, more than the largest "
                                f"index a dimension can have ({MAX_INDEX})",
                                field="chunk_shapes")
        if extent < 0 or off0[-1] < extent:
            raise MetadataError(
                f"chunk edges sum to {off0[-1]}, less than the extent {extent}",
                field="chunk_shapes")
        object.__setattr__(self, "runs", tuple(merged))
        object.__setattr__(self, "extent", extent)
        object.__setattr__(self, "_edge", tuple(e for e, _ in merged))
        object.__setattr__(self, "_chunk0", tuple(chunk0))
        object.__setattr__(self, "_off0", tuple(off0))
        # the same without the end sentinels, for vectorised lookups
        object.__setattr__(self, "_edge_np", np.asarray(self._edge, dtype=np.int64))
        object.__setattr__(self, "_chunk0_np", np.asarray(chunk0[:-1], dtype=np.int64))
        object.__setattr__(self, "_off0_np", np.asarray(off0[:-1], dtype=np.int64))

    @property
    def edges(self) -> tuple[int, ...]:
        """Every edge length, expanded (``ngridcells`` integers: for small grids)."""
        return tuple(itertools.chain.from_iterable(
            itertools.repeat(e, n) for e, n in self.runs))

    @property
    def total(self) -> int:
        """The sum of every edge length (>= extent)."""
        return self._off0[-1]

    @property
    def nchunks(self) -> int:
        if self.extent == 0:
            return 0
        return self.index_to_chunk(self.extent - 1) + 1

    @property
    def ngridcells(self) -> int:
        return self._chunk0[-1]

    def _run_of_index(self, idx: int) -> int:
        return bisect.bisect_right(self._off0, idx, 0, len(self._edge)) - 1

    def _run_of_chunk(self, ix: int) -> int:
        return bisect.bisect_right(self._chunk0, ix, 0, len(self._edge)) - 1

    def index_to_chunk(self, idx: int) -> int:
        if idx < 0:
            return 0
        if idx >= self.total:
            return self.ngridcells
        r = self._run_of_index(idx)
        return self._chunk0[r] + (idx - self._off0[r]) // self._edge[r]

    def chunk_offset(self, ix: int) -> int:
        self._check(ix)
        r = self._run_of_chunk(ix)
        return self._off0[r] + (ix - self._chunk0[r]) * self._edge[r]

    def chunk_size(self, ix: int) -> int:
        self._check(ix)
        return self._edge[self._run_of_chunk(ix)]

    def data_size(self, ix: int) -> int:
        off = self.chunk_offset(ix)
        return min(self._edge[self._run_of_chunk(ix)], self.extent - off)

    def _check(self, ix: int) -> None:
        if not 0 <= ix < self.nchunks:
            raise IndexError(f"chunk index {ix} out of range for {self.nchunks} chunks")

    @property
    def unique_edge_lengths(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(self._edge))

    def indices_to_chunks(self, indices: np.ndarray) -> np.ndarray:
        r = np.searchsorted(self._off0_np, indices, side="right") - 1
        return self._chunk0_np[r] + (indices - self._off0_np[r]) // self._edge_np[r]

    def offsets(self, chunk_ixs: np.ndarray) -> np.ndarray:
        r = np.searchsorted(self._chunk0_np, chunk_ixs, side="right") - 1
        return self._off0_np[r] + (chunk_ixs - self._chunk0_np[r]) * self._edge_np[r]

    def data_sizes(self) -> tuple[int, ...]:
        return tuple(self.data_size(i) for i in range(self.nchunks))

    def with_extent(self, new_extent: int) -> "VaryingDimension":
        return VaryingDimension.from_runs(self.runs, new_extent)

    def resize(self, new_extent: int) -> "VaryingDimension":
        """Grow past the edges by appending one chunk for the gap; otherwise keep every
        edge and re-bind the extent (zarr-python 3.3 behaviour: ``VaryingDimension.resize`` in
        its ``design/chunk-grid.md``)."""
        total = self.total
        if new_extent > total:
            return VaryingDimension.from_runs(self.runs + ((new_extent - total, 1),),
                                              new_extent)
        return VaryingDimension.from_runs(self.runs, new_extent)


Dimension = Union[FixedDimension, VaryingDimension]


@dataclass(frozen=True)
class ChunkSpec:
    """One chunk: its valid region in array coordinates and the shape the codecs see."""
    slices: tuple[slice, ...]
    codec_shape: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(s.stop - s.start for s in self.slices)

    @property
    def is_boundary(self) -> bool:
        return self.shape != self.codec_shape


@dataclass(frozen=True)
class ChunkGrid:
    """The chunks of one array: a tuple of per-dimension grids."""
    dimensions: tuple[Dimension, ...]

    @classmethod
    def from_sizes(cls, array_shape: Sequence[int],
                   chunk_sizes: Sequence[int | Sequence[int]]) -> "ChunkGrid":
        """``chunk_sizes`` per dimension: an int (regular) or a list of edges."""
        if len(chunk_sizes) != len(array_shape):
            raise MetadataError(
                f"{len(chunk_sizes)} chunk sizes for an array of {len(array_shape)} dimensions",
                field="chunks")
        def uniform(size: Any, extent: int) -> bool:
            # equal edges that cover the extent with no spare cell: a regular dimension
            edges = [int(e) for e in size]
            return bool(edges) and len(set(edges)) == 1 and \
                sum(edges) - edges[0] < extent <= sum(edges)

        # Explicit edge lists collapse to a regular grid only when every dimension is
        # uniform (zarr-python 3.3); inside a rectilinear grid they stay explicit, so a
        # later resize appends to them.
        collapse = all(isinstance(size, (int, np.integer)) or uniform(size, int(extent))
                       for extent, size in zip(array_shape, chunk_sizes))
        dims: list[Dimension] = []
        for extent, size in zip(array_shape, chunk_sizes):
            if isinstance(size, (int, np.integer)):
                dims.append(FixedDimension(int(size), int(extent)))
            elif collapse:
                dims.append(FixedDimension(int(size[0]), int(extent)))
            else:
                dims.append(VaryingDimension([int(e) for e in size], int(extent)))
        return cls(tuple(dims))

    @property
    def ndim(self) -> int:
        return len(self.dimensions)

    @property
    def shape(self) -> tuple[int, ...]:
        """The array shape the grid is bound to."""
        return tuple(d.extent for d in self.dimensions)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return tuple(d.nchunks for d in self.dimensions)

    @property
    def nchunks(self) -> int:
        return math.prod(self.grid_shape)

    @property
    def is_regular(self) -> bool:
        return all(isinstance(d, FixedDimension) for d in self.dimensions)

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The chunk shape of a regular grid."""
        if not self.is_regular:
            raise NotImplementedError(
                "a rectilinear grid has no single chunk shape; use chunk_sizes")
        return tuple(d.size for d in self.dimensions)  # type: ignore[union-attr]

    @property
    def chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Data sizes of the chunks along each dimension (dask convention)."""
        return tuple(d.data_sizes() for d in self.dimensions)

    def __getitem__(self, coords: int | Sequence[int]) -> ChunkSpec | None:
        if isinstance(coords, (int, np.integer)):
            coords = (int(coords),)
        if len(coords) != self.ndim:
            return None
        slices, codec = [], []
        for dim, ix in zip(self.dimensions, coords):
            if not 0 <= ix < dim.nchunks:
                return None
            off = dim.chunk_offset(ix)
            slices.append(slice(off, off + dim.data_size(ix)))
            codec.append(dim.chunk_size(ix))
        return ChunkSpec(tuple(slices), tuple(codec))

    def codec_shape(self, coords: Sequence[int]) -> tuple[int, ...]:
        return tuple(d.chunk_size(i) for d, i in zip(self.dimensions, coords))

    def __iter__(self) -> Iterator[ChunkSpec]:
        for coords in self.all_chunk_coords():
            yield self[coords]  # type: ignore[misc]

    def all_chunk_coords(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(n) for n in self.grid_shape))

    def with_shape(self, new_shape: Sequence[int]) -> "ChunkGrid":
        """The grid after ``resize``: regular stays regular, rectilinear appends."""
        if len(new_shape) != self.ndim:
            raise MetadataError(f"new shape {tuple(new_shape)} has {len(new_shape)} "
                                f"dimensions, the array has {self.ndim}", field="shape")
        return ChunkGrid(tuple(d.resize(int(n)) for d, n in zip(self.dimensions, new_shape)))


# --- metadata forms -------------------------------------------------------------------

def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def parse_runs(spec: Sequence[Any]) -> list[tuple[int, int]]:
    """A rectilinear explicit dim spec (ints and ``[value, count]`` runs) as
    ``(edge, count)`` runs, never expanded (a count is a number read, not data)."""
    out: list[tuple[int, int]] = []
    for item in spec:
        if _is_int(item):
            value, count = item, 1
        elif (isinstance(item, list) and len(item) == 2 and all(_is_int(v) for v in item)):
            value, count = item
        else:
            raise MetadataError(
                f"a rectilinear edge is an integer or a [value, count] pair, got {item!r}",
                field="chunk_shapes")
        if not 1 <= value <= MAX_INDEX:
            raise MetadataError(f"chunk edge length must be in 1..{MAX_INDEX}, got {value}",
                                field="chunk_shapes")
        if not 1 <= count <= MAX_INDEX:
            raise MetadataError(f"RLE repeat count must be in 1..{MAX_INDEX}, got {count}",
                                field="chunk_shapes")
        out.append((value, count))
    return out


def expand_rle(spec: Sequence[Any]) -> list[int]:
    """Expand a rectilinear explicit dim spec: ints and ``[value, count]`` runs (for
    small specs only: the grid itself keeps runs, :func:`parse_runs`)."""
    return [value for value, count in parse_runs(spec) for _ in range(count)]


def compress_rle(edges: Sequence[int]) -> list[Any]:
    """Runs of length > 1 become ``[value, count]``; kept only when shorter (zp 3.3)."""
    runs: list[Any] = []
    for value, group in itertools.groupby(edges):
        n = len(list(group))
        runs.append([value, n] if n > 1 else value)
    return runs if len(runs) < len(edges) else list(edges)


def parse_chunk_grid(doc: Any, shape: Sequence[int]) -> tuple[ChunkGrid, str]:
    """Parse the ``chunk_grid`` member of array metadata; returns the grid and its name."""
    from .metadata.extensions import split_extension  # local: metadata imports grid

    name, config = split_extension(doc, "chunk_grid", allow_ignore=False)
    ndim = len(shape)
    if name == "regular":
        chunk_shape = config.get("chunk_shape")
        if (not isinstance(chunk_shape, list) or len(chunk_shape) != ndim
                or not all(_is_int(c) for c in chunk_shape)):
            raise MetadataError(
                f"regular chunk_shape must be a list of {ndim} integers, got {chunk_shape!r}",
                field="chunk_grid.configuration.chunk_shape")
        if any(not 1 <= c <= MAX_INDEX for c in chunk_shape):
            raise MetadataError(f"chunk sizes must be in 1..{MAX_INDEX}, got {chunk_shape}",
                                field="chunk_grid.configuration.chunk_shape")
        return ChunkGrid(tuple(FixedDimension(c, n) for c, n in zip(chunk_shape, shape))), name
    if name == "rectilinear":
        kind = config.get("kind")
        if kind != "inline":
            raise MetadataError(f"rectilinear kind must be 'inline', got {kind!r}",
                                field="chunk_grid.configuration.kind")
        specs = config.get("chunk_shapes")
        if not isinstance(specs, list) or len(specs) != ndim:
            raise MetadataError(
                f"chunk_shapes must be a list with one entry per dimension ({ndim})",
                field="chunk_grid.configuration.chunk_shapes")
        dims: list[Dimension] = []
        for spec, extent in zip(specs, shape):
            if _is_int(spec):
                if not 1 <= spec <= MAX_INDEX:
                    raise MetadataError(f"chunk edge length must be in 1..{MAX_INDEX}, "
                                        f"got {spec}",
                                        field="chunk_grid.configuration.chunk_shapes")
                dims.append(FixedDimension(spec, extent))
            elif isinstance(spec, list):
                dims.append(VaryingDimension.from_runs(parse_runs(spec), extent))
            else:
                raise MetadataError(f"invalid rectilinear dim spec {spec!r}",
                                    field="chunk_grid.configuration.chunk_shapes")
        return ChunkGrid(tuple(dims)), name
    from .errors import UnsupportedExtensionError
    raise UnsupportedExtensionError(f"unsupported chunk grid {name!r}", field="chunk_grid")


def chunk_grid_to_json(grid: ChunkGrid, name: str) -> dict[str, Any]:
    """Serialize ``grid`` as ``name`` ("regular" or "rectilinear")."""
    if name == "regular":
        return {"name": "regular", "configuration": {"chunk_shape": list(grid.chunk_shape)}}
    specs: list[Any] = []
    for d in grid.dimensions:
        if isinstance(d, FixedDimension):
            specs.append(d.size)
        else:
            # runs of length > 1 as [value, count], single edges as plain integers
            # (compress_rle's form, without expanding the edges)
            specs.append([[e, n] if n > 1 else e for e, n in d.runs])
    return {"name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": specs}}
