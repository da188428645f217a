"""kvzarr: Zarr v3 arrays and groups in key-value stores (Zarr v2 and v1 read, written
in their own form, and migrated to v3).

    >>> import kvzarr
    >>> a = kvzarr.create_array("memory://", shape=(4, 4), chunks=(2, 2), dtype="int32")
    >>> a[1:3, 1:3] = 7
    >>> int(a[...].sum())
    28
"""

from . import errors
from .api import (array, consolidate_metadata, create_array, create_group, full, group, ones,
                  open, open_array, open_group, open_store, zeros)
from .array import Array
from .compaction import compact
from .copying import copy_store
from .engine.config import ArrayConfig
from .group import Group
from .migration import migrate_v3
from .runtime import allocator as _allocator
from .stores import FilesystemStore, MemoryStore, Store

__version__ = "0.1.0"

# malloc's thresholds set for chunk-sized buffers, before the first chunk is encoded
# (process-wide; KVZARR_MALLOC=system leaves them alone; runtime/allocator.py)
_allocator.tune()

__all__ = ["Array", "ArrayConfig", "FilesystemStore", "Group", "MemoryStore", "Store", "array",
           "compact", "consolidate_metadata", "copy_store", "create_array", "create_group",
           "errors", "full", "group", "migrate_v3", "ones", "open", "open_array", "open_group",
           "open_store", "vectors", "zeros"]

#: stores whose backends import heavy libraries (SQLAlchemy, lmdb): loaded on first use
_LAZY_STORES = ("LMDBStore", "SQLStore", "ZipStore")
__all__ += _LAZY_STORES
#: the zarr-python 3 store adapter: imports zarr-python (the "zarr" extra) on first use
#: only, so it is not in ``__all__`` (``from kvzarr import *`` must work without zarr)
_LAZY_ADAPTERS = ("ZarrStore",)


def __getattr__(name: str):
    if name in _LAZY_STORES:
        from . import stores
        return getattr(stores, name)
    if name == "vectors":     # (the vector format: imported on first use)
        import importlib
        return importlib.import_module(f"{__name__}.vectors")
    if name == "ZarrStore":
        from .zarr_store import ZarrStore
        return ZarrStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_LAZY_ADAPTERS))
