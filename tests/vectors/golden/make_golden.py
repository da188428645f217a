"""Regenerate the golden point-cloud and polyline stores in this folder with zarr-vectors.

    python tests/vectors/golden/make_golden.py [output-directory]

Each point store ``<name>.zarr/`` is written by ``zarr_vectors.types.points.write_points``
(https://github.com/AllenInstitute/zarr-vectors-py) into a plain directory, from inputs
drawn with a fixed seed; the inputs go to ``<name>.npz`` beside it so that the tests can
compute every expected answer by brute force instead of trusting either library. The
polyline stores go to ``polylines/<name>.zarr/`` (written by
``zarr_vectors.types.polylines.write_polylines``) with their inputs in
``polylines/<name>.npz``.

``<name>.npz`` holds:

* ``positions`` (N, D) float64, the values passed to the writer (stored as float32);
* ``spec``: a JSON string with the writer's scalar arguments (``chunk_shape``,
  ``bin_shape``, ``compressor``, ``shard_shape``, ...) and the writer's name and version;
* ``va__<name>``: vertex attributes (strings as fixed-width unicode);
* ``object_ids``, ``oa__<name>`` (object attributes, one row per distinct object id in
  ascending order), ``group__<gid>`` (members) and ``ga__<name>`` (group attributes).

Every store carries a vertex attribute ``index`` holding each point's input row, so a
test can check the order of any answer, not only its contents.

``polylines/<name>.npz`` holds the polylines joined: ``vertices`` (V, D) float64, every
polyline's vertices in turn, and ``line_lengths`` (P,) int64 to cut them apart again;
``va__<name>`` flat over the same V vertices (the writer is given them cut the same
way); ``oa__<name>`` one row per polyline; ``group__<gid>`` (polyline indices) and
``ga__<name>``; and ``spec`` as above (with ``geometry_type``). Their ``index``
attribute is each vertex's row in ``vertices``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def _uniform(rng: np.random.Generator, n: int, lo: Any, hi: Any, ndim: int = 3
             ) -> np.ndarray:
    return rng.uniform(np.broadcast_to(lo, (ndim,)), np.broadcast_to(hi, (ndim,)),
                       size=(n, ndim))


def _on_edges(rng: np.random.Generator, pos: np.ndarray, step: Any, count: int) -> None:
    """Move ``count`` points onto multiples of ``step`` on some axes: bin and chunk
    faces are where floor() and closed boxes disagree if anyone gets them wrong."""
    step = np.broadcast_to(np.asarray(step, float), (pos.shape[1],))
    rows = rng.choice(len(pos), size=count, replace=False)
    for r in rows:
        axes = rng.random(pos.shape[1]) < 0.6
        pos[r, axes] = np.round(pos[r, axes] / step[axes]) * step[axes]


def plain3d() -> dict[str, Any]:
    """(a) the common case: 3-D, chunk 200, bin 50, a float attribute."""
    rng = np.random.default_rng(101)
    n = 300
    pos = _uniform(rng, n, 0.0, 400.0)
    _on_edges(rng, pos, 50.0, 40)
    pos[:2] = [[0.0, 0.0, 0.0], [200.0, 200.0, 200.0]]
    return {"positions": pos,
            "spec": {"chunk_shape": [200, 200, 200], "bin_shape": [50, 50, 50]},
            "va__index": np.arange(n, dtype=np.int64),
            "va__intensity": rng.normal(size=n).astype(np.float32)}


def objects3d() -> dict[str, Any]:
    """(b) negative coordinates, sparse object ids, a categorical and a 3-channel uint8
    attribute, 1-D float and 2-D int object attributes, groups and group attributes."""
    rng = np.random.default_rng(102)
    n = 400
    pos = _uniform(rng, n, -190.0, 190.0)
    _on_edges(rng, pos, 50.0, 50)
    ids_pool = np.array([0, 2, 3, 7, 11, 19, 40, 41, 100, 12345], dtype=np.int64)
    object_ids = np.concatenate([ids_pool, rng.choice(ids_pool, size=n - len(ids_pool))])
    classes = np.array(["axon", "dendrite", "glia", "soma"])
    n_obj = len(ids_pool)
    return {"positions": pos,
            "spec": {"chunk_shape": [200, 200, 200], "bin_shape": [50, 50, 50]},
            "va__index": np.arange(n, dtype=np.int32),
            "va__cls": classes[rng.integers(0, len(classes), size=n)],
            "va__rgb": rng.integers(0, 256, size=(n, 3), dtype=np.uint8),
            "object_ids": object_ids,
            "oa__weight": rng.normal(size=n_obj),
            "oa__label": rng.integers(-1000, 1000, size=(n_obj, 2), dtype=np.int32),
            "group__0": np.array([0, 3, 40], dtype=np.int64),
            "group__1": np.array([12345, 2, 3, 100], dtype=np.int64),
            "group__2": np.array([41], dtype=np.int64),
            "ga__score": rng.normal(size=3).astype(np.float32),
            "ga__tag": rng.integers(0, 100, size=(3, 2), dtype=np.int16)}


def plain2d() -> dict[str, Any]:
    """(c) D = 2 with negative coordinates (a grid origin below zero)."""
    rng = np.random.default_rng(103)
    n = 300
    pos = _uniform(rng, n, -300.0, 200.0, ndim=2)
    _on_edges(rng, pos, 20.0, 40)
    return {"positions": pos,
            "spec": {"chunk_shape": [100, 100], "bin_shape": [20, 20]},
            "va__index": np.arange(n, dtype=np.int64),
            "va__value": rng.normal(size=n)}


def plain4d() -> dict[str, Any]:
    """(d) D = 4, chunk and bin differing per axis."""
    rng = np.random.default_rng(104)
    n = 300
    pos = _uniform(rng, n, 0.0, [20.0, 200.0, 200.0, 200.0], ndim=4)
    _on_edges(rng, pos, [5.0, 50.0, 50.0, 50.0], 40)
    return {"positions": pos,
            "spec": {"chunk_shape": [10, 100, 100, 100], "bin_shape": [5, 50, 50, 50]},
            "va__index": np.arange(n, dtype=np.int64)}


def zstd3d() -> dict[str, Any]:
    """(e) cell arrays compressed with zstd."""
    rng = np.random.default_rng(105)
    n = 300
    pos = _uniform(rng, n, 0.0, 400.0)
    _on_edges(rng, pos, 100.0, 30)
    return {"positions": pos,
            "spec": {"chunk_shape": [200, 200, 200], "bin_shape": [100, 100, 100],
                     "compressor": "zstd"},
            "va__index": np.arange(n, dtype=np.int64),
            "va__intensity": rng.normal(size=n).astype(np.float32)}


def sharded3d() -> dict[str, Any]:
    """(f) cell arrays sharded 2 x 2 x 2 over a 3 x 3 x 3 grid at origin -1 (edge
    shards are partial), with objects."""
    rng = np.random.default_rng(106)
    n = 300
    pos = _uniform(rng, n, -200.0, 400.0)
    _on_edges(rng, pos, 100.0, 30)
    return {"positions": pos,
            "spec": {"chunk_shape": [200, 200, 200], "bin_shape": [100, 100, 100],
                     "shard_shape": 2},
            "va__index": np.arange(n, dtype=np.int64),
            "object_ids": rng.integers(0, 12, size=n).astype(np.int64)}


def blosc3d() -> dict[str, Any]:
    """(g) cell arrays compressed with blosc; objects, one bin per chunk."""
    rng = np.random.default_rng(107)
    n = 300
    pos = _uniform(rng, n, 0.0, 400.0)
    _on_edges(rng, pos, 200.0, 30)
    return {"positions": pos,
            "spec": {"chunk_shape": [200, 200, 200], "bin_shape": None,
                     "compressor": "blosc"},
            "va__index": np.arange(n, dtype=np.int64),
            "va__rgb": rng.integers(0, 256, size=(n, 3), dtype=np.uint8),
            "object_ids": rng.integers(0, 8, size=n).astype(np.int64),
            "oa__weight": rng.normal(size=8).astype(np.float32)}


STORES = {"plain3d": plain3d, "objects3d": objects3d, "plain2d": plain2d,
          "plain4d": plain4d, "zstd3d": zstd3d, "sharded3d": sharded3d,
          "blosc3d": blosc3d}


def write_kwargs(inputs: dict[str, Any]) -> dict[str, Any]:
    """``write_points`` keyword arguments from a store's inputs (the tests have their
    own copy of this so that they do not import the writer's script)."""
    spec = inputs["spec"]
    kw: dict[str, Any] = {k: spec[k] for k in ("chunk_shape", "bin_shape", "compressor",
                                               "shard_shape") if k in spec}
    kw["vertex_attributes"] = {k[4:]: v for k, v in inputs.items() if k.startswith("va__")}
    if "object_ids" in inputs:
        kw["object_ids"] = inputs["object_ids"]
    oa = {k[4:]: v for k, v in inputs.items() if k.startswith("oa__")}
    if oa:
        kw["object_attributes"] = oa
    groups = {int(k[7:]): v.tolist() for k, v in inputs.items() if k.startswith("group__")}
    if groups:
        kw["groups"] = groups
    ga = {k[4:]: v for k, v in inputs.items() if k.startswith("ga__")}
    if ga:
        kw["group_attributes"] = ga
    return kw


def _walk(rng: np.random.Generator, n: int, start: Any, step: float, reach: int = 2
          ) -> np.ndarray:
    """A random walk of ``n`` vertices from ``start``, each step a multiple of ``step``
    (up to ``reach`` steps per axis): vertices land on chunk faces, and long walks cross
    many chunks and come back into chunks they left."""
    start = np.asarray(start, dtype=float)
    moves = rng.integers(-reach, reach + 1, size=(n - 1, len(start))) * step
    return np.cumsum(np.vstack([start, moves]), axis=0)


def _polylines(lines: list[np.ndarray], spec: dict[str, Any], rng: np.random.Generator,
               index_dtype: Any = np.int64) -> dict[str, Any]:
    """The inputs of a polyline store: the lines joined, their lengths and the
    ``index`` attribute (each vertex's row in the joined array)."""
    vertices = np.concatenate(lines)
    return {"vertices": vertices,
            "line_lengths": np.array([len(line) for line in lines], dtype=np.int64),
            "spec": spec,
            "va__index": np.arange(len(vertices), dtype=index_dtype)}


def streamlines3d() -> dict[str, Any]:
    """(p1) streamlines, D = 3, chunk 100 over negative and positive coordinates:
    single-vertex, two-vertex and long walks re-entering chunks; a float32 vertex
    attribute, groups and a group attribute. (No object attributes: uncompressed, each
    would be one 65 536-row chunk of raw bytes.)"""
    rng = np.random.default_rng(201)
    lengths = [1, 2, 6, 40, 25, 60, 3, 12, 1, 30]
    lines = [_walk(rng, n, rng.integers(-8, 8, size=3) * 12.5, 12.5, reach=3)
             for n in lengths]
    lines[1] = np.array([[0.0, 0.0, 0.0], [100.0, 100.0, -100.0]])  # chunk corner to chunk corner
    inputs = _polylines(lines, {"chunk_shape": [100, 100, 100]}, rng)
    inputs.update({
        "va__fa": rng.normal(size=len(inputs["vertices"])).astype(np.float32),
        "group__0": np.array([0, 3, 5], dtype=np.int64),
        "group__1": np.array([9, 1], dtype=np.int64),
        "group__2": np.array([4], dtype=np.int64),
        "ga__score": rng.normal(size=3).astype(np.float32)})
    return inputs


def polylines2d() -> dict[str, Any]:
    """(p2) ``geometry_type="polyline"``, D = 2, chunk 50 x 75 around the origin,
    zstd-compressed cells in 2 x 2 shards; an int32 ``index``; object attributes (P,)
    float64 and (P, 2) int32, two groups (one of a single polyline)."""
    rng = np.random.default_rng(202)
    lengths = [20, 1, 45, 8, 2, 30, 15, 5]
    lines = [_walk(rng, n, rng.integers(-6, 6, size=2) * 12.5, 12.5) for n in lengths]
    spec = {"chunk_shape": [50, 75], "geometry_type": "polyline", "compressor": "zstd",
            "shard_shape": 2}
    inputs = _polylines(lines, spec, rng, index_dtype=np.int32)
    inputs.update({
        "oa__weight": rng.normal(size=len(lines)),
        "oa__label": rng.integers(-1000, 1000, size=(len(lines), 2), dtype=np.int32),
        "group__0": np.array([6, 2, 0], dtype=np.int64),
        "group__1": np.array([5], dtype=np.int64)})
    return inputs


def tracts3d() -> dict[str, Any]:
    """(p3) three long tracts crossing many small chunks (50 x 100 x 75), blosc cells,
    ``bin_shape`` given (stored as ``base_bin_shape``, not used to cut runs); a float64
    attribute."""
    rng = np.random.default_rng(203)
    lines = [_walk(rng, n, [0.0, 0.0, 0.0], 12.5, reach=2) for n in (90, 70, 50)]
    spec = {"chunk_shape": [50, 100, 75], "bin_shape": [25, 50, 25],
            "compressor": "blosc"}
    inputs = _polylines(lines, spec, rng)
    inputs["va__curv"] = rng.normal(size=len(inputs["vertices"]))
    return inputs


POLYLINE_STORES = {"streamlines3d": streamlines3d, "polylines2d": polylines2d,
                   "tracts3d": tracts3d}


def _cut(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    return np.split(flat, np.cumsum(lengths)[:-1])


def polyline_kwargs(inputs: dict[str, Any]
                    ) -> tuple[list[np.ndarray], dict[str, Any]]:
    """``write_polylines`` arguments (the polylines, then the keywords) from a store's
    inputs (the tests have their own copy of this)."""
    spec = inputs["spec"]
    lengths = inputs["line_lengths"]
    kw: dict[str, Any] = {k: spec[k] for k in ("chunk_shape", "bin_shape", "compressor",
                                               "shard_shape", "geometry_type") if k in spec}
    kw["vertex_attributes"] = {k[4:]: _cut(v, lengths) for k, v in inputs.items()
                               if k.startswith("va__")}
    oa = {k[4:]: v for k, v in inputs.items() if k.startswith("oa__")}
    if oa:
        kw["object_attributes"] = oa
    groups = {int(k[7:]): v.tolist() for k, v in inputs.items() if k.startswith("group__")}
    if groups:
        kw["groups"] = groups
    ga = {k[4:]: v for k, v in inputs.items() if k.startswith("ga__")}
    if ga:
        kw["group_attributes"] = ga
    return _cut(inputs["vertices"], lengths), kw


def _save(out: Path, name: str, inputs: dict[str, Any]) -> None:
    arrays = {k: v for k, v in inputs.items() if k != "spec"}
    np.savez(out / f"{name}.npz", spec=np.array(json.dumps(inputs["spec"])), **arrays)


def main(out: Path) -> None:
    import zarr_vectors
    from zarr_vectors.types.points import write_points
    from zarr_vectors.types.polylines import write_polylines

    out.mkdir(parents=True, exist_ok=True)
    for name, make in STORES.items():
        inputs = make()
        inputs["spec"]["writer"] = f"zarr-vectors {zarr_vectors.__version__}"
        store = out / f"{name}.zarr"
        if store.exists():
            shutil.rmtree(store)
        write_points(str(store), inputs["positions"], **write_kwargs(inputs))
        _save(out, name, inputs)
        size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
        print(f"{name}: {len(inputs['positions'])} points, {size} bytes")
    lines_out = out / "polylines"
    lines_out.mkdir(exist_ok=True)
    for name, make in POLYLINE_STORES.items():
        inputs = make()
        inputs["spec"]["writer"] = f"zarr-vectors {zarr_vectors.__version__}"
        store = lines_out / f"{name}.zarr"
        if store.exists():
            shutil.rmtree(store)
        lines, kw = polyline_kwargs(inputs)
        write_polylines(str(store), lines, **kw)
        _save(lines_out, name, inputs)
        size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
        print(f"polylines/{name}: {len(lines)} polylines, {len(inputs['vertices'])} "
              f"vertices, {size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
