"""Cell arrays: the Zarr v3 arrays that hold one opaque byte string per spatial chunk
(``vertices``, ``vertex_fragments``, ``vertex_attributes/<name>``, links, ...).

Each is an array of data type ``variable_length_bytes`` whose shape is the level's
chunk grid and whose chunks are 1 x ... x 1 cells (or shards of cells), so one spatial
chunk is one Zarr chunk ``A/c/i/j/k`` with ``(i, j, k) = chunk - origin``. The array
documents are the ones zarr-vectors 0.9.2 writes, member for member.

Encoding and decoding go through kvzarr's codec pipeline, built from the array's own
document, so compressed and sharded cell arrays written by anyone read the same way. The
plain form (the codec list ``[vlen-bytes]``, the default) is framed here directly: a
count of 1, a length and the payload.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..codecs.base import ChunkArraySpec
from ..codecs.pipeline import CodecPipeline
from ..errors import CodecError, MetadataError
from ..metadata.v3 import parse_array_metadata
from .grid import SpatialGrid

_FRAME = struct.Struct("<II")
VLEN_BYTES = {"name": "vlen-bytes", "configuration": {}}
ZSTD = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
BLOSC = {"name": "blosc", "configuration": {"typesize": 4, "cname": "zstd", "clevel": 5,
                                             "shuffle": "bitshuffle", "blocksize": 0}}


def compressor_codecs(compressor: Any) -> list[dict[str, Any]]:
    """The codecs after ``vlen-bytes`` for a writer's ``compressor=``: None, ``"zstd"``,
    ``"blosc"`` (zarr-vectors' two names) or a list of codec documents."""
    if compressor is None:
        return []
    if compressor == "zstd":
        return [ZSTD]
    if compressor == "blosc":
        return [BLOSC]
    if isinstance(compressor, list) and all(isinstance(c, dict) for c in compressor):
        return list(compressor)
    raise MetadataError(f"compressor must be None, 'zstd', 'blosc' or a list of codec "
                        f"documents, got {compressor!r}", field="compressor")


def array_document(grid: SpatialGrid, attributes: dict[str, Any], *,
                   compressor: Any = None, shard_shape: Any = None) -> dict[str, Any]:
    """The ``zarr.json`` of a cell array over ``grid``."""
    ndim = grid.ndim
    inner = [VLEN_BYTES, *compressor_codecs(compressor)]
    if shard_shape is None:
        chunk_shape, codecs = [1] * ndim, inner
    else:
        shard = [int(shard_shape)] * ndim if np.isscalar(shard_shape) else [
            int(s) for s in shard_shape]
        if len(shard) != ndim or min(shard) < 1:
            raise MetadataError(f"shard_shape must be a positive integer or {ndim} of "
                                f"them, got {shard_shape!r}", field="shard_shape")
        chunk_shape = shard
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [1] * ndim, "codecs": inner,
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": "end"}}]
    attrs = dict(attributes)
    if any(grid.origin):
        attrs = {"nonempty_chunks": attrs.pop("nonempty_chunks", []),
                 "chunk_grid_origin": list(grid.origin), **attrs}
    return {"shape": list(grid.shape), "data_type": "variable_length_bytes",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk_shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": "", "codecs": codecs, "attributes": attrs,
            "zarr_format": 3, "node_type": "array", "storage_transformers": []}


class CellArray:
    """Reads and writes the cells of one cell array, from its document."""

    def __init__(self, path: str, doc: dict[str, Any]) -> None:
        self.path = path
        self.doc = doc
        if doc.get("zarr_format") != 3 or doc.get("node_type") != "array":
            raise MetadataError("not a Zarr v3 array document", path=path,
                                field="node_type")
        self.meta = parse_array_metadata(doc)
        if self.meta.data_type.name != "bytes":
            raise MetadataError(f"a cell array holds variable-length bytes, not "
                                f"{doc.get('data_type')!r}", path=path, field="data_type")
        attrs = self.meta.attributes
        self.origin = np.asarray(attrs.get("chunk_grid_origin", [0] * self.meta.ndim),
                                 dtype=np.int64)
        if self.origin.shape != (self.meta.ndim,):
            raise MetadataError("chunk_grid_origin does not have one entry per dimension",
                                path=path, field="chunk_grid_origin")
        self._origin = tuple(int(o) for o in self.origin)
        self._shape = tuple(self.meta.shape)
        self.chunk_shape = self.meta.chunk_grid.chunk_shape
        # framed here directly: one cell per stored chunk, codecs vlen-bytes alone
        self.plain = all(c == 1 for c in self.meta.chunk_grid.chunk_shape) and (
            doc.get("codecs") in ([VLEN_BYTES], [{"name": "vlen-bytes"}]))
        self.pipeline = CodecPipeline(self.meta.codecs)
        self.spec = ChunkArraySpec(tuple(self.chunk_shape), self.meta.data_type,
                                   self.meta.fill_value)
        self._encode_key = self.meta.chunk_key_encoding.encode

    # --- keys -----------------------------------------------------------------------

    def cell_of(self, chunk) -> tuple[int, ...]:
        cell = tuple(int(c) - o for c, o in zip(chunk, self._origin))
        if len(cell) != len(self._shape) or not all(
                0 <= c < n for c, n in zip(cell, self._shape)):
            raise MetadataError(f"chunk {tuple(int(c) for c in chunk)} lies outside the "
                                f"array's grid {self.meta.shape} at origin "
                                f"{tuple(self._origin)}", path=self.path)
        return cell

    def key_of(self, block: tuple[int, ...]) -> str:
        return f"{self.path}/{self._encode_key(block)}"

    def _block(self, cell: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(the stored chunk holding ``cell``, the cell's place inside it)."""
        if self.plain:
            return cell, ()
        block = tuple(c // s for c, s in zip(cell, self.chunk_shape))
        inner = tuple(c % s for c, s in zip(cell, self.chunk_shape))
        return block, inner

    # --- writing --------------------------------------------------------------------

    def encode(self, payloads: Mapping[tuple[int, ...], bytes]) -> list[tuple[str, bytes]]:
        """Key-value pairs storing ``payloads`` (absolute chunk -> bytes). The cells of a
        stored chunk (a shard) not in ``payloads`` are written empty."""
        if self.plain:
            return [(self.key_of(self.cell_of(c)), frame(p)) for c, p in payloads.items()]
        blocks: dict[tuple[int, ...], np.ndarray] = {}
        for chunk, payload in payloads.items():
            block, inner = self._block(self.cell_of(chunk))
            if block not in blocks:
                blocks[block] = _empty_cells(self.spec.shape)
            blocks[block][inner] = bytes(payload)
        out = []
        for block, cells in blocks.items():
            data = self.pipeline.encode(cells, self.spec)
            if data is not None:
                out.append((self.key_of(block), data))
        return out

    # --- reading --------------------------------------------------------------------

    def keys_for(self, chunks: Iterable[tuple[int, ...]]) -> list[str]:
        """The stored keys that hold ``chunks`` (one per shard on a sharded array)."""
        seen: dict[str, None] = {}
        for chunk in chunks:
            seen[self.key_of(self._block(self.cell_of(chunk))[0])] = None
        return list(seen)

    def decode(self, chunks: list[tuple[int, ...]], stored: Mapping[str, Any]
               ) -> list[bytes | memoryview]:
        """Each chunk's payload from the values read for :meth:`keys_for` (a missing
        key reads as an empty cell)."""
        out: list[bytes | memoryview] = []
        decoded: dict[str, np.ndarray] = {}
        for chunk in chunks:
            block, inner = self._block(self.cell_of(chunk))
            key = self.key_of(block)
            value = stored.get(key)
            if value is None:
                out.append(b"")
            elif self.plain:
                out.append(unframe(value, key))
            else:
                if key not in decoded:
                    decoded[key] = self.pipeline.decode(bytes(value), self.spec, key)
                out.append(decoded[key][inner])
        return out


def frame(payload: bytes | memoryview) -> bytes:
    """One cell in the vlen-bytes framing: count 1, length, bytes."""
    return b"".join((_FRAME.pack(1, len(payload)), payload))


def unframe(value: Any, key: str) -> memoryview:
    """The payload of a plain cell, without copying it."""
    view = memoryview(value).cast("B") if not isinstance(value, memoryview) else value
    if len(view) < 8:
        raise CodecError(f"a vlen-bytes cell needs 8 header bytes, got {len(view)}", key=key)
    count, length = _FRAME.unpack_from(view)
    if count != 1 or len(view) != 8 + length:
        raise CodecError(f"a cell holds {count} items of {len(view) - 8} bytes (one "
                         f"item of {length} bytes expected)", key=key)
    return view[8:]


def _empty_cells(shape: tuple[int, ...]) -> np.ndarray:
    cells = np.empty(shape, dtype=object)
    cells.fill(b"")
    return cells
