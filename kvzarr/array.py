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
from .errors import (ArrayIndexError, MetadataError, RectilinearChunksError,
                     ShapeMismatchError)
from .indexing import (BasicIndexer, BlockIndexer, CoordinateIndexer, Indexer, MaskIndexer,
                       OrthogonalIndexer, classify_selection)
from .runtime.memo import BoundedMemo
from .metadata.v3 import ArrayMetadata, parse_node_metadata
from .grid import chunk_grid_to_json
from .node import Node
from .engine.point_reads import PointReader
from .stores.base import Store
from .array_info import ArrayInfo

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
    """A Zarr v3 array in a store, with zarr-python 3's names and indexing: ``a[...]``,
    ``oindex``, ``vindex``, ``blocks``, ``resize``, ``append``, ``attrs``.

    Each read is one read transaction (one snapshot where the store is transactional:
    a read never mixes chunks from before and after another writer's commit); each
    write, resize, append and attribute change is one write transaction, including the
    read-modify-write of partly covered chunks, so writers in other threads and
    processes never lose each other's updates (on a directory, per-key locks give the
    same). A crash in the middle of a write leaves all of it or none on a transactional
    store; on a directory, each chunk old or new. Inside a user's
    ``with store.transaction():`` everything joins that transaction.
    """

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
        """The array's shape (as the handle's metadata says)."""
        return self.metadata.shape

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        """The numpy data type of the values read and written."""
        return self.metadata.data_type.numpy_dtype

    @property
    def fill_value(self) -> Any:
        """The value of every element no chunk holds."""
        return self.metadata.fill_value

    @property
    def dimension_names(self) -> tuple[str | None, ...] | None:
        """The stored name of each dimension (None where unnamed), or None."""
        return self.metadata.dimension_names

    @property
    def codecs(self) -> tuple[Any, ...]:
        """The codec pipeline with its defaults filled in, as stored (array-to-array,
        array-to-bytes, bytes-to-bytes)."""
        return self._pipeline.codecs

    @property
    def _sharding(self) -> Any:
        codec = self._pipeline.array_bytes
        return codec if codec.name == "sharding_indexed" else None

    @property
    def chunks(self) -> tuple[int, ...]:
        """The read chunk shape: inner chunks of a sharded array, else the grid's chunks
        (as zarr-python). A rectilinear grid has none: RectilinearChunksError (a
        NotImplementedError, as zarr-python raises) says to use :attr:`chunk_sizes`."""
        sharding = self._sharding
        if sharding is not None:
            return tuple(sharding.chunk_shape)
        return self._regular("chunks", "chunk_sizes")

    @property
    def shards(self) -> tuple[int, ...] | None:
        """Shard shape of a sharded array, else None; RectilinearChunksError for a
        sharded array on a rectilinear grid (use :attr:`write_chunk_sizes`)."""
        if self._sharding is None:
            return None
        return self._regular("shards", "write_chunk_sizes")

    def _regular(self, what: str, instead: str) -> tuple[int, ...]:
        grid = self.metadata.chunk_grid
        if not grid.is_regular:
            raise RectilinearChunksError(
                f"this array's chunk grid is rectilinear: it has no single {what} shape",
                path=self.name, field=what,
                hint=f"use Array.{instead}, the sizes along each dimension")
        return grid.chunk_shape

    @property
    def chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Data sizes of the read chunks along each dimension (dask's convention; inner
        chunks when sharded): what :attr:`chunks` is for any grid, rectilinear too."""
        return self.read_chunk_sizes

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
        """The number of stored chunks (shards) along each dimension."""
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
        """The size of the data in bytes, uncompressed (``size * dtype.itemsize``)."""
        return self.size * self.dtype.itemsize

    # -- zarr-python's description of the codecs -----------------------------------------

    @property
    def _inner_pipeline(self) -> CodecPipeline:
        """The codecs each read chunk goes through: inside the sharding codec when the
        array is sharded (zarr-python's ``metadata.inner_codecs``)."""
        sharding = self._sharding
        return self._pipeline if sharding is None else sharding.codecs

    @property
    def filters(self) -> tuple[Any, ...]:
        """The array-to-array codecs of a chunk (inside the shards when sharded), in
        order, as zarr-python returns them: a tuple of codec objects (kvzarr's codec
        objects; ``to_json()`` gives each one's Zarr document)."""
        return tuple(self._inner_pipeline.array_array)

    @property
    def serializer(self) -> Any:
        """The array-to-bytes codec of a chunk (inside the shards when sharded), as
        zarr-python returns it (a kvzarr codec object)."""
        return self._inner_pipeline.array_bytes

    @property
    def compressors(self) -> tuple[Any, ...]:
        """The bytes-to-bytes codecs of a chunk (inside the shards when sharded), in
        order: a tuple of kvzarr codec objects, as zarr-python returns its own."""
        return tuple(self._inner_pipeline.bytes_bytes)

    @property
    def order(self) -> str:
        """The memory order of the arrays reads return: always ``"C"`` (zarr-python's
        default ``config.order``); a ``transpose`` codec changes how chunks are stored,
        not this."""
        return "C"

    def nbytes_stored(self) -> int:
        """Bytes the array takes in the store: its ``zarr.json`` and every stored chunk
        (zarr-python's ``nbytes_stored()``), from one listing of the array's keys read
        in one read transaction (:meth:`kvzarr.Store.getsize_prefix`). Bytes the
        storage transformers keep beside the values (checksum records) and the
        backend's own overhead (pages, indexes) are not counted."""
        return self.store.getsize_prefix(f"{self.path}/" if self.path else "")

    @property
    def info(self) -> "ArrayInfo":
        """What the metadata says about the array, without reading the store (as
        zarr-python's ``info``); ``repr`` prints it."""
        return ArrayInfo(self)

    def info_complete(self) -> "ArrayInfo":
        """:attr:`info` and what the store holds: the bytes stored, the storage ratio
        and the number of chunks (shards) written. Lists the array's keys twice."""
        return ArrayInfo(self, stored=self.nbytes_stored(),
                         initialized=self.nchunks_initialized)

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
        """The values of a basic selection (integers, slices with step >= 1,
        Ellipsis, as numpy). One read transaction: the chunks read form one snapshot
        where the store has them."""
        return self._get(BasicIndexer(selection, self.metadata.chunk_grid))

    def set_basic_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` (broadcast as numpy does) into a basic selection. One
        write transaction: every chunk it touches (read-modify-write of the partly
        covered ones) commits together, or nothing does."""
        self._set(BasicIndexer(selection, self.metadata.chunk_grid), value)

    def get_orthogonal_selection(self, selection: Any) -> Any:
        """The values of an orthogonal selection (integer arrays, Boolean
        masks and slices, each applied to its own dimension, as ``a.oindex[...]``)."""
        return self._get(OrthogonalIndexer(_materialize_selection(selection),
                                           self.metadata.chunk_grid))

    def set_orthogonal_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` into an orthogonal selection, in one write
        transaction (see :meth:`set_basic_selection`)."""
        self._set(OrthogonalIndexer(_materialize_selection(selection),
                                    self.metadata.chunk_grid), value)

    def get_coordinate_selection(self, selection: Any) -> Any:
        """The values at the points of a coordinate selection (one integer
        array per dimension, broadcast together, as ``a.vindex[...]``)."""
        return self._get(CoordinateIndexer(_materialize_selection(selection),
                                           self.metadata.chunk_grid))

    def set_coordinate_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` at the points of a coordinate selection, in one
        write transaction."""
        self._set(CoordinateIndexer(_materialize_selection(selection),
                                    self.metadata.chunk_grid), value)

    def get_mask_selection(self, mask: Any) -> Any:
        """The values where the Boolean ``mask`` (the array's shape) is true,
        in C order."""
        return self._get(MaskIndexer(_materialize_selection(mask), self.metadata.chunk_grid))

    def set_mask_selection(self, mask: Any, value: Any) -> None:
        """Write ``value`` where the Boolean ``mask`` is true, in one write
        transaction."""
        self._set(MaskIndexer(_materialize_selection(mask), self.metadata.chunk_grid), value)

    def get_block_selection(self, selection: Any) -> Any:
        """The values of whole chunks, selected by chunk index (``a.blocks[i, j]``;
        slices of chunk indices allowed)."""
        return self._get(BlockIndexer(selection, self.metadata.chunk_grid))

    def set_block_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` into whole chunks selected by chunk index, in one
        write transaction."""
        self._set(BlockIndexer(selection, self.metadata.chunk_grid), value)

    @property
    def oindex(self) -> "_OIndex":
        """Orthogonal indexing: ``a.oindex[[0, 3], 1:5]`` reads and assigns."""
        return _OIndex(self)

    @property
    def vindex(self) -> "_VIndex":
        """Coordinate and mask indexing: ``a.vindex[[0, 3], [1, 2]]``, ``a.vindex[mask]``."""
        return _VIndex(self)

    @property
    def blocks(self) -> "_BlockIndex":
        """Chunk indexing: ``a.blocks[1, 0]`` is the whole chunk (1, 0)."""
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
            old = tuple(doc.get("shape") or ())                # the shape as stored now
            if any(d != s for i, (d, s) in enumerate(zip(data.shape, old)) if i != axis):
                raise ShapeMismatchError(
                    f"shape of data to append {data.shape} is not compatible with the "
                    f"array's shape {old} along axis {axis}")
            new = tuple(s + data.shape[axis] if i == axis else s for i, s in enumerate(old))
            doc["shape"] = list(new)
            grid = doc.get("chunk_grid")
            if (grid.get("name") if isinstance(grid, dict) else grid) not in (None, "regular"):
                current = parse_node_metadata(doc, self.name)
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
