"""``.zarray``, ``.zgroup`` and ``.zattrs`` documents (Zarr v2 spec, "Metadata",
"Attributes", "Groups") as kvzarr metadata objects, and back.

Reading checks every member kvzarr uses and raises :class:`MetadataError` (or
:class:`UnsupportedExtensionError` for a codec or data type kvzarr does not implement)
naming the document (``path/.zarray``) and the field. Members the spec does not define
are ignored, as the spec says, and kept for writing back. Sizes are refused as for v3
(:func:`kvzarr.metadata.v3.check_geometry`).

Writing back keeps the document as it was read — its members, their order and values,
and its indentation — except ``shape`` and the attributes, which follow the metadata
object (so ``dataclasses.replace(m, shape=...)`` then writing is a resize), and
``dimension_separator``, which is always written (zarr-python does; readers that predate
it default to ``"."``, which is then what is written). JSON is written as zarr-python
writes it: ASCII only, non-finite floats as ``NaN``/``Infinity`` (``allow_nan``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...codecs.base import ChunkArraySpec
from ...errors import MetadataError
from ...grid import MAX_INDEX, MAX_NDIM, parse_chunk_grid
from ...runtime.memo import BoundedMemo
from ..chunk_keys import ChunkKeyEncoding
from ..dtypes import DataType
from ..dtypes.objects import ObjectType
from ..dtypes.strings import BytesType, StringType
from ..v3 import ArrayMetadata, GroupMetadata, check_geometry
from .codecs import build_codecs, check_codecs
from .dtypes import V2DType, fill_from_v2, fill_to_v2, object_codec_of, parse_v2_dtype

ZARRAY = ".zarray"
ZGROUP = ".zgroup"
ZATTRS = ".zattrs"
ZMETADATA = ".zmetadata"

_REQUIRED = ("zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value", "order",
             "filters")
#: zarr-python 3 indents v2 documents by 2 (zarr-python 2 by 4, with sorted members)
DEFAULT_INDENT = 2


@dataclass(frozen=True)
class V2ArrayLegacy:
    """What writing a v2 array's documents back needs (``ArrayMetadata.legacy``)."""
    #: the ``.zarray`` members as read (or built), in their order
    zarray: dict[str, Any]
    #: the parsed ``dtype`` member
    dtype: V2DType
    #: a ``.zattrs`` document exists (written back even when empty)
    has_zattrs: bool
    indent: int | None = DEFAULT_INDENT

    @property
    def sort_keys(self) -> bool:
        """zarr-python 2 wrote the members sorted (and sorts ``.zattrs`` too)."""
        keys = list(self.zarray)
        return len(keys) > 1 and keys == sorted(keys)

    @property
    def fill_is_null(self) -> bool:
        return self.zarray.get("fill_value") is None

    @property
    def order(self) -> str:
        return self.zarray["order"]

    @property
    def filters(self) -> list[Any] | None:
        return self.zarray.get("filters")

    @property
    def compressor(self) -> Any:
        return self.zarray.get("compressor")


@dataclass(frozen=True)
class V2GroupLegacy:
    """``GroupMetadata.legacy`` of a v2 group."""
    has_zattrs: bool
    indent: int | None = DEFAULT_INDENT


def _where(path: str | None, name: str) -> str:
    return f"{path.strip('/')}/{name}" if path and path.strip("/") else name


def _load(data: bytes | str | dict[str, Any], where: str) -> tuple[dict[str, Any], int | None]:
    """The parsed document and its indentation (None: written on one line)."""
    if isinstance(data, dict):
        return data, DEFAULT_INDENT
    try:
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data).decode("utf-8")     # (json.loads would guess the encoding)
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError(f"{where} is not valid JSON: {e}", path=where) from None
    except RecursionError:
        raise MetadataError(f"{where} is nested too deeply", path=where) from None
    if not isinstance(doc, dict):
        raise MetadataError(f"{where} must be a JSON object", path=where)
    return doc, _indent_of(data)


def _indent_of(text: str) -> int | None:
    lines = text.split("\n", 2)
    if len(lines) < 2:
        return None
    second = lines[1]
    return len(second) - len(second.lstrip(" ")) or None


def _attributes(zattrs: bytes | str | dict[str, Any] | None, where: str) -> dict[str, Any]:
    if zattrs is None:
        return {}
    doc, _ = _load(zattrs, where)
    return doc


def _int_list(doc: dict[str, Any], member: str, where: str) -> tuple[int, ...]:
    value = doc[member]
    if (not isinstance(value, list)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                       for n in value)):
        raise MetadataError(f"{member} must be a list of non-negative integers, got "
                            f"{value!r}", path=where, field=member)
    if len(value) > MAX_NDIM:
        raise MetadataError(f"the array has {len(value)} dimensions, more than the "
                            f"{MAX_NDIM} numpy supports", path=where, field=member)
    if any(n > MAX_INDEX for n in value):
        raise MetadataError(f"{member} {value!r} has an entry larger than {MAX_INDEX}",
                            path=where, field=member)
    return tuple(value)


def parse_v2_array(zarray: bytes | str | dict[str, Any],
                   zattrs: bytes | str | dict[str, Any] | None,
                   path: str | None = None) -> ArrayMetadata:
    """The metadata of the v2 array whose ``.zarray`` and ``.zattrs`` (None: absent)
    documents are given; ``path`` (the array's path) names the documents in errors."""
    where = _where(path, ZARRAY)
    try:
        parts = _ARRAYS.get(zarray) if isinstance(zarray, bytes) else None
        if parts is None:
            doc, indent = _load(zarray, where)
            parts = _array_parts(doc, indent)
            if isinstance(zarray, bytes) and len(zarray) <= _MEMO_KEY_MAX:
                _ARRAYS.keep(zarray, parts)
        shape, grid, grid_name, separator, dtype, codecs, doc, indent = parts
        fill = fill_from_v2(dtype, doc["fill_value"])
        attributes = _attributes(zattrs, _where(path, ZATTRS))
    except MetadataError as e:
        if e.path is None:
            e.path = where
        if not e.message.startswith(where):
            e.message = f"{where}: {e.message}"
            e.args = (e.message,)
        raise
    except RecursionError:
        raise MetadataError(f"{where} is nested too deeply", path=where) from None
    legacy = V2ArrayLegacy(zarray=doc, dtype=dtype, has_zattrs=zattrs is not None,
                           indent=indent)
    return ArrayMetadata(
        shape=shape, data_type=dtype.data_type, chunk_grid=grid, chunk_grid_name=grid_name,
        chunk_key_encoding=ChunkKeyEncoding("v2", separator), fill_value=fill,
        codecs=codecs, attributes=attributes, zarr_format=2, legacy=legacy)


def _array_parts(doc: dict[str, Any], indent: int | None) -> tuple[Any, ...]:
    """Everything of an array's metadata that its ``.zarray`` alone says, checked:
    ``(shape, grid, grid name, separator, V2DType, codecs, the document, indent)``. The
    document is kept as read, for writing back; nothing changes it (writers copy it)."""
    for member in _REQUIRED:
        if member not in doc:
            raise MetadataError("required member is missing", field=member)
    if doc["zarr_format"] != 2 or isinstance(doc["zarr_format"], bool):
        raise MetadataError(f"zarr_format must be 2, got {doc['zarr_format']!r}",
                            field="zarr_format")
    shape = _int_list(doc, "shape", None)
    chunks = _int_list(doc, "chunks", None)
    if len(chunks) != len(shape):
        raise MetadataError(f"chunks {list(chunks)} has {len(chunks)} entries, shape "
                            f"{list(shape)} has {len(shape)}", field="chunks")
    if any(c == 0 for c in chunks):
        raise MetadataError(f"chunks {list(chunks)} must be positive", field="chunks")
    order = doc["order"]
    if order not in ("C", "F"):
        raise MetadataError(f"order must be 'C' or 'F', got {order!r}", field="order")
    separator = doc.get("dimension_separator", ".")
    if separator is None:       # zarr-python 2.8-2.10 wrote null for the default
        separator = "."
    if separator not in (".", "/"):
        raise MetadataError(f"dimension_separator must be '.' or '/', got {separator!r}",
                            field="dimension_separator")
    filters = doc["filters"]
    if filters is not None and not isinstance(filters, list):
        raise MetadataError(f"filters must be a list or null, got {filters!r}", field="filters")
    compressor = doc["compressor"]
    if compressor is not None and not isinstance(compressor, dict):
        raise MetadataError(f"compressor must be an object or null, got {compressor!r}",
                            field="compressor")
    grid, grid_name = parse_chunk_grid(
        {"name": "regular", "configuration": {"chunk_shape": list(chunks)}}, shape)
    dtype, codecs = _memoized(doc["dtype"], order, filters, compressor, chunks,
                              lambda data_type: check_geometry(shape, grid, data_type))
    check_geometry(shape, grid, dtype.data_type)
    fill_from_v2(dtype, doc["fill_value"])      # a bad fill is refused before it is kept
    return shape, grid, grid_name, separator, dtype, codecs, dict(doc), indent


#: ``.zarray`` bytes -> :func:`_array_parts`: the arrays of a hierarchy often share one
#: document byte for byte (their attributes live in ``.zattrs``), so opening the next one
#: parses only its attributes, as a v3 open memoizes the members of ``zarr.json``
_ARRAYS = BoundedMemo(1024)


#: (dtype, order, filters, compressor, chunks) -> (V2DType, codecs): immutable, so arrays
#: of one kind share them (a hierarchy repeats a few kinds thousands of times)
_MEMO = BoundedMemo(1024)
_MEMO_KEY_MAX = 4096


def _memoized(dtype_doc: Any, order: str, filters: Any, compressor: Any,
              chunks: tuple[int, ...], check: Any) -> tuple[V2DType, tuple[Any, ...]]:
    """The parsed dtype and the checked codec chain; only successes are kept. ``check``
    (the geometry check) runs before the codecs see the chunk shape."""
    key = repr((dtype_doc, order, filters, compressor, chunks))
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    dtype = parse_v2_dtype(dtype_doc, object_codec_of(filters, compressor))
    check(dtype.data_type)
    codecs = build_codecs(dtype, order, filters or None, compressor, len(chunks))
    # checked with the type's default fill: no codec depends on the fill value
    check_codecs(codecs, ChunkArraySpec(chunks, dtype.data_type,
                                        dtype.data_type.default_fill()))
    if len(key) <= _MEMO_KEY_MAX:
        _MEMO.keep(key, (dtype, codecs))
    return dtype, codecs


def parse_v2_group(zgroup: bytes | str | dict[str, Any],
                   zattrs: bytes | str | dict[str, Any] | None,
                   path: str | None = None) -> GroupMetadata:
    """The metadata of a v2 group: ``.zgroup`` must be exactly ``{"zarr_format": 2}``."""
    where = _where(path, ZGROUP)
    doc, indent = _load(zgroup, where)
    if doc.get("zarr_format") != 2 or isinstance(doc.get("zarr_format"), bool):
        raise MetadataError(f"{where}: zarr_format must be 2, got {doc.get('zarr_format')!r}",
                            path=where, field="zarr_format")
    extra = sorted(set(doc) - {"zarr_format"})
    if extra:
        raise MetadataError(f"{where} may hold only zarr_format, not {extra}", path=where,
                            field=extra[0])
    attributes = _attributes(zattrs, _where(path, ZATTRS))
    return GroupMetadata(attributes=attributes, zarr_format=2,
                         legacy=V2GroupLegacy(zattrs is not None, indent))


# -- writing ---------------------------------------------------------------------------------

def _dumps(doc: Any, indent: int | None, what: str, sort_keys: bool = False) -> bytes:
    # json indents in pure Python only (~0.1 ms a document); arrays of one kind share
    # their .zarray byte for byte, so it is written once per kind (the repr, made in C,
    # tells documents apart as JSON does: True from 1, 1.0 from 1, member order)
    key = (repr(doc), indent, sort_keys) if what == ZARRAY else None
    if key is not None and (hit := _DUMPED.get(key)) is not None:
        return hit
    try:
        text = json.dumps(doc, indent=indent, allow_nan=True,
                          sort_keys=sort_keys).encode("ascii")
    except (TypeError, ValueError) as e:
        raise MetadataError(f"{what} is not JSON-serializable: {e}", field=what) from None
    except RecursionError:
        raise MetadataError(f"{what} is nested too deeply to be written as JSON",
                            field=what) from None
    if key is not None and len(key[0]) <= _MEMO_KEY_MAX:
        _DUMPED.keep(key, text)
    return text


#: (repr of a .zarray document, indent, sort_keys) -> its JSON bytes
_DUMPED = BoundedMemo(256)


def _zattrs(attributes: dict[str, Any], has_zattrs: bool, indent: int | None,
            sort_keys: bool = False) -> bytes | None:
    if not attributes and not has_zattrs:
        return None
    return _dumps(attributes, indent, ZATTRS, sort_keys)


def _with_separator(doc: dict[str, Any], separator: str) -> dict[str, Any]:
    if "dimension_separator" in doc:
        doc["dimension_separator"] = separator
        return doc
    keys = list(doc)
    if keys == sorted(keys):        # zarr-python 2's sorted members
        items = sorted([*doc.items(), ("dimension_separator", separator)])
        return dict(items)
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "compressor":
            out["dimension_separator"] = separator
        out[key] = value
    out.setdefault("dimension_separator", separator)
    return out


def v2_array_documents(metadata: ArrayMetadata) -> tuple[bytes, bytes | None]:
    """``(.zarray, .zattrs)`` of a v2 array's metadata; ``.zattrs`` is None when there are
    no attributes and there was no ``.zattrs`` document."""
    legacy = metadata.legacy
    if metadata.zarr_format != 2 or not isinstance(legacy, V2ArrayLegacy):
        raise MetadataError("not the metadata of a v2 array", field="zarr_format")
    doc = dict(legacy.zarray)
    doc["shape"] = list(metadata.shape)
    doc = _with_separator(doc, metadata.chunk_key_encoding.separator)
    return (_dumps(doc, legacy.indent, ZARRAY),
            _zattrs(metadata.attributes, legacy.has_zattrs, legacy.indent, legacy.sort_keys))


def v2_group_documents(metadata: GroupMetadata) -> tuple[bytes, bytes | None]:
    """``(.zgroup, .zattrs)`` of a v2 group's metadata. A group built without legacy
    (a new group) gets what zarr-python 3 writes: both documents."""
    if metadata.zarr_format != 2:
        raise MetadataError("not the metadata of a v2 group", field="zarr_format")
    legacy = metadata.legacy if isinstance(metadata.legacy, V2GroupLegacy) \
        else V2GroupLegacy(True)
    return (_dumps({"zarr_format": 2}, legacy.indent, ZGROUP),
            _zattrs(metadata.attributes, legacy.has_zattrs, legacy.indent))


def build_v2_group_metadata(attributes: dict[str, Any] | None = None) -> GroupMetadata:
    """A new v2 group, written as zarr-python 3 writes one (``.zgroup`` and ``.zattrs``)."""
    return GroupMetadata(attributes=dict(attributes or {}), zarr_format=2,
                         legacy=V2GroupLegacy(True))


# -- new arrays ------------------------------------------------------------------------------

#: what zarr-python 3 (3.1) writes for ``compressors="auto"`` in a v2 array
DEFAULT_COMPRESSOR = {"id": "zstd", "level": 0}
_UNSET: Any = object()


def _codec_doc(codec: Any, what: str) -> dict[str, Any]:
    """A numcodecs codec object or config dict as its ``.zarray`` form."""
    if isinstance(codec, dict):
        return dict(codec)
    get_config = getattr(codec, "get_config", None)
    if get_config is None:
        raise MetadataError(f"{what} must be a numcodecs codec or its configuration, "
                            f"got {codec!r}", field=what)
    config = dict(get_config())
    if config.get("id") == "zstd" and not config.get("checksum", False):
        config.pop("checksum", None)    # as zarr-python 3 writes it
    return config


def _v2_dtype_doc(dtype: Any) -> tuple[Any, str | None]:
    """The ``dtype`` member for a user's dtype, and the object codec it needs."""
    if isinstance(dtype, str) and dtype in ("string", "str"):
        return "|O", "vlen-utf8"
    if dtype is str:
        return "|O", "vlen-utf8"
    if isinstance(dtype, str) and dtype in ("bytes", "variable_length_bytes"):
        return "|O", "vlen-bytes"
    if dtype is bytes:
        return "|O", "vlen-bytes"
    if isinstance(dtype, DataType):
        if isinstance(dtype, StringType):
            return "|O", "vlen-utf8"
        if isinstance(dtype, BytesType):
            return "|O", "vlen-bytes"
        if isinstance(dtype, ObjectType):
            return "|O", dtype.codec_id
        npd = dtype.numpy_dtype
    else:
        try:
            npd = np.dtype(dtype)
        except (TypeError, ValueError) as e:
            raise MetadataError(f"not a data type: {dtype!r}: {e}", field="dtype") from None
    if npd.kind == "T" or npd.kind == "O":
        return "|O", "vlen-utf8"
    if npd.fields is not None:
        return _structured_doc(npd), None
    return npd.str, None


def _structured_doc(npd: np.dtype) -> list[Any]:
    out: list[Any] = []
    for name in npd.names:
        sub = npd.fields[name][0]
        if sub.subdtype is not None:
            base, shape = sub.subdtype
            out.append([name, _structured_doc(base) if base.fields else base.str,
                        list(shape)])
        else:
            out.append([name, _structured_doc(sub) if sub.fields else sub.str])
    return out


def build_v2_array_metadata(*, shape: Any, dtype: Any, chunks: Any, fill_value: Any = _UNSET,
                            order: str = "C", filters: Any = None,
                            compressor: Any = "default", dimension_separator: str = ".",
                            attributes: dict[str, Any] | None = None) -> ArrayMetadata:
    """A new v2 array as ``zarr.create_array(..., zarr_format=2)`` of zarr-python 3 writes
    it: ``compressor="default"`` is zstd level 0; a fill value not given is the data
    type's default (zero, ``""``, NaT), written as such, while ``fill_value=None`` writes
    ``null``; ``str`` (and numpy ``T``/``O``) become ``"|O"`` with a vlen-utf8 filter,
    ``bytes`` ``"|O"`` with vlen-bytes; numpy ``S``/``U``/``V`` stay as they are.
    ``filters`` and ``compressor`` are numcodecs codecs or their configuration dicts.
    The result passes :func:`parse_v2_array` (it is parsed from the documents built), so
    every check of a read applies."""
    dtype_doc, object_codec = _v2_dtype_doc(dtype)
    filter_docs = [_codec_doc(f, "filters") for f in (filters or ())]
    if object_codec is not None and not (filter_docs and filter_docs[0].get("id") == object_codec):
        filter_docs.insert(0, {"id": object_codec})
    if compressor == "default":
        compressor_doc = dict(DEFAULT_COMPRESSOR)
    elif compressor is None:
        compressor_doc = None
    else:
        compressor_doc = _codec_doc(compressor, "compressor")
    shape_list = [shape] if isinstance(shape, int) else list(shape)
    chunks_list = [chunks] if isinstance(chunks, int) else list(chunks)
    # the fill value in JSON: parse a draft with a null fill to learn the data type
    draft = {"shape": shape_list, "chunks": chunks_list, "dtype": dtype_doc,
             "fill_value": None, "order": order, "filters": filter_docs or None,
             "dimension_separator": dimension_separator, "compressor": compressor_doc,
             "zarr_format": 2}
    parsed = parse_v2_array(draft, None)
    v2dtype: V2DType = parsed.legacy.dtype
    if fill_value is not None:
        value = parsed.data_type.default_fill() if fill_value is _UNSET else fill_value
        if v2dtype.stored.kind == "S" and isinstance(value, (bytes, np.bytes_)):
            value = bytes(value).ljust(v2dtype.stored.itemsize, b"\x00")
        try:
            fill = parsed.data_type.coerce_fill(value)
        except MetadataError as e:
            e.path = e.path or ZARRAY
            raise
        draft["fill_value"] = fill_to_v2(v2dtype, fill)
    return parse_v2_array(_dumps(draft, DEFAULT_INDENT, ZARRAY),
                          attributes if attributes is not None else {})
