"""The codec contract (core spec "Codecs"): array -> array, array -> bytes, bytes -> bytes.

A codec encodes or decodes one chunk. It sees the chunk through a :class:`ChunkArraySpec`
(its codec shape, data type and fill value) and never touches a store: a codec that reads
parts of a value (sharding) gets a :class:`ByteSource` from the array layer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

import numpy as np

from ..stores.byteranges import ByteRequest
from ..metadata.dtypes import DataType
from .bounds import too_big


@dataclass(frozen=True)
class ChunkArraySpec:
    """What a codec knows about the chunk in front of it."""
    shape: tuple[int, ...]
    data_type: DataType
    fill_value: Any
    #: store chunks (and inner chunks of shards) even when every element is the fill value
    write_empty_chunks: bool = False

    def with_shape(self, shape: tuple[int, ...]) -> "ChunkArraySpec":
        return replace(self, shape=tuple(shape))

    def with_data_type(self, data_type: DataType) -> "ChunkArraySpec":
        return replace(self, data_type=data_type)


class AppendPolicy(Protocol):
    """How a codec may update a stored value that ends in an index (a shard): the
    sharding specification's append-only write strategy ("Binary shard format"), where
    changed inner chunks and a new index are appended and what they replace becomes
    garbage. Offered by ``Store.append_policy()`` (the AppendShards storage transformer)
    through :attr:`ByteSource.append_policy`; the hooks count what was done, once the
    store has done it. Thread-safe."""

    #: garbage a value may hold, as a fraction of its size, before an update rewrites it
    #: densely instead of appending (0 <= max_garbage <= 1)
    max_garbage: float

    def appended(self, nbytes: int, garbage_added: int) -> None:
        """An append of ``nbytes`` was stored, turning ``garbage_added`` bytes to garbage."""

    def compacted(self, reclaimed: int) -> None:
        """A value was rewritten densely, ``reclaimed`` bytes of garbage fewer."""

    def fell_back(self, reason: str) -> None:
        """A value was rewritten because it could not be appended to (``reason``)."""

    def retried(self) -> None:
        """An append found the value changed by another writer and was computed again."""


@dataclass(frozen=True, slots=True)
class AppendUpdate:
    """What :meth:`ArrayBytesCodec.encode_partial` returns, under an append policy, to
    extend the stored value instead of replacing it: ``Store.append(key, data,
    expected_size=expected_size)``."""
    data: bytes
    #: the size of the value the update was computed from (a compare-and-append)
    expected_size: int
    #: garbage bytes in the value once ``data`` is appended
    garbage: int
    #: of those, the bytes this update turns into garbage (what it replaces, the old index)
    garbage_added: int


@dataclass(frozen=True, slots=True)
class RewriteUpdate:
    """What :meth:`ArrayBytesCodec.encode_partial` returns, under an append policy, when
    it rewrites the value whole: ``data`` (None: erase the key) because garbage would pass
    the policy's limit (``compaction``, ``reclaimed`` bytes of garbage gone) or because
    the value cannot be appended to (``reason``)."""
    data: bytes | None
    compaction: bool
    reason: str
    reclaimed: int = 0


@dataclass(frozen=True, slots=True)
class Compacted:
    """A value laid out again without garbage (:meth:`ArrayBytesCodec.compact`)."""
    data: bytes
    reclaimed: int


class ByteSource(Protocol):
    """Read access to one stored value, given to codecs that decode parts of it."""

    key: str
    #: the store's append policy for this value, or None to rewrite values whole
    append_policy: AppendPolicy | None

    def get(self) -> bytes | None:
        """The whole value, or None if it is absent."""

    def get_ranges(self, requests: Sequence[ByteRequest]) -> list[bytes] | None:
        """The bytes of each request (near requests may be read as one), or None if the
        value is absent."""

    def size(self) -> int | None:
        """The size of the value in bytes, or None if it is absent."""

    def remembered(self, tag: Hashable, compute: Callable[[], Any],
                   keepable: Callable[[Any], tuple[Any, int]]) -> Any:
        """``compute()`` (something derived from the value, such as a shard's decoded
        index; None if the value is absent), or its result from an earlier call with
        the same ``tag`` if the source knows the value has not changed since. A result
        the source keeps is first made fit to outlive the read (``keepable(result)``:
        that form, and its size in bytes) and returned in that form. What is returned
        may be shared: the caller must not change it."""


class Codec(ABC):
    """Base of all codecs. Subclasses set ``name`` (exactly as the spec names it) and
    derive from one of the three kinds below."""

    name: ClassVar[str]
    kind: ClassVar[str]

    @classmethod
    @abstractmethod
    def from_config(cls, configuration: dict[str, Any]) -> "Codec":
        """Build from the ``configuration`` object; MetadataError on anything invalid."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The full object form: ``{"name": ..., "configuration": {...}}``."""

    def evolve(self, spec: ChunkArraySpec) -> "Codec":
        """This codec with defaults that depend on the chunk filled in (blosc typesize,
        ...). Called once when an array is created or opened."""
        return self

    def validate(self, spec: ChunkArraySpec) -> None:
        """Raise MetadataError if this codec cannot process chunks described by ``spec``."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_json() == self.to_json()

    def __hash__(self) -> int:
        return hash(repr(self.to_json()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json().get('configuration', {})})"


class ArrayArrayCodec(Codec):
    kind = "array_to_array"

    def resolve_spec(self, spec: ChunkArraySpec) -> ChunkArraySpec:
        """The spec of the array this codec produces from a chunk described by ``spec``."""
        return spec

    @abstractmethod
    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> np.ndarray: ...

    @abstractmethod
    def decode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> np.ndarray:
        """``spec`` describes the decoded (input-side) chunk."""


class ArrayBytesCodec(Codec):
    kind = "array_to_bytes"

    @abstractmethod
    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes | None:
        """Bytes of the chunk, or None when nothing needs storing (an empty shard)."""

    @abstractmethod
    def decode(self, data: bytes, spec: ChunkArraySpec) -> np.ndarray: ...

    def encoded_size(self, spec: ChunkArraySpec) -> int | None:
        """Size of every encoding of a chunk of ``spec``, when it is fixed."""
        return None

    def max_encoded_size(self, spec: ChunkArraySpec) -> int | None:
        """The most bytes any valid encoding of a chunk of ``spec`` has (None: no bound
        is known). Bytes -> bytes decoders above this codec stop there
        (:mod:`kvzarr.codecs.bounds`), so it must never be below a valid encoding."""
        return self.encoded_size(spec)

    #: ``decode_partial`` and ``encode_partial`` are implemented
    supports_partial: ClassVar[bool] = False

    def decode_partial(self, source: ByteSource, selection: tuple[Any, ...],
                       spec: ChunkArraySpec) -> np.ndarray | None:
        """``chunk[selection]`` read from ``source`` without decoding the whole value;
        ``selection`` is a tuple of slices (step >= 1) and 1-D int arrays, one per
        dimension (orthogonal). None if the value is absent."""
        raise NotImplementedError

    def encode_partial(self, source: ByteSource, selection: tuple[Any, ...], value: np.ndarray,
                       spec: ChunkArraySpec
                       ) -> bytes | None | AppendUpdate | RewriteUpdate:
        """The new encoded value after ``chunk[selection] = value``, reusing what it can of
        the stored value; None when the result is empty and the key should be erased.
        With ``source.append_policy`` a codec may return an :class:`AppendUpdate` (or a
        :class:`RewriteUpdate` saying why it did not)."""
        raise NotImplementedError

    def compact(self, data: bytes, spec: ChunkArraySpec,
                key: str | None = None) -> Compacted | None:
        """``data`` laid out again without garbage, or None when it has none (or the
        codec leaves none). Raises CodecError for a value it cannot read."""
        return None


class BytesBytesCodec(Codec):
    kind = "bytes_to_bytes"

    @abstractmethod
    def encode(self, data: bytes, spec: ChunkArraySpec) -> bytes: ...

    @abstractmethod
    def decode(self, data: bytes, spec: ChunkArraySpec) -> bytes: ...

    def decode_bounded(self, data: bytes, spec: ChunkArraySpec,
                       max_size: int | None) -> bytes:
        """:meth:`decode`, producing at most ``max_size`` bytes (None: no bound):
        :class:`DecodedSizeError` past it. The pipeline calls this with the bound of the
        codecs below (:mod:`kvzarr.codecs.bounds`). Codecs that can stop a decoder early
        override it; this default decodes, then checks, so it bounds the answer but not
        the memory spent on the way."""
        out = self.decode(data, spec)
        if max_size is not None and memoryview(out).nbytes > max_size:
            raise too_big(f"{self.name} data", memoryview(out).nbytes, max_size)
        return out

    def encoded_size(self, size: int, spec: ChunkArraySpec) -> int | None:
        """Encoded size for an input of ``size`` bytes, when it is fixed (crc32c: +4)."""
        return None

    def max_encoded_size(self, size: int | None) -> int | None:
        """The most bytes an encoding of at most ``size`` input bytes has, in this
        codec's format whoever wrote it (None: unknown or unbounded). The default is
        "no bound": a codec that knows its worst case says so."""
        return None
