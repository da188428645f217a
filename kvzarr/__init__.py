"""kvzarr: Zarr v3 arrays and groups in key-value stores.

    >>> import kvzarr
    >>> a = kvzarr.create_array("memory://", shape=(4, 4), chunks=(2, 2), dtype="int32")
    >>> a[1:3, 1:3] = 7
    >>> int(a[...].sum())
    28
"""

from . import errors
from .api import (array, create_array, create_group, full, group, ones, open, open_array,
                  open_group, open_store, zeros)
from .array import Array
from .compaction import compact
from .engine.config import ArrayConfig
from .group import Group
from .stores import FilesystemStore, MemoryStore, Store

__version__ = "0.1.0"

__all__ = ["Array", "ArrayConfig", "FilesystemStore", "Group", "MemoryStore", "Store", "array",
           "compact", "create_array", "create_group", "errors", "full", "group", "ones",
           "open", "open_array", "open_group", "open_store", "zeros"]


def __getattr__(name: str):
    # kvzarr.ZarrStore imports zarr-python (the "zarr" extra) on first use only
    if name == "ZarrStore":
        from .zarr_store import ZarrStore
        return ZarrStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
