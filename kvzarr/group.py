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

Consolidated metadata (:mod:`kvzarr.consolidated`): a group whose ``zarr.json`` holds a
valid copy of the documents below it, or a group reached through one, lists its members
from that copy (one read of the consolidating group's document instead of a listing and
a read per child). Every change made through kvzarr keeps the copy true.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .array import Array
from .consolidated import ConsolidatedView, sync_consolidated, view_or_warn
from .consolidated_v2 import read_v2_view, sync_v2_consolidated
from .engine.config import ArrayConfig
from .engine.config import array_config as _array_config
from .errors import IncompatibleNodeError, NodeExistsError, NodeNotFoundError, NodeTypeError
from .formats import (DOCUMENTS, NODE_DOCUMENTS, check_zarr_format, node_exists,
                      node_keys, parse_documents)
from .hierarchy import new_array, new_group
from .metadata.v2 import ZMETADATA
from .metadata.v3 import ZARR_JSON, ArrayMetadata, GroupMetadata, parse_node_metadata
from .move import move_node
from .node import Node, metadata_key, normalize_path, read_node_metadata
from .stores.base import Store

#: ``consolidated_by`` default: the group's own document decides
_OWN: Any = object()


def node_from_metadata(store: Store, path: str, metadata: ArrayMetadata | GroupMetadata, *,
                       read_only: bool, config: ArrayConfig | None = None,
                       consolidated_by: str | None = _OWN,
                       use_consolidated: bool | None = None) -> "Array | Group":
    """The Array or Group handle for a node whose metadata was read already (for a
    group, ``consolidated_by`` and ``use_consolidated`` as :class:`Group` takes them)."""
    if isinstance(metadata, ArrayMetadata):
        return Array(store, path, metadata, read_only=read_only, config=config)
    return Group(store, path, metadata, read_only=read_only,
                 consolidated_by=consolidated_by, use_consolidated=use_consolidated)


class Group(Node):
    """A Zarr v3 group: a node whose members (arrays and groups) are addressed by
    relative paths, ``g["a/b"]``. Listings read the store each time (one read
    transaction, one snapshot; from the consolidated metadata when the group holds valid
    one, which kvzarr keeps true), so members created by other handles or processes
    appear at once. Creating a member is one store transaction; deleting one
    (``del g[name]``) erases its whole subtree in one store transaction."""

    metadata: GroupMetadata
    _metadata_kind = GroupMetadata

    def __init__(self, store: Store, path: str, metadata: GroupMetadata, *,
                 read_only: bool = False, consolidated_by: str | None = _OWN,
                 use_consolidated: bool | None = None) -> None:
        """``consolidated_by``: the path of the group whose consolidated metadata lists
        this one's members (by default this group, when ``metadata`` holds some);
        ``use_consolidated=False`` never reads consolidated metadata."""
        super().__init__(store, path, metadata, read_only=read_only)
        if consolidated_by is _OWN:
            # a v2 group looks for a .zmetadata of its own (no member in .zgroup says so)
            consolidated_by = path if (metadata.consolidated_metadata is not None
                                       or metadata.zarr_format == 2) else None
        self._use_consolidated = use_consolidated
        self._consolidated_by = None if use_consolidated is False else consolidated_by

    def _view(self, required: bool = False) -> tuple[ConsolidatedView, str] | None:
        """The valid consolidated metadata that lists this group's members, and this
        group's path relative to it; None when there is none (or it does not hold this
        group: then the store is listed). Read afresh each time (one ``get``; parsed
        only when the document changed)."""
        source = self._consolidated_by
        if source is None:
            if required:
                view_or_warn(None, self.path, required=True)   # raises
            return None
        if self.metadata.zarr_format == 2:
            where = f"{source}/{ZMETADATA}" if source else ZMETADATA
            view = view_or_warn(self.store.get(where), source, required,
                                read=read_v2_view, document=ZMETADATA)
        else:
            view = view_or_warn(self.store.get(metadata_key(source)), source, required)
        if view is None:
            return None
        rel = self.path[len(source) + 1:] if source else self.path
        if rel and not isinstance(view.nodes.get(rel), GroupMetadata):
            return None
        return view, rel

    def _child(self, path: str, metadata: ArrayMetadata | GroupMetadata,
               consolidated_by: str | None = _OWN) -> "Array | Group":
        if (consolidated_by is _OWN and isinstance(metadata, GroupMetadata)
                and metadata.consolidated_metadata is None):
            consolidated_by = self._consolidated_by    # reached through this group's
        return node_from_metadata(self.store, path, metadata, read_only=self.read_only,
                                  consolidated_by=consolidated_by,
                                  use_consolidated=self._use_consolidated)

    def _child_path(self, name: str) -> str:
        rel = normalize_path(name)
        if not rel:
            raise NodeNotFoundError("empty member name", path=self.name)
        return f"{self.path}/{rel}" if self.path else rel

    # -- lookup --------------------------------------------------------------------------

    def __getitem__(self, name: str) -> "Array | Group":
        path = self._child_path(name)
        return self._child(path, read_node_metadata(self.store, path,
                                                    self.metadata.zarr_format))

    def get(self, name: str, default: Any = None) -> Any:
        """The member at ``name`` (an Array or a Group), or ``default`` if there is none."""
        try:
            return self[name]
        except NodeNotFoundError:
            return default

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            path = self._child_path(name)
            if self.metadata.zarr_format == 3:
                return self.store.exists(metadata_key(path))
            return any(self.store.exists_many(node_keys(path, self.metadata.zarr_format)))
        except (NodeNotFoundError, ValueError):
            return False

    def _child_dirs(self, fetch: Callable[[list[str]], list[Any]], names: tuple[str, ...]
                    ) -> list[tuple[str, list[Any]]]:
        """(name, what ``fetch`` gives for each of the document ``names`` below it) of
        each child directory, in name order. One read transaction: the listing and the
        fetch see one snapshot, and a SQL store runs its seek steps on one connection."""
        prefix = f"{self.path}/" if self.path else ""
        with self.store.transaction(write=False):
            dirs = [entry[:-1] for entry in self.store.list_dir(prefix)
                    if entry.endswith("/")]
            if not dirs:
                return []
            if len(names) == 1:      # a v3 group: one document per child
                suffix = "/" + names[0]
                return list(zip(dirs, zip(fetch([prefix + d + suffix for d in dirs]))))
            got = fetch([f"{prefix}{d}/{n}" for d in dirs for n in names])
            k = len(names)
            return [(d, got[i * k:(i + 1) * k]) for i, d in enumerate(dirs)]

    def _children(self) -> list[tuple[str, ArrayMetadata | GroupMetadata]]:
        """(name, metadata) of each child, in name order: the children of a group are of
        its own Zarr format (v3 ``zarr.json``; v2 ``.zarray``/``.zgroup`` + ``.zattrs``)."""
        prefix = f"{self.path}/" if self.path else ""
        fmt = self.metadata.zarr_format
        if fmt == 3:
            return [(d, parse_node_metadata(docs[0], prefix + d))
                    for d, docs in self._child_dirs(self.store.get_many, (ZARR_JSON,))
                    if docs[0] is not None]
        names = DOCUMENTS[fmt]
        found = []
        for d, docs in self._child_dirs(self.store.get_many, names):
            node = parse_documents(dict(zip(names, docs)), prefix + d, fmt)
            if node is not None:
                found.append((d, node))
        return found

    def _child_names(self) -> list[str]:
        """The children's names, in name order: from the consolidated metadata, else an
        existence check of each child's documents (none is read)."""
        found = self._view()
        if found is not None:
            view, rel = found
            return list(view.child_names(rel))
        fmt = self.metadata.zarr_format
        if fmt == 3:
            return [d for d, (ok,) in self._child_dirs(self.store.exists_many, (ZARR_JSON,))
                    if ok]
        names = NODE_DOCUMENTS[fmt]
        return [d for d, ok in self._child_dirs(self.store.exists_many, names) if any(ok)]

    def members(self, max_depth: int | None = 0) -> Iterator[tuple[str, "Array | Group"]]:
        """(relative name, node) of the children, in name order; ``max_depth=None`` walks
        the whole subtree (names are then relative paths). From the consolidated
        metadata when there is valid one (see the module docstring), else from the
        store."""
        found = self._view()
        if found is not None:
            yield from self._members_from_view(*found, max_depth)
            return
        prefix = f"{self.path}/" if self.path else ""
        for name, metadata in self._children():
            node = self._child(prefix + name, metadata)
            yield name, node
            if isinstance(node, Group) and (max_depth is None or max_depth > 0):
                deeper = None if max_depth is None else max_depth - 1
                for sub, child in node.members(max_depth=deeper):
                    yield f"{name}/{sub}", child

    def _members_from_view(self, view: ConsolidatedView, rel: str, max_depth: int | None
                           ) -> Iterator[tuple[str, "Array | Group"]]:
        prefix = f"{self.path}/" if self.path else ""
        for name in view.child_names(rel):
            child_rel = f"{rel}/{name}" if rel else name
            node = self._child(prefix + name, view.nodes[child_rel], self._consolidated_by)
            yield name, node
            if isinstance(node, Group) and (max_depth is None or max_depth > 0):
                deeper = None if max_depth is None else max_depth - 1
                for sub, child in node._members_from_view(view, child_rel, deeper):
                    yield f"{name}/{sub}", child

    def keys(self) -> Iterator[str]:
        """The names of the direct members, in name order (one listing, no document
        read)."""
        return iter(self._child_names())

    __iter__ = keys

    def __len__(self) -> int:
        return len(self._child_names())

    def arrays(self) -> Iterator[tuple[str, Array]]:
        """(name, array) of the direct members that are arrays, in name order."""
        return ((n, m) for n, m in self.members() if isinstance(m, Array))

    def groups(self) -> Iterator[tuple[str, "Group"]]:
        """(name, group) of the direct members that are groups, in name order."""
        return ((n, m) for n, m in self.members() if isinstance(m, Group))

    def array_keys(self) -> Iterator[str]:
        """The names of the direct members that are arrays, in name order."""
        return (n for n, _ in self.arrays())

    def group_keys(self) -> Iterator[str]:
        """The names of the direct members that are groups, in name order."""
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
        """Create the group ``name`` (a relative path; missing groups on the way are
        made, all in this group's Zarr format) in one store transaction and return it.
        NodeExistsError if a node is there, unless ``overwrite=True``, which replaces it
        and its subtree."""
        path = self._child_path(name)
        return self._child(path, new_group(self.store, path, attributes=attributes,
                                           overwrite=overwrite,
                                           zarr_format=self.metadata.zarr_format))

    def require_group(self, name: str, *, overwrite: bool = False, **kwargs: Any) -> "Group":
        """The group ``name``, created (with ``kwargs``, see :meth:`create_group`) when
        nothing is there; ``overwrite=True`` always creates it anew (as zarr-python).
        NodeTypeError when an array is there. Check and create are one transaction: on
        a transactional store a concurrent creator's group is returned, not replaced."""
        if overwrite:
            return self.create_group(name, overwrite=True, **kwargs)
        return self._require(name, lambda: self.create_group(name, **kwargs), _check_group)

    def require_groups(self, *names: str) -> tuple["Group", ...]:
        """:meth:`require_group` of each name, in order (as zarr-python)."""
        return tuple(self.require_group(n) for n in names)

    def create_array(self, name: str, **kwargs: Any) -> Array:
        """Create the array ``name`` (a relative path) and return it: the arguments and
        the one-transaction promise of :func:`kvzarr.create_array`; ``zarr_format``
        defaults to this group's."""
        kwargs["zarr_format"] = (check_zarr_format(kwargs.get("zarr_format"))
                                 or self.metadata.zarr_format)
        return new_array(self.store, self._child_path(name),
                         config=_array_config(kwargs.pop("config", None),
                                              kwargs.pop("write_empty_chunks", None)),
                         **kwargs)

    def require_array(self, name: str, *, shape: Any, dtype: Any = None, exact: bool = False,
                      **kwargs: Any) -> Array:
        """The array ``name``, created with ``shape``, ``dtype`` and ``kwargs`` (see
        :meth:`create_array`) when nothing is there. An existing array must have this
        shape and a data type that casts safely to ``dtype`` (equal to it with
        ``exact=True``; ``dtype=None`` means float64, as zarr-python), else
        IncompatibleNodeError; a group there is a NodeTypeError (both TypeErrors, as
        zarr-python raises). Check and create are one transaction."""
        want = tuple(int(n) for n in ((shape,) if isinstance(shape, (int, np.integer))
                                      else shape))

        def check(node: Any) -> Array:
            if not isinstance(node, Array):
                raise NodeTypeError("a group, not an array, is at this path", path=node.name)
            if node.shape != want:
                raise IncompatibleNodeError(f"the array has shape {node.shape}, not {want}",
                                            path=node.name, field="shape")
            asked = np.dtype(dtype)
            if node.dtype != asked if exact else not np.can_cast(node.dtype, asked):
                raise IncompatibleNodeError(
                    f"the array's data type {node.dtype} is not {asked}"
                    + ("" if exact else " and does not cast to it safely"),
                    path=node.name, field="dtype")
            return node

        return self._require(
            name, lambda: self.create_array(name, shape=want, dtype=dtype, **kwargs), check)

    def _require(self, name: str, create: Callable[[], Any], check: Callable[[Any], Any]
                 ) -> Any:
        path = self._child_path(name)
        if self.read_only:
            return check(self[name])
        with self.store.transaction():
            try:
                return check(self[name])
            except NodeNotFoundError:
                pass
            try:
                return create()
            except NodeExistsError:
                # a writer in another process made it first (a store without
                # transactions): take theirs if it fits
                return check(self._child(path, read_node_metadata(
                    self.store, path, self.metadata.zarr_format)))

    # zarr-python's array helpers: keyword-only name and shape, the rest as create_array

    def empty(self, *, name: str, shape: Any, **kwargs: Any) -> Array:
        """A new array whose unwritten elements read as its fill value (the data
        type's zero unless ``fill_value`` is given)."""
        return self.create_array(name, shape=shape, **kwargs)

    def zeros(self, *, name: str, shape: Any, **kwargs: Any) -> Array:
        """A new array that reads as zeros until written."""
        return self.create_array(name, shape=shape, fill_value=0, **kwargs)

    def ones(self, *, name: str, shape: Any, **kwargs: Any) -> Array:
        """A new array that reads as ones until written."""
        return self.create_array(name, shape=shape, fill_value=1, **kwargs)

    def full(self, *, name: str, shape: Any, fill_value: Any, **kwargs: Any) -> Array:
        """A new array that reads as ``fill_value`` until written."""
        return self.create_array(name, shape=shape, fill_value=fill_value, **kwargs)

    def empty_like(self, *, name: str, data: Any, **kwargs: Any) -> Array:
        """:meth:`empty` with the shape and data type of ``data`` (and, for a kvzarr
        array, its chunks and codecs), as zarr-python's ``empty_like``."""
        return self.empty(name=name, **{**_like(data), **kwargs})

    def zeros_like(self, *, name: str, data: Any, **kwargs: Any) -> Array:
        """:meth:`zeros` with the shape and data type (and chunks and codecs) of
        ``data``, as :meth:`empty_like` takes them."""
        return self.zeros(name=name, **{**_like(data), **kwargs})

    def ones_like(self, *, name: str, data: Any, **kwargs: Any) -> Array:
        """:meth:`ones` with the shape and data type (and chunks and codecs) of ``data``,
        as :meth:`empty_like` takes them."""
        return self.ones(name=name, **{**_like(data), **kwargs})

    def full_like(self, *, name: str, data: Any, **kwargs: Any) -> Array:
        """:meth:`full` like ``data``; the fill value is ``data``'s when it is a kvzarr
        array and none is given."""
        like = _like(data)
        if isinstance(data, Array):
            like["fill_value"] = data.fill_value
        return self.full(name=name, **{**like, **kwargs})

    def move(self, source: str, dest: str) -> None:
        """Move the member ``source`` with everything below it to ``dest`` (both
        relative to this group), making missing groups above ``dest``. One write
        transaction: on a transactional store readers and a crash see the node at one
        path or the other, never both or neither; consolidated metadata above either
        path is updated with it. What a crash leaves on a store without transactions is
        described in :mod:`kvzarr.move`. NodeNotFoundError without a ``source``,
        NodeExistsError when something is stored at ``dest``. Handles opened on the old
        path are not moved with it."""
        self._check_writable()
        move_node(self.store, self._child_path(source), self._child_path(dest),
                  self.metadata.zarr_format)

    def __delitem__(self, name: str) -> None:
        """Delete the member ``name`` and everything below it in one write transaction,
        with the consolidated metadata above it."""
        self._check_writable()
        path = self._child_path(name)
        with self.store.transaction():
            if not node_exists(self.store, path):
                raise NodeNotFoundError("no such member", path="/" + path)
            self.store.erase_prefix(path + "/")
            if self.metadata.zarr_format == 3:
                sync_consolidated(self.store, removed=[path])
            else:
                sync_v2_consolidated(self.store, removed=[path])

    def __repr__(self) -> str:
        return f"<kvzarr.Group {self.name!r}>"

    @property
    def info(self) -> str:
        """A short text summary: path, store, number of members."""
        return (f"Type       : Group\nZarr format: 3\nPath       : {self.name}\n"
                f"Store      : {self.store!r}\nMembers    : {len(self)}")


def _check_group(node: Any) -> "Group":
    if not isinstance(node, Group):
        raise NodeTypeError("an array, not a group, is at this path", path=node.name)
    return node


def _like(data: Any) -> dict[str, Any]:
    """The creation arguments an ``*_like`` call takes from ``data``: shape and data
    type; for a kvzarr array also its stored chunk shape, codecs, chunk key encoding
    and dimension names."""
    if isinstance(data, Array):
        md = data.metadata
        chunks: Any = ([list(s) for s in data.write_chunk_sizes]
                       if md.chunk_grid_name != "regular" else md.chunk_grid.chunk_shape)
        like = {"shape": data.shape, "dtype": md.data_type.numpy_dtype, "chunks": chunks,
                "codecs": list(md.codecs), "chunk_key_encoding": md.chunk_key_encoding}
        if md.dimension_names is not None:
            like["dimension_names"] = md.dimension_names
        return like
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        data = np.asarray(data)
    return {"shape": tuple(data.shape), "dtype": data.dtype}
