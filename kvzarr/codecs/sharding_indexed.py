"""The ``sharding_indexed`` codec (sharding-indexed v1.0,
https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html):
array -> bytes, many inner chunks in one stored value plus an index.

Configuration (all four members are written; ``index_location`` defaults to ``"end"``
when absent on read)::

    {"name": "sharding_indexed", "configuration": {
        "chunk_shape": [32, 32],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}],
        "index_location": "end"}}

Promises:

* ``codecs`` and ``index_codecs`` are full codec pipelines (nested sharding works);
  ``index_codecs`` must give a fixed-size encoding (MetadataError otherwise, as
  tensorstore). The inner chunk shape must divide the shard shape in every dimension;
  everything is computed from ``spec.shape``, so shards of a rectilinear outer grid each
  get their own chunks-per-shard and index size.
* Writing lays inner chunks out in Morton order, as zarr-python 3 does (its shards and
  ours are byte-identical), offsets counted from byte 0 of the shard. An inner chunk
  equal to the fill value is not stored unless ``write_empty_chunks``; a shard with no
  inner chunk left encodes to None (the key is erased).
* Reading verifies the index through ``index_codecs`` (crc32c: ChecksumMismatchError) and
  rejects a shard shorter than its index or an entry past its end (CodecError).
* ``decode_partial`` reads the index with one request, then only the needed inner chunks
  with one ``get_ranges`` call (one ``get`` when every inner chunk is needed).
  ``encode_partial`` decodes only the inner chunks the selection partly covers and copies
  untouched inner chunks' encoded bytes verbatim.
* Many inner chunks are encoded and decoded in the shared worker pool; :meth:`encode_many`
  encodes many whole shards with all their inner chunks in one batch of pool tasks.
* Under an append policy (``source.append_policy``, from the AppendShards storage
  transformer), a partial write appends the inner chunks it changes and a new index
  (:class:`AppendUpdate`, the specification's append-only strategy; :mod:`.sharding.append`)
  instead of rewriting the shard: untouched inner chunks keep their offsets and are not
  read. It rewrites the shard densely (:class:`RewriteUpdate`) when garbage would pass
  ``max_garbage`` of its size, and when the shard cannot be appended to (an index at the
  start, an index without crc32c). ``compact`` lays a shard out again without garbage.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..stores.byteranges import RangeRequest, SuffixRequest
from ..grid import MAX_NDIM
from ..errors import AppendConflictError, CodecError, MetadataError, ShapeMismatchError
from ..indexing import OrthogonalIndexer
from .base import (AppendUpdate, ArrayBytesCodec, ByteSource, ChunkArraySpec, Codec, Compacted,
                   RewriteUpdate)
from .pipeline import CodecPipeline
from .registry import codecs_from_json, register_codec
from .sharding.append import COMPACTION, append_refusal, appended_index, garbage
from .sharding.encoder import encode_shards
from .sharding.layout import MISSING, ShardIndex, ShardLayout, index_data_type, make_layout
from .sharding.splice import splice
from ..runtime.workers import map_items, worth_threads

_LOCATIONS = ("start", "end")
_DEFAULT_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}}]
_DEFAULT_INDEX_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}]
_FIELD = "sharding_indexed"
#: the largest value any store holds (file offsets and SQL lengths are signed 64-bit)
_MAX_VALUE_SIZE = 2**63 - 1


def _pipeline(codecs: CodecPipeline | Sequence[Codec] | Sequence[dict[str, Any]],
              field: str) -> CodecPipeline:
    if isinstance(codecs, CodecPipeline):
        return codecs
    codecs = list(codecs)
    if codecs and all(isinstance(c, Codec) for c in codecs):
        return CodecPipeline(codecs)
    return CodecPipeline(codecs_from_json(codecs, field=field))


class ShardingCodec(ArrayBytesCodec):
    """Inner chunks encoded with ``codecs``, located through an index."""

    name = "sharding_indexed"
    supports_partial = True

    def __init__(self, chunk_shape: Sequence[int],
                 codecs: CodecPipeline | Sequence[Any] | None = None,
                 index_codecs: CodecPipeline | Sequence[Any] | None = None,
                 index_location: str = "end") -> None:
        shape = tuple(chunk_shape)
        if not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 1
                   for c in shape):
            raise MetadataError(f"chunk_shape must be a list of integers >= 1, got {list(shape)}",
                                field=f"{_FIELD}.chunk_shape")
        if index_location not in _LOCATIONS:
            raise MetadataError(
                f"index_location must be 'start' or 'end', got {index_location!r}",
                field=f"{_FIELD}.index_location")
        self.chunk_shape: tuple[int, ...] = tuple(int(c) for c in shape)
        self.codecs = _pipeline(_DEFAULT_CODECS if codecs is None else codecs,
                                f"{_FIELD}.codecs")
        self.index_codecs = _pipeline(
            _DEFAULT_INDEX_CODECS if index_codecs is None else index_codecs,
            f"{_FIELD}.index_codecs")
        self.index_location = index_location
        self._layouts: dict[tuple[int, ...], ShardLayout] = {}
        #: (shard shape, id of the data type) -> data type, for specs evolve() validated
        self._validated: dict[tuple[tuple[int, ...], int], Any] = {}
        # The index size must not depend on what the index holds (spec: no compression).
        self._index_size(ChunkArraySpec((1,) * len(shape) + (2,), index_data_type(), MISSING))

    # -- metadata ------------------------------------------------------------------------

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "ShardingCodec":
        extra = set(configuration) - {"chunk_shape", "codecs", "index_codecs",
                                      "index_location"}
        if extra:
            raise MetadataError(f"unknown sharding_indexed configuration keys {sorted(extra)}",
                                field=f"{_FIELD}.{sorted(extra)[0]}")
        for member in ("chunk_shape", "codecs", "index_codecs"):
            if member not in configuration:
                raise MetadataError(f"sharding_indexed needs {member!r}",
                                    field=f"{_FIELD}.{member}")
        chunk_shape = configuration["chunk_shape"]
        if not isinstance(chunk_shape, list):
            raise MetadataError(f"chunk_shape must be a list of integers, got {chunk_shape!r}",
                                field=f"{_FIELD}.chunk_shape")
        for member in ("codecs", "index_codecs"):
            if not isinstance(configuration[member], list):
                raise MetadataError(f"{member} must be a list of codecs",
                                    field=f"{_FIELD}.{member}")
        return cls(chunk_shape,
                   codecs_from_json(configuration["codecs"], f"{_FIELD}.codecs"),
                   codecs_from_json(configuration["index_codecs"], f"{_FIELD}.index_codecs"),
                   configuration.get("index_location", "end"))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {
            "chunk_shape": list(self.chunk_shape),
            "codecs": self.codecs.to_json(),
            "index_codecs": self.index_codecs.to_json(),
            "index_location": self.index_location,
        }}

    def _check_shape(self, shape: tuple[int, ...]) -> None:
        if len(shape) + 1 > MAX_NDIM:
            # the index is an array of one more dimension than the shard
            raise MetadataError(
                f"a shard of {len(shape)} dimensions needs an index of {len(shape) + 1}, "
                f"more than the {MAX_NDIM} numpy supports", field=f"{_FIELD}.chunk_shape")
        if len(shape) != len(self.chunk_shape):
            raise MetadataError(
                f"sharding chunk_shape {list(self.chunk_shape)} has {len(self.chunk_shape)} "
                f"dimensions, the shard {list(shape)} has {len(shape)}",
                field=f"{_FIELD}.chunk_shape")
        for dim, (edge, inner) in enumerate(zip(shape, self.chunk_shape)):
            if edge % inner:
                raise MetadataError(
                    f"chunk edge length {edge} in dimension {dim} is not divisible by the "
                    f"shard's inner chunk size {inner}", field=f"{_FIELD}.chunk_shape",
                    hint="every shard edge length must be a multiple of the inner chunk shape")

    def validate(self, spec: ChunkArraySpec) -> None:
        self._check_shape(spec.shape)
        if self._validated.get((spec.shape, id(spec.data_type))) is spec.data_type:
            return      # this codec came out of evolve(spec), which validated it all
        self.codecs.evolve(self._inner_spec(spec))     # validates every inner codec
        layout = self._layout(spec.shape)
        self.index_codecs.evolve(layout.index_spec)

    def evolve(self, spec: ChunkArraySpec) -> "ShardingCodec":
        self._check_shape(spec.shape)
        layout = self._layout(spec.shape)
        evolved = ShardingCodec(self.chunk_shape, self.codecs.evolve(self._inner_spec(spec)),
                                self.index_codecs.evolve(layout.index_spec),
                                self.index_location)
        # evolving the pipelines validated them: the pipeline's validate() of the result
        # need not do it again (nested shards would otherwise cost 2**depth)
        evolved._validated[(spec.shape, id(spec.data_type))] = spec.data_type
        return evolved

    def encoded_size(self, spec: ChunkArraySpec) -> int | None:
        # Fill-valued inner chunks are left out, so the size is fixed only when every
        # inner chunk is stored and each has a fixed size.
        if not spec.write_empty_chunks:
            return None
        inner = self.codecs.encoded_size(self._inner_spec(spec))
        if inner is None:
            return None
        layout = self._layout(spec.shape)
        return layout.nchunks * inner + layout.index_size

    def max_encoded_size(self, spec: ChunkArraySpec) -> int | None:
        # Every inner chunk at its bound, plus the index, with room for as much unused
        # space again: the specification lets a shard hold bytes no index entry points to
        # (an append-only writer leaves them; "Binary shard format").
        inner = self.codecs.max_encoded_size(self._inner_spec(spec))
        if inner is None:
            return None
        layout = self._layout(spec.shape)
        return 2 * layout.nchunks * inner + layout.index_size

    # -- geometry ------------------------------------------------------------------------

    def _index_size(self, index_spec: ChunkArraySpec) -> int:
        size = self.index_codecs.encoded_size(index_spec)
        if size is None:
            names = [c.name for c in self.index_codecs.codecs]
            raise MetadataError(
                f"index_codecs {names} do not produce a fixed-size encoding",
                field=f"{_FIELD}.index_codecs",
                hint="use bytes (and crc32c); compressors are not allowed for the index")
        return size

    def _layout(self, shard_shape: tuple[int, ...]) -> ShardLayout:
        layout = self._layouts.get(shard_shape)
        if layout is None:
            self._check_shape(shard_shape)
            layout = self._layouts[shard_shape] = make_layout(
                shard_shape, self.chunk_shape, self._index_size)
        return layout

    def _inner_spec(self, spec: ChunkArraySpec) -> ChunkArraySpec:
        return spec.with_shape(self.chunk_shape)

    def _inner_nbytes(self, spec: ChunkArraySpec) -> int:
        return math.prod(self.chunk_shape) * max(spec.data_type.numpy_dtype.itemsize, 1)

    # -- the index -----------------------------------------------------------------------

    def _decode_index(self, data: Any, layout: ShardLayout, key: str | None) -> ShardIndex:
        array = self.index_codecs.decode(data, layout.index_spec, key=key)
        return ShardIndex.from_decoded(array, layout)

    def _read_index(self, source: ByteSource, layout: ShardLayout,
                    key: str | None) -> ShardIndex | None:
        """The index through ONE request, or as the source kept it from an earlier read
        of the same shard that nothing has changed since; None if the shard is absent."""
        return source.remembered(("shard index", self.index_location, layout.index_size),
                                 lambda: self._read_index_now(source, layout, key),
                                 _keepable_index)

    def _read_index_now(self, source: ByteSource, layout: ShardLayout,
                        key: str | None) -> ShardIndex | None:
        size = layout.index_size
        request = (RangeRequest(0, size) if self.index_location == "start"
                   else SuffixRequest(size))
        got = source.get_ranges([request])
        if got is None:
            return None
        data = got[0]
        if memoryview(data).nbytes != size:
            raise CodecError(f"truncated shard: {memoryview(data).nbytes} bytes, shorter than "
                             f"its {size}-byte index", key=key)
        return self._decode_index(data, layout, key)

    def _read_index_at(self, source: ByteSource, layout: ShardLayout, size: int,
                       key: str | None) -> ShardIndex | None:
        """The index of the shard as it was when it held ``size`` bytes (the index at the
        end, read as a range, not a suffix: where another writer may append between the
        two reads, the index read is still the one at ``size``); None if the shard is
        absent. AppendConflictError if it is shorter now (replaced meanwhile)."""
        if size < layout.index_size:
            raise CodecError(f"truncated shard: {size} bytes, shorter than its "
                             f"{layout.index_size}-byte index", key=key)
        got = source.get_ranges([RangeRequest(size - layout.index_size, size)])
        if got is None:
            return None
        if memoryview(got[0]).nbytes != layout.index_size:
            raise AppendConflictError("the shard was replaced while it was read", key=key)
        return self._decode_index(got[0], layout, key)

    def _parse_whole(self, data: Any, layout: ShardLayout,
                     key: str | None) -> tuple[memoryview, ShardIndex]:
        """The shard as a byte view and its checked index."""
        view = memoryview(data).cast("B")
        size = layout.index_size
        if view.nbytes < size:
            raise CodecError(f"truncated shard: {view.nbytes} bytes, shorter than its "
                             f"{size}-byte index", key=key)
        raw = view[:size] if self.index_location == "start" else view[view.nbytes - size:]
        index = self._decode_index(raw, layout, key)
        try:
            index.check_bounds(view.nbytes)
        except CodecError as e:
            if key is None:
                raise
            raise CodecError(str(e), key=key) from e
        return view, index

    def _assemble(self, layout: ShardLayout,
                  parts: Iterable[tuple[int, Any]]) -> bytes | None:
        """The shard holding ``parts`` (flat id, encoded bytes or None), laid out in the
        given order; None when nothing is stored."""
        stored = [(i, p) for i, p in parts if p is not None]
        if not stored:
            return None
        ids = np.fromiter((i for i, _ in stored), dtype=np.intp, count=len(stored))
        lengths = np.fromiter((memoryview(p).nbytes for _, p in stored), dtype=np.uint64,
                              count=len(stored))
        # offsets are absolute: with the index first, chunks start after it
        offsets = np.cumsum(lengths, dtype=np.uint64) - lengths + np.uint64(self._base(layout))
        index = ShardIndex.empty(layout.nchunks)
        index.entries[ids, 0] = offsets
        index.entries[ids, 1] = lengths
        return self._join(layout, index, [p for _, p in stored])

    def _base(self, layout: ShardLayout) -> int:
        """Where the first inner chunk starts: after the index when it comes first."""
        return layout.index_size if self.index_location == "start" else 0

    def _join(self, layout: ShardLayout, index: ShardIndex, pieces: list[Any]) -> bytes:
        """The shard: ``pieces`` (the inner chunks' bytes as ``index`` places them) and the
        encoded index, where ``index_location`` puts it."""
        index_bytes = self.index_codecs.encode(index.to_array(layout), layout.index_spec)
        if index_bytes is None or memoryview(index_bytes).nbytes != layout.index_size:
            raise CodecError("index_codecs did not produce the fixed index size "
                             f"{layout.index_size}")
        if self.index_location == "start":
            return b"".join([index_bytes, *pieces])
        return b"".join([*pieces, index_bytes])

    def _spliced(self, layout: ShardLayout, index: ShardIndex, view: memoryview,
                 new: dict[int, bytes | None]) -> bytes | None:
        """The stored shard ``view`` with the inner chunks of ``new`` replaced, laid out
        as :meth:`_assemble` lays out every stored chunk (:mod:`.sharding.splice`)."""
        done = splice(layout, index, view, new, self._base(layout))
        return None if done is None else self._join(layout, *done)

    # -- inner chunks --------------------------------------------------------------------

    def _encode_inner(self, block: np.ndarray, spec: ChunkArraySpec) -> bytes | None:
        if not spec.write_empty_chunks and spec.data_type.chunk_is_fill(block, spec.fill_value):
            return None
        return self.codecs.encode(block, spec)

    def _filled(self, shape: tuple[int, ...], spec: ChunkArraySpec) -> np.ndarray:
        return np.full(shape, spec.fill_value, dtype=spec.data_type.numpy_dtype)

    # -- whole shards --------------------------------------------------------------------

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes | None:
        return self.encode_many([chunk], [spec])[0]

    def encode_many(self, chunks: Sequence[np.ndarray], specs: Sequence[ChunkArraySpec],
                    done: Callable[[int, bytes | None], Any] | None = None,
                    parallel: bool | None = None) -> list[bytes | None]:
        """Each whole shard ``chunks[i]`` of ``specs[i]`` encoded, as :meth:`encode` would
        one by one, with the inner chunks of all of them spread over the worker pool
        (:mod:`.sharding.encoder`); ``done(i, data)`` is called with each shard as soon as
        it is assembled, from the thread that finished it."""
        for chunk, spec in zip(chunks, specs):
            self._layout(spec.shape)        # validates the shard shape first
            shape = np.shape(chunk)
            if shape != spec.shape:
                raise CodecError(f"sharding codec got a chunk of shape {shape}, expected "
                                 f"{spec.shape}")
        return encode_shards(self, chunks, specs, done, parallel)

    def decode(self, data: bytes, spec: ChunkArraySpec) -> np.ndarray:
        layout = self._layout(spec.shape)
        view, index = self._parse_whole(data, layout, None)
        inner_spec = self._inner_spec(spec)
        out = self._filled(spec.shape, spec)
        blocks = layout.blocks(out)
        ids = np.flatnonzero(index.present).tolist()

        def work(i: int) -> None:
            start, end = index.range(i)
            blocks[i] = self.codecs.decode(view[start:end], inner_spec)

        map_items(work, ids, worth_threads(len(ids), len(ids) * self._inner_nbytes(spec)))
        return out

    # -- parts of shards -----------------------------------------------------------------

    def decode_partial(self, source: ByteSource, selection: tuple[Any, ...],
                       spec: ChunkArraySpec) -> np.ndarray | None:
        layout = self._layout(spec.shape)
        key = getattr(source, "key", None)
        one = _one_inner_chunk(selection, self.chunk_shape, layout.chunks_per_shard)
        if one is not None:
            return self._decode_inner(source, layout, one, spec, key)
        indexer = OrthogonalIndexer(selection, layout.grid)
        projections = list(indexer)
        out = self._filled(indexer.buffer_shape, spec)
        if not projections:
            return out.reshape(indexer.shape)
        ids = [layout.flat_id(p.chunk_coords) for p in projections]

        if len(set(ids)) == layout.nchunks:
            # every inner chunk is needed: one read of the whole shard beats index + ranges
            data = source.get()
            if data is None:
                return None
            view, index = self._parse_whole(data, layout, key)
            items = [(p, view[slice(*index.range(i))])
                     for p, i in zip(projections, ids) if index.is_present(i)]
        else:
            index = self._read_index(source, layout, key)
            if index is None:
                return None
            wanted = [(p, i) for p, i in zip(projections, ids) if index.is_present(i)]
            got = self._fetch(source, index, [i for _, i in wanted], key)
            if got is None:
                return None
            items = [(p, b) for (p, _), b in zip(wanted, got)]

        inner_spec = self._inner_spec(spec)

        def work(item: tuple[Any, Any]) -> None:
            p, data = item
            chunk = self.codecs.decode(data, inner_spec, key=key)
            out[p.out_selection] = chunk[p.chunk_selection]

        map_items(work, items, worth_threads(len(items), len(items) * self._inner_nbytes(spec)))
        return out.reshape(indexer.shape)

    def _decode_inner(self, source: ByteSource, layout: ShardLayout, flat_id: int,
                      spec: ChunkArraySpec, key: str | None) -> np.ndarray | None:
        """Inner chunk ``flat_id`` of the shard, decoded (the fill value where it is not
        stored); None if the shard is absent. The read of one tile: the index, then that
        chunk's range, without the indexer and output buffer a general selection needs."""
        index = self._read_index(source, layout, key)
        if index is None:
            return None
        if not index.is_present(flat_id):
            return self._filled(self.chunk_shape, spec)
        got = self._fetch(source, index, [flat_id], key)
        if got is None:
            return None
        chunk = self.codecs.decode(got[0], self._inner_spec(spec), key=key)
        # a decoded chunk may be a view of the fetched bytes, which a store may hand out
        # from memory that is only valid inside its read transaction (LMDB's map)
        return chunk if chunk.flags.owndata and chunk.flags.writeable else chunk.copy()

    def _fetch(self, source: ByteSource, index: ShardIndex, ids: list[int],
               key: str | None) -> list[Any] | None:
        """The encoded bytes of inner chunks ``ids`` in ONE get_ranges call; None if the
        shard has gone."""
        if not ids:
            return []
        spans = [index.range(i) for i in ids]
        for i, (start, end) in zip(ids, spans):
            # no stored value reaches past 2**63 bytes: an entry that does is forged or
            # corrupt, and is refused before a store is asked for it (checked on the
            # index's numbers: a RangeRequest would clip them to 2**63 - 1)
            if end > _MAX_VALUE_SIZE:
                raise CodecError(f"shard index entry {i} spans bytes [{start}, {end}), "
                                 f"past any possible shard", key=key)
        ranges = [RangeRequest(start, end) for start, end in spans]
        got = source.get_ranges(ranges)
        if got is None:
            return None
        for i, r, b in zip(ids, ranges, got):
            if memoryview(b).nbytes != r.end - r.start:
                raise CodecError(f"truncated shard: inner chunk {i} spans bytes "
                                 f"[{r.start}, {r.end}) past the end of the shard", key=key)
        return got

    def _old_chunks(self, source: ByteSource, layout: ShardLayout, partly: set[int],
                    touched: set[int], key: str | None) -> tuple[ShardIndex, dict[int, Any]]:
        """The stored index and the encoded bytes of the inner chunks a partial write
        needs: those in ``partly`` (to merge into) and every stored one not ``touched``
        (to copy verbatim)."""
        index = self._read_index(source, layout, key)
        if index is None:
            return ShardIndex.empty(layout.nchunks), {}
        present = index.present
        need = [i for i in np.flatnonzero(present).tolist() if i in partly or i not in touched]
        if not need:
            return index, {}
        if len(need) == int(present.sum()):
            # every stored inner chunk is needed: read the shard whole, index included
            data = source.get()
            if data is None:
                return ShardIndex.empty(layout.nchunks), {}
            view, index = self._parse_whole(data, layout, key)
            return index, {i: view[slice(*index.range(i))]
                           for i in np.flatnonzero(index.present).tolist()}
        got = self._fetch(source, index, need, key)
        if got is None:
            return ShardIndex.empty(layout.nchunks), {}
        return index, dict(zip(need, got))

    def encode_partial(self, source: ByteSource, selection: tuple[Any, ...], value: np.ndarray,
                       spec: ChunkArraySpec
                       ) -> bytes | None | AppendUpdate | RewriteUpdate:
        layout = self._layout(spec.shape)
        key = getattr(source, "key", None)
        indexer = OrthogonalIndexer(selection, layout.grid)
        value = np.asarray(value, dtype=spec.data_type.numpy_dtype)
        if value.shape != indexer.shape:
            try:
                value = np.broadcast_to(value, indexer.shape)
            except ValueError:
                raise ShapeMismatchError(
                    f"value of shape {value.shape} does not fit the selection of shape "
                    f"{indexer.shape}", key=key) from None
        update = _Update(layout, list(indexer), value.reshape(indexer.buffer_shape))
        whole = not update.partly and len(update.touched) == layout.nchunks
        policy = getattr(source, "append_policy", None)
        if policy is None or whole:
            return self._rewrite(source, update, spec, key)
        refusal = append_refusal(self.index_location,
                                 [c.name for c in self.index_codecs.codecs])
        if refusal is not None:
            return RewriteUpdate(self._rewrite(source, update, spec, key), False, refusal)
        return self._append(source, update, spec, key, policy)

    def _merge(self, update: "_Update", old: dict[int, Any], spec: ChunkArraySpec,
               key: str | None) -> dict[int, bytes | None]:
        """The new encoded bytes (None: fill) of every inner chunk ``update`` touches;
        ``old`` holds the stored bytes of those it covers in part."""
        inner_spec = self._inner_spec(spec)
        partly, value = update.partly, update.value

        def merge(item: tuple[Any, int]) -> bytes | None:
            p, i = item
            if i in partly and i in old:
                block = np.array(self.codecs.decode(old[i], inner_spec, key=key), copy=True)
            elif p.is_complete_chunk:
                block = np.empty(self.chunk_shape, dtype=spec.data_type.numpy_dtype)
            else:
                block = self._filled(self.chunk_shape, spec)
            block[p.chunk_selection] = value[p.out_selection]
            return self._encode_inner(block, inner_spec)

        items = list(zip(update.projections, update.ids))
        return dict(zip(update.ids, map_items(
            merge, items, worth_threads(len(items), len(items) * self._inner_nbytes(spec)))))

    def _rewrite(self, source: ByteSource, update: "_Update", spec: ChunkArraySpec,
                 key: str | None) -> bytes | None:
        """The whole new shard: touched inner chunks encoded again, untouched ones copied."""
        layout = update.layout
        covered = len(update.touched) - len(update.partly)    # inner chunks written whole
        if covered == layout.nchunks:
            # the write covers the whole shard: nothing old survives, nothing to read
            index, old = ShardIndex.empty(layout.nchunks), {}
        elif 2 * covered < layout.nchunks:
            # most of the shard is kept (a tile): read it whole in one request, and copy
            # each run of kept inner chunks as one slice
            data = source.get()
            if data is not None:
                view, index = self._parse_whole(data, layout, key)
                old = {i: view[slice(*index.range(i))]
                       for i in update.partly if index.is_present(i)}
                return self._spliced(layout, index, view, self._merge(update, old, spec, key))
            index, old = ShardIndex.empty(layout.nchunks), {}
        else:
            index, old = self._old_chunks(source, layout, update.partly, update.touched, key)
        new = self._merge(update, old, spec, key)
        present = index.present
        parts = []
        for i in layout.write_order.tolist():
            if i in new:
                parts.append((i, new[i]))
            elif present[i]:
                parts.append((i, old[i]))    # untouched: encoded bytes copied verbatim
        return self._assemble(layout, parts)

    def _append(self, source: ByteSource, update: "_Update", spec: ChunkArraySpec,
                key: str | None, policy: Any) -> bytes | None | AppendUpdate | RewriteUpdate:
        """Append the touched inner chunks and a new index (:mod:`.sharding.append`); only
        the inner chunks covered in part are read. Past ``policy.max_garbage`` the shard
        is rewritten densely instead. A shard that does not exist yet is written whole."""
        layout = update.layout
        size = source.size()
        index = None if size is None else self._read_index_at(source, layout, size, key)
        if index is None:
            return self._rewrite(source, update, spec, key)
        try:
            index.check_bounds(size)
        except CodecError as e:
            raise CodecError(f"the shard's index points past its end ({e.message}); nothing "
                             f"was written", key=key) from e
        partly = [i for i in sorted(update.partly) if index.is_present(i)]
        got = self._fetch(source, index, partly, key)
        if got is None:           # erased meanwhile: nothing left to append to
            return self._rewrite(source, update, spec, key)
        new = self._merge(update, dict(zip(partly, got)), spec, key)
        after, parts = appended_index(index, new, size, layout.write_rank)
        if not after.present.any():
            return None           # every inner chunk is the fill value: erase the shard
        new_size = size + sum(memoryview(p).nbytes for p in parts) + layout.index_size
        waste = garbage(after, new_size, layout.index_size)
        if waste > policy.max_garbage * new_size:
            keep = [i for i in np.flatnonzero(after.present).tolist() if i not in new]
            kept = self._fetch(source, index, keep, key)
            if kept is None:
                return self._rewrite(source, update, spec, key)
            stored = dict(zip(keep, kept))
            stored.update((i, b) for i, b in new.items() if b is not None)
            dense = self._assemble(layout, [(i, stored[i]) for i in layout.write_order.tolist()
                                            if i in stored])
            return RewriteUpdate(dense, True, COMPACTION, waste)
        index_bytes = self.index_codecs.encode(after.to_array(layout), layout.index_spec)
        if index_bytes is None or memoryview(index_bytes).nbytes != layout.index_size:
            raise CodecError("index_codecs did not produce the fixed index size "
                             f"{layout.index_size}", key=key)
        return AppendUpdate(b"".join([*parts, index_bytes]), size, waste,
                            max(waste - garbage(index, size, layout.index_size), 0))

    def compact(self, data: bytes, spec: ChunkArraySpec,
                key: str | None = None) -> Compacted | None:
        """The shard with its stored inner chunks' encoded bytes laid out again in write
        order and nothing between them: what a plain rewrite writes. None when the shard
        holds no garbage. The index is verified first (CodecError: nothing to write)."""
        layout = self._layout(spec.shape)
        view, index = self._parse_whole(data, layout, key)
        if garbage(index, view.nbytes, layout.index_size) == 0:
            return None
        dense = self._spliced(layout, index, view, {})
        if dense is None:
            return None
        return Compacted(dense, view.nbytes - len(dense))


def _one_inner_chunk(selection: tuple[Any, ...], chunk_shape: tuple[int, ...],
                     chunks_per_shard: tuple[int, ...]) -> int | None:
    """The flat id of the inner chunk that ``selection`` (a shard's orthogonal selection)
    is exactly, or None: a tile read, the commonest read of a sharded array."""
    if len(selection) != len(chunk_shape):
        return None
    flat = 0
    for item, size, n in zip(selection, chunk_shape, chunks_per_shard):
        if type(item) is not slice or item.step not in (None, 1):
            return None
        start, stop = item.start, item.stop
        if (type(start) is not int or type(stop) is not int or size <= 0
                or stop - start != size or start % size or not 0 <= start // size < n):
            return None
        flat = flat * n + start // size
    return flat


class _Update:
    """One partial write into a shard: its inner chunk projections, their flat ids, those
    it touches and those it covers only in part, and the values."""

    __slots__ = ("layout", "projections", "ids", "touched", "partly", "value")

    def __init__(self, layout: ShardLayout, projections: list[Any], value: np.ndarray) -> None:
        self.layout = layout
        self.projections = projections
        self.ids = [layout.flat_id(p.chunk_coords) for p in projections]
        self.touched = set(self.ids)
        self.partly = {i for p, i in zip(projections, self.ids) if not p.is_complete_chunk}
        self.value = value


register_codec(ShardingCodec)


def _keepable_index(index: ShardIndex) -> tuple[ShardIndex, int]:
    """``index`` as a source keeps it between reads: its own copy (it may outlive the
    bytes it was decoded from: a view of LMDB's map is valid only in its transaction),
    read-only (later reads share it), and its size."""
    entries = index.entries if index.entries.flags.owndata else index.entries.copy()
    entries.flags.writeable = False
    return ShardIndex(entries), entries.nbytes
