"""One resolution level of a vector dataset opened for reading: its grid, its cell
arrays, the chunks it holds, and batched fetches of their cells.

Readers enumerate a level's chunks from the ``nonempty_chunks`` attribute of its
``vertices`` array, as zarr-vectors does (it is the format's list; keys are never
listed). Every cell a query needs is fetched in one ``get_many`` inside the caller's
read transaction, so a query sees one snapshot of the store.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import CodecError, MetadataError, NodeNotFoundError, UnsupportedOperationError
from . import fragments as fragment_index
from .cells import CellArray
from .grid import SpatialGrid, parse_chunk_names
from .layout import RootInfo, parse_level, parse_root
from .objects import ObjectIndex
from .target import Target
from .vertex_attributes import StoredLayout


class Level:
    def __init__(self, target: Target, level: int) -> None:
        if not isinstance(level, (int, np.integer)) or isinstance(level, bool) or level < 0:
            raise NodeNotFoundError(f"level must be a non-negative integer, got {level!r}")
        self.target = target
        self.index = int(level)
        self.path = str(int(level))
        root_doc = target.read_json("zarr.json")
        if root_doc is None:
            raise NodeNotFoundError("no vector dataset here (no root zarr.json)",
                                    key=target.key("zarr.json"))
        self.root: RootInfo = parse_root(root_doc.get("attributes"), target.key("zarr.json"))
        level_doc = target.read_json(f"{self.path}/zarr.json")
        if level_doc is None:
            raise NodeNotFoundError(f"the dataset has no level {self.index}",
                                    key=target.key(f"{self.path}/zarr.json"))
        self.attrs = parse_level(level_doc.get("attributes"), self.index,
                                 target.key(f"{self.path}/zarr.json"))
        if self.attrs.get("chunk_attribute_name") is not None:
            raise UnsupportedOperationError(
                "levels chunked by an attribute (chunk_by_attribute) are not read yet",
                key=target.key(f"{self.path}/zarr.json"))
        self.ndim = self.root.ndim
        chunk = self.attrs.get("chunk_shape") or list(self.root.chunk_shape)
        if (not isinstance(chunk, list) or len(chunk) != self.ndim
                or not all(isinstance(c, (int, float)) and not isinstance(c, bool)
                           and math.isfinite(c) and c > 0 for c in chunk)
                or not all(abs(c / r - round(c / r)) < 1e-9 and round(c / r) >= 1
                           for c, r in zip(chunk, self.root.chunk_shape))):
            raise MetadataError("a level's chunk_shape must be whole multiples of the "
                                "root's, one per axis",
                                key=target.key(f"{self.path}/zarr.json"), field="chunk_shape")
        self.vertices = self._cells("vertices")
        self.grid = SpatialGrid(tuple(float(c) for c in chunk),
                                self.root.level_bin_shape(self.index),
                                tuple(int(o) for o in self.vertices.origin),
                                tuple(self.vertices.meta.shape))
        try:
            self.dtype = np.dtype(self.vertices.meta.attributes.get("dtype", "float32")
                                  ).newbyteorder("<")
        except TypeError:
            raise MetadataError("vertices dtype is not a data type",
                                key=self.vertices.path, field="dtype") from None
        names = self.vertices.meta.attributes.get("nonempty_chunks", [])
        if not isinstance(names, list):
            raise MetadataError("nonempty_chunks must be a list", key=self.vertices.path,
                                field="nonempty_chunks")
        self.chunks = parse_chunk_names(names, self.ndim, self.vertices.path)
        first = np.asarray(self.grid.origin, dtype=np.int64)
        if len(self.chunks) and (np.any(self.chunks < first) or np.any(
                self.chunks >= first + np.asarray(self.grid.shape, dtype=np.int64))):
            raise MetadataError("nonempty_chunks names chunks outside the array's grid",
                                key=self.vertices.path, field="nonempty_chunks")
        self.fragments = self._cells("vertex_fragments", required=False)
        self._objects: ObjectIndex | None | bool = False

    # --- nodes ------------------------------------------------------------------------

    def _cells(self, name: str, required: bool = True) -> CellArray | None:
        rel = f"{self.path}/{name}"
        doc = self.target.read_json(f"{rel}/zarr.json")
        if doc is None:
            if required:
                raise NodeNotFoundError(f"level {self.index} has no {name} array",
                                        key=self.target.key(f"{rel}/zarr.json"))
            return None
        return CellArray(self.target.key(rel), doc)

    def attribute(self, name: str) -> tuple[CellArray, StoredLayout]:
        cells = self._cells(f"vertex_attributes/{name}", required=False)
        if cells is None:
            raise NodeNotFoundError(f"level {self.index} has no vertex attribute {name!r}",
                                    key=self.target.key(f"{self.path}/vertex_attributes/"
                                                        f"{name}"))
        return cells, StoredLayout.from_attributes(cells.meta.attributes, cells.path)

    @property
    def objects(self) -> ObjectIndex | None:
        if self._objects is False:
            doc = self.target.read_json(f"{self.path}/object_index/zarr.json")
            self._objects = None if doc is None else ObjectIndex(self.target, self.path, doc)
        return self._objects  # type: ignore[return-value]

    # --- cells --------------------------------------------------------------------------

    def fetch(self, arrays: list[CellArray], chunks: list[tuple[int, ...]]
              ) -> list[list[Any]]:
        """Each array's payload of each chunk, from one batched read. The payloads may be
        views into the store's memory (LMDB's map), valid until the caller's read
        transaction ends: callers copy what they return."""
        keys: list[str] = []
        for cells in arrays:
            keys += cells.keys_for(chunks)
        values = dict(zip(keys, self.target.store.get_many_views(keys)))
        return [cells.decode(chunks, values) for cells in arrays]

    def vertex_rows(self, payload: Any, where: str) -> np.ndarray:
        width = self.ndim * self.dtype.itemsize
        if len(payload) % width:
            raise MetadataError(f"a vertices cell of {len(payload)} bytes is not whole rows "
                                f"of {self.ndim} x {self.dtype}", key=where)
        return np.frombuffer(payload, self.dtype).reshape(-1, self.ndim)

    def attribute_rows(self, stored: StoredLayout, cells: CellArray, payload: Any,
                       n_rows: int, chunk: tuple[int, ...]) -> np.ndarray:
        """An attribute cell's rows, which must pair one to one with the vertices'."""
        rows = stored.rows(payload, cells.path, n_rows)
        if len(rows) != n_rows:
            raise CodecError(f"attribute cell of chunk {chunk} holds {len(rows)} rows, its "
                             f"vertices {n_rows}", key=cells.path)
        return rows

    def fragment_index(self, payload: Any, n_rows: int, where: str
                       ) -> fragment_index.FragmentIndex:
        index = fragment_index.decode(bytes(payload), where)
        index.check_rows(n_rows, where)
        return index

    def binned(self) -> bool:
        """True when the level's fragments are its bins (a plain point cloud at level 0):
        then a box can skip the bins it misses."""
        return (self.index == 0 and self.fragments is not None
                and self.attrs.get("coarsening_method", "none") == "none"
                and self.objects is None and self.grid.bins_in_chunk > 1)
