"""Meshes and graphs shared with zarr-vectors 0.9.2, the reference implementation of the
Zarr Vector Format (https://github.com/AllenInstitute/zarr-vectors-py).

* both libraries write the same mesh or graph into two directories: same keys, same
  bytes, same JSON (2-D and 3-D, triangles, quads and wider faces, faces inside one chunk
  and across chunks, degenerate faces repeating a vertex, self-loops and repeated edges,
  object ids, vertex and object attributes, zstd, shards, float64 vertices);
* kvzarr writes (directory and LMDB stores), zarr-vectors reads, and the other way round
  (zarr-vectors writing into kvzarr stores through ``kvzarr.ZarrStore``);
* golden stores written by zarr-vectors (``golden/meshes/``) read by kvzarr;
* random meshes and graphs drawn by hypothesis;
* bad input raises a ``kvzarr.errors`` exception and leaves the store as it was.

Every answer is checked against a brute force computed here with numpy from the inputs
alone. The vertices are the input cast to the stored dtype; a vertex's chunk is
``floor(p / chunk_shape)`` (float64). A full read returns the vertices by ascending
chunk, then object id (all 0 without object ids), then input order; a chunk whitelist
keeps the vertices of the listed chunks, a closed box those with ``lo <= p <= hi`` on
every axis, an object query (kvzarr only: zarr-vectors raises NotImplementedError) the
vertices of each requested object in turn (unknown ids skipped), each by chunk then input
order, before the whitelist and the box. The faces (edges) of an answer are the input
records all of whose vertices the answer kept; they are compared as the multiset of
records written as tuples of vertex coordinates in the record's own order, which does
not depend on the order the records come back in and does check the winding (edge
direction). Where zarr-vectors is trusted, its answer must equal kvzarr's exactly
(vertex order and record order).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr import errors
from kvzarr.vectors import (read_graph, read_mesh, read_points, write_graph, write_mesh,
                            write_points)

from .test_points_interop import assert_same_tree, copy_directory, golden_npz, snapshot

pytestmark = pytest.mark.filterwarnings(
    "ignore:The data type \\(VariableLengthBytes\\(\\)\\) does not have a Zarr V3")

zv_meshes = pytest.importorskip("zarr_vectors.types.meshes")
zv_graphs = pytest.importorskip("zarr_vectors.types.graphs")
zv_store = pytest.importorskip("zarr_vectors.core.store")

GOLDEN = Path(__file__).resolve().parent / "golden" / "meshes"
GOLDEN_NAMES = sorted(p.stem for p in GOLDEN.glob("*.npz"))


# ------------------------------------------------------------------------ inputs


@dataclass
class Linked:
    """What a writer was given: ``kind`` "mesh" (records are faces) or "graph" (records
    are edges), the vertices (as passed) and the ``write_mesh`` / ``write_graph``
    keywords."""

    kind: str
    vertices: np.ndarray
    records: np.ndarray
    chunk_shape: Any
    bin_shape: Any = None
    object_ids: np.ndarray | None = None
    vertex_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    object_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, name: str) -> "Linked":
        data, spec, prefixed = golden_npz(GOLDEN / f"{name}.npz")

        options = {k: spec[k] for k in ("compressor", "shard_shape") if spec.get(k)}
        return cls(spec["kind"], data["vertices"], data["records"], spec["chunk_shape"],
                   spec.get("bin_shape"), data.get("object_ids"), prefixed("va__"),
                   prefixed("oa__"), options)

    @property
    def width(self) -> int:
        return int(self.records.shape[1])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.options.get("dtype", "float32"))

    def kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"chunk_shape": self.chunk_shape, **self.options}
        if self.bin_shape is not None:
            kw["bin_shape"] = self.bin_shape
        if self.object_ids is not None:
            kw["object_ids"] = self.object_ids
        if self.vertex_attributes:
            kw["vertex_attributes"] = self.vertex_attributes
        if self.object_attributes:
            kw["object_attributes"] = self.object_attributes
        return kw

    def write(self, target: Any, **more: Any) -> dict[str, Any]:
        """kvzarr's writer."""
        write = write_mesh if self.kind == "mesh" else write_graph
        return write(target, self.vertices, self.records, **self.kwargs(), **more)

    def write_reference(self, target: Any) -> dict[str, Any]:
        """zarr-vectors' writer. Given a zarr Store (not a path) it creates the dataset
        with default bounds and ignores ``bounds=``, so the root is created first with
        the bounds it infers from a path."""
        kw = self.kwargs()
        if not isinstance(target, str):
            stored = self.vertices.astype(self.dtype)
            bounds = kw.get("bounds") or (stored.min(axis=0).tolist(),
                                          stored.max(axis=0).tolist())
            zv_store.create_store(target, bounds=bounds,
                                  chunk_shape=tuple(kw["chunk_shape"]), ndim=stored.shape[1])
        write = zv_meshes.write_mesh if self.kind == "mesh" else zv_graphs.write_graph
        return write(target, self.vertices, self.records, **kw)


def read_ours(kind: str, source: Any, **query: Any) -> dict[str, Any]:
    return (read_mesh if kind == "mesh" else read_graph)(source, **query)


def read_theirs(kind: str, source: Any, **query: Any) -> dict[str, Any]:
    read = zv_meshes.read_mesh if kind == "mesh" else zv_graphs.read_graph
    return read(source, **query)


# ------------------------------------------------------------------- brute force


def _tuples(vertices: np.ndarray, records: np.ndarray) -> list[tuple]:
    """Each record as the tuple of its vertices' coordinates, in the record's order;
    sorted, so that two lists compare as multisets."""
    return sorted(tuple(tuple(float(x) for x in vertices[v]) for v in rec)
                  for rec in np.asarray(records).tolist())


class Truth:
    """Every answer of ``read_mesh`` / ``read_graph`` on a store written from
    ``inputs``, by numpy (module docstring)."""

    def __init__(self, inputs: Linked) -> None:
        self.inputs = inputs
        self.stored = inputs.vertices.astype(inputs.dtype)
        self.wide = self.stored.astype(np.float64)
        n, ndim = self.stored.shape
        self.ndim = ndim
        chunk = np.broadcast_to(np.asarray(inputs.chunk_shape, np.float64), (ndim,))
        self.chunk_of = np.floor(self.wide / chunk).astype(np.int64)
        self.has_objects = inputs.object_ids is not None
        self.ids = (np.asarray(inputs.object_ids, dtype=np.int64) if self.has_objects
                    else np.zeros(n, dtype=np.int64))
        self.order = np.lexsort((np.arange(n), self.ids, *self.chunk_of.T[::-1]))
        self.present_chunks = sorted({tuple(c) for c in self.chunk_of.tolist()})
        self.object_list = sorted(set(self.ids.tolist()))

    def answer(self, *, bbox: Any = None, chunks: Any = None, object_ids: Any = None,
               group_ids: Any = None) -> tuple[np.ndarray, list[tuple]]:
        """The answer's vertices (in order) and its records as coordinate tuples."""
        if group_ids is not None:          # graphs carry no groups: nobody is selected
            object_ids = []
        if object_ids is not None:
            seq = np.concatenate([self.order[self.ids[self.order] == oid]
                                  for oid in object_ids] + [np.zeros(0, np.int64)])
        else:
            seq = self.order
        if chunks is not None:
            allowed = {tuple(int(v) for v in c) for c in chunks}
            seq = seq[np.array([tuple(c) in allowed for c in self.chunk_of[seq].tolist()],
                               dtype=bool)]
        if bbox is not None:
            lo, hi = (np.broadcast_to(np.asarray(c, np.float64), (self.ndim,))
                      for c in bbox)
            seq = seq[np.all((self.wide[seq] >= lo) & (self.wide[seq] <= hi), axis=1)]
        kept = np.zeros(len(self.stored), dtype=bool)
        kept[seq] = True
        records = self.inputs.records
        held = records[np.all(kept[records], axis=1)] if len(records) else records
        return self.stored[seq], _tuples(self.stored, held)


@dataclass
class Query:
    kwargs: dict[str, Any]
    #: zarr-vectors answers this one (it raises on object queries, and answers an
    #: infinite box wrongly, ZVF-NOTES-style quirk 10.4-3 of the reference)
    reference: bool = True


def query_battery(truth: Truth, seed: int = 0) -> list[Query]:
    """Full reads, chunk whitelists, closed boxes (random, on stored vertices, one point,
    everything, scalar corners, empty, outside, infinite), boxes with whitelists and,
    for kvzarr, object queries alone and with boxes and whitelists."""
    rng = np.random.default_rng(seed)
    lo, hi = truth.wide.min(axis=0), truth.wide.max(axis=0)
    extent = np.maximum(hi - lo, 1.0)
    qs = [Query({})]
    present = truth.present_chunks
    qs.append(Query({"chunks": present[::2]}))
    qs.append(Query({"chunks": present[1::2] + [tuple(int(c) + 40 for c in present[0])]}))
    qs.append(Query({"chunks": present[:1]}))
    qs.append(Query({"chunks": []}))
    for _ in range(5):
        side = extent * rng.uniform(0.3, 0.8, size=len(lo))
        a = lo - 0.1 * extent + rng.random(len(lo)) * np.maximum(extent * 0.9 - side, 0)
        qs.append(Query({"bbox": (a.tolist(), (a + side).tolist())}))
    i, j = rng.choice(len(truth.wide), size=2, replace=len(truth.wide) < 2)
    a, b = truth.wide[i], truth.wide[j]
    qs.append(Query({"bbox": (np.minimum(a, b).tolist(), np.maximum(a, b).tolist())}))
    qs.append(Query({"bbox": (a.tolist(), a.tolist())}))
    qs.append(Query({"bbox": (lo.tolist(), hi.tolist())}))
    qs.append(Query({"bbox": (float(lo.min()), float(hi.max()))}))
    qs.append(Query({"bbox": (hi.tolist(), lo.tolist())}))
    qs.append(Query({"bbox": ((hi + 1000).tolist(), (hi + 2000).tolist())}))
    qs.append(Query({"bbox": (-np.inf, np.inf)}, reference=False))
    mid = (lo + hi) / 2
    qs.append(Query({"bbox": (lo.tolist(), mid.tolist()), "chunks": present[::2]}))
    ids = truth.object_list
    mixed = [ids[len(ids) // 2], max(ids) + 977, ids[0]]
    qs.append(Query({"object_ids": mixed}, reference=False))
    qs.append(Query({"object_ids": ids[::-1]}, reference=False))
    qs.append(Query({"object_ids": ids[-1:]}, reference=False))
    qs.append(Query({"object_ids": []}, reference=False))
    qs.append(Query({"object_ids": ids[:3], "bbox": (lo.tolist(), mid.tolist())},
                    reference=False))
    qs.append(Query({"object_ids": ids[::-1], "chunks": present[1::2]}, reference=False))
    if truth.inputs.kind == "graph":
        qs.append(Query({"group_ids": [0, 1]}, reference=False))
    return qs


# -------------------------------------------------------------------- comparing

KEYS = {"mesh": ("vertices", "faces", "vertex_count", "face_count"),
        "graph": ("positions", "edges", "node_count", "edge_count")}


def unpack(got: dict[str, Any], kind: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    names = KEYS[kind]
    assert set(got) == set(names), f"{what}: keys {sorted(got)}"
    vertices, records = np.asarray(got[names[0]]), np.asarray(got[names[1]])
    assert got[names[2]] == len(vertices), f"{what}: {names[2]}"
    assert got[names[3]] == len(records), f"{what}: {names[3]}"
    return vertices, records


def assert_answer(got: dict[str, Any], truth: Truth, query: dict[str, Any],
                  what: str) -> None:
    """``got`` is the brute-force answer: vertices exactly, in order, in the stored
    dtype; records int64 (R, L) indices into them, equal as coordinate tuples."""
    inputs = truth.inputs
    vertices, records = unpack(got, inputs.kind, what)
    want_vertices, want_records = truth.answer(**query)
    assert vertices.dtype == inputs.dtype, f"{what}: vertices dtype {vertices.dtype}"
    assert vertices.shape == want_vertices.shape, (
        f"{what}: vertices shape {vertices.shape} != {want_vertices.shape}")
    np.testing.assert_array_equal(vertices, want_vertices, err_msg=f"{what}: vertices")
    assert records.dtype == np.int64, f"{what}: records dtype {records.dtype}"
    assert records.ndim == 2, f"{what}: records shape {records.shape}"
    # (the width of an empty answer is test_empty_answers_keep_the_record_width's)
    assert records.shape[1] == inputs.width or not len(records), (
        f"{what}: records shape {records.shape}")
    if len(records):
        assert records.min() >= 0 and records.max() < len(vertices), (
            f"{what}: records index vertices the answer does not have")
    got_tuples = _tuples(vertices, records) if len(records) else []
    assert len(got_tuples) == len(want_records), (
        f"{what}: {len(got_tuples)} records, want {len(want_records)}")
    assert got_tuples == want_records, f"{what}: records differ (as coordinates)"


def assert_like_reference(ours: dict[str, Any], theirs: dict[str, Any], kind: str,
                          what: str) -> None:
    """kvzarr's answer is zarr-vectors', array for array (an empty reference answer is
    its bare ``_empty_*_result``, float32 whatever the stored dtype: rows only)."""
    v1, r1 = unpack(ours, kind, f"kvzarr {what}")
    v2, r2 = unpack(theirs, kind, f"zarr-vectors {what}")
    if len(v2) == 0:
        assert len(v1) == 0 and len(r1) == 0, (
            f"{what}: kvzarr found rows, zarr-vectors none")
        return
    assert v1.dtype == v2.dtype, f"{what}: vertices dtype {v1.dtype} != {v2.dtype}"
    np.testing.assert_array_equal(v1, v2,
                                  err_msg=f"kvzarr vs zarr-vectors {what}: vertices")
    if len(r2) == 0:  # (the width of no records: test_empty_answers_keep_the_record_width)
        assert len(r1) == 0, f"kvzarr vs zarr-vectors {what}: kvzarr found records"
        return
    assert r1.shape == r2.shape, (
        f"kvzarr vs zarr-vectors {what}: records {r1.shape} != {r2.shape}")
    np.testing.assert_array_equal(r1, r2, err_msg=f"kvzarr vs zarr-vectors {what}: records")


def check_battery(truth: Truth, ours: Any, theirs: Any = None, label: str = "",
                  seed: int = 0, every: int = 1) -> None:
    """Every query of the battery: kvzarr against the brute force, and zarr-vectors
    against kvzarr where it answers (on every ``every``-th of those queries, starting
    at ``seed``: its reads are slow)."""
    kind = truth.inputs.kind
    asked = 0
    for q in query_battery(truth, seed):
        what = f"{label} {q.kwargs}"
        got = read_ours(kind, ours, **q.kwargs)
        assert_answer(got, truth, q.kwargs, f"kvzarr {what}")
        if theirs is not None and q.reference:
            if (asked + seed) % every == 0:
                assert_like_reference(got, read_theirs(kind, theirs, **q.kwargs), kind,
                                      what)
            asked += 1


# ------------------------------------------------------------------------ cases


def _vertices(rng: np.random.Generator, n: int, lo: Any, hi: Any, ndim: int,
              step: float = 12.5) -> np.ndarray:
    """``n`` distinct points, a third of them on the 12.5 lattice (so on chunk and bin
    faces), in input order."""
    pos = rng.uniform(np.broadcast_to(lo, (ndim,)), np.broadcast_to(hi, (ndim,)),
                      size=(n, ndim))
    snap = rng.random(n) < 0.33
    pos[snap] = np.round(pos[snap] / step) * step
    _, first = np.unique(pos, axis=0, return_index=True)
    return pos[np.sort(first)]


def _records(rng: np.random.Generator, pos: np.ndarray, chunk: Any, count: int,
             width: int, intra_share: float = 0.5, repeats: int = 4) -> np.ndarray:
    """``count`` records of ``width`` vertices, about ``intra_share`` of them inside one
    chunk; ``repeats`` of them name one vertex twice."""
    cells = np.floor(pos.astype(np.float32) / np.asarray(chunk, float)).astype(np.int64)
    _, label = np.unique(cells, axis=0, return_inverse=True)
    label = label.reshape(-1)
    big = [m for m in (np.flatnonzero(label == k) for k in range(label.max() + 1))
           if len(m) >= width]
    out = np.empty((count, width), dtype=np.int64)
    for k in range(count):
        if big and rng.random() < intra_share:
            out[k] = rng.choice(big[rng.integers(len(big))], size=width, replace=False)
        else:
            out[k] = rng.choice(len(pos), size=width, replace=False)
    for k in rng.choice(count, size=min(repeats, count), replace=False):
        out[k, rng.integers(1, width)] = out[k, 0]
    return out


def make_case(name: str) -> Linked:
    spec = CASES[name]
    rng = np.random.default_rng(spec["seed"])
    ndim = spec.get("ndim", 3)
    pos = _vertices(rng, spec.get("n", 120), spec.get("lo", -100.0), spec.get("hi", 100.0),
                    ndim)
    n = len(pos)
    chunk = spec.get("chunk", [100.0] * ndim)
    width = spec["width"]
    records = _records(rng, pos, chunk, spec.get("count", 140), width,
                       intra_share=spec.get("intra", 0.5))
    if width == 2:
        records[-3:] = records[:3][:, ::-1]            # an edge and its reverse
    kind = "graph" if width == 2 else "mesh"
    inputs = Linked(kind, pos, records, chunk, spec.get("bin"),
                    vertex_attributes={"index": np.arange(n, dtype=np.int64)},
                    options=dict(spec.get("options", {})))
    if spec.get("objects"):
        pool = np.array([0, 3, 7, 40, 1000, 2 ** 40], dtype=np.int64)
        inputs.object_ids = rng.choice(pool, size=n)
        inputs.vertex_attributes["value"] = rng.normal(size=n).astype(np.float32)
        inputs.object_attributes = {"weight": rng.normal(size=len(np.unique(
            inputs.object_ids)))}
    return inputs


#: name -> how the case is drawn (``width`` 2 makes a graph)
CASES: dict[str, dict[str, Any]] = {
    "mesh3d-tri-objects": {"seed": 1, "width": 3, "objects": True, "bin": [50] * 3,
                           "lo": -150.0, "hi": 150.0},
    "mesh3d-quad-zstd": {"seed": 2, "width": 4, "options": {"compressor": "zstd"}},
    "mesh2d-tri-objects-zstd": {"seed": 3, "width": 3, "ndim": 2, "objects": True,
                                "chunk": [50.0, 75.0], "lo": [-60.0, -80.0],
                                "hi": [90.0, 140.0], "options": {"compressor": "zstd"}},
    "mesh2d-quad": {"seed": 4, "width": 4, "ndim": 2, "chunk": [50.0, 50.0],
                    "lo": -75.0, "hi": 75.0},
    "mesh3d-tri-intra-only": {"seed": 5, "width": 3, "objects": True, "intra": 1.0},
    "mesh3d-tri-one-chunk": {"seed": 6, "width": 3, "chunk": [1000.0] * 3,
                             "objects": True},
    "mesh3d-pentagons": {"seed": 7, "width": 5, "n": 80, "count": 60},
    "mesh3d-tri-shards-zstd": {"seed": 8, "width": 3, "objects": True, "n": 60,
                               "count": 60, "chunk": [50.0] * 3,
                               "options": {"compressor": "zstd", "shard_shape": 2}},
    "mesh3d-quad-float64": {"seed": 9, "width": 4, "objects": True,
                            "options": {"dtype": "float64",
                                        "bounds": ([-200.0] * 3, [200.0] * 3)}},
    "graph3d-objects": {"seed": 10, "width": 2, "objects": True},
    "graph2d-zstd": {"seed": 11, "width": 2, "ndim": 2, "chunk": [40.0, 60.0],
                     "options": {"compressor": "zstd"}},
    "graph3d-intra-only-zstd": {"seed": 12, "width": 2, "objects": True, "intra": 1.0,
                                "options": {"compressor": "zstd"}},
}
#: the cases also run on an LMDB store
SINGLE_FILE = ("mesh3d-tri-objects", "mesh2d-tri-objects-zstd", "graph3d-objects")


# ------------------------------------------------------------------------ tests


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_bytes_as_reference(case: str, tmp_path: Path) -> None:
    """Same inputs, two fresh directories: the same keys and bytes (so what either
    library reads in one it reads in the other), the same summary; kvzarr reads as the
    brute force says, and zarr-vectors, where it answers, as kvzarr."""
    inputs = make_case(case)
    truth = Truth(inputs)
    ours_dir, theirs_dir = tmp_path / "kvzarr.zarr", tmp_path / "zarr_vectors.zarr"
    ours_summary = inputs.write(str(ours_dir))
    theirs_summary = inputs.write_reference(str(theirs_dir))
    assert ours_summary == theirs_summary
    assert_same_tree(ours_dir, theirs_dir, case)
    check_battery(truth, str(ours_dir), str(ours_dir), label=case,
                  seed=sorted(CASES).index(case) % 2, every=2)


@pytest.mark.parametrize("case", SINGLE_FILE)
def test_kvzarr_writes_lmdb_reference_reads(case: str, tmp_path: Path) -> None:
    """kvzarr writes into an LMDB store; zarr-vectors reads it through
    ``kvzarr.ZarrStore`` and answers as kvzarr does, both as the brute force."""
    inputs = make_case(case)
    with kvzarr.open_store(str(tmp_path / "x.lmdb")) as store:
        inputs.write(store)
        check_battery(Truth(inputs), store, kvzarr.ZarrStore(store), label=f"{case}/lmdb",
                      every=3)


@pytest.mark.parametrize("case", SINGLE_FILE)
def test_reference_writes_lmdb_kvzarr_reads(case: str, tmp_path: Path) -> None:
    """zarr-vectors writes into an LMDB store through ``kvzarr.ZarrStore``; kvzarr's
    answers equal the brute force and zarr-vectors' own, and the store holds what
    kvzarr writes into a directory, key for key."""
    inputs = make_case(case)
    with kvzarr.open_store(str(tmp_path / "x.lmdb")) as store:
        inputs.write_reference(kvzarr.ZarrStore(store))
        check_battery(Truth(inputs), store, kvzarr.ZarrStore(store),
                      label=f"{case}/lmdb by zarr-vectors", seed=1, every=3)
        theirs = {k: store.get(k) for k in store.list()}
    inputs.write(str(tmp_path / "ours.zarr"))
    ours = {p.relative_to(tmp_path / "ours.zarr").as_posix()
            for p in (tmp_path / "ours.zarr").rglob("*") if p.is_file()}
    assert sorted(theirs) == sorted(ours)


def test_kvzarr_writes_below_a_path(tmp_path: Path) -> None:
    """A mesh at ``path="nested/mesh"`` of a directory store is the directory
    zarr-vectors writes at that folder, and reads there as the brute force says."""
    inputs = make_case("mesh3d-tri-objects")
    with kvzarr.open_store(str(tmp_path / "x.zarr")) as store:
        inputs.write(store, path="nested/mesh")
        truth = Truth(inputs)
        for q in query_battery(truth)[:8]:
            assert_answer(read_mesh(store, path="nested/mesh", **q.kwargs), truth,
                          q.kwargs, f"below a path {q.kwargs}")
    inputs.write_reference(str(tmp_path / "ref" / "mesh"))
    assert_same_tree(tmp_path / "x.zarr" / "nested" / "mesh", tmp_path / "ref" / "mesh",
                     "mesh below a path")


def test_winding_and_direction_of_every_permutation(tmp_path: Path) -> None:
    """Every order of a triangle and of a quad, inside one chunk and across four,
    degenerate ones included, comes back in its own order (each is a distinct
    coordinate tuple, so the multiset comparison checks every permutation); the same
    for edges both ways."""
    from itertools import permutations

    pos = np.array([[10, 10, 10], [20, 10, 10], [10, 20, 10], [20, 20, 10],      # chunk 0
                    [110, 10, 10], [10, 110, 10], [10, 10, 110], [110, 110, 110]],
                   dtype=float)
    tri = [list(p) for base in ([0, 1, 2], [0, 4, 5], [4, 6, 7])
           for p in permutations(base)] + [[0, 0, 4], [4, 0, 0], [6, 6, 6]]
    quad = [list(p) for base in ([0, 1, 2, 3], [0, 4, 5, 6]) for p in permutations(base)]
    for name, records in (("tri", tri), ("quad", quad), ("edges", [[0, 1], [1, 0], [0, 4],
                                                                  [4, 0], [7, 7], [5, 6]])):
        kind = "graph" if name == "edges" else "mesh"
        inputs = Linked(kind, pos, np.array(records), [100.0] * 3,
                        object_ids=np.array([5, 5, 1, 1, 5, 9, 9, 1]))
        truth = Truth(inputs)
        directory = tmp_path / f"{name}.zarr"
        inputs.write(str(directory))
        inputs.write_reference(str(tmp_path / f"{name}-ref.zarr"))
        assert_same_tree(directory, tmp_path / f"{name}-ref.zarr", name)
        check_battery(truth, str(directory), str(directory), label=name)


@pytest.mark.parametrize("case", ["mesh3d-tri-objects", "mesh3d-quad-zstd",
                                  "mesh3d-pentagons", "graph3d-objects"])
def test_empty_answers_keep_the_record_width(case: str) -> None:
    """An answer without vertices still has ``(0, L)`` records, L the store's width
    (zarr-vectors' ``_empty_mesh_result`` gives ``(0, link_width)``)."""
    inputs = make_case(case)
    store = kvzarr.MemoryStore()
    inputs.write(store)
    hi = inputs.vertices.max(axis=0) + 1000
    for query in ({"chunks": []}, {"bbox": (hi.tolist(), (hi + 1).tolist())},
                  {"object_ids": [123456789]}, {"chunks": [(99,) * 3]}):
        got = read_ours(inputs.kind, store, **query)
        _, records = unpack(got, inputs.kind, str(query))
        assert records.shape == (0, inputs.width), f"{case} {query}: {records.shape}"


def test_multichannel_vertex_attribute_names_its_channels(tmp_path: Path) -> None:
    """An (N, 2) vertex attribute on a mesh: zarr-vectors' mesh and graph writers
    declare it with ``row_shape`` [] and no ``channel_names``, which its own cells (two
    values per vertex) contradict; kvzarr declares the channels. Everything else is the
    same bytes, and kvzarr reads the attribute as (N, 2) from both stores."""
    inputs = make_case("mesh3d-tri-objects")
    pair = np.arange(2 * len(inputs.vertices), dtype=np.float32).reshape(-1, 2)
    inputs.vertex_attributes["pair"] = pair
    inputs.write(str(tmp_path / "a.zarr"))
    inputs.write_reference(str(tmp_path / "b.zarr"))
    assert_same_tree(tmp_path / "a.zarr", tmp_path / "b.zarr", "(N, 2) vertex attribute",
                     channels_named=("pair",))
    ours = json.loads((tmp_path / "a.zarr/0/vertex_attributes/pair/zarr.json").read_text())
    assert ours["attributes"]["row_shape"] == [2]
    assert ours["attributes"]["channel_names"] == ["ch0", "ch1"]
    for store in ("a.zarr", "b.zarr"):
        got = read_points(str(tmp_path / store), attribute_names=["pair"])
        assert got["vertex_attributes"]["pair"].shape == (len(pair), 2)
        assert sorted(map(tuple, got["vertex_attributes"]["pair"].tolist())) == sorted(
            map(tuple, pair.tolist()))


def test_same_bytes_with_one_object_numbered_zero(tmp_path: Path) -> None:
    """Every vertex in object 0 (what no object ids mean): the ``object_ids`` array
    holds one 0, its fill value, and zarr-vectors (zarr-python) does not store a chunk
    equal to the fill value."""
    pos = np.array([[1.0, 2.0, 3.0], [150.0, 2.0, 3.0], [3.0, 3.0, 3.0]])
    for ids in (None, np.zeros(3, dtype=np.int64)):
        inputs = Linked("mesh", pos, np.array([[0, 1, 2]]), [100.0] * 3, object_ids=ids)
        name = "none" if ids is None else "zeros"
        inputs.write(str(tmp_path / f"{name}-a.zarr"))
        inputs.write_reference(str(tmp_path / f"{name}-b.zarr"))
        assert_same_tree(tmp_path / f"{name}-a.zarr", tmp_path / f"{name}-b.zarr",
                         f"object ids {name}")


def test_mesh_without_faces_reads_empty_faces(tmp_path: Path) -> None:
    """Vertices and no faces: same bytes as zarr-vectors; faces come back ``(0, 3)``."""
    pos = np.array([[1.0, 2.0, 3.0], [150.0, 2.0, 3.0]])
    inputs = Linked("mesh", pos, np.zeros((0, 3), dtype=np.int64), [100.0] * 3)
    inputs.write(str(tmp_path / "a.zarr"))
    inputs.write_reference(str(tmp_path / "b.zarr"))
    assert_same_tree(tmp_path / "a.zarr", tmp_path / "b.zarr", "no faces")
    got = read_mesh(str(tmp_path / "a.zarr"))
    np.testing.assert_array_equal(got["vertices"], pos.astype(np.float32))
    assert got["faces"].shape == (0, 3)


# ----------------------------------------------------------------------- golden


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_golden_agrees_with_brute_force_under_reference(name: str) -> None:
    """zarr-vectors reading its own golden store gives the brute-force answers, so a
    failure of kvzarr on it is kvzarr's, not the model's."""
    inputs = Linked.load(name)
    truth = Truth(inputs)
    path = str(GOLDEN / f"{name}.zarr")
    for q in query_battery(truth):
        if q.reference:
            assert_answer(read_theirs(inputs.kind, path, **q.kwargs), truth, q.kwargs,
                          f"zarr-vectors {name} {q.kwargs}")


@pytest.mark.parametrize("kind", ["directory", "memory", "lmdb"])
@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_kvzarr_reads_golden(name: str, kind: str, tmp_path: Path) -> None:
    """A golden store, read in place or copied key for key into a memory or LMDB store,
    reads as the brute force says (and as zarr-vectors reads it)."""
    inputs = Linked.load(name)
    truth = Truth(inputs)
    path = str(GOLDEN / f"{name}.zarr")
    if kind == "directory":
        check_battery(truth, path, path, label=f"golden {name}", every=3)
        return
    store = (kvzarr.MemoryStore() if kind == "memory"
             else kvzarr.open_store(str(tmp_path / "x.lmdb")))
    try:
        copy_directory(GOLDEN / f"{name}.zarr", store)
        check_battery(truth, store, label=f"golden {name}/{kind}", seed=2)
    finally:
        store.close()


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_kvzarr_rewrites_golden_byte_for_byte(name: str, tmp_path: Path) -> None:
    """kvzarr writing a golden store's inputs writes the golden store."""
    inputs = Linked.load(name)
    inputs.write(str(tmp_path / f"{name}.zarr"))
    multichannel = tuple(n for n, v in inputs.vertex_attributes.items() if np.ndim(v) == 2)
    assert_same_tree(tmp_path / f"{name}.zarr", GOLDEN / f"{name}.zarr", f"golden {name}",
                     channels_named=multichannel)


# ------------------------------------------------------------------- hypothesis

STEP = 12.5


@st.composite
def random_linked(draw: Any) -> Linked:
    """Small meshes and graphs: 2 or 3 axes, vertices on a 12.5 lattice either side of
    zero (so on chunk faces, and sometimes two at one place), chunks of 25 to 100,
    records of width 2 (graphs) to 4, any vertices (repeats too), with or without
    object ids."""
    ndim = draw(st.integers(2, 3))
    n = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    pos = rng.integers(-8, 9, size=(n, ndim)) * STEP
    width = draw(st.sampled_from([2, 3, 4]))
    count = draw(st.integers(0, 50))
    records = rng.integers(0, n, size=(count, width))
    chunk = [draw(st.sampled_from([25.0, 50.0, 100.0])) for _ in range(ndim)]
    inputs = Linked("graph" if width == 2 else "mesh", pos, records, chunk)
    if draw(st.booleans()):
        inputs.object_ids = rng.integers(0, 4, size=n) * 11
    return inputs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_linked())
def test_random_against_brute_force(inputs: Linked) -> None:
    truth = Truth(inputs)
    store = kvzarr.MemoryStore()
    inputs.write(store)
    for q in query_battery(truth, seed=len(inputs.vertices)):
        assert_answer(read_ours(inputs.kind, store, **q.kwargs), truth, q.kwargs,
                      f"random {q.kwargs}")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_linked())
def test_random_same_bytes_as_reference(inputs: Linked) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs = Path(tmp) / "kvzarr.zarr", Path(tmp) / "zarr_vectors.zarr"
        inputs.write(str(ours))
        inputs.write_reference(str(theirs))
        assert_same_tree(ours, theirs, "random")
        truth = Truth(inputs)
        for q in query_battery(truth)[:14]:
            got = read_ours(inputs.kind, str(ours), **q.kwargs)
            assert_answer(got, truth, q.kwargs, f"random {q.kwargs}")
            if q.reference:
                assert_like_reference(got, read_theirs(inputs.kind, str(ours), **q.kwargs),
                                      inputs.kind, f"random {q.kwargs}")


# -------------------------------------------------------------------- bad input

POS = np.array([[10, 10, 10], [60, 10, 10], [210, 10, 10], [250, 260, 10]], dtype=float)
FACES = np.array([[0, 1, 2], [1, 2, 3]])
EDGES = np.array([[0, 1], [2, 3], [3, 0]])
GOOD = dict(chunk_shape=(200,) * 3)




@pytest.fixture(params=["memory", "lmdb", "dir"])
def store(request: Any, tmp_path: Path) -> Any:
    """A store already holding a mesh."""
    if request.param == "memory":
        st_ = kvzarr.MemoryStore()
    else:
        suffix = {"lmdb": ".lmdb", "dir": ".zarr"}[request.param]
        st_ = kvzarr.open_store(str(tmp_path / f"x{suffix}"))
    write_mesh(st_, POS, FACES, object_ids=[0, 1, 1, 2],
               vertex_attributes={"a": np.arange(4)}, **GOOD)
    yield st_
    st_.close()


BAD_MESHES = {
    "face naming a negative vertex": dict(faces=np.array([[0, 1, -1]])),
    "face naming vertex N": dict(faces=np.array([[0, 1, 4]])),
    "face naming a huge vertex": dict(faces=np.array([[0, 1, 2 ** 40]])),
    "faces of width 2": dict(faces=np.array([[0, 1], [1, 2]])),
    "faces of width 1": dict(faces=np.array([[0], [1]])),
    "faces 1-D": dict(faces=np.array([0, 1, 2])),
    "faces 3-D": dict(faces=np.zeros((1, 3, 1), dtype=np.int64)),
    "float faces": dict(faces=np.array([[0.0, 1.0, 2.0]])),
    "fractional faces": dict(faces=np.array([[0.5, 1.0, 2.0]])),
    "text faces": dict(faces=np.array([["0", "1", "2"]])),
    "boolean faces": dict(faces=np.array([[True, False, True]])),
    "NaN vertex": dict(vertices=np.array([[0, 0, np.nan], [1, 1, 1], [2, 2, 2]])),
    "infinite vertex": dict(vertices=np.array([[0, 0, np.inf], [1, 1, 1], [2, 2, 2]])),
    "vertices 1-D": dict(vertices=np.arange(4.0)),
    "out_of_bounds ignore": dict(out_of_bounds="ignore"),
    "vertices outside the bounds": dict(bounds=([0, 0, 0], [100, 100, 100])),
    "object ids of the wrong length": dict(object_ids=[0, 1]),
    "object ids that are not integers": dict(object_ids=[0.5, 1, 2, 3]),
    "vertex attribute of the wrong length": dict(vertex_attributes={"a": np.arange(3)}),
    "object attribute with a row per vertex": dict(object_ids=[0, 1, 1, 2],
                                                   object_attributes={"w": np.arange(4.0)}),
    "draco encoding": dict(encoding="draco"),
    "unknown compressor": dict(compressor="lzma-please"),
    "bins that do not divide chunks": dict(bin_shape=(60,) * 3),
}

BAD_GRAPHS = {
    "edges of width 3": dict(edges=np.array([[0, 1, 2]])),
    "edges of width 1": dict(edges=np.array([[0], [1]])),
    "edges 1-D": dict(edges=np.array([0, 1])),
    "edge naming a negative node": dict(edges=np.array([[0, -1]])),
    "edge naming node N": dict(edges=np.array([[4, 0]])),
    "float edges": dict(edges=np.array([[0.0, 1.0]])),
    "NaN position": dict(positions=np.array([[0, 0, np.nan], [1, 1, 1], [2, 2, 2],
                                             [3, 3, 3]])),
    "out_of_bounds ignore": dict(out_of_bounds="ignore"),
    "skeleton of two trees in one object": dict(kind="skeleton",
                                                edges=np.array([[1, 0], [3, 2]])),
    "unknown kind": dict(kind="tree-ish"),
    "link attributes": dict(link_attributes={"w": np.arange(3.0)}),
    "object ids of the wrong length": dict(object_ids=[0, 1, 2]),
}

UNSUPPORTED = {"draco encoding", "link attributes"}


@pytest.mark.parametrize("case", sorted(BAD_MESHES))
def test_bad_mesh_raises_and_changes_nothing(store: Any, case: str) -> None:
    args = {**GOOD, **BAD_MESHES[case]}
    vertices = args.pop("vertices", POS)
    faces = args.pop("faces", FACES)
    before = snapshot(store)
    with pytest.raises(errors.KvzarrError) as info:
        write_mesh(store, vertices, faces, **args)
    if case in UNSUPPORTED:
        assert isinstance(info.value, errors.UnsupportedOperationError), repr(info.value)
    else:
        assert isinstance(info.value, (errors.VectorDataError, errors.MetadataError)), (
            repr(info.value))
    assert str(info.value)
    assert snapshot(store) == before


@pytest.mark.parametrize("case", sorted(BAD_GRAPHS))
def test_bad_graph_raises_and_changes_nothing(store: Any, case: str) -> None:
    args = {**GOOD, **BAD_GRAPHS[case]}
    positions = args.pop("positions", POS)
    edges = args.pop("edges", EDGES)
    before = snapshot(store)
    with pytest.raises(errors.KvzarrError) as info:
        write_graph(store, positions, edges, **args)
    if case in UNSUPPORTED:
        assert isinstance(info.value, errors.UnsupportedOperationError), repr(info.value)
    else:
        assert isinstance(info.value, (errors.VectorDataError, errors.MetadataError,
                                       errors.UnsupportedOperationError)), repr(info.value)
    assert str(info.value)
    assert snapshot(store) == before


BAD_READS = {
    "missing level": dict(level=1),
    "negative level": dict(level=-1),
    "bbox corner of the wrong length": dict(bbox=([0, 0], [1, 1])),
    "bbox with NaN": dict(bbox=([0, 0, np.nan], [1, 1, 1])),
    "chunk of the wrong length": dict(chunks=[(0, 0)]),
    "object ids that are text": dict(object_ids=["a"]),
    "attribute filter": dict(attribute_filter={"a": 1}),
}


@pytest.mark.parametrize("case", sorted(BAD_READS))
def test_bad_read_raises(store: Any, case: str) -> None:
    for read in (read_mesh, read_graph):
        with pytest.raises(errors.KvzarrError):
            read(store, **BAD_READS[case])


def test_reading_a_point_cloud_as_a_mesh(tmp_path: Path) -> None:
    """A point cloud has no links: read as a mesh, it is its vertices and no faces."""
    store = kvzarr.MemoryStore()
    write_points(store, POS, **GOOD)
    got = read_mesh(store)
    assert got["vertex_count"] == 4 and got["face_count"] == 0
