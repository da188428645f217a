"""Data types: parse the ``data_type`` member, and map numpy dtypes to Zarr data types.

The registry (:mod:`.registry`) maps names to factories taking the ``configuration``
object; the modules of the extension types register themselves when imported here.
"""

from __future__ import annotations

from . import strings, structs, temporal  # noqa: F401  (they register themselves)
from .base import DataType
from .registry import (data_type_from_numpy, parse_data_type, register_data_type,
                       register_numpy_matcher)

__all__ = ["DataType", "parse_data_type", "data_type_from_numpy", "register_data_type",
           "register_numpy_matcher"]
