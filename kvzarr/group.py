"""Group: a node with children, found through the store's ``list_dir`` (a range scan on
ordered stores). Children are addressed by relative paths (``g["a/b"]``).

Deleting a member erases its whole subtree in one store transaction.

Creating many nodes: each ``create_array`` / ``create_group`` is one store transaction,
and on LMDB and SQLite each commit waits for the disk. Inside a ``with
store.transaction():`` they join the outer transaction instead, so thousands of creates
share one commit and become visible together (or, on an error, not at all)::

    >>> import kvzarr
    >>> store = kvzarr.MemoryStore()
    >>> root = kvzarr.open_group(store)
    >>> with store.transaction():
    ...     for i in range(100):
    ...         _ = root.create_array(f"a{i:03d}", shape=(16,), dtype="int32",
    ...                               attributes={"index": i})
    >>> len(root), root["a042"].attrs["index"]
    (100, 42)

A create checks its parent group inside the transaction (and makes missing ancestors);
what it wrote is not read back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .array import Array
from .engine.config import ArrayConfig
from .engine.config import array_config as _array_config
from .errors import NodeNotFoundError, NodeTypeError
from .hierarchy import new_array, new_group
from .metadata.v3 import ArrayMetadata, GroupMetadata, parse_node_metadata
from .node import Node, metadata_key, normalize_path, read_node_metadata
from .stores.base import Store


def node_from_metadata(store: Store, path: str, metadata: ArrayMetadata | GroupMetadata, *,
                       read_only: bool, config: ArrayConfig | None = None) -> "Array | Group":
    if isinstance(metadata, ArrayMetadata):
        return Array(store, path, metadata, read_only=read_only, config=config)
    return Group(store, path, metadata, read_only=read_only)


class Group(Node):
    metadata: GroupMetadata
    _metadata_kind = GroupMetadata

    def _child_path(self, name: str) -> str:
        rel = normalize_path(name)
        if not rel:
            raise NodeNotFoundError("empty member name", path=self.name)
        return f"{self.path}/{rel}" if self.path else rel

    # -- lookup --------------------------------------------------------------------------

    def __getitem__(self, name: str) -> "Array | Group":
        path = self._child_path(name)
        return node_from_metadata(self.store, path, read_node_metadata(self.store, path),
                                  read_only=self.read_only)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except NodeNotFoundError:
            return default

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            return self.store.exists(metadata_key(self._child_path(name)))
        except (NodeNotFoundError, ValueError):
            return False

    def _child_dirs(self, fetch: Callable[[list[str]], list[Any]]
                    ) -> list[tuple[str, Any]]:
        """(name, what ``fetch`` gives for its zarr.json key) of each child directory, in
        name order. One read transaction: the listing and the fetch see one snapshot, and
        a SQL store runs its seek steps on one connection."""
        prefix = f"{self.path}/" if self.path else ""
        with self.store.transaction(write=False):
            dirs = [entry[:-1] for entry in self.store.list_dir(prefix)
                    if entry.endswith("/")]
            if not dirs:
                return []
            return list(zip(dirs, fetch([metadata_key(prefix + d) for d in dirs])))

    def _children(self) -> list[tuple[str, bytes]]:
        """(name, zarr.json) of each child, in name order."""
        return [(d, doc) for d, doc in self._child_dirs(self.store.get_many)
                if doc is not None]

    def _child_names(self) -> list[str]:
        """The children's names, in name order: an existence check of each child's
        zarr.json, no document is read."""
        return [d for d, ok in self._child_dirs(self.store.exists_many) if ok]

    def members(self, max_depth: int | None = 0) -> Iterator[tuple[str, "Array | Group"]]:
        """(relative name, node) of the children, in name order; ``max_depth=None`` walks
        the whole subtree (names are then relative paths)."""
        prefix = f"{self.path}/" if self.path else ""
        for name, doc in self._children():
            node = node_from_metadata(self.store, prefix + name,
                                      parse_node_metadata(doc, prefix + name),
                                      read_only=self.read_only)
            yield name, node
            if isinstance(node, Group) and (max_depth is None or max_depth > 0):
                deeper = None if max_depth is None else max_depth - 1
                for sub, child in node.members(max_depth=deeper):
                    yield f"{name}/{sub}", child

    def keys(self) -> Iterator[str]:
        return iter(self._child_names())

    __iter__ = keys

    def __len__(self) -> int:
        return len(self._child_names())

    def arrays(self) -> Iterator[tuple[str, Array]]:
        return ((n, m) for n, m in self.members() if isinstance(m, Array))

    def groups(self) -> Iterator[tuple[str, "Group"]]:
        return ((n, m) for n, m in self.members() if isinstance(m, Group))

    def array_keys(self) -> Iterator[str]:
        return (n for n, _ in self.arrays())

    def group_keys(self) -> Iterator[str]:
        return (n for n, _ in self.groups())

    def tree(self) -> str:
        """The hierarchy below this group as indented text."""
        lines = [self.name]
        for name, node in self.members(max_depth=None):
            depth = name.count("/")
            label = name.rsplit("/", 1)[-1]
            if isinstance(node, Array):
                label += f" {node.shape} {node.dtype}"
            lines.append("  " * (depth + 1) + label)
        return "\n".join(lines)

    # -- creation and deletion -----------------------------------------------------------

    def create_group(self, name: str, *, overwrite: bool = False,
                     attributes: dict[str, Any] | None = None) -> "Group":
        path = self._child_path(name)
        return Group(self.store, path, new_group(self.store, path, attributes=attributes,
                                                 overwrite=overwrite))

    def require_group(self, name: str, **kwargs: Any) -> "Group":
        node = self.get(name)
        if node is None:
            return self.create_group(name, **kwargs)
        if not isinstance(node, Group):
            raise NodeTypeError("an array exists at this path", path=node.name)
        return node

    def create_array(self, name: str, **kwargs: Any) -> Array:
        return new_array(self.store, self._child_path(name),
                         config=_array_config(kwargs.pop("config", None),
                                              kwargs.pop("write_empty_chunks", None)),
                         **kwargs)

    def __delitem__(self, name: str) -> None:
        self._check_writable()
        path = self._child_path(name)
        with self.store.transaction():
            if not self.store.exists(metadata_key(path)):
                raise NodeNotFoundError("no such member", path="/" + path)
            self.store.erase_prefix(path + "/")

    def __repr__(self) -> str:
        return f"<kvzarr.Group {self.name!r}>"

    @property
    def info(self) -> str:
        return (f"Type       : Group\nZarr format: 3\nPath       : {self.name}\n"
                f"Store      : {self.store!r}\nMembers    : {len(self)}")
