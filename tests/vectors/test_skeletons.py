"""Skeletons (``write_graph(kind="skeleton")``): the same bytes as zarr-vectors 0.9.2,
read back as the tree that was written (every edge, stored or implied by the reading
order), by chunk and by closed box against brute force, and a forest in one object
refused before anything is written."""

from __future__ import annotations

import os

import numpy as np
import pytest

import kvzarr
from kvzarr import errors
from kvzarr.vectors import read_graph, write_graph

from .test_points_interop import assert_same_tree

zv_graphs = pytest.importorskip("zarr_vectors.types.graphs")


def _forest(seed: int, sizes: tuple[int, ...], step: float) -> tuple:
    """Random trees (one object each): positions of a random walk, edges [child, parent]
    given in a shuffled order."""
    rng = np.random.default_rng(seed)
    edges, ids, at = [], [], 0
    for obj, n in enumerate(sizes):
        for i in range(1, n):
            edges.append([at + i, at + int(rng.integers(0, i))])
        ids += [obj] * n
        at += n
    edges = np.array(edges, dtype=np.int64).reshape(-1, 2)
    rng.shuffle(edges)
    pos = np.cumsum(rng.normal(0, step, (at, 3)), axis=0) + 300
    return pos, edges, np.array(ids)


def _edge_set(positions: np.ndarray, edges: np.ndarray) -> list:
    """Edges as (child, parent) coordinate pairs: independent of node numbering."""
    return sorted((tuple(positions[c].tolist()), tuple(positions[p].tolist()))
                  for c, p in edges.tolist())


CASES = {"small steps": (1, (60, 40), 10.0), "big steps": (2, (80,), 60.0),
         "three trees": (3, (5, 30, 1), 25.0)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_bytes_and_answers_as_reference(case: str, tmp_path) -> None:
    pos, edges, ids = _forest(*CASES[case])
    kw = dict(chunk_shape=(100,) * 3, object_ids=ids, kind="skeleton",
              vertex_attributes={"r": np.arange(len(pos), dtype=np.float32)})
    ours = write_graph(str(tmp_path / "a.zarr"), pos, edges, **kw)
    theirs = zv_graphs.write_graph(str(tmp_path / "b.zarr"), pos, edges, **kw)
    assert ours == theirs
    assert_same_tree(tmp_path / "a.zarr", tmp_path / "b.zarr", case)
    stored = pos.astype(np.float32)
    for query in ({}, {"bbox": ([250] * 3, [350] * 3)}, {"chunks": [(2, 2, 2), (3, 3, 3)]}):
        a = read_graph(str(tmp_path / "a.zarr"), **query)
        b = zv_graphs.read_graph(str(tmp_path / "b.zarr"), **query)
        np.testing.assert_array_equal(a["positions"], b["positions"])
        np.testing.assert_array_equal(a["edges"], b["edges"])
    full = read_graph(str(tmp_path / "a.zarr"))
    assert _edge_set(full["positions"], full["edges"]) == _edge_set(stored, edges)


@pytest.mark.parametrize("suffix", [".lmdb", ".sqlite", ".zip"])
def test_boxes_keep_the_edges_whose_ends_they_keep(suffix: str, tmp_path) -> None:
    pos, edges, ids = _forest(4, (50, 50), 20.0)
    target = str(tmp_path / f"s{suffix}")
    write_graph(target, pos, edges, chunk_shape=(50,) * 3, object_ids=ids, kind="skeleton")
    stored = pos.astype(np.float32)
    rng = np.random.default_rng(5)
    for _ in range(10):
        lo = rng.uniform(200, 400, 3)
        hi = lo + rng.uniform(0, 150, 3)
        got = read_graph(target, bbox=(lo, hi))
        inside = np.all((stored >= lo) & (stored <= hi), axis=1)
        want_edges = edges[inside[edges[:, 0]] & inside[edges[:, 1]]]
        assert sorted(map(tuple, got["positions"].tolist())) == sorted(
            map(tuple, stored[inside].tolist()))
        assert _edge_set(got["positions"], got["edges"]) == _edge_set(stored, want_edges)


def test_a_forest_in_one_object_is_refused_and_nothing_written(tmp_path) -> None:
    pos, edges, _ = _forest(6, (10, 10), 5.0)
    target = str(tmp_path / "f.lmdb")
    with kvzarr.open_store(target) as store:
        before = {k: store.get(k) for k in store.list()}
        with pytest.raises(errors.VectorDataError, match="roots"):
            write_graph(store, pos, edges, chunk_shape=(100,) * 3, kind="skeleton")
        assert {k: store.get(k) for k in store.list()} == before
    with pytest.raises(errors.VectorDataError):
        write_graph(str(tmp_path / "g.zarr"), pos, edges, chunk_shape=(100,) * 3,
                    kind="tree")
    assert not os.path.exists(tmp_path / "g.zarr" / "zarr.json")
