"""Opening a store from a path or URL.

* a Store: used as it is;
* ``None`` or ``"memory://"``: a new MemoryStore;
* ``"sqlite:///..."``, ``"postgresql://..."`` (any SQLAlchemy URL): SQLStore;
* a path ending in ``.lmdb`` / ``.mdb``: LMDBStore; ``.sqlite`` / ``.sqlite3`` / ``.db``:
  SQLStore; ``.zip``: ZipStore; ``file://PATH`` or any other path: FilesystemStore.

Backends load on first use, so a missing optional backend only matters when asked for.
"""

from __future__ import annotations

import importlib
import os
from typing import Any
from urllib.parse import unquote

from ..errors import StoreConfigError
from .base import Store

_SUFFIXES = {
    ".lmdb": ("lmdb", "LMDBStore"), ".mdb": ("lmdb", "LMDBStore"),
    ".sqlite": ("sql", "SQLStore"), ".sqlite3": ("sql", "SQLStore"), ".db": ("sql", "SQLStore"),
    ".zip": ("zip", "ZipStore"),
}
_SQL_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "oracle", "mssql")


def _backend(module: str, cls: str) -> type[Store]:
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)


def open_store(target: Any = None, *, mode: str = "a") -> Store:
    """The store for ``target``; ``mode="r"`` opens it read-only."""
    if isinstance(target, Store):
        return target
    read_only = mode == "r"
    if target is None:
        from .memory import MemoryStore
        return MemoryStore(read_only=read_only)
    text = os.fspath(target)
    if text == "memory://" or text.startswith("memory://"):
        from .memory import MemoryStore
        return MemoryStore(read_only=read_only)
    scheme = text.split("://", 1)[0].split("+", 1)[0] if "://" in text else ""
    if scheme in _SQL_SCHEMES:
        return _backend("sql", "SQLStore")(text, read_only=read_only)
    if scheme == "file":
        text = unquote(text[len("file://"):])
    elif scheme:
        raise StoreConfigError(f"unsupported store URL scheme {scheme!r} in {text!r}",
                               hint="use a path, file://, memory:// or a SQLAlchemy URL")
    suffix = os.path.splitext(text.rstrip("/"))[1].lower()
    if suffix in _SUFFIXES and not os.path.isdir(text) or suffix in (".lmdb", ".mdb"):
        module, cls = _SUFFIXES[suffix]
        return _backend(module, cls)(text, read_only=read_only)
    from .filesystem import FilesystemStore
    return FilesystemStore(text, read_only=read_only)
