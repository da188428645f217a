"""Polylines and streamlines shared with zarr-vectors 0.9.2, the reference implementation
of the Zarr Vector Format (https://github.com/AllenInstitute/zarr-vectors-py).

* both libraries write the same inputs into two directories: same keys, same bytes, same
  JSON (3-D and 2-D, negative coordinates, long lines crossing and re-entering chunks,
  single-vertex and empty polylines, vertex, object and group attributes, zstd, blosc,
  shards, ``geometry_type="polyline"``, float64 vertices, explicit bounds);
* kvzarr writes on every store kind (memory, directory, zip, LMDB, SQLite), zarr-vectors
  reads (through ``kvzarr.ZarrStore`` or the directory path) and validates the store;
  zarr-vectors writes into kvzarr stores through ``kvzarr.ZarrStore``, kvzarr reads;
* golden stores written by zarr-vectors (``golden/polylines/``, see ``golden/README.md``)
  read by kvzarr on every store kind;
* random polylines drawn by hypothesis against the brute force;
* bad input raises a ``kvzarr.errors`` exception and leaves the store as it was.

Every answer is checked against a brute force computed here with numpy from the inputs
alone. A polyline's *runs* are its maximal stretches of consecutive vertices in one chunk
(``floor(p / chunk_shape)`` of the stored float32 values, in float64), in path order; a
full read returns every polyline (in id order) as its list of runs. An empty polyline
has an empty manifest, which the format defines as an absent object: no read returns it.

* ``object_ids``: those polylines in the order asked (repeats repeated, unknown skipped);
  ``group_ids``: the sorted union of the groups' members (intersected with
  ``object_ids`` when both are given);
* ``bbox`` (kvzarr): the selected polylines with at least one vertex in the closed box
  (``lo <= p <= hi`` on every axis, float64), whole. zarr-vectors answers by chunk
  instead (a polyline whole iff one of its runs lies in a present chunk of the box's
  chunk range ``floor(lo / chunk) .. floor(hi / chunk)``); the reference is checked
  against that model, kvzarr against the exact one;
* ``chunks`` (both libraries): each polyline's runs outside the whitelist are dropped;
  every maximal stretch of consecutive runs inside it is one output polyline (the object
  id repeated), as ``zarr_vectors.types.polylines.read_polylines`` crops;
* ``vertex_attributes``: the rows of every returned vertex, in order. Every store has a
  vertex attribute ``index`` holding each vertex's row in the joined input, so the order
  of an answer is checked, not only its contents.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr import errors
from kvzarr.vectors import read_polylines, write_points, write_polylines

from .test_points_interop import (
    BACKENDS,
    assert_same_tree,
    backend,
    copy_directory,
    golden_npz,
    reference_source,
    snapshot,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:The data type \\(VariableLengthBytes\\(\\)\\) does not have a Zarr V3")

zv_lines = pytest.importorskip("zarr_vectors.types.polylines")
zv_store = pytest.importorskip("zarr_vectors.core.store")
zv_validate = pytest.importorskip("zarr_vectors.validate")

GOLDEN = Path(__file__).resolve().parent / "golden" / "polylines"
GOLDEN_NAMES = sorted(p.stem for p in GOLDEN.glob("*.npz"))
STEP = 12.5


# ------------------------------------------------------------------------ inputs


def _cut(flat: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    return np.split(np.asarray(flat), np.cumsum(lengths)[:-1])


@dataclass
class Lines:
    """What a writer was given: the polylines (as passed, float64) and the
    ``write_polylines`` keywords. Vertex attributes are kept flat (one row per vertex of
    the joined polylines) and cut per polyline for the writers."""

    lines: list[np.ndarray]
    chunk_shape: Any
    vertex_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    object_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)
    group_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, name: str) -> "Lines":
        data, spec, prefixed = golden_npz(GOLDEN / f"{name}.npz")

        options = {k: spec[k] for k in ("bin_shape", "compressor", "shard_shape",
                                        "geometry_type") if spec.get(k)}
        return cls(_cut(data["vertices"], data["line_lengths"].tolist()),
                   spec["chunk_shape"], vertex_attributes=prefixed("va__"),
                   object_attributes=prefixed("oa__"),
                   groups={int(g): v.tolist() for g, v in prefixed("group__").items()},
                   group_attributes=prefixed("ga__"), options=options)

    def variant(self, **options: Any) -> "Lines":
        """The same data written with other options (compressor, shards, dtype, ...);
        ``None`` removes an option."""
        merged = {k: v for k, v in {**self.options, **options}.items() if v is not None}
        return Lines(self.lines, self.chunk_shape, self.vertex_attributes,
                     self.object_attributes, self.groups, self.group_attributes, merged)

    @property
    def lengths(self) -> list[int]:
        return [len(line) for line in self.lines]

    def kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"chunk_shape": self.chunk_shape, **self.options}
        if self.vertex_attributes:
            kw["vertex_attributes"] = {n: _cut(v, self.lengths)
                                       for n, v in self.vertex_attributes.items()}
        if self.object_attributes:
            kw["object_attributes"] = self.object_attributes
        if self.groups:
            kw["groups"] = self.groups
        if self.group_attributes:
            kw["group_attributes"] = self.group_attributes
        return kw


def _walk(rng: np.random.Generator, n: int, start: Any, reach: int = 3) -> np.ndarray:
    start = np.asarray(start, dtype=float)
    moves = rng.integers(-reach, reach + 1, size=(max(n - 1, 0), len(start))) * STEP
    return np.cumsum(np.vstack([start, moves]), axis=0)[:n]


def edge_lines() -> Lines:
    """Empty polylines (first, middle, last), single vertices exactly on chunk corners,
    a line along a chunk face, a line leaving a chunk and coming straight back, a group
    holding an empty polyline."""
    rng = np.random.default_rng(7)
    lines = [np.zeros((0, 3)),
             np.array([[0.0, 0.0, 0.0]]),
             np.array([[-50.0, 50.0, 0.0]]),
             _walk(rng, 30, [0.0, 0.0, 0.0]),
             np.zeros((0, 3)),
             np.array([[50.0, 0.0, 0.0], [50.0, 25.0, 0.0], [50.0, 49.0, 0.0],
                       [50.0, 50.0, 0.0], [50.0, 49.0, 0.0]]),
             np.array([[10.0, 10.0, 10.0], [60.0, 10.0, 10.0], [10.0, 10.0, 10.0],
                       [60.0, 10.0, 10.0]]),
             np.zeros((0, 3))]
    n = sum(len(line) for line in lines)
    return Lines(lines, (50, 50, 50),
                 vertex_attributes={"index": np.arange(n, dtype=np.int64),
                                    "v": rng.normal(size=n).astype(np.float32)},
                 object_attributes={"w": rng.normal(size=len(lines)).astype(np.float32)},
                 groups={0: [4, 3], 1: [0, 7], 2: [6, 1, 4]},
                 group_attributes={"g": np.array([1, 2, 3], dtype=np.int16)})


def fill_valued_lines() -> Lines:
    """One polyline (so its id column is ``[0]``), an all-NaN object attribute and an
    all-zero group attribute: every non-spatial array holds only its fill value, and
    zarr-python (so zarr-vectors) stores no chunk for such an array."""
    return Lines([np.array([[0.0, 0.0], [12.5, 30.0]])], (25, 25),
                 vertex_attributes={"index": np.arange(2, dtype=np.int64)},
                 object_attributes={"n": np.array([np.nan])}, groups={0: [0]},
                 group_attributes={"g": np.zeros(1)})


EXTRA_CASES = {"edge-lines": edge_lines, "fill-valued": fill_valued_lines}


# ------------------------------------------------------------------- brute force


class Truth:
    """Every answer of ``read_polylines`` on a store written from ``inputs``, by numpy
    (see the module docstring)."""

    def __init__(self, inputs: Lines) -> None:
        self.inputs = inputs
        dtype = np.dtype(inputs.options.get("dtype", "float32"))
        self.stored = [line.astype(dtype) for line in inputs.lines]
        self.ndim = inputs.lines[0].shape[1]
        self.chunk = np.broadcast_to(np.asarray(inputs.chunk_shape, np.float64),
                                     (self.ndim,))
        self.wide = [s.astype(np.float64) for s in self.stored]
        self.first = np.concatenate([[0], np.cumsum(inputs.lengths)[:-1]]).astype(int)
        #: per polyline: its runs as (chunk, start, stop), vertex rows of the polyline
        self.runs: list[list[tuple[tuple[int, ...], int, int]]] = []
        for wide in self.wide:
            chunks = np.floor(wide / self.chunk).astype(np.int64)
            cut = np.flatnonzero(np.any(chunks[1:] != chunks[:-1], axis=1)) + 1
            starts = np.concatenate([[0], cut]).astype(int) if len(wide) else []
            stops = list(starts[1:]) + [len(wide)]
            self.runs.append([(tuple(chunks[a].tolist()), int(a), int(b))
                              for a, b in zip(starts, stops)])
        self.present = sorted({c for runs in self.runs for c, _, _ in runs})
        self.ids = [k for k, runs in enumerate(self.runs) if runs]
        self.names = sorted(inputs.vertex_attributes)

    def members(self, group_ids: list[int]) -> list[int]:
        found: set[int] = set()
        for gid in group_ids:
            found.update(int(i) for i in self.inputs.groups.get(gid, []))
        return sorted(found)

    def _selection(self, object_ids: Any, group_ids: Any) -> list[int]:
        if object_ids is None and group_ids is None:
            wanted = list(range(len(self.runs)))
        else:
            wanted = [int(i) for i in object_ids] if object_ids is not None else None
            if group_ids is not None:
                members = self.members(list(group_ids))
                wanted = members if wanted is None else sorted(set(members) & set(wanted))
        return [k for k in wanted if 0 <= k < len(self.runs) and self.runs[k]]

    def _in_box(self, k: int, lo: np.ndarray, hi: np.ndarray, runs: Any = None) -> bool:
        """Polyline ``k`` (or those of its runs) has a vertex in the closed box."""
        rows = np.concatenate([np.arange(a, b) for _, a, b in (runs or self.runs[k])])
        wide = self.wide[k][rows]
        return bool(np.any(np.all((wide >= lo) & (wide <= hi), axis=1)))

    def _box_chunks(self, lo: np.ndarray, hi: np.ndarray) -> set[tuple[int, ...]]:
        """zarr-vectors' reading of a box: the present chunks of its chunk range."""
        if np.any(lo > hi):
            return set()
        first, last = np.floor(lo / self.chunk), np.floor(hi / self.chunk)
        return {c for c in self.present
                if np.all((np.array(c) >= first) & (np.array(c) <= last))}

    def answer(self, *, bbox: Any = None, chunks: Any = None, object_ids: Any = None,
               group_ids: Any = None, attribute_names: Any = None,
               chunk_granular: bool = False) -> dict[str, Any]:
        """kvzarr's answer; with ``chunk_granular`` zarr-vectors' (boxes by chunk)."""
        box = None
        if bbox is not None:
            box = tuple(np.broadcast_to(np.asarray(c, np.float64), (self.ndim,))
                        for c in bbox)
        pieces: list[tuple[int, list[tuple[tuple[int, ...], int, int]]]] = []
        for k in self._selection(object_ids, group_ids):
            runs = self.runs[k]
            if chunks is not None:
                allowed = {tuple(int(v) for v in c) for c in chunks}
                if box is not None and chunk_granular:
                    allowed &= self._box_chunks(*box)
                stretches, stretch = [], []
                for run in runs + [None]:
                    if run is not None and run[0] in allowed:
                        stretch.append(run)
                    elif stretch:
                        stretches.append(stretch)
                        stretch = []
                if box is not None and not chunk_granular:
                    stretches = [s for s in stretches if self._in_box(k, *box, s)]
                pieces += [(k, s) for s in stretches]
                continue
            if box is not None:
                if chunk_granular:
                    if not {c for c, _, _ in runs} & self._box_chunks(*box):
                        continue
                elif not self._in_box(k, *box):
                    continue
            pieces.append((k, runs))
        names = self.names if attribute_names is None else list(attribute_names)
        polylines, attrs = [], {n: [] for n in names}
        for k, runs in pieces:
            polylines.append([self.stored[k][a:b] for _, a, b in runs])
            for n in names:
                flat = np.asarray(self.inputs.vertex_attributes[n])
                attrs[n] += [flat[self.first[k] + a:self.first[k] + b] for _, a, b in runs]
        vertex_attributes = {}
        for n in names:
            flat = np.asarray(self.inputs.vertex_attributes[n])
            vertex_attributes[n] = (np.concatenate(attrs[n]) if attrs[n]
                                    else flat[:0])
        return {"polylines": polylines, "object_ids": [k for k, _ in pieces],
                "vertex_attributes": vertex_attributes, "ndim": self.ndim,
                "polyline_count": len(pieces),
                "vertex_count": sum(b - a for _, runs in pieces for _, a, b in runs)}


@dataclass
class Query:
    kwargs: dict[str, Any]
    #: zarr-vectors can be asked this (finite boxes, known groups; its answers to boxes
    #: are compared with the chunk-granular model)
    reference: bool = True
    #: one of the few queries zarr-vectors is asked on every store (its reads take
    #: 0.1 s each; the whole battery goes to it on the golden stores)
    core: bool = False

    @property
    def crop(self) -> bool:
        return "chunks" in self.kwargs

    def reference_kwargs(self) -> dict[str, Any]:
        """zarr-vectors' read_polylines has no ``attribute_names`` (it returns every
        attribute)."""
        return {k: v for k, v in self.kwargs.items() if k != "attribute_names"}


def query_battery(truth: Truth, seed: int = 0) -> list[Query]:
    """Full reads, attribute subsets, boxes (random, on chunk faces, on vertices, one
    vertex, everything, scalar corners, inverted, outside, infinite), object and group
    selections (unknown ids, repeats, empty), boxes with selections, and chunk
    whitelists (alone and with selections)."""
    rng = np.random.default_rng(seed)
    names = truth.names
    every = np.concatenate([truth.wide[k] for k in truth.ids])
    lo, hi = every.min(axis=0), every.max(axis=0)
    extent = np.maximum(hi - lo, 1.0)
    qs = [Query({}, core=True), Query({"attribute_names": names[:1]}),
          Query({"attribute_names": []})]

    def box(b: Any, reference: bool = True, **more: Any) -> Query:
        return Query({"bbox": b, **more}, reference=reference)

    for k in range(5):
        side = extent * rng.uniform(0.1, 0.5, size=len(lo))
        a = lo - 0.1 * extent + rng.random(len(lo)) * extent
        qs.append(box((a.tolist(), (a + side).tolist())))
        qs[-1].core = k == 0
    for _ in range(2):                                     # faces on chunk faces
        a = np.floor(rng.uniform(lo, hi) / truth.chunk) * truth.chunk
        qs.append(box((a.tolist(), (a + truth.chunk).tolist())))
    i, j = rng.choice(len(every), size=2)
    qs.append(box((np.minimum(every[i], every[j]).tolist(),
                   np.maximum(every[i], every[j]).tolist())))   # corners on vertices
    qs.append(box((every[i].tolist(), every[i].tolist())))     # one vertex, closed
    qs.append(box((lo.tolist(), hi.tolist())))                 # everything, tight
    qs.append(box((float(lo.min()), float(hi.max()))))         # scalar corners
    qs.append(box((hi.tolist(), lo.tolist())))                 # hi < lo: nothing
    qs.append(box(((hi + 1000).tolist(), (hi + 2000).tolist())))
    qs.append(box((-math.inf, math.inf), reference=False))
    qs.append(box(([-math.inf] * truth.ndim, ((lo + hi) / 2).tolist()), reference=False))
    ids = truth.ids
    n_lines = len(truth.runs)
    qs.append(Query({"object_ids": [ids[len(ids) // 2], ids[0], n_lines + 977, ids[-1],
                                    ids[0]]}, core=True))
    qs.append(Query({"object_ids": ids[::-1], "attribute_names": names[-1:]}))
    qs.append(Query({"object_ids": [ids[-1]]}))
    qs.append(Query({"object_ids": []}))
    a = rng.uniform(lo, hi)
    qs.append(box((a.tolist(), (a + extent / 2).tolist()), object_ids=ids[::-1][:4]))
    gids = sorted(truth.inputs.groups)
    for gid in gids:
        qs.append(Query({"group_ids": [gid]}))
    if gids:
        qs.append(Query({"group_ids": gids[::-1]}, core=True))
        qs.append(Query({"group_ids": gids + [max(gids) + 5]}, reference=False))
        qs.append(Query({"group_ids": gids, "object_ids": ids[::2]}))
        qs.append(box((lo.tolist(), ((lo + hi) / 2).tolist()), group_ids=gids))
    present = truth.present
    absent = tuple(int(c) + 50 for c in present[0])
    qs.append(Query({"chunks": present[::2] + [absent]}, core=True))
    qs.append(Query({"chunks": present}))
    qs.append(Query({"chunks": []}))
    qs.append(Query({"chunks": present[1::3], "attribute_names": names[:1]}))
    qs.append(Query({"chunks": present[::2], "object_ids": ids[::-1][:5]}))
    if gids:
        qs.append(Query({"chunks": present[::3], "group_ids": gids[:1]}))
    return qs


# -------------------------------------------------------------------- comparing


def assert_lines(got: dict[str, Any], want: dict[str, Any], what: str) -> None:
    """``got`` equals ``want`` exactly: keys, counts, ids, every run's values, dtype and
    shape, and the attributes (values, dtypes, order)."""
    assert set(got) == set(want), f"{what}: keys {sorted(got)} != {sorted(want)}"
    for key in ("ndim", "polyline_count", "vertex_count"):
        assert got[key] == want[key], f"{what}: {key} {got[key]} != {want[key]}"
    assert [int(i) for i in got["object_ids"]] == want["object_ids"], (
        f"{what}: object_ids {list(got['object_ids'])} != {want['object_ids']}")
    assert len(got["polylines"]) == len(want["polylines"]), f"{what}: polyline count"
    for p, (g_line, w_line) in enumerate(zip(got["polylines"], want["polylines"])):
        assert [len(r) for r in g_line] == [len(r) for r in w_line], (
            f"{what}: polyline {p} (id {want['object_ids'][p]}) runs of "
            f"{[len(r) for r in g_line]} vertices, expected {[len(r) for r in w_line]}")
        for g, w in zip(g_line, w_line):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (
                f"{what}: polyline {p} run {g.shape} {g.dtype} != {w.shape} {w.dtype}")
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: polyline {p}")
    g_attrs, w_attrs = got["vertex_attributes"], want["vertex_attributes"]
    assert set(g_attrs) == set(w_attrs), f"{what}: attributes {sorted(g_attrs)}"
    for name, w in w_attrs.items():
        g = np.asarray(g_attrs[name])
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{what}: attribute {name} {g.shape} {g.dtype} != {w.shape} {w.dtype}")
        np.testing.assert_array_equal(g, w, err_msg=f"{what}: attribute {name}")


def assert_reference(theirs: dict[str, Any], want: dict[str, Any], what: str) -> None:
    """zarr-vectors' answer equals the (chunk-granular) brute force; an empty answer of
    zarr-vectors carries no attribute columns at all."""
    if want["vertex_count"] == 0 and theirs["vertex_attributes"] == {}:
        want = {**want, "vertex_attributes": {}}
    assert_lines(theirs, want, what)


def check_battery(truth: Truth, read_ours: Any, read_theirs: Any = None, *,
                  label: str = "", crops: bool = False, every: bool = False) -> None:
    """kvzarr against the exact brute force on every query of the battery but the chunk
    whitelists (with ``crops``: on the chunk whitelists only); zarr-vectors, where it
    can be asked, against the chunk-granular brute force, on the ``core`` queries (with
    ``every``: all of them; with ``crops``: the whitelists). Where no box is involved
    the two models are one, so the libraries are compared with each other too."""
    for q in query_battery(truth):
        what = f"{label} {q.kwargs}"
        if q.crop == crops:
            assert_lines(read_ours(**q.kwargs), truth.answer(**q.kwargs), f"kvzarr {what}")
        ask = (q.crop if crops else q.core or every) and q.reference
        if read_theirs is not None and ask:
            theirs = read_theirs(**q.reference_kwargs())
            want = truth.answer(**q.reference_kwargs(), chunk_granular=True)
            assert_reference(theirs, want, f"zarr-vectors {what}")


def reference_write(target: Any, inputs: Lines) -> dict[str, Any]:
    """zarr-vectors' ``write_polylines``. Given a zarr Store (not a path) it would
    create the dataset with default bounds (0..128) and ignore ``bounds=``, so the root
    is created first with the bounds it would infer from a path (the vertices as
    given)."""
    kw = inputs.kwargs()
    if not isinstance(target, str):
        given = np.concatenate(inputs.lines)
        bounds = kw.get("bounds") or (given.min(axis=0).tolist(),
                                      given.max(axis=0).tolist())
        zv_store.create_store(target, bounds=bounds, chunk_shape=tuple(kw["chunk_shape"]),
                              ndim=given.shape[1])
    return zv_lines.write_polylines(target, inputs.lines, **kw)


def check_object_arrays(store: Any, inputs: Lines) -> None:
    """Object and group attributes and group rows, read by zarr-python, equal the
    inputs."""
    if not (inputs.object_attributes or inputs.group_attributes or inputs.groups):
        return
    group = zarr.open_group(kvzarr.ZarrStore(store), mode="r")
    for family, values in (("object_attributes", inputs.object_attributes),
                           ("group_attributes", inputs.group_attributes)):
        for attr, data in values.items():
            got = group[f"0/{family}/{attr}"][...]
            assert got.dtype == data.dtype, f"{family}/{attr}"
            np.testing.assert_array_equal(got, data, err_msg=f"{family}/{attr}")
    if inputs.groups:
        rows = group["0/groups"][...]
        for gid, members in inputs.groups.items():
            np.testing.assert_array_equal(np.frombuffer(rows[gid], dtype="<i8"), members)


# ------------------------------------------------------------------------ cases

#: write configurations: golden inputs with the golden options or other ones
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "streamlines3d": ("streamlines3d", {}),
    "streamlines3d-zstd-shard2": ("streamlines3d", {"compressor": "zstd",
                                                    "shard_shape": 2}),
    "streamlines3d-float64": ("streamlines3d", {"dtype": "float64"}),
    "streamlines3d-bounds": ("streamlines3d", {"bounds": ([-600, -400, -200],
                                                          [400, 300, 300])}),
    "polylines2d": ("polylines2d", {}),
    "polylines2d-plain": ("polylines2d", {"compressor": None, "shard_shape": None}),
    "polylines2d-blosc-streamline": ("polylines2d", {"compressor": "blosc",
                                                     "shard_shape": None,
                                                     "geometry_type": "streamline"}),
    "tracts3d": ("tracts3d", {}),
    "tracts3d-shard": ("tracts3d", {"compressor": None, "shard_shape": (3, 1, 2)}),
}
#: the cases run on every backend; the rest on directory stores only
EVERY_BACKEND = ("streamlines3d-zstd-shard2", "polylines2d")


def case_inputs(case: str) -> Lines:
    golden, options = CASES[case]
    return Lines.load(golden).variant(**options)


def _backend_cases() -> list[Any]:
    return [pytest.param(case, kind, id=f"{case}-{kind}") for case in CASES
            for kind in BACKENDS if kind == "directory" or case in EVERY_BACKEND]


# ---------------------------------------------------------------- byte compatibility


@pytest.mark.parametrize("case", [*CASES, *EXTRA_CASES])
def test_same_bytes_as_reference(case: str, tmp_path: Path) -> None:
    """Same inputs, two fresh directories: the same keys, the same bytes and JSON, and
    the same summary."""
    inputs = EXTRA_CASES[case]() if case in EXTRA_CASES else case_inputs(case)
    ours_dir, theirs_dir = tmp_path / "kvzarr.zarr", tmp_path / "zarr_vectors.zarr"
    ours = write_polylines(str(ours_dir), inputs.lines, **inputs.kwargs())
    theirs = reference_write(str(theirs_dir), inputs)
    assert ours == theirs
    assert_same_tree(ours_dir, theirs_dir, case)


# ----------------------------------------------------------------------- golden


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_golden_stores_agree_with_brute_force_under_reference(name: str) -> None:
    """The golden stores and the brute force describe the same thing: zarr-vectors
    reading its own store gives the chunk-granular brute-force answers (crops included),
    so a failure elsewhere is kvzarr's, not the model's."""
    truth = Truth(Lines.load(name))
    path = str(GOLDEN / f"{name}.zarr")
    for q in query_battery(truth):
        if q.reference:
            want = truth.answer(**q.reference_kwargs(), chunk_granular=True)
            assert_reference(zv_lines.read_polylines(path, **q.reference_kwargs()), want,
                             f"zarr-vectors {name} {q.kwargs}")


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_kvzarr_reads_golden(name: str, kind: str, tmp_path: Path) -> None:
    """A store written by zarr-vectors, copied key for key into each kvzarr store kind,
    reads as the brute force says: full reads, attribute subsets, boxes, objects,
    groups."""
    truth = Truth(Lines.load(name))
    with backend(kind, tmp_path) as store:
        copy_directory(GOLDEN / f"{name}.zarr", store)
        check_battery(truth, lambda **q: read_polylines(store, **q), label=f"{name}/{kind}")


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_kvzarr_crops_golden(name: str) -> None:
    """Chunk whitelists on the golden stores (opened by path, read-only) crop as
    zarr-vectors crops them."""
    truth = Truth(Lines.load(name))
    path = str(GOLDEN / f"{name}.zarr")
    check_battery(truth, lambda **q: read_polylines(path, **q),
                  lambda **q: zv_lines.read_polylines(path, **q), label=name, crops=True)


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_kvzarr_reads_golden_below_a_path(name: str) -> None:
    """The golden store copied under ``nested/lines/`` reads with
    ``path="nested/lines"``."""
    truth = Truth(Lines.load(name))
    store = kvzarr.MemoryStore()
    try:
        copy_directory(GOLDEN / f"{name}.zarr", store, prefix="nested/lines/")
        for q in query_battery(truth, seed=3)[:6]:
            assert_lines(read_polylines(store, path="nested/lines", **q.kwargs),
                         truth.answer(**q.kwargs), f"{name} below a path {q.kwargs}")
    finally:
        store.close()


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_kvzarr_reads_golden_object_arrays(name: str) -> None:
    """Object and group attributes and group rows of a golden store, read through
    zarr-python on a kvzarr store, equal the inputs (read_polylines returns none)."""
    inputs = Lines.load(name)
    store = kvzarr.open_store(str(GOLDEN / f"{name}.zarr"), mode="r")
    try:
        check_object_arrays(store, inputs)
        ids = kvzarr.open_array(store, mode="r", path="0/object_index/object_ids")[...]
        np.testing.assert_array_equal(ids, np.arange(len(inputs.lines)))
    finally:
        store.close()


# ------------------------------------------------------------ interop on every store


@pytest.mark.parametrize(("case", "kind"), _backend_cases())
def test_kvzarr_writes_reference_reads(case: str, kind: str, tmp_path: Path) -> None:
    """kvzarr writes; kvzarr reads as the exact brute force says, zarr-vectors as the
    chunk-granular one (the two agree wherever no box is involved). Object and group
    attributes read by zarr-python equal the inputs."""
    inputs = case_inputs(case)
    truth = Truth(inputs)
    with backend(kind, tmp_path) as store:
        summary = write_polylines(store, inputs.lines, **inputs.kwargs())
        assert summary == {
            "polyline_count": len(inputs.lines), "vertex_count": sum(inputs.lengths),
            "chunk_count": len(truth.present),
            "cross_chunk_link_count": sum(len(r) - 1 for r in truth.runs if r),
            "group_count": len(inputs.groups)}
        source = reference_source(kind, store, tmp_path)
        if kind == "directory":
            report = zv_validate.validate(source, level=5)
            assert report.ok, f"zarr-vectors validation of kvzarr's store: {report.errors}"
        check_battery(truth, lambda **q: read_polylines(store, **q),
                      lambda **q: zv_lines.read_polylines(source, **q),
                      label=f"{case}/{kind}")
        check_object_arrays(store, inputs)


@pytest.mark.parametrize("kind", ["memory", "zip", "lmdb", "sqlite"])
@pytest.mark.parametrize("case", ["polylines2d", "tracts3d"])
def test_reference_writes_kvzarr_reads(case: str, kind: str, tmp_path: Path) -> None:
    """zarr-vectors writes into a kvzarr store through ``kvzarr.ZarrStore``; kvzarr's
    answers equal the brute force, and zarr-vectors reads its own store there too."""
    inputs = case_inputs(case)
    truth = Truth(inputs)
    with backend(kind, tmp_path) as store:
        reference_write(kvzarr.ZarrStore(store), inputs)
        check_battery(truth, lambda **q: read_polylines(store, **q),
                      lambda **q: zv_lines.read_polylines(kvzarr.ZarrStore(store), **q),
                      label=f"{case}/{kind}")
        check_object_arrays(store, inputs)


@pytest.mark.parametrize("case", ["streamlines3d", "polylines2d", "tracts3d-shard"])
def test_chunk_crops_match_reference(case: str, tmp_path: Path) -> None:
    """Chunk whitelists on a store kvzarr wrote: kvzarr, zarr-vectors and the brute force
    give the same cropped polylines (each maximal stretch of consecutive whitelisted runs
    one output polyline, the id repeated)."""
    inputs = case_inputs(case)
    truth = Truth(inputs)
    path = str(tmp_path / "x.zarr")
    write_polylines(path, inputs.lines, **inputs.kwargs())
    check_battery(truth, lambda **q: read_polylines(path, **q),
                  lambda **q: zv_lines.read_polylines(path, **q), label=case, crops=True)


def test_adjacent_whitelisted_runs_stay_one_polyline(tmp_path: Path) -> None:
    """The smallest crop: one polyline through chunks (0,0), (1,0), (2,0); whitelisting
    the first two keeps them joined, as zarr-vectors returns them (its crop splits a
    polyline only where it leaves the whitelist)."""
    line = np.array([[10.0, 10.0], [60.0, 10.0], [110.0, 10.0]])
    path = str(tmp_path / "x.zarr")
    write_polylines(path, [line], chunk_shape=(50, 50))
    theirs = zv_lines.read_polylines(path, chunks=[(0, 0), (1, 0)])
    assert theirs["object_ids"] == [0]
    assert [len(r) for r in theirs["polylines"][0]] == [1, 1]
    ours = read_polylines(path, chunks=[(0, 0), (1, 0)])
    assert ours["object_ids"] == theirs["object_ids"]
    assert [[r.tolist() for r in p] for p in ours["polylines"]] == \
        [[r.tolist() for r in p] for p in theirs["polylines"]]


def test_empty_polylines_are_absent(tmp_path: Path) -> None:
    """Empty polylines are written (as empty manifests, byte for byte as zarr-vectors
    writes them: see test_same_bytes_as_reference) but, like absent objects, never
    returned: not by a full read, not by id, not by group."""
    inputs = edge_lines()
    truth = Truth(inputs)
    path = str(tmp_path / "x.zarr")
    write_polylines(path, inputs.lines, **inputs.kwargs())
    for q in query_battery(truth):
        what = f"edge lines {q.kwargs}"
        assert_lines(read_polylines(path, **q.kwargs), truth.answer(**q.kwargs),
                     f"kvzarr {what}")
        if q.reference:
            assert_reference(zv_lines.read_polylines(path, **q.reference_kwargs()),
                             truth.answer(**q.reference_kwargs(), chunk_granular=True),
                             f"zarr-vectors {what}")


# --------------------------------------------------------- properties (hypothesis)


@st.composite
def random_lines(draw: Any) -> Lines:
    """1 to 6 random walks of 1 to 25 vertices, 2 or 3 axes, steps of up to 3 x 12.5
    per axis from starts either side of zero, chunks of 25, 50 or 100 per axis (so
    vertices sit on chunk faces often and every value is exact in binary); an ``index``
    attribute, sometimes a float one, groups, object attributes, shards."""
    ndim = draw(st.integers(2, 3))
    chunk = [draw(st.sampled_from([25.0, 50.0, 100.0])) for _ in range(ndim)]
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(1, 25))
        start = draw(st.lists(st.integers(-12, 12), min_size=ndim, max_size=ndim))
        steps = draw(st.lists(st.lists(st.integers(-3, 3), min_size=ndim, max_size=ndim),
                              min_size=n - 1, max_size=n - 1))
        lines.append(np.cumsum(np.array([start] + steps, dtype=np.float64), axis=0) * STEP)
    total = sum(len(line) for line in lines)
    inputs = Lines(lines, chunk,
                   vertex_attributes={"index": np.arange(total, dtype=np.int64)})
    if draw(st.booleans()):
        inputs.vertex_attributes["v"] = np.arange(total, dtype=np.float32) / 8
    if draw(st.booleans()):
        members = st.lists(st.integers(0, len(lines) - 1), min_size=1, max_size=4,
                           unique=True)
        inputs.groups = {g: draw(members) for g in range(draw(st.integers(1, 3)))}
        inputs.object_attributes = {"w": np.arange(len(lines), dtype=np.float64)}
    if draw(st.booleans()):
        inputs.options["shard_shape"] = draw(st.integers(1, 3))
    return inputs


@st.composite
def lines_and_queries(draw: Any, crops: bool) -> tuple[Lines, list[dict[str, Any]]]:
    """Random polylines and random queries on them: boxes (corners on the 12.5 grid or
    infinite) alone or with object and group selections, object and group selections,
    or, with ``crops``, chunk whitelists (present chunks and absent ones) alone or with
    selections."""
    inputs = draw(random_lines())
    ndim = len(inputs.chunk_shape)
    n_lines = len(inputs.lines)
    truth = Truth(inputs)
    coord = st.one_of(st.integers(-60, 60).map(lambda k: k * STEP),
                      st.sampled_from([-math.inf, math.inf]))
    corner = st.lists(coord, min_size=ndim, max_size=ndim)
    ids = st.lists(st.integers(-1, n_lines + 1), max_size=6)
    gids = st.lists(st.sampled_from(sorted(inputs.groups) or [0]), max_size=3)
    queries: list[dict[str, Any]] = [{}]
    for _ in range(draw(st.integers(1, 4))):
        q: dict[str, Any] = {}
        if crops:
            near = [tuple(int(v) + d for v in c) for c in truth.present for d in (0, 1)]
            q["chunks"] = draw(st.lists(st.sampled_from(near), max_size=len(near)))
        else:
            q["bbox"] = (draw(corner), draw(corner))
        if draw(st.booleans()):
            q["object_ids"] = draw(ids)
        if inputs.groups and draw(st.booleans()):
            q["group_ids"] = draw(gids)
        queries.append(q)
    return inputs, queries


PROPERTY_SETTINGS = settings(max_examples=60, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(lines_and_queries(crops=False))
def test_random_polylines_against_brute_force(case: tuple[Lines, list]) -> None:
    """Full reads are the input lines cut into runs; boxes select the polylines with a
    vertex inside, whole; object and group selections follow the request."""
    inputs, queries = case
    truth = Truth(inputs)
    store = kvzarr.MemoryStore()
    try:
        write_polylines(store, inputs.lines, **inputs.kwargs())
        for q in queries:
            assert_lines(read_polylines(store, **q), truth.answer(**q), f"kvzarr {q}")
    finally:
        store.close()


@PROPERTY_SETTINGS
@given(lines_and_queries(crops=True))
def test_random_polylines_crops_against_brute_force(case: tuple[Lines, list]) -> None:
    """Chunk whitelists crop as the brute force (and zarr-vectors) crop."""
    inputs, queries = case
    truth = Truth(inputs)
    store = kvzarr.MemoryStore()
    try:
        write_polylines(store, inputs.lines, **inputs.kwargs())
        for q in queries:
            assert_lines(read_polylines(store, **q), truth.answer(**q), f"kvzarr {q}")
    finally:
        store.close()


@settings(max_examples=8, deadline=None)
@given(random_lines())
def test_random_polylines_same_bytes_as_reference(inputs: Lines) -> None:
    """On random polylines, kvzarr's store is zarr-vectors' store, byte for byte."""
    with tempfile.TemporaryDirectory() as tmp:
        ours_dir, theirs_dir = Path(tmp) / "kvzarr.zarr", Path(tmp) / "zarr_vectors.zarr"
        write_polylines(str(ours_dir), inputs.lines, **inputs.kwargs())
        reference_write(str(theirs_dir), inputs)
        assert_same_tree(ours_dir, theirs_dir, "random polylines")


# -------------------------------------------------------------------- bad input

LINES = [np.array([[10.0, 10.0, 10.0], [110.0, 10.0, 10.0], [110.0, 120.0, 10.0]]),
         np.array([[5.0, 5.0, 5.0]])]
GOOD = dict(chunk_shape=(100,) * 3)


@pytest.fixture(params=["memory", "lmdb", "sqlite", "zip", "dir"])
def lines_store(request: Any, tmp_path: Path) -> Any:
    """A store already holding a polyline dataset (with an attribute and a group)."""
    if request.param == "memory":
        st_ = kvzarr.MemoryStore()
    else:
        suffix = {"lmdb": ".lmdb", "sqlite": ".sqlite", "zip": ".zip", "dir": ".zarr"}
        st_ = kvzarr.open_store(str(tmp_path / f"x{suffix[request.param]}"))
    write_polylines(st_, LINES, vertex_attributes={"a": [np.arange(3), np.arange(1)]},
                    groups={0: [1]}, **GOOD)
    yield st_
    st_.close()




BAD_WRITES = {
    "empty list": dict(polylines=[]),
    "lines of different D": dict(polylines=[np.zeros((2, 3)), np.zeros((2, 2))]),
    "a 1-D line": dict(polylines=[np.zeros((2, 3)), np.zeros(3)]),
    "a 3-D line": dict(polylines=[np.zeros((2, 3, 1))]),
    "NaN vertex": dict(polylines=[LINES[0], np.array([[0.0, np.nan, 0.0]])]),
    "infinite vertex": dict(polylines=[np.array([[0.0, 0.0, np.inf]])]),
    "text vertices": dict(polylines=[np.array([["a", "b", "c"]])]),
    "per-line attribute of the wrong length": dict(
        vertex_attributes={"a": [np.arange(3), np.arange(2)]}),
    "attribute list of the wrong count": dict(vertex_attributes={"a": [np.arange(3)]}),
    "attribute not a list per line": dict(vertex_attributes={"a": np.arange(4)}),
    "attribute name with a slash": dict(vertex_attributes={"a/b": [np.arange(3),
                                                                   np.arange(1)]}),
    "object attribute of the wrong row count": dict(
        object_attributes={"w": np.arange(3.0)}),
    "group naming a polyline that does not exist": dict(groups={0: [0, 2]}),
    "group naming a negative index": dict(groups={0: [-1]}),
    "group attributes without groups": dict(group_attributes={"g": np.arange(2.0)}),
    "group attributes of the wrong row count": dict(groups={0: [0]},
                                                    group_attributes={"g": np.arange(2.0)}),
    "out_of_bounds ignore": dict(out_of_bounds="ignore",
                                 bounds=([0, 0, 0], [100, 100, 100])),
    "unknown out_of_bounds policy": dict(out_of_bounds="clip"),
    "unknown geometry_type": dict(geometry_type="mesh"),
    "vertices outside the bounds": dict(bounds=([0, 0, 0], [50, 50, 50])),
    "chunk_shape of the wrong length": dict(chunk_shape=(100, 100)),
    "bins that do not divide chunks": dict(bin_shape=(30, 30, 30)),
    "unknown compressor": dict(compressor="lzma-please"),
}


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_bad_write_raises_and_changes_nothing(lines_store: Any, case: str) -> None:
    args = {**GOOD, **BAD_WRITES[case]}
    lines = args.pop("polylines", LINES)
    before = snapshot(lines_store)
    with pytest.raises(errors.KvzarrError) as info:
        write_polylines(lines_store, lines, **args)
    assert isinstance(info.value, (errors.VectorDataError, errors.MetadataError,
                                   errors.UnsupportedOperationError))
    assert str(info.value)
    assert snapshot(lines_store) == before


BAD_READS = {
    "bbox of the wrong length": dict(bbox=([0, 0], [1, 1])),
    "bbox with NaN": dict(bbox=([0, 0, np.nan], [1, 1, 1])),
    "bbox that is not two corners": dict(bbox=[0, 1, 2]),
    "chunk of the wrong length": dict(chunks=[(0, 0)]),
    "object ids that are text": dict(object_ids=["a"]),
    "unknown attribute": dict(attribute_names=["nope"]),
    "missing level": dict(level=3),
}


@pytest.mark.parametrize("case", sorted(BAD_READS))
def test_bad_read_raises(lines_store: Any, case: str) -> None:
    before = snapshot(lines_store)
    with pytest.raises(errors.KvzarrError):
        read_polylines(lines_store, **BAD_READS[case])
    assert snapshot(lines_store) == before


def test_point_cloud_is_not_polylines() -> None:
    """A point cloud without objects has no object index: reading it as polylines is an
    error, not an empty answer."""
    with kvzarr.MemoryStore() as store:
        write_points(store, np.array([[1.0, 2.0, 3.0]]), chunk_shape=(10, 10, 10))
        with pytest.raises(errors.MetadataError):
            read_polylines(store)
