"""Point clouds: ``write_points`` and ``read_points``, with zarr-vectors 0.9.2's names,
arguments and return values.

Writing sorts the points once by (chunk, bin) — or by (chunk, object) when they carry
object ids — and cuts the sorted rows into cells (:mod:`.sorting`); the whole dataset goes to the store
in one transaction. Reading fetches the cells a query needs in one batch and answers
exactly: a box is closed on every axis, object queries follow the requested order, and
every filter is applied to every row (ZVF-NOTES-style quirks of the reference, such as
boxes on object-id stores or coarse levels, do not apply here).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import CodecError, MetadataError, UnsupportedOperationError, VectorDataError
from .level import Level
from .objects import check_ids
from .query import (Box, chunk_filter, object_selection, refuse_attribute_filter,
                    with_attributes)
from .sorting import binned_cells, object_cells
from .target import opened
from .writer import DatasetWriter, check_positions


def write_points(target: Any, positions: Any, *, chunk_shape: Any = None,
                 bin_shape: Any = None, bounds: Any = None,
                 vertex_attributes: dict[str, Any] | None = None,
                 object_ids: Any = None, object_attributes: dict[str, Any] | None = None,
                 fragment_attributes: Any = None, groups: dict[int, Any] | None = None,
                 group_attributes: dict[str, Any] | None = None, dtype: Any = "float32",
                 chunk_by_attribute: str | None = None, out_of_bounds: str = "raise",
                 compressor: Any = None, shard_shape: Any = None,
                 attributes: dict[str, Any] | None = None, path: str | None = None,
                 axes: Any = None, backend: Any = None) -> dict[str, Any]:
    """Write a point cloud as level 0 of the dataset at ``target`` (``path`` inside it).

    ``positions`` is ``(N, D)``. ``chunk_shape`` None makes one chunk of everything;
    ``bin_shape`` None one bin per chunk. ``bounds`` (closed ``[min, max]``) defaults to
    an existing dataset's bounds, else the points' extent; points outside are refused,
    dropped or taken in by widening the bounds (``out_of_bounds`` "raise", "ignore",
    "expand"). ``object_ids`` (N,) gives each point an object; ``object_attributes``
    and ``groups`` without it make each point its own object. ``axes`` (kvzarr's
    addition) names the axes, needed beyond 4 dimensions. Writing where a dataset is
    replaces it. ``backend`` is accepted for zarr-vectors' signature and ignored: the
    target decides the store. Returns ``vertex_count``, ``chunk_count``,
    ``object_count``, ``group_count`` and ``bins_per_chunk``."""
    if attributes is not None:
        if vertex_attributes is not None:
            raise TypeError("pass vertex_attributes or attributes, not both")
        warnings.warn("attributes= is the old name of vertex_attributes=",
                      DeprecationWarning, stacklevel=2)
        vertex_attributes = attributes
    if chunk_by_attribute is not None:
        raise UnsupportedOperationError("chunk_by_attribute is not supported yet",
                                        field="chunk_by_attribute")
    if fragment_attributes is not None:
        raise UnsupportedOperationError("fragment_attributes are not supported yet",
                                        field="fragment_attributes")
    pos = check_positions(positions, dtype)
    n, ndim = pos.shape
    needs_objects = object_ids is not None or object_attributes is not None or \
        groups is not None
    ids = check_ids(object_ids, n) if object_ids is not None else (
        np.arange(n, dtype=np.int64) if needs_objects else None)

    with opened(target, path, write=True) as t:
        writer = DatasetWriter(t, ndim, axes=axes)
        layout = writer.layout(pos, chunk_shape=chunk_shape, bin_shape=bin_shape,
                               bounds=bounds, out_of_bounds=out_of_bounds,
                               geometry_type="point_cloud",
                               links_convention="implicit_sequential")
        keep = layout.keep
        pos = pos[keep] if keep is not None else pos
        per_vertex = writer.vertex_columns(vertex_attributes, n, keep)
        if ids is not None and keep is not None:
            ids = ids[keep]
        level = writer.level(0, layout, compressor=compressor, shard_shape=shard_shape)
        if ids is None:
            cells, parts = binned_cells(layout, pos), None
        else:
            cells, parts = object_cells(layout, pos, ids)
        level.add_vertices(pos, cells, per_vertex)
        object_count = group_count = 0
        if parts is not None:
            row_ids = level.add_objects(parts, ndim)
            object_count = len(row_ids)
            level.add_object_attributes(object_attributes, object_count)
            if groups:
                group_count = level.add_groups(groups, row_ids)
            level.add_group_attributes(group_attributes, group_count)
        elif group_attributes:
            raise VectorDataError("group_attributes need groups", field="group_attributes")
        writer.commit([level])
    return {"vertex_count": int(len(pos)), "chunk_count": len(cells.chunks),
            "object_count": object_count, "group_count": group_count,
            "bins_per_chunk": layout.grid.bins_per_chunk}


def read_points(target: Any, *, level: int = 0, bbox: Any = None, object_ids: Any = None,
                group_ids: Any = None, chunks: Any = None,
                attribute_names: list[str] | None = None,
                attribute_filter: dict[str, Any] | None = None, path: str | None = None,
                backend: Any = None) -> dict[str, Any]:
    """Points of one level: all, or those in the closed box ``bbox = (lo, hi)``, in the
    chunks ``chunks`` (absolute chunk coordinates), of the objects ``object_ids``
    (requested order, unknown ids skipped) or of the groups ``group_ids`` (their
    members, ascending); the filters given all apply. ``attribute_names`` lists the
    vertex attributes to return (None: none).

    Returns ``positions`` (M, D), ``vertex_attributes`` {name: rows} and
    ``vertex_count``; an object or group query adds ``object_ids`` (M,)."""
    refuse_attribute_filter(attribute_filter)
    with opened(target, path, write=False) as t:
        lv = Level(t, level)
        box = Box.parse(bbox, lv.ndim)
        allowed = chunk_filter(lv, box, chunks)
        attrs = [lv.attribute(name) for name in (attribute_names or [])]
        if object_ids is not None or group_ids is not None:
            wanted = object_selection(lv, object_ids, group_ids)
            return _read_objects(lv, wanted, allowed, box, attribute_names or [], attrs)
        return _read_space(lv, allowed, box, attribute_names or [], attrs)


#: cells with more rows than this read only the bins a box touches (below it, testing
#: every row costs less than reading the fragment index)
PRUNE_ROWS = 65536


def _read_space(lv: Level, allowed: np.ndarray, box: Box | None, names: list[str],
                attrs: list) -> dict[str, Any]:
    """Rows of the chunks ``allowed`` (ascending), in stored order, inside ``box``."""
    chunk_list = [tuple(int(v) for v in c) for c in allowed]
    fetched = lv.fetch([lv.vertices] + [a for a, _ in attrs], chunk_list)
    verts = [lv.vertex_rows(p, lv.vertices.path) for p in fetched[0]]
    take: list[np.ndarray | None] = [None] * len(chunk_list)
    if box is not None and lv.binned():
        big = [i for i, rows in enumerate(verts) if len(rows) > PRUNE_ROWS]
        if big:
            index = lv.fetch([lv.fragments], [chunk_list[i] for i in big])[0]
            for i, payload in zip(big, index):
                take[i] = _bin_rows(lv, chunk_list[i], box, payload, len(verts[i]))
    out_pos, out_attr = [], [[] for _ in names]
    for i, rows in enumerate(verts):
        if take[i] is not None:
            rows = rows[take[i]]
        mask = box.contains(rows) if box is not None else None
        out_pos.append(rows[mask] if mask is not None else rows)
        for k, (cells, stored) in enumerate(attrs):
            col = lv.attribute_rows(stored, cells, fetched[1 + k][i], len(verts[i]),
                                    chunk_list[i])
            col = col[take[i]] if take[i] is not None else col
            out_attr[k].append(col[mask] if mask is not None else col)
    positions = np.concatenate(out_pos) if out_pos else np.zeros((0, lv.ndim), lv.dtype)
    return {"positions": positions,
            "vertex_attributes": with_attributes(names, attrs, out_attr),
            "vertex_count": int(len(positions))}


def _bin_rows(lv: Level, chunk: tuple[int, ...], box: Box, payload: Any, n_rows: int
              ) -> np.ndarray | None:
    """Rows of the bins of ``chunk`` the box may touch, ascending; None for all."""
    index = lv.fragment_index(payload, n_rows, lv.fragments.path)
    if index.count != lv.grid.bins_in_chunk or not index.all_ranges():
        return None
    lo, hi = lv.grid.bin_range(np.asarray(chunk), box.lo, box.hi)
    bpc = lv.grid.bins_per_chunk
    if np.any(lo > hi):
        return np.zeros(0, dtype=np.int64)
    if np.all(lo == 0) and np.all(hi == np.asarray(bpc) - 1):
        return None
    axes = np.meshgrid(*[np.arange(a, b + 1) for a, b in zip(lo, hi)], indexing="ij")
    bins = np.ravel_multi_index(tuple(a.ravel() for a in axes), bpc)
    return np.sort(index.rows_of(np.sort(bins)))


def _read_objects(lv: Level, wanted: np.ndarray, allowed: np.ndarray, box: Box | None,
                  names: list[str], attrs: list) -> dict[str, Any]:
    """Rows of each wanted object in turn, its fragments in manifest order, keeping only
    fragments in allowed chunks and rows inside the box."""
    objects = lv.objects
    empty = {"positions": np.zeros((0, lv.ndim), lv.dtype),
             "object_ids": np.zeros(0, dtype=np.int64),
             "vertex_attributes": with_attributes(names, attrs, [[] for _ in names]),
             "vertex_count": 0}
    if objects is None or not len(wanted):
        return empty
    rows = objects.rows_of(wanted)
    allowed_set = {tuple(int(v) for v in c) for c in allowed}
    plan: list[tuple[int, tuple[int, ...], int]] = []
    for oid, row in zip(wanted, rows):
        if row < 0:
            continue
        chunk_arr, frags = objects.manifest(int(row))
        if chunk_arr.shape[1] != lv.ndim:
            raise MetadataError(f"manifests address {chunk_arr.shape[1]} dimensions, the "
                                f"level {lv.ndim}", key=lv.target.key(lv.path))
        for chunk, frag in zip(map(tuple, chunk_arr.tolist()), frags.tolist()):
            if chunk in allowed_set:
                plan.append((int(oid), chunk, frag))
    if not plan:
        return empty
    chunk_list = sorted({c for _, c, _ in plan})
    arrays = [lv.vertices, lv.fragments] + [a for a, _ in attrs]
    if lv.fragments is None:
        raise MetadataError("the level has objects but no vertex_fragments",
                            key=lv.target.key(lv.path))
    fetched = lv.fetch(arrays, chunk_list)
    at = {c: i for i, c in enumerate(chunk_list)}
    verts, indexes, cols = {}, {}, [dict() for _ in attrs]
    for c, i in at.items():
        where = lv.vertices.key_of(lv.vertices.cell_of(c))
        verts[c] = lv.vertex_rows(fetched[0][i], where)
        indexes[c] = lv.fragment_index(fetched[1][i], len(verts[c]), where)
        for k, (cells, stored) in enumerate(attrs):
            cols[k][c] = lv.attribute_rows(stored, cells, fetched[2 + k][i], len(verts[c]), c)
    out_pos, out_ids, out_attr = [], [], [[] for _ in names]
    for oid, chunk, frag in plan:
        if frag >= indexes[chunk].count:
            raise CodecError(f"object {oid} names fragment {frag} of chunk {chunk}, "
                             f"which has {indexes[chunk].count}",
                             key=lv.target.key(f"{lv.path}/object_index"))
        take = indexes[chunk].rows(frag)
        out_pos.append(verts[chunk][take])
        out_ids.append(np.full(len(take), oid, dtype=np.int64))
        for k in range(len(attrs)):
            out_attr[k].append(cols[k][chunk][take])
    positions = np.concatenate(out_pos)
    ids = np.concatenate(out_ids)
    if box is not None:
        mask = box.contains(positions)
        positions, ids = positions[mask], ids[mask]
        out_attr = [[np.concatenate(parts)[mask]] for parts in out_attr]
    return {"positions": positions, "object_ids": ids,
            "vertex_attributes": with_attributes(names, attrs, out_attr),
            "vertex_count": int(len(positions))}
