"""The functions users call first, named as zarr-python names them: ``open``,
``open_array``, ``open_group``, ``create_array``, ``create_group`` and friends.

``store`` may be a Store, a path or URL (see :func:`kvzarr.stores.open_store`), or None
for a new in-memory store. ``mode`` follows zarr-python: ``r`` read-only, ``r+`` must
exist, ``a`` open or create (default), ``w`` create and overwrite, ``w-`` create, fail
if something is there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .array import Array
from .chunk_io import DEFAULT_CONFIG, ArrayConfig
from .creation import build_array_metadata
from .errors import (MetadataError, NodeExistsError, NodeNotFoundError, NodeTypeError,
                     StoreConfigError)
from .group import Group, node_from_metadata
from .memo import BoundedMemo
from .metadata.v3 import ArrayMetadata, GroupMetadata, load_json, parse_node_metadata
from .node import metadata_key, normalize_path, read_node_metadata
from .stores import Store, open_store

_MODES = ("r", "r+", "a", "w", "w-")


def _store_for(store: Any, mode: str) -> Store:
    if mode not in _MODES:
        raise StoreConfigError(f"mode must be one of {_MODES}, got {mode!r}", field="mode")
    return open_store(store, mode=mode)


def _config(config: Any, write_empty_chunks: bool | None) -> ArrayConfig:
    if config is None and write_empty_chunks is None:
        return DEFAULT_CONFIG
    if isinstance(config, ArrayConfig):
        cfg = config
    else:
        cfg = ArrayConfig(**(config or {}))
    if write_empty_chunks is not None:
        from dataclasses import replace
        cfg = replace(cfg, write_empty_chunks=write_empty_chunks)
    return cfg


def _existing(store: Store, path: str) -> ArrayMetadata | GroupMetadata | None:
    data = store.get(metadata_key(path))
    return None if data is None else parse_node_metadata(data, "/" + path)


def _prepare_node_path(store: Store, path: str, overwrite: bool) -> None:
    """Inside a write transaction: clear ``path`` (or fail) and make sure its ancestors
    are groups. Walks up from the parent to the nearest ancestor that exists, creating
    the missing groups on the way: an existing group got its own ancestors when it was
    made, so the common case (the parent exists) costs one read."""
    if store.exists(metadata_key(path)) or (overwrite and path and any(
            True for _ in store.list_prefix(path + "/"))):
        if not overwrite:
            raise NodeExistsError("a node already exists; pass overwrite=True to replace it",
                                  path="/" + path)
        store.erase_prefix(path + "/" if path else "")
    if not path:
        return
    ancestor = path
    missing = []
    while ancestor:
        ancestor = ancestor.rpartition("/")[0]
        data = store.get(metadata_key(ancestor))
        if data is None:
            missing.append(ancestor)
            continue
        if _node_type(data, ancestor) != "group":
            raise NodeTypeError("an ancestor of the new node is an array",
                                path="/" + ancestor)
        break
    if missing:
        empty = GroupMetadata().to_bytes()
        store.set_many([(metadata_key(a), empty) for a in missing])


#: zarr.json bytes -> node_type of small documents: the parent of many new arrays is
#: read once per create
_NODE_TYPES = BoundedMemo(256)
_NODE_TYPE_DOC_MAX = 4096


def _node_type(data: bytes, path: str) -> str:
    """The node_type of a zarr.json document, read without building its metadata."""
    node_type = _NODE_TYPES.get(data)
    if node_type is None:
        doc = load_json(data, "/" + path)
        node_type = doc.get("node_type")
        if doc.get("zarr_format") != 3 or node_type not in ("array", "group"):
            # not a v3 node: let the full parser say what is wrong with it
            parse_node_metadata(doc, "/" + path)
        if len(data) <= _NODE_TYPE_DOC_MAX:
            _NODE_TYPES.keep(data, node_type)
    return node_type


def create_array(store: Any = None, *, name: str | None = None, shape: Any = None,
                 dtype: Any = None, data: Any = None, chunks: Any = "auto",
                 shards: Any = None, fill_value: Any = None, filters: Any = None,
                 compressors: Any = "auto", serializer: Any = "auto", codecs: Any = None,
                 dimension_names: Any = None, attributes: dict[str, Any] | None = None,
                 chunk_key_encoding: Any = None, overwrite: bool = False,
                 config: Any = None, write_empty_chunks: bool | None = None,
                 mode: str = "a") -> Array:
    """Create an array and return it. With ``data``, shape and dtype default to the
    data's and the data is written."""
    store = _store_for(store, mode)
    path = normalize_path(name)
    if data is not None:
        data = np.asanyarray(data[...] if isinstance(data, Array) else data)
        shape = data.shape if shape is None else shape
        dtype = data.dtype if dtype is None else dtype
    if shape is None:
        raise MetadataError("create_array needs a shape (or data)", field="shape")
    metadata = build_array_metadata(
        shape=shape, dtype=dtype, chunks=chunks, shards=shards, fill_value=fill_value,
        filters=filters, compressors=compressors, serializer=serializer, codecs=codecs,
        dimension_names=dimension_names, attributes=attributes,
        chunk_key_encoding=chunk_key_encoding)
    cfg = _config(config, write_empty_chunks)
    # The Array builds and validates the codec pipeline before anything is written, and
    # its metadata carries the codecs with their defaults filled in.
    array = Array(store, path, metadata, config=cfg)
    with store.transaction():
        _prepare_node_path(store, path, overwrite)
        store.set(metadata_key(path), array.metadata.to_bytes())
        if data is not None:
            array[...] = data
    return array


def create_group(store: Any = None, *, path: str | None = None,
                 attributes: dict[str, Any] | None = None, overwrite: bool = False,
                 mode: str = "a") -> Group:
    store = _store_for(store, mode)
    path = normalize_path(path)
    metadata = GroupMetadata(attributes=dict(attributes or {}))
    with store.transaction():
        _prepare_node_path(store, path, overwrite)
        store.set(metadata_key(path), metadata.to_bytes())
    return Group(store, path, metadata)


def open_array(store: Any = None, *, mode: str = "a", path: str | None = None,
               name: str | None = None, config: Any = None,
               write_empty_chunks: bool | None = None, **kwargs: Any) -> Array:
    """Open an existing array; with mode "a"/"w"/"w-" and a shape, create it."""
    st = _store_for(store, mode)
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


def open_group(store: Any = None, *, mode: str = "a", path: str | None = None,
               attributes: dict[str, Any] | None = None) -> Group:
    """Open a group; with mode "a" create it when absent, with "w"/"w-" create it."""
    st = _store_for(store, mode)
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


def open(store: Any = None, *, mode: str = "a", path: str | None = None,
         **kwargs: Any) -> Array | Group:
    """Open whatever is at ``path``: an Array or a Group. If nothing is there, create an
    array when ``shape`` is given, else a group (modes "a", "w", "w-")."""
    st = _store_for(store, mode)
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
           "open_array", "open_group", "read_node_metadata", "zeros"]
