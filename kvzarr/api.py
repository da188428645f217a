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

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .array import Array
from .engine.config import array_config as _config
from .errors import NodeNotFoundError, NodeTypeError, StoreConfigError
from .group import Group, node_from_metadata
from .hierarchy import new_array, new_group
from .metadata.v3 import ArrayMetadata, GroupMetadata, parse_node_metadata
from .node import metadata_key, normalize_path, read_node_metadata
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


_Opener = TypeVar("_Opener", bound=Callable[..., Any])


def _owning(opener: _Opener) -> _Opener:
    """Make ``opener(store, ...)`` open a path or URL itself, so the node it returns owns
    that store (``node.close()`` closes it) and a failure closes it again. A Store passed
    in goes through untouched and stays the caller's."""
    @functools.wraps(opener)
    def call(*args: Any, **kwargs: Any) -> Any:
        target = args[0] if args else kwargs.pop("store", None)
        if isinstance(target, Store):
            return opener(target, *args[1:], **kwargs)
        st = open_store(target, mode=kwargs.get("mode", "a"),
                        transformers=kwargs.pop("transformers", None))
        try:
            node = opener(st, *args[1:], **kwargs)
        except BaseException:
            st.close()
            raise
        node._owns_store = True
        return node
    return call  # type: ignore[return-value]


def _existing(store: Store, path: str) -> ArrayMetadata | GroupMetadata | None:
    data = store.get(metadata_key(path))
    return None if data is None else parse_node_metadata(data, "/" + path)


@_owning
def create_array(store: Any = None, *, name: str | None = None, shape: Any = None,
                 dtype: Any = None, data: Any = None, chunks: Any = "auto",
                 shards: Any = None, fill_value: Any = None, filters: Any = None,
                 compressors: Any = "auto", serializer: Any = "auto", codecs: Any = None,
                 dimension_names: Any = None, attributes: dict[str, Any] | None = None,
                 chunk_key_encoding: Any = None, overwrite: bool = False,
                 config: Any = None, write_empty_chunks: bool | None = None,
                 mode: str = "a", transformers: Any = None) -> Array:
    """Create an array and return it. With ``data``, shape and dtype default to the
    data's and the data is written."""
    return new_array(
        open_store(store, mode=mode, transformers=transformers), normalize_path(name),
        config=_config(config, write_empty_chunks),
        overwrite=overwrite, data=data, shape=shape, dtype=dtype, chunks=chunks,
        shards=shards, fill_value=fill_value, filters=filters, compressors=compressors,
        serializer=serializer, codecs=codecs, dimension_names=dimension_names,
        attributes=attributes, chunk_key_encoding=chunk_key_encoding)


@_owning
def create_group(store: Any = None, *, path: str | None = None,
                 attributes: dict[str, Any] | None = None, overwrite: bool = False,
                 mode: str = "a", transformers: Any = None) -> Group:
    st = open_store(store, mode=mode, transformers=transformers)
    node_path = normalize_path(path)
    return Group(st, node_path, new_group(st, node_path, attributes=attributes,
                                          overwrite=overwrite))


@_owning
def open_array(store: Any = None, *, mode: str = "a", path: str | None = None,
               transformers: Any = None,
               name: str | None = None, config: Any = None,
               write_empty_chunks: bool | None = None, **kwargs: Any) -> Array:
    """Open an existing array; with mode "a"/"w"/"w-" and a shape, create it."""
    st = open_store(store, mode=mode, transformers=transformers)
    node_path = normalize_path(path if path is not None else name)
    cfg = _config(config, write_empty_chunks)
    if mode in ("w", "w-"):
        return create_array(st, name=node_path, overwrite=(mode == "w"), config=cfg, **kwargs)
    found = _existing(st, node_path)
    if found is None:
        if mode == "a" and ("shape" in kwargs or "data" in kwargs):
            return create_array(st, name=node_path, config=cfg, **kwargs)
        raise NodeNotFoundError("no array found", path="/" + node_path)
    if not isinstance(found, ArrayMetadata):
        raise NodeTypeError("a group, not an array, is at this path", path="/" + node_path)
    return Array(st, node_path, found, read_only=(mode == "r"), config=cfg)


@_owning
def open_group(store: Any = None, *, mode: str = "a", path: str | None = None,
               transformers: Any = None,
               attributes: dict[str, Any] | None = None) -> Group:
    """Open a group; with mode "a" create it when absent, with "w"/"w-" create it."""
    st = open_store(store, mode=mode, transformers=transformers)
    node_path = normalize_path(path)
    if mode in ("w", "w-"):
        return create_group(st, path=node_path, attributes=attributes, overwrite=(mode == "w"))
    found = _existing(st, node_path)
    if found is None:
        if mode == "a":
            return create_group(st, path=node_path, attributes=attributes)
        raise NodeNotFoundError("no group found", path="/" + node_path)
    if not isinstance(found, GroupMetadata):
        raise NodeTypeError("an array, not a group, is at this path", path="/" + node_path)
    return Group(st, node_path, found, read_only=(mode == "r"))


@_owning
def open(store: Any = None, *, mode: str = "a", path: str | None = None,
         transformers: Any = None, **kwargs: Any) -> Array | Group:
    """Open whatever is at ``path``: an Array or a Group. If nothing is there, create an
    array when ``shape`` is given, else a group (modes "a", "w", "w-")."""
    st = open_store(store, mode=mode, transformers=transformers)
    node_path = normalize_path(path)
    found = None if mode in ("w", "w-") else _existing(st, node_path)
    if mode in ("w", "w-") or ("shape" in kwargs and mode == "a" and found is None):
        if "shape" in kwargs or "data" in kwargs:
            return open_array(st, mode=mode, path=node_path, **kwargs)
        return open_group(st, mode=mode, path=node_path, **kwargs)
    if found is None:
        if mode == "a":
            return create_group(st, path=node_path, **kwargs)
        raise NodeNotFoundError("no array or group found", path="/" + node_path)
    config = _config(kwargs.pop("config", None), kwargs.pop("write_empty_chunks", None))
    return node_from_metadata(st, node_path, found, read_only=(mode == "r"), config=config)


def group(store: Any = None, **kwargs: Any) -> Group:
    return open_group(store, **kwargs)


def array(data: Any, store: Any = None, **kwargs: Any) -> Array:
    return create_array(store, data=data, **kwargs)


def full(shape: Any, fill_value: Any, store: Any = None, **kwargs: Any) -> Array:
    return create_array(store, shape=shape, fill_value=fill_value, **kwargs)


def zeros(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    return create_array(store, shape=shape, fill_value=0, **kwargs)


def ones(shape: Any, store: Any = None, **kwargs: Any) -> Array:
    return create_array(store, shape=shape, fill_value=1, **kwargs)


__all__ = ["array", "create_array", "create_group", "full", "group", "ones", "open",
           "open_array", "open_group", "open_store", "read_node_metadata", "zeros"]
