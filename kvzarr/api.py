"""The functions users call first, named as zarr-python names them: ``open``,
``open_array``, ``open_group``, ``create_array``, ``create_group`` and friends.

``store`` may be a Store, a path or URL (see :func:`kvzarr.stores.open_store`), or None
for a new in-memory store. ``transformers=[...]`` puts storage transformers between the
node and the store (:mod:`kvzarr.transformers`), listed from the node down to the store:
names (``"cache"``, ``"checksum"``, ``"append_shards"``), dicts of a name and options, or
transformer instances. ``mode`` follows zarr-python: ``r`` read-only, ``r+`` must
exist, ``a`` open or create (default), ``w`` create and overwrite, ``w-`` create, fail
if something is there.

Who closes the store: a node opened from a path or URL owns the store the function
opened, and ``node.close()`` (or ``with kvzarr.open(path) as node:``) closes it; if the
function fails, that store is closed before the error leaves it. A Store object passed
in stays open: it is the caller's to close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .array import Array
from .consolidated import consolidate
from .consolidated_v2 import consolidate_v2
from .engine.config import array_config as _config
from .errors import MetadataError, NodeNotFoundError, NodeTypeError, StoreConfigError
from .formats import check_zarr_format, read_node
from .group import Group, node_from_metadata
from .hierarchy import array_metadata, hierarchy_format, new_array, new_group
from .metadata.v3 import ArrayMetadata, GroupMetadata
from .node import normalize_path, read_node_metadata
from .stores import Store
from .stores import open_store as _open_plain_store
from .transformers import build_stack

_MODES = ("r", "r+", "a", "w", "w-")


def open_store(target: Any = None, *, mode: str = "a", transformers: Any = None) -> Store:
    """The store for ``target`` (a Store, a path or URL, or None for a new MemoryStore;
    see :func:`kvzarr.stores.open_store`), with ``transformers`` stacked on it; returns the
    top of the stack. ``mode="r"`` opens read-only. A store this call opened is closed
    again if the stack cannot be built."""
    if mode not in _MODES:
        raise StoreConfigError(f"mode must be one of {_MODES}, got {mode!r}", field="mode")
    store = _open_plain_store(target, mode=mode)
    if transformers is None:
        return store
    try:
        return build_stack(store, transformers)
    except BaseException:
        if store is not target:
            store.close()
        raise


def _owned(target: Any, mode: str, transformers: Any, make: Callable[[Store], Any]) -> Any:
    """``make(store)`` on the store for ``target``. When this call opened it (a path or
    URL), the node returned owns it (``node.close()`` closes it) and a failure closes it
    again; a Store passed in stays the caller's. Callers check their arguments first, so
    that bad ones raise before any file is made."""
    st = open_store(target, mode=mode, transformers=transformers)
    if isinstance(target, Store):
        return make(st)
    try:
        node = make(st)
    except BaseException:
        st.close()
        raise
    node._owns_store = True
    return node


def _existing(store: Store, path: str, zarr_format: int | None = None
              ) -> ArrayMetadata | GroupMetadata | None:
    return read_node(store, path, zarr_format)


def create_array(store: Any = None, *, name: str | None = None, shape: Any = None,
                 dtype: Any = None, data: Any = None, chunks: Any = "auto",
                 shards: Any = None, fill_value: Any = None, filters: Any = None,
                 compressors: Any = "auto", serializer: Any = "auto", codecs: Any = None,
                 dimension_names: Any = None, attributes: dict[str, Any] | None = None,
                 chunk_key_encoding: Any = None, overwrite: bool = False,
                 config: Any = None, write_empty_chunks: bool | None = None,
                 mode: str = "a", transformers: Any = None, zarr_format: int | None = None,
                 order: str | None = None) -> Array:
    """Create an array at ``name`` (the root by default) of ``store`` and return it.
    With ``data``, shape and dtype default to the data's and the data is written.

    ``zarr_format``: 3, or 2 for a Zarr v2 array as zarr-python 3 writes one
    (``compressors`` is then one numcodecs codec, ``filters`` numcodecs codecs, ``order``
    "C" or "F"; see :func:`kvzarr.creation.build_v2_metadata`); None (the default) takes
    the format of the group it goes into, v3 at the top of a store. A node never goes
    into a group of the other format (MetadataError).

    ``chunks`` (a shape, or per dimension a list of chunk sizes for a rectilinear grid,
    summing to at least the extent: the last chunks may pass it),
    ``shards`` (the shard shape; ``chunks`` are then the inner chunks), ``filters``,
    ``compressors``, ``serializer`` (or the whole ``codecs`` list), ``fill_value``,
    ``dimension_names``, ``attributes`` and ``chunk_key_encoding`` are stored in the
    array's metadata, with zarr-python's meanings and defaults. ``config``
    (:class:`ArrayConfig`) and ``write_empty_chunks`` are runtime settings of this handle.

    One store transaction: clearing the path (``overwrite=True``; else
    :class:`~kvzarr.errors.NodeExistsError` if a node is there), making missing parent
    groups, writing the metadata and the data. On a transactional store a failure or a
    crash leaves none of it; on a directory each key is written atomically, one by one.
    Every argument is checked before the store is opened: bad ones raise without
    creating a file, directory or key."""
    cfg = _config(config, write_empty_chunks)
    node_path = normalize_path(name)
    asked = check_zarr_format(zarr_format)
    options = dict(chunks=chunks, shards=shards, fill_value=fill_value, filters=filters,
                   compressors=compressors, serializer=serializer, codecs=codecs,
                   dimension_names=dimension_names, attributes=attributes,
                   chunk_key_encoding=chunk_key_encoding)
    if order is not None:
        options["order"] = order

    def metadata_in(fmt: int) -> tuple[ArrayMetadata, Any]:
        return array_metadata(config=cfg, data=data, shape=shape, dtype=dtype,
                              zarr_format=fmt, **options)
    metadata, values = metadata_in(asked or 3)     # checked before the store is opened

    def make(st: Store) -> Array:
        found, fmt_values = metadata, values
        fmt = asked or hierarchy_format(st, node_path)
        if fmt != metadata.zarr_format:
            found, fmt_values = metadata_in(fmt)
        return new_array(st, node_path, config=cfg, overwrite=overwrite, data=fmt_values,
                         metadata=found)
    return _owned(store, mode, transformers, make)


def create_group(store: Any = None, *, path: str | None = None,
                 attributes: dict[str, Any] | None = None, overwrite: bool = False,
                 mode: str = "a", transformers: Any = None,
                 zarr_format: int | None = None) -> Group:
    """Create a group at ``path`` (the root by default) of ``store`` and return it, in
    one store transaction with any missing parent groups. A node already there raises
    :class:`~kvzarr.errors.NodeExistsError` unless ``overwrite=True``, which erases it
    and everything below it in the same transaction. ``zarr_format`` as for
    :func:`create_array`. Bad attributes raise before the store is opened."""
    node_path = normalize_path(path)
    asked = check_zarr_format(zarr_format)
    if asked == 1:
        raise MetadataError("kvzarr reads Zarr v1 but creates v3 and v2 nodes",
                            field="zarr_format")
    GroupMetadata(attributes=dict(attributes or {})).to_bytes()   # checks them

    def make(st: Store) -> Group:
        fmt = asked or hierarchy_format(st, node_path)
        return Group(st, node_path, new_group(st, node_path, attributes=attributes,
                                              overwrite=overwrite, zarr_format=fmt))
    return _owned(store, mode, transformers, make)


def open_array(store: Any = None, *, mode: str = "a", path: str | None = None,
               transformers: Any = None,
               name: str | None = None, config: Any = None,
               write_empty_chunks: bool | None = None, zarr_format: int | None = None,
               **kwargs: Any) -> Array:
    """Open the array at ``path`` (``name`` is an alias); with mode "a" and a ``shape``
    (or ``data``) create it when absent, with "w"/"w-" create it (``kwargs`` are
    :func:`create_array`'s). :class:`~kvzarr.errors.NodeNotFoundError` when nothing is
    there, :class:`~kvzarr.errors.NodeTypeError` when a group is. The handle holds the
    metadata as read now: another process's resize is seen by a new handle.
    ``zarr_format``: None finds an array of any format (Zarr v3, v2 or v1; a
    ``zarr.json`` wins over v2 documents beside it, as zarr-python 3 reads such a node),
    3, 2 or 1 only that one; a new array takes it as :func:`create_array` does."""
    node_path = normalize_path(path if path is not None else name)
    cfg = _config(config, write_empty_chunks)
    fmt = check_zarr_format(zarr_format)
    if mode in ("w", "w-"):   # (the arguments are checked before the store is opened)
        return create_array(store, name=node_path, overwrite=(mode == "w"), config=cfg,
                            mode=mode, transformers=transformers, zarr_format=fmt,
                            **kwargs)

    def make(st: Store) -> Array:
        found = _existing(st, node_path, fmt)
        if found is None:
            if mode == "a" and ("shape" in kwargs or "data" in kwargs):
                return create_array(st, name=node_path, config=cfg, zarr_format=fmt,
                                    **kwargs)
            raise NodeNotFoundError("no array found", path="/" + node_path)
        if not isinstance(found, ArrayMetadata):
            raise NodeTypeError("a group, not an array, is at this path",
                                path="/" + node_path)
        return Array(st, node_path, found, read_only=(mode == "r"), config=cfg)
    return _owned(store, mode, transformers, make)


def open_group(store: Any = None, *, mode: str = "a", path: str | None = None,
               transformers: Any = None,
               attributes: dict[str, Any] | None = None,
               use_consolidated: bool | None = None,
               zarr_format: int | None = None) -> Group:
    """Open the group at ``path`` (the root by default); with mode "a" create it when
    absent, with "w" replace whatever is there (erasing it, in one transaction), with
    "w-" create it and fail if anything is there. ``mode="r"`` opens read-only: every
    write through the group and its members raises :class:`~kvzarr.errors.ReadOnlyError`.

    ``use_consolidated`` (as zarr-python): None lists members from the group's
    consolidated metadata when it holds valid one (:mod:`kvzarr.consolidated`), else from
    the store; True requires it (MetadataError when it is absent or not valid); False
    always lists the store. ``zarr_format`` as for :func:`open_array`."""
    node_path = normalize_path(path)
    fmt = check_zarr_format(zarr_format)
    if mode in ("w", "w-"):   # (the arguments are checked before the store is opened)
        return create_group(store, path=node_path, attributes=attributes,
                            overwrite=(mode == "w"), mode=mode, transformers=transformers,
                            zarr_format=fmt)

    def make(st: Store) -> Group:
        found = _existing(st, node_path, fmt)
        if found is None:
            if mode == "a":
                return create_group(st, path=node_path, attributes=attributes,
                                    zarr_format=fmt)
            raise NodeNotFoundError("no group found", path="/" + node_path)
        if not isinstance(found, GroupMetadata):
            raise NodeTypeError("an array, not a group, is at this path",
                                path="/" + node_path)
        group = Group(st, node_path, found, read_only=(mode == "r"),
                      use_consolidated=use_consolidated)
        if use_consolidated:
            group._view(required=True)
        return group
    return _owned(store, mode, transformers, make)


def consolidate_metadata(store: Any, path: str | None = None, *,
                         transformers: Any = None) -> Group:
    """Write consolidated metadata into the ``zarr.json`` of the group at ``path`` (the
    root by default): the document of every node below it, in the form zarr-python 3
    writes (see :mod:`kvzarr.consolidated`; for a Zarr v2 group a ``.zmetadata``, see
    :mod:`kvzarr.consolidated_v2`), so that zarr-python, xarray
    (``consolidated=True``) and kvzarr list the hierarchy from one read. Returns the
    group. One write transaction; from then on every change kvzarr makes below the
    group keeps it true. Also the repair after another tool changed the hierarchy
    without updating it. NodeNotFoundError / NodeTypeError without a group at
    ``path``."""
    st = open_store(store, mode="r+", transformers=transformers)
    node_path = normalize_path(path)
    try:
        found = read_node(st, node_path)
        if isinstance(found, GroupMetadata) and found.zarr_format == 2:
            consolidate_v2(st, node_path)       # .zmetadata, as zarr-python writes it
            return Group(st, node_path, found)
        return Group(st, node_path, consolidate(st, node_path))
    except BaseException:
        if not isinstance(store, Store):    # opened here (a stack closes its store)
            st.close()
        raise


def open(store: Any = None, *, mode: str = "a", path: str | None = None,
         transformers: Any = None, **kwargs: Any) -> Array | Group:
    """Open whatever is at ``path``: an Array or a Group. If nothing is there, create an
    array when ``shape`` is given, else a group (modes "a", "w", "w-")."""
    use_consolidated = kwargs.pop("use_consolidated", None)   # for a group (open_group)
    fmt = check_zarr_format(kwargs.pop("zarr_format", None))
    if fmt is not None:
        kwargs["zarr_format"] = fmt
    node_path = normalize_path(path)
    if mode in ("w", "w-"):   # (the arguments are checked before the store is opened)
        if "shape" in kwargs or "data" in kwargs:
            return open_array(store, mode=mode, path=node_path, transformers=transformers,
                              **kwargs)
        return open_group(store, mode=mode, path=node_path, transformers=transformers,
                          **kwargs)

    def make(st: Store) -> Array | Group:
        found = _existing(st, node_path, fmt)
        if found is None and mode == "a" and "shape" in kwargs:
            return open_array(st, mode=mode, path=node_path, **kwargs)
        if found is None:
            if mode == "a":
                return create_group(st, path=node_path, **kwargs)
            raise NodeNotFoundError("no array or group found", path="/" + node_path)
        config = _config(kwargs.pop("config", None), kwargs.pop("write_empty_chunks", None))
        node = node_from_metadata(st, node_path, found, read_only=(mode == "r"),
                                  config=config, use_consolidated=use_consolidated)
        if use_consolidated and isinstance(node, Group):
            node._view(required=True)
        return node
    return _owned(store, mode, transformers, make)


def group(store: Any = None, **kwargs: Any) -> Group:
    """:func:`open_group` (zarr-python's ``zarr.group``)."""
    return open_group(store, **kwargs)


def array(data: Any, store: Any = None, **kwargs: Any) -> Array:
    """A new array holding ``data`` (its shape and dtype unless given):
    :func:`create_array` with ``data``."""
    return create_array(store, data=data, **kwargs)


def full(shape: Any, fill_value: Any, store: Any = None, **kwargs: Any) -> Array:
    """A new array of ``shape`` that reads as ``fill_value`` everywhere (no chunk is
    written): :func:`create_array` with that fill value."""
    return create_array(store, shape=shape, fill_value=fill_value, **kwargs)


def zeros(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    """A new array of ``shape`` that reads as 0 (fill value 0; nothing is written)."""
    return create_array(store, shape=shape, fill_value=0, **kwargs)


def ones(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    """A new array of ``shape`` that reads as 1 (fill value 1; nothing is written)."""
    return create_array(store, shape=shape, fill_value=1, **kwargs)


__all__ = ["array", "consolidate_metadata", "create_array", "create_group", "full", "group",
           "ones", "open", "open_array", "open_group", "open_store", "read_node_metadata",
           "zeros"]
