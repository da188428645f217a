"""v2 -> v3 metadata: the ``zarr.json`` of a v2 array that reads the SAME chunk bytes, so a
migration writes documents and copies no chunk.

The v3 array keeps the chunk keys through the ``v2`` chunk key encoding with the
array's ``dimension_separator`` (core spec "Chunk key encoding", ``v2``). Its codecs
(Zarr v3 spec "Codecs"; zarr-python 3's ``migrate_v3`` for the names it uses):

* ``order: "F"`` -> ``transpose`` with the axes reversed, first;
* numcodecs filters -> ``numcodecs.<id>`` with the same configuration;
* ``|O`` + vlen-utf8 / vlen-bytes -> the ``string`` / ``bytes`` data type and the
  ``vlen-utf8`` / ``vlen-bytes`` codec (the framing is numcodecs' own), where zarr-python
  3's ``migrate v3`` gives up;
* ``bytes`` with the byte order of what the last filter hands on;
* compressor blosc -> core ``blosc`` with ``typesize`` the item size Blosc saw, and the
  shuffle named; ``shuffle: -1`` (numcodecs' automatic shuffle, which ``migrate v3``
  refuses) becomes what numcodecs chose when it wrote (bitshuffle for one-byte items,
  else shuffle). Decoding never depends on this choice — Blosc records the shuffle of
  every chunk in the chunk's own header — and new chunks are then written as
  zarr-python 2 would have written them;
* compressor zstd -> core ``zstd`` (same frames as numcodecs' Zstd); gzip -> core ``gzip``
  (numcodecs' GZip writes an RFC 1952 member, which is what core gzip reads; new chunks
  differ only in the header's modification time, which numcodecs sets to the clock);
  anything else -> ``numcodecs.<id>`` (zlib is an RFC 1950 stream, never ``gzip``);
* ``fill_value: null`` -> the data type's default (zero, ``""``, NaT for datetimes),
  which is what zarr-python 3 reads for a missing chunk of the v2 array.

Each choice that is not a plain renaming comes back as one human-readable note.
"""

from __future__ import annotations

import json
from typing import Any

from ...codecs.base import ChunkArraySpec, Codec
from ...codecs.gzip import GzipCodec
from ...codecs.pipeline import CodecPipeline
from ...codecs.zstd import ZstdCodec
from ...errors import MetadataError
from ..v3 import ArrayMetadata, GroupMetadata
from .codecs import AUTOSHUFFLE, build_codecs, codec_config
from .documents import V2ArrayLegacy


def _legacy(metadata: ArrayMetadata) -> V2ArrayLegacy:
    if metadata.zarr_format != 2 or not isinstance(metadata.legacy, V2ArrayLegacy):
        raise MetadataError("not the metadata of a v2 array", field="zarr_format")
    return metadata.legacy


def _core_compressor(compressor: dict[str, Any]) -> Codec | None:
    """The core v3 codec that reads and writes exactly what numcodecs' codec does."""
    codec_id, config = codec_config(compressor, "compressor")
    if codec_id == "zstd" and set(config) <= {"level", "checksum"}:
        return ZstdCodec(level=config.get("level", 1), checksum=config.get("checksum", False))
    if codec_id == "gzip" and set(config) <= {"level"}:
        return GzipCodec(level=config.get("level", 5))
    return None


def v2_to_v3(metadata: ArrayMetadata) -> tuple[ArrayMetadata, list[str]]:
    """The v3 metadata reading the same chunks as the v2 array ``metadata`` (from
    :func:`~kvzarr.metadata.v2.parse_v2_array`), and one note per choice made."""
    legacy = _legacy(metadata)
    notes: list[str] = []
    ndim = len(metadata.shape)
    codecs = list(build_codecs(legacy.dtype, legacy.order, legacy.filters or None,
                               legacy.compressor, ndim))
    if legacy.order == "F" and ndim > 1:
        notes.append(f"order F -> transpose codec {list(range(ndim - 1, -1, -1))}")
    elif legacy.order == "F":
        notes.append("order F on a one-dimensional array: no transpose needed")
    if legacy.dtype.object_codec is not None:
        notes.append(f"dtype |O with {legacy.dtype.object_codec} -> data type "
                     f"{metadata.data_type.name} with the {legacy.dtype.object_codec} codec")
    stored = legacy.dtype.stored
    if stored.kind == "S":
        notes.append(f"dtype {stored.str} -> data type {metadata.data_type.to_json()}")
    elif stored.kind == "V" and stored.fields is None:
        notes.append(f"dtype {stored.str} -> raw data type {metadata.data_type.name} "
                     "(the core spec's name; zarr-python 3 calls it raw_bytes)")
    elif stored.fields is not None:
        notes.append("structured dtype -> data type struct (read by zarr-python >= 3.2)")
    for i, doc in enumerate(legacy.filters or ()):
        codec_id, _ = codec_config(doc, f"filters[{i}]")
        if codec_id != legacy.dtype.object_codec:
            notes.append(f"filter {codec_id} -> numcodecs.{codec_id}")
    compressor = legacy.compressor
    if compressor is not None:
        codec_id, config = codec_config(compressor, "compressor")
        core = _core_compressor(compressor)
        if core is not None:
            codecs[-1] = core
            notes.append(f"compressor {codec_id} -> core {core.name} codec")
        elif codec_id == "blosc":
            blosc = codecs[-1]
            if config.get("shuffle", 1) == AUTOSHUFFLE:
                notes.append(
                    f"blosc shuffle -1 (automatic) -> {blosc.shuffle}, what numcodecs "
                    f"chose for {blosc.typesize}-byte items (decoding reads the shuffle "
                    "from each chunk's header, so existing chunks read the same)")
            notes.append(f"compressor blosc -> core blosc codec (typesize {blosc.typesize})")
        else:
            notes.append(f"compressor {codec_id} -> numcodecs.{codec_id}")
    if legacy.fill_is_null:
        notes.append("fill_value null -> " + json.dumps(
            metadata.data_type.fill_to_json(metadata.fill_value)))
    sep = metadata.chunk_key_encoding.separator
    notes.append(f"chunk keys kept: chunk key encoding v2 with separator {sep!r}")
    # fill the chunk-dependent defaults (numcodecs shuffle elementsize, ...) and drop the
    # endian of one-byte types, so the document is what zarr-python writes
    spec = ChunkArraySpec(tuple(legacy.zarray["chunks"]), metadata.data_type,
                          metadata.fill_value)
    evolved = CodecPipeline(codecs).evolve(spec).codecs
    converted = ArrayMetadata(
        shape=metadata.shape, data_type=metadata.data_type, chunk_grid=metadata.chunk_grid,
        chunk_grid_name="regular", chunk_key_encoding=metadata.chunk_key_encoding,
        fill_value=metadata.fill_value, codecs=tuple(evolved),
        attributes=dict(metadata.attributes))
    return converted, notes


def v2_group_to_v3(metadata: GroupMetadata) -> tuple[GroupMetadata, list[str]]:
    """The v3 metadata of a v2 group (its attributes), and notes (none so far)."""
    if metadata.zarr_format != 2:
        raise MetadataError("not the metadata of a v2 group", field="zarr_format")
    return GroupMetadata(attributes=dict(metadata.attributes)), []
