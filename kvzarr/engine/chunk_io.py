"""Moving chunks between a store and numpy: the read and write engine under Array.

A read fetches every chunk a selection touches in one read transaction (``get_many``),
decodes them in a thread pool (the compressors release the GIL) and copies each
projection into the output. A sharded array reads only the index and the inner chunks a
small selection needs (``decode_partial``). A write does its read-modify-write of every
partly covered chunk inside ONE write transaction, so on a transactional store two
processes writing different elements of one chunk both survive (a store without
transactions that has key locks, a directory, holds ``Store.key_lock`` of the chunks
instead, batch by batch); a chunk that ends up
equal to the fill value is erased instead of stored (unless ``write_empty_chunks``).
Whole chunks are encoded on the worker pool while the store writes those already done
(:mod:`kvzarr.engine.encode_stream`): the write transaction begins once the first are
ready, so its puts overlap the rest of the encoding. On a plain-bytes regular array,
the whole chunks a slice selection covers are laid out in one strided copy
(:mod:`kvzarr.engine.plain_chunks`); whole shards go to the sharding codec's
``encode_many`` together, so their inner chunks share the worker pool as one batch.

Partial shard writes follow the store's append policy (``Store.append_policy()``, asked
once per array): the codec decides, the engine carries out what it returns (set, erase,
or a compare-and-append), computing it again when another writer appended first.
"""

from __future__ import annotations

import math
import operator
import random
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import numpy as np

from ..codecs.base import AppendUpdate, ChunkArraySpec, RewriteUpdate
from ..codecs.bytes import BytesCodec
from ..codecs.pipeline import CodecPipeline
from ..errors import (AppendConflictError, ChunkNotFoundError, CodecError, KvzarrError,
                      UnsupportedOperationError)
from ..indexing import (ChunkProjection, CoordinateIndexer, Indexer, MaskIndexer,
                        prepare_value, to_orthogonal)
from ..metadata.v3 import ArrayMetadata
from ..runtime import workers
from ..runtime.gc_pause import gc_paused
from ..stores.base import Store
from . import encode_stream, plain_chunks
from .byte_source import StoreByteSource
from .encode_stream import EncodeStream
from .config import ArrayConfig
from .index_cache import IndexCache

#: below this many encoded bytes in a batch, threads cost more than they save
_POOL_MIN_BYTES = 512 * 1024
#: raw bytes of chunks encoded before they are handed to the store in one set_many
_WRITE_BATCH_BYTES = 64 * 1024 * 1024
#: raw bytes of whole chunks encoded before a write transaction begins, where they are
#: not streamed (the rest of a bigger write is encoded inside it, batch by batch)
_AHEAD_BYTES = 256 * 1024 * 1024
#: a write's encoded chunks waiting for the store at most (encode_stream.EncodeStream)
_STREAM_WINDOW_BYTES = 64 * 1024 * 1024
#: a box of plain chunks is laid out (plain_chunks.encode_box) in slabs of about this
#: many bytes, each handed to the store while the next is laid out
_BOX_SLAB_BYTES = 16 * 1024 * 1024
#: raw bytes of small chunks one streamed task encodes and hands over together
_STREAM_GROUP_BYTES = 2 * 1024 * 1024
#: plain chunks smaller than this are read in bulk (a box of them, or the chunks points
#: fall in); from a store without transactions the reads are probed (workers.map_probed)
_SMALL_PLAIN_BYTES = 64 * 1024
#: small plain chunks' bytes laid end to end at once, to pick points out of them or copy a
#: box of them into the output
_GATHER_BYTES = 16 * 1024 * 1024
#: reads and writes of at least this many chunks run with the garbage collector paused
_GC_PAUSE_CHUNKS = 64
#: times a partial shard write is computed when other writers keep appending first
APPEND_ATTEMPTS = 6


class ChunkIO:
    """Reads and writes the chunks of one array."""

    def __init__(self, store: Store, path: str, metadata: ArrayMetadata,
                 pipeline: CodecPipeline, config: ArrayConfig) -> None:
        self.store = store
        self.metadata = metadata
        self.pipeline = pipeline
        self.config = config
        self.prefix = f"{path}/" if path else ""
        self.grid = metadata.chunk_grid
        self.dtype = metadata.data_type.numpy_dtype
        self._encode_key = metadata.chunk_key_encoding.encode
        self._spec_cache: dict[tuple[int, ...], ChunkArraySpec] = {}
        self._base_spec = ChunkArraySpec((), metadata.data_type, metadata.fill_value,
                                         config.write_empty_chunks)
        # every chunk of a regular grid has the same codec shape
        self._regular_spec = (self._base_spec.with_shape(self.grid.chunk_shape)
                              if self.grid.is_regular else None)
        # the chunk's bytes are its elements (the bytes codec alone): encoding is a copy
        self._plain = (not pipeline.array_array and not pipeline.bytes_bytes
                       and isinstance(pipeline.array_bytes, BytesCodec))
        #: the numpy dtype of a chunk's stored bytes when a chunk is its elements' bytes
        #: (the bytes codec alone; point reads index into the value), else None
        self.plain_dtype = (pipeline.array_bytes.stored_dtype(metadata.data_type)
                            if self._plain else None)
        self._fill_encoded: bytes | None = None
        #: for plain chunks of a regular grid: (stored dtype, chunk shape, byte size, chunks
        #: per dimension that lie wholly inside the array), so that a chunk's bytes are
        #: viewed without the codec pipeline (_decode_one); else None
        self._plain_chunk = None
        if self._plain and self._regular_spec is not None and self.plain_dtype is not None:
            shape = self._regular_spec.shape
            self._plain_chunk = (self.plain_dtype, shape,
                                 math.prod(shape) * self.plain_dtype.itemsize,
                                 tuple(n // c if c else 0
                                       for n, c in zip(metadata.shape, shape)))
        #: the codec's encoder of many whole shards at once (a sharding codec with nothing
        #: around it), else None: whole shards are then encoded inner chunk by inner
        #: chunk on the pool instead of shard by shard
        self._encode_shards = (getattr(pipeline.array_bytes, "encode_many", None)
                               if pipeline.supports_partial else None)
        #: how partial shard writes update a shard (None: rewrite it)
        self.append_policy = store.append_policy() if pipeline.supports_partial else None
        #: shard indexes kept between reads of parts of shards (None: not sharded, or
        #: the config keeps none)
        self._index_cache = (IndexCache(config.shard_index_cache_bytes)
                             if pipeline.supports_partial and config.shard_index_cache_bytes > 0
                             else None)
        caps = store.capabilities
        #: the store's key lock, held around each write of chunks or shards where no
        #: transaction isolates the read-modify-write (None: the transaction does, or
        #: the store has no lock)
        self._key_lock = store.key_lock if caps.key_locks and not caps.transactional else None

    def key(self, coords: Sequence[int]) -> str:
        return self.prefix + self._encode_key(coords)

    def keys(self, coords: Sequence[Sequence[int]]) -> list[str]:
        """:meth:`key` of each of ``coords``, built a dimension at a time."""
        return self.metadata.chunk_key_encoding.encode_many(coords, self.prefix)

    def stored_chunk_coords(self) -> list[tuple[int, ...]]:
        """Grid coordinates of the chunks present in the store, in key order (keys that
        are not chunk keys of this array, or lie outside its grid, are skipped)."""
        cke = self.metadata.chunk_key_encoding
        grid = self.grid.grid_shape
        ndim = len(grid)
        n = len(self.prefix)
        out = []
        for key in self.store.list_prefix(self.prefix + cke.chunk_prefix):
            coords = cke.decode(key[n:], ndim)
            if coords is not None and all(c < g for c, g in zip(coords, grid)):
                out.append(coords)
        return out

    def spec(self, coords: tuple[int, ...]) -> ChunkArraySpec:
        if self._regular_spec is not None:
            return self._regular_spec
        shape = self.grid.codec_shape(coords)
        spec = self._spec_cache.get(shape)
        if spec is None:
            spec = self._spec_cache[shape] = self._base_spec.with_shape(shape)
        return spec

    def fill_chunk(self, spec: ChunkArraySpec) -> np.ndarray:
        return np.full(spec.shape, self.metadata.fill_value, dtype=self.dtype)

    # -- reading -------------------------------------------------------------------------

    def read(self, indexer: Indexer) -> np.ndarray:
        if indexer.nchunks() < _GC_PAUSE_CHUNKS:
            return self._read(indexer)
        with gc_paused():
            return self._read(indexer)

    def _read(self, indexer: Indexer) -> np.ndarray:
        out = np.empty(indexer.buffer_shape, dtype=self.dtype)
        small = self._plain_chunk is not None and self._plain_chunk[2] < _SMALL_PLAIN_BYTES
        if small and isinstance(indexer, CoordinateIndexer):
            groups = indexer.point_groups()
            if groups is not None and len(groups[0]) > 1:
                self._gather_points(groups, out)
                return out.reshape(indexer.shape)
        box = plain_chunks.find_box(indexer, self._regular_spec.shape) if small else None
        if box is None or math.prod(len(r) for r in box) < 2:
            self._read_projections(list(indexer), out)
            return out.reshape(indexer.shape)
        # Many small plain chunks covered whole: their bytes read end to end into one
        # block and copied out in one strided copy, box slab by box slab; the chunks
        # around the box as usual
        rest = list(indexer.projections_outside(box))
        with self.store.transaction(write=False) if self.store.capabilities.transactional \
                else nullcontext():
            self._read_box(indexer, box, out)
            self._read_projections(rest, out)
        return out.reshape(indexer.shape)

    def _read_box(self, indexer: Indexer, box: list[range], out: np.ndarray) -> None:
        """The chunks of ``box`` (all whole, plain, small) into ``out``, about
        :data:`_GATHER_BYTES` of them at a time."""
        dtype, shape, nbytes, _ = self._plain_chunk
        for slab in plain_chunks.slabs(box, nbytes, _GATHER_BYTES):
            keys = plain_chunks.box_keys(indexer, slab, self.metadata.chunk_key_encoding,
                                         self.prefix)
            plain_chunks.decode_box(out, indexer, slab, shape, dtype, self._plain_block(keys))

    def _plain_block(self, keys: list[str]) -> np.ndarray:
        """The plain chunks of ``keys`` read end to end into one new block of bytes
        (:meth:`Store.read_many_into`), the fill chunk's bytes for a missing one; a chunk
        of the wrong size is a CodecError."""
        nbytes = self._plain_chunk[2]
        block = np.empty(len(keys) * nbytes, dtype=np.uint8)
        sizes = self.store.read_many_into(keys, block, nbytes)
        if sizes.count(nbytes) == len(sizes):
            return block
        for i, (key, size) in enumerate(zip(keys, sizes)):
            if size is None:
                if not self.config.read_missing_chunks:
                    raise ChunkNotFoundError("chunk is missing and read_missing_chunks is "
                                             "off", key=key)
                block[i * nbytes:(i + 1) * nbytes] = np.frombuffer(self._fill_bytes(),
                                                                   dtype=np.uint8)
            elif size != nbytes:
                raise CodecError(f"chunk has {size} bytes, expected {nbytes} for shape "
                                 f"{self._plain_chunk[1]} (truncated or corrupt)", key=key)
        return block

    def _read_projections(self, projections: list[ChunkProjection], out: np.ndarray) -> None:
        """Each of ``projections`` read into ``out``, chunk by chunk: in one read
        transaction where the store has them, on the pool where it has none."""
        if not projections:
            return
        partial = self.pipeline.supports_partial
        whole = [p for p in projections if not partial or p.is_complete_chunk]
        parts = [p for p in projections if partial and not p.is_complete_chunk]
        if len(whole) > 1 and not self.store.capabilities.transactional:
            self._fetch_and_decode(whole, out)
            whole = []
        if len(whole) == 1 and not parts:
            # one value (a tile): a single get is atomic, no transaction needed
            self._decode_one(whole[0], self.store.get(self.key(whole[0].chunk_coords)), out)
            return
        with self.store.transaction(write=False):
            for p in parts:
                self._read_part(p, out)
            if not whole:       # parts of shards only (a tile): nothing more to fetch
                return
            keys = [self.key(p.chunk_coords) for p in whole]
            if self.store.streams_values:
                self._decode_streamed(whole, keys, out)
                return
            # Zero-copy buffers where the store has them (LMDB's map): decoded before the
            # transaction ends, straight into the output.
            values = self.store.get_many_views(keys)
            total = sum(len(v) for v in values if v is not None)
            workers.map_grouped(lambda item: self._decode_one(*item, out),
                                list(zip(whole, values)), parallel=self._parallel(total))

    def _fetch_and_decode(self, whole: list[ChunkProjection], out: np.ndarray) -> None:
        """Fetch and decode ``whole`` chunks of a store with no snapshot to keep (one file
        per chunk): each pool thread fetches and decodes its own, so waiting for the disk
        overlaps with decoding and copying. Except for small plain chunks read from the
        page cache: a read there is a few system calls, each of which hands the GIL
        over, and two threads passing it back and forth read at about 0.6x one thread's
        speed. So the first few such chunks are read here, and the rest go to the pool
        only if those waited for the disk."""
        def fetch(p: ChunkProjection) -> None:
            self._decode_one(p, self.store.get(self.key(p.chunk_coords)), out)
        if self._plain and self._regular_spec is not None \
                and self._nbytes_plain() < _SMALL_PLAIN_BYTES:
            workers.map_probed(fetch, whole)
            return
        workers.map_grouped(fetch, whole, parallel=True)

    def _gather_points(self, groups: tuple[Any, ...], out: np.ndarray) -> None:
        """Points of plain chunks (``a.vindex``, a mask): the chunks' bytes laid end to end
        and every point picked out of them by one numpy index, batch by batch of about
        :data:`_GATHER_BYTES`, instead of a decode and an indexed copy per chunk. One read
        transaction where the store has them (views are copied before it ends)."""
        coords, counts, local, order = groups
        dtype, shape, nbytes, _ = self._plain_chunk
        keys = self.keys(coords)
        bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        per = max(1, _GATHER_BYTES // max(1, nbytes))

        transactional = self.store.capabilities.transactional
        with self.store.transaction(write=False) if transactional else nullcontext():
            for b0 in range(0, len(keys), per):
                b1 = min(len(keys), b0 + per)
                chunks = self._plain_block(keys[b0:b1]).view(dtype).reshape(
                    (b1 - b0,) + shape)
                p, q = bounds[b0], bounds[b1]
                which = np.repeat(np.arange(b1 - b0, dtype=np.intp), counts[b0:b1])
                picked = chunks[(which, *(x[p:q] for x in local))]
                out[slice(p, q) if order is None else order[p:q]] = picked

    def _decode_streamed(self, whole: list[ChunkProjection], keys: list[str],
                         out: np.ndarray) -> None:
        """Decode the values of ``keys`` as the store hands them out one by one, so few
        are held at once. Plain chunks are copied out on the spot; others go to the pool
        in batches of about :data:`_POOL_MIN_BYTES` while the next are fetched, with
        at most two batches per worker waiting."""
        values = self.store.iter_values(keys)
        if self._plain or workers.in_worker():
            for i, value in values:
                self._decode_one(whole[i], value, out)
            return

        def decode(batch: list[tuple[ChunkProjection, Any]]) -> None:
            for p, value in batch:
                self._decode_one(p, value, out)

        pending: deque[Any] = deque()
        batch: list[tuple[ChunkProjection, Any]] = []
        size = 0
        try:
            for i, value in values:
                batch.append((whole[i], value))
                size += 0 if value is None else len(value)
                if size >= _POOL_MIN_BYTES:
                    pending.append(workers.POOL.submit(decode, batch))
                    batch, size = [], 0
                    if len(pending) > 2 * workers.WORKERS:
                        pending.popleft().result()
            decode(batch)
            while pending:
                pending.popleft().result()
        finally:
            workers.drain(pending)   # after a failure: nothing left writing into out

    def _read_part(self, p: ChunkProjection, out: np.ndarray) -> None:
        spec = self.spec(p.chunk_coords)
        key = self.key(p.chunk_coords)
        orth, sub = to_orthogonal(p.chunk_selection, spec.shape)
        block = self.pipeline.decode_partial(
            StoreByteSource(self.store, key, self.config, cache=self._index_cache), orth, spec)
        if block is None:
            self._fill_missing(key, p, out)
        else:
            out[p.out_selection] = block[sub]

    def _fill_missing(self, key: str, p: ChunkProjection, out: np.ndarray) -> None:
        if not self.config.read_missing_chunks:
            raise ChunkNotFoundError("chunk is missing and read_missing_chunks is off", key=key)
        out[p.out_selection] = self.metadata.fill_value

    def _decode_one(self, p: ChunkProjection, data: bytes | None, out: np.ndarray) -> None:
        if data is None:
            self._fill_missing(self.key(p.chunk_coords), p, out)
            return
        plain = self._plain_chunk
        if plain is not None and (
                len(data) if type(data) is bytes else memoryview(data).nbytes) == plain[2]:
            # a plain chunk's bytes are its elements: viewed without the codec pipeline
            # (what it would do, at a third of the calls; many small chunks: W2)
            chunk = np.frombuffer(data, plain[0]).reshape(plain[1])
            if (p.is_complete_chunk and type(p.out_selection) is tuple
                    and len(p.out_selection) == len(plain[1])
                    and all(map(operator.lt, p.chunk_coords, plain[3]))):
                out[p.out_selection] = chunk     # a whole chunk inside the array
            else:
                out[p.out_selection] = chunk[p.chunk_selection]
            return
        try:
            chunk = self.pipeline.decode(data, self.spec(p.chunk_coords))
        except KvzarrError as e:
            e.key = e.key or self.key(p.chunk_coords)   # the key only costs on failure
            raise
        out[p.out_selection] = chunk[p.chunk_selection]

    # -- writing -------------------------------------------------------------------------

    def write(self, indexer: Indexer, value: Any) -> None:
        if indexer.nchunks() < _GC_PAUSE_CHUNKS:
            self._write(indexer, value)
            return
        with gc_paused():
            self._write(indexer, value)

    def _write(self, indexer: Indexer, value: Any) -> None:
        # Validate and convert the value before anything is read or written, so a bad
        # value leaves the store as it was.
        values = prepare_value(value, indexer, self.dtype)
        # Whole chunks go to the store in groups (set_many) when it is transactional or
        # says groups cost it less than a set per chunk; otherwise each encoding thread
        # stores what it encodes (_write_batch_now).
        batched = self.store.capabilities.transactional or self.store.batches_writes
        # Plain-bytes whole chunks of a slice selection: encoded in bulk, box by box.
        box = (plain_chunks.find_box(indexer, self._regular_spec.shape)
               if batched and self._plain and self._regular_spec is not None
               else None)
        if box is None:
            projections = list(indexer)
            boxes: list[list[range]] = []
        else:
            projections = list(indexer.projections_outside(box))
            boxes = list(plain_chunks.slabs(box, self._nbytes_plain(), _BOX_SLAB_BYTES))
        if self._key_lock is not None:
            # (a box holds only chunks of the full chunk shape, none at an edge)
            projections = [self._keeping_past_edge(p, values) for p in projections]
        if not projections and not boxes:
            return
        pointwise = isinstance(indexer, (CoordinateIndexer, MaskIndexer))
        ready: list[tuple[str, Any]] = []
        stream: EncodeStream | None = None
        if batched:
            # Whole chunks do not depend on what is stored: their encoding starts before
            # the write transaction, so the store's writer lock is held only once the
            # first are ready, and writers in other processes compress at the same time.
            budget = _AHEAD_BYTES
            if len(boxes) > 1 and encode_stream.usable():
                stream = self._stream_boxes(indexer, boxes, values)
                boxes = []
            elif boxes:
                ready = self._encode_box(indexer, boxes.pop(0), values)
                budget -= len(ready) * self._nbytes_plain()
            if stream is None:
                stream, projections = self._stream_whole(projections, values)
            if stream is None or self._plain:
                ready_more, projections = self._encode_ahead(projections, values, budget)
                ready += ready_more
        with stream or nullcontext():
            encoded = iter(stream.items()) if stream is not None else iter(())
            ready += next(encoded, [])
            self._write_in_transaction(indexer, values, ready, stream, encoded, boxes,
                                       projections, pointwise)

    def _write_in_transaction(self, indexer: Indexer, values: np.ndarray,
                              ready: list[tuple[str, Any]], stream: EncodeStream | None,
                              encoded: Iterator[list[Any]], boxes: list[list[range]],
                              projections: list[ChunkProjection], pointwise: bool) -> None:
        """Store ``ready``, then what ``encoded`` (``stream``'s items) yields as it
        comes, then the plain ``boxes``, then ``projections`` (read-modify-writes and
        whole chunks encoded here), all in one write transaction."""
        partial = self.pipeline.supports_partial
        with self.store.transaction():
            if stream is not None:
                # the puts come piece by piece: let a store that grows ahead grow once
                self.store.expect_writes(stream.raw_bytes)
            self._store_encoded(ready)
            for items in encoded:
                self._store_encoded(items)
            for slab in boxes:
                self._store_encoded(self._encode_box(indexer, slab, values))
            batch: list[ChunkProjection] = []
            batch_bytes = 0
            for p in projections:
                if partial and not p.is_complete_chunk:
                    if self._key_lock is None:
                        self._write_part(p, values, pointwise)
                    else:
                        with self._key_lock([self.key(p.chunk_coords)]):
                            self._write_part(p, values, pointwise)
                    continue
                batch.append(p)
                batch_bytes += self._nbytes(p)
                if batch_bytes >= _WRITE_BATCH_BYTES:
                    self._write_batch(batch, batch_bytes, values)
                    batch, batch_bytes = [], 0
            if batch:
                self._write_batch(batch, batch_bytes, values)

    def _keeping_past_edge(self, p: ChunkProjection, values: np.ndarray) -> ChunkProjection:
        """``p``, made a read-modify-write when it covers only the part of an edge chunk
        inside this handle's shape. Without transactions another process may have grown
        the array (an append) and written past that edge already: its elements are kept,
        not overwritten with fill values. (Inside a transaction the shape read is the
        shape stored, so nothing lies past the edge.)"""
        if p.is_complete_chunk and \
                values[p.out_selection].size != math.prod(self.spec(p.chunk_coords).shape):
            return replace(p, is_complete_chunk=False)
        return p

    def _nbytes(self, p: ChunkProjection) -> int:
        return math.prod(self.spec(p.chunk_coords).shape) * max(self.dtype.itemsize, 8)

    def _encode_ahead(self, projections: list[ChunkProjection], values: np.ndarray,
                      budget: int) -> tuple[list[tuple[str, bytes | None]],
                                            list[ChunkProjection]]:
        """Encode the whole chunks among ``projections`` (about ``budget`` bytes of
        them); return (key, bytes or None to erase) pairs and the projections left."""
        ahead: list[ChunkProjection] = []
        rest: list[ChunkProjection] = []
        total = 0
        for p in projections:
            if p.is_complete_chunk and total < budget:
                ahead.append(p)
                total += self._nbytes(p)
            else:
                rest.append(p)
        if not ahead:
            return [], rest

        def work(p: ChunkProjection) -> tuple[str, bytes | None]:
            return self._encode_whole(p, values)

        if self._plain and self._regular_spec is not None:
            return self._encode_plain(ahead, values, work), rest
        if self._encode_shards is not None:
            return self._encode_whole_shards(ahead, values), rest
        return workers.map_grouped(work, ahead, parallel=self._parallel(total)), rest

    def _encode_whole(self, p: ChunkProjection, values: np.ndarray
                      ) -> tuple[str, bytes | None]:
        """(key, bytes or None to erase) of the whole chunk ``p`` of ``values``."""
        spec = self.spec(p.chunk_coords)
        return self.key(p.chunk_coords), self._encode_chunk(
            self._merged_chunk(p, spec, "", None, values), spec)

    def _stream_whole(self, projections: list[ChunkProjection], values: np.ndarray
                      ) -> tuple[EncodeStream | None, list[ChunkProjection]]:
        """A stream encoding the whole chunks (or shards) among ``projections`` on the
        pool, and the projections left; (None, projections) where that is not worth a
        thread: plain bytes (a copy), one chunk (nothing to overlap its put with), too
        few bytes for the pool, or a caller that is itself a pool worker."""
        if self._plain or not encode_stream.usable():
            return None, projections
        whole = [p for p in projections if p.is_complete_chunk]
        elements = sum(math.prod(self.spec(p.chunk_coords).shape) for p in whole)
        total = elements * max(self.dtype.itemsize, 8)      # as _nbytes counts them
        if len(whole) < 2 or not self._parallel(total):
            return None, projections
        rest = [p for p in projections if not p.is_complete_chunk]

        if self._encode_shards is not None:
            def produce(emit: Callable[[list[tuple[str, Any]]], None]) -> None:
                self._encode_whole_shards(whole, values, each=lambda k, d: emit([(k, d)]),
                                          parallel=True)
        else:
            # groups of about _STREAM_GROUP_BYTES, and a few per worker at least
            size = max(1, min(_STREAM_GROUP_BYTES // max(1, total // len(whole)),
                              -(-len(whole) // (4 * workers.WORKERS))))
            groups = [whole[i:i + size] for i in range(0, len(whole), size)]

            def produce(emit: Callable[[list[tuple[str, Any]]], None]) -> None:
                workers.map_items(
                    lambda group: emit([self._encode_whole(p, values) for p in group]),
                    groups, parallel=True)
        raw = elements * self.dtype.itemsize
        return EncodeStream(produce, _STREAM_WINDOW_BYTES, raw), rest

    def _stream_boxes(self, indexer: Indexer, slabs: list[list[range]], values: np.ndarray
                      ) -> EncodeStream:
        """A stream laying out the plain chunks of ``slabs`` one slab after another, so
        the store writes each (a copy into LMDB's map, an archive's write) while the
        next is laid out: both are copies of memory that release the GIL."""
        def produce(emit: Callable[[list[tuple[str, Any]]], None]) -> None:
            for slab in slabs:
                emit(self._encode_box(indexer, slab, values))
        raw = sum(math.prod(len(r) for r in slab) for slab in slabs) * self._nbytes_plain()
        return EncodeStream(produce, _STREAM_WINDOW_BYTES, raw)

    def _encode_whole_shards(self, shards: list[ChunkProjection], values: np.ndarray,
                             each: Callable[[str, bytes | None], Any] | None = None,
                             parallel: bool | None = None
                             ) -> list[tuple[str, bytes | None]]:
        """Whole shards encoded in one batch of inner chunks on the pool (the codec's
        ``encode_many``); (key, bytes or None to erase) pairs. ``each``: called with each
        shard's (key, bytes or None) by the thread that finished it, as soon as it is
        ready, and nothing is returned."""
        specs = [self.spec(p.chunk_coords) for p in shards]
        keys = [self.key(p.chunk_coords) for p in shards]
        chunks = [self._merged_chunk(p, s, k, None, values)
                  for p, s, k in zip(shards, specs, keys)]
        done = None
        if each is not None:
            def done(i: int, data: bytes | None) -> None:
                each(keys[i], data)
        encoded = self._encode_shards(chunks, specs, done, parallel)
        return [] if each is not None else list(zip(keys, encoded))

    def _encode_plain(self, ahead: list[ChunkProjection], values: np.ndarray,
                      general: Callable[[ChunkProjection], tuple[str, bytes | None]]
                      ) -> list[tuple[str, bytes | None]]:
        """Whole chunks stored as plain bytes: each is one C-order copy, compared with
        the fill chunk's bytes. The loop is the whole cost of writing many small chunks,
        so it calls nothing it does not need; edge chunks (padded) go the general way."""
        shape = self._regular_spec.shape
        stored, fill = self._plain_layout()
        key = self.key
        out: list[tuple[str, bytes | None]] = []
        append = out.append
        for p in ahead:
            part = values[p.out_selection]
            if part.shape != shape:
                append(general(p))
                continue
            data = part.astype(stored, copy=False).tobytes()
            append((key(p.chunk_coords), None if data == fill else data))
        return out

    def _nbytes_plain(self) -> int:
        return math.prod(self._regular_spec.shape) * self.dtype.itemsize

    def _plain_layout(self) -> tuple[np.dtype, bytes | None]:
        """For plain-bytes chunks: the dtype of the stored bytes, and the fill chunk's
        bytes (None when empty chunks are written too)."""
        return self.plain_dtype, None if self.config.write_empty_chunks else self._fill_bytes()

    def _encode_box(self, indexer: Indexer, box: list[range], values: np.ndarray
                    ) -> list[tuple[str, Any]]:
        stored, fill = self._plain_layout()
        return plain_chunks.encode_box(values, indexer, box, self._regular_spec.shape, stored,
                                       self.metadata.chunk_key_encoding, self.prefix, fill)

    def _store_encoded(self, items: list[tuple[str, Any]]) -> None:
        if not items:
            return
        if self._key_lock is not None:
            # No transactions: the chunks' key locks are held around their stores, so
            # none lands between another writer's read and write of the same chunk (see
            # _write_batch). Whole chunks depend on nothing stored: encoded unlocked.
            with self._key_lock([k for k, _ in items]):
                self._store_encoded_now(items)
        else:
            self._store_encoded_now(items)

    def _store_encoded_now(self, items: list[tuple[str, Any]]) -> None:
        puts = [(k, v) for k, v in items if v is not None]
        erases = [k for k, v in items if v is None]
        if puts:
            self.store.set_many(puts)
        if erases:
            self.store.erase_values(erases)

    def _parallel(self, nbytes: int) -> bool:
        """Whether encoding or decoding ``nbytes`` is worth the thread pool: only with a
        codec that does real work (copying bytes costs less than handing them over)."""
        return nbytes >= _POOL_MIN_BYTES and not self._plain

    def _encode_chunk(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes | None:
        """The bytes to store for ``chunk``, or None if it is the fill value (and empty
        chunks are not written)."""
        if self._plain and spec is self._regular_spec:
            # Plain bytes: compare the encoding with the fill chunk's (a memcmp).
            data = self.pipeline.encode(chunk, spec)
            if not self.config.write_empty_chunks and data == self._fill_bytes():
                return None
            return data
        if (not self.config.write_empty_chunks
                and self.metadata.data_type.chunk_is_fill(chunk, self.metadata.fill_value)):
            return None
        return self.pipeline.encode(chunk, spec)

    def _fill_bytes(self) -> bytes | None:
        if self._fill_encoded is None:
            spec = self._regular_spec
            self._fill_encoded = self.pipeline.encode(self.fill_chunk(spec), spec)
        return self._fill_encoded

    def _write_batch(self, batch: list[ChunkProjection], batch_bytes: int,
                     values: np.ndarray) -> None:
        if self._key_lock is None:
            self._write_batch_now(batch, batch_bytes, values)
            return
        # Whole chunks take the lock too: a set landing between another writer's read and
        # write of the same chunk would be overwritten with the old value plus that
        # writer's part. But a whole chunk depends on nothing stored, so it is encoded
        # without the lock, which is held only around its own set: before the other
        # writer's read or after its write, either order keeps both writes.
        if all(p.is_complete_chunk for p in batch):
            self._write_batch_now(batch, batch_bytes, values, lock_each=True)
            return
        with self._key_lock([self.key(p.chunk_coords) for p in batch]):
            self._write_batch_now(batch, batch_bytes, values)

    def _store_one(self, key: str, data: bytes | None, lock: bool) -> None:
        """Set ``key`` to ``data`` (erase it for None), holding its key lock if ``lock``."""
        if lock:
            with self._key_lock([key]):
                self._store_one(key, data, False)
        elif data is None:
            self.store.erase(key)
        else:
            self.store.set(key, data)

    def _write_batch_now(self, batch: list[ChunkProjection], batch_bytes: int,
                         values: np.ndarray, lock_each: bool = False) -> None:
        """Encode and store ``batch``; ``lock_each`` (whole chunks, no transactions):
        the chunks' key locks are taken around their stores only, not their encoding."""
        need_old = [p for p in batch if not p.is_complete_chunk]
        olds = dict(zip((self.key(p.chunk_coords) for p in need_old),
                        self.store.get_many([self.key(p.chunk_coords) for p in need_old])))

        # Without transactions each pool thread stores what it encodes: disk writes
        # overlap with encoding and no batch of encoded chunks is held in memory; unless
        # the store takes groups for less (batches_writes).
        direct = not (self.store.capabilities.transactional or self.store.batches_writes)
        # (lock_each: the chunks' key locks are not held yet; they are around the store)
        store_encoded = self._store_encoded if lock_each else self._store_encoded_now
        if self._encode_shards is not None and not need_old:
            each = (lambda key, data: self._store_one(key, data, lock_each)) if direct \
                else None
            store_encoded(self._encode_whole_shards(
                batch, values, each=each, parallel=True if direct and len(batch) > 1 else None))
            return

        def work(p: ChunkProjection) -> tuple[str, bytes | None] | None:
            spec = self.spec(p.chunk_coords)
            key = self.key(p.chunk_coords)
            encoded = self._encode_chunk(
                self._merged_chunk(p, spec, key, olds.get(key), values), spec)
            if not direct:
                return key, encoded
            self._store_one(key, encoded, lock_each)
            return None

        results = workers.map_grouped(work, batch, parallel=self._parallel(batch_bytes)
                       or (direct and len(batch) > 1))
        store_encoded([r for r in results if r is not None])

    def _merged_chunk(self, p: ChunkProjection, spec: ChunkArraySpec, key: str,
                      old: bytes | None, values: np.ndarray) -> np.ndarray:
        part = values[p.out_selection]
        if p.is_complete_chunk:
            if part.shape == spec.shape:
                return part  # the selection is the whole chunk: no padding, no copy
            chunk = self.fill_chunk(spec)
        elif old is None:
            chunk = self.fill_chunk(spec)
        else:
            chunk = np.array(self.pipeline.decode(old, spec, key=key), copy=True)
        chunk[p.chunk_selection] = part
        return chunk

    def _write_part(self, p: ChunkProjection, values: np.ndarray, pointwise: bool) -> None:
        """Write part of a shard through the codec, reusing its untouched inner chunks.
        Under an append policy a compare-and-append that finds the shard changed by
        another writer is computed again from what is stored now (a few times, then
        ConflictError); a store that refuses to append to this value gets a rewrite."""
        spec = self.spec(p.chunk_coords)
        key = self.key(p.chunk_coords)
        orth, sub = to_orthogonal(p.chunk_selection, spec.shape)
        part = values[p.out_selection]
        block_shape = _selected_shape(orth, spec.shape)
        policy = self.append_policy
        conflicts = 0
        while True:
            source = StoreByteSource(self.store, key, self.config, policy)
            if not pointwise and part.size == int(np.prod(block_shape)):
                block = np.empty(block_shape, dtype=self.dtype)  # every element is written
            else:
                old = self.pipeline.decode_partial(source, orth, spec)
                block = (np.full(block_shape, self.metadata.fill_value, dtype=self.dtype)
                         if old is None else np.array(old, copy=True))
            block[sub] = part
            try:
                update = self.pipeline.encode_partial(source, orth, block, spec)
                if not isinstance(update, AppendUpdate):
                    self._put(key, update, policy)
                    return
                self.store.append(key, update.data, expected_size=update.expected_size)
            except AppendConflictError:
                if policy is None:
                    raise
                conflicts += 1
                if conflicts == APPEND_ATTEMPTS:
                    raise
                policy.retried()
                # another writer appends to this shard right now: let it finish
                time.sleep(random.uniform(0, 0.002) * conflicts)
                continue
            except UnsupportedOperationError as e:
                policy.fell_back(f"the store cannot append to this value: {e.message}")
                policy = None            # rewrite it, computed from what is stored
                continue
            policy.appended(len(update.data), update.garbage_added)
            return

    def _put(self, key: str, update: Any, policy: Any) -> None:
        """Store what the codec returned: bytes (set), None (erase), or a RewriteUpdate
        (counted by the policy once stored)."""
        data = update.data if isinstance(update, RewriteUpdate) else update
        if data is None:
            self.store.erase(key)
        else:
            self.store.set(key, data)
        if isinstance(update, RewriteUpdate):
            if update.compaction:
                policy.compacted(update.reclaimed)
            else:
                policy.fell_back(update.reason)


def _selected_shape(orth: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for sel, n in zip(orth, shape):
        if isinstance(sel, slice):
            out.append(len(range(*sel.indices(n))))
        else:
            out.append(len(sel))
    return tuple(out)
