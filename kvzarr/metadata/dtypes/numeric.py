"""The core data types: bool, int8..uint64, float16/32/64, complex64/128 and r<bits>
(core spec "Data types", fill values per "fill_value").

Float fill values keep their bit pattern: "NaN" is the canonical quiet NaN, any other
NaN payload is written as "0x..." hex of the IEEE bits and read back bit-exactly.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ...errors import MetadataError
from .base import DataType


def _bad(value: Any, dtype: str, why: str = "") -> MetadataError:
    return MetadataError(f"fill_value {value!r} is not valid for {dtype}{': ' + why if why else ''}",
                         field="fill_value")


class BoolType(DataType):
    name = "bool"
    numpy_dtype = np.dtype(bool)
    itemsize = 1
    has_endianness = False

    def to_json(self) -> str:
        return "bool"

    def fill_from_json(self, value: Any) -> np.bool_:
        if isinstance(value, bool):
            return np.bool_(value)
        if isinstance(value, int) and value in (0, 1):  # lenient, as zarr-python reads
            return np.bool_(value)
        raise _bad(value, "bool", "expected true or false")

    def fill_to_json(self, value: Any) -> bool:
        return bool(value)

    def coerce_fill(self, value: Any) -> np.bool_:
        return np.bool_(False) if value is None else np.bool_(bool(value))

    def default_fill(self) -> np.bool_:
        return np.bool_(False)


class IntType(DataType):
    has_endianness = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.numpy_dtype = np.dtype(name)
        self.itemsize = self.numpy_dtype.itemsize
        self.has_endianness = self.itemsize > 1
        info = np.iinfo(self.numpy_dtype)
        self._min, self._max = int(info.min), int(info.max)

    def to_json(self) -> str:
        return self.name

    def fill_from_json(self, value: Any) -> Any:
        if isinstance(value, bool):
            raise _bad(value, self.name, "expected an integer")
        if isinstance(value, float) and value.is_integer():  # lenient: 1.0
            value = int(value)
        if not isinstance(value, int):
            raise _bad(value, self.name, "expected an integer")
        if not self._min <= value <= self._max:
            raise _bad(value, self.name, "out of range")
        return self.numpy_dtype.type(value)

    def fill_to_json(self, value: Any) -> int:
        return int(value)

    def coerce_fill(self, value: Any) -> Any:
        if value is None:
            return self.default_fill()
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise _bad(value, self.name, "expected an integer")
        try:
            ivalue = int(value)
        except (TypeError, ValueError):
            raise _bad(value, self.name, "expected an integer") from None
        if not self._min <= ivalue <= self._max:
            raise _bad(value, self.name, "out of range")
        return self.numpy_dtype.type(ivalue)

    def default_fill(self) -> Any:
        return self.numpy_dtype.type(0)

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        if fill == 0:
            return not chunk.any()
        return bool((chunk == fill).all())


_UINT_OF_SIZE = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_HEX = re.compile(r"[0-9a-fA-F]+")
_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _float_from_json(value: Any, dtype: np.dtype, name: str) -> Any:
    """One IEEE float from its JSON form (number, NaN/Infinity names, 0x hex bits)."""
    if isinstance(value, bool):
        raise _bad(value, name, "expected a number")
    if isinstance(value, (int, float)):
        try:
            return dtype.type(value)  # numpy rounds to nearest, ties to even
        except OverflowError:  # an integer beyond float64: it rounds to infinity
            return dtype.type(math.inf if value > 0 else -math.inf)
    if isinstance(value, str):
        if value in _SPECIAL:
            return dtype.type(_SPECIAL[value])
        if value.startswith("0x"):
            digits = value[2:]
            if not _HEX.fullmatch(digits):
                raise _bad(value, name, "invalid hex")
            if len(digits) != 2 * dtype.itemsize:
                raise _bad(value, name, f"hex fill needs {2 * dtype.itemsize} hex digits")
            try:
                bits = int(digits, 16)
            except ValueError:
                raise _bad(value, name, "invalid hex") from None
            uint = _UINT_OF_SIZE[dtype.itemsize]
            return np.array(bits, dtype=uint).view(dtype)[()]
    raise _bad(value, name, "expected a number, 'NaN', 'Infinity', '-Infinity' or '0x...'")


def _float_to_json(value: Any, dtype: np.dtype) -> Any:
    v = dtype.type(value)
    if np.isnan(v):
        uint = _UINT_OF_SIZE[dtype.itemsize]
        bits = int(np.array(v, dtype=dtype).view(uint))
        canonical = int(np.array(np.nan, dtype=dtype).view(uint))
        if bits == canonical:
            return "NaN"
        return "0x" + format(bits, f"0{2 * dtype.itemsize}x")
    if np.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return float(v)


def _float_bits_equal(chunk: np.ndarray, fill: Any) -> bool:
    """Every element is ``fill``: NaN matches any NaN, otherwise bitwise (so -0.0 is not
    0.0, and a chunk of -0.0 is stored even when the fill is 0.0)."""
    if np.isnan(fill):
        return bool(np.isnan(chunk).all())
    uint = _UINT_OF_SIZE[chunk.dtype.itemsize]
    bits = np.array(fill, dtype=chunk.dtype).view(uint)[()]
    return bool((np.ascontiguousarray(chunk).view(uint) == bits).all())


class FloatType(DataType):
    def __init__(self, name: str) -> None:
        self.name = name
        self.numpy_dtype = np.dtype(name)
        self.itemsize = self.numpy_dtype.itemsize
        self.has_endianness = True

    def to_json(self) -> str:
        return self.name

    def fill_from_json(self, value: Any) -> Any:
        return _float_from_json(value, self.numpy_dtype, self.name)

    def fill_to_json(self, value: Any) -> Any:
        return _float_to_json(value, self.numpy_dtype)

    def coerce_fill(self, value: Any) -> Any:
        if value is None:
            return self.default_fill()
        if isinstance(value, str):
            return self.fill_from_json(value)
        return self.numpy_dtype.type(value)

    def default_fill(self) -> Any:
        return self.numpy_dtype.type(0.0)

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        return _float_bits_equal(chunk, fill)


class ComplexType(DataType):
    def __init__(self, name: str) -> None:
        self.name = name
        self.numpy_dtype = np.dtype(name)
        self.itemsize = self.numpy_dtype.itemsize
        self.has_endianness = True
        self._part = np.dtype(f"float{self.itemsize * 4}")

    def to_json(self) -> str:
        return self.name

    def fill_from_json(self, value: Any) -> Any:
        if not isinstance(value, list) or len(value) != 2:
            raise _bad(value, self.name, "expected [real, imaginary]")
        re, im = (_float_from_json(v, self._part, self.name) for v in value)
        out = np.zeros(1, dtype=self.numpy_dtype)
        out.view(self._part)[:] = [re, im]  # keeps NaN payloads of each part
        return out[0]

    def fill_to_json(self, value: Any) -> list[Any]:
        parts = np.array(value, dtype=self.numpy_dtype).reshape(1).view(self._part)
        return [_float_to_json(parts[0], self._part), _float_to_json(parts[1], self._part)]

    def coerce_fill(self, value: Any) -> Any:
        if value is None:
            return self.default_fill()
        if isinstance(value, list):
            return self.fill_from_json(value)
        return self.numpy_dtype.type(value)

    def default_fill(self) -> Any:
        return self.numpy_dtype.type(0)

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        parts = np.ascontiguousarray(chunk).view(self._part)
        fill_parts = np.array(fill, dtype=self.numpy_dtype).reshape(1).view(self._part)
        return (_float_bits_equal(parts[..., 0::2], fill_parts[0])
                and _float_bits_equal(parts[..., 1::2], fill_parts[1]))


class RawBitsType(DataType):
    """``r<bits>``: opaque fixed-size values; fill is a list of bits/8 byte values."""
    has_endianness = False

    def __init__(self, bits: int) -> None:
        if bits <= 0 or bits % 8:
            raise MetadataError(f"raw data type r{bits}: bits must be a positive multiple of 8",
                                field="data_type")
        self.name = f"r{bits}"
        self.itemsize = bits // 8
        try:
            self.numpy_dtype = np.dtype(f"V{self.itemsize}")
        except (ValueError, TypeError, OverflowError) as e:   # past numpy's 2 GiB items
            raise MetadataError(f"raw data type r{bits} is too large for numpy: {e}",
                                field="data_type") from None

    def to_json(self) -> str:
        return self.name

    def fill_from_json(self, value: Any) -> Any:
        if (not isinstance(value, list) or len(value) != self.itemsize
                or not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255
                           for b in value)):
            raise _bad(value, self.name, f"expected a list of {self.itemsize} integers 0..255")
        return np.void(bytes(value))

    def fill_to_json(self, value: Any) -> list[int]:
        return list(bytes(np.void(value).tobytes() if not isinstance(value, bytes) else value))

    def coerce_fill(self, value: Any) -> Any:
        if value is None:
            return self.default_fill()
        if isinstance(value, list):
            return self.fill_from_json(value)
        raw = bytes(value) if isinstance(value, (bytes, bytearray)) else np.void(value).tobytes()
        if len(raw) != self.itemsize:
            raise _bad(value, self.name, f"expected {self.itemsize} bytes")
        return np.void(raw)

    def default_fill(self) -> Any:
        return np.void(b"\x00" * self.itemsize)

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        raw = np.frombuffer(np.void(fill).tobytes(), dtype=np.uint8)
        return bool((np.ascontiguousarray(chunk).view(np.uint8).reshape(-1, self.itemsize)
                     == raw).all())


INT_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_NAMES = ("float16", "float32", "float64")
COMPLEX_NAMES = ("complex64", "complex128")
