"""Where a vector dataset lives: any kvzarr target (a path, URL, Store or transformer
stack) and an optional ``path`` inside it.

A target given as a path or URL is opened for the one call and closed after it; a Store
passed in stays open (it is the caller's). Writes are one store transaction: on LMDB,
SQLite, PostgreSQL, zip and memory a failed or killed write leaves the dataset as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..api import open_store
from ..errors import NodeNotFoundError
from ..metadata.v3 import encode_json, load_json
from ..node import normalize_path
from ..stores import Store


class Target:
    def __init__(self, store: Store, path: str, owned: bool, name: str) -> None:
        self.store = store
        self.root = normalize_path(path)
        self.prefix = f"{self.root}/" if self.root else ""
        self.owned = owned
        #: the dataset's name in the root's ``ome`` block (zarr-vectors uses the folder's)
        self.name = name

    def key(self, relative: str) -> str:
        return self.prefix + relative

    def read_json(self, relative: str) -> dict[str, Any] | None:
        """The document at ``relative`` (a ``zarr.json`` key), or None when absent."""
        key = self.key(relative)
        data = self.store.get(key)
        return None if data is None else load_json(data, key)

    def require_json(self, relative: str) -> dict[str, Any]:
        doc = self.read_json(relative)
        if doc is None:
            raise NodeNotFoundError("no such node in the vector dataset",
                                    key=self.key(relative))
        return doc

    def child_nodes(self, relative: str) -> list[str]:
        """The names of the nodes directly below ``relative`` (those with a
        ``zarr.json``), ascending: one listing of the direct children, not of every key
        below them (an array's cells)."""
        prefix = self.key(f"{relative}/")
        names = [n[:-1] for n in self.store.list_dir(prefix) if n.endswith("/")]
        held = self.store.exists_many([f"{prefix}{n}/zarr.json" for n in names])
        return [n for n, ok in zip(names, held) if ok]

    def put_json(self, items: list[tuple[str, bytes]], relative: str,
                 doc: dict[str, Any]) -> None:
        items.append((self.key(relative), encode_json(doc)))

    def close(self) -> None:
        if self.owned:
            self.store.close()


@contextmanager
def opened(target: Any, path: str | None, *, write: bool) -> Iterator[Target]:
    """The target opened for one call, with a read or write transaction around it."""
    store = open_store(target, mode="a" if write else "r")
    owned = store is not target
    name = _name(target, path)
    t = Target(store, path or "", owned, name)
    try:
        with store.transaction(write=write):
            yield t
    finally:
        t.close()


def _name(target: Any, path: str | None) -> str:
    if path:
        return normalize_path(path).rsplit("/", 1)[-1]
    if isinstance(target, str):
        base = target.rstrip("/").rsplit("/", 1)[-1]
        return base.split(".", 1)[0] or "zarr_vectors"
    return "zarr_vectors"
