"""Stores: the Store interface and its backends (one module each)."""

from .base import Capabilities, Store
from .filesystem import FilesystemStore
from .memory import MemoryStore
from .url import open_store

__all__ = ["Capabilities", "FilesystemStore", "LMDBStore", "MemoryStore", "SQLStore", "Store",
           "ZipStore", "open_store"]


def __getattr__(name: str):  # backends with optional heavy imports load on first use
    lazy = {"LMDBStore": "lmdb", "SQLStore": "sql", "ZipStore": "zip"}
    if name in lazy:
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{lazy[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
