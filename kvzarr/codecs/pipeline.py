"""The codec pipeline of one array (core spec "Codecs", encoding procedure): zero or more
array -> array codecs, exactly one array -> bytes codec, zero or more bytes -> bytes.

Decoding runs the list backwards. Specs are resolved per call because a rectilinear
grid gives chunks of different codec shapes.

Every bytes -> bytes decoder is bounded (:mod:`.bounds`): it is told the most bytes its
output may have, computed from the array -> bytes codec's :meth:`max_encoded_size` of the
chunk spec and the worst-case growth of the bytes -> bytes codecs below it, once per
distinct spec. A decompression bomb therefore fails after about one chunk's worth of
output, with :class:`DecodedSizeError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CodecError, KvzarrError, MetadataError
from .base import (AppendUpdate, ArrayArrayCodec, ArrayBytesCodec, ByteSource, BytesBytesCodec,
                   ChunkArraySpec, Codec, Compacted, RewriteUpdate)


class CodecPipeline:
    def __init__(self, codecs: Sequence[Codec]) -> None:
        a2a: list[ArrayArrayCodec] = []
        a2b: ArrayBytesCodec | None = None
        b2b: list[BytesBytesCodec] = []
        for codec in codecs:
            # one ABC check and the kind attribute instead of up to three ABC checks
            kind = getattr(codec, "kind", None) if isinstance(codec, Codec) else None
            if kind == ArrayArrayCodec.kind:
                if a2b is not None:
                    raise MetadataError(
                        f"array->array codec {codec.name!r} after the array->bytes codec",
                        field="codecs")
                a2a.append(codec)
            elif kind == ArrayBytesCodec.kind:
                if a2b is not None:
                    raise MetadataError("more than one array->bytes codec", field="codecs")
                a2b = codec
            elif kind == BytesBytesCodec.kind:
                if a2b is None:
                    raise MetadataError(
                        f"bytes->bytes codec {codec.name!r} before the array->bytes codec",
                        field="codecs")
                b2b.append(codec)
            else:
                raise MetadataError(f"not a codec: {codec!r}", field="codecs")
        if a2b is None:
            raise MetadataError("codecs need exactly one array->bytes codec", field="codecs")
        self.array_array = tuple(a2a)
        self.array_bytes = a2b
        self.bytes_bytes = tuple(b2b)
        #: (codec shape, id of the data type) -> (data type, decode bounds): see _bounds
        self._bounds: dict[tuple[Any, int], tuple[Any, tuple[int | None, ...]]] = {}

    @property
    def codecs(self) -> tuple[Codec, ...]:
        return (*self.array_array, self.array_bytes, *self.bytes_bytes)

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.codecs]

    def evolve(self, spec: ChunkArraySpec) -> "CodecPipeline":
        """Fill chunk-dependent defaults and validate every codec against its input."""
        out: list[Codec] = []
        for codec in self.array_array:
            codec = codec.evolve(spec)
            codec.validate(spec)
            out.append(codec)
            spec = codec.resolve_spec(spec)
        a2b = self.array_bytes.evolve(spec)
        a2b.validate(spec)
        out.append(a2b)
        for codec in self.bytes_bytes:
            codec = codec.evolve(spec)
            codec.validate(spec)
            out.append(codec)
        return CodecPipeline(out)

    def _array_bytes_spec(self, spec: ChunkArraySpec) -> ChunkArraySpec:
        for codec in self.array_array:
            spec = codec.resolve_spec(spec)
        return spec

    # -- whole chunks --------------------------------------------------------------------

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes | None:
        """Bytes to store for ``chunk`` (of ``spec.shape``), or None to store nothing."""
        for codec in self.array_array:
            chunk = codec.encode(chunk, spec)
            spec = codec.resolve_spec(spec)
        data = self.array_bytes.encode(chunk, spec)
        if data is None:
            return None
        for codec in self.bytes_bytes:
            data = codec.encode(data, spec)
        return data

    def decode(self, data: bytes, spec: ChunkArraySpec, key: str | None = None) -> np.ndarray:
        """The chunk encoded in ``data``; errors name ``key``."""
        specs = [spec]
        for codec in self.array_array:
            specs.append(codec.resolve_spec(specs[-1]))
        try:
            if self.bytes_bytes:
                spec_ab = specs[-1]
                bounds = self._decode_bounds(spec_ab)
                for codec, bound in zip(reversed(self.bytes_bytes), bounds):
                    data = codec.decode_bounded(data, spec_ab, bound)
            chunk = self.array_bytes.decode(data, specs[-1])
            for codec, s in zip(reversed(self.array_array), reversed(specs[:-1])):
                chunk = codec.decode(chunk, s)
        except KvzarrError as e:
            if e.key is None:
                e.key = key
            raise
        except Exception as e:  # a codec library failing on bad bytes
            raise CodecError(f"could not decode chunk: {e}", key=key) from e
        return chunk

    def _decode_bounds(self, spec: ChunkArraySpec) -> tuple[int | None, ...]:
        """The most bytes each bytes -> bytes decoder may produce for a chunk of ``spec``
        (the array -> bytes codec's input spec), in decoding order (None: no bound)."""
        key = (spec.shape, id(spec.data_type))
        hit = self._bounds.get(key)
        if hit is not None and hit[0] is spec.data_type:
            return hit[1]
        bound = self.array_bytes.max_encoded_size(spec)
        sizes = [bound]
        for codec in self.bytes_bytes[:-1]:
            bound = None if bound is None else codec.max_encoded_size(bound)
            sizes.append(bound)
        bounds = tuple(reversed(sizes))
        if len(self._bounds) >= 64:     # a rectilinear grid with many codec shapes
            self._bounds.clear()
        self._bounds[key] = (spec.data_type, bounds)
        return bounds

    def max_encoded_size(self, spec: ChunkArraySpec) -> int | None:
        """The most bytes any valid encoding of a chunk of ``spec`` has (None: unbounded)."""
        size = self.array_bytes.max_encoded_size(self._array_bytes_spec(spec))
        for codec in self.bytes_bytes:
            if size is None:
                return None
            size = codec.max_encoded_size(size)
        return size

    # -- parts of chunks (sharding) ------------------------------------------------------

    @property
    def supports_partial(self) -> bool:
        """Parts of a chunk can be read and written through byte ranges: the array->bytes
        codec supports it and nothing transforms its bytes or reorders its elements."""
        return (self.array_bytes.supports_partial and not self.bytes_bytes
                and not self.array_array)

    def decode_partial(self, source: ByteSource, selection: tuple[Any, ...],
                       spec: ChunkArraySpec) -> np.ndarray | None:
        return self.array_bytes.decode_partial(source, selection, spec)

    def encode_partial(self, source: ByteSource, selection: tuple[Any, ...], value: np.ndarray,
                       spec: ChunkArraySpec
                       ) -> bytes | None | AppendUpdate | RewriteUpdate:
        return self.array_bytes.encode_partial(source, selection, value, spec)

    def compact(self, data: bytes, spec: ChunkArraySpec,
                key: str | None = None) -> Compacted | None:
        """The stored chunk ``data`` without garbage, or None when there is nothing to
        reclaim: only a pipeline whose chunks are updated in part (a shard with nothing
        around it) can hold garbage."""
        if not self.supports_partial:
            return None
        return self.array_bytes.compact(data, spec, key)

    def encoded_size(self, spec: ChunkArraySpec) -> int | None:
        """Fixed encoded size of every chunk of ``spec``, or None."""
        size = self.array_bytes.encoded_size(self._array_bytes_spec(spec))
        for codec in self.bytes_bytes:
            if size is None:
                return None
            size = codec.encoded_size(size, spec)
        return size
