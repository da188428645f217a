"""``kvzarr.vectors.validate``: the five validation levels of the Zarr Vector Format
(zarr-vectors 0.9.2, https://github.com/AllenInstitute/zarr-vectors-py).

* every golden store (written by zarr-vectors) and every store zarr-vectors writes here
  (pyramids, polylines, graphs, meshes) validates at level 5 without errors or warnings;
* kvzarr's own writes validate, with kvzarr and with zarr-vectors' validator;
* one damage at a time to a good store: the specific error (or warning) appears, and
  the undamaged store had none;
* hostile metadata and cells give error entries, never an exception.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kvzarr
from kvzarr.vectors import ValidationResult, validate, write_points
from kvzarr.vectors import dense
from kvzarr.vectors import fragments as fragment_index
from kvzarr.vectors import manifests
from kvzarr.vectors.target import Target

pytestmark = pytest.mark.filterwarnings(
    "ignore:The data type \\(VariableLengthBytes\\(\\)\\) does not have a Zarr V3")

zv_validate = pytest.importorskip("zarr_vectors.validate")

GOLDEN = Path(__file__).resolve().parent / "golden"
GOLDEN_STORES = sorted(p.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("*.zarr")
                       if p.is_dir())
CHUNK, BIN = (200,) * 3, (50,) * 3


# ------------------------------------------------------------------------ helpers


def points(n: int = 300, ndim: int = 3, seed: int = 0) -> np.ndarray:
    """Points in [0, 400)^D, a third of them on multiples of 50 (bin and chunk faces)."""
    rng = np.random.default_rng(seed)
    pts = rng.uniform(0, 400, (n, ndim))
    pts[: n // 3] = rng.integers(0, 8, (n // 3, ndim)) * 50.0
    return pts


def plain_store(**kwargs: Any) -> kvzarr.MemoryStore:
    store = kvzarr.MemoryStore()
    pts = points()
    write_points(store, pts, chunk_shape=CHUNK, bin_shape=BIN,
                 vertex_attributes={"intensity": np.arange(len(pts), dtype=np.float32)},
                 **kwargs)
    return store


def object_store() -> kvzarr.MemoryStore:
    store = kvzarr.MemoryStore()
    pts = points()
    ids = np.arange(len(pts)) % 7 * 10        # 7 objects: 0, 10, ..., 60
    write_points(store, pts, chunk_shape=CHUNK, bin_shape=BIN, object_ids=ids,
                 vertex_attributes={
                     "cls": np.array(["a", "b", "c"])[np.arange(len(pts)) % 3],
                     "rgb": np.zeros((len(pts), 3), np.uint8)},
                 object_attributes={"weight": np.linspace(0, 1, 7)},
                 groups={0: [0, 10], 1: [20, 30, 40]},
                 group_attributes={"score": np.array([1.0, 2.0], np.float32)})
    return store


def get_json(store: Any, key: str) -> dict[str, Any]:
    return json.loads(store.get(key))


def put_json(store: Any, key: str, doc: dict[str, Any]) -> None:
    store.set(key, json.dumps(doc).encode())


def edit_attrs(store: Any, key: str, change: Callable[[dict[str, Any]], None]) -> None:
    doc = get_json(store, key)
    change(doc["attributes"])
    put_json(store, key, doc)


def get_cell(store: Any, key: str) -> bytes:
    """The payload of an unsharded, uncompressed cell."""
    data = store.get(key)
    count, length = struct.unpack_from("<II", data)
    assert count == 1 and len(data) == 8 + length
    return data[8:]


def put_cell(store: Any, key: str, payload: bytes) -> None:
    store.set(key, struct.pack("<II", 1, len(payload)) + payload)


def listed(store: Any, array: str = "0/vertices") -> list[str]:
    return get_json(store, f"{array}/zarr.json")["attributes"]["nonempty_chunks"]


def cell_key(array: str, name: str) -> str:
    """Key of chunk ``name`` (origin 0, as in these stores)."""
    return f"{array}/c/" + "/".join(name.split("."))


def rewrite(store: Any, path: str, values: np.ndarray) -> None:
    """Rewrite a whole non-spatial array under its own document."""
    doc = get_json(store, f"{path}/zarr.json")
    doc["shape"] = [len(values), *doc["shape"][1:]]
    if "shape" in doc["attributes"]:
        doc["attributes"]["shape"] = doc["shape"]
    for key, value in dense.encode(Target(store, "", False, "x"), path, doc, values):
        store.set(key, value)


def manifest_rows(store: Any) -> np.ndarray:
    return dense.read(Target(store, "", False, "x"), "0/object_index/manifests")


def check(store: Any, level: int = 5, **kwargs: Any) -> ValidationResult:
    result = validate(store, level, **kwargs)
    assert isinstance(result, ValidationResult) and result.level == level
    return result


def has(messages: list[str], *parts: str) -> bool:
    return any(all(p in m for p in parts) for m in messages)


def assert_error(result: ValidationResult, *parts: str) -> None:
    assert not result.ok
    assert has(result.errors, *parts), f"no error with {parts}: {result.errors}"


def damaged(make: Callable[[], Any], damage: Callable[[Any], None], level: int = 5
            ) -> ValidationResult:
    """Validate the good store (no errors, no warnings), damage it, validate again."""
    store = make()
    good = check(store, level)
    assert good.ok and not good.warnings, good.summary()
    damage(store)
    return check(store, level)


# ------------------------------------------------------------------------ good stores


@pytest.mark.parametrize("name", GOLDEN_STORES)
def test_golden_stores_validate(name: str) -> None:
    result = check(str(GOLDEN / name))
    assert result.ok, result.summary()
    # (zarr-vectors' mesh, graph and polyline writers store (N, k) vertex attributes
    # under a scalar row_shape: warned, and read as channels)
    assert all("values per vertex under a document that says one" in w
               for w in result.warnings), result.summary()
    assert has(result.passed, "L3", "vertex_count", "matches")


@pytest.fixture(scope="module")
def reference_stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stores zarr-vectors writes: pyramids (plain; objects with sparsity and a chunk
    scale), polylines, a graph and a mesh."""
    zv_points = pytest.importorskip("zarr_vectors.types.points")
    zv_pyramid = pytest.importorskip("zarr_vectors.multiresolution.coarsen")
    from zarr_vectors.types.graphs import write_graph
    from zarr_vectors.types.meshes import write_mesh
    from zarr_vectors.types.polylines import write_polylines
    root = tmp_path_factory.mktemp("reference")
    rng = np.random.default_rng(1)
    pts = points(400)
    zv_points.write_points(str(root / "pyramid.zarr"), pts, chunk_shape=CHUNK,
                           bin_shape=BIN)
    zv_pyramid.build_pyramid(str(root / "pyramid.zarr"), factors=[(2, 1), (2, 1)])
    zv_points.write_points(str(root / "pyramid_objects.zarr"), pts, chunk_shape=CHUNK,
                           bin_shape=BIN, object_ids=rng.integers(0, 20, len(pts)))
    zv_pyramid.build_pyramid(str(root / "pyramid_objects.zarr"), factors=[(2, 2), (2, 1)],
                             chunk_scale_factors=[2, 1], sparsity_seed=1)
    lines = [rng.uniform(0, 400, (int(rng.integers(2, 30)), 3)) for _ in range(10)]
    write_polylines(str(root / "polylines.zarr"), lines, chunk_shape=CHUNK)
    edges = np.array([[i, i + 1] for i in range(99)])
    write_graph(str(root / "graph.zarr"), pts[:100], edges, chunk_shape=CHUNK)
    faces = np.array([[i, i + 1, i + 2] for i in range(98)])
    write_mesh(str(root / "mesh.zarr"), pts[:100], faces, chunk_shape=CHUNK)
    return root


@pytest.mark.parametrize("name", ["pyramid", "pyramid_objects", "polylines", "graph",
                                  "mesh"])
def test_reference_writes_validate(reference_stores: Path, name: str) -> None:
    """No errors and, unlike zarr-vectors' own L4, no warning about the pyramid's
    cross-level links on a point cloud."""
    result = check(str(reference_stores / f"{name}.zarr"))
    assert result.ok, result.summary()
    assert not result.warnings, result.summary()


def _write_case(case: str, store: Any) -> None:
    pts = points()
    if case == "plain3d":
        write_points(store, pts, chunk_shape=CHUNK, bin_shape=BIN,
                     vertex_attributes={"v": np.arange(len(pts), dtype=np.float32)})
    elif case == "objects":
        ids = np.arange(len(pts)) % 5 * 1000
        write_points(store, pts, chunk_shape=CHUNK, bin_shape=BIN, object_ids=ids,
                     vertex_attributes={"cls": np.array(["x", None, "y"], dtype=object)[
                         np.arange(len(pts)) % 3], "rgb": np.ones((len(pts), 3), np.uint8)},
                     object_attributes={"w": np.arange(5.0),
                                        "l": np.ones((5, 2), np.int32)},
                     groups={0: [0, 1000], 2: [4000]},
                     group_attributes={"s": np.arange(3, dtype=np.int16)})
    elif case == "zstd":
        write_points(store, pts, chunk_shape=CHUNK, bin_shape=(100,) * 3, compressor="zstd",
                     object_attributes={"w": np.arange(len(pts), dtype=np.float64)})
    elif case == "sharded":
        write_points(store, pts - 150, chunk_shape=CHUNK, bin_shape=BIN, shard_shape=2,
                     compressor="zstd", object_ids=np.arange(len(pts)) % 9)
    elif case == "plain2d":
        write_points(store, points(ndim=2) - 300, chunk_shape=(100, 100),
                     bin_shape=(20, 20), dtype="float64")
    elif case == "plain4d":
        write_points(store, points(ndim=4) / [40, 1, 1, 1], chunk_shape=(10, 100, 100, 100),
                     bin_shape=(5, 50, 50, 50))
    elif case == "one-bin":
        write_points(store, pts, chunk_shape=CHUNK)
    else:
        raise AssertionError(case)


WRITE_CASES = ["plain3d", "objects", "zstd", "sharded", "plain2d", "plain4d", "one-bin"]


@pytest.mark.parametrize("case", WRITE_CASES)
def test_kvzarr_writes_validate_with_both(case: str) -> None:
    store = kvzarr.MemoryStore()
    _write_case(case, store)
    result = check(store)
    assert result.ok and not result.warnings, result.summary()
    theirs = zv_validate.validate(kvzarr.ZarrStore(store), level=5)
    assert theirs.ok, theirs.errors


GEOMETRY_CASES = ["polylines", "streamlines", "lines", "mesh", "graph"]


@pytest.mark.parametrize("case", GEOMETRY_CASES)
def test_kvzarr_geometry_writes_validate_with_both(case: str) -> None:
    """kvzarr's polylines, lines, meshes and graphs: no errors, no warnings, and
    zarr-vectors accepts them."""
    from kvzarr import vectors
    rng = np.random.default_rng(3)
    pts = points(100)
    store = kvzarr.MemoryStore()
    if case in ("polylines", "streamlines"):
        lines = [rng.uniform(0, 400, (int(rng.integers(2, 30)), 3)) for _ in range(10)]
        vectors.write_polylines(store, lines, chunk_shape=CHUNK,
                                geometry_type=case[:-1])
    elif case == "lines":
        vectors.write_lines(store, rng.uniform(0, 400, (20, 2, 3)), chunk_shape=CHUNK)
    elif case == "mesh":
        vectors.write_mesh(store, pts, np.array([[i, i + 1, i + 2] for i in range(98)]),
                           chunk_shape=CHUNK)
    else:
        vectors.write_graph(store, pts, np.array([[i, i + 1] for i in range(99)]),
                            chunk_shape=CHUNK)
    result = check(store)
    assert result.ok and not result.warnings, result.summary()
    theirs = zv_validate.validate(kvzarr.ZarrStore(store), level=5)
    assert theirs.ok, theirs.errors


@pytest.mark.parametrize("with_objects", [False, True])
def test_kvzarr_pyramid_validates_with_both(with_objects: bool) -> None:
    """kvzarr's build_pyramid (sparsity, a chunk scale, cross-level links)."""
    from kvzarr.vectors import build_pyramid
    rng = np.random.default_rng(4)
    store = kvzarr.MemoryStore()
    pts = points(500)
    ids = {"object_ids": rng.integers(0, 20, len(pts))} if with_objects else {}
    write_points(store, pts, chunk_shape=CHUNK, bin_shape=BIN, **ids)
    build_pyramid(store, factors=[(2, 2), (2, 1)], chunk_scale_factors=[2, 1],
                  sparsity_seed=1)
    result = check(store)
    assert result.ok and not result.warnings, result.summary()
    assert has(result.passed, "L3 2/zarr.json", "vertex_count")
    theirs = zv_validate.validate(kvzarr.ZarrStore(store), level=5)
    assert theirs.ok, theirs.errors


def test_kvzarr_directory_write_validates_by_path(tmp_path: Path) -> None:
    """A directory written by kvzarr, validated by path with both validators."""
    path = str(tmp_path / "pts.zarr")
    _write_case("objects", path)
    assert check(path).ok
    assert zv_validate.validate(path, level=5).ok


def test_dataset_inside_a_store_by_path() -> None:
    """``path=`` inside a store: messages name keys under it."""
    store = kvzarr.MemoryStore()
    write_points(store, points(), chunk_shape=CHUNK, bin_shape=BIN, path="deep/ds")
    assert check(store, path="deep/ds").ok
    edit_attrs(store, "deep/ds/0/zarr.json",
               lambda a: a["zarr_vectors_level"].update(vertex_count=1))
    assert_error(check(store, path="deep/ds"), "L3 deep/ds/0/zarr.json", "vertex_count")


def test_store_that_cannot_list_keys() -> None:
    """Levels come from multiscales; the checks that need a listing are skipped with a
    warning, the others still run."""
    import dataclasses

    class NoListing(kvzarr.MemoryStore):
        capabilities = dataclasses.replace(kvzarr.MemoryStore.capabilities,
                                           listable=False)
    store = NoListing()
    write_points(store, points(), chunk_shape=CHUNK, bin_shape=BIN)
    result = check(store)
    assert result.ok, result.summary()
    assert has(result.warnings, "L1", "cannot list its keys"), result.warnings
    edit_attrs(store, "0/zarr.json",
               lambda a: a["zarr_vectors_level"].update(vertex_count=1))
    assert_error(check(store), "L3 0/zarr.json", "vertex_count is 1")


def test_levels_are_cumulative_and_bounded() -> None:
    store = plain_store()
    for level in range(1, 6):
        result = check(store, level)
        assert result.ok
        stages = {m.split()[0] for m in result.passed}
        assert stages == {f"L{n}" for n in range(1, level + 1)}
    for bad in (0, 6, "3", True):
        with pytest.raises(ValueError):
            validate(store, bad)


# ------------------------------------------------------------------------ damage: L1, L2


def test_broken_root_json() -> None:
    result = damaged(plain_store, lambda s: s.set("zarr.json", b'{"attributes": '))
    assert_error(result, "L1 zarr.json", "not valid JSON")
    assert all(m.startswith("L1") for m in result.errors + result.passed)


def test_missing_zarr_vectors_block() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(s, "zarr.json",
                                                       lambda a: a.pop("zarr_vectors")))
    assert_error(result, "L1 zarr.json", "no 'zarr_vectors' block")
    assert all(m.startswith("L1") for m in result.errors + result.passed)


def test_missing_ome_block_is_a_warning() -> None:
    store = plain_store()
    edit_attrs(store, "zarr.json", lambda a: a.pop("ome"))
    result = check(store)
    assert result.ok and has(result.warnings, "L1 zarr.json", "'ome'")


def test_missing_vertices_array() -> None:
    result = damaged(plain_store, lambda s: s.erase("0/vertices/zarr.json"))
    assert_error(result, "L1 0/vertices", "missing")


def test_bad_links_convention() -> None:
    def damage(s: Any) -> None:
        edit_attrs(s, "zarr.json", lambda a: a["zarr_vectors"].update(
            links_convention="sideways"))
        put_cell(s, cell_key("0/vertices", listed(s)[0]), b"\x00")   # an L3 problem
    result = damaged(plain_store, damage)
    assert_error(result, "L2 zarr.json", "links_convention 'sideways'")
    assert not has(result.errors, "L3"), "an L2 failure must stop L3"


def test_unknown_geometry_type() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(s, "zarr.json", lambda a: a[
        "zarr_vectors"].update(geometry_types=["point_cloud", "hologram"])))
    assert_error(result, "L2 zarr.json", "unknown geometry types ['hologram']")


def test_bin_shape_not_dividing_chunk() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(s, "zarr.json", lambda a: a[
        "zarr_vectors"].update(base_bin_shape=[60, 50, 50])))
    assert_error(result, "L2 zarr.json", "base_bin_shape[0] = 60 does not divide "
                 "chunk_shape[0] = 200")


def test_dimension_mismatch() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(s, "zarr.json", lambda a: a[
        "zarr_vectors"].update(chunk_shape=[200, 200])))
    assert_error(result, "L2 zarr.json", "chunk_shape must be 3 positive numbers")


def test_required_member_missing_and_wrong_type() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(s, "zarr.json", lambda a: (
        a["zarr_vectors"].pop("bounds"), a["zarr_vectors"].update(zv_version=92))))
    assert_error(result, "L2 zarr.json", "zarr_vectors.bounds is required")
    assert_error(result, "L2 zarr.json", "zv_version must be a string")


def test_level_chunk_shape_override_not_a_multiple() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(s, "0/zarr.json", lambda a: a[
        "zarr_vectors_level"].update(chunk_shape=[300, 200, 200])))
    assert_error(result, "L2 0/zarr.json", "chunk_shape[0] = 300 is not a whole multiple")


def test_ngff_scale_inconsistent_with_bins() -> None:
    def damage(s: Any) -> None:
        edit_attrs(s, "zarr.json", lambda a: a["multiscales"][0]["datasets"][0][
            "coordinateTransformations"][1].update(translation=[20.0, 25.0, 25.0]))
    assert_error(damaged(plain_store, damage), "L2 zarr.json", "level 0 translation",
                 "not half the base bin shape")


def _copy_level(store: Any, src: str, dst: str, **level_attrs: Any) -> None:
    """Level ``src`` copied to group ``dst`` with a dataset entry like ``src``'s."""
    for key in list(store.list_prefix(f"{src}/")):
        store.set(dst + key[len(src):], store.get(key))
    edit_attrs(store, f"{dst}/zarr.json",
               lambda a: a["zarr_vectors_level"].update(level=int(dst), **level_attrs))
    def add(attrs: dict[str, Any]) -> None:
        datasets = attrs["multiscales"][0]["datasets"]
        datasets.append(dict(json.loads(json.dumps(datasets[int(src)])), path=dst))
    edit_attrs(store, "zarr.json", add)


def test_level_group_missing_from_multiscales() -> None:
    def damage(s: Any) -> None:
        _copy_level(s, "0", "1", parent_level=0)
        edit_attrs(s, "zarr.json", lambda a: a["multiscales"][0]["datasets"].pop())
    assert_error(damaged(plain_store, damage), "L2 zarr.json", "datasets paths ['0']",
                 "level groups ['0', '1']")


def test_non_contiguous_levels() -> None:
    result = damaged(plain_store, lambda s: _copy_level(s, "0", "2", parent_level=0))
    assert_error(result, "L5", "levels [0, 2] are not contiguous from 0")
    assert len(result.errors) == 1, result.errors


def test_bin_ratio_decreasing() -> None:
    def damage(s: Any) -> None:
        _copy_level(s, "0", "1", parent_level=0)
        edit_attrs(s, "zarr.json", lambda a: a["multiscales"][0]["datasets"][1][
            "coordinateTransformations"].__setitem__(slice(None), [
                {"type": "scale", "scale": [0.5] * 3},
                {"type": "translation", "translation": [12.5] * 3}]))
    assert_error(damaged(plain_store, damage), "L2 zarr.json", "level 1 scale",
                 "bin ratios must not decrease")


def test_bad_sparsity_only_at_level_5() -> None:
    store = plain_store()
    edit_attrs(store, "0/zarr.json",
               lambda a: a["zarr_vectors_level"].update(object_sparsity=5.0))
    assert check(store, 4).ok
    assert_error(check(store, 5), "L5 0/zarr.json", "object_sparsity 5.0 is not in (0, 1]")


def test_vertex_count_increasing_across_levels() -> None:
    def damage(s: Any) -> None:
        _copy_level(s, "0", "1", parent_level=0)
        key = cell_key("1/vertices", listed(s, "1/vertices")[0])
        frag_key = cell_key("1/vertex_fragments", listed(s, "1/vertices")[0])
        rows = get_cell(s, key)
        index = fragment_index.decode(get_cell(s, frag_key))
        counts = index.counts.copy()
        counts[-1] += len(rows) // 12      # the extra rows go in the last bin's range
        put_cell(s, frag_key, fragment_index.encode_ranges(np.cumsum(counts) - counts,
                                                           counts))
        put_cell(s, key, rows + rows)
        edit_attrs(s, "1/zarr.json", lambda a: a["zarr_vectors_level"].update(
            vertex_count=a["zarr_vectors_level"]["vertex_count"] + len(rows) // 12,
            coarsening_method="per_object"))
    result = damaged(plain_store, damage)
    assert_error(result, "L5 1/zarr.json", "more than level 0's")


METADATA_DAMAGE = [
    ("0/zarr.json", lambda d: d.update(zarr_format=2), "L1 0/zarr.json",
     "zarr_format is 2, not 3"),
    ("0/vertices/zarr.json", lambda d: d["attributes"].update(encoding="lz4"),
     "L2 0/vertices", "encoding 'lz4' is not raw or draco"),
    ("0/vertices/zarr.json", lambda d: d["attributes"].update(dtype="complex64"),
     "L2 0/vertices", "dtype 'complex64' is not a numeric data type"),
    ("0/vertices/zarr.json", lambda d: d["attributes"].update(nonempty_chunks="0.0.0"),
     "L2 0/vertices", "nonempty_chunks must be a list of chunk names"),
    ("0/vertex_fragments/zarr.json", lambda d: d.update(shape=[3, 3, 3]),
     "L2 0/vertex_fragments", "differs from the vertices'"),
    ("0/vertex_attributes/rgb/zarr.json", lambda d: d["attributes"].update(name="rgba"),
     "L2 0/vertex_attributes/rgb", "name attribute 'rgba'"),
    ("0/vertex_attributes/rgb/zarr.json", lambda d: d["attributes"].update(
        channel_names=["r", "g"]), "L2 0/vertex_attributes/rgb", "channel_names"),
    ("0/vertex_attributes/cls/zarr.json", lambda d: d["attributes"].update(
        categories=["a", "a", "c"]), "L2 0/vertex_attributes/cls", "categories repeat"),
    ("0/object_attributes/weight/zarr.json", lambda d: d["attributes"].update(shape=[9]),
     "L2 0/object_attributes/weight", "shape attribute [9] is not the array's [7]"),
    ("0/object_index/zarr.json", lambda d: d["attributes"].update(sid_ndim=2),
     "L2 0/object_index/zarr.json", "sid_ndim 2 is not the dataset's dimensionality 3"),
    ("0/zarr.json", lambda d: d["attributes"]["zarr_vectors_level"].update(level=1),
     "L2 0/zarr.json", "zarr_vectors_level.level is 1, the group is level 0"),
    ("0/zarr.json", lambda d: d["attributes"]["zarr_vectors_level"].update(
        fragments_tile="yes"), "L2 0/zarr.json", "fragments_tile must be true or false"),
    ("zarr.json", lambda d: d["attributes"]["multiscales"][0]["axes"].pop(),
     "L2 zarr.json", "chunk_shape must be 2 positive numbers"),
    ("zarr.json", lambda d: d["attributes"]["zarr_vectors"].update(
        bounds=[[0, 0, 0], [-1, 5, 5]]), "L2 zarr.json", "bounds min"),
]


@pytest.mark.parametrize("key, change, where, what", METADATA_DAMAGE,
                         ids=[f"{d[0]}:{d[3][:30]}" for d in METADATA_DAMAGE])
def test_metadata_damage(key: str, change: Callable[[dict[str, Any]], None], where: str,
                         what: str) -> None:
    def damage(s: Any) -> None:
        doc = get_json(s, key)
        change(doc)
        put_json(s, key, doc)
    assert_error(damaged(object_store, damage), where, what)


# ------------------------------------------------------------------------ damage: L3


def test_wrong_vertex_count() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(s, "0/zarr.json", lambda a: a[
        "zarr_vectors_level"].update(vertex_count=7)))
    assert_error(result, "L3 0/zarr.json", "vertex_count is 7, the listed cells hold 300")


def test_nonempty_chunks_unsorted() -> None:
    def damage(s: Any) -> None:
        for array in ("0/vertices", "0/vertex_fragments", "0/vertex_attributes/intensity"):
            edit_attrs(s, f"{array}/zarr.json",
                       lambda a: a.update(nonempty_chunks=a["nonempty_chunks"][::-1]))
    result = damaged(plain_store, damage)
    assert_error(result, "L3 0/vertices", "nonempty_chunks is not string-sorted")
    assert len(result.errors) == 1, result.errors


def test_nonempty_chunks_missing_a_chunk() -> None:
    def damage(s: Any) -> None:
        edit_attrs(s, "0/vertices/zarr.json",
                   lambda a: a.update(nonempty_chunks=a["nonempty_chunks"][1:]))
    result = damaged(plain_store, damage)
    first = listed(plain_store())[0]
    assert_error(result, "L3 0/vertices", f"chunk {first}", "not in nonempty_chunks")
    assert_error(result, "L3 0/vertex_fragments",
                 f"lists {first}, which the vertices do not")


def test_nonempty_chunks_naming_an_absent_chunk() -> None:
    def damage(s: Any) -> None:
        names = listed(s)
        gone = names[0]
        for array in ("0/vertices", "0/vertex_fragments", "0/vertex_attributes/intensity"):
            s.erase(cell_key(array, gone))
    result = damaged(plain_store, damage)
    assert_error(result, "L3 0/vertices", "is listed in nonempty_chunks but has no "
                 "vertices cell")


def test_nonempty_chunks_outside_the_grid() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(
        s, "0/vertices/zarr.json", lambda a: a["nonempty_chunks"].append("9.9.9")))
    assert_error(result, "L3 0/vertices", "names chunk 9.9.9, outside the grid")


def test_nonempty_chunks_name_not_canonical() -> None:
    """``"00.0.1"`` parses as chunk (0, 0, 1) but is not the string readers bisect for."""
    def damage(s: Any) -> None:
        for array in ("0/vertices", "0/vertex_fragments", "0/vertex_attributes/intensity"):
            edit_attrs(s, f"{array}/zarr.json", lambda a: a.update(
                nonempty_chunks=["0" + a["nonempty_chunks"][0]] + a["nonempty_chunks"][1:]))
    assert_error(damaged(plain_store, damage), "L3 0/vertices", "is not in the canonical "
                 "form")


def test_unlisted_stored_cell() -> None:
    def damage(s: Any) -> None:
        names = listed(s)
        free = next(n for n in ("0.0.0", "0.0.1", "0.1.0", "0.1.1", "1.0.0", "1.0.1",
                                "1.1.0", "1.1.1") if n not in names[1:])
        edit_attrs(s, "0/vertices/zarr.json", lambda a: a.update(
            nonempty_chunks=[n for n in a["nonempty_chunks"] if n != free]))
        s.set(cell_key("0/vertices", free), s.get(cell_key("0/vertices", names[-1])))
    result = damaged(plain_store, damage)
    assert_error(result, "L3 0/vertices", "not in nonempty_chunks: readers never see it")


def test_truncated_vertices_cell() -> None:
    def damage(s: Any) -> None:
        key = cell_key("0/vertices", listed(s)[0])
        put_cell(s, key, get_cell(s, key)[:-1])
    assert_error(damaged(plain_store, damage), "L3 0/vertices", "not whole rows of 3 x "
                 "float32")


def test_nan_vertex_is_a_warning() -> None:
    def damage(s: Any) -> None:
        key = cell_key("0/vertices", listed(s)[0])
        rows = np.frombuffer(get_cell(s, key), "<f4").copy()
        rows[1] = np.nan
        put_cell(s, key, rows.tobytes())
    result = damaged(plain_store, damage)
    assert result.ok, result.errors
    assert has(result.warnings, "L3 0/vertices", "NaN/Inf")


def test_fragment_index_rows_out_of_range() -> None:
    def damage(s: Any) -> None:
        name = listed(s)[0]
        n = len(get_cell(s, cell_key("0/vertices", name))) // 12
        key = cell_key("0/vertex_fragments", name)
        index = fragment_index.decode(get_cell(s, key))
        starts, counts = index.starts.copy(), index.counts.copy()
        counts[-1] += 1
        put_cell(s, key, fragment_index.encode_ranges(starts, counts))
        assert int(starts[-1] + counts[-1]) == n + 1
    assert_error(damaged(plain_store, damage), "L3 0/vertex_fragments", "names rows "
                 "outside the chunk's")


def test_undecodable_fragment_index() -> None:
    result = damaged(plain_store, lambda s: put_cell(
        s, cell_key("0/vertex_fragments", listed(s)[0]), b"ZVFG" * 4))
    assert_error(result, "L3 0/vertex_fragments", "does not decode", "magic")


def test_fragments_tile_claim_broken() -> None:
    """An object chunk whose two fragments are swapped: valid, but not a tiling."""
    def damage(s: Any) -> None:
        for name in listed(s):
            key = cell_key("0/vertex_fragments", name)
            index = fragment_index.decode(get_cell(s, key))
            if index.count >= 2:
                starts, counts = index.starts.copy(), index.counts.copy()
                starts[[0, 1]] = starts[[1, 0]]
                counts[[0, 1]] = counts[[1, 0]]
                put_cell(s, key, fragment_index.encode_ranges(starts, counts))
                return
        raise AssertionError("no chunk with two objects")
    result = damaged(object_store, damage)
    assert_error(result, "L3 0/vertex_fragments", "fragments_tile is set")


def test_point_outside_its_bin() -> None:
    """A vertex moved into another bin of the same chunk (so the chunk still holds it)."""
    def damage(s: Any) -> None:
        key = cell_key("0/vertices", "0.0.0")
        rows = np.frombuffer(get_cell(s, key), "<f4").reshape(-1, 3).copy()
        index = fragment_index.decode(get_cell(s, cell_key("0/vertex_fragments", "0.0.0")))
        row = int(index.rows(0)[0]) if index.counts[0] else int(index.rows_of(
            np.flatnonzero(index.counts))[0])
        rows[row] = [199.0, 199.0, 199.0] if rows[row][0] < 150 else [1.0, 1.0, 1.0]
        put_cell(s, key, rows.tobytes())
    assert_error(damaged(plain_store, damage), "L3 0/vertices", "outside their bin")


def test_point_outside_its_chunk() -> None:
    def damage(s: Any) -> None:
        key = cell_key("0/vertices", "0.0.0")
        rows = np.frombuffer(get_cell(s, key), "<f4").reshape(-1, 3).copy()
        rows[0] = [350.0, 350.0, 350.0]
        put_cell(s, key, rows.tobytes())
    assert_error(damaged(object_store, damage), "L3 0/vertices", "chunk 0.0.0",
                 "outside the chunk's box")


def test_wrong_number_of_bin_fragments() -> None:
    def damage(s: Any) -> None:
        name = listed(s)[0]
        n = len(get_cell(s, cell_key("0/vertices", name))) // 12
        put_cell(s, cell_key("0/vertex_fragments", name),
                 fragment_index.encode_ranges(np.array([0]), np.array([n])))
    assert_error(damaged(plain_store, damage), "L3 0/vertex_fragments", "1 fragments, not "
                 "one per bin (64 = 4 x 4 x 4)")


def test_short_attribute_cell() -> None:
    def damage(s: Any) -> None:
        key = cell_key("0/vertex_attributes/intensity", listed(s)[0])
        put_cell(s, key, get_cell(s, key)[:-4])
    assert_error(damaged(plain_store, damage), "L3 0/vertex_attributes/intensity",
                 "rows, its vertices")


def test_dictionary_code_outside_categories() -> None:
    def damage(s: Any) -> None:
        key = cell_key("0/vertex_attributes/cls", listed(s)[0])
        codes = bytearray(get_cell(s, key))
        codes[0] = 200
        put_cell(s, key, bytes(codes))
    assert_error(damaged(object_store, damage), "L3 0/vertex_attributes/cls",
                 "dictionary codes outside the 3 categories")


def test_manifest_naming_a_missing_chunk() -> None:
    def damage(s: Any) -> None:
        rows = manifest_rows(s)
        rows[1] = manifests.encode(np.array([[1, 1, 1], [5, 5, 5]]), np.array([0, 0]))
        rewrite(s, "0/object_index/manifests", rows)
    result = damaged(object_store, damage)
    assert_error(result, "L3 0/object_index/manifests", "object 10 names chunk 5.5.5",
                 "not in nonempty_chunks")


def test_manifest_naming_a_missing_fragment() -> None:
    def damage(s: Any) -> None:
        rows = manifest_rows(s)
        chunks, frags = manifests.decode(rows[2], 3)
        frags[0] = 99
        rows[2] = manifests.encode(chunks, frags)
        rewrite(s, "0/object_index/manifests", rows)
    result = damaged(object_store, damage)
    assert_error(result, "L3 0/object_index/manifests", "object 20 names fragment 99")


def test_undecodable_manifest() -> None:
    def damage(s: Any) -> None:
        rows = manifest_rows(s)
        rows[0] = bytes(rows[0]) + b"\x01"
        rewrite(s, "0/object_index/manifests", rows)
    assert_error(damaged(object_store, damage), "L3 0/object_index/manifests",
                 "object 0 (row 0) does not decode")


def test_object_ids_unsorted() -> None:
    def damage(s: Any) -> None:
        rewrite(s, "0/object_index/object_ids", np.array([0, 20, 10, 30, 40, 50, 60]))
    result = damaged(object_store, damage)
    assert_error(result, "L3 0/object_index/object_ids", "object_ids_sorted is true",
                 "not strictly ascending")


def test_object_ids_repeat() -> None:
    def damage(s: Any) -> None:
        rewrite(s, "0/object_index/object_ids", np.array([0, 10, 20, 30, 40, 50, 50]))
        edit_attrs(s, "0/object_index/zarr.json", lambda a: a.update(
            object_ids_sorted=False))
    assert_error(damaged(object_store, damage), "L3 0/object_index/object_ids",
                 "object ids repeat")


def test_num_objects_wrong() -> None:
    result = damaged(object_store, lambda s: edit_attrs(
        s, "0/object_index/zarr.json", lambda a: a.update(num_objects=8)))
    assert_error(result, "L3 0/object_index/zarr.json", "num_objects is 8, the index has 7")


def test_num_present_wrong() -> None:
    def damage(s: Any) -> None:
        rows = manifest_rows(s)
        rows[3] = manifests.encode(np.zeros((0, 3), np.int64), np.zeros(0, np.int64))
        rewrite(s, "0/object_index/manifests", rows)
    assert_error(damaged(object_store, damage), "L3 0/object_index/zarr.json",
                 "num_present is 7, 6 manifests are non-empty")


def test_unknown_object_index_layout() -> None:
    result = damaged(object_store, lambda s: edit_attrs(
        s, "0/object_index/zarr.json", lambda a: a.update(layout="dense_manifests_v1")))
    assert_error(result, "L2 0/object_index/zarr.json", "layout 'dense_manifests_v1'")


def test_object_attribute_rows_wrong() -> None:
    result = damaged(object_store, lambda s: rewrite(s, "0/object_attributes/weight",
                                                     np.arange(6.0)))
    assert_error(result, "L3 0/object_attributes/weight", "6 rows, the level has 7 objects")


def test_group_naming_an_unknown_object() -> None:
    def damage(s: Any) -> None:
        rows = dense.read(Target(s, "", False, "x"), "0/groups")
        rows[1] = np.array([20, 999], "<i8").tobytes()
        rewrite(s, "0/groups", rows)
    assert_error(damaged(object_store, damage), "L3 0/groups",
                 "group 1 names unknown object ids 999")


def test_group_attribute_rows_wrong() -> None:
    result = damaged(object_store, lambda s: rewrite(s, "0/group_attributes/score",
                                                     np.arange(3, dtype=np.float32)))
    assert_error(result, "L3 0/group_attributes/score", "3 rows, the level has 2 groups")


def test_sharded_store_damage_inside_a_shard() -> None:
    """Sharded cells are found and checked too: an unlisted cell inside a listed shard."""
    def make() -> Any:
        store = kvzarr.MemoryStore()
        _write_case("sharded", store)
        return store
    def damage(s: Any) -> None:
        edit_attrs(s, "0/vertices/zarr.json",
                   lambda a: a.update(nonempty_chunks=a["nonempty_chunks"][1:]))
    result = damaged(make, damage)
    assert_error(result, "L3 0/vertices", "not in nonempty_chunks: readers never see it")


# ------------------------------------------------------------------------ links, L4


def test_link_family_and_cells(reference_stores: Path) -> None:
    """A cross-level family pointing at a missing level, and a links array listing a
    chunk without a cell."""
    store = kvzarr.MemoryStore()
    src = reference_stores / "pyramid_objects.zarr"
    with store.transaction():
        store.set_many([(p.relative_to(src).as_posix(), p.read_bytes())
                        for p in sorted(src.rglob("*")) if p.is_file()])
    assert check(store).ok
    name = next(k for k in store.list_prefix("1/links/-1/") if k.endswith("/zarr.json")
                and k.count("/") == 4).rsplit("/", 1)[0]
    for key in list(store.list_prefix(f"{name}/c/")):
        store.erase(key)
    assert_error(check(store), f"L3 {name}", "is listed in nonempty_chunks but has no cell")
    edit_attrs(store, "2/links/-1/zarr.json", lambda a: a.update(level_delta=-3))
    assert_error(check(store), "L2 2/links/-1/zarr.json", "level_delta -3")


def test_geometry_needs_other_links_convention() -> None:
    result = damaged(plain_store, lambda s: edit_attrs(s, "zarr.json", lambda a: a[
        "zarr_vectors"].update(geometry_types=["graph"])))
    assert_error(result, "L4 zarr.json", "geometry 'graph' needs links_convention in "
                 "['explicit'], got 'implicit_sequential'")


def test_reference_polylines_with_wrong_convention(reference_stores: Path) -> None:
    store = kvzarr.MemoryStore()
    src = reference_stores / "polylines.zarr"
    with store.transaction():
        store.set_many([(p.relative_to(src).as_posix(), p.read_bytes())
                        for p in sorted(src.rglob("*")) if p.is_file()])
    assert check(store).ok
    edit_attrs(store, "zarr.json",
               lambda a: a["zarr_vectors"].update(links_convention="explicit"))
    assert_error(check(store), "L4 zarr.json", "geometry 'streamline' needs")


# ------------------------------------------------------------------------ hostile input


HOSTILE = [None, -1, 0, 2**70, 1e308, "x", "", [], [[]], [None], {}, {"a": 1}, True,
           [1e999 / 1e999], [-5, -5, -5], ["0.0.0", 7]]


def test_hostile_metadata_never_raises() -> None:
    """Every member of every document replaced by junk, one at a time (a fixed sample):
    validation reports, it does not raise."""
    rng = np.random.default_rng(7)
    base = object_store()
    items = {k: base.get(k) for k in base.list()}
    docs = [k for k in items if k.endswith("zarr.json")]
    cases = []
    for key in docs:
        doc = json.loads(items[key])
        paths = [("attributes", m) for m in doc.get("attributes", {})]
        paths += [(m,) for m in doc if m != "attributes"]
        for attrs in doc.get("attributes", {}).values():
            if isinstance(attrs, dict):
                paths += [("attributes", k, m) for k, v in doc["attributes"].items()
                          if isinstance(v, dict) for m in v]
        for path in paths:
            cases.append((key, path))
    picks = rng.choice(len(cases), size=min(160, len(cases)), replace=False)
    for i in picks:
        key, path = cases[int(i)]
        junk = HOSTILE[int(rng.integers(len(HOSTILE)))]
        store = kvzarr.MemoryStore()
        store.set_many(list(items.items()))
        doc = json.loads(items[key])
        node = doc
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = junk
        store.set(key, json.dumps(doc).encode())
        result = validate(store, 5)
        assert isinstance(result, ValidationResult), (key, path, junk)


def test_hostile_cells_never_raise() -> None:
    """Random cells truncated, extended or replaced by random bytes."""
    rng = np.random.default_rng(11)
    base = object_store()
    items = {k: base.get(k) for k in base.list()}
    cells = [k for k in items if "/c/" in k]
    for _ in range(60):
        store = kvzarr.MemoryStore()
        store.set_many(list(items.items()))
        key = cells[int(rng.integers(len(cells)))]
        value = items[key]
        mode = int(rng.integers(3))
        if mode == 0:
            value = value[: int(rng.integers(len(value)))]
        elif mode == 1:
            value = value + rng.bytes(int(rng.integers(1, 40)))
        else:
            value = rng.bytes(len(value))
        store.set(key, value)
        result = validate(store, 5)
        assert isinstance(result, ValidationResult)


def test_hostile_structure() -> None:
    """Arrays where groups belong, groups where arrays belong, huge shapes."""
    cases: list[Callable[[Any], None]] = [
        lambda s: put_json(s, "0/zarr.json", get_json(s, "0/vertices/zarr.json")),
        lambda s: put_json(s, "0/vertices/zarr.json", get_json(s, "0/zarr.json")),
        lambda s: edit_attrs(s, "0/object_index/zarr.json", lambda a: a.update(
            num_objects=2**62)),
        lambda s: put_json(s, "0/object_index/object_ids/zarr.json", dict(
            get_json(s, "0/object_index/object_ids/zarr.json"), shape=[2**40])),
        lambda s: put_json(s, "0/vertices/zarr.json", dict(
            get_json(s, "0/vertices/zarr.json"), shape=[2**40] * 3)),
        lambda s: s.set("0/zarr.json", b"[1, 2]"),
        lambda s: s.set("0/vertices/c/0/0", b"stray"),
        lambda s: s.set("0/vertices/c/9/9/9", b"outside"),
    ]
    for damage in cases:
        store = object_store()
        damage(store)
        result = validate(store, 5)
        assert not result.ok or result.warnings, result.summary()
