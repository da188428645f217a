"""String and byte-string data types (zarr-extensions ``data-types/string``, ``bytes``,
``fixed-length-utf32``), and ``null_terminated_bytes`` (zarr-python 3's name for numpy ``S``;
zarr-extensions pull request #60, not yet merged).

* ``string``: variable-length Unicode, numpy ``StringDType()`` in memory (what zarr-python
  3.1.6 returns); fill is a JSON string, default ``""``. Serialised by ``vlen-utf8``.
* ``bytes``: variable-length byte strings, an object array of ``bytes`` in memory. Read as
  ``"bytes"`` or zarr-python's ``"variable_length_bytes"``, fill as base64 or a list of
  integers; always written as ``"bytes"`` with a base64 fill, which zarr-python 3.1.6 reads.
  Serialised by ``vlen-bytes``.
* ``fixed_length_utf32``: numpy ``U<n>``, ``length_bytes = 4 n``; fill is the JSON string
  without its trailing NULs (the padding), and may not exceed the capacity.
* ``null_terminated_bytes``: numpy ``S<n>``, ``length_bytes = n`` (at least 1). Each element
  is ``n`` bytes; trailing ``0x00`` bytes are padding (numpy drops them when it hands out an
  element). Single bytes, so the ``bytes`` codec takes no ``endian`` (zarr-python writes
  ``{"name": "bytes"}`` and ignores an ``endian`` it finds; so does kvzarr). The fill is
  the standard base64 (RFC 4648 section 4, with padding) of the value without its trailing
  NULs: ``""`` for the default, ``"YWI="`` for ``b"ab"``, as zarr-python 3.1 writes it (it
  keeps the NULs a user's fill ends with: ``b"z\\x00"`` gives ``"egA="``). Read: any valid
  base64 string whose decoded bytes, trailing NULs dropped, fit in ``n`` (``"AAA="`` reads
  as ``b""``). zarr-python also reads base64 with stray characters in it, dropping them,
  and truncates a fill that is too long; kvzarr refuses both, as the draft of the type in
  zarr-extensions pull request #60 bounds the decoded length by ``length_bytes``. A fill
  given by a user is ``bytes``, ASCII ``str`` or an integer (its decimal digits, as numpy
  and zarr-python cast one), and must fit: numpy and zarr-python would cut it silently.
  Values written into an array are cast as numpy casts them (too long: cut).

Promises: ``fill_to_json`` output read by ``fill_from_json`` gives back the same value, and
every fill that does not fit raises ``MetadataError(field="fill_value")``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from ...errors import MetadataError
from ..extensions import extension_json
from .registry import register_data_type, register_numpy_matcher
from .base import DataType

#: the in-memory dtype of ``string`` (no NA object: vlen-utf8 has no missing values)
STRING_DTYPE = np.dtypes.StringDType()


def _bad(value: Any, dtype: str, why: str) -> MetadataError:
    return MetadataError(f"fill_value {value!r} is not valid for {dtype}: {why}",
                         field="fill_value")


def _check_unicode(value: str, dtype: str) -> str:
    """Lone surrogates survive JSON but are not Unicode text; no encoding could store them."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(value, dtype, "contains a lone surrogate code point") from None
    return value


def _no_config(name: str, config: dict[str, Any]) -> None:
    if config:
        raise MetadataError(f"data type {name} takes no configuration", field="data_type")


class StringType(DataType):
    """``string``: variable-length UTF-8 text."""
    name = "string"
    numpy_dtype = STRING_DTYPE
    itemsize = None
    has_endianness = False

    def to_json(self) -> str:
        return "string"

    def fill_from_json(self, value: Any) -> str:
        if not isinstance(value, str):
            raise _bad(value, self.name, "expected a string")
        return _check_unicode(value, self.name)

    def fill_to_json(self, value: Any) -> str:
        return str(value)

    def coerce_fill(self, value: Any) -> str:
        if value is None:
            return self.default_fill()
        if isinstance(value, str):  # includes np.str_
            return _check_unicode(str(value), self.name)
        raise _bad(value, self.name, "expected a string")

    def default_fill(self) -> str:
        return ""

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        if chunk.dtype.kind in "TU":
            return bool(np.all(chunk == fill))
        # object arrays: compare element by element with ==, so None never equals "None"
        return bool(np.all(chunk == np.array(fill, dtype=object)))


class BytesType(DataType):
    """``bytes``: variable-length byte strings."""
    name = "bytes"
    numpy_dtype = np.dtype(object)
    itemsize = None
    has_endianness = False

    def to_json(self) -> str:
        return "bytes"

    def fill_from_json(self, value: Any) -> bytes:
        if isinstance(value, str):
            try:
                return base64.b64decode(value.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError):
                raise _bad(value, self.name, "not valid base64") from None
        if isinstance(value, list):
            if not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255
                       for b in value):
                raise _bad(value, self.name, "expected integers 0..255")
            return bytes(value)
        raise _bad(value, self.name, "expected a base64 string or a list of integers 0..255")

    def fill_to_json(self, value: Any) -> str:
        return base64.standard_b64encode(bytes(value)).decode("ascii")

    def coerce_fill(self, value: Any) -> bytes:
        if value is None:
            return self.default_fill()
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        if isinstance(value, str):  # as zarr-python casts a str fill
            return _check_unicode(value, self.name).encode("utf-8")
        if isinstance(value, list):
            return self.fill_from_json(value)
        raise _bad(value, self.name, "expected bytes")

    def default_fill(self) -> bytes:
        return b""

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        return bool(np.all(chunk == np.array(bytes(fill), dtype=object)))


#: largest numpy ``U`` length, in bytes (zarr-extensions fixed_length_utf32)
MAX_UTF32_BYTES = 2147483644


class FixedLengthUTF32Type(DataType):
    """``fixed_length_utf32``: ``length_bytes / 4`` UTF-32 code units, NUL padded."""
    name = "fixed_length_utf32"
    has_endianness = True

    def __init__(self, length_bytes: int) -> None:
        if (not isinstance(length_bytes, int) or isinstance(length_bytes, bool)
                or not 4 <= length_bytes <= MAX_UTF32_BYTES or length_bytes % 4):
            raise MetadataError(f"fixed_length_utf32 length_bytes must be a multiple of 4 in "
                                f"[4, {MAX_UTF32_BYTES}], got {length_bytes!r}",
                                field="data_type")
        self.length_bytes = length_bytes
        self.length = length_bytes // 4
        self.itemsize = length_bytes
        self.numpy_dtype = np.dtype(f"U{self.length}")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "FixedLengthUTF32Type":
        if set(config) != {"length_bytes"}:
            raise MetadataError("fixed_length_utf32 configuration must hold exactly "
                                "'length_bytes'", field="data_type")
        return cls(config["length_bytes"])

    def to_json(self) -> dict[str, Any]:
        return extension_json(self.name, {"length_bytes": self.length_bytes})

    def _check(self, value: Any) -> np.str_:
        if not isinstance(value, str):
            raise _bad(value, self.name, "expected a string")
        text = _check_unicode(str(value), self.name).rstrip("\x00")  # NULs are padding
        if len(text) > self.length:
            raise _bad(value, self.name, f"longer than {self.length} code points")
        return np.str_(text)

    def fill_from_json(self, value: Any) -> np.str_:
        return self._check(value)

    def fill_to_json(self, value: Any) -> str:
        return str(value).rstrip("\x00")

    def coerce_fill(self, value: Any) -> np.str_:
        return self.default_fill() if value is None else self._check(value)

    def default_fill(self) -> np.str_:
        return np.str_("")

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        # compare code units: exact, and NUL padding is part of the value
        units = np.ascontiguousarray(chunk, dtype=self.numpy_dtype).view(np.uint32)
        fill_units = np.array(fill, dtype=self.numpy_dtype).reshape(1).view(np.uint32)
        return bool((units.reshape(-1, self.length) == fill_units).all())


#: largest numpy ``S`` length (numpy keeps an item size in a C int)
MAX_NULL_TERMINATED_BYTES = 2**31 - 1


class NullTerminatedBytesType(DataType):
    """``null_terminated_bytes``: ``length_bytes`` bytes per element, NUL padded (numpy ``S``).

    ``NullTerminatedBytesType(n)`` is the type of numpy ``S<n>`` (the v2 dtype ``|S<n>``);
    fill values in memory are ``np.bytes_`` without trailing NULs."""
    name = "null_terminated_bytes"
    has_endianness = False

    def __init__(self, length_bytes: int) -> None:
        if (not isinstance(length_bytes, int) or isinstance(length_bytes, bool)
                or not 1 <= length_bytes <= MAX_NULL_TERMINATED_BYTES):
            raise MetadataError(f"null_terminated_bytes length_bytes must be an integer in "
                                f"[1, {MAX_NULL_TERMINATED_BYTES}], got {length_bytes!r}",
                                field="data_type")
        self.length_bytes = length_bytes
        self.itemsize = length_bytes
        self.numpy_dtype = np.dtype(f"S{length_bytes}")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "NullTerminatedBytesType":
        if set(config) != {"length_bytes"}:
            raise MetadataError("null_terminated_bytes configuration must hold exactly "
                                "'length_bytes'", field="data_type")
        return cls(config["length_bytes"])

    def to_json(self) -> dict[str, Any]:
        return extension_json(self.name, {"length_bytes": self.length_bytes})

    def _fit(self, value: Any, raw: bytes) -> np.bytes_:
        raw = raw.rstrip(b"\x00")  # padding, not part of the value
        if len(raw) > self.length_bytes:
            raise _bad(value, self.name, f"longer than {self.length_bytes} bytes")
        return np.bytes_(raw)

    def fill_from_json(self, value: Any) -> np.bytes_:
        if not isinstance(value, str):
            raise _bad(value, self.name, "expected a base64 string")
        try:
            raw = base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise _bad(value, self.name, "not valid base64") from None
        return self._fit(value, raw)

    def fill_to_json(self, value: Any) -> str:
        return base64.standard_b64encode(bytes(value).rstrip(b"\x00")).decode("ascii")

    def coerce_fill(self, value: Any) -> np.bytes_:
        if value is None:
            return self.default_fill()
        if isinstance(value, (bytes, bytearray, memoryview)):  # includes np.bytes_
            return self._fit(value, bytes(value))
        if isinstance(value, str):  # numpy casts str to S as ASCII
            try:
                return self._fit(value, value.encode("ascii"))
            except UnicodeEncodeError:
                raise _bad(value, self.name, "a str fill must be ASCII") from None
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return self._fit(value, str(int(value)).encode("ascii"))
        raise _bad(value, self.name, "expected bytes")

    def default_fill(self) -> np.bytes_:
        return np.bytes_(b"")

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        # compare the stored bytes, padding included: exact by construction
        n = self.length_bytes
        stored = np.ascontiguousarray(chunk, dtype=self.numpy_dtype).view(np.uint8)
        want = np.frombuffer(bytes(fill).ljust(n, b"\x00"), dtype=np.uint8)
        return bool((stored.reshape(-1, n) == want).all())


def _string_factory(config: dict[str, Any]) -> StringType:
    _no_config("string", config)
    return StringType()


def _bytes_factory(config: dict[str, Any]) -> BytesType:
    _no_config("bytes", config)
    return BytesType()


def _from_numpy(dtype: np.dtype) -> DataType | None:
    if dtype.kind == "T":
        return StringType()
    if dtype.kind == "U":
        # unsized ``U`` is what np.dtype(str) gives: zarr-python maps str to ``string``
        return StringType() if dtype.itemsize == 0 else FixedLengthUTF32Type(dtype.itemsize)
    if dtype.kind == "S":  # unsized: np.dtype(bytes), which zarr-python maps to ``bytes``
        return BytesType() if dtype.itemsize == 0 else NullTerminatedBytesType(dtype.itemsize)
    return None


register_data_type("string", _string_factory)
register_data_type("bytes", _bytes_factory)
register_data_type("variable_length_bytes", _bytes_factory)  # zarr-python's name
register_data_type("fixed_length_utf32", FixedLengthUTF32Type.from_config)
register_data_type("null_terminated_bytes", NullTerminatedBytesType.from_config)
register_numpy_matcher(_from_numpy)

__all__ = ["StringType", "BytesType", "FixedLengthUTF32Type", "NullTerminatedBytesType",
           "STRING_DTYPE"]
