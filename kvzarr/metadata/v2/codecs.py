"""The kvzarr codec chain of a v2 array: ``order``, ``filters`` and ``compressor`` as
array -> array, array -> bytes and bytes -> bytes codecs whose decoding gives what
zarr-python reads and whose encoding gives the bytes zarr-python 2 writes (zarr-python 3
writes the same bytes for ``zarr_format=2``).

zarr-python 2 encodes a chunk (Zarr v2 spec, "Chunks") as: the chunk in memory in
``order``; each filter's ``encode`` in turn; the compressor's ``encode`` of the result.
Here that is:

* ``order: "F"`` -> a ``transpose`` codec with the axes reversed, first (the bytes of an
  F-ordered chunk are those of its transpose in C order; one dimension needs none);
* filters that are numcodecs array -> array codecs (delta, fixedscaleoffset, quantize,
  astype, bitround, packbits) -> ``numcodecs.<id>`` codecs, in order;
* an object codec (vlen-utf8, vlen-bytes; zarr-python puts it first among the filters)
  -> the array -> bytes codec; otherwise ``bytes`` in the byte order of what the last
  filter hands on (the dtype's own when there is none);
* filters that work on bytes (shuffle, checksums, compressors used as filters) and the
  compressor -> bytes -> bytes codecs. Blosc is kvzarr's ``blosc`` codec with ``typesize``
  set to the item size numcodecs gives Blosc (the item size of the array the compressor
  receives, 1 after an object codec or a bytes filter) and zarr-python 2's automatic
  shuffle (``-1``) resolved as numcodecs resolves it (bitshuffle for one-byte items,
  else byte shuffle): numcodecs.blosc inside kvzarr sees plain bytes (typesize 1), which
  would change the compressed bytes of every shuffled array. Every other compressor is
  ``numcodecs.<id>`` (:mod:`kvzarr.codecs.numcodecs_adapter`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...codecs.base import ChunkArraySpec, Codec
from ...codecs.blosc import BloscCodec
from ...codecs.bytes import BytesCodec
from ...codecs.numcodecs_adapter import (ARRAY_ARRAY_IDS, ARRAY_BYTES_IDS, BYTES_BYTES_IDS,
                                         numcodecs_codec)
from ...codecs.pipeline import CodecPipeline
from ...codecs.transpose import TransposeCodec
from ...codecs.vlen import VlenBytesCodec, VlenUtf8Codec
from ...errors import KvzarrError, MetadataError, UnsupportedExtensionError
from .dtypes import OBJECT_CODEC_IDS, V2DType

_OBJECT_CODECS = {"vlen-utf8": VlenUtf8Codec, "vlen-bytes": VlenBytesCodec}
#: a filter's member naming the dtype it hands on (numcodecs' constructor arguments)
_ENCODED_DTYPE = {"delta": ("astype", "dtype"), "fixedscaleoffset": ("astype", "dtype"),
                  "quantize": ("astype", "dtype"), "astype": ("encode_dtype",)}
#: blosc shuffle integers (numcodecs.blosc NOSHUFFLE, SHUFFLE, BITSHUFFLE; -1 = AUTOSHUFFLE)
SHUFFLE_NAMES = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
AUTOSHUFFLE = -1


def auto_shuffle(typesize: int) -> str:
    """numcodecs' choice for ``shuffle=-1`` given the item size Blosc sees."""
    return "bitshuffle" if typesize == 1 else "shuffle"


def codec_config(doc: Any, field: str) -> tuple[str, dict[str, Any]]:
    """``(id, configuration without id)`` of a numcodecs codec document."""
    if not isinstance(doc, dict):
        raise MetadataError(f"a codec must be an object with an 'id', got {doc!r}", field=field)
    codec_id = doc.get("id")
    if not isinstance(codec_id, str):
        raise MetadataError(f"codec 'id' must be a string, got {codec_id!r}", field=field)
    return codec_id, {k: v for k, v in doc.items() if k != "id"}


def _numcodecs(codec_id: str, config: dict[str, Any], field: str) -> Codec:
    try:
        return numcodecs_codec(codec_id, **config)
    except KvzarrError as e:
        e.field = field
        raise


def blosc_codec(config: dict[str, Any], typesize: int, field: str) -> BloscCodec:
    """kvzarr's blosc codec encoding exactly as numcodecs' Blosc(**config) does on an
    array of ``typesize``-byte items."""
    extra = set(config) - {"cname", "clevel", "shuffle", "blocksize", "typesize"}
    if extra:
        raise MetadataError(f"unknown blosc members {sorted(extra)}", field=field)
    shuffle = config.get("shuffle", 1)
    if shuffle == AUTOSHUFFLE:
        name = auto_shuffle(typesize)
    elif isinstance(shuffle, int) and not isinstance(shuffle, bool) and shuffle in SHUFFLE_NAMES:
        name = SHUFFLE_NAMES[shuffle]
    else:
        raise MetadataError(f"blosc shuffle must be -1, 0, 1 or 2, got {shuffle!r}",
                            field=f"{field}.shuffle")
    if config.get("typesize") is not None:   # numcodecs >= 0.16 may record it
        typesize = config["typesize"]
    try:
        return BloscCodec(typesize=typesize, cname=config.get("cname", "lz4"),
                          clevel=config.get("clevel", 5), shuffle=name,
                          blocksize=config.get("blocksize", 0))
    except MetadataError as e:
        e.field = field + "." + (e.field or "").split(".")[-1]
        raise


def _encoded_dtype(codec_id: str, config: dict[str, Any], current: np.dtype,
                   field: str) -> np.dtype:
    """The dtype of what a filter hands on, given what it receives."""
    if codec_id == "packbits":
        return np.dtype("u1")
    for key in _ENCODED_DTYPE.get(codec_id, ()):
        if config.get(key) is not None:
            try:
                return np.dtype(config[key])
            except (TypeError, ValueError) as e:
                raise MetadataError(f"{codec_id} {key} {config[key]!r} is not a dtype: {e}",
                                    field=field) from None
    return current


def build_codecs(dtype: V2DType, order: str, filters: list[Any] | None,
                 compressor: Any, ndim: int) -> tuple[Codec, ...]:
    """The codec chain (see the module docstring); MetadataError / UnsupportedExtensionError
    naming ``order``, ``filters[i]`` or ``compressor``."""
    array_array: list[Codec] = []
    bytes_bytes: list[Codec] = []
    if order == "F" and ndim > 1:
        array_array.append(TransposeCodec(tuple(range(ndim - 1, -1, -1))))
    stored = dtype.stored
    typesize = stored.itemsize
    array_bytes: Codec | None = None
    if dtype.object_codec is not None:
        first = filters[0] if filters else None
        if not (isinstance(first, dict) and first.get("id") == dtype.object_codec):
            raise UnsupportedExtensionError(
                f"the object codec {dtype.object_codec!r} must be the first filter",
                field="filters")
        array_bytes = _OBJECT_CODECS[dtype.object_codec]()
        typesize = 1
        rest = list(enumerate(filters))[1:]
    else:
        rest = list(enumerate(filters or ()))
    for i, doc in rest:
        field = f"filters[{i}]"
        codec_id, config = codec_config(doc, field)
        if codec_id in ARRAY_ARRAY_IDS and array_bytes is None and not bytes_bytes:
            array_array.append(_numcodecs(codec_id, config, field))
            stored = _encoded_dtype(codec_id, config, stored, field)
            typesize = stored.itemsize
        elif codec_id in BYTES_BYTES_IDS and codec_id != "blosc":
            bytes_bytes.append(_numcodecs(codec_id, config, field))
            typesize = 1
        elif codec_id == "blosc":
            bytes_bytes.append(blosc_codec(config, typesize, field))
            typesize = 1
        elif codec_id in OBJECT_CODEC_IDS:
            raise UnsupportedExtensionError(
                f"object codec {codec_id!r} on a {dtype.stored} array", field=field)
        elif codec_id in ARRAY_ARRAY_IDS:
            raise UnsupportedExtensionError(
                f"array filter {codec_id!r} after a filter that produces bytes", field=field)
        else:
            raise UnsupportedExtensionError(f"unsupported filter {codec_id!r}", field=field)
    if array_bytes is None:
        endian = None
        if stored.itemsize > 1 and stored.byteorder != "|" and stored.kind not in "SVb":
            endian = "big" if stored.byteorder == ">" or (
                stored.byteorder == "=" and not np.little_endian) else "little"
        if stored is dtype.stored:
            endian = dtype.endian       # structured: the fields' byte order
        array_bytes = BytesCodec(endian)
    if compressor is not None:
        codec_id, config = codec_config(compressor, "compressor")
        if codec_id == "blosc":
            bytes_bytes.append(blosc_codec(config, typesize, "compressor"))
        elif codec_id in BYTES_BYTES_IDS:
            bytes_bytes.append(_numcodecs(codec_id, config, "compressor"))
        elif codec_id in ARRAY_BYTES_IDS:
            raise UnsupportedExtensionError(
                f"compressor {codec_id!r} encodes arrays, not bytes: not supported in v2 "
                "arrays", field="compressor")
        else:
            raise UnsupportedExtensionError(f"unsupported compressor {codec_id!r}",
                                            field="compressor")
    return (*array_array, array_bytes, *bytes_bytes)


def check_codecs(codecs: tuple[Codec, ...], spec: ChunkArraySpec) -> None:
    """MetadataError if the chain cannot encode chunks of ``spec`` (packbits on
    non-bool data, a filter dtype of another size, ...)."""
    CodecPipeline(codecs).evolve(spec)
