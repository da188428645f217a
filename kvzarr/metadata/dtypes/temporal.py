"""``numpy.datetime64`` and ``numpy.timedelta64`` (zarr-extensions ``data-types/datetime64``,
``timedelta64``).

``{"name": "numpy.datetime64", "configuration": {"unit": "us", "scale_factor": 10}}`` is
numpy ``datetime64[10us]``: a 64-bit signed count of ``scale_factor * unit`` since the
epoch (or a duration), whose byte order the ``bytes`` codec states. ``"μs"`` is read as
``"us"`` and written as ``"us"``; ``"generic"`` (numpy's unit-less dtype) only holds NaT
and needs ``scale_factor`` 1.

Fill values: a JSON integer in the int64 range or ``"NaT"`` (= -2**63); kvzarr writes the
integer, as zarr-python does, and the default fill is NaT, as in zarr-python. A fill that
does not fit, or a user fill that the unit cannot hold exactly, raises
``MetadataError(field="fill_value")``.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import numpy as np

from ...errors import MetadataError
from ..extensions import extension_json
from .registry import register_data_type, register_numpy_matcher
from .base import DataType

UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as", "generic")
_UNIT_ALIASES = {"μs": "us"}
MAX_SCALE_FACTOR = 2**31 - 1
NAT = -(2**63)
_INT64_MAX = 2**63 - 1


def _bad(value: Any, dtype: str, why: str) -> MetadataError:
    return MetadataError(f"fill_value {value!r} is not valid for {dtype}: {why}",
                         field="fill_value")


class _TimeType(DataType):
    """Shared by the two types: they differ only in the numpy kind and scalar class."""
    itemsize = 8
    has_endianness = True
    _kind: str  # "M" or "m"
    _scalar: type

    def __init__(self, unit: str, scale_factor: int = 1) -> None:
        unit = _UNIT_ALIASES.get(unit, unit) if isinstance(unit, str) else unit
        if unit not in UNITS:
            raise MetadataError(f"{self.name}: unit must be one of {list(UNITS)} or 'μs', "
                                f"got {unit!r}", field="data_type")
        if (not isinstance(scale_factor, int) or isinstance(scale_factor, bool)
                or not 1 <= scale_factor <= MAX_SCALE_FACTOR):
            raise MetadataError(f"{self.name}: scale_factor must be an integer in "
                                f"[1, {MAX_SCALE_FACTOR}], got {scale_factor!r}",
                                field="data_type")
        if unit == "generic" and scale_factor != 1:
            raise MetadataError(f"{self.name}: the generic unit needs scale_factor 1",
                                field="data_type")
        self.unit = unit
        self.scale_factor = scale_factor
        self.numpy_dtype = np.dtype(self._kind + "8" if unit == "generic"
                                    else f"{self._kind}8[{scale_factor}{unit}]")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "_TimeType":
        if set(config) != {"unit", "scale_factor"}:
            raise MetadataError(f"{cls.name} configuration must hold exactly 'unit' and "
                                f"'scale_factor', got {sorted(config)}", field="data_type")
        return cls(config["unit"], config["scale_factor"])

    @classmethod
    def from_numpy(cls, dtype: np.dtype) -> "_TimeType":
        unit, scale = np.datetime_data(dtype)
        return cls(unit, scale)

    def to_json(self) -> dict[str, Any]:
        return extension_json(self.name, {"unit": self.unit, "scale_factor": self.scale_factor})

    def _from_int(self, value: int, original: Any) -> Any:
        if not NAT <= value <= _INT64_MAX:
            raise _bad(original, self.name, "outside the int64 range")
        if self.unit == "generic" and value != NAT:
            raise _bad(original, self.name, "the generic unit only holds NaT")
        return np.array(value, dtype=np.int64).view(self.numpy_dtype)[()]

    def fill_from_json(self, value: Any) -> Any:
        if value == "NaT":
            return self._from_int(NAT, value)
        if isinstance(value, int) and not isinstance(value, bool):
            return self._from_int(value, value)
        raise _bad(value, self.name, "expected an integer or 'NaT'")

    def fill_to_json(self, value: Any) -> int:
        return int(np.array(value, dtype=self.numpy_dtype).view(np.int64))

    def default_fill(self) -> Any:
        return self._from_int(NAT, None)

    def _native(self, value: Any) -> Any:
        """A Python date/time object as a numpy scalar, or None if it is not one."""
        raise NotImplementedError

    def coerce_fill(self, value: Any) -> Any:
        if value is None:
            return self.default_fill()
        if isinstance(value, str) and value == "NaT":
            return self.default_fill()
        # before the integer test: np.timedelta64 is an np.signedinteger
        scalar = self._native(value)
        if scalar is None and isinstance(value, (int, np.integer)) and not isinstance(
                value, (bool, np.bool_, np.datetime64, np.timedelta64)):
            return self._from_int(int(value), value)
        if scalar is None:
            raise _bad(value, self.name, f"expected {self._scalar.__name__}, an integer or "
                                         "'NaT'")
        if np.isnat(scalar):
            return self.default_fill()
        converted = np.array(scalar).astype(self.numpy_dtype)
        # numpy truncates and overflows silently: accept only an exact conversion
        back = converted.astype(scalar.dtype)
        if np.isnat(converted) or back != scalar:
            raise _bad(value, self.name, f"not exactly representable in {self.numpy_dtype}")
        return converted[()]

    def is_fill(self, chunk: np.ndarray, fill: Any) -> bool:
        counts = np.ascontiguousarray(chunk, dtype=self.numpy_dtype).view(np.int64)
        return bool((counts == self.fill_to_json(fill)).all())


class DateTime64Type(_TimeType):
    name = "numpy.datetime64"
    _kind = "M"
    _scalar = np.datetime64

    def _native(self, value: Any) -> Any:
        if isinstance(value, np.datetime64):
            return value
        try:
            if isinstance(value, (_dt.datetime, _dt.date)):
                if isinstance(value, _dt.datetime) and value.tzinfo is not None:
                    raise ValueError("time zone aware datetimes are not supported")
                return np.datetime64(value)
            if isinstance(value, str):
                return np.datetime64(value)
        except ValueError as e:
            raise _bad(value, self.name, str(e)) from None
        return None


class TimeDelta64Type(_TimeType):
    name = "numpy.timedelta64"
    _kind = "m"
    _scalar = np.timedelta64

    def _native(self, value: Any) -> Any:
        if isinstance(value, np.timedelta64):
            return value
        if isinstance(value, _dt.timedelta):
            return np.timedelta64(value)
        return None


def _from_numpy(dtype: np.dtype) -> DataType | None:
    if dtype.kind == "M":
        return DateTime64Type.from_numpy(dtype)
    if dtype.kind == "m":
        return TimeDelta64Type.from_numpy(dtype)
    return None


register_data_type(DateTime64Type.name, DateTime64Type.from_config)
register_data_type(TimeDelta64Type.name, TimeDelta64Type.from_config)
register_numpy_matcher(_from_numpy)

__all__ = ["DateTime64Type", "TimeDelta64Type", "UNITS", "NAT"]
