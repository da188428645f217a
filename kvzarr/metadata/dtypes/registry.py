"""The data type registry: name -> factory taking the ``configuration`` object, and the
numpy dtype -> Zarr data type matchers. The core types register here; the extension
types (:mod:`.strings`, :mod:`.structs`, :mod:`.temporal`) register themselves when the
package imports them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import MetadataError, UnsupportedExtensionError
from ..extensions import split_extension
from .base import DataType
from .numeric import (COMPLEX_NAMES, FLOAT_NAMES, INT_NAMES, BoolType, ComplexType, FloatType,
                      IntType, RawBitsType)

_FACTORIES: dict[str, Callable[[dict[str, Any]], DataType]] = {}
#: numpy dtype -> DataType converters tried in order by data_type_from_numpy
_NUMPY_MATCHERS: list[Callable[[np.dtype], DataType | None]] = []


def register_data_type(name: str, factory: Callable[[dict[str, Any]], DataType]) -> None:
    _FACTORIES[name] = factory


def register_numpy_matcher(matcher: Callable[[np.dtype], DataType | None]) -> None:
    _NUMPY_MATCHERS.append(matcher)


def _no_config(cls_factory: Callable[[], DataType], name: str) -> Callable[[dict], DataType]:
    def factory(config: dict[str, Any]) -> DataType:
        if config:
            raise MetadataError(f"data type {name} takes no configuration", field="data_type")
        return cls_factory()
    return factory


register_data_type("bool", _no_config(BoolType, "bool"))
for _n in INT_NAMES:
    register_data_type(_n, _no_config(lambda n=_n: IntType(n), _n))
for _n in FLOAT_NAMES:
    register_data_type(_n, _no_config(lambda n=_n: FloatType(n), _n))
for _n in COMPLEX_NAMES:
    register_data_type(_n, _no_config(lambda n=_n: ComplexType(n), _n))


def parse_data_type(doc: Any) -> DataType:
    """The DataType for a ``data_type`` member (name string or extension object)."""
    name, config = split_extension(doc, "data_type", allow_ignore=False)
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory(config)
    if re.fullmatch(r"r[1-9][0-9]{0,18}", name):     # at most 19 digits: an int64
        return RawBitsType(int(name[1:]))
    raise UnsupportedExtensionError(f"unsupported data type {name!r}", field="data_type")


def _core_from_numpy(dtype: np.dtype) -> DataType | None:
    kind = dtype.kind
    if kind == "b":
        return BoolType()
    name = dtype.newbyteorder("=").name if dtype.byteorder not in ("=", "|") else dtype.name
    if kind in "iu" and name in INT_NAMES:
        return IntType(name)
    if kind == "f" and name in FLOAT_NAMES:
        return FloatType(name)
    if kind == "c" and name in COMPLEX_NAMES:
        return ComplexType(name)
    if kind == "V" and dtype.fields is None and dtype.subdtype is None:
        return RawBitsType(dtype.itemsize * 8)
    return None


register_numpy_matcher(_core_from_numpy)


def data_type_from_numpy(dtype: Any) -> DataType:
    """The Zarr data type for a numpy dtype (or anything ``np.dtype`` accepts, or a Zarr
    data type name such as ``"float32"``/``"string"``, or a DataType)."""
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, (str, dict)) and (isinstance(dtype, dict) or dtype in _FACTORIES):
        return parse_data_type(dtype)
    try:
        npd = np.dtype(dtype)
    except TypeError as e:
        raise MetadataError(f"not a data type: {dtype!r}", field="dtype") from e
    for matcher in _NUMPY_MATCHERS:
        found = matcher(npd)
        if found is not None:
            return found
    raise UnsupportedExtensionError(f"no Zarr data type for numpy dtype {npd!r}", field="dtype")
