"""Turning ``create_array`` arguments into array metadata, with zarr-python 3's defaults:
automatic chunk shapes of about 1 MiB, the ``bytes`` serializer (``vlen-utf8`` /
``vlen-bytes`` for variable-length types), ``zstd`` level 0 as the compressor, shards
through ``sharding_indexed`` with a ``bytes`` + ``crc32c`` index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .codecs.base import Codec
from .codecs.registry import codec_from_json
from .errors import MetadataError
from .grid import ChunkGrid, FixedDimension, VaryingDimension
from .runtime.memo import BoundedMemo
from .metadata.chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from .metadata.dtypes import DataType, data_type_from_numpy
from .metadata.v3 import MAX_NDIM, ArrayMetadata, check_geometry

_TARGET_CHUNK_BYTES = 1 << 20
_DEFAULT_KEY_ENCODING = ChunkKeyEncoding("default", "/")


def guess_chunks(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Chunk shape of about 1 MiB, halving the largest dimension first (as zarr-python)."""
    if not shape:
        return ()
    chunks = [max(1, n) for n in shape]
    while math.prod(chunks) * itemsize > _TARGET_CHUNK_BYTES and max(chunks) > 1:
        i = int(np.argmax(chunks))
        chunks[i] = -(-chunks[i] // 2)
    return tuple(chunks)


def _as_codec(obj: Any, field: str) -> Codec:
    if isinstance(obj, Codec):
        return obj
    if isinstance(obj, (dict, str)):
        codec = codec_from_json(obj, field)
        if codec is None:
            raise MetadataError(f"codec {obj!r} would be ignored", field=field)
        return codec
    codec_id = getattr(obj, "codec_id", None)
    if codec_id is not None:  # a numcodecs codec object
        config = {k: v for k, v in obj.get_config().items() if k != "id"}
        return _as_codec({"name": f"numcodecs.{codec_id}", "configuration": config}, field)
    raise MetadataError(f"not a codec: {obj!r}", field=field)


def _codec_list(obj: Any, field: str) -> list[Codec]:
    if obj is None:
        return []
    if isinstance(obj, (list, tuple)):
        return [_as_codec(o, f"{field}[{i}]") for i, o in enumerate(obj)]
    return [_as_codec(obj, field)]


_DEFAULT_CODECS: dict[str, tuple[dict[str, Any], str]] = {
    "vlen-utf8": ({"name": "vlen-utf8", "configuration": {}}, "serializer"),
    "vlen-bytes": ({"name": "vlen-bytes", "configuration": {}}, "serializer"),
    "bytes-little": ({"name": "bytes", "configuration": {"endian": "little"}}, "serializer"),
    "bytes": ({"name": "bytes"}, "serializer"),
    "zstd": ({"name": "zstd", "configuration": {"level": 0, "checksum": False}},
             "compressors"),
}
#: the default codecs, each made once: codecs are immutable, and arrays sharing codec
#: objects share their evolved pipeline too (array.build_pipeline)
_DEFAULTS: dict[str, Codec] = {}


def _default_codec(key: str) -> Codec:
    codec = _DEFAULTS.get(key)
    if codec is None:
        codec = _DEFAULTS[key] = _as_codec(*_DEFAULT_CODECS[key])
    return codec


def default_serializer(data_type: DataType) -> Codec:
    if data_type.is_variable_length:
        return _default_codec("vlen-utf8" if data_type.name == "string" else "vlen-bytes")
    if data_type.has_endianness and (data_type.itemsize or 0) > 1:
        return _default_codec("bytes-little")
    return _default_codec("bytes")


def default_compressors() -> list[Codec]:
    return [_default_codec("zstd")]


#: (type, dtype as given) -> DataType; data types are immutable
_DATA_TYPES = BoundedMemo(256)


def _data_type(dtype: Any) -> DataType:
    try:
        key = (type(dtype), dtype)
        found = _DATA_TYPES.get(key)
    except TypeError:   # unhashable: an extension data type object
        return data_type_from_numpy(dtype)
    if found is None:
        found = _DATA_TYPES.keep(key, data_type_from_numpy(dtype))
    return found


def _key_encoding(given: Any) -> ChunkKeyEncoding:
    """A ``chunk_key_encoding`` argument as zarr-python's ``create_array`` takes it: a
    ChunkKeyEncoding, its metadata form (``{"name": "v2", "configuration":
    {"separator": "."}}``) or zarr-python's short form (``{"name": "v2", "separator":
    "."}``)."""
    if isinstance(given, ChunkKeyEncoding):
        return given
    if isinstance(given, dict) and "separator" in given and "configuration" not in given:
        given = {"name": given.get("name"),
                 "configuration": {"separator": given["separator"]},
                 **{k: v for k, v in given.items() if k not in ("name", "separator")}}
    return parse_chunk_key_encoding(given)


def build_grid(shape: tuple[int, ...], chunks: Any, itemsize: int
               ) -> tuple[ChunkGrid, str]:
    """The chunk grid for ``chunks``: "auto", an int, a tuple of ints (regular) or a list
    with lists of edges (rectilinear). The edges must cover the extent; they may pass it,
    even by whole chunks that lie outside the array, as the rectilinear grid allows
    (zarr-extensions ``chunk-grids/rectilinear``: the edges of a dimension sum to at least
    its length). Cells past the extent are never addressed, and the edges are kept, so
    a later resize within their sum reuses them."""
    if chunks is None or (isinstance(chunks, str) and chunks == "auto"):
        chunks = guess_chunks(shape, itemsize)
    if isinstance(chunks, (int, np.integer)):
        chunks = (int(chunks),) * len(shape)
    if (type(chunks) is tuple and len(chunks) == len(shape)
            and all(type(c) is int and c >= 1 for c in chunks)):
        # the common case, regular chunks given as a tuple of ints
        return ChunkGrid(tuple(FixedDimension(c, n) for c, n in zip(chunks, shape))), "regular"
    chunks = list(chunks)
    if len(chunks) != len(shape):
        raise MetadataError(f"chunks {chunks} do not match the array's {len(shape)} dimensions",
                            field="chunks")
    nested = any(not isinstance(c, (int, np.integer)) for c in chunks)
    for i, (c, n) in enumerate(zip(chunks, shape)):
        if isinstance(c, (int, np.integer)):
            if c < 1:
                raise MetadataError(f"chunk size {c} in dimension {i} must be >= 1",
                                    field="chunks")
        else:
            edges = [int(e) for e in c]
            if sum(edges) < n:
                raise MetadataError(
                    f"chunk edges {edges} of dimension {i} sum to {sum(edges)}, less than "
                    f"the extent {n}", field="chunks")
    grid = ChunkGrid.from_sizes(shape, chunks)
    name = "rectilinear" if nested and any(isinstance(d, VaryingDimension)
                                           for d in grid.dimensions) else "regular"
    return grid, name


def build_array_metadata(
        *, shape: Any, dtype: Any, chunks: Any = "auto", shards: Any = None,
        fill_value: Any = None, filters: Any = None, compressors: Any = "auto",
        serializer: Any = "auto", codecs: Any = None, dimension_names: Any = None,
        attributes: dict[str, Any] | None = None, chunk_key_encoding: Any = None
) -> ArrayMetadata:
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise MetadataError(f"negative extent in shape {shape}", field="shape")
    if len(shape) > MAX_NDIM:
        raise MetadataError(f"the array has {len(shape)} dimensions, more than the "
                            f"{MAX_NDIM} numpy supports", field="shape")
    data_type = _data_type("float64" if dtype is None else dtype)
    fill = data_type.coerce_fill(fill_value)
    itemsize = data_type.itemsize or 16

    if codecs is not None:
        codec_list = _codec_list(codecs, "codecs")
        outer_chunks = chunks
        if shards is not None:
            raise MetadataError("give shards through the codecs list when codecs= is used",
                                field="shards")
    else:
        ser = default_serializer(data_type) if (isinstance(serializer, str)
                                                and serializer == "auto") \
            else _as_codec(serializer, "serializer")
        comps = default_compressors() if (isinstance(compressors, str)
                                          and compressors == "auto") \
            else _codec_list(compressors, "compressors")
        filt = [] if (filters is None or (isinstance(filters, str) and filters == "auto")) \
            else _codec_list(filters, "filters")
        inner = [*filt, ser, *comps]
        if shards is None:
            codec_list, outer_chunks = inner, chunks
        else:
            if isinstance(chunks, str) or chunks is None:
                raise MetadataError("sharded arrays need an explicit inner chunk shape",
                                    field="chunks")
            inner_chunks = [int(c) for c in chunks]
            sharding = _as_codec({"name": "sharding_indexed", "configuration": {
                "chunk_shape": inner_chunks,
                "codecs": [c.to_json() for c in inner],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}],
                "index_location": "end"}}, "shards")
            codec_list, outer_chunks = [sharding], shards

    grid, grid_name = build_grid(shape, outer_chunks, itemsize)
    check_geometry(shape, grid, data_type)
    cke = (_DEFAULT_KEY_ENCODING if chunk_key_encoding is None
           else _key_encoding(chunk_key_encoding))
    if dimension_names is not None:
        dimension_names = tuple(dimension_names)
        if len(dimension_names) != len(shape):
            raise MetadataError(f"{len(dimension_names)} dimension names for "
                                f"{len(shape)} dimensions", field="dimension_names")
    return ArrayMetadata(
        shape=shape, data_type=data_type, chunk_grid=grid, chunk_grid_name=grid_name,
        chunk_key_encoding=cke, fill_value=fill, codecs=tuple(codec_list),
        attributes=dict(attributes or {}), dimension_names=dimension_names)


def build_v2_metadata(
        *, shape: Any, dtype: Any, chunks: Any = "auto", shards: Any = None,
        fill_value: Any = None, filters: Any = None, compressors: Any = "auto",
        serializer: Any = "auto", codecs: Any = None, dimension_names: Any = None,
        attributes: dict[str, Any] | None = None, chunk_key_encoding: Any = None,
        order: str = "C") -> ArrayMetadata:
    """The metadata of a new Zarr v2 array from :func:`build_array_metadata`'s
    arguments, as zarr-python 3's ``create_array(..., zarr_format=2)`` takes them:
    ``compressors`` is one numcodecs codec (or its config dict, or None), ``filters``
    numcodecs codecs, ``chunk_key_encoding`` only ``{"name": "v2", "separator": ...}``
    (``"."`` by default). What v2 cannot store (shards, a serializer, a v3 codec list,
    dimension names) is refused with MetadataError naming the argument."""
    from .metadata.v2 import build_v2_array_metadata
    for name, value, unset in (("shards", shards, None), ("serializer", serializer, "auto"),
                               ("codecs", codecs, None),
                               ("dimension_names", dimension_names, None)):
        if value is not unset and not (isinstance(value, str) and value == unset):
            raise MetadataError(f"Zarr v2 arrays have no {name}", field=name,
                                hint="create a Zarr v3 array (zarr_format=3) for it")
    separator = "."
    if chunk_key_encoding is not None:
        cke = _key_encoding(chunk_key_encoding)
        if cke.name != "v2":
            raise MetadataError("a Zarr v2 array's chunk keys are the v2 encoding",
                                field="chunk_key_encoding")
        separator = cke.separator
    if isinstance(compressors, (list, tuple)):
        if len(compressors) > 1:
            raise MetadataError("a Zarr v2 array has at most one compressor",
                                field="compressors")
        compressors = compressors[0] if compressors else None
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(
        int(n) for n in shape)
    data_type = _data_type("float64" if dtype is None else dtype)
    if isinstance(chunks, str) and chunks == "auto":
        chunks = guess_chunks(shape, data_type.itemsize or 16)
    # no fill value given: the data type's default, as zarr-python 3 writes it (a
    # ``null`` fill is written only when asked for, which v2 creation cannot tell
    # from "not given": kvzarr never writes one)
    fill = {} if fill_value is None else {"fill_value": fill_value}
    return build_v2_array_metadata(
        shape=shape, dtype=dtype if dtype is not None else "float64", chunks=chunks,
        order=order, filters=filters,
        compressor="default" if isinstance(compressors, str) and compressors == "auto"
        else compressors, dimension_separator=separator, attributes=attributes, **fill)
