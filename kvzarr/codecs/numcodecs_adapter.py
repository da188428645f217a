"""``numcodecs.*`` codecs: numcodecs codecs under zarr-python 3's naming convention
(``zarr.codecs.numcodecs``; not a registered Zarr extension).

Configuration: the name is ``"numcodecs." + codec_id`` and the configuration is
numcodecs' ``get_config()`` without ``"id"``, e.g.::

    {"name": "numcodecs.zlib", "configuration": {"level": 3}}
    {"name": "numcodecs.delta", "configuration": {"dtype": ">i2", "astype": ">i2"}}

Promises:

* The codec ids and their kinds are zarr-python 3.1.6's (``zarr.codecs.numcodecs``):
  filters (astype, bitround, delta, fixedscaleoffset, packbits, quantize) are
  array -> array; pcodec and zfpy array -> bytes; compressors, shuffle and checksums
  bytes -> bytes. Any other id, or one whose numcodecs codec is not installed, is
  unknown: :func:`numcodecs_codec_class` returns None and the registry raises
  UnsupportedExtensionError (unless ``must_understand`` is false).
* The configuration is written back exactly as read; :meth:`evolve` fills the members
  zarr-python fills (shuffle ``elementsize``, fixedscaleoffset/quantize ``dtype``, astype
  ``decode_dtype``) the same way.
* Bytes -> bytes decoding is bounded (:mod:`.bounds`) where the format allows it:
  zlib, gzip, bz2 and lzma streams are inflated with an output limit, zstd frames and
  Blosc and LZ4 buffers have the decoded size in their header checked before it is
  allocated, shuffle and checksums never grow their input. Any other codec is decoded,
  then checked (bounded answer, unbounded work).
* Filters see C-contiguous arrays of the dtype their configuration names (cast by value,
  so big-endian dtype strings such as ``">i2"`` work on native arrays) and hand back
  native-endian arrays of the shape the next codec expects.
"""

from __future__ import annotations

import bz2
import lzma
import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numcodecs import registry as _nc_registry
from numcodecs.compat import ensure_bytes
from zlib_ng import zlib_ng

from ..errors import (ChecksumMismatchError, CodecError, KvzarrError, MetadataError,
                      UnsupportedExtensionError)
from ..metadata.dtypes import data_type_from_numpy
from .base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkArraySpec, Codec
from .bounds import compressed_bound, inflate, too_big
from .decoders import gunzip, unblosc, unzstd

PREFIX = "numcodecs."

ARRAY_ARRAY_IDS = frozenset({"astype", "bitround", "delta", "fixedscaleoffset", "packbits",
                             "quantize"})
ARRAY_BYTES_IDS = frozenset({"pcodec", "zfpy"})
CHECKSUM_IDS = frozenset({"adler32", "crc32", "crc32c", "fletcher32", "jenkins_lookup3"})
BYTES_BYTES_IDS = frozenset({"blosc", "bz2", "gzip", "lz4", "lzma", "shuffle", "zlib",
                             "zstd"}) | CHECKSUM_IDS

#: member filled by evolve() when absent -> what fills it
_EVOLVED = {"shuffle": "elementsize", "fixedscaleoffset": "dtype", "quantize": "dtype",
            "astype": "decode_dtype"}
#: the dtype member a filter views its decoded side as, and its encoded side as
#: (categorize is not a zarr-python 3 codec: only Zarr v2 arrays use it, through
#: kvzarr.metadata.v2)
_DECODED_DTYPE = {"delta": "dtype", "fixedscaleoffset": "dtype", "quantize": "dtype",
                  "astype": "decode_dtype", "categorize": "dtype"}
_ENCODED_DTYPE = {"delta": "astype", "fixedscaleoffset": "astype", "quantize": "astype",
                  "astype": "encode_dtype", "categorize": "astype"}


class _NumcodecsCodec(Codec):
    """Shared part of the three kinds; one subclass per codec id is made on demand."""

    codec_id: ClassVar[str]

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        config = dict(configuration or {})
        given_id = config.pop("id", self.codec_id)
        if given_id != self.codec_id:
            raise MetadataError(f"configuration id {given_id!r} does not match "
                                f"{self.name!r}", field=f"{self.name}.id")
        self.configuration = config
        self._codec: Any = None
        probe = dict(config)
        key = _EVOLVED.get(self.codec_id)
        if key is not None and probe.get(key) is None:
            # filled by evolve(); probe the rest with a stand-in value
            probe[key] = 1 if key == "elementsize" else "float64"
        self._probe = _build(self.codec_id, probe, self.name)
        if key is None or config.get(key) is not None:
            self._codec = self._probe

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "_NumcodecsCodec":
        return cls(configuration)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": dict(self.configuration)}

    def evolve(self, spec: ChunkArraySpec) -> "_NumcodecsCodec":
        key = _EVOLVED.get(self.codec_id)
        if key is None or self.configuration.get(key) is not None:
            return self
        npd = spec.data_type.numpy_dtype
        value: Any = npd.itemsize if key == "elementsize" else str(npd)
        return type(self)({**self.configuration, key: value})

    def _numcodec(self, spec: ChunkArraySpec) -> Any:
        if self._codec is None:  # used without evolve(): fill from this chunk's spec
            return self.evolve(spec)._codec
        return self._codec

    def _dtype_member(self, table: dict[str, str]) -> np.dtype | None:
        key = table.get(self.codec_id)
        value = self.configuration.get(key) if key else None
        if value is None and table is _ENCODED_DTYPE:
            value = self.configuration.get(_DECODED_DTYPE.get(self.codec_id, ""))
        if value is None:
            return None
        try:
            return np.dtype(value)
        except (TypeError, ValueError) as e:
            raise MetadataError(f"{self.name}: {key} {value!r} is not a dtype",
                                field=f"{self.name}.{key}") from e

    def __repr__(self) -> str:
        return f"NumcodecsCodec({self.name!r}, {self.configuration!r})"


class NumcodecsArrayArrayCodec(_NumcodecsCodec, ArrayArrayCodec):
    """A numcodecs filter: array -> array."""

    def validate(self, spec: ChunkArraySpec) -> None:
        if self.codec_id == "packbits" and spec.data_type.numpy_dtype != np.dtype(bool):
            raise MetadataError(f"numcodecs.packbits needs bool data, not "
                                f"{spec.data_type.name}", field=self.name)

    def resolve_spec(self, spec: ChunkArraySpec) -> ChunkArraySpec:
        if self.codec_id == "packbits":
            return spec.with_shape((1 + math.ceil(math.prod(spec.shape) / 8),)) \
                .with_data_type(data_type_from_numpy(np.uint8))
        encoded = self._dtype_member(_ENCODED_DTYPE)
        if encoded is not None:
            return spec.with_data_type(data_type_from_numpy(encoded.newbyteorder("=")))
        return spec

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> np.ndarray:
        codec = self._numcodec(spec)
        # filters flatten with order="A" and view their input: give them C order and the
        # dtype (and byte order) they expect
        chunk = np.ascontiguousarray(chunk, dtype=self._dtype_member(_DECODED_DTYPE))
        out_spec = self.resolve_spec(spec)
        try:
            out = np.asarray(codec.encode(chunk))
        except Exception as e:
            raise CodecError(f"{self.name} could not encode the chunk: {e}") from e
        return _native(out, out_spec)

    def decode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> np.ndarray:
        codec = self._numcodec(spec)
        chunk = np.ascontiguousarray(chunk, dtype=self._dtype_member(_ENCODED_DTYPE))
        try:
            out = np.asarray(codec.decode(chunk))
        except Exception as e:
            raise CodecError(f"{self.name} could not decode the chunk: {e}") from e
        return _native(out, spec)


class NumcodecsArrayBytesCodec(_NumcodecsCodec, ArrayBytesCodec):
    """A numcodecs array serialiser (pcodec, zfpy): array -> bytes."""

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes:
        try:
            return ensure_bytes(self._numcodec(spec).encode(np.ascontiguousarray(chunk)))
        except Exception as e:
            raise CodecError(f"{self.name} could not encode the chunk: {e}") from e

    def decode(self, data: bytes, spec: ChunkArraySpec) -> np.ndarray:
        try:
            out = np.asarray(self._numcodec(spec).decode(data))
        except Exception as e:
            raise CodecError(f"{self.name} could not decode the chunk: {e}") from e
        return _native(out, spec)


class NumcodecsBytesBytesCodec(_NumcodecsCodec, BytesBytesCodec):
    """A numcodecs compressor, shuffle or checksum: bytes -> bytes."""

    def encode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        try:
            return ensure_bytes(self._numcodec(spec).encode(data))
        except Exception as e:
            raise CodecError(f"{self.name} could not encode the chunk: {e}") from e

    def decode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        return self.decode_bounded(data, spec, None)

    def decode_bounded(self, data: bytes, spec: ChunkArraySpec,
                       max_size: int | None) -> bytes:
        codec = self._numcodec(spec)
        bounded = _BOUNDED.get(self.codec_id)
        try:
            if bounded is not None:
                out = bounded(codec, data, max_size)
            else:
                if max_size is not None and self.codec_id in _NEVER_GROW:
                    # output no larger than the input: refuse an oversized input first
                    size = memoryview(data).nbytes
                    if size - _SHRINK.get(self.codec_id, 0) > max_size:
                        raise too_big(f"{self.name} data", size, max_size)
                out = ensure_bytes(codec.decode(data))
        except KvzarrError:
            raise
        except Exception as e:
            if self.codec_id in CHECKSUM_IDS:
                raise ChecksumMismatchError(f"{self.name}: {e}") from e
            raise CodecError(f"{self.name} could not decode the chunk: {e}") from e
        if max_size is not None and memoryview(out).nbytes > max_size:
            raise too_big(f"{self.name} data", memoryview(out).nbytes, max_size)
        return out

    def encoded_size(self, size: int, spec: ChunkArraySpec) -> int | None:
        return size + 4 if self.codec_id in CHECKSUM_IDS else None

    def max_encoded_size(self, size: int | None) -> int | None:
        if size is None:
            return None
        if self.codec_id in CHECKSUM_IDS:
            return size + 4
        if self.codec_id == "shuffle":
            return size
        return compressed_bound(size)


def _bounded_zlib(codec: Any, data: Any, max_size: int | None) -> bytes:
    # zlib.decompress: one zlib stream; bytes after it are ignored (inflated by zlib-ng,
    # about 1.2 times as fast as the classic zlib, as the gzip codec is)
    try:
        return inflate(zlib_ng.decompressobj, memoryview(data).cast("B"), max_size,
                       "numcodecs.zlib data", False)
    except zlib_ng.error as e:
        raise CodecError(f"corrupt zlib data: {e}") from e


def _bounded_bz2(codec: Any, data: Any, max_size: int | None) -> bytes:
    # bz2.decompress: concatenated streams
    return inflate(bz2.BZ2Decompressor, memoryview(data).cast("B"), max_size,
                   "numcodecs.bz2 data", True)


def _bounded_lzma(codec: Any, data: Any, max_size: int | None) -> bytes:
    # lzma.decompress(buf, format=..., filters=...): concatenated streams
    def make() -> Any:
        return lzma.LZMADecompressor(format=codec.format, filters=codec.filters)
    return inflate(make, memoryview(data).cast("B"), max_size, "numcodecs.lzma data", True)


def _bounded_lz4(codec: Any, data: Any, max_size: int | None) -> bytes:
    # numcodecs' LZ4 buffers start with the decoded size, a little-endian u32
    view = memoryview(data).cast("B")
    if max_size is not None and view.nbytes >= 4:
        declared = int.from_bytes(view[:4], "little")
        if declared > max_size:
            raise too_big("numcodecs.lz4 data", declared, max_size, declared=True)
    return ensure_bytes(codec.decode(view))


_BOUNDED: dict[str, Callable[[Any, Any, int | None], bytes]] = {
    "zlib": _bounded_zlib,
    "gzip": lambda codec, data, max_size: gunzip(data, max_size),
    "bz2": _bounded_bz2,
    "lzma": _bounded_lzma,
    "lz4": _bounded_lz4,
    "zstd": lambda codec, data, max_size: unzstd(data, max_size),
    "blosc": lambda codec, data, max_size: unblosc(data, max_size),
}
#: codecs whose output is never larger than their input (less the bytes named here)
_NEVER_GROW = CHECKSUM_IDS | {"shuffle"}
_SHRINK = {i: 4 for i in CHECKSUM_IDS}


_CLASSES: dict[str, type[_NumcodecsCodec]] = {}


def numcodecs_codec_class(name: str) -> type[_NumcodecsCodec] | None:
    """The class for ``numcodecs.<id>``, or None when the id is unknown or its numcodecs
    codec is not installed."""
    if name in _CLASSES:
        return _CLASSES[name]
    codec_id = name[len(PREFIX):] if name.startswith(PREFIX) else ""
    if codec_id in ARRAY_ARRAY_IDS:
        base: type[_NumcodecsCodec] = NumcodecsArrayArrayCodec
    elif codec_id in ARRAY_BYTES_IDS:
        base = NumcodecsArrayBytesCodec
    elif codec_id in BYTES_BYTES_IDS:
        base = NumcodecsBytesBytesCodec
    else:
        return None
    if codec_id not in _nc_registry.codec_registry and codec_id not in _nc_registry.entries:
        return None
    cls = type(f"Numcodecs_{codec_id}", (base,), {"name": name, "codec_id": codec_id,
                                                   "__module__": __name__})
    _CLASSES[name] = cls
    return cls


def numcodecs_codec(codec: Any, **configuration: Any) -> _NumcodecsCodec:
    """A kvzarr codec from a numcodecs codec object, or from an id and its configuration:
    ``numcodecs_codec(numcodecs.Zlib(3))`` or ``numcodecs_codec("zlib", level=3)``."""
    if isinstance(codec, str):
        codec_id, config = codec, configuration
    else:
        config = dict(codec.get_config())
        codec_id = config.pop("id")
    cls = numcodecs_codec_class(PREFIX + codec_id)
    if cls is None:
        raise UnsupportedExtensionError(f"unsupported codec {PREFIX + codec_id!r}",
                                        field="codecs")
    return cls(config)


def _build(codec_id: str, config: dict[str, Any], name: str) -> Any:
    try:
        return _nc_registry.get_codec({"id": codec_id, **config})
    except Exception as e:  # numcodecs raises TypeError/ValueError/... for bad arguments
        raise MetadataError(f"invalid {name} configuration {config!r}: {e}",
                            field=f"{name}.configuration") from e


def _native(out: np.ndarray, spec: ChunkArraySpec) -> np.ndarray:
    """``out`` as the native dtype and shape ``spec`` describes (numcodecs flattens).

    zarr-python serialises a filter's output by its own dtype and byte order, so a
    different byte order converts by value; a different type of the same size is a view
    of the same bits."""
    if out.shape != spec.shape:
        if out.size != math.prod(spec.shape):
            raise CodecError(f"numcodecs output has {out.size} elements, expected "
                             f"{math.prod(spec.shape)} for shape {spec.shape}")
        out = out.reshape(spec.shape)
    if not out.dtype.isnative:
        out = out.astype(out.dtype.newbyteorder("="))  # by value, as zarr-python's bytes codec
    native = spec.data_type.numpy_dtype
    if out.dtype != native:
        # bitround hands back the integer view of its floats: keep the bits
        out = out.view(native) if out.dtype.itemsize == native.itemsize else out.astype(native)
    return out
