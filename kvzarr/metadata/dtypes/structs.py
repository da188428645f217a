"""The ``struct`` data type and the legacy ``structured`` spelling (zarr-extensions
``data-types/struct``, ``structured``).

``{"name": "struct", "configuration": {"fields": [{"name": "id", "data_type": "int32"},
...]}}`` is a packed numpy structured dtype: fields in declaration order, no padding,
item size = sum of the field sizes, nested structs encoded depth-first. A field may have
any fixed-size data type (core, extension object, ``{"name": ...}`` without
configuration, another struct); variable-length types are rejected.

Legacy ``structured`` (fields as ``[name, data_type]`` pairs, fill as base64 of the packed
little-endian bytes) is read but never written: kvzarr always writes ``struct`` with an
object fill holding every field (nested objects for nested structs).

numpy dtypes with padding (``align=True``, explicit offsets, a larger itemsize), field
titles or sub-array fields have no struct form: they are rejected with a MetadataError
rather than silently repacked, so that what is read back has the dtype that was given.

Sub-array fields (``shapes``) exist only for Zarr v2 structured dtypes
(``[name, dtype, shape]``, read by :mod:`kvzarr.metadata.v2`): the ``struct``
specification has no form for them, so :meth:`StructType.to_json` then names them with
a ``"shape"`` member no reader understands, for messages and comparisons only.

Promises: fills round-trip bit-exactly (NaN payloads included); ``is_fill`` compares the
packed bytes of each element, so it never matches a value that would read back differently.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import MetadataError
from ..extensions import extension_json
from .registry import (data_type_from_numpy, parse_data_type, register_data_type,
                       register_numpy_matcher)
from .base import DataType


def _bad(value: Any, why: str) -> MetadataError:
    return MetadataError(f"fill_value {value!r} is not valid for struct: {why}",
                         field="fill_value")


def _message(error: MetadataError) -> str:
    """The message of ``error`` without the ``(field ...)`` suffix KvzarrError adds."""
    text = str(error)
    return text.rsplit(" (field ", 1)[0]


class StructType(DataType):
    """``struct``: fixed-size records of named, typed fields."""
    name = "struct"

    def __init__(self, fields: Sequence[tuple[str, DataType]],
                 shapes: dict[str, tuple[int, ...]] | None = None) -> None:
        fields = tuple(fields)
        #: field name -> sub-array shape, for the fields that are sub-arrays (v2 only)
        self.shapes = {k: tuple(v) for k, v in (shapes or {}).items()}
        if not fields:
            raise MetadataError("struct needs at least one field", field="data_type")
        seen: set[str] = set()
        for fname, ftype in fields:
            if not isinstance(fname, str) or not fname:
                raise MetadataError(f"struct field names must be non-empty strings, got "
                                    f"{fname!r}", field="data_type")
            if fname in seen:
                raise MetadataError(f"duplicate struct field name {fname!r}", field="data_type")
            seen.add(fname)
            if not isinstance(ftype, DataType):
                raise MetadataError(f"struct field {fname!r}: not a data type", field="data_type")
            if ftype.itemsize is None:
                raise MetadataError(f"struct field {fname!r}: variable-length data type "
                                    f"{ftype.to_json()!r} has no fixed size", field="data_type")
        self.fields = fields
        self.itemsize = sum(ftype.itemsize * math.prod(self.shapes.get(fname, ()))
                            for fname, ftype in fields)
        self.has_endianness = any(ftype.has_endianness for _, ftype in fields)
        # the list form of np.dtype packs fields in order with no padding
        self.numpy_dtype = np.dtype([(fname, ftype.numpy_dtype, self.shapes[fname])
                                     if fname in self.shapes else (fname, ftype.numpy_dtype)
                                     for fname, ftype in fields])
        assert self.numpy_dtype.itemsize == self.itemsize

    # -- data type JSON ------------------------------------------------------------------

    @classmethod
    def from_config(cls, config: dict[str, Any], *, legacy: bool = False) -> "StructType":
        label = "structured" if legacy else "struct"
        if set(config) != {"fields"}:
            raise MetadataError(f"{label} configuration must hold exactly 'fields'",
                                field="data_type")
        docs = config["fields"]
        if not isinstance(docs, list):
            raise MetadataError(f"{label} fields must be a list", field="data_type")
        fields = []
        for doc in docs:
            if isinstance(doc, dict) and set(doc) == {"name", "data_type"}:
                fname, ftype = doc["name"], doc["data_type"]
            elif legacy and isinstance(doc, list) and len(doc) == 2:
                fname, ftype = doc
            else:
                form = ("an object {name, data_type} or a [name, data_type] pair" if legacy
                        else "an object with exactly 'name' and 'data_type'")
                raise MetadataError(f"{label} field must be {form}, got {doc!r}",
                                    field="data_type")
            fields.append((fname, parse_data_type(ftype)))
        return cls(fields)

    def to_json(self) -> dict[str, Any]:
        return extension_json(self.name, {"fields": [
            {"name": fname, "data_type": ftype.to_json(),
             **({"shape": list(self.shapes[fname])} if fname in self.shapes else {})}
            for fname, ftype in self.fields]})

    # -- fill values ---------------------------------------------------------------------

    def _pack(self, values: Sequence[Any]) -> np.void:
        """One element from per-field values already of each field's type."""
        raw = b"".join(np.broadcast_to(np.array(v, dtype=ftype.numpy_dtype),
                                       self.shapes.get(fname, ())).tobytes()
                       for (fname, ftype), v in zip(self.fields, values))
        return np.frombuffer(raw, dtype=self.numpy_dtype)[0]

    def _per_field(self, value: dict[str, Any], convert: str) -> np.void:
        if not isinstance(value, dict):
            raise _bad(value, "expected an object")
        names = [fname for fname, _ in self.fields]
        missing = [n for n in names if n not in value]
        extra = sorted(set(value) - set(names))
        if missing or extra:
            raise _bad(value, f"needs exactly the fields {names}; missing {missing}, "
                              f"unexpected {extra}")
        out = []
        for fname, ftype in self.fields:
            try:
                if fname in self.shapes:    # a sub-array: convert each element
                    items = np.asarray(value[fname], dtype=object).ravel()
                    if items.size != math.prod(self.shapes[fname]):
                        raise MetadataError(f"expected {math.prod(self.shapes[fname])} "
                                            f"values, got {items.size}", field="fill_value")
                    out.append(np.array([getattr(ftype, convert)(v) for v in items],
                                        dtype=ftype.numpy_dtype).reshape(self.shapes[fname]))
                    continue
                out.append(getattr(ftype, convert)(value[fname]))
            except MetadataError as e:
                raise MetadataError(f"struct field {fname!r}: {_message(e)}",
                                    field="fill_value") from e
        return self._pack(out)

    def fill_from_json(self, value: Any) -> np.void:
        if isinstance(value, str):  # legacy: base64 of the packed little-endian bytes
            try:
                raw = base64.b64decode(value.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError):
                raise _bad(value, "not valid base64") from None
            if len(raw) != self.itemsize:
                raise _bad(value, f"base64 fill holds {len(raw)} bytes, expected "
                                  f"{self.itemsize}")
            little = np.frombuffer(raw, dtype=self.numpy_dtype.newbyteorder("<"))
            return little.astype(self.numpy_dtype)[0]
        return self._per_field(value, "fill_from_json")

    def fill_to_json(self, value: Any) -> dict[str, Any]:
        element = np.array(value, dtype=self.numpy_dtype)
        return {fname: ([ftype.fill_to_json(v) for v in element[fname].ravel()]
                        if fname in self.shapes else ftype.fill_to_json(element[fname][()]))
                for fname, ftype in self.fields}

    def coerce_fill(self, value: Any) -> np.void:
        if value is None:
            return self.default_fill()
        if isinstance(value, np.ndarray) and value.shape == () and value.dtype.names:
            value = value[()]
        if isinstance(value, np.void) and value.dtype.names is not None:
            if value.dtype.names != self.numpy_dtype.names:
                raise _bad(value, f"field names {value.dtype.names} differ from "
                                  f"{self.numpy_dtype.names}")
            value = {fname: value[fname] for fname in value.dtype.names}
        elif isinstance(value, tuple):
            if len(value) != len(self.fields):
                raise _bad(value, f"expected {len(self.fields)} values")
            value = dict(zip((fname for fname, _ in self.fields), value))
        elif isinstance(value, str):
            return self.fill_from_json(value)
        return self._per_field(value, "coerce_fill")

    def default_fill(self) -> np.void:
        """Every field at its own default (NaT for a datetime field, zero for numbers)."""
        return self._pack([ftype.default_fill() for _, ftype in self.fields])

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        # bytewise: exact for NaN payloads and -0.0, and fast on any field mix
        data = np.ascontiguousarray(chunk, dtype=self.numpy_dtype).view(np.uint8)
        want = np.frombuffer(np.array(fill, dtype=self.numpy_dtype).tobytes(), dtype=np.uint8)
        return bool((data.reshape(-1, self.itemsize) == want).all())


def _from_numpy(dtype: np.dtype) -> DataType | None:
    if dtype.names is None:
        return None
    hint = "pack it: numpy.lib.recfunctions.repack_fields, or np.dtype(list) without align"
    if len(dtype.fields) != len(dtype.names):
        raise MetadataError(f"numpy dtype {dtype} has field titles, which struct cannot "
                            "store", field="dtype")
    offset = 0
    fields = []
    for fname in dtype.names:
        fdtype, foffset = dtype.fields[fname][:2]
        if foffset != offset:
            raise MetadataError(f"numpy dtype {dtype} is not packed (field {fname!r} at "
                                f"offset {foffset}, expected {offset})", field="dtype",
                                hint=hint)
        if fdtype.subdtype is not None:
            raise MetadataError(f"struct field {fname!r}: sub-array dtype {fdtype} has no "
                                "Zarr data type", field="dtype")
        ftype = data_type_from_numpy(fdtype)
        if ftype.itemsize != fdtype.itemsize:
            raise MetadataError(f"struct field {fname!r}: numpy dtype {fdtype} has no "
                                "fixed-size Zarr data type", field="dtype")
        fields.append((fname, ftype))
        offset += fdtype.itemsize
    if offset != dtype.itemsize:
        raise MetadataError(f"numpy dtype {dtype} has {dtype.itemsize - offset} padding bytes",
                            field="dtype", hint=hint)
    return StructType(fields)


register_data_type("struct", StructType.from_config)
def _legacy_structured(config: dict[str, Any]) -> StructType:
    dtype = StructType.from_config(config, legacy=True)
    dtype.implicit_little_endian = True
    return dtype


register_data_type("structured", _legacy_structured)
register_numpy_matcher(_from_numpy)

__all__ = ["StructType"]
