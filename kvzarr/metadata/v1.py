"""Zarr v1 array metadata ("Zarr Storage Specification Version 1",
https://zarr-specs.readthedocs.io/en/latest/v1/v1.0.html): the ``meta`` and ``attrs``
documents of one array, read into an :class:`~kvzarr.metadata.v3.ArrayMetadata` with
``zarr_format=1``, and turned into v3 metadata that reads the same chunk bytes.

A v1 store (or prefix) holds exactly one array: ``meta`` (JSON object: ``zarr_format``
1, ``shape``, ``chunks``, ``dtype``, ``compression``, ``compression_opts``,
``fill_value``, ``order``; other members are allowed and mean nothing), ``attrs`` (JSON
object) and one value per chunk under its grid indices joined by ``.`` (``2.4``, and
``7`` in one dimension). Those are exactly the keys of the v3 ``v2`` chunk key encoding
with separator ``.``, which every v3 reader implements; a 0-d array is the exception (its
one chunk key is the empty string, where ``v2`` says ``0``) and is refused.

What a parse promises:

* Every required member is checked for its type and meaning; any failure is a
  :class:`~kvzarr.errors.MetadataError` whose ``key`` is the document's key
  (``<path>/meta`` or ``<path>/attrs``) and whose ``field`` names the member.
* ``dtype`` is a NumPy type string with an explicit byte order (``"<f8"``, ``"|b1"``,
  ``"<M8[ns]"``) or a structured ``descr`` list (:func:`parse_v1_dtype`); it maps to the
  kvzarr data type of that NumPy dtype, the byte order to the ``bytes`` codec's
  ``endian``. Object dtypes are refused: v1 has no object encoding.
* ``compression`` ``"blosc"`` (``compression_opts`` ``{"cname", "clevel", "shuffle"}``)
  becomes the v3 ``blosc`` codec with ``typesize`` the item size, as the v1 writer passed
  it to Blosc (the Blosc 1 container format, so decoding needs nothing else);
  ``"zlib"`` (alias ``"gzip"``, read as zlib like the v1 writer did) and ``"bz2"``
  (``compression_opts`` an integer level) and ``"lzma"`` (``{"format", "check",
  "preset", "filters"}``) become ``numcodecs.zlib`` / ``numcodecs.bz2`` /
  ``numcodecs.lzma``, which call the same standard-library functions the v1 writer
  called; ``"none"`` adds no codec.
* ``fill_value`` ``null`` means "undefined" in v1; it reads as the data type's default
  (zero, false, empty), which is one of the values "undefined" allows.
* ``order`` ``"F"``: see :func:`parse_v1_array` (the spec and the only v1 writer differ).

The ``legacy`` member of the result is a :class:`V1Legacy`: the ``meta`` object as read
and the notes on each choice above, for :func:`v1_to_v3`. Nothing here touches a store.
"""

from __future__ import annotations

import json
import lzma
import re
from dataclasses import dataclass, replace
from typing import Any

import numcodecs.blosc as _nc_blosc
import numpy as np

from ..codecs.blosc import CNAMES, BloscCodec
from ..codecs.bytes import BytesCodec
from ..codecs.numcodecs_adapter import numcodecs_codec
from ..codecs.pipeline import CodecPipeline
from ..codecs.transpose import TransposeCodec
from ..errors import MetadataError
from ..grid import MAX_NDIM, parse_chunk_grid
from .chunk_keys import ChunkKeyEncoding
from .dtypes import DataType, data_type_from_numpy
from .v3 import ArrayMetadata, check_geometry

#: the key of the array metadata document, relative to the array's path
META = "meta"
#: the key of the user attributes document, relative to the array's path
ATTRS = "attrs"

#: ``compression`` values read, and the canonical name each stands for (the v1 writer
#: accepted ``gzip`` as another name of its zlib compressor: zlib framing, not gzip;
#: it also read JSON null as "none")
COMPRESSIONS = {"blosc": "blosc", "zlib": "zlib", "gzip": "zlib", "bz2": "bz2",
                "lzma": "lzma", "none": "none"}

#: v1 chunk keys: grid indices joined by "." (``v2`` encoding, same keys for ndim >= 1)
V1_CHUNK_KEYS = ChunkKeyEncoding("v2", ".")

_SHUFFLE_NAMES = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
#: byte order, kind, size and an optional datetime unit: the spec's type strings
_TYPESTR = re.compile(r"([<>|])([biufcmMOSUV])([0-9]*)(\[[0-9]*[A-Za-z]+\])?")


@dataclass(frozen=True)
class V1Legacy:
    """What a v1 array's metadata was before it became an ArrayMetadata."""
    #: the ``meta`` JSON object as read
    meta: dict[str, Any]
    #: one sentence per translation choice (compression, order, fill value, ...)
    notes: tuple[str, ...]


def parse_v1_array(meta: bytes | str | dict[str, Any], attrs: bytes | str | dict[str, Any] | None,
                   path: str = "", *, as_written_by_zarr1: bool = True) -> ArrayMetadata:
    """The ArrayMetadata (``zarr_format=1``) of the v1 array whose ``meta`` and ``attrs``
    documents are given (bytes, text or parsed JSON; ``attrs`` None when absent, read as
    no attributes). ``path`` is the array's path in its store, used in error keys.

    Order F. The spec says an ``F`` chunk is laid out column-major. The only library that
    wrote v1 (zarr 1.x) did so only for Blosc, which compresses the chunk's memory; its
    zlib, bz2, lzma and no-compression paths serialise with ``ndarray.tobytes()``, which
    is row-major whatever the order. ``as_written_by_zarr1=True`` (default) reads chunks
    as that library wrote them (a ``transpose`` codec for ``F`` under Blosc only);
    ``False`` follows the spec text (``transpose`` for every ``F`` array). Arrays of
    fewer than two dimensions are the same in both orders and never get a transpose.

    Raises :class:`MetadataError` (key ``<path>/meta`` or ``<path>/attrs``, and the
    field) for anything the spec does not allow or kvzarr cannot represent."""
    meta_key, attrs_key = _key(path, META), _key(path, ATTRS)
    try:
        doc = _load(meta, meta_key, path)
        metadata = _parse_meta(doc, as_written_by_zarr1)
    except MetadataError as e:
        e.key, e.path = e.key or meta_key, path
        raise
    attributes = {} if attrs is None else _load(attrs, attrs_key, path)
    return replace(metadata, attributes=attributes)


def v1_to_v3(metadata: ArrayMetadata) -> tuple[ArrayMetadata, list[str]]:
    """v3 metadata (``zarr_format=3``) for a v1 array's chunks as they are, and one note
    per choice made, for a migration report. Written as ``zarr.json`` at the array's
    path, it makes zarr-python 3 (and kvzarr) read the v1 chunks bit-exactly, in place:
    the chunk key encoding is ``v2`` with separator ``.``. TensorStore reads the result
    when the compression is blosc or none; it has no zlib, bz2 or lzma codec (a note says
    so for those). ``meta`` and ``attrs`` are not needed by v3 readers afterwards."""
    legacy = metadata.legacy
    if metadata.zarr_format != 1 or not isinstance(legacy, V1Legacy):
        raise MetadataError(f"v1_to_v3 needs metadata parsed by parse_v1_array, got "
                            f"zarr_format {metadata.zarr_format}", field="zarr_format")
    notes = list(legacy.notes)
    notes.append("chunk keys: chunk_key_encoding v2 with separator '.' names the v1 keys "
                 "(i.j), so every chunk is read in place")
    notes.append("attrs: become the v3 attributes")
    if metadata.data_type.name == "struct":
        notes.append("data type struct: zarr-python 3.1 reads only the legacy 'structured' "
                     "spelling, which kvzarr does not write")
    return replace(metadata, zarr_format=3, legacy=None), notes


def parse_v1_dtype(doc: Any) -> np.dtype:
    """The NumPy dtype of a v1 ``dtype`` member: a type string with its byte order
    (``"<i4"``, ``"|S12"``, ``"<M8[ns]"``) or a NumPy ``descr`` list of ``[name, dtype]``
    pairs, nested for nested structures. MetadataError (field ``dtype``) for anything
    else: a type string without a byte order, a multi-byte type with byte order ``|``,
    a size NumPy does not have, objects (v1 has no object encoding), sub-array fields
    (``[name, dtype, shape]``: no kvzarr data type) and unnamed or repeated fields."""
    return _parse_dtype(doc)


# --- parsing ----------------------------------------------------------------------------

def _key(path: str, name: str) -> str:
    path = path.strip("/")
    return f"{path}/{name}" if path else name


def _load(data: bytes | str | dict[str, Any], key: str, path: str) -> dict[str, Any]:
    if isinstance(data, dict):
        return data
    if not isinstance(data, (bytes, bytearray, memoryview, str)):
        raise MetadataError(f"expected bytes, text or a dict, got {type(data).__name__}",
                            key=key, path=path)
    try:
        # the v1 writer used Python's json module: NaN and Infinity may appear bare
        doc = json.loads(bytes(data) if isinstance(data, memoryview) else data)
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError(f"not valid JSON: {e}", key=key, path=path) from e
    except RecursionError:
        raise MetadataError("JSON nested too deeply", key=key, path=path) from None
    if not isinstance(doc, dict):
        raise MetadataError(f"must be a JSON object, got {type(doc).__name__}", key=key,
                            path=path)
    return doc


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_list(doc: dict[str, Any], name: str, low: int) -> tuple[int, ...]:
    value = doc[name]
    if not isinstance(value, list) or not all(_is_int(n) and n >= low for n in value):
        raise MetadataError(f"{name} must be a list of integers >= {low}, got {value!r}",
                            field=name)
    if len(value) > MAX_NDIM:
        raise MetadataError(f"{name} has {len(value)} dimensions, more than the {MAX_NDIM} "
                            "numpy supports", field=name)
    return tuple(value)


_REQUIRED = ("zarr_format", "shape", "chunks", "dtype", "compression", "compression_opts",
             "fill_value", "order")


def _parse_meta(doc: dict[str, Any], as_written_by_zarr1: bool) -> ArrayMetadata:
    for name in _REQUIRED:
        if name not in doc:
            raise MetadataError("required member is missing", field=name)
    fmt = doc["zarr_format"]
    if not _is_int(fmt) or fmt != 1:
        raise MetadataError(f"zarr_format must be 1, got {fmt!r}", field="zarr_format")
    shape = _int_list(doc, "shape", 0)
    chunks = _int_list(doc, "chunks", 1)
    if len(chunks) != len(shape):
        raise MetadataError(f"chunks has {len(chunks)} dimensions, shape has {len(shape)}",
                            field="chunks")
    if not shape:
        raise MetadataError("a 0-d v1 array keeps its chunk under the empty key, which no "
                            "chunk key encoding names", field="shape")
    order = doc["order"]
    if order not in ("C", "F"):
        raise MetadataError(f"order must be 'C' or 'F', got {order!r}", field="order")
    npd = parse_v1_dtype(doc["dtype"])
    try:
        data_type = data_type_from_numpy(npd)
    except MetadataError as e:
        raise MetadataError(f"dtype {doc['dtype']!r} has no kvzarr data type: {e.message}",
                            field="dtype") from e
    try:
        grid, grid_name = parse_chunk_grid(
            {"name": "regular", "configuration": {"chunk_shape": list(chunks)}}, shape)
        check_geometry(shape, grid, data_type)
    except MetadataError as e:
        # the grid speaks of v3 members: name the v1 one
        e.field = "shape" if e.field == "shape" else "chunks"
        raise

    notes = [f"dtype {doc['dtype']!r}: data type {_type_name(data_type)}"]
    compressor, note = _compressor(doc["compression"], doc["compression_opts"], npd)
    notes.append(note)
    codecs: list[Any] = []
    if order == "F" and len(shape) > 1:
        if isinstance(compressor, BloscCodec) or not as_written_by_zarr1:
            codecs.append(TransposeCodec(tuple(range(len(shape)))[::-1]))
            notes.append("order F: transpose codec (reversed dimensions) before bytes")
        else:
            notes.append(f"order F: chunks read row-major (no transpose) because zarr 1.x "
                         f"wrote {_compression_name(doc['compression'])} chunks with "
                         "ndarray.tobytes()")
    elif order == "F":
        notes.append("order F on fewer than two dimensions is the same layout as C")
    endian = _endian(npd)
    codecs.append(BytesCodec(endian))
    if endian is not None:
        notes.append(f"byte order: bytes codec endian {endian!r}")
    if compressor is not None:
        codecs.append(compressor)
    CodecPipeline(codecs)  # the kinds and their order

    fill = _fill(doc["fill_value"], data_type, notes)
    return ArrayMetadata(
        shape=shape, data_type=data_type, chunk_grid=grid, chunk_grid_name=grid_name,
        chunk_key_encoding=V1_CHUNK_KEYS, fill_value=fill, codecs=tuple(codecs),
        zarr_format=1, legacy=V1Legacy(meta=dict(doc), notes=tuple(notes)))


def _compression_name(compression: Any) -> str:
    return "uncompressed" if compression in (None, "none") else str(compression)


def _type_name(data_type: DataType) -> str:
    doc = data_type.to_json()
    return doc if isinstance(doc, str) else json.dumps(doc)


#: structures nested deeper than this are refused (a parsed dict may nest without end)
_MAX_NESTING = 32


def _parse_dtype(doc: Any, depth: int = 0) -> np.dtype:
    if isinstance(doc, str):
        return _parse_typestr(doc)
    if depth >= _MAX_NESTING:
        raise MetadataError(f"structured dtype nested deeper than {_MAX_NESTING} levels",
                            field="dtype")
    if isinstance(doc, list) and doc:
        fields = []
        for item in doc:
            if (not isinstance(item, list) or len(item) not in (2, 3)
                    or not isinstance(item[0], str) or not item[0]):
                raise MetadataError(f"structured dtype fields must be [name, dtype] pairs "
                                    f"with a non-empty name, got {item!r}", field="dtype")
            if len(item) == 3:
                raise MetadataError(f"field {item[0]!r}: sub-array fields have no kvzarr "
                                    "data type", field="dtype")
            fields.append((item[0], _parse_dtype(item[1], depth + 1)))
        try:
            return np.dtype(fields)
        except (TypeError, ValueError) as e:
            raise MetadataError(f"not a structured dtype: {e}", field="dtype") from e
    raise MetadataError(f"dtype must be a type string or a list of fields, got {doc!r}",
                        field="dtype")


def _parse_typestr(doc: str) -> np.dtype:
    m = _TYPESTR.fullmatch(doc)
    if m is None:
        raise MetadataError(f"{doc!r} is not a type string with a byte order "
                            "(such as '<f8' or '|u1')", field="dtype")
    order, kind, size, unit = m.group(1), m.group(2), int(m.group(3) or 0), m.group(4)
    if kind == "O":
        raise MetadataError(f"{doc!r}: object arrays have no v1 encoding", field="dtype")
    if (unit is not None) != (kind in "mM"):
        raise MetadataError(f"{doc!r}: datetime and timedelta types, and only they, take "
                            "a unit", field="dtype")
    try:
        npd = np.dtype(doc)
    except (TypeError, ValueError, OverflowError, MemoryError) as e:
        raise MetadataError(f"{doc!r} is not a NumPy data type: {e}", field="dtype") from e
    # numpy reads some sizes it does not have as others ("<b2"); sizeless S/U/V are
    # variable-length in kvzarr, not fixed-size elements
    if size == 0 or npd.itemsize != size * (4 if kind == "U" else 1):
        raise MetadataError(f"{doc!r} is not a fixed-size NumPy data type", field="dtype")
    if order == "|" and _has_byte_order(npd):
        raise MetadataError(f"{doc!r}: a multi-byte type needs byte order '<' or '>'",
                            field="dtype")
    return npd


def _has_byte_order(npd: np.dtype) -> bool:
    """True if the layout of ``npd`` depends on byte order (a multi-byte number or
    UCS-4 text, or a structure holding one)."""
    if npd.fields is not None:
        return any(_has_byte_order(npd.fields[name][0]) for name in npd.names)
    return npd.kind == "U" or (npd.kind in "iufcmM" and npd.itemsize > 1)


def _byte_orders(npd: np.dtype) -> set[str]:
    if npd.fields is not None:
        out: set[str] = set()
        for name in npd.names:
            out |= _byte_orders(npd.fields[name][0])
        return out
    return {npd.str[0]} if _has_byte_order(npd) else set()


def _endian(npd: np.dtype) -> str | None:
    orders = _byte_orders(npd)
    if not orders:
        return None
    if len(orders) > 1:
        raise MetadataError("structured dtype mixes little- and big-endian fields, which "
                            "one bytes codec cannot describe", field="dtype")
    return "little" if orders == {"<"} else "big"


def _compressor(compression: Any, opts: Any, npd: np.dtype) -> tuple[Any, str]:
    """The bytes -> bytes codec for ``compression`` (None for none) and its note."""
    if compression is None:  # the v1 writer's reader took null for "none"
        compression = "none"
    canonical = COMPRESSIONS.get(compression) if isinstance(compression, str) else None
    if canonical is None:
        raise MetadataError(f"unknown compression {compression!r} (expected one of "
                            f"{', '.join(COMPRESSIONS)})", field="compression")
    if canonical == "none":
        if opts is not None:
            raise MetadataError(f"compression 'none' takes no options, got {opts!r}",
                                field="compression_opts")
        return None, "compression none: no compressor"
    if canonical in ("zlib", "bz2"):
        low = 0 if canonical == "zlib" else 1
        if not _is_int(opts) or not low <= opts <= 9:
            raise MetadataError(f"{compression} compression_opts must be a level "
                                f"{low}..9, got {opts!r}", field="compression_opts")
        codec = numcodecs_codec(canonical, level=opts)
        alias = f" (read as zlib, as zarr 1.x did)" if compression == "gzip" else ""
        return codec, (f"compression {compression}{alias} level {opts}: numcodecs.{canonical} "
                       "(the same bytes; TensorStore has no such codec)")
    if canonical == "lzma":
        return _lzma(opts)
    return _blosc(opts, npd)


def _blosc(opts: Any, npd: np.dtype) -> tuple[BloscCodec, str]:
    if not isinstance(opts, dict):
        raise MetadataError(f"blosc compression_opts must be an object, got {opts!r}",
                            field="compression_opts")
    unknown = set(opts) - {"cname", "clevel", "shuffle"}
    missing = {"cname", "clevel", "shuffle"} - set(opts)
    if unknown or missing:
        name = sorted(unknown or missing)[0]
        raise MetadataError(f"blosc compression_opts needs exactly cname, clevel and "
                            f"shuffle", field=f"compression_opts.{name}")
    cname, clevel, shuffle = opts["cname"], opts["clevel"], opts["shuffle"]
    if cname not in CNAMES:
        raise MetadataError(f"blosc cname must be one of {', '.join(CNAMES)}, got {cname!r}",
                            field="compression_opts.cname")
    if not _is_int(clevel) or not 0 <= clevel <= 9:
        raise MetadataError(f"blosc clevel must be an integer 0..9, got {clevel!r}",
                            field="compression_opts.clevel")
    if not _is_int(shuffle) or shuffle not in _SHUFFLE_NAMES:
        raise MetadataError(f"blosc shuffle must be 0, 1 or 2, got {shuffle!r}",
                            field="compression_opts.shuffle")
    # the v1 writer handed Blosc the chunk's buffer, whose item size is the dtype's
    typesize = max(npd.itemsize, 1)
    codec = BloscCodec(typesize=typesize, cname=cname, clevel=clevel,
                       shuffle=_SHUFFLE_NAMES[shuffle], blocksize=0)
    note = (f"compression blosc {opts}: blosc codec (cname {cname}, clevel {clevel}, "
            f"shuffle {_SHUFFLE_NAMES[shuffle]}, typesize {typesize}, blocksize 0)")
    if cname not in _nc_blosc.list_compressors():
        note += (f"; this Blosc build has no {cname} (numcodecs ships it without), so its "
                 "chunks cannot be decoded here")
    return codec, note


def _lzma(opts: Any) -> tuple[Any, str]:
    if not isinstance(opts, dict) or set(opts) != {"format", "check", "preset", "filters"}:
        raise MetadataError("lzma compression_opts must be an object with format, check, "
                            f"preset and filters, got {opts!r}", field="compression_opts")
    for name in ("format", "check"):
        if not _is_int(opts[name]):
            raise MetadataError(f"lzma {name} must be an integer, got {opts[name]!r}",
                                field=f"compression_opts.{name}")
    if opts["preset"] is not None and not (_is_int(opts["preset"]) and 0 <= opts["preset"] <= 9):
        raise MetadataError(f"lzma preset must be null or 0..9, got {opts['preset']!r}",
                            field="compression_opts.preset")
    if opts["filters"] is not None and not (
            isinstance(opts["filters"], list)
            and all(isinstance(f, dict) for f in opts["filters"])):
        raise MetadataError("lzma filters must be null or a list of objects",
                            field="compression_opts.filters")
    try:
        # numcodecs checks nothing until a chunk is compressed: the standard library's
        # compressor checks format, check, preset and filters together
        lzma.LZMACompressor(format=opts["format"], check=opts["check"],
                            preset=opts["preset"], filters=opts["filters"])
    except (ValueError, TypeError, KeyError, lzma.LZMAError) as e:
        raise MetadataError(f"invalid lzma compression_opts {opts!r}: {e}",
                            field="compression_opts") from e
    codec = numcodecs_codec("lzma", **opts)
    return codec, (f"compression lzma {opts}: numcodecs.lzma (the same bytes; TensorStore "
                   "has no such codec)")


def _fill(value: Any, data_type: DataType, notes: list[str]) -> Any:
    if value is None:
        fill = data_type.default_fill()
        notes.append(f"fill_value null (undefined in v1): {data_type.fill_to_json(fill)!r}")
        return fill
    if isinstance(value, (dict, list)) and data_type.numpy_dtype.kind != "c":
        raise MetadataError(f"fill_value must be a scalar, got {value!r}", field="fill_value")
    try:
        fill = data_type.coerce_fill(value)
    except MetadataError as e:
        raise MetadataError(f"fill_value {value!r} does not fit {_type_name(data_type)}: "
                            f"{e.message}", field="fill_value") from e
    except (TypeError, ValueError, OverflowError) as e:
        raise MetadataError(f"fill_value {value!r} does not fit {_type_name(data_type)}: {e}",
                            field="fill_value") from e
    return fill


__all__ = ["ATTRS", "COMPRESSIONS", "META", "V1Legacy", "V1_CHUNK_KEYS", "parse_v1_array",
           "parse_v1_dtype", "v1_to_v3"]
