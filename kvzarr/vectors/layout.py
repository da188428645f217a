"""The attributes of a Zarr Vector Format dataset: the root group's ``zarr_vectors``,
``multiscales`` and ``ome`` blocks and each level group's ``zarr_vectors_level``, built
as zarr-vectors 0.9.2 writes them and parsed with every member checked.

The dimensionality is not stored as such: it is the number of axes in
``multiscales[0].axes``, and ``chunk_shape``, ``bounds`` and ``base_bin_shape`` must
agree with it. Bounds are closed. A level ``L > 0`` keeps its bin shape only in the
NGFF block: ``translation = bin_shape / 2`` of dataset ``L``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MetadataError, VectorDataError

ZV_VERSION = "0.9.2"
DEFAULT_AXES = {1: ["x"], 2: ["x", "y"], 3: ["x", "y", "z"], 4: ["x", "y", "z", "w"]}
GEOMETRY_TYPES = ("point_cloud", "line", "polyline", "streamline", "skeleton", "graph",
                  "mesh")
LINKS_CONVENTIONS = ("explicit", "implicit_sequential", "implicit_sequential_with_branches")
OBJECT_INDEX_CONVENTIONS = ("standard", "identity")
CROSS_CHUNK_STRATEGIES = ("explicit_links", "boundary_deduplication", "both")


@dataclass(frozen=True)
class RootInfo:
    """What a reader needs from the root group's attributes."""

    ndim: int
    chunk_shape: tuple[float, ...]
    bounds: tuple[tuple[float, ...], tuple[float, ...]]
    base_bin_shape: tuple[float, ...]
    geometry_types: tuple[str, ...]
    axes: list[dict[str, Any]]
    #: the whole ``attributes`` object, kept for rewriting it with changes
    attributes: dict[str, Any] = field(default_factory=dict)

    def level_paths(self) -> list[str]:
        return [d.get("path") for d in self.attributes["multiscales"][0].get("datasets", [])]

    def level_bin_shape(self, level: int) -> tuple[float, ...]:
        """Level 0: ``base_bin_shape``; above it, twice the NGFF translation."""
        if level == 0:
            return self.base_bin_shape
        for dataset in self.attributes["multiscales"][0].get("datasets", []):
            if dataset.get("path") == str(level):
                for t in dataset.get("coordinateTransformations", []):
                    if t.get("type") == "translation":
                        return tuple(2.0 * float(v) for v in t["translation"])
        raise MetadataError(f"no bin shape for level {level} in multiscales",
                            field="multiscales")


def axes_for(ndim: int, axes: Any = None) -> list[dict[str, Any]]:
    """NGFF axis objects: the defaults (x, y, z, w) or the caller's names or objects."""
    if axes is None:
        if ndim not in DEFAULT_AXES:
            raise VectorDataError(f"data of {ndim} dimensions needs explicit axes=",
                                  field="axes")
        return [{"name": n, "type": "space"} for n in DEFAULT_AXES[ndim]]
    if not isinstance(axes, (list, tuple)) or len(axes) != ndim:
        raise VectorDataError(f"axes must list {ndim} axes, got {axes!r}", field="axes")
    out = []
    for axis in axes:
        if isinstance(axis, str):
            out.append({"name": axis, "type": "space"})
        elif isinstance(axis, dict) and isinstance(axis.get("name"), str):
            out.append(dict(axis))
        else:
            raise VectorDataError(f"an axis is a name or an NGFF axis object, got {axis!r}",
                                  field="axes")
    names = [a["name"] for a in out]
    if len(set(names)) != len(names):
        raise VectorDataError(f"axis names repeat: {names}", field="axes")
    return out


def _number(value: float) -> int | float:
    """As the caller gave it: integral numbers stay integers in the JSON."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    return float(value)


def root_attributes(*, name: str, chunk_shape, bounds, base_bin_shape, axes,
                    geometry_type: str, links_convention: str,
                    level_bins: list[tuple[float, ...]],
                    keep: dict[str, Any] | None = None) -> dict[str, Any]:
    """The root group's attributes. ``level_bins`` lists each level's bin shape (level 0
    first); ``base_bin_shape`` is the level-0 bin as the caller gave it, None when it
    was not given (one bin per chunk); ``keep`` carries the members of an existing
    root that a write leaves alone (user attributes)."""
    base = np.asarray(level_bins[0], dtype=np.float64)
    datasets = []
    for level, bins in enumerate(level_bins):
        scale = (np.asarray(bins, dtype=np.float64) / base).tolist()
        datasets.append({"path": str(level), "coordinateTransformations": [
            {"type": "scale", "scale": scale},
            {"type": "translation", "translation": [float(b) / 2 for b in bins]}]})
    zv: dict[str, Any] = {"zv_version": ZV_VERSION, "format_capabilities": [],
                          "chunk_shape": [_number(c) for c in chunk_shape],
                          "bounds": [[float(v) for v in bounds[0]],
                                     [float(v) for v in bounds[1]]],
                          "geometry_types": [geometry_type]}
    if base_bin_shape is not None:   # (absent: one bin per chunk, as zarr-vectors writes it)
        zv["base_bin_shape"] = [_number(b) for b in base_bin_shape]
    zv.update(links_convention=links_convention, object_index_convention="standard",
              cross_chunk_strategy="explicit_links")
    attrs = dict(keep or {})
    attrs["zarr_vectors"] = zv
    attrs["multiscales"] = [{"version": "0.4", "name": "default", "axes": axes,
                             "datasets": datasets, "metadata": {"format": "zarr_vectors"}}]
    attrs["ome"] = {"version": "0.6", "type": "collection", "name": name,
                    "attributes": {"scene": {"coordinateSystems": [
                        {"name": "world", "axes": axes}], "coordinateTransformations": []}},
                    "nodes": [{"type": "zv:level", "name": str(i)}
                              for i in range(len(level_bins))]}
    return attrs


def level_attributes(level: int, vertex_count: int, arrays_present: list[str], *,
                     fragments_tile: bool, extra: dict[str, Any] | None = None
                     ) -> dict[str, Any]:
    body: dict[str, Any] = {"level": level, "object_sparsity": 1.0,
                            "vertex_count": int(vertex_count),
                            "coarsening_method": "none", "parent_level": None,
                            "arrays_present": arrays_present}
    body.update(extra or {})
    if fragments_tile:
        body["fragments_tile"] = True
    return {"zarr_vectors_level": body}


# --- parsing ---------------------------------------------------------------------------

def parse_root(attrs: Any, where: str) -> RootInfo:
    """Check the root group's attributes and return what readers use."""
    if not isinstance(attrs, dict) or not isinstance(attrs.get("zarr_vectors"), dict):
        raise MetadataError("not a Zarr Vector Format dataset: the root group has no "
                            "'zarr_vectors' attributes", key=where, field="zarr_vectors")
    zv = attrs["zarr_vectors"]
    for member in ("zv_version", "chunk_shape", "bounds", "geometry_types"):
        if member not in zv:
            raise MetadataError("required member is missing", key=where,
                                field=f"zarr_vectors.{member}")
    if not isinstance(zv["zv_version"], str):
        raise MetadataError("zv_version must be a string", key=where,
                            field="zarr_vectors.zv_version")
    axes = _axes(attrs, where)
    ndim = len(axes)
    chunk = _positive_vector(zv["chunk_shape"], ndim, where, "zarr_vectors.chunk_shape")
    bounds = zv["bounds"]
    if not (isinstance(bounds, list) and len(bounds) == 2):
        raise MetadataError("bounds must be [min, max]", key=where, field="zarr_vectors.bounds")
    lo = _vector(bounds[0], ndim, where, "zarr_vectors.bounds")
    hi = _vector(bounds[1], ndim, where, "zarr_vectors.bounds")
    if any(a > b for a, b in zip(lo, hi)):
        raise MetadataError(f"bounds min {lo} exceeds max {hi}", key=where,
                            field="zarr_vectors.bounds")
    bins = zv.get("base_bin_shape")
    bins = chunk if bins is None else _positive_vector(bins, ndim, where,
                                                       "zarr_vectors.base_bin_shape")
    geoms = zv["geometry_types"]
    if not isinstance(geoms, list) or not geoms or not all(isinstance(g, str) for g in geoms):
        raise MetadataError("geometry_types must be a non-empty list of names", key=where,
                            field="zarr_vectors.geometry_types")
    return RootInfo(ndim, chunk, (lo, hi), bins, tuple(geoms), axes, attrs)


def parse_level(attrs: Any, level: int, where: str) -> dict[str, Any]:
    body = attrs.get("zarr_vectors_level") if isinstance(attrs, dict) else None
    if not isinstance(body, dict):
        raise MetadataError(f"level {level} has no 'zarr_vectors_level' attributes",
                            key=where, field="zarr_vectors_level")
    count = body.get("vertex_count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise MetadataError("vertex_count must be a non-negative integer", key=where,
                            field="zarr_vectors_level.vertex_count")
    return body


def _axes(attrs: dict[str, Any], where: str) -> list[dict[str, Any]]:
    ms = attrs.get("multiscales")
    if not (isinstance(ms, list) and ms and isinstance(ms[0], dict)
            and isinstance(ms[0].get("axes"), list) and ms[0]["axes"]):
        raise MetadataError("multiscales[0].axes is missing: it gives the dimensionality",
                            key=where, field="multiscales")
    axes = ms[0]["axes"]
    if not all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in axes):
        raise MetadataError("every axis must be an object with a name", key=where,
                            field="multiscales.axes")
    return axes


def _vector(value: Any, ndim: int, where: str, name: str) -> tuple[float, ...]:
    if (not isinstance(value, list) or len(value) != ndim
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise MetadataError(f"{name} must be {ndim} numbers (one per axis), got {value!r}",
                            key=where, field=name)
    try:
        out = tuple(float(v) for v in value)
    except OverflowError:
        raise MetadataError(f"{name} holds a number too large for a float", key=where,
                            field=name) from None
    if not all(math.isfinite(v) for v in out):
        raise MetadataError(f"{name} must be finite, got {value!r}", key=where, field=name)
    return out


def _positive_vector(value: Any, ndim: int, where: str, name: str) -> tuple[float, ...]:
    out = _vector(value, ndim, where, name)
    if not all(v > 0 for v in out):
        raise MetadataError(f"{name} must be positive, got {value!r}", key=where, field=name)
    return out
