"""A vector dataset write is one transaction: writers killed with SIGKILL at random
moments of rewriting a dataset, over and over, leave the old dataset or the new, never
a mix — on LMDB, SQLite and zip, in real separate processes.

Generation ``g`` is a cloud of its own size and extent (so its chunks, bins and object
index differ from the last one's), every point carrying ``gen = g`` and its input row
``idx``. After each kill the dataset must read back as exactly one generation: every
point of it, nothing else, its objects too.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.vectors import build_pyramid, read_points, validate, write_points

from ..forkserver import forkserver_context
from ..stores.kill_trials import killed_runs

SUFFIXES = [".lmdb", ".sqlite", ".zip"]


def _generation(g: int) -> dict:
    rng = np.random.default_rng(g)
    n = 20_000 + 3_000 * (g % 7)
    pos = rng.uniform(-100 * (g % 3), 700 + 50 * (g % 5), (n, 3))
    ids = rng.integers(0, 50 + g % 11, n)
    stored = pos.astype(np.float32)
    return dict(positions=pos, object_ids=ids, bounds=(stored.min(axis=0), stored.max(axis=0)),
                vertex_attributes={"gen": np.full(n, g, dtype=np.int32),
                                   "idx": np.arange(n)})


def _write(target: str, g: int) -> None:
    write_points(target, chunk_shape=(100,) * 3, bin_shape=(50,) * 3, **_generation(g))


def _rewrite_until_killed(path: str, run: int, ready, go) -> None:
    go.wait()
    g = run * 1000
    ready.set()
    while True:
        g += 1
        _write(path, g)


def _one_generation(path: str) -> int:
    answer = read_points(path, attribute_names=["gen", "idx"])
    gens = set(answer["vertex_attributes"]["gen"].tolist())
    assert len(gens) == 1, f"a mix of generations: {sorted(gens)[:5]}"
    (g,) = gens
    want = _generation(g)
    idx = answer["vertex_attributes"]["idx"]
    assert sorted(idx.tolist()) == list(range(len(want["positions"])))
    np.testing.assert_array_equal(answer["positions"],
                                  want["positions"].astype(np.float32)[idx])
    objects = read_points(path, object_ids=[0, 7], attribute_names=["idx"])
    expected = np.flatnonzero(np.isin(want["object_ids"], [0, 7]))
    assert sorted(objects["vertex_attributes"]["idx"].tolist()) == expected.tolist()
    return g


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_killed_rewrites_leave_one_whole_generation(tmp_path: Path, suffix: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = forkserver_context(monkeypatch, sys.modules[__name__],
                             preload=("kvzarr.stores.sql", "kvzarr.stores.lmdb"))
    path = str(tmp_path / f"cloud{suffix}")
    _write(path, 0)
    rng = random.Random(4242)
    seen = [_one_generation(path)
            for _ in killed_runs(ctx, _rewrite_until_killed, path, 6,
                                 lambda run: rng.uniform(0.05, 0.6))]
    assert seen == sorted(seen)
    assert seen[-1] > 0          # some rewrites committed between the kills


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_failed_rewrite_leaves_the_old_dataset(tmp_path: Path, suffix: str) -> None:
    path = str(tmp_path / f"cloud{suffix}")
    _write(path, 3)
    bad = _generation(4)
    bad["vertex_attributes"]["gen"] = bad["vertex_attributes"]["gen"][:-1]
    with pytest.raises(kvzarr.errors.VectorDataError):
        write_points(path, chunk_shape=(100,) * 3, bin_shape=(50,) * 3, **bad)
    assert _one_generation(path) == 3


def _rebuild_pyramid_until_killed(path: str, run: int, ready, go) -> None:
    go.wait()
    seed = run * 1000
    ready.set()
    while True:
        seed += 1
        build_pyramid(path, factors=[(2, 1 + seed % 3), (2, 1)], sparsity_seed=seed)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_killed_pyramid_builds_leave_a_whole_pyramid(tmp_path: Path, suffix: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Levels, their object indexes and the cross-level links either all come from one
    build or are all the previous build's: the dataset validates at every level after
    each kill, and level 0 is untouched."""
    ctx = forkserver_context(monkeypatch, sys.modules[__name__],
                             preload=("kvzarr.stores.sql", "kvzarr.stores.lmdb"))
    path = str(tmp_path / f"cloud{suffix}")
    _write(path, 5)
    build_pyramid(path, factors=[(2, 1), (2, 1)])
    rng = random.Random(99)
    for _ in killed_runs(ctx, _rebuild_pyramid_until_killed, path, 5,
                         lambda run: rng.uniform(0.05, 0.5)):
        report = validate(path, level=5)
        assert report.ok, report.errors[:5]
        assert _one_generation(path) == 5
