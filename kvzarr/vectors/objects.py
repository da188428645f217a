"""Objects, their attributes and groups of them, at one level of a vector dataset.

``object_index/`` holds one manifest per object row and ``object_index/object_ids`` the
object id of each row, ascending (layout ``vlen_manifests_v2``). Object attributes are
``(O,)`` or ``(O, C)`` arrays by row; absent objects hold the fill value (NaN, or the
integer type's minimum, or the unsigned type's maximum). ``groups`` holds, per group
row, the int64 ids of its members; group attributes are arrays by group row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MetadataError, VectorDataError
from . import dense, manifests
from .cells import VLEN_BYTES, ZSTD, compressor_codecs
from .target import Target

MANIFEST_ROWS = 16384
ATTRIBUTE_ROWS = 65536
LAYOUT = "vlen_manifests_v2"
#: zarr-vectors refuses object indexes with more rows than this
MAX_OBJECTS = 1 << 26


@dataclass
class ObjectParts:
    """Where each object's fragments lie, before they are written: one row per
    (object, chunk, fragment), objects ascending, each object's rows in its order."""

    ids: np.ndarray          # (P,) object id per part
    chunks: np.ndarray       # (P, D) absolute chunk
    fragments: np.ndarray    # (P,) fragment index in that chunk


def check_ids(object_ids: Any, n: int) -> np.ndarray:
    ids = np.asarray(object_ids)
    if ids.shape != (n,):
        raise VectorDataError(f"object_ids must have one id per vertex ({n}), got shape "
                              f"{ids.shape}", field="object_ids")
    if n and ids.dtype.kind not in "iu":
        if ids.dtype.kind == "f" and np.all(np.isfinite(ids)) and np.all(ids == np.round(ids)):
            ids = ids.astype(np.int64)
        else:
            raise VectorDataError(f"object_ids must be integers, got {ids.dtype}",
                                  field="object_ids")
    if ids.dtype.kind == "u" and n and int(ids.max()) > np.iinfo(np.int64).max:
        raise VectorDataError("object ids must fit in int64", field="object_ids")
    return ids.astype(np.int64)


def write_index(target: Target, level: str, parts: ObjectParts, sid_ndim: int,
                compressor: Any = None, all_ids: np.ndarray | None = None
                ) -> tuple[list[tuple[str, bytes]], np.ndarray]:
    """The ``object_index`` group and its two arrays; returns the items and the sorted
    object ids (the rows). ``all_ids`` adds objects without parts (empty manifests). The
    id table takes the writer's ``compressor`` (the manifests are always zstd), as
    zarr-vectors writes them."""
    order = np.argsort(parts.ids, kind="stable")
    ids = parts.ids[order]
    chunks, frags = parts.chunks[order], parts.fragments[order]
    row_ids = np.unique(ids if all_ids is None else np.concatenate([ids, all_ids]))
    first = np.searchsorted(ids, row_ids)
    if len(row_ids) > MAX_OBJECTS:
        raise VectorDataError(f"{len(row_ids)} objects are more than the format's "
                              f"{MAX_OBJECTS}", field="object_ids")
    bounds = np.append(first, len(ids))    # (an object without parts: an empty range)
    rec = manifests.block_dtype(sid_ndim)
    records = np.zeros(len(ids), dtype=rec)
    records["chunk"] = chunks
    records["fragment"] = frags
    raw = records.tobytes()
    size = rec.itemsize
    blobs = np.empty(len(row_ids), dtype=object)
    for r in range(len(row_ids)):
        a, b = int(bounds[r]), int(bounds[r + 1])
        blobs[r] = (b - a).to_bytes(4, "little") + raw[a * size:b * size]
    n = len(row_ids)
    items: list[tuple[str, bytes]] = []
    target.put_json(items, f"{level}/object_index/zarr.json", {
        "zarr_format": 3, "node_type": "group", "attributes": {
            "zv_array": "object_index", "num_objects": n,
            "num_present": int(np.count_nonzero(np.diff(bounds))),
            "sid_ndim": sid_ndim, "layout": LAYOUT, "object_ids_sorted": True}})
    doc = dense.bytes_document(n, min(MANIFEST_ROWS, max(n, 1)), {})
    items += dense.encode(target, f"{level}/object_index/manifests", doc, blobs)
    doc = dense.document(row_ids.shape, "int64", (max(n, 1),),
                         [dense.BYTES_LE, *compressor_codecs(compressor)], 0, {})
    items += dense.encode(target, f"{level}/object_index/object_ids", doc, row_ids)
    return items, row_ids


def absent_fill(dtype: np.dtype) -> Any:
    """The value that marks an absent object in an object attribute."""
    if dtype.kind == "f":
        return float("nan")
    if dtype.kind == "i":
        return int(np.iinfo(dtype).min)
    if dtype.kind == "u":
        return int(np.iinfo(dtype).max)
    if dtype.kind == "b":
        return False
    raise VectorDataError(f"object attributes must be numeric, got {dtype}")


#: the codecs after the serializer of object-level arrays a writer stores after its cell
#: arrays (zarr-python's default); those stored with them take the writer's compressor
DEFAULT_COMPRESSION = [ZSTD]


def write_rows(target: Target, level: str, family: str, tag: str, values: dict[str, Any],
               n_rows: int, what: str, compression: list[dict[str, Any]]
               ) -> list[tuple[str, bytes]]:
    """Object or group attributes: one ``(n_rows,)`` or ``(n_rows, C)`` array per name,
    compressed with ``compression`` (codec documents after ``bytes``)."""
    items: list[tuple[str, bytes]] = []
    if not values:
        return items
    target.put_json(items, f"{level}/{family}/zarr.json",
                    {"attributes": {}, "zarr_format": 3, "node_type": "group"})
    for name, value in values.items():
        _check_name(name, family)
        data = np.asarray(value)
        if data.ndim not in (1, 2) or data.shape[0] != n_rows:
            raise VectorDataError(f"{family}[{name!r}] must have one row per {what} "
                                  f"({n_rows}), got shape {data.shape}", field=family)
        if data.dtype.kind not in "biuf":
            raise VectorDataError(f"{family}[{name!r}] must be numeric, got {data.dtype}",
                                  field=family)
        data = data.astype(data.dtype.newbyteorder("<"))
        attrs = {"zv_array": tag, "name": name, "dtype": data.dtype.name,
                 "shape": list(data.shape)}
        if family == "object_attributes":
            attrs["fill_sentinel_meaning"] = "absent"
            fill = absent_fill(data.dtype)
            chunks = (ATTRIBUTE_ROWS, *data.shape[1:])
        else:
            fill = 0.0 if data.dtype.kind == "f" else 0
            chunks = data.shape if n_rows else (1, *data.shape[1:])
        doc = dense.document(data.shape, data.dtype.name, chunks,
                             [dense.BYTES_LE, *compression], dense.fill_json(fill), attrs)
        items += dense.encode(target, f"{level}/{family}/{name}", doc, data)
    return items


def write_groups(target: Target, level: str, groups: dict[Any, Any], known: np.ndarray
                 ) -> tuple[list[tuple[str, bytes]], int]:
    """``groups``: row ``g`` holds the member ids of group ``g`` (rows 0 .. the largest
    group id; a group not given is empty). A ``range`` of members is kept as its two ends
    in the array's ``group_ranges`` attribute. Every member must be an object of this
    write (``known``, sorted)."""
    gids = []
    for g in groups:
        if not isinstance(g, (int, np.integer)) or isinstance(g, bool) or g < 0:
            raise VectorDataError(f"group ids must be non-negative integers, got {g!r}",
                                  field="groups")
        gids.append(int(g))
    n = max(gids) + 1 if gids else 0
    if n > MAX_OBJECTS:
        raise VectorDataError(f"group id {n - 1} is beyond the format's {MAX_OBJECTS} rows",
                              field="groups")
    rows = np.empty(n, dtype=object)
    rows.fill(b"")
    ranges: dict[str, list[int]] = {}
    for g, members in zip(gids, groups.values()):
        if isinstance(members, range) and len(members):
            if members.step != 1:
                raise VectorDataError(f"range group {g} must have step 1", field="groups")
            inside = (np.searchsorted(known, members.stop) - np.searchsorted(known,
                                                                             members.start))
            if inside != len(members):
                raise VectorDataError(f"group {g} names object ids not in the write",
                                      field="groups")
            ranges[str(g)] = [members.start, members.stop]
            continue
        members = np.asarray(list(members) if isinstance(members, range) else members)
        if members.size and members.dtype.kind not in "iu":
            raise VectorDataError(f"group {g} must list integer object ids", field="groups")
        members = members.astype(np.int64).ravel()
        unknown = np.setdiff1d(members, known)
        if unknown.size:
            raise VectorDataError(f"group {g} names object ids not in the write: "
                                  f"{unknown[:8].tolist()}", field="groups")
        rows[g] = members.astype("<i8").tobytes()
    attrs: dict[str, Any] = {"zv_array": "groups", "num_groups": n}
    if ranges:
        attrs["group_ranges"] = ranges
    # (zstd whatever the writer's compressor: zarr-vectors writes this array so)
    doc = dense.document((n,), "variable_length_bytes", (max(n, 1),), [VLEN_BYTES, ZSTD],
                         "", attrs)
    return dense.encode(target, f"{level}/groups", doc, rows), n


# --- reading ---------------------------------------------------------------------------

class ObjectIndex:
    """A level's object index, read lazily: the id table at once, manifests by row."""

    def __init__(self, target: Target, level: str, group_doc: dict[str, Any]) -> None:
        self.target = target
        self.level = level
        attrs = group_doc.get("attributes", {})
        layout = attrs.get("layout", LAYOUT)
        where = target.key(f"{level}/object_index/zarr.json")
        if layout not in (LAYOUT, "vlen_manifests_v1"):
            raise MetadataError(f"object index layout {layout!r} is not one kvzarr reads",
                                key=where, field="layout")
        self.sid_ndim = attrs.get("sid_ndim")
        if not isinstance(self.sid_ndim, int) or self.sid_ndim < 1:
            raise MetadataError("sid_ndim must be a positive integer", key=where,
                                field="sid_ndim")
        self._manifests_doc = target.require_json(f"{level}/object_index/manifests/zarr.json")
        n_rows = self._manifests_doc.get("shape", [0])[0]
        if layout == LAYOUT:
            self.row_ids = dense.read(target, f"{level}/object_index/object_ids").astype(
                np.int64)
        else:
            self.row_ids = np.arange(n_rows, dtype=np.int64)
        if len(self.row_ids) != n_rows:
            raise MetadataError(f"object_ids has {len(self.row_ids)} rows, manifests "
                                f"{n_rows}", key=where)
        self._sorted = bool(np.all(self.row_ids[1:] > self.row_ids[:-1]))
        self._blobs: np.ndarray | None = None

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Row of each id, -1 where the id is not in the index."""
        ids = np.asarray(ids, dtype=np.int64)
        if self._sorted:
            pos = np.searchsorted(self.row_ids, ids)
            pos = np.minimum(pos, max(len(self.row_ids) - 1, 0))
            hit = (len(self.row_ids) > 0) & (self.row_ids[pos] == ids) if len(
                self.row_ids) else np.zeros(len(ids), dtype=bool)
            return np.where(hit, pos, -1)
        lookup = {int(v): r for r, v in enumerate(self.row_ids)}
        return np.array([lookup.get(int(i), -1) for i in ids], dtype=np.int64)

    def manifest(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        if self._blobs is None:
            self._blobs = dense.read(self.target, f"{self.level}/object_index/manifests",
                                     self._manifests_doc)
        blob = self._blobs[row]
        return manifests.decode(bytes(blob) if blob is not None else b"\0\0\0\0",
                                self.sid_ndim,
                                self.target.key(f"{self.level}/object_index/manifests"))

    def all_rows(self) -> range:
        return range(len(self.row_ids))


def group_members(target: Target, level: str, group_ids: Any) -> np.ndarray:
    """The sorted union of the members of ``group_ids`` (unknown groups add nothing).
    A coarse level without groups of its own takes level 0's: a pyramid keeps object
    ids, so those groups name the same objects there."""
    doc = target.read_json(f"{level}/groups/zarr.json")
    if doc is None and level != "0":
        level = "0"
        doc = target.read_json("0/groups/zarr.json")
    if doc is None:
        return np.zeros(0, dtype=np.int64)
    rows = dense.read(target, f"{level}/groups", doc)
    ranges = doc.get("attributes", {}).get("group_ranges", {})
    members = []
    for g in np.asarray(group_ids, dtype=np.int64).ravel():
        if not 0 <= g < len(rows):
            continue
        if str(int(g)) in ranges:
            start, stop = ranges[str(int(g))]
            members.append(np.arange(int(start), int(stop), dtype=np.int64))
            continue
        blob = bytes(rows[g]) if rows[g] is not None else b""
        if len(blob) % 8:
            raise MetadataError(f"group {int(g)} holds {len(blob)} bytes, not int64 ids",
                                key=target.key(f"{level}/groups"))
        members.append(np.frombuffer(blob, "<i8").astype(np.int64))
    if not members:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(members))


def _check_name(name: Any, family: str) -> None:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise VectorDataError(f"{family} name {name!r} is not a valid node name",
                              field=family)
