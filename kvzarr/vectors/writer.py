"""Writing a vector dataset: the root's metadata, the levels' arrays and cells, all
gathered as key-value pairs and stored in the caller's one write transaction.

A write where a dataset already is replaces it: its levels are erased (coarser levels
were built from the old level 0 and would no longer match it), its axes and any other
root attributes are kept, and its chunk shape, bin shape and bounds are the defaults
for the arguments the write leaves out. On a transactional store the replacement is
atomic; on a directory it is not (nothing there is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import NodeTypeError, VectorDataError
from ..metadata.v3 import encode_json, load_json
from . import fragments, links, objects
from .cells import CellArray, array_document
from .grid import SpatialGrid, check_bins_divide, chunk_name, column_extent
from .layout import (RootInfo, axes_for, level_attributes, parse_root, root_attributes)
from .target import Target
from .vertex_attributes import Column, prepare

OUT_OF_BOUNDS = ("raise", "ignore", "expand")


def check_positions(positions: Any, dtype: Any) -> np.ndarray:
    """``(N, D)`` finite numbers, cast to ``dtype`` (little-endian)."""
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise VectorDataError(f"dtype {dtype!r} is not a data type", field="dtype") from None
    if target.kind not in "fiu":
        raise VectorDataError(f"positions are stored as numbers, not {target}", field="dtype")
    arr = np.asarray(positions)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise VectorDataError(f"positions must be (N, D) with D >= 1, got shape {arr.shape}",
                              field="positions")
    if arr.dtype.kind not in "fiu":
        raise VectorDataError(f"positions must be numbers, got {arr.dtype}",
                              field="positions")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise VectorDataError("positions hold NaN or infinity", field="positions")
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(target.newbyteorder("<"))
    if out.dtype.kind == "f" and not np.all(np.isfinite(out)):
        raise VectorDataError(f"positions overflow {target}", field="positions")
    return out


@dataclass
class LevelLayout:
    grid: SpatialGrid
    chunk_shape: list[Any]
    #: the bin shape as given (None: one bin per chunk, and no ``base_bin_shape``)
    bin_shape: list[Any] | None
    bounds: tuple[np.ndarray, np.ndarray]
    #: rows kept under ``out_of_bounds="ignore"`` (None: all)
    keep: np.ndarray | None


class DatasetWriter:
    def __init__(self, target: Target, ndim: int, *, axes: Any = None) -> None:
        self.target = target
        self.ndim = ndim
        doc = target.read_json("zarr.json")
        self.existing: RootInfo | None = None
        self.keep_attrs: dict[str, Any] = {}
        if doc is not None:
            if doc.get("node_type") != "group":
                raise NodeTypeError("an array is where the vector dataset would go",
                                    key=target.key("zarr.json"))
            attrs = doc.get("attributes") or {}
            if "zarr_vectors" in attrs:
                self.existing = parse_root(attrs, target.key("zarr.json"))
                if self.existing.ndim != ndim:
                    raise VectorDataError(f"the dataset has {self.existing.ndim} axes, the "
                                          f"data {ndim}", field="positions")
            self.keep_attrs = {k: v for k, v in attrs.items()
                               if k not in ("zarr_vectors", "multiscales", "ome")}
        if axes is None and self.existing is not None:
            self.axes = self.existing.axes
        else:
            self.axes = axes_for(ndim, axes)
        self.geometry_type = "point_cloud"
        self.links_convention = "implicit_sequential"
        self._layout: LevelLayout | None = None

    def layout(self, pos: np.ndarray, *, chunk_shape: Any, bin_shape: Any, bounds: Any,
               out_of_bounds: str, geometry_type: str, links_convention: str,
               given: np.ndarray | None = None) -> LevelLayout:
        """Chunks, bins and bounds for level 0 of ``pos``, and the rows to keep. The
        bounds are inferred from and checked against ``given``, the positions as the
        caller gave them, when that is not ``pos`` (zarr-vectors' polyline, mesh and
        graph writers do so, its point writer on the stored values)."""
        pos = pos if given is None else given
        if out_of_bounds not in OUT_OF_BOUNDS:
            raise VectorDataError(f"out_of_bounds must be one of {OUT_OF_BOUNDS}, got "
                                  f"{out_of_bounds!r}", field="out_of_bounds")
        self.geometry_type, self.links_convention = geometry_type, links_convention
        old = self.existing
        if bounds is not None:
            lo, hi = _bounds(bounds, self.ndim)
        elif old is not None:
            lo, hi = (np.asarray(b, dtype=np.float64) for b in old.bounds)
        elif len(pos):
            lo, hi = column_extent(pos)
        else:
            raise VectorDataError("no points and no bounds: the dataset's extent is unknown",
                                  field="bounds")
        keep = None
        if len(pos) and not _within(pos, lo, hi):
            inside = np.all((pos >= lo) & (pos <= hi), axis=1)
            if not inside.all():
                if out_of_bounds == "raise":
                    bad = pos[~inside][0].tolist()
                    raise VectorDataError(f"{int((~inside).sum())} points lie outside the "
                                          f"bounds {lo.tolist()} .. {hi.tolist()}, e.g. "
                                          f"{bad}", field="bounds",
                                          hint="out_of_bounds='expand' or 'ignore'")
                if out_of_bounds == "ignore":
                    keep = inside
                else:
                    p_lo, p_hi = column_extent(pos)
                    lo, hi = np.minimum(lo, p_lo), np.maximum(hi, p_hi)
        if chunk_shape is None:
            if old is not None:
                chunk = [_plain(c) for c in old.chunk_shape]
            else:
                side = float(np.max(hi - lo)) + abs(float(np.max(hi))) + 1.0
                chunk = [side] * self.ndim
        else:
            chunk = _shape(chunk_shape, self.ndim, "chunk_shape")
        given_bins = None
        if bin_shape is not None:
            given_bins = _shape(bin_shape, self.ndim, "bin_shape")
        elif old is not None and tuple(map(float, chunk)) == old.chunk_shape and \
                old.attributes["zarr_vectors"].get("base_bin_shape") is not None:
            given_bins = [_plain(b) for b in old.base_bin_shape]
        bins = list(chunk) if given_bins is None else given_bins
        check_bins_divide([float(c) for c in chunk], [float(b) for b in bins])
        # (a stored value narrowed past a bound taken from the given ones still gets a
        # cell: add_vertices grows the grid to every chunk it fills)
        grid = SpatialGrid.from_bounds(chunk, bins, lo, hi)
        self._layout = LevelLayout(grid, chunk, given_bins, (lo, hi), keep)
        return self._layout

    def vertex_columns(self, values: dict[str, Any] | None, n: int,
                       keep: np.ndarray | None) -> list[Column]:
        columns = prepare(values, n)
        if keep is not None:
            for c in columns:
                c.data = c.data[keep]
        return columns

    def level(self, index: int, layout: LevelLayout, *, compressor: Any = None,
              shard_shape: Any = None) -> "LevelWriter":
        return LevelWriter(self.target, index, layout, compressor, shard_shape)

    def commit(self, levels: list["LevelWriter"]) -> None:
        """Erase what the dataset held, then store the new root and levels."""
        t = self.target
        store = t.store
        items = self._ancestors()      # (may refuse: before anything is erased)
        if self.existing is not None:
            for path in self.existing.level_paths():
                if isinstance(path, str) and path and "/" not in path:
                    store.erase_prefix(t.key(f"{path}/"))
        layout = levels[0].layout
        attrs = root_attributes(
            name=t.name, chunk_shape=layout.chunk_shape, bounds=layout.bounds,
            base_bin_shape=layout.bin_shape, axes=self.axes,
            geometry_type=self.geometry_type, links_convention=self.links_convention,
            level_bins=[tuple(map(float, lv.layout.grid.bin_shape)) for lv in levels],
            keep=self.keep_attrs)
        if self.existing is not None:
            old = self.existing.attributes["zarr_vectors"]
            for member in ("crs", "format_capabilities"):
                if member in old:
                    attrs["zarr_vectors"][member] = old[member]
        t.put_json(items, "zarr.json", {"attributes": attrs, "zarr_format": 3,
                                        "node_type": "group"})
        for lv in levels:
            items += lv.finish()
        total = sum(len(v) for _, v in items)
        store.expect_writes(total)
        store.set_many(items)

    def _ancestors(self) -> list[tuple[str, bytes]]:
        """Empty groups for the parents of ``path`` that do not exist yet."""
        items: list[tuple[str, bytes]] = []
        parts = self.target.root.split("/") if self.target.root else []
        for i in range(1, len(parts)):
            key = "/".join(parts[:i]) + "/zarr.json"
            data = self.target.store.get(key)
            if data is None:
                items.append((key, encode_json({"attributes": {}, "zarr_format": 3,
                                                "node_type": "group"})))
            elif load_json(data, key).get("node_type") == "array":
                raise NodeTypeError("an ancestor of the dataset is an array", key=key)
        return items


class LevelWriter:
    """Everything one level stores, built up as key-value pairs."""

    def __init__(self, target: Target, index: int, layout: LevelLayout, compressor: Any,
                 shard_shape: Any) -> None:
        self.target = target
        self.index = index
        self.path = str(index)
        self.layout = layout
        self.compressor = compressor
        self.shard_shape = shard_shape
        self.items: list[tuple[str, bytes]] = []
        #: codecs after the serializer of object attributes and groups: zarr-vectors
        #: stores them with the writer's compressor where it writes them with the cells
        #: (polylines, meshes, graphs) and with zstd where it writes them after (points)
        self.object_compression = objects.DEFAULT_COMPRESSION
        self.arrays_present = ["vertices"]
        self.vertex_count = 0
        self.level_extra: dict[str, Any] = {}

    def _cell_array(self, name: str, attributes: dict[str, Any], names: list[str],
                    payloads: dict[tuple[int, ...], bytes]) -> None:
        put_cell_array(self.target, self.items, f"{self.path}/{name}", self.layout.grid,
                       {"nonempty_chunks": names, **attributes}, payloads,
                       compressor=self.compressor, shard_shape=self.shard_shape)

    def add_vertices(self, pos: np.ndarray, cells: Any, columns: list[Column]) -> None:
        """The vertices, fragment index and attribute cells of sorted, cut rows."""
        self.layout.grid = self.layout.grid.covering(cells.chunks)
        chunks = [tuple(int(v) for v in c) for c in cells.chunks]
        names = sorted(chunk_name(c) for c in chunks)
        cuts = list(zip(cells.bounds[:-1].tolist(), cells.bounds[1:].tolist()))
        ordered = np.take(pos, cells.order, axis=0)
        self._cell_array("vertices", {"zv_array": "vertices", "dtype": pos.dtype.name,
                                      "encoding": "raw"}, names,
                         {c: memoryview(ordered[a:b]).cast("B") for c, (a, b) in
                          zip(chunks, cuts)})
        self._cell_array("vertex_fragments", {"zv_array": "vertex_fragments",
                                              "encoding": "fragment_index_v1"}, names,
                         dict(zip(chunks, cells.index)))
        if columns:
            self.arrays_present.append("vertex_attributes")
            self.target.put_json(self.items, f"{self.path}/vertex_attributes/zarr.json",
                                 {"attributes": {}, "zarr_format": 3, "node_type": "group"})
        for col in columns:
            data = np.take(col.data, cells.order, axis=0)
            self._cell_array(f"vertex_attributes/{col.name}", col.array_attributes(), names,
                             {c: memoryview(data[a:b]).cast("B") for c, (a, b) in
                              zip(chunks, cuts)})
        self.vertex_count = int(len(pos))

    def add_objects(self, parts: objects.ObjectParts, sid_ndim: int,
                    all_ids: np.ndarray | None = None) -> np.ndarray:
        self.arrays_present.append("object_index")
        items, row_ids = objects.write_index(self.target, self.path, parts, sid_ndim,
                                             self.compressor, all_ids)
        self.items += items
        return row_ids

    def add_object_attributes(self, values: dict[str, Any] | None, count: int) -> None:
        self.items += objects.write_rows(self.target, self.path, "object_attributes",
                                         "object_attribute", values or {}, count, "object",
                                         self.object_compression)

    def add_groups(self, groups: dict[int, Any], row_ids: np.ndarray) -> int:
        items, n = objects.write_groups(self.target, self.path, groups, row_ids)
        self.items += items
        return n

    def add_group_attributes(self, values: dict[str, Any] | None, count: int) -> None:
        if values and not count:
            raise VectorDataError("group_attributes need groups", field="group_attributes")
        self.items += objects.write_rows(self.target, self.path, "group_attributes",
                                         "groupings_attribute", values or {}, count, "group",
                                         self.object_compression)

    def add_links(self, chunks: np.ndarray, rows: np.ndarray, *,
                  with_intra: bool = False) -> int:
        """An undirected, canonical ``links/0`` family: one record per row of
        ``chunks`` (M, L, D) / ``rows`` (M, L). A record whose endpoints all lie in one
        chunk goes, as given, to the all-zero offsets array, its cell indexed by
        ``link_fragments`` (one range over the cell's rows); every other record goes,
        canonically placed with its permutation index, to the array of its offsets, in
        the cell of its source chunk. Rows keep the order of the records.
        ``with_intra`` creates the all-zero array and ``link_fragments`` even without
        such records (zarr-vectors' mesh and graph writers do). Returns M."""
        width = rows.shape[1]
        ndim = chunks.shape[2]
        if not len(rows) and not with_intra:
            return 0
        put_links_family(self.target, self.items, self.path, 0, width, ndim,
                         directed=False, count=len(rows))
        intra = np.all(chunks == chunks[:, :1], axis=(1, 2)) if len(rows) else \
            np.zeros(0, dtype=bool)
        zero = np.zeros((width - 1, ndim), dtype=np.int64)
        if with_intra or intra.any():
            self._intra_links(chunks[intra, 0], rows[intra], zero)
        cross = ~intra
        source, offsets, stored = links.canonical(chunks[cross], rows[cross])
        cells: dict[str, dict[tuple[int, ...], list[np.ndarray]]] = {}
        first: dict[str, np.ndarray] = {}
        for name, src, row, off in zip((links.offset_name(o) for o in offsets),
                                       source.tolist(), stored, offsets):
            cells.setdefault(name, {}).setdefault(tuple(src), []).append(row)
            first.setdefault(name, off)
        for name, by_chunk in cells.items():
            attrs = {"zv_array": "links", "dtype": "int64", "offsets": first[name].tolist(),
                     "has_perm": True, "link_width": width, "level_delta": 0}
            payloads = {c: links.encode_cell(np.array(rs)) for c, rs in by_chunk.items()}
            self._cell_array(f"links/0/{name}", attrs,
                             sorted(chunk_name(c) for c in by_chunk), payloads)
        return len(rows)

    def _intra_links(self, chunks: np.ndarray, rows: np.ndarray, zero: np.ndarray) -> None:
        by_chunk: dict[tuple[int, ...], list[np.ndarray]] = {}
        for chunk, row in zip(chunks.tolist(), rows):
            by_chunk.setdefault(tuple(chunk), []).append(row)
        names = sorted(chunk_name(c) for c in by_chunk)
        width = rows.shape[1]
        attrs = {"zv_array": "links", "dtype": "int64", "offsets": zero.tolist(),
                 "has_perm": False, "link_width": width, "level_delta": 0}
        self._cell_array(f"links/0/{links.offset_name(zero)}", attrs, names,
                         {c: np.ascontiguousarray(rs, dtype="<i8").tobytes()
                          for c, rs in by_chunk.items()})
        self._cell_array("link_fragments", {"zv_array": "link_fragments",
                                            "encoding": "fragment_index_v1"}, names,
                         {c: fragments.encode_ranges(np.zeros(1), np.array([len(rs)]))
                          for c, rs in by_chunk.items()})

    def finish(self) -> list[tuple[str, bytes]]:
        attrs = level_attributes(self.index, self.vertex_count, self.arrays_present,
                                 fragments_tile=True, extra=self.level_extra)
        self.target.put_json(self.items, f"{self.path}/zarr.json",
                             {"attributes": attrs, "zarr_format": 3, "node_type": "group"})
        return self.items


def put_cell_array(target: Target, items: list, rel: str, grid: SpatialGrid,
                   attributes: dict[str, Any], payloads: dict[tuple[int, ...], Any], *,
                   compressor: Any = None, shard_shape: Any = None) -> None:
    """A cell array at ``rel`` over ``grid``: its document and its cells."""
    doc = array_document(grid, attributes, compressor=compressor, shard_shape=shard_shape)
    target.put_json(items, f"{rel}/zarr.json", doc)
    items += CellArray(target.key(rel), doc).encode(payloads)


def put_links_family(target: Target, items: list, level: str, delta: int, width: int,
                     ndim: int, *, directed: bool, count: int) -> None:
    """The level's ``links`` group and the policy document of its ``links/<delta>``
    family (with record counts only where records were written, as zarr-vectors does)."""
    target.put_json(items, f"{level}/links/zarr.json",
                    {"attributes": {}, "zarr_format": 3, "node_type": "group"})
    policy: dict[str, Any] = {"zv_array": "links_family", "level_delta": delta,
                              "link_width": width, "directed": directed,
                              "store": "canonical", "sid_ndim": ndim}
    if count:
        policy.update(num_links=count, num_physical_records=count)
    name = "0" if delta == 0 else f"{delta:+d}"
    target.put_json(items, f"{level}/links/{name}/zarr.json",
                    {"zarr_format": 3, "node_type": "group", "attributes": policy})


def _within(pos: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    p_lo, p_hi = column_extent(pos)
    return bool(np.all(p_lo >= lo) and np.all(p_hi <= hi))


def _plain(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _shape(value: Any, ndim: int, field: str) -> list[Any]:
    if np.isscalar(value):
        value = [value] * ndim
    try:
        items = list(value)
    except TypeError:
        raise VectorDataError(f"{field} must be {ndim} numbers", field=field) from None
    if len(items) != ndim:
        raise VectorDataError(f"{field} has {len(items)} entries, the data {ndim} "
                              f"dimensions", field=field)
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise VectorDataError(f"{field} must be numbers, got {v!r}", field=field)
        if not (math.isfinite(float(v)) and float(v) > 0):
            raise VectorDataError(f"{field} entries must be positive and finite, got {v!r}",
                                  field=field)
        out.append(int(v) if isinstance(v, (int, np.integer)) else float(v))
    return out


def _bounds(bounds: Any, ndim: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        lo, hi = (np.asarray(b, dtype=np.float64) for b in bounds)
    except (TypeError, ValueError):
        raise VectorDataError("bounds must be (min, max)", field="bounds") from None
    if lo.shape != (ndim,) or hi.shape != (ndim,):
        raise VectorDataError(f"bounds corners must have {ndim} entries", field="bounds")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo > hi):
        raise VectorDataError(f"bounds must be finite with min <= max, got {lo.tolist()} .. "
                              f"{hi.tolist()}", field="bounds")
    return lo, hi
