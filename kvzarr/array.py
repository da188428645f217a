"""Array: a Zarr v3 array in a store, with zarr-python 3's names and indexing semantics
(``src/zarr/core/array.py``, ``core/indexing.py``): ``a[...]``, ``oindex``, ``vindex``,
``blocks``, ``resize``, ``append``.

Thread/process promises: each read sees one consistent snapshot of the store where the
store is transactional; each write (including the read-modify-write of partly covered
chunks), resize and attribute change runs in one store transaction.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from collections.abc import Callable
from typing import Any

import numpy as np

from .engine.chunk_io import ChunkIO
from .engine.compaction import (CompactionReport, compact_chunks, compactable,
                                stored_chunk_keys)
from .engine.config import DEFAULT_CONFIG, ArrayConfig
from .codecs.base import ChunkArraySpec
from .codecs.pipeline import CodecPipeline
from .errors import ArrayIndexError, MetadataError, ShapeMismatchError
from .indexing import (BasicIndexer, BlockIndexer, CoordinateIndexer, Indexer, MaskIndexer,
                       OrthogonalIndexer, classify_selection)
from .runtime.memo import BoundedMemo
from .metadata.v3 import ArrayMetadata, parse_node_metadata
from .grid import chunk_grid_to_json
from .node import Node
from .engine.point_reads import PointReader
from .stores.base import Store
from .transformers.base import stack_layers

#: (ids of the codecs, id of the data type, codec shapes) -> (the objects whose ids are in
#: the key, evolved pipeline, evolved codecs or None); holding the objects keeps their ids
#: from being reused
_EVOLVED = BoundedMemo(256)


def build_pipeline(metadata: ArrayMetadata, config: ArrayConfig) -> CodecPipeline:
    """The array's codec pipeline with chunk-dependent defaults filled and validated
    against every distinct codec shape of the grid."""
    return _pipeline_for(metadata, config)[0]


def _pipeline_for(metadata: ArrayMetadata, config: ArrayConfig
                  ) -> tuple[CodecPipeline, tuple[Any, ...] | None]:
    """:func:`build_pipeline`, and the evolved codecs when they differ from the
    metadata's (else None). Arrays whose metadata holds the same (immutable, memoized)
    codec and data type objects share the result: evolving and validating depend on
    nothing else than those and the codec shapes."""
    shapes = tuple(_distinct_codec_shapes(metadata))
    codecs, data_type = metadata.codecs, metadata.data_type
    key = (*map(id, codecs), id(data_type), shapes)
    hit = _EVOLVED.get(key)
    if hit is None:
        pipeline = _evolve_pipeline(metadata, config, shapes)
        evolved = pipeline.codecs
        changed = len(evolved) != len(codecs) or any(
            a is not b for a, b in zip(evolved, codecs))
        hit = _EVOLVED.keep(key, ((codecs, data_type), pipeline, evolved if changed else None))
    return hit[1], hit[2]


def _evolve_pipeline(metadata: ArrayMetadata, config: ArrayConfig,
                     shapes: tuple[tuple[int, ...], ...]) -> CodecPipeline:
    pipeline = CodecPipeline(metadata.codecs)
    evolved = None
    for shape in shapes:
        spec = ChunkArraySpec(shape, metadata.data_type, metadata.fill_value,
                              config.write_empty_chunks)
        candidate = pipeline.evolve(spec)
        evolved = evolved or candidate
    return evolved or pipeline.evolve(ChunkArraySpec(
        tuple(1 for _ in metadata.shape), metadata.data_type, metadata.fill_value))


def _distinct_codec_shapes(metadata: ArrayMetadata) -> list[tuple[int, ...]]:
    """Codec shapes that between them use every distinct edge length of every dimension
    (shape k takes each dimension's k-th distinct edge, cycling): what the codecs check
    of a shape (divisibility by an inner chunk, the number of dimensions) is checked per
    dimension, so these cover every chunk of the grid without enumerating the product
    of the edge lengths, which a rectilinear grid of many dimensions makes astronomical."""
    edges = [d.unique_edge_lengths for d in metadata.chunk_grid.dimensions]
    count = max((len(e) for e in edges), default=1)
    return [tuple(e[k % len(e)] for e in edges) for k in range(count)]


class Array(Node):
    metadata: ArrayMetadata
    _metadata_kind = ArrayMetadata

    def __init__(self, store: Store, path: str, metadata: ArrayMetadata, *,
                 read_only: bool = False, config: ArrayConfig | None = None) -> None:
        super().__init__(store, path, metadata, read_only=read_only)
        self.config = config or DEFAULT_CONFIG
        self._set_metadata(metadata)

    def _reopen_options(self) -> dict[str, Any]:
        return {"config": self.config}

    def _set_metadata(self, metadata: ArrayMetadata) -> None:
        self._pipeline, evolved = _pipeline_for(metadata, self.config)
        # Keep the evolved codecs (defaults filled in) so that what is written back on a
        # resize or attribute change is the explicit form.
        self.metadata = metadata if evolved is None else replace(metadata, codecs=evolved)
        self.__dict__.pop("_io", None)   # built again from the new metadata when used
        self._points: PointReader | None = None   # built on the first a[i, j]

    @functools.cached_property
    def _io(self) -> ChunkIO:
        # Built on first use: opening an array to read its attributes never needs it.
        return ChunkIO(self.store, self.path, self.metadata, self._pipeline, self.config)

    # -- description ---------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self.metadata.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.metadata.data_type.numpy_dtype

    @property
    def fill_value(self) -> Any:
        return self.metadata.fill_value

    @property
    def dimension_names(self) -> tuple[str | None, ...] | None:
        return self.metadata.dimension_names

    @property
    def codecs(self) -> tuple[Any, ...]:
        return self._pipeline.codecs

    @property
    def _sharding(self) -> Any:
        codec = self._pipeline.array_bytes
        return codec if codec.name == "sharding_indexed" else None

    @property
    def chunks(self) -> tuple[int, ...]:
        """The read chunk shape: inner chunks of a sharded array, else the grid's chunks.
        NotImplementedError for rectilinear grids (use read_chunk_sizes)."""
        sharding = self._sharding
        if sharding is not None:
            return tuple(sharding.chunk_shape)
        return self.metadata.chunk_grid.chunk_shape

    @property
    def shards(self) -> tuple[int, ...] | None:
        """Shard shape of a sharded array on a regular grid, else None."""
        if self._sharding is None:
            return None
        return self.metadata.chunk_grid.chunk_shape

    @property
    def write_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Data sizes of the stored chunks (shards) along each dimension."""
        return self.metadata.chunk_grid.chunk_sizes

    @property
    def read_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Data sizes of the smallest readable chunks (inner chunks when sharded)."""
        sharding = self._sharding
        if sharding is None:
            return self.write_chunk_sizes
        out = []
        for dim, inner in zip(self.metadata.chunk_grid.dimensions, sharding.chunk_shape):
            sizes: list[int] = []
            for shard in dim.data_sizes():
                full, rest = divmod(shard, inner)
                sizes.extend([inner] * full + ([rest] if rest else []))
            out.append(tuple(sizes))
        return tuple(out)

    @property
    def nchunks(self) -> int:
        """Number of stored chunks (shards) in the grid."""
        return self.metadata.chunk_grid.nchunks

    @property
    def cdata_shape(self) -> tuple[int, ...]:
        return self.metadata.chunk_grid.grid_shape

    @property
    def nchunks_initialized(self) -> int:
        """Number of chunks (shards) present in the store."""
        return sum(1 for _ in self._stored_chunk_coords())

    def _stored_chunk_coords(self):
        return iter(self._io.stored_chunk_coords())

    @property
    def compactable(self) -> bool:
        """Whether this array's stored chunks can hold garbage that :meth:`compact`
        removes: partial writes go through its codecs (shards not compressed whole)."""
        return compactable(self._io)

    def compact(self, *, dry_run: bool = False,
                progress: Callable[[str], None] | None = None) -> CompactionReport:
        """Lay every stored shard that holds garbage (left by appended partial writes,
        see :class:`kvzarr.transformers.AppendShards`) out again without it, each shard
        in its own write transaction; ``progress(key)`` is called after each shard.
        Shards that cannot be read are reported (``report.corrupt``) and left as they
        are. An array without shards (or whose shards are compressed whole) has nothing
        to compact. See :mod:`kvzarr.engine.compaction`."""
        if not dry_run:
            self._check_writable()
        if not self.compactable:
            return CompactionReport()
        return compact_chunks(self._io, stored_chunk_keys(self._io), dry_run=dry_run,
                              progress=progress)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def info(self) -> "ArrayInfo":
        return ArrayInfo(self)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<kvzarr.Array {self.name!r} shape={self.shape} dtype={self.dtype}>"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = self[...]
        return data if dtype is None else data.astype(dtype)

    # -- indexing ------------------------------------------------------------------------

    def _get(self, indexer: Indexer) -> Any:
        out = self._io.read(indexer)
        return out[()] if out.ndim == 0 else out

    def _set(self, indexer: Indexer, value: Any) -> None:
        self._check_writable()
        self._io.write(indexer, _materialize(value))

    def __getitem__(self, selection: Any) -> Any:
        points = self._points
        if points is None:
            points = self._points = PointReader(self._io)
        index = points.index(selection)
        if index is not None:
            return points.read(index)
        if type(selection) is slice or (type(selection) is tuple
                                        and all(type(s) is slice for s in selection)):
            # slices only (a tile, a hyperslab): basic indexing, nothing to classify
            return self.get_basic_selection(selection)
        fields, selection = _pop_fields(selection)
        kind = classify_selection(selection, self.shape)
        if kind == "vindex":
            result = self.vindex[selection]
        elif kind == "orthogonal":
            result = self.get_orthogonal_selection(selection)
        else:
            result = self.get_basic_selection(selection)
        return _select_fields(result, fields)

    def __setitem__(self, selection: Any, value: Any) -> None:
        fields, selection = _pop_fields(selection)
        if fields:
            raise ArrayIndexError("assigning to fields of a struct array is not supported")
        kind = classify_selection(selection, self.shape)
        if kind == "vindex":
            self.vindex[selection] = value
        elif kind == "orthogonal":
            self.set_orthogonal_selection(selection, value)
        else:
            self.set_basic_selection(selection, value)

    def get_basic_selection(self, selection: Any = Ellipsis) -> Any:
        return self._get(BasicIndexer(selection, self.metadata.chunk_grid))

    def set_basic_selection(self, selection: Any, value: Any) -> None:
        self._set(BasicIndexer(selection, self.metadata.chunk_grid), value)

    def get_orthogonal_selection(self, selection: Any) -> Any:
        return self._get(OrthogonalIndexer(_materialize_selection(selection),
                                           self.metadata.chunk_grid))

    def set_orthogonal_selection(self, selection: Any, value: Any) -> None:
        self._set(OrthogonalIndexer(_materialize_selection(selection),
                                    self.metadata.chunk_grid), value)

    def get_coordinate_selection(self, selection: Any) -> Any:
        return self._get(CoordinateIndexer(_materialize_selection(selection),
                                           self.metadata.chunk_grid))

    def set_coordinate_selection(self, selection: Any, value: Any) -> None:
        self._set(CoordinateIndexer(_materialize_selection(selection),
                                    self.metadata.chunk_grid), value)

    def get_mask_selection(self, mask: Any) -> Any:
        return self._get(MaskIndexer(_materialize_selection(mask), self.metadata.chunk_grid))

    def set_mask_selection(self, mask: Any, value: Any) -> None:
        self._set(MaskIndexer(_materialize_selection(mask), self.metadata.chunk_grid), value)

    def get_block_selection(self, selection: Any) -> Any:
        return self._get(BlockIndexer(selection, self.metadata.chunk_grid))

    def set_block_selection(self, selection: Any, value: Any) -> None:
        self._set(BlockIndexer(selection, self.metadata.chunk_grid), value)

    @property
    def oindex(self) -> "_OIndex":
        return _OIndex(self)

    @property
    def vindex(self) -> "_VIndex":
        return _VIndex(self)

    @property
    def blocks(self) -> "_BlockIndex":
        return _BlockIndex(self)

    # -- shape changes -------------------------------------------------------------------

    def resize(self, *shape: Any) -> None:
        """Change the shape. Chunks wholly outside the new shape are erased; chunks
        straddling the new edge keep their old values beyond it (as zarr-python: growing
        again shows them)."""
        self._check_writable()
        new_shape = tuple(int(n) for n in (shape[0] if len(shape) == 1
                                            and isinstance(shape[0], (tuple, list)) else shape))
        if len(new_shape) != self.ndim:
            raise MetadataError(f"resize to {new_shape}: the array has {self.ndim} dimensions",
                                field="shape")
        if any(n < 0 for n in new_shape):
            raise MetadataError(f"resize to {new_shape}: negative extent", field="shape")
        new_grid = self.metadata.chunk_grid.with_shape(new_shape)

        def edit(doc: dict[str, Any]) -> None:
            doc["shape"] = list(new_shape)
            if self.metadata.chunk_grid_name != "regular":
                doc["chunk_grid"] = chunk_grid_to_json(new_grid, self.metadata.chunk_grid_name)

        with self.store.transaction():
            if any(n < o for n, o in zip(new_grid.grid_shape, self.cdata_shape)):
                base = f"{self.path}/" if self.path else ""
                cke = self.metadata.chunk_key_encoding
                doomed = [base + cke.encode(c) for c in self._stored_chunk_coords()
                          if any(i >= n for i, n in zip(c, new_grid.grid_shape))]
                if doomed:
                    self.store.erase_values(doomed)
            self._rewrite_metadata(edit)

    def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Grow along ``axis`` and write ``data`` into the new part; returns the new shape.

        The growth is a read-modify-write of the stored ``zarr.json``, not of this handle's
        copy: writers in other processes appending to the same array each get their own
        region (on a store with transactions the growth and the data commit together; on
        a directory the growth holds the document's key lock, and the region then reads
        as fill values until its data lands)."""
        data = np.asanyarray(_materialize(data))
        if data.ndim != self.ndim or not 0 <= axis < self.ndim:
            raise ShapeMismatchError(
                f"shape of data to append {data.shape} is not compatible with the array's "
                f"shape {self.shape} along axis {axis}")
        grown: list[tuple[int, ...]] = []

        def edit(doc: dict[str, Any]) -> None:
            current = parse_node_metadata(doc, self.name)     # the shape as stored now
            if not isinstance(current, ArrayMetadata):
                raise MetadataError("the node is no longer an array", path=self.name)
            old = current.shape
            if any(d != s for i, (d, s) in enumerate(zip(data.shape, old)) if i != axis):
                raise ShapeMismatchError(
                    f"shape of data to append {data.shape} is not compatible with the "
                    f"array's shape {old} along axis {axis}")
            new = tuple(s + data.shape[axis] if i == axis else s for i, s in enumerate(old))
            doc["shape"] = list(new)
            if current.chunk_grid_name != "regular":
                doc["chunk_grid"] = chunk_grid_to_json(current.chunk_grid.with_shape(new),
                                                       current.chunk_grid_name)
            grown.append(old)

        with self.store.transaction():
            self._rewrite_metadata(edit)
            old = grown[-1]
            sel = tuple(slice(old[axis], old[axis] + data.shape[axis]) if i == axis
                        else slice(None) for i in range(self.ndim))
            self[sel] = data
        return self.shape

class _OIndex:
    def __init__(self, array: Array) -> None:
        self.array = array

    def __getitem__(self, selection: Any) -> Any:
        fields, selection = _pop_fields(selection)
        return _select_fields(self.array.get_orthogonal_selection(selection), fields)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self.array.set_orthogonal_selection(selection, value)


class _VIndex:
    def __init__(self, array: Array) -> None:
        self.array = array

    def _is_mask(self, selection: Any) -> bool:
        sel = selection[0] if isinstance(selection, tuple) and len(selection) == 1 else selection
        return isinstance(sel, np.ndarray) and sel.dtype == bool

    def __getitem__(self, selection: Any) -> Any:
        fields, selection = _pop_fields(selection)
        selection = _materialize_selection(selection)
        if self._is_mask(selection):
            sel = selection[0] if isinstance(selection, tuple) else selection
            return _select_fields(self.array.get_mask_selection(sel), fields)
        return _select_fields(self.array.get_coordinate_selection(selection), fields)

    def __setitem__(self, selection: Any, value: Any) -> None:
        selection = _materialize_selection(selection)
        if self._is_mask(selection):
            sel = selection[0] if isinstance(selection, tuple) else selection
            self.array.set_mask_selection(sel, value)
        else:
            self.array.set_coordinate_selection(selection, value)


class _BlockIndex:
    def __init__(self, array: Array) -> None:
        self.array = array

    def __getitem__(self, selection: Any) -> Any:
        return self.array.get_block_selection(selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self.array.set_block_selection(selection, value)


class ArrayInfo:
    """A readable summary of an array (``repr`` prints it)."""

    def __init__(self, array: Array) -> None:
        self.array = array

    def __repr__(self) -> str:
        a = self.array
        try:
            chunks = str(a.chunks)
        except NotImplementedError:
            chunks = f"rectilinear {a.write_chunk_sizes}"
        rows = [("Type", "Array"), ("Zarr format", "3"), ("Data type", str(a.metadata.data_type)),
                ("Fill value", repr(a.fill_value)), ("Shape", str(a.shape)),
                ("Chunk shape", chunks), ("Shard shape", str(a.shards)),
                ("Codecs", ", ".join(c.name for c in a.codecs)),
                ("Store", repr(stack_layers(a.store)[-1])),
                ("Transformers", _describe_transformers(a.store)), ("Path", a.name),
                ("No. bytes", str(a.nbytes)),
                ("Chunks Initialized", f"{a.nchunks_initialized}/{a.nchunks}")]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}} : {v}" for k, v in rows)


def _describe_transformers(store: Store) -> str:
    """The storage transformers between the array and its store, top first, each with
    its options and counters; "none" without any."""
    parts = []
    for layer in stack_layers(store)[:-1]:
        opts = ", ".join(f"{k}={v!r}" for k, v in layer.options().items())
        stats = ", ".join(f"{k} {v}" for k, v in layer.stats().items())
        parts.append(f"{layer.name}({opts})" + (f" [{stats}]" if stats else ""))
    return " > ".join(parts) if parts else "none"


def _materialize(value: Any) -> Any:
    """A kvzarr Array used as a value is read first."""
    return value[...] if isinstance(value, Array) else value


def _materialize_selection(selection: Any) -> Any:
    if isinstance(selection, tuple):
        return tuple(_materialize(s) for s in selection)
    return _materialize(selection)


def _pop_fields(selection: Any) -> tuple[list[str], Any]:
    """Split struct field names (strings) off a selection."""
    if isinstance(selection, str):
        return [selection], Ellipsis
    if isinstance(selection, list) and selection and all(isinstance(s, str) for s in selection):
        return list(selection), Ellipsis
    items = selection if isinstance(selection, tuple) else (selection,)
    fields = [s for s in items if isinstance(s, str)]
    if not fields:
        return [], selection
    rest = tuple(s for s in items if not isinstance(s, str))
    return fields, (rest if rest else Ellipsis)


def _select_fields(result: Any, fields: list[str]) -> Any:
    if not fields:
        return result
    dtype = getattr(result, "dtype", None)
    if dtype is None or dtype.names is None:
        raise ArrayIndexError(f"fields {fields} given, but the array has no struct fields")
    missing = [f for f in fields if f not in dtype.names]
    if missing:
        raise ArrayIndexError(f"no such struct fields: {missing}")
    return result[fields[0]] if len(fields) == 1 else result[fields]


__all__ = ["Array", "ArrayConfig", "ArrayInfo", "build_pipeline"]
