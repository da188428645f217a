"""Zarr v2 ``dtype`` members and their fill values (Zarr v2 spec, "Data type encoding" and
"Fill value encoding"), as kvzarr data types.

A v2 dtype is a numpy type string ``<byteorder><kind><size>`` (``"<f8"``, ``">i2"``,
``"|b1"``, ``"<M8[10us]"``, ``"|S3"``, ``"<U5"``, ``"|V4"``, ``"|O"``) or, for structured
types, a list of ``[name, dtype]`` / ``[name, dtype, shape]`` entries, nestable. The byte
order is not part of a kvzarr data type: it goes to the ``bytes`` codec (:attr:`V2DType.endian`).

Mapping (zarr-python 3's own v2 reading, which kvzarr must match element for element):

=============================  ==============================================
``|b1``                        ``bool``
``<i2``, ``>u8``, ...          ``int16``, ``uint64``, ... (``<i1``/``<b1`` read too)
``<f2``, ``<f4``, ``>f8``      ``float16``, ``float32``, ``float64``
``<c8``, ``>c16``              ``complex64``, ``complex128``
``<M8[10us]``, ``>m8[s]``      ``numpy.datetime64`` / ``numpy.timedelta64``
``|S<n>``                      :func:`fixed_bytes_type` (see there)
``<U<n>``, ``>U<n>``           ``fixed_length_utf32`` of ``4 n`` bytes
``|V<n>``                      ``r<8 n>`` (raw bytes)
structured                     ``struct`` (every field of one byte order)
``|O`` + vlen-utf8             ``string``
``|O`` + vlen-bytes            ``bytes``
=============================  ==============================================

Fill values: ``null`` reads as the data type's default (zero, ``""``, NaT for
datetimes), which is what zarr-python 3 returns for a missing chunk of such an array;
floats take numbers and ``"NaN"``/``"Infinity"``/``"-Infinity"``; complex ``[re, im]``;
datetimes an integer or ``"NaT"``; ``U`` and object strings a JSON string (zarr-python
also reads a number there, as its text); ``S``, ``V``, structured and vlen-bytes the
base64 of the raw bytes (structured: in the document's byte order).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import MetadataError, UnsupportedExtensionError
from ..dtypes import DataType, data_type_from_numpy
from ..dtypes.numeric import RawBitsType
from ..dtypes.strings import BytesType, FixedLengthUTF32Type, StringType
from ..dtypes.structs import StructType

#: the object codecs zarr-python 2 knows (zarr-python 3's ``OBJECT_CODEC_IDS``)
OBJECT_CODEC_IDS = ("vlen-utf8", "vlen-bytes", "vlen-array", "pickle", "json2", "msgpack2")
#: object codecs kvzarr maps to a data type and its array -> bytes codec
SUPPORTED_OBJECT_CODECS = {"vlen-utf8": StringType, "vlen-bytes": BytesType}

_SIMPLE = re.compile(r"([<>|=])([biufcmMSUVO])([0-9]{0,12})(\[[0-9]{0,10}[A-Za-zμ]+\])?")
_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8), "c": (8, 16),
          "m": (8,), "M": (8,)}
#: nesting of structured dtypes kvzarr follows (numpy's own limit is far deeper)
_MAX_DEPTH = 32


def fixed_bytes_type(length: int) -> DataType:
    """The data type of numpy ``S<length>``: raw bytes of that length, so every byte
    written reads back (``null_terminated_bytes`` replaces this where it is available)."""
    try:
        from ..dtypes.strings import NullTerminatedBytesType  # type: ignore[attr-defined]
    except ImportError:
        return RawBitsType(8 * length)
    return NullTerminatedBytesType(length)


@dataclass(frozen=True)
class V2DType:
    """A parsed v2 ``dtype`` member."""
    data_type: DataType
    #: the numpy dtype of the stored elements, in the document's byte order (object
    #: arrays: ``object``)
    stored: np.dtype
    #: the ``bytes`` codec's endian: "little"/"big", None for one-byte or object types
    endian: str | None
    #: the object codec id for ``|O`` arrays, else None
    object_codec: str | None = None


def _bad(why: str, field: str = "dtype") -> MetadataError:
    return MetadataError(why, field=field)


def _simple_numpy(text: str, field: str) -> np.dtype:
    match = _SIMPLE.fullmatch(text)
    if match is None:
        raise _bad(f"dtype {text!r} is not a Zarr v2 data type string "
                   "(<byteorder><kind><size>, e.g. '<f8')", field)
    kind, size = match.group(2), match.group(3)
    if kind == "O":
        if size not in ("", "8"):
            raise _bad(f"dtype {text!r}: object types have no size", field)
        return np.dtype(object)
    if not size:
        raise _bad(f"dtype {text!r} has no size", field)
    if match.group(4) is not None and kind not in "mM":
        raise _bad(f"dtype {text!r}: only datetime types take a unit", field)
    allowed = _SIZES.get(kind)
    if allowed is not None and int(size) not in allowed:
        raise _bad(f"dtype {text!r}: no {kind!r} type of {size} bytes", field)
    if kind in "SUV" and int(size) < 1:
        raise _bad(f"dtype {text!r}: size must be at least 1", field)
    try:
        npd = np.dtype(text.replace("μs", "us"))
    except (TypeError, ValueError, OverflowError, MemoryError) as e:
        raise _bad(f"dtype {text!r} is not a valid data type: {e}", field) from None
    if npd.kind in "mM" and np.datetime_data(npd)[0] == "generic" and match.group(4):
        raise _bad(f"dtype {text!r}: unknown time unit", field)
    return npd


def _structured_numpy(doc: list[Any], field: str, depth: int) -> np.dtype:
    if depth > _MAX_DEPTH:
        raise _bad(f"structured dtype nested deeper than {_MAX_DEPTH} levels", field)
    if not doc:
        raise _bad("structured dtype needs at least one field", field)
    fields = []
    for entry in doc:
        if (not isinstance(entry, list) or len(entry) not in (2, 3)
                or not isinstance(entry[0], str) or not entry[0]):
            raise _bad(f"structured dtype field must be [name, dtype] or [name, dtype, "
                       f"shape], got {entry!r}", field)
        name, sub = entry[0], entry[1]
        if isinstance(sub, str):
            sub_npd = _simple_numpy(sub, field)
            if sub_npd.hasobject:
                raise _bad(f"structured field {name!r}: object fields are not supported", field)
        elif isinstance(sub, list):
            sub_npd = _structured_numpy(sub, field, depth + 1)
        else:
            raise _bad(f"structured field {name!r}: dtype must be a string or a list", field)
        if len(entry) == 3:
            shape = entry[2]
            if (not isinstance(shape, list)
                    or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                               for n in shape)):
                raise _bad(f"structured field {name!r}: shape must be a list of "
                           f"non-negative integers, got {shape!r}", field)
            fields.append((name, sub_npd, tuple(shape)))
        else:
            fields.append((name, sub_npd))
    try:
        return np.dtype(fields)
    except (TypeError, ValueError, OverflowError, MemoryError) as e:
        raise _bad(f"structured dtype {doc!r} is not valid: {e}", field) from None


def _byte_orders(npd: np.dtype) -> set[str]:
    """The byte orders of the multi-byte numbers inside ``npd`` ('<' or '>')."""
    if npd.fields is not None:
        out: set[str] = set()
        for name in npd.names:
            out |= _byte_orders(npd.fields[name][0])
        return out
    if npd.subdtype is not None:
        return _byte_orders(npd.subdtype[0])
    if npd.byteorder == "|" or npd.itemsize <= 1 or npd.kind in "SVb":
        return set()
    return {">" if npd.byteorder == ">" or (npd.byteorder == "=" and not _LITTLE) else "<"}


_LITTLE = np.little_endian


def _data_type(npd: np.dtype, field: str) -> DataType:
    """The kvzarr data type of a stored (any byte order) fixed-size numpy dtype."""
    if npd.fields is not None:
        members = []
        for name in npd.names:
            sub = npd.fields[name][0]
            if sub.subdtype is not None:
                raise UnsupportedExtensionError(
                    f"structured field {name!r} is a sub-array ({sub}), which kvzarr's "
                    "struct data type cannot hold", field=field)
            members.append((name, _data_type(sub, field)))
        return StructType(members)
    if npd.kind == "S":
        return fixed_bytes_type(npd.itemsize)
    if npd.kind == "V":
        return RawBitsType(8 * npd.itemsize)
    if npd.kind == "U":
        return FixedLengthUTF32Type(npd.itemsize)
    return data_type_from_numpy(npd.newbyteorder("=") if npd.byteorder in "<>" else npd)


def object_codec_of(filters: Any, compressor: Any) -> str | None:
    """The first object codec id among the filters and the compressor, as zarr-python
    looks for it."""
    for codec in (*(filters or ()), compressor):
        if isinstance(codec, dict) and codec.get("id") in OBJECT_CODEC_IDS:
            return codec["id"]
    return None


def parse_v2_dtype(doc: Any, object_codec: str | None, field: str = "dtype") -> V2DType:
    """The :class:`V2DType` of a ``dtype`` member; ``object_codec`` is the id of the
    object codec among the filters (:func:`object_codec_of`), needed for ``|O``."""
    if isinstance(doc, str):
        npd = _simple_numpy(doc, field)
    elif isinstance(doc, list):
        npd = _structured_numpy(doc, field, 0)
    else:
        raise _bad(f"dtype must be a string or a list, got {type(doc).__name__}", field)
    if npd.hasobject:
        if object_codec is None:
            raise _bad("an object ('|O') array needs an object codec (vlen-utf8, "
                       "vlen-bytes, ...) among its filters", field)
        cls = SUPPORTED_OBJECT_CODECS.get(object_codec)
        if cls is None:
            raise UnsupportedExtensionError(
                f"object codec {object_codec!r} is not supported (kvzarr reads object "
                f"arrays of {', '.join(SUPPORTED_OBJECT_CODECS)})", field="filters")
        return V2DType(cls(), npd, None, object_codec)
    orders = _byte_orders(npd)
    if len(orders) > 1:
        raise UnsupportedExtensionError(
            f"dtype {doc!r} mixes byte orders, which one bytes codec cannot encode",
            field=field)
    try:
        data_type = _data_type(npd, field)
    except MetadataError as e:
        e.field = field
        raise
    endian = None
    if orders and npd.itemsize > 1:
        endian = "big" if orders == {">"} else "little"
    return V2DType(data_type, npd, endian)


# -- fill values ---------------------------------------------------------------------------

def _base64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise MetadataError(f"fill_value {value!r} for {what} must be a base64 string",
                            field="fill_value")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise MetadataError(f"fill_value {value!r} for {what} is not valid base64",
                            field="fill_value") from None


def fill_from_v2(dtype: V2DType, value: Any) -> Any:
    """The fill value a v2 ``fill_value`` member means (``null``: the type's default)."""
    dt, npd = dtype.data_type, dtype.stored
    if value is None:
        return dt.default_fill()
    if dtype.object_codec == "vlen-utf8":
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise MetadataError(f"fill_value {value!r} for a string array must be a string",
                                field="fill_value")
        return dt.fill_from_json(value if isinstance(value, str) else str(value))
    if dtype.object_codec == "vlen-bytes":
        return _base64(value, "a bytes array")
    kind = npd.kind
    if kind == "S" or (kind == "V" and npd.fields is None):
        raw = _base64(value, str(npd))
        if len(raw) > npd.itemsize:
            raise MetadataError(f"fill_value {value!r} holds {len(raw)} bytes, more than "
                                f"the {npd.itemsize} of {npd}", field="fill_value")
        return dt.coerce_fill(raw.ljust(npd.itemsize, b"\x00"))
    if npd.fields is not None:
        raw = _base64(value, "a structured dtype")
        if len(raw) != npd.itemsize:
            raise MetadataError(f"fill_value {value!r} holds {len(raw)} bytes, expected "
                                f"{npd.itemsize}", field="fill_value")
        # swap to native by value, then view as the data type (same packed layout)
        native = np.frombuffer(raw, dtype=npd).astype(npd.newbyteorder("="))
        return native.view(dt.numpy_dtype)[0]
    if kind == "c" and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value, 0.0]
    if kind == "U":
        if not isinstance(value, str):
            raise MetadataError(f"fill_value {value!r} for {npd} must be a string",
                                field="fill_value")
        return dt.coerce_fill(value)
    return dt.fill_from_json(value)


def fill_to_v2(dtype: V2DType, value: Any) -> Any:
    """The ``fill_value`` member for ``value``, as zarr-python 3 writes it in v2."""
    dt, npd = dtype.data_type, dtype.stored
    if value is None:
        return None
    if dtype.object_codec == "vlen-utf8":
        return str(value)
    if dtype.object_codec == "vlen-bytes":
        return base64.standard_b64encode(bytes(value)).decode("ascii")
    if npd.kind == "S":
        raw = np.array(value, dtype=dt.numpy_dtype).tobytes().rstrip(b"\x00")
        return base64.standard_b64encode(raw).decode("ascii")
    if npd.kind == "V":
        raw = np.array(value, dtype=dt.numpy_dtype).astype(npd).tobytes()
        return base64.standard_b64encode(raw).decode("ascii")
    return dt.fill_to_json(value)
