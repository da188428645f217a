"""Stores: the Store interface and its backends (one module each)."""

from .base import Capabilities, Store
from .filesystem import FilesystemStore
from .memory import MemoryStore
from .url import open_store

__all__ = ["Capabilities", "FilesystemStore", "MemoryStore", "Store", "open_store"]


def __getattr__(name: str):  # backends with optional heavy imports load on first use
    lazy = {"LMDBStore": "lmdb", "SQLStore": "sql", "ZipStore": "zip"}
    if name in lazy:
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{lazy[name]}"), name)
    raise AttributeError(name)
