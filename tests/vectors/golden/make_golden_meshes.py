"""Regenerate the golden mesh, graph and pyramid stores with zarr-vectors.

    python tests/vectors/golden/make_golden_meshes.py [output-directory]

Written by zarr-vectors (https://github.com/AllenInstitute/zarr-vectors-py) into plain
directories, from inputs drawn with fixed seeds; each store's inputs go to an ``.npz``
beside it so that the tests compute every expected answer by brute force instead of
trusting either library.

* ``meshes/<name>.zarr`` (``zarr_vectors.types.meshes.write_mesh`` or
  ``zarr_vectors.types.graphs.write_graph``) with ``meshes/<name>.npz`` holding
  ``vertices`` (N, D) float64 as passed, ``records`` (F, L) int64 (the faces, or the
  edges of a graph), ``object_ids`` when given, ``va__<name>`` vertex attributes,
  ``oa__<name>`` object attributes (one row per distinct object id, ascending) and
  ``spec`` (JSON: ``kind`` "mesh" or "graph", ``chunk_shape``, ``bin_shape``,
  ``compressor``, the writer's version);
* ``pyramids/<name>.zarr``: a point cloud (``zarr_vectors.types.points.write_points``)
  and its pyramid (``zarr_vectors.multiresolution.coarsen.build_pyramid``), with
  ``pyramids/<name>.npz`` holding ``positions``, ``object_ids``, ``va__``/``oa__`` as
  above, ``group__<gid>`` members and ``spec`` (``chunk_shape``, ``bin_shape``,
  ``factors``, ``chunk_scale_factors``, ``sparsity_seed``, ``cross_level_storage``).

Vertices sit on a lattice of 12.5 with some of them exactly on chunk faces; faces are
drawn both inside one chunk and across chunks, a few repeating a vertex.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def _vertices(rng: np.random.Generator, n: int, lo: Any, hi: Any, ndim: int,
              step: float = 12.5) -> np.ndarray:
    """``n`` distinct points: a third on the 12.5 lattice (chunk and bin faces among
    them), the rest anywhere."""
    pos = rng.uniform(np.broadcast_to(lo, (ndim,)), np.broadcast_to(hi, (ndim,)),
                      size=(n, ndim))
    snap = rng.random(n) < 0.33
    pos[snap] = np.round(pos[snap] / step) * step
    _, first = np.unique(pos, axis=0, return_index=True)
    keep = np.sort(first)
    return pos[keep]


def _records(rng: np.random.Generator, pos: np.ndarray, chunk: Any, count: int,
             width: int, intra_share: float = 0.5, repeats: int = 4) -> np.ndarray:
    """``count`` records of ``width`` vertex indices: about ``intra_share`` of them with
    every vertex in one chunk, the rest anywhere; ``repeats`` of them name one vertex
    twice (degenerate faces, self-loop edges)."""
    cells = np.floor(pos.astype(np.float32) / np.asarray(chunk, float)).astype(np.int64)
    _, label = np.unique(cells, axis=0, return_inverse=True)
    label = label.reshape(-1)
    by_chunk = [np.flatnonzero(label == k) for k in range(label.max() + 1)]
    big = [m for m in by_chunk if len(m) >= width]
    out = np.empty((count, width), dtype=np.int64)
    for k in range(count):
        if big and rng.random() < intra_share:
            members = big[rng.integers(len(big))]
            out[k] = rng.choice(members, size=width, replace=False)
        else:
            out[k] = rng.choice(len(pos), size=width, replace=False)
    for k in rng.choice(count, size=min(repeats, count), replace=False):
        j = rng.integers(1, width)
        out[k, j] = out[k, 0]
    return out


def mesh3d() -> dict[str, Any]:
    """(m1) triangles in 3-D either side of zero (2 x 2 x 2 chunks of 100, bin 50),
    sparse object ids, an ``index`` and a float32 (N, 2) vertex attribute, a float64
    object attribute, zstd cells (uncompressed, an object attribute is one 65 536-row
    chunk of raw bytes)."""
    rng = np.random.default_rng(301)
    pos = _vertices(rng, 150, -100.0, 100.0, 3)
    n = len(pos)
    pool = np.array([0, 3, 7, 40, 1000], dtype=np.int64)
    return {"vertices": pos,
            "records": _records(rng, pos, (100, 100, 100), 180, 3),
            "object_ids": rng.choice(pool, size=n),
            "va__index": np.arange(n, dtype=np.int64),
            "va__value": rng.normal(size=(n, 2)).astype(np.float32),
            "oa__weight": rng.normal(size=len(pool)),
            "spec": {"kind": "mesh", "chunk_shape": [100, 100, 100],
                     "bin_shape": [50, 50, 50], "compressor": "zstd"}}


def quad2d() -> dict[str, Any]:
    """(m2) quads in 2-D, 3 x 2 chunks of 50 x 75 from (-50, -60), uncompressed, no
    object ids, an int32 ``index``."""
    rng = np.random.default_rng(302)
    pos = _vertices(rng, 120, [-50.0, -60.0], [100.0, 90.0], 2)
    return {"vertices": pos,
            "records": _records(rng, pos, (50, 75), 110, 4),
            "va__index": np.arange(len(pos), dtype=np.int32),
            "spec": {"kind": "mesh", "chunk_shape": [50, 75]}}


def graph3d() -> dict[str, Any]:
    """(g1) a 3-D graph, 2 x 2 x 2 chunks of 100, with objects, self-loops and repeated
    edges (both directions), an ``index`` attribute, an int32 (O, 2) object attribute,
    zstd cells."""
    rng = np.random.default_rng(303)
    pos = _vertices(rng, 150, 0.0, 200.0, 3)
    n = len(pos)
    edges = _records(rng, pos, (100, 100, 100), 160, 2, repeats=5)
    edges[-3:] = edges[:3][:, ::-1]
    ids = rng.integers(0, 6, size=n).astype(np.int64) * 2 + 1
    return {"vertices": pos, "records": edges, "object_ids": ids,
            "va__index": np.arange(n, dtype=np.int64),
            "oa__label": rng.integers(-99, 99, size=(len(np.unique(ids)), 2),
                                      dtype=np.int32),
            "spec": {"kind": "graph", "chunk_shape": [100, 100, 100],
                     "compressor": "zstd"}}


def pyramid3d() -> dict[str, Any]:
    """(p1) 300 points in [-150, 150)^3 (2 x 2 x 2 chunks of 200), bin 50, 12 objects
    (sparse ids), two groups, a float32 object attribute; pyramid ``[(2, 3), (2, 1)]``
    (a third of the objects kept at level 1, seed 11) with explicit cross-level
    links."""
    rng = np.random.default_rng(304)
    pos = _vertices(rng, 300, -150.0, 150.0, 3, step=50.0)
    n = len(pos)
    pool = np.arange(12, dtype=np.int64) * 5 + 2
    ids = np.concatenate([pool, rng.choice(pool, size=n - len(pool))])
    return {"positions": pos, "object_ids": ids,
            "va__index": np.arange(n, dtype=np.int64),
            "oa__weight": rng.normal(size=len(pool)).astype(np.float32),
            "group__0": pool[[0, 4, 9]], "group__1": pool[[11, 2]],
            "spec": {"chunk_shape": [200, 200, 200], "bin_shape": [50, 50, 50],
                     "factors": [[2, 3], [2, 1]], "chunk_scale_factors": None,
                     "sparsity_seed": 11, "cross_level_storage": "explicit"}}


MESH_STORES = {"mesh3d": mesh3d, "quad2d": quad2d, "graph3d": graph3d}
PYRAMID_STORES = {"pyramid3d": pyramid3d}


def _prefixed(inputs: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in inputs.items() if k.startswith(prefix)}


def mesh_kwargs(inputs: dict[str, Any]) -> dict[str, Any]:
    """``write_mesh`` / ``write_graph`` keywords from a store's inputs (the tests have
    their own copy of this)."""
    spec = inputs["spec"]
    kw: dict[str, Any] = {k: spec[k] for k in ("chunk_shape", "bin_shape", "compressor")
                          if spec.get(k) is not None}
    if _prefixed(inputs, "va__"):
        kw["vertex_attributes"] = _prefixed(inputs, "va__")
    if _prefixed(inputs, "oa__"):
        kw["object_attributes"] = _prefixed(inputs, "oa__")
    if "object_ids" in inputs:
        kw["object_ids"] = inputs["object_ids"]
    return kw


def pyramid_kwargs(inputs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``write_points`` and ``build_pyramid`` keywords from a store's inputs."""
    spec = inputs["spec"]
    points = {"chunk_shape": spec["chunk_shape"], "bin_shape": spec["bin_shape"],
              "object_ids": inputs["object_ids"],
              "vertex_attributes": _prefixed(inputs, "va__"),
              "object_attributes": _prefixed(inputs, "oa__"),
              "groups": {int(g): v.tolist()
                         for g, v in _prefixed(inputs, "group__").items()}}
    pyramid = {"factors": [tuple(f) for f in spec["factors"]],
               "chunk_scale_factors": spec["chunk_scale_factors"],
               "sparsity_seed": spec["sparsity_seed"],
               "cross_level_storage": spec["cross_level_storage"]}
    return points, pyramid


def _save(out: Path, name: str, inputs: dict[str, Any]) -> None:
    arrays = {k: v for k, v in inputs.items() if k != "spec"}
    np.savez(out / f"{name}.npz", spec=np.array(json.dumps(inputs["spec"])), **arrays)


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    return path


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(out: Path) -> None:
    import zarr_vectors
    from zarr_vectors.multiresolution.coarsen import build_pyramid
    from zarr_vectors.types.graphs import write_graph
    from zarr_vectors.types.meshes import write_mesh
    from zarr_vectors.types.points import write_points

    writer = f"zarr-vectors {zarr_vectors.__version__}"
    meshes = out / "meshes"
    meshes.mkdir(parents=True, exist_ok=True)
    for name, make in MESH_STORES.items():
        inputs = make()
        inputs["spec"]["writer"] = writer
        store = _fresh(meshes / f"{name}.zarr")
        write = write_mesh if inputs["spec"]["kind"] == "mesh" else write_graph
        write(str(store), inputs["vertices"], inputs["records"], **mesh_kwargs(inputs))
        _save(meshes, name, inputs)
        print(f"meshes/{name}: {len(inputs['vertices'])} vertices, "
              f"{len(inputs['records'])} records, {_size(store)} bytes")
    pyramids = out / "pyramids"
    pyramids.mkdir(parents=True, exist_ok=True)
    for name, make in PYRAMID_STORES.items():
        inputs = make()
        inputs["spec"]["writer"] = writer
        store = _fresh(pyramids / f"{name}.zarr")
        points, pyramid = pyramid_kwargs(inputs)
        write_points(str(store), inputs["positions"], **points)
        build_pyramid(str(store), **pyramid)
        _save(pyramids, name, inputs)
        print(f"pyramids/{name}: {len(inputs['positions'])} points, {_size(store)} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
