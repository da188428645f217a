"""Resolution pyramids: ``build_pyramid``, zarr-vectors 0.9.2's per-object coarsening.

Level ``i + 1`` is built from level ``i`` for each ``(coarsen_factor, sparsity_factor)``:

1. The objects of level ``i`` are its object index's rows (a level without one is a
   single implicit object listing every fragment, chunk by chunk). With a sparsity
   factor ``s > 1`` a random ``1 / s`` of them is kept (``sparsity_seed``); the rest
   keep an empty manifest, so object ids mean the same thing at every level.
2. The kept objects' vertices, in manifest order, are binned with the bin of level
   ``i`` times ``coarsen_factor``; each occupied bin becomes one metavertex at the mean
   of its vertices (float64 sums, stored float32), shared by every object that has
   vertices in it. Metavertices are numbered by their bin's raw little-endian int64
   tuple in byte order (numpy's ``unique`` on the bytes), as zarr-vectors numbers them.
3. Metavertices go to the chunks of level ``i + 1`` (``chunk_scale_factors`` times
   level ``i``'s chunks), one fragment each, in metavertex order; an object's manifest
   is its vertices' metavertices with consecutive repeats dropped.
4. Object attributes are copied for the kept objects; the others hold the absent fill.
5. With ``cross_level_storage`` "explicit" (or "implicit", ``+d`` only) each vertex of
   level ``i`` is linked to its metavertex: ``links/+1`` at level ``i`` holds
   ``[row, metavertex row]`` in the cell of the vertex's chunk, ``links/-1`` at level
   ``i + 1`` the mirror, in the metavertex's chunk; offsets are taken from the source
   chunk re-anchored to the other level's grid. ``cross_level_depth`` d > 1 (-1: every
   level) adds ``+k`` / ``-k`` families for k <= d, composed from the adjacent ones.

The whole pyramid is one transaction, after the levels above 0 that were there are
erased (they were built from an older level 0, or are being rebuilt).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UnsupportedOperationError, VectorDataError
from . import dense, fragments, links
from .grid import SpatialGrid, chunk_name
from .layout import parse_root
from .level import Level
from .objects import ATTRIBUTE_ROWS, DEFAULT_COMPRESSION, ObjectParts, absent_fill, write_index
from .target import Target, opened
from .writer import put_cell_array, put_links_family

STORAGES = ("none", "implicit", "explicit")
PYRAMID_CAPABILITIES = ("preserved_object_ids", "shared_fragments", "multiscale_links")


@dataclass
class LevelData:
    """A level held in memory: what the next level is built from."""

    index: int
    chunks: list[tuple[int, ...]]                 # ascending
    rows: dict[tuple[int, ...], np.ndarray]       # (n, D) vertices of each chunk
    fragments: dict[tuple[int, ...], list[np.ndarray]]
    ids: np.ndarray | None                        # object id of each index row
    manifests: list[list[tuple[tuple[int, ...], int]]]
    attributes: dict[str, np.ndarray] = field(default_factory=dict)
    chunk_shape: tuple[float, ...] = ()
    bin_shape: tuple[float, ...] = ()
    grid: SpatialGrid | None = None


def build_pyramid(target: Any, *, factors: Any, chunk_scale_factors: Any = None,
                  sparsity_strategy: str = "random", sparsity_seed: int | None = None,
                  cross_level_depth: int = 1, cross_level_storage: str = "explicit",
                  method: str = "per_object", options: dict[str, Any] | None = None,
                  path: str | None = None) -> dict[str, Any]:
    """Build levels 1 .. len(factors) from level 0 (module docstring). ``factors`` lists
    ``(coarsen_factor, sparsity_factor)`` per level, each relative to the level below.
    Returns ``levels_created``, ``level_specs``, ``method``, ``cross_level_depth`` and
    ``cross_level_storage``."""
    with opened(target, path, write=True) as t:
        root_doc = t.require_json("zarr.json")
        root = parse_root(root_doc.get("attributes"), t.key("zarr.json"))
        steps = _check_arguments(factors, chunk_scale_factors, sparsity_strategy,
                                 cross_level_depth, cross_level_storage, method, options,
                                 root.ndim)
        source = _read_level0(t, root)
        for old in root.level_paths()[1:]:
            if isinstance(old, str) and old.isdigit():
                t.store.erase_prefix(t.key(f"{old}/"))
        _erase_links_up(t)
        items: list[tuple[str, bytes]] = []
        specs = []
        bins = [tuple(root.base_bin_shape)]
        # (the capabilities a pyramid stamps are stamped again for the new one)
        capabilities: list[str] = [
            c for c in root.attributes["zarr_vectors"].get("format_capabilities", [])
            if c not in PYRAMID_CAPABILITIES]
        levels = [source]
        parents: list[np.ndarray | None] = []
        for coarsen, sparsity, scale in steps:
            coarse, spec = _coarsen(t, root, source, coarsen, sparsity, scale,
                                    sparsity_seed, items)
            bins.append(coarse.bin_shape)
            for cap in (["preserved_object_ids"] if source.ids is not None else []) + (
                    ["shared_fragments"] if spec["vertex_count"] else []):
                if cap not in capabilities:
                    capabilities.append(cap)
            parents.append(_parents(source, coarse) if spec["vertex_count"] else None)
            if cross_level_storage != "none" and spec["vertex_count"]:
                _link_levels(t, root, source, coarse, parents[-1], cross_level_storage,
                             items)
            specs.append(spec)
            levels.append(coarse)
            source = coarse
        if cross_level_storage != "none" and cross_level_depth != 0 and len(bins) > 1:
            if "multiscale_links" not in capabilities:
                capabilities.append("multiscale_links")
            deepest = len(levels) - 1 if cross_level_depth == -1 else cross_level_depth
            _compose_links(t, root, levels, parents, deepest, cross_level_storage, items)
        items = list(dict(items).items())    # (a group document put twice: once)
        attrs = dict(root_doc["attributes"])
        zv = dict(attrs["zarr_vectors"], format_capabilities=capabilities,
                  cross_level_depth=int(cross_level_depth),
                  cross_level_storage=cross_level_storage)
        attrs["zarr_vectors"] = zv
        attrs["multiscales"] = [dict(attrs["multiscales"][0], datasets=_datasets(bins))]
        if isinstance(attrs.get("ome"), dict):
            attrs["ome"] = dict(attrs["ome"], nodes=[{"type": "zv:level", "name": str(i)}
                                                     for i in range(len(bins))])
        t.put_json(items, "zarr.json", dict(root_doc, attributes=attrs))
        t.store.expect_writes(sum(len(v) for _, v in items))
        t.store.set_many(items)
    return {"levels_created": len(specs), "level_specs": specs, "method": method,
            "cross_level_depth": cross_level_depth,
            "cross_level_storage": cross_level_storage}


def _check_arguments(factors, chunk_scale_factors, strategy, depth, storage, method,
                     options, ndim: int) -> list[tuple[float, float, tuple[int, ...]]]:
    """Every argument checked before the store is touched."""
    if method != "per_object":
        raise UnsupportedOperationError(f"coarsening method {method!r} is not available "
                                        f"(only 'per_object')", field="method")
    if strategy != "random":
        raise UnsupportedOperationError(f"sparsity strategy {strategy!r} is not available "
                                        f"(only 'random')", field="sparsity_strategy")
    if storage not in STORAGES:
        raise VectorDataError(f"cross_level_storage must be one of {STORAGES}, got "
                              f"{storage!r}", field="cross_level_storage")
    if not isinstance(depth, int) or depth < -1:
        raise VectorDataError(f"cross_level_depth must be an integer >= -1, got {depth!r}",
                              field="cross_level_depth")
    if options:
        raise UnsupportedOperationError("options are for registered coarsening methods",
                                        field="options")
    if not isinstance(factors, (list, tuple)) or not factors:
        raise VectorDataError("factors must list (coarsen_factor, sparsity_factor) pairs",
                              field="factors")
    if chunk_scale_factors is not None and len(chunk_scale_factors) != len(factors):
        raise VectorDataError("chunk_scale_factors must have one entry per factor",
                              field="chunk_scale_factors")
    steps = []
    for i, pair in enumerate(factors):
        try:
            coarsen, sparsity = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise VectorDataError(f"factors[{i}] must be a (coarsen, sparsity) pair, got "
                                  f"{pair!r}", field="factors") from None
        if not (math.isfinite(coarsen) and coarsen >= 1 and math.isfinite(sparsity)
                and sparsity >= 1):
            raise VectorDataError(f"factors[{i}] = {pair!r}: both must be finite and >= 1",
                                  field="factors")
        steps.append((coarsen, sparsity, _scale(
            1 if chunk_scale_factors is None else chunk_scale_factors[i], ndim)))
    return steps


def _scale(scale: Any, ndim: int) -> tuple[int, ...]:
    """A chunk scale factor: one positive integer, or one per axis."""
    try:
        factors = [scale] * ndim if np.isscalar(scale) else list(scale)
        ok = len(factors) == ndim and all(
            isinstance(f, (int, np.integer)) and not isinstance(f, bool) and f >= 1
            for f in factors)
    except TypeError:
        ok = False
    if not ok:
        raise VectorDataError(f"a chunk scale factor must be a positive integer or {ndim} "
                              f"of them, got {scale!r}", field="chunk_scale_factors")
    return tuple(int(f) for f in factors)


def _erase_links_up(t: Target) -> None:
    """Level 0's links to the old level 1, and its links group if nothing else is in it
    (a mesh's own links/0 stays)."""
    t.store.erase_prefix(t.key("0/links/+1/"))
    if not any(n != "zarr.json" for n in t.store.list_dir(t.key("0/links/"))):
        t.store.erase_values([t.key("0/links/zarr.json")])


def _datasets(bins: list[tuple[float, ...]]) -> list[dict[str, Any]]:
    base = np.asarray(bins[0], dtype=np.float64)
    return [{"path": str(i), "coordinateTransformations": [
        {"type": "scale", "scale": (np.asarray(b, dtype=np.float64) / base).tolist()},
        {"type": "translation", "translation": [float(v) / 2 for v in b]}]}
        for i, b in enumerate(bins)]


def _read_level0(t: Target, root: Any) -> LevelData:
    lv = Level(t, 0)
    chunks = [tuple(int(v) for v in c) for c in lv.chunks]
    fetched = lv.fetch([lv.vertices, lv.fragments], chunks)
    rows, frags = {}, {}
    for c, vp, fp in zip(chunks, fetched[0], fetched[1]):
        rows[c] = np.array(lv.vertex_rows(vp, lv.vertices.path))
        index = lv.fragment_index(fp, len(rows[c]), lv.fragments.path)
        frags[c] = [index.rows(f) for f in range(index.count)]
    objects = lv.objects
    attributes = {}
    if objects is not None:
        ids = objects.row_ids
        manifests = []
        for r in objects.all_rows():
            mc, mf = objects.manifest(r)
            manifests.append([(tuple(c), int(f)) for c, f in zip(mc.tolist(), mf.tolist())])
        for name in t.child_nodes("0/object_attributes"):
            attributes[name] = dense.read(t, f"0/object_attributes/{name}")
    else:
        ids = None
        manifests = [[(c, f) for c in chunks for f in range(len(frags[c]))]]
    return LevelData(0, chunks, rows, frags, ids, manifests, attributes,
                     lv.grid.chunk_shape, tuple(root.base_bin_shape), lv.grid)


def _keep(n: int, sparsity: float, seed: int | None) -> np.ndarray:
    """Object rows kept: ``round(n / sparsity)`` of them at random (at least one), drawn
    as zarr-vectors draws them, so the same seed keeps the same objects."""
    if sparsity <= 1.0 or n <= 1:
        return np.arange(n, dtype=np.int64)
    count = max(1, round(n * (1.0 / sparsity)))
    if count >= n:
        return np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=count, replace=False)).astype(np.int64)


def _coarsen(t: Target, root: Any, src: LevelData, coarsen: float, sparsity: float,
             scale: Any, seed: int | None, items: list) -> tuple[LevelData, dict[str, Any]]:
    ndim = len(src.chunk_shape)
    chunk_shape = tuple(float(c) * f for c, f in zip(src.chunk_shape, scale))
    bin_shape = tuple(float(b) * coarsen for b in src.bin_shape)
    target = src.index + 1
    n_objects = len(src.manifests)
    kept = _keep(n_objects, sparsity, seed)
    per_object = []
    for r in kept.tolist():
        parts = [src.rows[c][src.fragments[c][f]] for c, f in src.manifests[r]
                 if c in src.rows and f < len(src.fragments[c])]
        per_object.append(np.concatenate(parts).astype(np.float32) if parts else
                          np.zeros((0, ndim), np.float32))
    counts = np.array([len(p) for p in per_object], dtype=np.int64)
    if not counts.sum():
        return _empty_level(t, root, src, target, chunk_shape, bin_shape, sparsity, kept,
                            items)
    all_pos = np.concatenate(per_object)
    keys = np.floor(all_pos / np.asarray(bin_shape, dtype=np.float64)).astype(np.int64)
    void = np.dtype((np.void, 8 * ndim))
    unique_keys, inverse = np.unique(np.ascontiguousarray(keys).view(void).ravel(),
                                     return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    n_mv = len(unique_keys)
    weight = np.maximum(np.bincount(inverse, minlength=n_mv), 1)
    meta = np.empty((n_mv, ndim), dtype=np.float32)
    for axis in range(ndim):
        meta[:, axis] = np.bincount(inverse, weights=all_pos[:, axis].astype(np.float64),
                                    minlength=n_mv) / weight
    lo, hi = root.bounds
    grid = SpatialGrid.from_bounds(chunk_shape, bin_shape, lo, hi)
    mv_chunks = grid.chunks_of(meta)
    grid = grid.covering(mv_chunks)
    order = np.lexsort(mv_chunks.T[::-1]) if n_mv else np.zeros(0, np.int64)
    held: list[tuple[int, ...]] = []
    rows: dict[tuple[int, ...], np.ndarray] = {}
    frag_of = np.empty(n_mv, dtype=np.int64)
    chunk_of = np.empty(n_mv, dtype=np.int64)
    sorted_chunks = mv_chunks[order]
    bounds = np.concatenate(([0], np.flatnonzero(np.any(sorted_chunks[1:] != sorted_chunks[:-1],
                                                        axis=1)) + 1, [n_mv])) if n_mv \
        else np.zeros(1, np.int64)
    for k in range(len(bounds) - 1):
        members = order[bounds[k]:bounds[k + 1]]          # ascending metavertex numbers
        c = tuple(int(v) for v in sorted_chunks[bounds[k]])
        held.append(c)
        rows[c] = meta[members]
        frag_of[members] = np.arange(len(members))
        chunk_of[members] = k
    # manifests: each kept object's metavertex sequence, consecutive repeats dropped
    manifests: list[list[tuple[tuple[int, ...], int]]] = [[] for _ in range(n_objects)]
    starts = np.cumsum(counts) - counts
    for r, s, n in zip(kept.tolist(), starts.tolist(), counts.tolist()):
        seq = inverse[s:s + n]
        if len(seq) > 1:
            seq = seq[np.concatenate(([True], seq[1:] != seq[:-1]))]
        manifests[r] = [(held[chunk_of[m]], int(frag_of[m])) for m in seq.tolist()]
    has_objects = src.ids is not None
    frag_rows = {c: [np.array([i]) for i in range(len(rows[c]))] for c in held}
    if not has_objects:   # (the next level's one implicit object: every fragment, by chunk)
        manifests = [[(c, f) for c in held for f in range(len(frag_rows[c]))]]
    coarse = LevelData(target, held, rows, frag_rows, src.ids, manifests, {}, chunk_shape,
                       bin_shape, grid)
    _write_level(t, root, coarse, src, kept, sparsity, has_objects, items)
    spec = {"vertex_count": int(n_mv), "object_count": len(kept),
            "objects_kept": len(kept)}
    if has_objects or n_objects:
        spec["source_objects"] = n_objects
    spec.update(method="per_object", preserves_object_ids=True, shared_fragments=True)
    return coarse, spec


def _empty_level(t: Target, root: Any, src: LevelData, target: int,
                 chunk_shape: tuple[float, ...], bin_shape: tuple[float, ...],
                 sparsity: float, kept: np.ndarray, items: list
                 ) -> tuple[LevelData, dict[str, Any]]:
    """A level whose kept objects have no vertices left: vertices and fragments without
    cells, and an object index of empty manifests over rows 0 .. n - 1, as zarr-vectors
    writes it (no object attributes, no links)."""
    n = len(src.manifests)
    grid = SpatialGrid.from_bounds(chunk_shape, bin_shape, *root.bounds)
    ids = np.arange(n, dtype=np.int64)
    lv = LevelData(target, [], {}, {}, ids, [[] for _ in range(n)], {}, chunk_shape,
                   bin_shape, grid)
    _write_level(t, root, lv, src, kept, sparsity, True, items, with_attributes=False)
    return lv, {"vertex_count": 0, "object_count": 0, "objects_kept": len(kept),
                "method": "per_object", "preserves_object_ids": True,
                "shared_fragments": True}


def _write_level(t: Target, root: Any, lv: LevelData, src: LevelData, kept: np.ndarray,
                 sparsity: float, has_objects: bool, items: list,
                 with_attributes: bool = True) -> None:
    path = str(lv.index)
    names = sorted(chunk_name(c) for c in lv.chunks)
    for name, tag, payloads in (
            ("vertices", {"zv_array": "vertices", "dtype": "float32", "encoding": "raw"},
             {c: lv.rows[c].astype("<f4").tobytes() for c in lv.chunks}),
            ("vertex_fragments", {"zv_array": "vertex_fragments",
                                  "encoding": "fragment_index_v1"},
             {c: fragments.encode_ranges(np.arange(len(lv.rows[c])),
                                         np.ones(len(lv.rows[c]), np.int64))
              for c in lv.chunks})):
        put_cell_array(t, items, f"{path}/{name}", lv.grid,
                       {"nonempty_chunks": names, **tag}, payloads)
    present = ["vertices", "object_index"] if has_objects else ["vertices"]
    body: dict[str, Any] = {"level": lv.index, "object_sparsity": 1.0 / sparsity,
                            "vertex_count": int(sum(len(r) for r in lv.rows.values())),
                            "coarsening_method": "per_object", "parent_level": src.index,
                            "arrays_present": present}
    if has_objects:   # (zarr-vectors leaves false out)
        body["preserves_object_ids"] = True
    body.update(inherited_num_objects=len(src.manifests) if has_objects else 0,
                shared_fragments=True)
    if tuple(lv.chunk_shape) != tuple(root.chunk_shape):
        body["chunk_shape"] = list(lv.chunk_shape)
    t.put_json(items, f"{path}/zarr.json", {"attributes": {"zarr_vectors_level": body},
                                            "zarr_format": 3, "node_type": "group"})
    if not has_objects:
        return
    ids, chunks, frags = [], [], []
    for r, manifest in enumerate(lv.manifests):
        for c, f in manifest:
            ids.append(int(lv.ids[r]))
            chunks.append(c)
            frags.append(f)
    parts = ObjectParts(np.asarray(ids, dtype=np.int64),
                        np.asarray(chunks, dtype=np.int64).reshape(-1, len(lv.chunk_shape)),
                        np.asarray(frags, dtype=np.int64))
    index_items, _ = write_index(t, path, parts, len(lv.chunk_shape), "zstd",
                                 all_ids=np.asarray(lv.ids, dtype=np.int64))
    items += index_items
    if not with_attributes:
        return
    if src.attributes:
        t.put_json(items, f"{path}/object_attributes/zarr.json",
                   {"attributes": {}, "zarr_format": 3, "node_type": "group"})
    for name, data in src.attributes.items():
        out = np.zeros_like(data)
        keep = kept[kept < len(data)]
        out[keep] = data[keep]
        absent = np.ones(len(data), dtype=bool)
        absent[keep] = False
        fill = absent_fill(data.dtype)
        out[absent] = fill
        lv.attributes[name] = out
        doc = dense.document(out.shape, out.dtype.name, (ATTRIBUTE_ROWS, *out.shape[1:]),
                             [dense.BYTES_LE, *DEFAULT_COMPRESSION], dense.fill_json(fill),
                             {"zv_array": "object_attribute", "name": name,
                              "dtype": out.dtype.name, "shape": list(out.shape),
                              "fill_sentinel_meaning": "absent"})
        items += dense.encode(t, f"{path}/object_attributes/{name}", doc, out)


def _row_table(lv: LevelData) -> tuple[np.ndarray, np.ndarray]:
    """The chunk and row of each vertex of ``lv`` in its reading order (chunks
    ascending, rows in order): the global numbering cross-level links compose over."""
    ndim = len(lv.chunk_shape)
    if not lv.chunks:
        return np.zeros((0, ndim), dtype=np.int64), np.zeros(0, dtype=np.int64)
    counts = [len(lv.rows[c]) for c in lv.chunks]
    chunks = np.repeat(np.asarray(lv.chunks, dtype=np.int64).reshape(-1, ndim), counts,
                       axis=0)
    rows = np.concatenate([np.arange(n, dtype=np.int64) for n in counts])
    return chunks, rows


def _parents(fine: LevelData, coarse: LevelData) -> np.ndarray:
    """The coarse vertex (global number) of each fine vertex, -1 for none. A
    metavertex, the mean of its bin's vertices, lies in that bin: each fine vertex finds
    its metavertex by its bin among those the coarse level holds."""
    binw = np.asarray(coarse.bin_shape, dtype=np.float64)
    bins: dict[tuple[int, ...], int] = {}
    at = 0
    for c in coarse.chunks:
        keys = np.floor(coarse.rows[c].astype(np.float32) / binw).astype(np.int64)
        for r, key in enumerate(map(tuple, keys.tolist())):
            bins.setdefault(key, at + r)
        at += len(keys)
    parent = []
    for c in fine.chunks:
        keys = np.floor(fine.rows[c].astype(np.float32) / binw).astype(np.int64)
        parent += [bins.get(key, -1) for key in map(tuple, keys.tolist())]
    return np.asarray(parent, dtype=np.int64)


def _link_levels(t: Target, root: Any, fine: LevelData, coarse: LevelData,
                 parent: np.ndarray, storage: str, items: list) -> None:
    """``links/+d`` at the fine level (d levels apart) and, when explicit, ``links/-d``
    at the coarse one, for every fine vertex with a coarse vertex ``parent``."""
    delta = coarse.index - fine.index
    has = parent >= 0
    if not has.any():
        return
    fine_c, fine_r = (a[has] for a in _row_table(fine))
    coarse_chunks, coarse_rows = _row_table(coarse)
    coarse_c, coarse_r = coarse_chunks[parent[has]], coarse_rows[parent[has]]
    root_chunk = np.asarray(root.chunk_shape, dtype=np.float64)
    r_fine = np.round(np.asarray(fine.chunk_shape) / root_chunk).astype(np.int64)
    r_coarse = np.round(np.asarray(coarse.chunk_shape) / root_chunk).astype(np.int64)
    _directed(t, fine, delta, fine_c, fine_r, coarse_c, coarse_r, r_fine, r_coarse, items)
    if storage == "explicit":
        _directed(t, coarse, -delta, coarse_c, coarse_r, fine_c, fine_r, r_coarse, r_fine,
                  items)


def _compose_links(t: Target, root: Any, levels: list[LevelData],
                   parents: list[np.ndarray | None], deepest: int, storage: str,
                   items: list) -> None:
    """``links/+d`` / ``-d`` for 2 <= d <= ``deepest``: each vertex's coarse vertex d
    levels up, composed from the adjacent levels' links."""
    for fine in range(len(levels) - 1):
        if parents[fine] is None:
            continue
        parent = parents[fine].copy()
        for step in range(2, deepest + 1):
            coarse = fine + step
            if coarse >= len(levels) or parents[coarse - 1] is None:
                break
            valid = parent >= 0
            parent[valid] = parents[coarse - 1][parent[valid]]
            if not np.any(parent >= 0):
                break
            _link_levels(t, root, levels[fine], levels[coarse], parent, storage, items)


def _directed(t: Target, lv: LevelData, delta: int, src_c: np.ndarray, src_r: np.ndarray,
              trg_c: np.ndarray, trg_r: np.ndarray, r_src: np.ndarray, r_trg: np.ndarray,
              items: list) -> None:
    """A directed cross-level family at ``lv``: each record ``[src row, trg row]`` in the
    cell of its source chunk, under the offset of the target chunk from the source chunk
    re-anchored to the target's grid; records keep their order."""
    path = str(lv.index)
    name = f"{delta:+d}"
    anchor = np.floor_divide(src_c * r_src, r_trg)
    offsets = trg_c - anchor
    cells: dict[str, dict[tuple[int, ...], list[tuple[int, int]]]] = {}
    first: dict[str, list[int]] = {}
    for off, src, a, b in zip(offsets.tolist(), map(tuple, src_c.tolist()),
                              src_r.tolist(), trg_r.tolist()):
        seg = links.offset_name(np.asarray([off]))
        cells.setdefault(seg, {}).setdefault(src, []).append((a, b))
        first.setdefault(seg, off)
    put_links_family(t, items, path, delta, 2, src_c.shape[1], directed=True,
                     count=len(src_r))
    for seg, by_chunk in cells.items():
        attrs = {"nonempty_chunks": sorted(chunk_name(c) for c in by_chunk),
                 "zv_array": "links", "dtype": "int64", "offsets": [first[seg]],
                 "has_perm": False, "link_width": 2, "level_delta": delta}
        put_cell_array(t, items, f"{path}/links/{name}/{seg}", lv.grid, attrs,
                       {c: links.encode_cell(np.asarray(rs, dtype=np.int64))
                        for c, rs in by_chunk.items()})
