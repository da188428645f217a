"""Polylines, streamlines and line segments: ``write_polylines`` / ``read_polylines``
and ``write_lines`` / ``read_lines`` (a line is a polyline of two vertices), with
zarr-vectors 0.9.2's names, arguments, return values and bytes.

Each polyline is an object. It is cut where it crosses from one chunk into another;
each run of consecutive vertices inside one chunk is one range fragment of that chunk
(runs appended in polyline order), the polyline's manifest lists its runs in order (a
chunk may repeat), and each crossing is a link record from the last vertex of a run to
the first of the next, in the ``links/0`` family. Inside a run the vertices connect in
order (``implicit_sequential``).

Queries, made exact where zarr-vectors answers by chunk:
- ``bbox``: the polylines with at least one vertex inside the closed box, whole;
- ``chunks``: the runs inside the listed chunks, each stretch of consecutive such runs
  an output polyline of its own (as zarr-vectors crops);
- ``object_ids`` / ``group_ids``: those polylines, in the order asked (groups: their
  members ascending), unknown ids skipped; so are polylines without vertices (an empty
  manifest is an absent object).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import MetadataError, UnsupportedOperationError, VectorDataError
from . import fragments
from .cells import compressor_codecs
from .fragments import ranges_to_rows
from .level import Level
from .objects import ObjectParts
from .query import (Box, chunk_filter, object_selection, refuse_attribute_filter,
                    with_attributes)
from .sorting import Cells, cell_numbers
from .target import opened
from .vertex_attributes import Column, prepare
from .writer import DatasetWriter, check_positions

GEOMETRY_TYPES = ("streamline", "polyline", "line")


def write_polylines(target: Any, polylines: Any, *, chunk_shape: Any,
                    bin_shape: Any = None, bounds: Any = None,
                    vertex_attributes: dict[str, Any] | None = None,
                    object_attributes: dict[str, Any] | None = None,
                    fragment_attributes: Any = None, groups: dict[int, Any] | None = None,
                    group_attributes: dict[str, Any] | None = None, dtype: Any = "float32",
                    geometry_type: str = "streamline", chunk_by_attribute: str | None = None,
                    out_of_bounds: str = "raise", compressor: Any = None,
                    shard_shape: Any = None, path: str | None = None, axes: Any = None,
                    backend: Any = None) -> dict[str, Any]:
    """Write polylines (a list of ``(N_k, D)`` arrays) as level 0 of the dataset at
    ``target``. ``vertex_attributes`` maps a name to one array per polyline;
    ``object_attributes`` have one row per polyline; ``groups`` list polyline indices.
    ``out_of_bounds`` is "raise" or "expand" (dropping vertices would break a line).
    Returns ``polyline_count``, ``vertex_count``, ``chunk_count``,
    ``cross_chunk_link_count`` and ``group_count``."""
    if chunk_by_attribute is not None or fragment_attributes is not None:
        raise UnsupportedOperationError("chunk_by_attribute and fragment_attributes are "
                                        "not supported yet")
    if geometry_type not in GEOMETRY_TYPES:
        raise VectorDataError(f"geometry_type must be one of {GEOMETRY_TYPES}, got "
                              f"{geometry_type!r}", field="geometry_type")
    if out_of_bounds == "ignore":
        raise VectorDataError("out_of_bounds='ignore' would drop vertices from the middle "
                              "of polylines: use 'raise' or 'expand'", field="out_of_bounds")
    lines, given, pos, line_of = _check_lines(polylines, dtype)
    columns = _per_line_columns(vertex_attributes, lines)
    summary = _write_paths(target, path, pos, line_of, len(lines), columns,
                           chunk_shape=chunk_shape, bin_shape=bin_shape, bounds=bounds,
                           out_of_bounds=out_of_bounds, geometry_type=geometry_type,
                           given=given, compressor=compressor, shard_shape=shard_shape,
                           axes=axes, object_attributes=object_attributes, groups=groups,
                           group_attributes=group_attributes, list_attributes=False)
    return {"polyline_count": len(lines), "vertex_count": int(len(pos)),
            "chunk_count": summary["chunk_count"],
            "cross_chunk_link_count": summary["links"], "group_count": summary["groups"]}


def _write_paths(target: Any, path: str | None, pos: np.ndarray, line_of: np.ndarray,
                 n_lines: int, columns: list[Column], *, chunk_shape: Any, bin_shape: Any,
                 bounds: Any, out_of_bounds: str, geometry_type: str,
                 given: np.ndarray | None, compressor: Any, shard_shape: Any, axes: Any,
                 object_attributes: Any, groups: Any, group_attributes: Any,
                 list_attributes: bool) -> dict[str, int]:
    """Level 0 of paths (polylines, lines): vertices ``pos`` in path order, path
    ``line_of`` of each. ``list_attributes``: whether ``arrays_present`` names the
    vertex attributes (zarr-vectors' line writer does, its polyline writer does not)."""
    with opened(target, path, write=True) as t:
        writer = DatasetWriter(t, pos.shape[1], axes=axes)
        layout = writer.layout(pos, chunk_shape=chunk_shape, bin_shape=bin_shape,
                               bounds=bounds, out_of_bounds=out_of_bounds,
                               geometry_type=geometry_type,
                               links_convention="implicit_sequential", given=given)
        level = writer.level(0, layout, compressor=compressor, shard_shape=shard_shape)
        level.object_compression = compressor_codecs(compressor)
        cells, parts, bridges = _runs(layout.grid, pos, line_of)
        level.add_vertices(pos, cells, columns)
        level.add_objects(parts, pos.shape[1], all_ids=np.arange(n_lines, dtype=np.int64))
        level.arrays_present = ["vertices", "object_index"] + (
            ["vertex_attributes"] if columns and list_attributes else [])
        n_links = level.add_links(*bridges)
        level.add_object_attributes(object_attributes, n_lines)
        group_count = level.add_groups(groups, np.arange(n_lines)) if groups else 0
        level.add_group_attributes(group_attributes, group_count)
        writer.commit([level])
    return {"chunk_count": len(cells.chunks), "links": n_links, "groups": group_count}


def write_lines(target: Any, endpoints: Any, *, chunk_shape: Any, bin_shape: Any = None,
                bounds: Any = None, vertex_attributes: dict[str, Any] | None = None,
                object_attributes: dict[str, Any] | None = None, dtype: Any = "float32",
                chunk_by_attribute: str | None = None, out_of_bounds: str = "raise",
                compressor: Any = None, shard_shape: Any = None,
                attributes: dict[str, Any] | None = None,
                line_attributes: dict[str, Any] | None = None, path: str | None = None,
                axes: Any = None, backend: Any = None) -> dict[str, Any]:
    """Write line segments, ``endpoints`` ``(N, 2, D)``, as level 0 of the dataset at
    ``target``: each line an object of two vertices, one fragment when both ends share a
    chunk, else one in each chunk joined by a link. ``vertex_attributes`` are ``(N, 2)``
    or ``(N, 2, C)`` (a value per end), ``object_attributes`` ``(N,)`` or ``(N, C)``.
    Returns ``line_count``, ``chunk_count`` and ``cross_chunk_count``.

    A crossing's link names the vertex rows of its two ends, as the format defines
    links; zarr-vectors 0.9.2's line writer stores fragment numbers there instead
    (nothing reads them back), so those link cells are the one place where its bytes
    and kvzarr's differ."""
    if attributes is not None or line_attributes is not None:
        if (attributes is not None and vertex_attributes is not None) or (
                line_attributes is not None and object_attributes is not None):
            raise TypeError("pass each attribute family once, under its current name")
        vertex_attributes = attributes if attributes is not None else vertex_attributes
        object_attributes = line_attributes if line_attributes is not None else \
            object_attributes
    if chunk_by_attribute is not None:
        raise UnsupportedOperationError("chunk_by_attribute is not supported yet")
    if out_of_bounds == "ignore":
        raise VectorDataError("out_of_bounds='ignore' would split lines: use 'raise' or "
                              "'expand'", field="out_of_bounds")
    ends = np.asarray(endpoints)
    if ends.ndim != 3 or ends.shape[1] != 2 or ends.shape[2] < 1 or not len(ends):
        raise VectorDataError(f"endpoints must be (N, 2, D) with N >= 1, got shape "
                              f"{ends.shape}", field="endpoints")
    n, _, ndim = ends.shape
    pos = check_positions(ends.reshape(n * 2, ndim), dtype)
    per_end = {}
    for name, value in (vertex_attributes or {}).items():
        arr = np.asarray(value)
        if arr.ndim not in (2, 3) or arr.shape[:2] != (n, 2):
            raise VectorDataError(f"vertex attribute {name!r} must be ({n}, 2) or "
                                  f"({n}, 2, C), got {arr.shape}", field="vertex_attributes")
        per_end[name] = arr.reshape(n * 2, *arr.shape[2:])
    summary = _write_paths(target, path, pos, np.repeat(np.arange(n), 2), n,
                           prepare(per_end, n * 2), chunk_shape=chunk_shape,
                           bin_shape=bin_shape, bounds=bounds, out_of_bounds=out_of_bounds,
                           geometry_type="line", given=None, compressor=compressor,
                           shard_shape=shard_shape, axes=axes,
                           object_attributes=object_attributes, groups=None,
                           group_attributes=None, list_attributes=True)
    return {"line_count": n, "chunk_count": summary["chunk_count"],
            "cross_chunk_count": summary["links"]}


def _check_lines(polylines: Any, dtype: Any
                 ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The polylines, all their vertices as given (float64) and as stored, and the
    polyline of each vertex."""
    if isinstance(polylines, np.ndarray) and polylines.ndim == 3:
        polylines = list(polylines)
    if not isinstance(polylines, (list, tuple)) or not polylines:
        raise VectorDataError("polylines must be a non-empty list of (N, D) arrays",
                              field="polylines")
    lines = [np.asarray(p) for p in polylines]
    ndims = {p.shape[1] if p.ndim == 2 else None for p in lines}
    if len(ndims) != 1 or None in ndims:
        raise VectorDataError("every polyline must be (N, D) with one D for all, got "
                              f"shapes {sorted({p.shape for p in lines})[:4]}",
                              field="polylines")
    given = check_positions(np.concatenate(lines), np.float64)
    pos = check_positions(given, dtype)
    line_of = np.repeat(np.arange(len(lines)), [len(p) for p in lines])
    if not len(pos):
        raise VectorDataError("the polylines hold no vertices", field="polylines")
    return lines, given, pos, line_of


def _per_line_columns(values: dict[str, Any] | None, lines: list[np.ndarray]
                      ) -> list[Column]:
    """Per-vertex attributes given as one array per polyline, joined."""
    joined = {}
    for name, per_line in (values or {}).items():
        if not isinstance(per_line, (list, tuple)) or len(per_line) != len(lines):
            raise VectorDataError(f"vertex attribute {name!r} must list one array per "
                                  f"polyline ({len(lines)})", field="vertex_attributes")
        parts = [np.asarray(a) for a in per_line]
        for k, (a, line) in enumerate(zip(parts, lines)):
            if a.ndim == 0 or a.shape[0] != len(line):
                raise VectorDataError(f"vertex attribute {name!r} of polyline {k} has "
                                      f"shape {a.shape}, the polyline {len(line)} vertices",
                                      field="vertex_attributes")
        joined[name] = np.concatenate(parts)
    return prepare(joined, sum(len(line) for line in lines))


def _runs(grid: Any, pos: np.ndarray, line_of: np.ndarray):
    """Cut the vertices into runs (consecutive vertices of one polyline in one chunk):
    the cells (runs appended chunk by chunk in polyline order), each run as a part of
    its polyline, and the bridges between consecutive runs of a polyline."""
    chunks = grid.chunks_of(pos)
    n = len(pos)
    change = np.ones(n, dtype=bool)
    change[1:] = np.any(chunks[1:] != chunks[:-1], axis=1) | (line_of[1:] != line_of[:-1])
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, n))
    run_chunks = chunks[starts]
    cell, held = cell_numbers(run_chunks)
    by_cell = np.argsort(cell, kind="stable")               # runs of each chunk in order
    cell_sorted = cell[by_cell]
    first_run = np.searchsorted(cell_sorted, np.arange(len(held)))
    rank = np.empty(len(starts), dtype=np.int64)            # fragment of each run
    rank[by_cell] = np.arange(len(starts)) - first_run[cell_sorted]
    local_first = np.empty(len(starts), dtype=np.int64)     # its first row in the cell
    sorted_counts = counts[by_cell]
    offsets = np.cumsum(sorted_counts) - sorted_counts
    local_first[by_cell] = offsets - offsets[first_run[cell_sorted]]
    per_chunk = np.bincount(cell, weights=counts, minlength=len(held)).astype(np.int64)
    bounds = np.concatenate(([0], np.cumsum(per_chunk)))
    index = []
    for c in range(len(held)):
        mine = by_cell[first_run[c]:(first_run[c + 1] if c + 1 < len(held) else len(starts))]
        index.append(fragments.encode_ranges(local_first[mine], counts[mine]))
    order = ranges_to_rows(starts[by_cell], counts[by_cell])
    parts = ObjectParts(line_of[starts], run_chunks, rank)
    same_line = line_of[starts[1:]] == line_of[starts[:-1]]
    a = np.flatnonzero(same_line)
    bridge_chunks = np.stack([run_chunks[a], run_chunks[a + 1]], axis=1)
    bridge_rows = np.stack([local_first[a] + counts[a] - 1, local_first[a + 1]], axis=1)
    return Cells(order, held, bounds, index), parts, (bridge_chunks, bridge_rows)


def read_polylines(target: Any, *, level: int = 0, object_ids: Any = None,
                   group_ids: Any = None, bbox: Any = None, chunks: Any = None,
                   attribute_filter: dict[str, Any] | None = None,
                   attribute_names: list[str] | None = None, path: str | None = None,
                   backend: Any = None) -> dict[str, Any]:
    """Polylines of one level. Returns ``polylines`` (each a list of its runs, ``(n, D)``
    arrays, in order), ``object_ids`` (one per output polyline), ``vertex_attributes``
    (the rows of every returned vertex, in order: every attribute the level has unless
    ``attribute_names`` lists some), ``ndim``, ``polyline_count`` and ``vertex_count``."""
    refuse_attribute_filter(attribute_filter)
    with opened(target, path, write=False) as t:
        lv = Level(t, level)
        box = Box.parse(bbox, lv.ndim)
        if lv.objects is None:
            raise MetadataError("the level has no object index: it holds no polylines",
                                key=t.key(f"{lv.path}/object_index"))
        if attribute_names is None:
            attribute_names = t.child_nodes(f"{lv.path}/vertex_attributes")
        attrs = [lv.attribute(name) for name in attribute_names]
        if object_ids is None and group_ids is None:
            wanted = lv.objects.row_ids
        else:
            wanted = object_selection(lv, object_ids, group_ids)
        allowed = None if chunks is None else {
            tuple(int(v) for v in c) for c in chunk_filter(lv, None, chunks)}
        return _read(lv, wanted, allowed, box, attribute_names, attrs)


def _read(lv: Level, wanted: np.ndarray, allowed: set | None, box: Box | None,
          names: list[str], attrs: list) -> dict[str, Any]:
    objects = lv.objects
    rows = objects.rows_of(wanted)
    plans = []
    for oid, row in zip(np.asarray(wanted).tolist(), rows.tolist()):
        if row < 0:
            continue
        run_chunks, frags = objects.manifest(row)
        runs = [(tuple(c), f) for c, f in zip(run_chunks.tolist(), frags.tolist())]
        if not runs:            # an empty manifest: the object is absent at this level
            continue
        if allowed is None:
            plans.append((oid, runs))
            continue
        # a whitelist crops: each stretch of consecutive runs in listed chunks is an
        # output polyline of its own
        stretch: list = []
        for run in runs + [None]:
            if run is not None and run[0] in allowed:
                stretch.append(run)
            elif stretch:
                plans.append((oid, stretch))
                stretch = []
    chunk_list = sorted({c for _, runs in plans for c, _ in runs})
    fetched = lv.fetch([lv.vertices, lv.fragments] + [a for a, _ in attrs], chunk_list)
    verts, index, cols = {}, {}, [dict() for _ in attrs]
    for i, c in enumerate(chunk_list):
        verts[c] = lv.vertex_rows(fetched[0][i], lv.vertices.path)
        index[c] = lv.fragment_index(fetched[1][i], len(verts[c]), lv.fragments.path)
        for k, (cells, stored) in enumerate(attrs):
            cols[k][c] = lv.attribute_rows(stored, cells, fetched[2 + k][i], len(verts[c]), c)
    out_lines, out_ids, out_attr = [], [], [[] for _ in names]
    for oid, runs in plans:
        takes = []
        for c, f in runs:
            if f >= index[c].count:
                raise MetadataError(f"polyline {oid} names fragment {f} of chunk {c}, "
                                    f"which has {index[c].count}",
                                    key=lv.target.key(f"{lv.path}/object_index"))
            takes.append((c, index[c].rows(f)))
        segments = [verts[c][take] for c, take in takes]
        if box is not None and not any(box.contains(s).any() for s in segments):
            continue
        out_lines.append([s.copy() for s in segments])
        out_ids.append(oid)
        for k in range(len(attrs)):
            out_attr[k] += [cols[k][c][take] for c, take in takes]
    count = sum(len(s) for line in out_lines for s in line)
    return {"polylines": out_lines, "object_ids": [int(i) for i in out_ids],
            "vertex_attributes": with_attributes(names, attrs, out_attr),
            "ndim": lv.ndim, "polyline_count": len(out_lines), "vertex_count": count}


def read_lines(target: Any, *, level: int = 0, object_ids: Any = None, bbox: Any = None,
               attribute_filter: dict[str, Any] | None = None, path: str | None = None,
               backend: Any = None) -> dict[str, Any]:
    """Lines of one level: all, or ``object_ids`` in the order asked (unknown ids
    skipped); with ``bbox``, those with an end inside the closed box. Returns
    ``endpoints`` ``(M, 2, D)``, ``vertex_attributes`` (two rows per line, every
    attribute of the level) and ``line_count``."""
    answer = read_polylines(target, level=level, object_ids=object_ids, bbox=bbox,
                            attribute_filter=attribute_filter, path=path)
    lines = [np.concatenate(runs) for runs in answer["polylines"]]
    if any(len(line) != 2 for line in lines):
        raise MetadataError("the level holds paths that are not two-vertex lines",
                            key=None)
    ndim = answer["ndim"]
    dtype = lines[0].dtype if lines else np.float32
    ends = np.stack(lines) if lines else np.zeros((0, 2, ndim), dtype=dtype)
    return {"endpoints": ends, "vertex_attributes": answer["vertex_attributes"],
            "line_count": len(ends)}
