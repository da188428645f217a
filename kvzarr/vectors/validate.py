"""Validation of a Zarr Vector Format dataset at the five cumulative levels of
zarr-vectors 0.9.2 (``zarr_vectors.validate.validate``,
https://github.com/AllenInstitute/zarr-vectors-py), returning the same
:class:`ValidationResult` shape.

1. structure: the root group and its ``zarr_vectors`` block, level groups, their
   ``vertices`` arrays (a failure here ends validation);
2. metadata: every member of the root, level, array, object-index and link-family
   attributes with its type, the dimensionality, conventions, bins dividing chunks,
   the NGFF ``multiscales`` block against the level groups and their bin shapes
   (a failure here ends validation before the data is read);
3. consistency: every stored cell decoded and checked against the metadata that
   describes it (``nonempty_chunks``, ``vertex_count``, fragment indexes, bins,
   attributes, object manifests, groups, link families);
4. geometry conventions: ``links_convention`` allowed for each geometry type;
5. pyramid: levels contiguous, vertex counts non-increasing, ``object_sparsity``.

Unlike the reference, every check reads what it names: the per-level members live in
``zarr_vectors_level``, and a point cloud is not warned about links it does not have.
Messages are ``"L<n> <key>: <what is wrong>"``. Bad or hostile metadata is an error
entry; only a target that cannot be opened raises.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..metadata.v3 import load_json, parse_array_metadata
from . import dense, manifests
from . import fragments as fragment_index
from .cells import CellArray, unframe
from .grid import DIVIDES_TOLERANCE, SpatialGrid, chunk_name
from .layout import (CROSS_CHUNK_STRATEGIES, GEOMETRY_TYPES, LINKS_CONVENTIONS,
                     OBJECT_INDEX_CONVENTIONS, RootInfo, parse_root)
from .level import Level
from .objects import MAX_OBJECTS
from .target import Target, opened
from .vertex_attributes import StoredLayout

#: messages of one kind kept per validation level before the rest are only counted
MAX_REPORTS = 20
#: listed chunks read per batch (one ``get_many`` per array)
BATCH = 256
#: the most cells one stored chunk (a shard) of a cell array may hold
MAX_CELLS_PER_BLOCK = 1 << 20
#: the most elements of a non-spatial array (object ids, attributes, groups) read whole
MAX_ARRAY_ELEMENTS = 1 << 28
CAPABILITIES = ("preserved_object_ids", "shared_fragments", "fragment_index",
                "multiscale_links")
#: ``links_convention`` each geometry type allows (None: any), zarr-vectors 0.9.2 L4
LINKS_ALLOWED: dict[str, frozenset[str] | None] = {
    "point_cloud": None,
    "line": frozenset({"implicit_sequential"}),
    "polyline": frozenset({"implicit_sequential"}),
    "streamline": frozenset({"implicit_sequential"}),
    "graph": frozenset({"explicit"}),
    "skeleton": frozenset({"implicit_sequential_with_branches", "explicit"}),
    "mesh": frozenset({"explicit"}),
}
DEFAULT_LINKS_CONVENTION = "implicit_sequential"
DELTA_SEGMENT = re.compile(r"^(0|[+-][1-9][0-9]*)$")
VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")
_BROKEN = object()


@dataclass
class ValidationResult:
    """What :func:`validate` found: checks passed, warnings and errors, as strings."""

    level: int
    passed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings allowed)."""
        return not self.errors

    def summary(self) -> str:
        """A printable report, errors and warnings listed."""
        lines = [f"Level {self.level} validation: {'PASS' if self.ok else 'FAIL'}",
                 f"  {len(self.passed)} passed, {len(self.warnings)} warnings, "
                 f"{len(self.errors)} errors"]
        lines += [f"  ERROR: {e}" for e in self.errors]
        lines += [f"  WARN:  {w}" for w in self.warnings]
        return "\n".join(lines)


def validate(target: Any, level: int = 3, *, path: str | None = None) -> ValidationResult:
    """Validate the dataset at ``target`` (a path, URL or kvzarr Store; ``path`` inside
    it) at ``level`` 1..5, cumulatively. Raises only when ``level`` is not 1..5 or the
    target cannot be opened; everything found inside is in the result."""
    if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= 5:
        raise ValueError(f"validation level must be 1 to 5, got {level!r}")
    result = ValidationResult(level=level)
    with opened(target, path, write=False) as t:
        _Validator(t, result).run(level)
    return result


# --- small parsers ---------------------------------------------------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                         np.floating)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:         # an integer beyond float range
        return False


def _vector(value: Any, ndim: int, positive: bool = False) -> tuple[float, ...] | None:
    """``ndim`` finite numbers (positive ones when asked), else None."""
    if not isinstance(value, list) or len(value) != ndim or not all(map(_is_number, value)):
        return None
    out = tuple(float(v) for v in value)
    if positive and not all(v > 0 for v in out):
        return None
    return out


def _divides(whole: float, part: float) -> bool:
    """``part`` fits a whole number (>= 1) of times in ``whole`` (zarr-vectors' 1e-9)."""
    ratio = whole / part
    return round(ratio) >= 1 and abs(ratio - round(ratio)) <= DIVIDES_TOLERANCE


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-300)


def _tolerance(dtype: np.dtype, magnitude: np.ndarray, width: np.ndarray) -> np.ndarray:
    """How far a stored coordinate may sit outside the box its writer put it in: the
    rounding of the stored type and of float64 division at that magnitude."""
    mag = np.abs(np.asarray(magnitude, dtype=np.float64))
    tol = 4 * np.spacing(mag) + 1e-9 * np.asarray(width, dtype=np.float64)
    if dtype.kind == "f" and dtype.itemsize < 8:
        tol = tol + 2 * np.spacing(mag.astype(dtype)).astype(np.float64)
    return tol


def json_key(value: Any) -> str:
    """A hashable stand-in for a JSON value (categories may be lists or objects)."""
    return repr(value)


def _sample(items: Iterable[Any], n: int = 5) -> str:
    items = list(items)
    head = ", ".join(map(str, items[:n]))
    return head + (f" (and {len(items) - n} more)" if len(items) > n else "")


# --- per-level state -------------------------------------------------------------------

@dataclass
class _Level:
    """One level group as the checks learn it; None where a member could not be read."""

    index: int
    path: str
    body: dict[str, Any] | None = None
    chunk_shape: tuple[float, ...] | None = None
    bin_shape: tuple[float, ...] | None = None
    vertices: CellArray | None = None
    dtype: np.dtype | None = None
    fragments: CellArray | None = None
    attributes: dict[str, tuple[CellArray, StoredLayout]] = field(default_factory=dict)
    fragment_attributes: dict[str, tuple[CellArray, StoredLayout]] = field(
        default_factory=dict)
    #: False when the level's cells cannot be checked (a warning said why)
    cells_checked: bool = True
    object_attrs: dict[str, Any] | None = None
    link_families: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: L3: the listed chunks that parse and lie inside the grid, ascending
    listed: list[tuple[int, ...]] = field(default_factory=list)
    fragment_counts: dict[tuple[int, ...], int] = field(default_factory=dict)
    #: L3: vertex rows decoded, None when a cell did not decode
    decoded: int | None = None
    errors_before: int = 0

    def rel(self, name: str) -> str:
        return f"{self.path}/{name}"


class _Validator:
    def __init__(self, target: Target, result: ValidationResult) -> None:
        self.t = target
        self.r = result
        self.stage = 0
        self._docs: dict[str, Any] = {}
        self._counts: Counter[tuple[str, str]] = Counter()
        self.root_attrs: dict[str, Any] = {}
        self.root: RootInfo | None = None
        self.levels: list[_Level] = []
        self.listable = True

    # --- reporting ----------------------------------------------------------------------

    def _where(self, rel: str) -> str:
        return self.t.key(rel) if rel else (self.t.root or "/")

    def error(self, rel: str, what: str, kind: str | None = None) -> None:
        """An error at store key ``rel`` (relative to the dataset); ``kind`` caps
        repeats of one check at :data:`MAX_REPORTS` per level."""
        if self._capped(rel, kind):
            return
        self.r.errors.append(f"L{self.stage} {self._where(rel)}: {what}")

    def warn(self, rel: str, what: str, kind: str | None = None) -> None:
        if self._capped(rel, kind, warning=True):
            return
        self.r.warnings.append(f"L{self.stage} {self._where(rel)}: {what}")

    def good(self, rel: str, what: str) -> None:
        self.r.passed.append(f"L{self.stage} {self._where(rel)}: {what}")

    def _capped(self, rel: str, kind: str | None, warning: bool = False) -> bool:
        if kind is None:
            return False
        key = ("W" if warning else "E", f"{rel}\0{kind}")
        self._counts[key] += 1
        return self._counts[key] > MAX_REPORTS

    def _flush_caps(self) -> None:
        for (sort, key), n in sorted(self._counts.items()):
            if n > MAX_REPORTS:
                rel, kind = key.split("\0", 1)
                msg = (f"L{self.stage} {self._where(rel)}: {n - MAX_REPORTS} more "
                       f"'{kind}' problems not listed")
                (self.r.errors if sort == "E" else self.r.warnings).append(msg)
        self._counts.clear()

    # --- driving ------------------------------------------------------------------------

    def run(self, level: int) -> None:
        stages: list[tuple[int, Callable[[], None]]] = [
            (1, self.structure), (2, self.metadata), (3, self.consistency),
            (4, self.conventions), (5, self.pyramid)]
        for number, check in stages[:level]:
            if not self._stage(number, check) and number <= 2:
                return

    def _stage(self, number: int, check: Callable[[], None]) -> bool:
        """Run one validation level; True when it added no error."""
        self.stage = number
        before = len(self.r.errors)
        try:
            check()
        except Exception as e:   # a check's own failure is a finding, never an escape
            self.error("", f"validation stopped: {type(e).__name__}: {e}")
        self._flush_caps()
        return len(self.r.errors) == before

    # --- store access -------------------------------------------------------------------

    def read_json(self, rel: str) -> dict[str, Any] | None:
        """The document at ``rel`` (cached), None when absent or broken (reported once)."""
        if rel not in self._docs:
            try:
                data = self.t.store.get(self.t.key(rel))
                self._docs[rel] = None if data is None else load_json(data, rel)
            except Exception as e:
                self._docs[rel] = _BROKEN
                self.error(rel, f"unreadable metadata: {e}")
        doc = self._docs[rel]
        return None if doc is _BROKEN else doc

    def exists(self, rel: str) -> bool:
        self.read_json(rel)
        return self._docs[rel] is not None

    def children(self, rel_dir: str) -> list[str]:
        """Names of the sub-directories of ``rel_dir`` (ending in ``/``), from a listing."""
        if not self.listable:
            return []
        names = self.t.store.list_dir(self.t.key(rel_dir))
        return [n[:-1] for n in names if n.endswith("/")]

    def group_attrs(self, rel: str) -> dict[str, Any] | None:
        """A group node's attributes; None (reported) when it is not a group."""
        w = f"{rel}/zarr.json" if rel else "zarr.json"
        doc = self.read_json(w)
        if doc is None or not self.is_node(w, doc, "group"):
            return None
        attrs = doc.get("attributes", {})
        if not isinstance(attrs, dict):
            self.error(w, "attributes must be a JSON object")
            return None
        return attrs

    def is_node(self, w: str, doc: dict[str, Any], node_type: str) -> bool:
        """``doc`` is a Zarr v3 node of ``node_type`` (reported when not)."""
        if doc.get("zarr_format") != 3:
            self.error(w, f"zarr_format is {doc.get('zarr_format')!r}, not 3")
            return False
        if doc.get("node_type") != node_type:
            self.error(w, f"expected a{'n' if node_type == 'array' else ''} {node_type}, "
                       f"got node_type {doc.get('node_type')!r}")
            return False
        return True

    # ====================================================================================
    # L1 structure
    # ====================================================================================

    def structure(self) -> None:
        doc = self.read_json("zarr.json")
        if doc is None:
            if self._docs.get("zarr.json") is None:
                self.error("zarr.json", "no root group here (the key is absent)")
            return
        attrs = self.group_attrs("")
        if attrs is None:
            return
        self.root_attrs = attrs
        if "zarr_vectors" not in attrs:
            self.error("zarr.json", "the root attributes have no 'zarr_vectors' block: "
                       "not a vector dataset")
            return
        self.good("zarr.json", "root group with a zarr_vectors block")
        if isinstance(attrs.get("ome"), dict):
            self.good("zarr.json", "RFC 8 'ome' block present")
        elif "ome" in attrs:
            self.warn("zarr.json", f"the 'ome' block is not an object: {attrs['ome']!r}")
        else:
            self.warn("zarr.json", "no 'ome' block: valid, but not resolvable as a member "
                      "of an OME collection")
        indices = self._level_indices(attrs)
        if not indices:
            self.error("", "no resolution level groups (0/, 1/, ...)")
            return
        self.levels = [_Level(i, str(i)) for i in indices]
        self.good("", f"{len(indices)} resolution level(s): {indices}")
        for lv in self.levels:
            self._level_structure(lv)

    def _level_indices(self, attrs: dict[str, Any]) -> list[int]:
        """Level groups: the root's children named by bare integers; from the
        multiscales paths when the store cannot list its keys."""
        if self.t.store.capabilities.listable:
            try:
                names = self.children("")
            except Exception as e:
                self.warn("", f"cannot list the dataset's keys ({e}); levels are taken "
                          "from multiscales and unlisted cells are not checked")
                self.listable = False
            else:
                return sorted(int(n) for n in names if n.isascii() and n.isdigit()
                              and str(int(n)) == n and self.exists(f"{n}/zarr.json"))
        else:
            self.warn("", "the store cannot list its keys: levels are taken from "
                      "multiscales and unlisted cells are not checked")
            self.listable = False
        out = []
        try:
            for d in attrs["multiscales"][0]["datasets"]:
                p = d["path"]
                if isinstance(p, str) and p.isascii() and p.isdigit() and \
                        self.exists(f"{p}/zarr.json"):
                    out.append(int(p))
        except (KeyError, IndexError, TypeError):
            pass
        if not out and self.exists("0/zarr.json"):
            out.append(0)
        return sorted(set(out))

    def _level_structure(self, lv: _Level) -> None:
        attrs = self.group_attrs(lv.path)
        if attrs is None:
            return
        if attrs:
            self.good(lv.path, "level group has attributes")
        else:
            self.warn(lv.rel("zarr.json"), "the level group has no attributes")
        if self.exists(lv.rel("vertices/zarr.json")):
            self.good(lv.rel("vertices"), "exists")
        else:
            self.error(lv.rel("vertices"), "missing: every level holds a vertices array")
        if not self.exists(lv.rel("vertex_fragments/zarr.json")):
            self.warn(lv.rel("vertex_fragments"), "missing: objects and bins cannot be "
                      "addressed inside chunks")
        for name in ("vertex_attributes", "fragment_attributes", "object_index",
                     "object_attributes", "groups", "group_attributes"):
            if self.exists(lv.rel(f"{name}/zarr.json")):
                self.good(lv.rel(name), "exists")
        if self.exists(lv.rel("links/zarr.json")):
            deltas = [d for d in self.children(lv.rel("links/"))]
            if deltas:
                self.good(lv.rel("links"), f"link families {deltas}")
            elif self.listable:
                self.warn(lv.rel("links"), "a links group without any <delta> family")

    # ====================================================================================
    # L2 metadata
    # ====================================================================================

    def metadata(self) -> None:
        root = self._root_metadata()
        if root is None:
            return
        self.root = root
        self._multiscales(root)
        for lv in self.levels:
            self._level_metadata(lv)

    # --- root -----------------------------------------------------------------------

    def _root_metadata(self) -> RootInfo | None:
        """Every member of the root block checked and reported; the readers' parse
        (:func:`parse_root`) last, so that ``ok`` means kvzarr opens the dataset."""
        w = "zarr.json"
        zv = self.root_attrs.get("zarr_vectors")
        if not isinstance(zv, dict):
            self.error(w, "zarr_vectors must be a JSON object")
            return None
        before = len(self.r.errors)
        for member in ("zv_version", "chunk_shape", "bounds", "geometry_types"):
            if member not in zv:
                self.error(w, f"zarr_vectors.{member} is required and missing")
        version = zv.get("zv_version")
        if "zv_version" in zv and not isinstance(version, str):
            self.error(w, f"zarr_vectors.zv_version must be a string, got {version!r}")
        elif isinstance(version, str):
            m = VERSION.match(version)
            if m is None:
                self.warn(w, f"zv_version {version!r} is not a version number")
            elif (int(m[1]), int(m[2])) < (0, 9):
                self.warn(w, f"zv_version {version} predates 0.9.0, whose layout this "
                          "validator checks")
        ndim = self._axes()
        if ndim is not None:
            self._root_shapes(zv, ndim)
        self._geometry_types(zv)
        for member, allowed in (("links_convention", LINKS_CONVENTIONS),
                                ("object_index_convention", OBJECT_INDEX_CONVENTIONS),
                                ("cross_chunk_strategy", CROSS_CHUNK_STRATEGIES)):
            if member in zv and zv[member] not in allowed:
                self.error(w, f"zarr_vectors.{member} {zv[member]!r} is not one of "
                           f"{list(allowed)}")
        caps = zv.get("format_capabilities", [])
        if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
            self.error(w, f"zarr_vectors.format_capabilities must be a list of names, got "
                       f"{caps!r}")
        else:
            unknown = [c for c in caps if c not in CAPABILITIES]
            if unknown:
                self.warn(w, f"unknown format_capabilities {unknown}")
        if len(self.r.errors) > before:
            return None
        try:
            root = parse_root(self.root_attrs, self.t.key(w))
        except Exception as e:
            self.error(w, f"the readers refuse the root attributes: {e}")
            return None
        self.good(w, f"root metadata: D={root.ndim}, geometry {list(root.geometry_types)}")
        return root

    def _axes(self) -> int | None:
        """D, the number of ``multiscales[0].axes``; None (reported) when unreadable."""
        w = "zarr.json"
        ms = self.root_attrs.get("multiscales")
        if not (isinstance(ms, list) and ms and isinstance(ms[0], dict)):
            self.error(w, "multiscales must be a non-empty list of objects: its first "
                       "entry's axes give the dimensionality")
            return None
        axes = ms[0].get("axes")
        if not isinstance(axes, list) or not axes:
            self.error(w, "multiscales[0].axes must be a non-empty list")
            return None
        if not all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in axes):
            self.error(w, "every multiscales[0].axes entry must be an object with a name")
            return None
        names = [a["name"] for a in axes]
        if len(set(names)) != len(names):
            self.error(w, f"multiscales[0].axes names repeat: {names}")
        bad_types = [a.get("type") for a in axes if not isinstance(a.get("type", ""), str)]
        if bad_types:
            self.error(w, f"axis types must be strings, got {bad_types}")
        return len(axes)

    def _root_shapes(self, zv: dict[str, Any], ndim: int) -> None:
        w = "zarr.json"
        chunk = _vector(zv.get("chunk_shape"), ndim, positive=True)
        if "chunk_shape" in zv and chunk is None:
            self.error(w, f"zarr_vectors.chunk_shape must be {ndim} positive numbers (one "
                       f"per axis), got {zv['chunk_shape']!r}")
        bounds = zv.get("bounds")
        if "bounds" in zv:
            if not (isinstance(bounds, list) and len(bounds) == 2):
                self.error(w, f"zarr_vectors.bounds must be [min, max], got {bounds!r}")
            else:
                lo, hi = _vector(bounds[0], ndim), _vector(bounds[1], ndim)
                if lo is None or hi is None:
                    self.error(w, f"zarr_vectors.bounds corners must be {ndim} finite "
                               f"numbers each, got {bounds!r}")
                elif any(a > b for a, b in zip(lo, hi)):
                    self.error(w, f"zarr_vectors.bounds min {list(lo)} exceeds max "
                               f"{list(hi)}")
        if zv.get("base_bin_shape") is not None:
            bins = _vector(zv["base_bin_shape"], ndim, positive=True)
            if bins is None:
                self.error(w, f"zarr_vectors.base_bin_shape must be {ndim} positive "
                           f"numbers, got {zv['base_bin_shape']!r}")
            elif chunk is not None:
                for axis, (c, b) in enumerate(zip(chunk, bins)):
                    if not _divides(c, b):
                        self.error(w, f"base_bin_shape[{axis}] = {b:g} does not divide "
                                   f"chunk_shape[{axis}] = {c:g}")

    def _geometry_types(self, zv: dict[str, Any]) -> None:
        w = "zarr.json"
        if "geometry_types" not in zv:
            return
        geoms = zv["geometry_types"]
        if not isinstance(geoms, list) or not all(isinstance(g, str) for g in geoms):
            self.error(w, f"zarr_vectors.geometry_types must be a list of names, got "
                       f"{geoms!r}")
        elif not geoms:
            self.error(w, "zarr_vectors.geometry_types is empty: readers decode by its "
                       "first entry")
        else:
            unknown = [g for g in geoms if g not in GEOMETRY_TYPES]
            if unknown:
                self.error(w, f"unknown geometry types {unknown} (known: "
                           f"{list(GEOMETRY_TYPES)})")

    # --- multiscales --------------------------------------------------------------------

    def _multiscales(self, root: RootInfo) -> None:
        """``datasets`` paths are the level groups in order; each level's bin shape (the
        base bin at level 0, twice the translation above) agrees with its scale, and the
        scales do not decrease."""
        w = "zarr.json"
        datasets = root.attributes["multiscales"][0].get("datasets")
        if not isinstance(datasets, list):
            self.error(w, "multiscales[0].datasets must be a list")
            return
        by_path: dict[str, dict[str, Any]] = {}
        order = []
        for i, ds in enumerate(datasets):
            if not isinstance(ds, dict) or not isinstance(ds.get("path"), str):
                self.error(w, f"multiscales[0].datasets[{i}] has no string path")
                continue
            if ds["path"] in by_path:
                self.error(w, f"multiscales[0].datasets path {ds['path']!r} repeats")
            by_path[ds["path"]] = ds
            order.append(ds["path"])
        groups = [lv.path for lv in self.levels]
        if set(order) != set(groups):
            self.error(w, f"multiscales[0].datasets paths {order} are not the level groups "
                       f"{groups}")
        elif order != groups:
            self.error(w, f"multiscales[0].datasets paths {order} are not in level order")
        base = root.base_bin_shape
        previous: tuple[float, ...] | None = None
        for lv in self.levels:
            ds = by_path.get(lv.path)
            if ds is None:
                if lv.index == 0:
                    lv.bin_shape = base
                continue
            scale, translation = self._transforms(ds, lv, root.ndim)
            if lv.index == 0:
                lv.bin_shape = base
                if translation is not None and not all(
                        _close(t, b / 2) for t, b in zip(translation, base)):
                    self.error(w, f"level 0 translation {list(translation)} is not half "
                               f"the base bin shape {list(base)}")
            elif translation is None:
                self.error(w, f"level {lv.index} has no translation: a coarse level's bin "
                           "shape is twice its translation")
            elif not all(t > 0 for t in translation):
                self.error(w, f"level {lv.index} translation {list(translation)} gives a "
                           "bin shape that is not positive")
            else:
                lv.bin_shape = tuple(2 * t for t in translation)
            if scale is None or lv.bin_shape is None:
                continue
            want = [b / b0 for b, b0 in zip(lv.bin_shape, base)]
            if not all(_close(s, x) for s, x in zip(scale, want)):
                self.error(w, f"level {lv.index} scale {list(scale)} is not its bin shape "
                           f"{list(lv.bin_shape)} over the base bin {list(base)}")
            if previous is not None and any(s < p * (1 - 1e-9)
                                            for s, p in zip(scale, previous)):
                self.error(w, f"level {lv.index} scale {list(scale)} is finer than the "
                           f"level below's {list(previous)}: bin ratios must not decrease")
            previous = scale

    def _transforms(self, ds: dict[str, Any], lv: _Level, ndim: int
                    ) -> tuple[tuple[float, ...] | None, tuple[float, ...] | None]:
        """(scale, translation) of one dataset entry, each None when absent or bad."""
        w = "zarr.json"
        transforms = ds.get("coordinateTransformations")
        if not isinstance(transforms, list) or not all(isinstance(x, dict)
                                                       for x in transforms):
            self.error(w, f"multiscales dataset {lv.path!r} coordinateTransformations must "
                       "be a list of objects")
            return None, None
        found: dict[str, Any] = {}
        for x in transforms:
            kind = x.get("type")
            if not isinstance(kind, str):
                self.error(w, f"multiscales dataset {lv.path!r} has a transformation "
                           f"without a type name: {x!r}")
                continue
            if kind in found:
                self.error(w, f"multiscales dataset {lv.path!r} has two {kind!r} "
                           "transformations")
            found[kind] = x.get(kind)
        scale = translation = None
        if "scale" not in found:
            self.error(w, f"multiscales dataset {lv.path!r} has no scale transformation")
        else:
            scale = _vector(found["scale"], ndim, positive=True)
            if scale is None:
                self.error(w, f"multiscales dataset {lv.path!r} scale must be {ndim} "
                           f"positive numbers, got {found['scale']!r}")
        if "translation" in found:
            translation = _vector(found["translation"], ndim)
            if translation is None:
                self.error(w, f"multiscales dataset {lv.path!r} translation must be {ndim} "
                           f"numbers, got {found['translation']!r}")
        return scale, translation

    # --- one level ----------------------------------------------------------------------

    def _level_metadata(self, lv: _Level) -> None:
        w = lv.rel("zarr.json")
        attrs = self.group_attrs(lv.path) or {}
        body = attrs.get("zarr_vectors_level")
        if not isinstance(body, dict):
            self.error(w, "the level has no 'zarr_vectors_level' attributes object")
            return
        lv.body = body
        if not (_is_int(body.get("level")) and body["level"] == lv.index):
            self.error(w, f"zarr_vectors_level.level is {body.get('level')!r}, the group "
                       f"is level {lv.index}")
        count = body.get("vertex_count")
        if not (_is_int(count) and count >= 0):
            self.error(w, f"zarr_vectors_level.vertex_count must be a non-negative "
                       f"integer, got {count!r}")
        self._arrays_present(lv, body)
        self._level_members(lv, body)
        if body.get("chunk_attribute_name") is not None:
            self.warn(w, "a level chunked by an attribute (chunk_by_attribute): its "
                      "arrays are not checked")
            lv.cells_checked = False
            return
        self._level_chunk_shape(lv, body)
        self._cell_arrays(lv)
        self._object_index_metadata(lv)
        self._family_groups(lv)
        self._dense_metadata(lv)
        self._link_family_metadata(lv)

    def _arrays_present(self, lv: _Level, body: dict[str, Any]) -> None:
        w = lv.rel("zarr.json")
        present = body.get("arrays_present")
        if not isinstance(present, list) or not all(isinstance(a, str) for a in present):
            self.error(w, f"zarr_vectors_level.arrays_present must be a list of family "
                       f"names, got {present!r}")
            return
        absent = [a for a in present if "/" in a or a in ("", ".", "..")
                  or not self.exists(lv.rel(f"{a}/zarr.json"))]
        if absent:
            self.warn(w, f"arrays_present lists {absent}, which the level does not hold")

    def _level_members(self, lv: _Level, body: dict[str, Any]) -> None:
        w = lv.rel("zarr.json")
        checks = (("object_sparsity", _is_number, "a number"),
                  ("fragments_tile", lambda v: isinstance(v, bool), "true or false"),
                  ("parent_level", lambda v: v is None or _is_int(v), "null or an integer"),
                  ("coarsening_method", lambda v: isinstance(v, str), "a name"))
        for member, check, what in checks:
            if member in body and not check(body[member]):
                self.error(w, f"zarr_vectors_level.{member} must be {what}, got "
                           f"{body[member]!r}")

    def _level_chunk_shape(self, lv: _Level, body: dict[str, Any]) -> None:
        """The level's chunk shape: the root's, or an override that is a whole multiple
        of it and that the level's bin divides."""
        w = lv.rel("zarr.json")
        root = self.root
        assert root is not None
        override = body.get("chunk_shape")
        if override is None:
            lv.chunk_shape = root.chunk_shape
        else:
            chunk = _vector(override, root.ndim, positive=True)
            if chunk is None:
                self.error(w, f"zarr_vectors_level.chunk_shape must be {root.ndim} "
                           f"positive numbers, got {override!r}")
                return
            for axis, (c, r) in enumerate(zip(chunk, root.chunk_shape)):
                if not _divides(c, r):
                    self.error(w, f"chunk_shape[{axis}] = {c:g} is not a whole multiple of "
                               f"the root's {r:g}")
            lv.chunk_shape = chunk
        # (a coarse level on the root's chunks may have bins wider than its chunks: its
        # metavertices are one fragment each, not binned; an override must be divisible)
        if lv.bin_shape is not None and override is not None:
            for axis, (c, b) in enumerate(zip(lv.chunk_shape, lv.bin_shape)):
                if not _divides(c, b):
                    self.error(w, f"the level's bin shape {b:g} does not divide its "
                               f"chunk_shape {c:g} on axis {axis}")

    # --- cell arrays --------------------------------------------------------------------

    def _cell_arrays(self, lv: _Level) -> None:
        """The documents of the level's per-chunk arrays: readable, over one grid, with
        the attributes their readers use."""
        lv.vertices = self.cell_array(lv.rel("vertices"), "vertices")
        if lv.vertices is None:
            lv.cells_checked = False
            return
        v_attrs = lv.vertices.meta.attributes
        if "nonempty_chunks" not in v_attrs:
            self.error(lv.rel("vertices"), "no nonempty_chunks attribute: readers see no "
                       "chunk")
        try:
            dtype = np.dtype(v_attrs.get("dtype", "float32")).newbyteorder("<")
            if dtype.kind not in "fiu":
                raise TypeError(f"{dtype} is not a number type")
            lv.dtype = dtype
        except Exception as e:
            self.error(lv.rel("vertices"), f"dtype {v_attrs.get('dtype')!r} is not a "
                       f"numeric data type ({e})")
        encoding = v_attrs.get("encoding", "raw")
        if encoding == "draco":
            self.warn(lv.rel("vertices"), "draco-encoded vertices: the level's cells are "
                      "not checked")
            lv.cells_checked = False
        elif encoding != "raw":
            self.error(lv.rel("vertices"), f"encoding {encoding!r} is not raw or draco")
        if self.exists(lv.rel("vertex_fragments/zarr.json")):
            lv.fragments = self.cell_array(lv.rel("vertex_fragments"), "vertex_fragments",
                                           lv.vertices)
            enc = lv.fragments.meta.attributes.get("encoding") if lv.fragments else None
            if enc not in (None, "fragment_index_v1"):
                self.error(lv.rel("vertex_fragments"), f"encoding {enc!r} is not "
                           "fragment_index_v1")
        for family, tag, into in (("vertex_attributes", "attribute", lv.attributes),
                                  ("fragment_attributes", "fragment_attribute",
                                   lv.fragment_attributes)):
            for name in self.children(lv.rel(f"{family}/")):
                rel = lv.rel(f"{family}/{name}")
                if not self.exists(f"{rel}/zarr.json"):
                    self.warn(rel, "a directory without zarr.json: not an array")
                    continue
                cells = self.cell_array(rel, tag, lv.vertices)
                stored = self.stored_layout(rel, cells) if cells is not None else None
                if stored is not None:
                    into[name] = (cells, stored)

    def cell_array(self, rel: str, tag: str, like: CellArray | None = None
                   ) -> CellArray | None:
        """The cell array at ``rel``, None (reported) when its document is unusable;
        ``like`` is the vertices array whose grid it must share."""
        assert self.root is not None
        doc = self.read_json(f"{rel}/zarr.json")
        if doc is None or not self.is_node(f"{rel}/zarr.json", doc, "array"):
            return None
        try:
            cells = CellArray(self.t.key(rel), doc)
        except Exception as e:
            self.error(rel, f"not a readable cell array: {e}")
            return None
        if cells.meta.ndim != self.root.ndim:
            self.error(rel, f"the array has {cells.meta.ndim} dimensions, the dataset "
                       f"{self.root.ndim}")
            return None
        if math.prod(cells.chunk_shape) > MAX_CELLS_PER_BLOCK:
            self.error(rel, f"stored chunks (shards) of {tuple(cells.chunk_shape)} cells "
                       f"are more than the {MAX_CELLS_PER_BLOCK} a shard is read with")
            return None
        attrs = cells.meta.attributes
        if attrs.get("zv_array") is None:
            self.warn(rel, f"no zv_array tag (expected {tag!r})")
        elif attrs["zv_array"] != tag:
            self.error(rel, f"zv_array is {attrs['zv_array']!r}, expected {tag!r}")
        if "name" in attrs and attrs["name"] != rel.rsplit("/", 1)[-1]:
            self.error(rel, f"name attribute {attrs['name']!r} is not the array's name")
        names = attrs.get("nonempty_chunks", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            self.error(rel, "nonempty_chunks must be a list of chunk names")
            return None
        if like is not None and (tuple(cells.meta.shape) != tuple(like.meta.shape)
                                 or tuple(cells.origin) != tuple(like.origin)):
            self.error(rel, f"grid {tuple(cells.meta.shape)} at origin "
                       f"{tuple(cells.origin.tolist())} differs from the vertices' "
                       f"{tuple(like.meta.shape)} at {tuple(like.origin.tolist())}")
            return None
        return cells

    def stored_layout(self, rel: str, cells: CellArray) -> StoredLayout | None:
        """How an attribute's cells read: checked member by member, then parsed as the
        readers parse it."""
        attrs = cells.meta.attributes
        bad = len(self.r.errors)
        row_shape = attrs.get("row_shape")
        if row_shape is not None and not (isinstance(row_shape, list) and all(
                _is_int(v) and v >= 1 for v in row_shape)):
            self.error(rel, f"row_shape must be a list of positive integers, got "
                       f"{row_shape!r}")
        channels = attrs.get("channel_names")
        if channels is not None and not (
                isinstance(channels, list) and all(isinstance(c, str) for c in channels)
                and (not isinstance(row_shape, list) or [len(channels)] == row_shape)):
            self.error(rel, f"channel_names {channels!r} must name each of the row_shape "
                       f"{row_shape!r} channels")
        encoding = attrs.get("encoding")
        if encoding not in (None, "raw", "dictionary"):
            self.error(rel, f"encoding {encoding!r} is not raw or dictionary")
        categories = attrs.get("categories")
        if encoding == "dictionary" and isinstance(categories, list):
            if len({json_key(c) for c in categories}) != len(categories):
                self.error(rel, "dictionary categories repeat")
        if "ordered" in attrs and not isinstance(attrs["ordered"], bool):
            self.error(rel, f"ordered must be true or false, got {attrs['ordered']!r}")
        if len(self.r.errors) != bad:
            return None
        try:
            stored = StoredLayout.from_attributes(cells.meta.attributes, rel)
            if stored.dtype.kind not in "biuf" or any(s < 1 for s in stored.row_shape):
                raise TypeError(f"dtype {stored.dtype} rows {stored.row_shape}")
            if stored.categories is not None and stored.dtype.kind not in "iu":
                raise TypeError("dictionary codes must be integers")
            return stored
        except Exception as e:
            self.error(rel, f"the attribute's dtype/row_shape/categories are unusable: {e}")
            return None

    # --- object index and link families -------------------------------------------------

    def _object_index_metadata(self, lv: _Level) -> None:
        rel = lv.rel("object_index")
        attrs = self.group_attrs(rel) if self.exists(f"{rel}/zarr.json") else None
        if attrs is None:
            return
        w = f"{rel}/zarr.json"
        bad = len(self.r.errors)
        if attrs.get("zv_array", "object_index") != "object_index":
            self.error(w, f"zv_array is {attrs['zv_array']!r}, expected 'object_index'")
        layout = attrs.get("layout", "vlen_manifests_v2")
        if layout not in ("vlen_manifests_v2", "vlen_manifests_v1"):
            self.error(w, f"object index layout {layout!r} is not vlen_manifests_v2 or v1")
        assert self.root is not None
        if attrs.get("sid_ndim") != self.root.ndim or not _is_int(attrs.get("sid_ndim")):
            self.error(w, f"sid_ndim {attrs.get('sid_ndim')!r} is not the dataset's "
                       f"dimensionality {self.root.ndim}")
        for member in ("num_objects", "num_present"):
            if not (_is_int(attrs.get(member)) and attrs[member] >= 0):
                self.error(w, f"{member} must be a non-negative integer, got "
                           f"{attrs.get(member)!r}")
        if not isinstance(attrs.get("object_ids_sorted", False), bool):
            self.error(w, f"object_ids_sorted must be true or false, got "
                       f"{attrs['object_ids_sorted']!r}")
        if len(self.r.errors) == bad:
            lv.object_attrs = attrs

    def _family_groups(self, lv: _Level) -> None:
        """The groups that hold a level's families are Zarr groups."""
        for family in ("vertex_attributes", "fragment_attributes", "object_attributes",
                       "group_attributes", "links"):
            if self.exists(lv.rel(f"{family}/zarr.json")):
                self.group_attrs(lv.rel(family))

    def _dense_metadata(self, lv: _Level) -> None:
        """The documents of the object-level arrays: Zarr arrays whose zv_array tag,
        name, dtype and shape attributes (where written) agree with them."""
        arrays = [("object_index/manifests", None), ("object_index/object_ids", None),
                  ("groups", "groups")]
        for family, tag in (("object_attributes", "object_attribute"),
                            ("group_attributes", "groupings_attribute")):
            arrays += [(f"{family}/{name}", tag) for name in
                       self.children(lv.rel(f"{family}/"))]
        for name, tag in arrays:
            rel = lv.rel(name)
            doc = self.read_json(f"{rel}/zarr.json")
            if doc is None or not self.is_node(f"{rel}/zarr.json", doc, "array"):
                continue
            try:
                meta = parse_array_metadata(doc)
            except Exception as e:
                self.error(rel, f"not a readable array: {e}")
                continue
            attrs = meta.attributes
            if tag is not None and attrs.get("zv_array", tag) != tag:
                self.error(rel, f"zv_array is {attrs['zv_array']!r}, expected {tag!r}")
            if tag is None or tag == "groups":
                continue
            for member, want in (("name", name.rsplit("/", 1)[-1]),
                                 ("dtype", doc.get("data_type")),
                                 ("shape", list(meta.shape))):
                if member in attrs and attrs[member] != want:
                    self.error(rel, f"{member} attribute {attrs[member]!r} is not the "
                               f"array's {want!r}")

    def _link_family_metadata(self, lv: _Level) -> None:
        """Each ``links/<delta>`` family's attributes, and the level it points to."""
        for segment in self.children(lv.rel("links/")):
            rel = lv.rel(f"links/{segment}")
            w = f"{rel}/zarr.json"
            if not DELTA_SEGMENT.match(segment):
                self.error(rel, f"{segment!r} is not a level delta (0, +N or -N)")
                continue
            attrs = self.group_attrs(rel) if self.exists(w) else None
            if attrs is None:
                self.error(rel, "a link family without a group zarr.json")
                continue
            bad = len(self.r.errors)
            delta = int(segment)
            if attrs.get("zv_array", "links_family") != "links_family":
                self.error(w, f"zv_array is {attrs['zv_array']!r}, expected 'links_family'")
            if attrs.get("level_delta", delta) != delta or not _is_int(
                    attrs.get("level_delta", delta)):
                self.error(w, f"level_delta {attrs.get('level_delta')!r} is not the "
                           f"family's {delta}")
            if not (_is_int(attrs.get("link_width")) and attrs["link_width"] >= 1):
                self.error(w, f"link_width must be a positive integer, got "
                           f"{attrs.get('link_width')!r}")
            if not isinstance(attrs.get("directed", False), bool):
                self.error(w, f"directed must be true or false, got {attrs['directed']!r}")
            if attrs.get("store", "canonical") not in ("canonical", "duplicate"):
                self.error(w, f"store {attrs['store']!r} is not canonical or duplicate")
            for member in ("sid_ndim", "num_links", "num_physical_records"):
                if member in attrs and not (_is_int(attrs[member]) and attrs[member] >= 0):
                    self.error(w, f"{member} must be a non-negative integer, got "
                               f"{attrs[member]!r}")
            if lv.index + delta not in {x.index for x in self.levels}:
                self.error(w, f"delta {segment} points to level {lv.index + delta}, which "
                           "the dataset does not have")
            if len(self.r.errors) == bad:
                lv.link_families[segment] = attrs

    # ====================================================================================
    # L3 consistency
    # ====================================================================================

    def consistency(self) -> None:
        for lv in self.levels:
            lv.errors_before = len(self.r.errors)
            if not lv.cells_checked or lv.vertices is None or lv.body is None:
                continue
            self._check_listing(lv)
            self._check_lists_agree(lv)
            for cells in self._level_cell_arrays(lv):
                self._check_unlisted(cells)
            self._check_cells(lv)
            self._check_vertex_count(lv)
            ids = self._check_objects(lv)
            self._check_object_rows(lv, "object_attributes", ids)
            self._check_groups(lv, ids)
            for segment, family in lv.link_families.items():
                _check_link_cells(self, lv, segment, family)
            self._check_reader_opens(lv)

    def _level_cell_arrays(self, lv: _Level) -> list[CellArray]:
        out = [lv.vertices] + ([lv.fragments] if lv.fragments is not None else [])
        out += [c for c, _ in lv.attributes.values()]
        out += [c for c, _ in lv.fragment_attributes.values()]
        return out  # type: ignore[return-value]

    # --- nonempty_chunks ------------------------------------------------------------------

    def _check_listing(self, lv: _Level) -> None:
        """``nonempty_chunks`` of the vertices: string-sorted (readers bisect it), no
        repeats, every name a chunk of the grid."""
        assert lv.vertices is not None
        rel = lv.rel("vertices")
        lv.listed = self.listed_chunks(lv.vertices, rel, check_order=True)
        self.good(rel, f"{len(lv.listed)} chunks listed")

    def listed_chunks(self, cells: CellArray, rel: str, check_order: bool = False
                      ) -> list[tuple[int, ...]]:
        """The chunks an array's ``nonempty_chunks`` names that parse and lie inside its
        grid, ascending; the others reported."""
        names = cells.meta.attributes.get("nonempty_chunks", [])
        if check_order:
            for a, b in zip(names, names[1:]):
                if a > b:
                    self.error(rel, f"nonempty_chunks is not string-sorted ({a!r} before "
                               f"{b!r}): readers bisect it")
                    break
            repeated = [n for n, k in Counter(names).items() if k > 1]
            if repeated:
                self.error(rel, f"nonempty_chunks repeats {_sample(repeated)}")
        lo = cells.origin
        hi = lo + np.asarray(cells.meta.shape, dtype=np.int64)
        out = set()
        for name in names:
            try:
                chunk = tuple(int(p) for p in name.split("."))
                if len(chunk) != cells.meta.ndim:
                    raise ValueError(name)
            except (ValueError, AttributeError):
                self.error(rel, f"nonempty_chunks entry {name!r} is not a chunk name of "
                           f"{cells.meta.ndim} integers", kind="chunk name")
                continue
            if chunk_name(chunk) != name:
                self.error(rel, f"nonempty_chunks entry {name!r} is not in the canonical "
                           f"form {chunk_name(chunk)!r} readers look up",
                           kind="chunk name")
                continue
            if any(c < a or c >= b for c, a, b in zip(chunk, lo, hi)):
                self.error(rel, f"nonempty_chunks names chunk {name}, outside the grid "
                           f"{tuple(cells.meta.shape)} at origin {tuple(lo.tolist())}",
                           kind="chunk outside grid")
                continue
            out.add(chunk)
        return sorted(out)

    def _check_lists_agree(self, lv: _Level) -> None:
        """Fragments and attributes list the chunks the vertices list."""
        assert lv.vertices is not None
        want = set(lv.vertices.meta.attributes.get("nonempty_chunks", []))
        for cells in self._level_cell_arrays(lv)[1:]:
            names = cells.meta.attributes.get("nonempty_chunks")
            if names is None:
                continue
            extra, missing = set(names) - want, want - set(names)
            rel = self.t_rel(cells)
            if extra:
                self.error(rel, f"nonempty_chunks lists {_sample(sorted(extra))}, which "
                           "the vertices do not")
            if missing:
                self.error(rel, f"nonempty_chunks lacks {_sample(sorted(missing))}, which "
                           "the vertices list")

    def t_rel(self, cells: CellArray) -> str:
        """An array's path relative to the dataset (its messages add the prefix back)."""
        return cells.path[len(self.t.prefix):]

    # --- stored keys ----------------------------------------------------------------------

    def _check_unlisted(self, cells: CellArray) -> None:
        """Every stored cell is listed in ``nonempty_chunks``: readers never look for
        one that is not, so its rows are invisible."""
        if not self.listable:
            return
        rel = self.t_rel(cells)
        listed = set(cells.meta.attributes.get("nonempty_chunks", []))
        enc = cells.meta.chunk_key_encoding
        block_shape = np.asarray(cells.chunk_shape, dtype=np.int64)
        grid = -(-np.asarray(cells.meta.shape, dtype=np.int64) // block_shape)
        prefix = cells.path + "/"
        suspects: list[tuple[str, tuple[int, ...]]] = []
        for key in self.t.store.list_prefix(prefix):
            tail = key[len(prefix):]
            if tail == "zarr.json":
                continue
            block = enc.decode(tail, cells.meta.ndim)
            if block is None:
                self.warn(rel, f"stored key {tail!r} is not a chunk key of the array",
                          kind="stray key")
                continue
            if any(b >= g for b, g in zip(block, grid)):
                self.error(rel, f"stored key {tail!r} lies outside the array's grid",
                           kind="key outside grid")
                continue
            if any(chunk_name(c) not in listed for c in self._block_chunks(cells, block)):
                suspects.append((key, block))
        for (key, block), value in zip(suspects, self.t.store.get_many(
                [k for k, _ in suspects])):
            try:
                payloads = self._decode_block(cells, value, key, block)
            except Exception as e:
                self.error(rel, f"stored key {key[len(prefix):]!r} does not decode: {e}",
                           kind="undecodable key")
                continue
            for chunk, payload in zip(self._block_chunks(cells, block), payloads):
                if payload and chunk_name(chunk) not in listed:
                    self.error(rel, f"stored cell of chunk {chunk_name(chunk)} "
                               f"({key[len(prefix):]}) is not in nonempty_chunks: readers "
                               "never see it", kind="unlisted cell")

    @staticmethod
    def _block_chunks(cells: CellArray, block: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The absolute chunks of the cells a stored block (a cell or a shard) holds, in C
        order, clipped to the array's shape."""
        shape = cells.chunk_shape
        first = [b * s for b, s in zip(block, shape)]
        ranges = [range(f, min(f + s, n))
                  for f, s, n in zip(first, shape, cells.meta.shape)]
        origin = cells.origin.tolist()
        out = []
        for cell in np.ndindex(*[len(r) for r in ranges]):
            out.append(tuple(r[i] + o for r, i, o in zip(ranges, cell, origin)))
        return out

    @staticmethod
    def _decode_block(cells: CellArray, value: Any, key: str, block: tuple[int, ...]
                      ) -> list[bytes]:
        """The payloads of the cells of one stored block, in :meth:`_block_chunks`
        order (b"" for a cell left empty)."""
        if value is None:
            return []
        if cells.plain and all(s == 1 for s in cells.chunk_shape):
            return [bytes(unframe(value, key))]
        decoded = cells.pipeline.decode(bytes(value), cells.spec, key)
        shape = [min(s, n - b * s) for s, n, b in zip(cells.chunk_shape, cells.meta.shape,
                                                       block)]
        return [bytes(decoded[idx] or b"") for idx in np.ndindex(*shape)]

    def fetch(self, cells: CellArray, chunks: list[tuple[int, ...]]
              ) -> list[bytes | Exception | None]:
        """Each chunk's payload: bytes, None when absent or empty, or the exception its
        stored block raised when decoded."""
        origin = cells.origin.tolist()
        shape = cells.chunk_shape
        places = []
        for chunk in chunks:
            cell = [c - o for c, o in zip(chunk, origin)]
            block = tuple(c // s for c, s in zip(cell, shape))
            inner = tuple(c % s for c, s in zip(cell, shape))
            places.append((cells.key_of(block), inner))
        keys = list(dict.fromkeys(k for k, _ in places))
        values = dict(zip(keys, self.t.store.get_many(keys)))
        decoded: dict[str, Any] = {}
        out: list[bytes | Exception | None] = []
        for key, inner in places:
            value = values.get(key)
            if value is None:
                out.append(None)
                continue
            if key not in decoded:
                try:
                    if cells.plain and all(s == 1 for s in shape):
                        decoded[key] = bytes(unframe(value, key))
                    else:
                        decoded[key] = cells.pipeline.decode(bytes(value), cells.spec, key)
                except Exception as e:
                    decoded[key] = e
            got = decoded[key]
            if isinstance(got, (bytes, Exception)):
                out.append(got or None)
            else:
                out.append(bytes(got[inner] or b"") or None)
        return out

    # --- cells ------------------------------------------------------------------------

    def _check_cells(self, lv: _Level) -> None:
        """Every listed chunk's vertices, fragment index and attribute cells, a batch of
        chunks at a time."""
        assert lv.vertices is not None and lv.body is not None
        total, failed = 0, False
        plain = self._plain_point_cloud(lv)
        tile = lv.body.get("fragments_tile") is True
        for start in range(0, len(lv.listed), BATCH):
            batch = lv.listed[start:start + BATCH]
            verts = self.fetch(lv.vertices, batch)
            frags = self.fetch(lv.fragments, batch) if lv.fragments is not None else None
            attrs = {n: self.fetch(c, batch) for n, (c, _) in lv.attributes.items()}
            fattrs = {n: self.fetch(c, batch) for n, (c, _) in
                      lv.fragment_attributes.items()}
            for i, chunk in enumerate(batch):
                rows = self._vertex_rows(lv, chunk, verts[i])
                if rows is None:
                    failed = failed or verts[i] is not None   # (absent: 0 rows)
                    continue
                total += len(rows)
                finite = self._check_positions(lv, chunk, rows)
                index = None
                if frags is not None:
                    index = self._fragment_index(lv, chunk, frags[i], len(rows), tile)
                if index is not None and plain:
                    self._check_bins(lv, chunk, rows, finite, index)
                for name, (cells, stored) in lv.attributes.items():
                    self._check_attribute(cells, stored, chunk, attrs[name][i], len(rows))
                for name, (cells, stored) in lv.fragment_attributes.items():
                    if index is not None:
                        self._check_attribute(cells, stored, chunk, fattrs[name][i],
                                              index.count, what="fragments")
        lv.decoded = None if failed else total
        if lv.fragments is None:
            lv.fragment_counts = {}

    def _plain_point_cloud(self, lv: _Level) -> bool:
        """A level whose fragments are its bins: a point cloud without objects, not
        coarsened (zarr-vectors writes one range fragment per bin, empty ones too)."""
        assert self.root is not None and lv.body is not None
        return (set(self.root.geometry_types) == {"point_cloud"}
                and lv.fragments is not None and lv.object_attrs is None
                and not self.exists(lv.rel("object_index/zarr.json"))
                and lv.body.get("coarsening_method", "none") in ("none", None)
                and lv.bin_shape is not None and lv.chunk_shape is not None)

    def _vertex_rows(self, lv: _Level, chunk: tuple[int, ...], payload: Any
                     ) -> np.ndarray | None:
        """The chunk's ``(n, D)`` rows; None (reported) when the cell is absent (it
        then counts as no rows) or does not decode into whole rows."""
        assert self.root is not None and lv.dtype is not None
        rel = lv.rel("vertices")
        name = chunk_name(chunk)
        ndim = self.root.ndim
        if isinstance(payload, Exception):
            self.error(rel, f"the cell of chunk {name} does not decode: {payload}",
                       kind="undecodable cell")
            return None
        if payload is None:
            self.error(rel, f"chunk {name} is listed in nonempty_chunks but has no "
                       "vertices cell", kind="listed chunk without cell")
            return None
        if len(payload) % (ndim * lv.dtype.itemsize):
            self.error(rel, f"the cell of chunk {name} holds {len(payload)} bytes, not "
                       f"whole rows of {ndim} x {lv.dtype}", kind="partial rows")
            return None
        return np.frombuffer(payload, lv.dtype).reshape(-1, ndim)

    def _check_positions(self, lv: _Level, chunk: tuple[int, ...], rows: np.ndarray
                         ) -> np.ndarray:
        """NaN/Inf is a warning; a finite vertex outside its chunk's closed box is an
        error (readers skip chunks a query box misses), outside the bounds a warning.
        Returns the finite-row mask."""
        assert lv.dtype is not None and self.root is not None
        rel = lv.rel("vertices")
        name = chunk_name(chunk)
        pos = rows.astype(np.float64)
        finite = np.all(np.isfinite(pos), axis=1)
        if not finite.all():
            self.warn(rel, f"chunk {name} holds {int((~finite).sum())} vertices with "
                      "NaN/Inf", kind="non-finite")
        if lv.chunk_shape is None or not len(rows):
            return finite
        size = np.asarray(lv.chunk_shape)
        lo = np.asarray(chunk, dtype=np.float64) * size
        hi = lo + size
        tol = _tolerance(lv.dtype, np.maximum(np.abs(lo), np.abs(hi)), size)
        good = pos[finite]
        out = np.any((good < lo - tol) | (good > hi + tol), axis=1)
        if out.any():
            self.error(rel, f"chunk {name} holds {int(out.sum())} vertices outside the "
                       f"chunk's box {lo.tolist()}..{hi.tolist()}, e.g. "
                       f"{good[out][0].tolist()}", kind="vertex outside chunk")
        b_lo, b_hi = (np.asarray(b) for b in self.root.bounds)
        b_tol = _tolerance(lv.dtype, np.maximum(np.abs(b_lo), np.abs(b_hi)),
                           np.maximum(b_hi - b_lo, 1.0))
        outside = np.any((good < b_lo - b_tol) | (good > b_hi + b_tol), axis=1)
        if outside.any():
            self.warn(rel, f"chunk {name} holds {int(outside.sum())} vertices outside the "
                      "root bounds", kind="outside bounds")
        return finite

    def _fragment_index(self, lv: _Level, chunk: tuple[int, ...], payload: Any,
                        n_rows: int, tile: bool) -> fragment_index.FragmentIndex | None:
        rel = lv.rel("vertex_fragments")
        name = chunk_name(chunk)
        if isinstance(payload, Exception):
            self.error(rel, f"the cell of chunk {name} does not decode: {payload}",
                       kind="undecodable cell")
            return None
        if payload is None:
            self.error(rel, f"chunk {name} has no fragment index cell",
                       kind="listed chunk without cell")
            return None
        try:
            index = fragment_index.decode(payload, rel)
        except Exception as e:
            self.error(rel, f"the fragment index of chunk {name} does not decode: {e}",
                       kind="bad fragment index")
            return None
        try:
            index.check_rows(n_rows, rel)
        except Exception:
            self.error(rel, f"the fragment index of chunk {name} names rows outside the "
                       f"chunk's {n_rows} vertices", kind="fragment rows outside")
            return None
        lv.fragment_counts[chunk] = index.count
        if tile and not index.tiles(n_rows):
            self.error(rel, f"fragments_tile is set but the fragments of chunk {name} do "
                       f"not tile its {n_rows} rows in order", kind="fragments_tile")
        return index

    def _check_bins(self, lv: _Level, chunk: tuple[int, ...], rows: np.ndarray,
                    finite: np.ndarray, index: fragment_index.FragmentIndex) -> None:
        """Plain point cloud: one fragment per bin, the fragments partition the rows, and
        every vertex lies in its fragment's bin box (closed, a rounding tolerance)."""
        assert lv.chunk_shape is not None and lv.bin_shape is not None
        rel = lv.rel("vertex_fragments")
        name = chunk_name(chunk)
        grid = SpatialGrid(lv.chunk_shape, lv.bin_shape, (0,) * len(chunk),
                           (1,) * len(chunk))
        bpc = grid.bins_per_chunk
        if index.count != grid.bins_in_chunk:
            self.error(rel, f"chunk {name} has {index.count} fragments, not one per bin "
                       f"({grid.bins_in_chunk} = {' x '.join(map(str, bpc))})",
                       kind="fragments per bin")
            return
        named = int(index.counts.sum()) + len(index.explicit_rows)
        if named != len(rows):
            self.error(rel, f"the bin fragments of chunk {name} name {named} rows, the "
                       f"chunk holds {len(rows)}: each row belongs to one bin",
                       kind="bin partition")
            return
        ranges = np.flatnonzero(index.is_range)
        explicit = np.flatnonzero(~index.is_range)
        row_ids = np.concatenate((fragment_index.ranges_to_rows(index.starts, index.counts),
                                  index.explicit_rows))
        frag_ids = np.concatenate((np.repeat(ranges, index.counts),
                                   np.repeat(explicit, np.diff(index.offsets))))
        if np.any(np.bincount(row_ids, minlength=len(rows)) != 1):
            self.error(rel, f"the bin fragments of chunk {name} do not hold each row once",
                       kind="bin partition")
            return
        keep = finite[row_ids]
        row_ids, frag_ids = row_ids[keep], frag_ids[keep]
        local = np.column_stack(np.unravel_index(frag_ids, bpc)) if len(frag_ids) else \
            np.zeros((0, len(bpc)), dtype=np.int64)
        width = np.asarray(lv.bin_shape)
        lo = (np.asarray(chunk, dtype=np.int64) * np.asarray(bpc) + local) * width
        hi = lo + width
        pos = rows[row_ids].astype(np.float64)
        assert lv.dtype is not None
        tol = _tolerance(lv.dtype, np.maximum(np.abs(lo), np.abs(hi)), width)
        out = np.any((pos < lo - tol) | (pos > hi + tol), axis=1)
        if out.any():
            first = int(np.flatnonzero(out)[0])
            self.error(lv.rel("vertices"), f"chunk {name} holds {int(out.sum())} vertices "
                       f"outside their bin, e.g. row {int(row_ids[first])} "
                       f"{pos[first].tolist()} in bin {local[first].tolist()} "
                       f"({lo[first].tolist()}..{hi[first].tolist()})",
                       kind="vertex outside bin")

    def _check_attribute(self, cells: CellArray, stored: StoredLayout,
                         chunk: tuple[int, ...], payload: Any, n_rows: int,
                         what: str = "vertices") -> None:
        """One attribute cell pairs row for row with its chunk's vertices (or, for a
        fragment attribute, its fragments); dictionary codes name categories."""
        rel = self.t_rel(cells)
        name = chunk_name(chunk)
        if isinstance(payload, Exception):
            self.error(rel, f"the cell of chunk {name} does not decode: {payload}",
                       kind="undecodable cell")
            return
        if payload is None:
            if n_rows:
                self.error(rel, f"chunk {name} has no cell for its {n_rows} {what}",
                           kind="missing attribute cell")
            return
        if what == "vertices" and stored.implied_channels(payload, n_rows):
            self.warn(rel, f"the cell of chunk {name} holds "
                      f"{stored.implied_channels(payload, n_rows)} values per vertex under "
                      f"a document that says one (row_shape []): read as channels, as "
                      f"zarr-vectors' polyline, mesh and graph writers store them",
                      kind="implied channels")
            return
        try:
            values = stored.rows(payload, rel)
        except Exception as e:
            self.error(rel, f"the cell of chunk {name}: {e}", kind="partial rows")
            return
        if len(values) != n_rows:
            self.error(rel, f"the cell of chunk {name} holds {len(values)} rows, its "
                       f"{what} {n_rows}", kind="attribute rows")
            return
        if stored.categories is not None and len(values):
            codes = values.astype(np.int64).ravel()
            valid = codes != stored.fill if _is_int(stored.fill) else np.ones(len(codes),
                                                                              bool)
            bad = valid & ((codes < 0) | (codes >= len(stored.categories)))
            if bad.any():
                self.error(rel, f"chunk {name} holds {int(bad.sum())} dictionary codes "
                           f"outside the {len(stored.categories)} categories",
                           kind="dictionary codes")

    def _check_vertex_count(self, lv: _Level) -> None:
        assert lv.body is not None
        rel = lv.rel("zarr.json")
        claimed = lv.body.get("vertex_count")
        if lv.decoded is None:
            return
        if claimed != lv.decoded:
            self.error(rel, f"vertex_count is {claimed}, the listed cells hold "
                       f"{lv.decoded} vertices")
        else:
            self.good(rel, f"vertex_count {claimed} matches the cells")

    # --- objects ------------------------------------------------------------------------

    def _check_objects(self, lv: _Level) -> np.ndarray | None:
        """The object index: ids, counts, and every manifest naming a listed chunk and a
        fragment that chunk has. Returns the object ids (rows), None when unreadable."""
        attrs = lv.object_attrs
        rel = lv.rel("object_index")
        if attrs is None:
            return None
        assert self.root is not None
        mdoc = self.read_json(f"{rel}/manifests/zarr.json")
        if mdoc is None:
            self.error(f"{rel}/manifests", "missing")
            return None
        blobs = self.read_array(f"{rel}/manifests", mdoc, bytes_rows=True)
        if blobs is None:
            return None
        if attrs.get("layout", "vlen_manifests_v2") == "vlen_manifests_v2":
            ids = self.read_array(f"{rel}/object_ids", None)
            if ids is None:
                return None
            if ids.dtype.kind not in "iu":
                self.error(f"{rel}/object_ids", f"object ids must be integers, not "
                           f"{ids.dtype}")
                return None
            ids = ids.astype(np.int64)
        else:
            ids = np.arange(len(blobs), dtype=np.int64)
        if len(ids) != len(blobs):
            self.error(rel, f"object_ids has {len(ids)} rows, manifests {len(blobs)}")
            return None
        if attrs["num_objects"] != len(ids):
            self.error(f"{rel}/zarr.json", f"num_objects is {attrs['num_objects']}, the "
                       f"index has {len(ids)} rows")
        ascending = bool(np.all(ids[1:] > ids[:-1]))
        if attrs.get("object_ids_sorted") and not ascending:
            self.error(f"{rel}/object_ids", "object_ids_sorted is true but the ids are not "
                       "strictly ascending")
        if len(np.unique(ids)) != len(ids):
            self.error(f"{rel}/object_ids", "object ids repeat")
        present = self._check_manifests(lv, ids, blobs)
        if present is not None and attrs["num_present"] != present:
            self.error(f"{rel}/zarr.json", f"num_present is {attrs['num_present']}, "
                       f"{present} manifests are non-empty")
        self.good(rel, f"{len(ids)} objects checked")
        return ids

    def _check_manifests(self, lv: _Level, ids: np.ndarray, blobs: np.ndarray
                         ) -> int | None:
        """Each manifest decodes (with the readers' decoder) and every block names a
        listed chunk and a fragment that chunk has. Returns the number of non-empty
        manifests, None when one did not decode."""
        rel = lv.rel("object_index/manifests")
        sid = self.root.ndim  # type: ignore[union-attr]
        rows, chunks, frags = [], [], []
        broken = False
        for row, blob in enumerate(blobs):
            try:
                c, f = manifests.decode(bytes(blob) if blob is not None else b"\0\0\0\0",
                                        sid, rel)
            except Exception as e:
                self.error(rel, f"the manifest of object {int(ids[row])} (row {row}) does "
                           f"not decode: {e}", kind="bad manifest")
                broken = True
                continue
            if len(f):
                rows.append(np.full(len(f), row, dtype=np.int64))
                chunks.append(c)
                frags.append(f)
        if not rows:
            return None if broken else 0
        row_of, frag = np.concatenate(rows), np.concatenate(frags)
        named = np.concatenate(chunks)
        is_listed, limit = self._chunk_lookup(lv, named)
        out_of_range = is_listed & ((frag < 0) | ((limit >= 0) & (frag >= limit)))
        for i in np.flatnonzero(~is_listed):
            self.error(rel, f"object {int(ids[row_of[i]])} names chunk "
                       f"{chunk_name(named[i])}, which is not in nonempty_chunks",
                       kind="manifest chunk")
        for i in np.flatnonzero(out_of_range):
            self.error(rel, f"object {int(ids[row_of[i]])} names fragment {int(frag[i])} "
                       f"of chunk {chunk_name(named[i])}, which has {int(limit[i])}",
                       kind="manifest fragment")
        return None if broken else len(rows)

    @staticmethod
    def _chunk_lookup(lv: _Level, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``chunks`` (M, D): whether it is listed, and its fragment count
        (-1 when unknown). Chunks become flat cell numbers of the grid, so the lookup is
        one sort, not a Python loop."""
        assert lv.vertices is not None
        origin = lv.vertices.origin
        shape = np.asarray(lv.vertices.meta.shape, dtype=np.int64)
        if math.prod(shape.tolist()) >= 1 << 62:      # too big to number: slow path
            listed = set(lv.listed)
            tuples = [tuple(c) for c in chunks.tolist()]
            return (np.array([t in listed for t in tuples], dtype=bool),
                    np.array([lv.fragment_counts.get(t, -1) for t in tuples], np.int64))
        cell = chunks - origin
        inside = np.all((cell >= 0) & (cell < shape), axis=1)
        flat = np.full(len(chunks), -1, dtype=np.int64)
        if inside.any():
            flat[inside] = np.ravel_multi_index(tuple(cell[inside].T), tuple(shape))
        held = np.asarray(lv.listed, dtype=np.int64).reshape(-1, len(shape))
        held_flat = np.ravel_multi_index(tuple((held - origin).T), tuple(shape)) if len(
            held) else np.zeros(0, dtype=np.int64)
        order = np.argsort(held_flat)
        held_flat = held_flat[order]
        counts = np.array([lv.fragment_counts.get(c, -1) for c in lv.listed],
                          dtype=np.int64)[order]
        if not len(held_flat):
            return np.zeros(len(chunks), dtype=bool), np.full(len(chunks), -1, np.int64)
        pos = np.minimum(np.searchsorted(held_flat, flat), len(held_flat) - 1)
        found = inside & (held_flat[pos] == flat)
        return found, np.where(found, counts[pos], -1)

    def read_array(self, rel: str, doc: dict[str, Any] | None, bytes_rows: bool = False
                   ) -> np.ndarray | None:
        """A whole 1-D or 2-D non-spatial array, None (reported) when missing, unreadable
        or too large to read."""
        if doc is None:
            doc = self.read_json(f"{rel}/zarr.json")
            if doc is None:
                self.error(rel, "missing")
                return None
        if not self.is_node(f"{rel}/zarr.json", doc, "array"):
            return None
        try:
            meta = parse_array_metadata(doc)
        except Exception as e:
            self.error(rel, f"not a readable array: {e}")
            return None
        shape = tuple(getattr(meta, "shape", ()))
        if len(shape) not in (1, 2) or (bytes_rows and len(shape) != 1):
            self.error(rel, f"expected a {'1-D' if bytes_rows else '1-D or 2-D'} array, "
                       f"got shape {shape}")
            return None
        chunks = tuple(getattr(getattr(meta, "chunk_grid", None), "chunk_shape", shape))
        if shape[0] > MAX_OBJECTS or max(math.prod(shape), math.prod(chunks)) > \
                MAX_ARRAY_ELEMENTS:
            self.error(rel, f"shape {shape} (chunks {chunks}) is beyond the format's "
                       f"{MAX_OBJECTS} rows")
            return None
        if bytes_rows and meta.data_type.name != "bytes":
            self.error(rel, f"expected variable-length bytes, got {doc.get('data_type')!r}")
            return None
        try:
            return dense.read(self.t, rel, doc)
        except Exception as e:
            self.error(rel, f"cannot be read: {e}")
            return None

    def _check_object_rows(self, lv: _Level, family: str, ids: np.ndarray | None) -> None:
        """Object attributes: one row per object-index row."""
        if not self.exists(lv.rel(f"{family}/zarr.json")):
            return
        if ids is None:
            if lv.object_attrs is None:
                self.error(lv.rel(family), "object attributes without an object index")
            return
        self._check_rows_of(lv, family, len(ids), "object")

    def _check_rows_of(self, lv: _Level, family: str, n_rows: int, what: str) -> None:
        for name in self.children(lv.rel(f"{family}/")):
            rel = lv.rel(f"{family}/{name}")
            data = self.read_array(rel, None)
            if data is not None and len(data) != n_rows:
                self.error(rel, f"{len(data)} rows, the level has {n_rows} {what}s")

    def _check_groups(self, lv: _Level, ids: np.ndarray | None) -> None:
        """Groups name known object ids (and ranges of them); group attributes have one
        row per group."""
        rel = lv.rel("groups")
        if not self.exists(f"{rel}/zarr.json"):
            if self.exists(lv.rel("group_attributes/zarr.json")):
                self.error(lv.rel("group_attributes"), "group attributes without groups")
            return
        if ids is None:
            if lv.object_attrs is None:
                self.error(rel, "groups without an object index")
            return
        doc = self.read_json(f"{rel}/zarr.json")
        rows = self.read_array(rel, doc, bytes_rows=True)
        if rows is None or doc is None:
            return
        attrs = doc.get("attributes", {})
        if attrs.get("num_groups", len(rows)) != len(rows):
            self.error(rel, f"num_groups is {attrs['num_groups']!r}, the array has "
                       f"{len(rows)} rows")
        known = np.unique(ids)
        ranges = attrs.get("group_ranges", {})
        if not isinstance(ranges, dict):
            self.error(rel, f"group_ranges must be an object, got {ranges!r}")
            ranges = {}
        for g, blob in enumerate(rows):
            if str(g) in ranges:
                self._check_group_range(rel, g, ranges[str(g)], known)
                continue
            blob = bytes(blob) if blob is not None else b""
            if len(blob) % 8:
                self.error(rel, f"group {g} holds {len(blob)} bytes, not int64 object ids",
                           kind="group bytes")
                continue
            unknown = np.setdiff1d(np.frombuffer(blob, "<i8"), known)
            if unknown.size:
                self.error(rel, f"group {g} names unknown object ids "
                           f"{_sample(unknown.tolist())}", kind="group members")
        self._check_rows_of(lv, "group_attributes", len(rows), "group")

    def _check_group_range(self, rel: str, g: int, bounds: Any, known: np.ndarray) -> None:
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(map(_is_int, bounds))
                and bounds[0] <= bounds[1]):
            self.error(rel, f"group_ranges[{g}] must be [start, stop], got {bounds!r}",
                       kind="group members")
            return
        start, stop = bounds
        inside = int(np.searchsorted(known, stop) - np.searchsorted(known, start))
        if inside != stop - start:
            self.error(rel, f"group {g} spans ids {start}..{stop - 1}, of which "
                       f"{stop - start - inside} are not objects", kind="group members")

    def _check_reader_opens(self, lv: _Level) -> None:
        """When the checks found nothing wrong, kvzarr's own reader must open the level
        too: a last guard that ``ok`` means readable."""
        if len(self.r.errors) != lv.errors_before:
            return
        try:
            Level(self.t, lv.index)
        except Exception as e:
            self.error(lv.path, f"kvzarr's reader refuses the level: {e}")
        else:
            self.good(lv.path, "consistent")

    # ====================================================================================
    # L4 geometry conventions
    # ====================================================================================

    def conventions(self) -> None:
        assert self.root is not None
        zv = self.root.attributes["zarr_vectors"]
        convention = zv.get("links_convention", DEFAULT_LINKS_CONVENTION)
        level0 = next((lv for lv in self.levels if lv.index == 0), None)
        composite = level0 is not None and self.exists(
            level0.rel("geometry_index/zarr.json"))
        for geom in self.root.geometry_types:
            allowed = LINKS_ALLOWED.get(geom)
            if geom not in LINKS_ALLOWED:
                self.error("zarr.json", f"unknown geometry type {geom!r}")
            elif allowed is None or convention in allowed:
                self.good("zarr.json", f"{geom!r}: links_convention {convention!r} allowed")
            elif composite:
                self.good("zarr.json", f"{geom!r}: composite store, links are namespaced")
            else:
                self.error("zarr.json", f"geometry {geom!r} needs links_convention in "
                           f"{sorted(allowed)}, got {convention!r}")
        if level0 is None:
            self.warn("", "no level 0 for the geometry checks")
            return
        family = level0.link_families.get("0")
        if "mesh" in self.root.geometry_types and not composite:
            if family is None:
                self.warn(level0.rel("links/0"), "a mesh without an intra-level links/0 "
                          "family: faces are links of width >= 3")
            elif family.get("link_width", 0) < 3:
                self.error(level0.rel("links/0/zarr.json"), f"a mesh's link_width is "
                           f"{family.get('link_width')}, faces need >= 3")
            else:
                self.good(level0.rel("links/0"), f"mesh faces of {family['link_width']} "
                          "vertices")
        if set(self.root.geometry_types) == {"point_cloud"} and family is not None:
            self.warn(level0.rel("links/0"), "a point cloud with intra-level links")

    # ====================================================================================
    # L5 pyramid
    # ====================================================================================

    def pyramid(self) -> None:
        indices = [lv.index for lv in self.levels]
        if indices != list(range(len(indices))):
            self.error("", f"levels {indices} are not contiguous from 0")
        else:
            self.good("", f"levels 0..{len(indices) - 1} contiguous")
        previous: tuple[int, int] | None = None
        for lv in self.levels:
            body = lv.body or {}
            w = lv.rel("zarr.json")
            count = lv.decoded if lv.decoded is not None else body.get("vertex_count")
            if _is_int(count):
                if previous is not None and count > previous[1]:
                    self.error(w, f"level {lv.index} holds {count} vertices, more than "
                               f"level {previous[0]}'s {previous[1]}")
                previous = (lv.index, count)
            sparsity = body.get("object_sparsity", 1.0)
            if not (_is_number(sparsity) and 0 < sparsity <= 1):
                self.error(w, f"object_sparsity {sparsity!r} is not in (0, 1]")
            parent = body.get("parent_level")
            if lv.index == 0 and parent is not None:
                self.error(w, f"level 0 has parent_level {parent!r}; it has none")
            elif lv.index > 0 and parent is not None and not (
                    _is_int(parent) and parent < lv.index and parent in indices):
                self.error(w, f"parent_level {parent!r} is not a finer level of the "
                           "dataset")


# --- links -------------------------------------------------------------------------------

def _check_link_cells(v: _Validator, lv: _Level, segment: str,
                      family: dict[str, Any]) -> None:
    """The link checks of one ``links/<delta>`` family (hook: full link-cell decoding —
    offsets segments against ``sid_ndim``/``link_width``, record endpoints, canonical
    order, ``num_physical_records`` — is to be added here). For now: each
    ``links/<delta>/<offsets>`` array's document parses and every chunk it lists has a
    cell."""
    for name in v.children(lv.rel(f"links/{segment}/")):
        rel = lv.rel(f"links/{segment}/{name}")
        if not v.exists(f"{rel}/zarr.json"):
            v.warn(rel, "a directory without zarr.json: not an array", kind="stray key")
            continue
        cells = v.cell_array(rel, "links")
        if cells is None:
            continue
        chunks = v.listed_chunks(cells, rel)
        for chunk, payload in zip(chunks, v.fetch(cells, chunks)):
            if isinstance(payload, Exception):
                v.error(rel, f"the cell of chunk {chunk_name(chunk)} does not decode: "
                        f"{payload}", kind="undecodable cell")
            elif payload is None:
                v.error(rel, f"chunk {chunk_name(chunk)} is listed in nonempty_chunks but "
                        "has no cell", kind="listed chunk without cell")
