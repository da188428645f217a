"""Meshes and graphs: ``write_mesh`` / ``read_mesh`` and ``write_graph`` / ``read_graph``,
with zarr-vectors 0.9.2's names, arguments, return values and bytes.

The vertices are stored as a point cloud with object ids (default: all object 0): in
each chunk, one range fragment per object, objects ascending, vertices in input order.
Every face (``(F, L)``, ``L >= 3``, winding as given) or edge (``(M, 2)``) is one link
record of the ``links/0`` family (``links_convention`` "explicit"): a record inside one
chunk keeps its vertex order in the all-zero offsets array; any other is placed
canonically with its permutation index, which gives the winding back on reading.

Reading takes the vertices of the selected chunks (all rows, ascending chunk, stored
order) or of the selected objects (requested order, their fragments in manifest
order), keeps the faces or edges all of whose vertices were taken, in the order
zarr-vectors returns them (offset arrays by name, cells by chunk name, rows as stored),
renumbered into the output, with their original vertex order. A box then keeps the
vertices inside it (closed) and the faces all of whose vertices it keeps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import CodecError, MetadataError, UnsupportedOperationError, VectorDataError
from . import links, skeletons
from .cells import CellArray, compressor_codecs
from .grid import parse_chunk_name
from .level import Level
from .objects import check_ids
from .query import Box, chunk_filter, object_selection, refuse_attribute_filter
from .sorting import object_cells
from .target import opened
from .vertex_attributes import prepare
from .writer import DatasetWriter, check_positions


def write_mesh(target: Any, vertices: Any, faces: Any, *, chunk_shape: Any,
               bin_shape: Any = None, bounds: Any = None, encoding: str = "raw",
               vertex_attributes: dict[str, Any] | None = None,
               object_attributes: dict[str, Any] | None = None, object_ids: Any = None,
               dtype: Any = "float32", draco_quantization_bits: int = 11,
               chunk_by_attribute: str | None = None, out_of_bounds: str = "raise",
               compressor: Any = None, shard_shape: Any = None, path: str | None = None,
               axes: Any = None, backend: Any = None) -> dict[str, Any]:
    """Write a mesh: ``vertices`` ``(N, D)``, ``faces`` ``(F, L)`` (``L >= 3`` vertex
    indices each, winding kept), optional ``object_ids`` ``(N,)``. Returns
    ``vertex_count``, ``face_count``, ``chunk_count``, ``intra_face_count``,
    ``cross_face_count`` and ``encoding``."""
    if encoding != "raw":
        raise UnsupportedOperationError("only the raw mesh encoding is supported (Draco "
                                        "is not)", field="encoding")
    pos = check_positions(vertices, dtype)
    cells = _check_links(faces, len(pos), "faces", min_width=3)
    summary = _write_linked(target, path, pos, cells, object_ids, vertex_attributes,
                            object_attributes, geometry_type="mesh",
                            chunk_shape=chunk_shape, bin_shape=bin_shape, bounds=bounds,
                            out_of_bounds=out_of_bounds, chunk_by_attribute=chunk_by_attribute,
                            compressor=compressor, shard_shape=shard_shape, axes=axes)
    return {"vertex_count": int(len(pos)), "face_count": int(len(cells)),
            "chunk_count": summary["chunk_count"], "intra_face_count": summary["intra"],
            "cross_face_count": int(len(cells)) - summary["intra"], "encoding": encoding}


def write_graph(target: Any, positions: Any, edges: Any, *, chunk_shape: Any,
                bin_shape: Any = None, bounds: Any = None, kind: str = "graph",
                vertex_attributes: dict[str, Any] | None = None,
                link_attributes: dict[str, Any] | None = None,
                object_attributes: dict[str, Any] | None = None,
                fragment_attributes: Any = None, object_ids: Any = None,
                dtype: Any = "float32", chunk_by_attribute: str | None = None,
                out_of_bounds: str = "raise", compressor: Any = None,
                shard_shape: Any = None, path: str | None = None, axes: Any = None,
                backend: Any = None) -> dict[str, Any]:
    """Write a graph: node ``positions`` ``(N, D)``, ``edges`` ``(M, 2)`` (node indices,
    direction kept), optional ``object_ids`` ``(N,)``. ``kind="skeleton"``: the edges
    are ``[child, parent]`` of one tree per object, stored as :mod:`.skeletons`
    describes (nodes renumbered depth first). Returns ``node_count``,
    ``edge_count``, ``chunk_count``, ``intra_edge_count``, ``cross_edge_count``,
    ``object_count`` and ``kind``."""
    if kind not in ("graph", "skeleton"):
        raise VectorDataError(f"kind must be 'graph' or 'skeleton', got {kind!r}",
                              field="kind")
    if link_attributes or fragment_attributes is not None:
        raise UnsupportedOperationError("link_attributes and fragment_attributes are not "
                                        "supported yet")
    pos = check_positions(positions, dtype)
    pairs = _check_links(edges, len(pos), "edges", min_width=2, max_width=2)
    summary = _write_linked(target, path, pos, pairs, object_ids, vertex_attributes,
                            object_attributes, geometry_type=kind,
                            chunk_shape=chunk_shape, bin_shape=bin_shape, bounds=bounds,
                            out_of_bounds=out_of_bounds, chunk_by_attribute=chunk_by_attribute,
                            compressor=compressor, shard_shape=shard_shape, axes=axes)
    return {"node_count": int(len(pos)), "edge_count": int(len(pairs)),
            "chunk_count": summary["chunk_count"], "intra_edge_count": summary["intra"],
            "cross_edge_count": summary["cross"], "object_count": summary["objects"],
            "kind": kind}


def _check_links(records: Any, n_vertices: int, field: str, min_width: int,
                 max_width: int | None = None) -> np.ndarray:
    arr = np.asarray(records)
    if arr.ndim != 2 or arr.shape[1] < min_width or (max_width and arr.shape[1] > max_width):
        want = f"({min_width})" if max_width == min_width else f"(L >= {min_width})"
        raise VectorDataError(f"{field} must be (M, {want[1:-1]}) vertex indices, got shape "
                              f"{arr.shape}", field=field)
    if arr.size and arr.dtype.kind not in "iu":
        raise VectorDataError(f"{field} must be integer vertex indices, got {arr.dtype}",
                              field=field)
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= n_vertices)
    if bad.any():
        raise VectorDataError(f"{int(bad.any(axis=1).sum())} {field} index vertices that do "
                              f"not exist (there are {n_vertices}), e.g. "
                              f"{arr[bad.any(axis=1)][0].tolist()}", field=field)
    return arr


def _write_linked(target: Any, path: str | None, pos: np.ndarray, records: np.ndarray,
                  object_ids: Any, vertex_attributes: Any, object_attributes: Any, *,
                  geometry_type: str, chunk_shape: Any, bin_shape: Any, bounds: Any,
                  out_of_bounds: str, chunk_by_attribute: Any, compressor: Any,
                  shard_shape: Any, axes: Any) -> dict[str, int]:
    if chunk_by_attribute is not None:
        raise UnsupportedOperationError("chunk_by_attribute is not supported yet")
    if out_of_bounds == "ignore":
        raise VectorDataError(f"out_of_bounds='ignore' would leave {geometry_type} links "
                              f"dangling: use 'raise' or 'expand'", field="out_of_bounds")
    n = len(pos)
    ids = np.zeros(n, dtype=np.int64) if object_ids is None else check_ids(object_ids, n)
    tree = geometry_type == "skeleton"
    if tree:
        pos, records, ids, vertex_attributes = skeletons.reorder(pos, records, ids,
                                                                 vertex_attributes)
        skeletons.check_one_root_per_object(records, ids)
    columns = prepare(vertex_attributes, n)
    with opened(target, path, write=True) as t:
        writer = DatasetWriter(t, pos.shape[1], axes=axes)
        layout = writer.layout(pos, chunk_shape=chunk_shape, bin_shape=bin_shape,
                               bounds=bounds, out_of_bounds=out_of_bounds,
                               geometry_type=geometry_type,
                               links_convention="implicit_sequential_with_branches"
                               if tree else "explicit")
        level = writer.level(0, layout, compressor=compressor, shard_shape=shard_shape)
        level.object_compression = compressor_codecs(compressor)
        cells, parts = object_cells(layout, pos, ids)
        level.add_vertices(pos, cells, columns)
        row_ids = level.add_objects(parts, pos.shape[1])
        level.arrays_present = ["vertices", "links", "object_index"]
        # each vertex's chunk and row in it, for the link records
        chunk_of = np.empty(n, dtype=np.int64)
        local = np.empty(n, dtype=np.int64)
        per = np.diff(cells.bounds)
        chunk_of[cells.order] = np.repeat(np.arange(len(per)), per)
        local[cells.order] = np.arange(n) - np.repeat(cells.bounds[:-1], per)
        keep = np.ones(len(records), dtype=bool)
        if tree:   # only the edges a reader cannot imply
            read_index = np.empty(n, dtype=np.int64)
            read_index[cells.order] = np.arange(n)
            starts = np.zeros(n, dtype=bool)
            sorted_ids = ids[cells.order]
            first = np.ones(n, dtype=bool)
            first[1:] = (sorted_ids[1:] != sorted_ids[:-1]) | (local[cells.order][1:] == 0)
            starts[cells.order[first]] = True
            keep = skeletons.stored_edges(records, read_index, starts)
        kept = records[keep]
        link_chunks = cells.chunks[chunk_of[kept]] if len(kept) else np.zeros(
            (0, records.shape[1], pos.shape[1]), dtype=np.int64)
        level.add_links(link_chunks, local[kept], with_intra=True)
        level.add_object_attributes(object_attributes, len(row_ids))
        writer.commit([level])
    if len(records):
        same = np.all(chunk_of[records] == chunk_of[records][:, :1], axis=1)
        intra, cross = int((same & keep).sum()), int((~same).sum())
    else:
        intra = cross = 0
    return {"chunk_count": len(cells.chunks), "intra": intra, "cross": cross,
            "objects": len(row_ids)}


def read_mesh(target: Any, *, level: int = 0, bbox: Any = None, object_ids: Any = None,
              chunks: Any = None, attribute_filter: dict[str, Any] | None = None,
              path: str | None = None, backend: Any = None) -> dict[str, Any]:
    """The mesh of one level, or of the chunks ``chunks``, the objects ``object_ids``
    (requested order) and the closed box ``bbox`` (module docstring). Returns
    ``vertices``, ``faces`` (indices into ``vertices``, winding as written),
    ``vertex_count`` and ``face_count``."""
    pos, faces = _read_linked(target, path, level, bbox, object_ids, None, chunks,
                              attribute_filter, min_width=3)
    return {"vertices": pos, "faces": faces, "vertex_count": int(len(pos)),
            "face_count": int(len(faces))}


def read_graph(target: Any, *, level: int = 0, object_ids: Any = None, bbox: Any = None,
               chunks: Any = None, attribute_filter: dict[str, Any] | None = None,
               group_ids: Any = None, path: str | None = None,
               backend: Any = None) -> dict[str, Any]:
    """The graph of one level, or of the chunks, objects, groups and box asked for
    (module docstring). Returns ``positions``, ``edges`` (direction as written; for a
    skeleton ``[child, parent]`` of every node with a parent, implied ones included, by
    child), ``node_count`` and ``edge_count``."""
    pos, edges = _read_linked(target, path, level, bbox, object_ids, group_ids, chunks,
                              attribute_filter, min_width=2, max_width=2)
    return {"positions": pos, "edges": edges, "node_count": int(len(pos)),
            "edge_count": int(len(edges))}


def _read_linked(target: Any, path: str | None, level: int, bbox: Any, object_ids: Any,
                 group_ids: Any, chunks: Any, attribute_filter: Any, *, min_width: int,
                 max_width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    refuse_attribute_filter(attribute_filter)
    with opened(target, path, write=False) as t:
        lv = Level(t, level)
        box = Box.parse(bbox, lv.ndim)
        allowed = chunk_filter(lv, box, chunks)
        chunk_list = [tuple(int(v) for v in c) for c in allowed]
        fetched = lv.fetch([lv.vertices, lv.fragments] if lv.fragments is not None
                           else [lv.vertices], chunk_list)
        verts = {c: lv.vertex_rows(p, lv.vertices.path) for c, p in zip(chunk_list,
                                                                        fetched[0])}
        tree = max_width == 2 and lv.root.attributes["zarr_vectors"].get(
            "links_convention") == "implicit_sequential_with_branches"
        index = {}
        if tree or object_ids is not None or group_ids is not None:
            index = {c: lv.fragment_index(p, len(verts[c]), lv.fragments.path)
                     for c, p in zip(chunk_list, fetched[1])}
        if object_ids is None and group_ids is None:
            pieces = [(c, np.arange(len(verts[c]))) for c in chunk_list]
        else:
            pieces = _object_pieces(lv, object_selection(lv, object_ids, group_ids),
                                    verts, index)
        # output number of every (chunk, row) taken
        number = {c: np.full(len(verts[c]), -1, dtype=np.int64) for c in chunk_list}
        start = 0
        for c, take in pieces:
            number[c][take] = np.arange(start, start + len(take))
            start += len(take)
        pos = np.concatenate([verts[c][take] for c, take in pieces]) if pieces else \
            np.zeros((0, lv.ndim), lv.dtype)
        width, records = _records(lv, set(chunk_list))
        if width is not None and (width < min_width or (max_width and width > max_width)):
            raise MetadataError(f"the level's links join {width} vertices each: not a "
                                f"{'graph' if max_width == 2 else 'mesh'}",
                                key=t.key(f"{lv.path}/links/0"), field="link_width")
        faces = _renumber(records, number, lv, width or min_width)
        if tree:   # (the edges that were not stored are implied by the reading order)
            parent = skeletons.implied_parents(len(pos), _fragment_starts(pieces, index),
                                               faces)
            child = np.flatnonzero(parent >= 0)
            faces = np.stack([child, parent[child]], axis=1)
        if box is not None:
            keep = box.contains(pos)
            renum = np.full(len(pos), -1, dtype=np.int64)
            renum[keep] = np.arange(int(keep.sum()))
            pos = pos[keep]
            if len(faces):
                faces = renum[faces]
                faces = faces[np.all(faces >= 0, axis=1)]
        return pos, faces


def _fragment_starts(pieces: list, index: dict) -> np.ndarray:
    """Where, in the output, a fragment with rows begins: a skeleton's reader takes no
    parent from the row before those."""
    starts = []
    at = 0
    for c, take in pieces:
        firsts = {int(index[c].rows(f)[0]) for f in range(index[c].count)
                  if len(index[c].rows(f))}
        starts += [at + k for k, row in enumerate(take.tolist()) if row in firsts]
        at += len(take)
    return np.asarray(starts, dtype=np.int64)


def _object_pieces(lv: Level, wanted: np.ndarray, verts: dict, index: dict) -> list:
    objects = lv.objects
    if objects is None:
        return []
    pieces = []
    for oid, row in zip(np.asarray(wanted).tolist(), objects.rows_of(wanted).tolist()):
        if row < 0:
            continue
        chunks, frags = objects.manifest(row)
        for c, f in zip(map(tuple, chunks.tolist()), frags.tolist()):
            if c in verts:
                if f >= index[c].count:
                    raise MetadataError(f"object {oid} names fragment {f} of chunk {c}, "
                                        f"which has {index[c].count}",
                                        key=lv.target.key(f"{lv.path}/object_index"))
                pieces.append((c, index[c].rows(f)))
    return pieces


def _records(lv: Level, selected: set
             ) -> tuple[int | None, list[tuple[np.ndarray, np.ndarray]]]:
    """The family's link width (None without a family) and every ``links/0`` record
    whose source chunk is selected (a record with all its endpoints selected has its
    source among them), as (endpoint chunks (M, L, D), rows (M, L)) in original endpoint
    order; arrays in name order, cells in the order of their chunk names, rows as
    stored."""
    t = lv.target
    family = t.read_json(f"{lv.path}/links/0/zarr.json")
    if family is None:
        return None, []
    width = family.get("attributes", {}).get("link_width")
    if not isinstance(width, int) or width < 2:
        raise MetadataError("a links family needs an integer link_width >= 2",
                            key=t.key(f"{lv.path}/links/0/zarr.json"), field="link_width")
    out = []
    for name in t.child_nodes(f"{lv.path}/links/0"):
        doc = t.require_json(f"{lv.path}/links/0/{name}/zarr.json")
        cells = CellArray(t.key(f"{lv.path}/links/0/{name}"), doc)
        attrs = cells.meta.attributes
        offsets = np.asarray(attrs.get("offsets", []), dtype=np.int64)
        if offsets.shape != (width - 1, lv.ndim):
            raise MetadataError(f"offsets {attrs.get('offsets')!r} do not fit link width "
                                f"{width} in {lv.ndim} dimensions", key=cells.path)
        intra = not offsets.any()
        has_perm = bool(attrs.get("has_perm", not intra))
        listed = [parse_chunk_name(n, lv.ndim, cells.path)
                  for n in attrs.get("nonempty_chunks", [])]
        sources = [c for c in listed if c in selected]
        if not sources:
            continue
        for source, payload in zip(sources, lv.fetch([cells], sources)[0]):
            stored_width = width + (1 if has_perm else 0)
            rows = (links.decode_intra(payload, stored_width, cells.path) if intra
                    else links.decode_cell(payload, stored_width, cells.path))
            if not len(rows):
                continue
            ends = np.concatenate([np.zeros((1, lv.ndim), np.int64), offsets]) + \
                np.asarray(source)
            chunk_rows = np.broadcast_to(ends, (len(rows), width, lv.ndim))
            if has_perm:
                perm = links.unlehmer(rows[:, 0], width)
                vi = np.empty((len(rows), width), dtype=np.int64)
                np.put_along_axis(vi, perm, rows[:, 1:], axis=1)
                placed = np.empty_like(chunk_rows)
                np.put_along_axis(placed, perm[:, :, None], chunk_rows, axis=1)
                chunk_rows = placed
            else:
                vi = rows
            out.append((np.array(chunk_rows), vi))
    return width, out


def _renumber(records: list, number: dict, lv: Level, width: int) -> np.ndarray:
    """Records as output vertex numbers (``(0, width)`` for none); those with an
    endpoint not taken are dropped, those naming a row their chunk does not have are an
    error."""
    if not records:
        return np.zeros((0, width), dtype=np.int64)
    order = list(number)
    base = dict(zip(order, np.cumsum([0] + [len(number[c]) for c in order[:-1]]).tolist()))
    size = {c: len(number[c]) for c in order}
    taken = np.concatenate([number[c] for c in order]) if order else np.zeros(0, np.int64)
    parts = []
    for chunk_rows, vi in records:
        flat_chunks = chunk_rows.reshape(-1, chunk_rows.shape[2])
        distinct, inverse = np.unique(flat_chunks, axis=0, return_inverse=True)
        at = np.array([base.get(tuple(c), -1) for c in distinct.tolist()], dtype=np.int64)
        limit = np.array([size.get(tuple(c), 0) for c in distinct.tolist()], dtype=np.int64)
        start = at[inverse.reshape(-1)].reshape(vi.shape)
        bound = limit[inverse.reshape(-1)].reshape(vi.shape)
        held = start >= 0
        if np.any(held & ((vi < 0) | (vi >= bound))):
            raise CodecError("a link names a vertex row its chunk does not have",
                             key=lv.target.key(f"{lv.path}/links/0"))
        out = np.where(held, taken[np.where(held, start + vi, 0)], -1)
        parts.append(out[np.all(out >= 0, axis=1)])
    return np.concatenate(parts)
