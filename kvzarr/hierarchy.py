"""Making new nodes in a hierarchy: clearing the path (or refusing to), creating the
missing ancestor groups, writing the node's ``zarr.json`` (and an array's data) and
updating the consolidated metadata of the groups above that hold it
(:func:`kvzarr.consolidated.sync_consolidated`), all in one store transaction. ``api``
and ``Group`` both create through here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .array import Array, build_pipeline
from .consolidated import parsed_document, sync_consolidated
from .creation import build_array_metadata
from .engine.config import ArrayConfig
from .errors import MetadataError, NodeExistsError, NodeTypeError
from .metadata.v3 import ArrayMetadata, GroupMetadata, load_json, parse_node_metadata
from .node import metadata_key
from .runtime.memo import BoundedMemo
from .stores.base import Store


def array_metadata(*, config: ArrayConfig, data: Any = None, shape: Any = None,
                   dtype: Any = None, **options: Any) -> tuple[ArrayMetadata, Any]:
    """The metadata of a new array, checked all through (the codec pipeline included),
    and ``data`` as an array (or None), without touching any store: what
    :func:`new_array` writes. With ``data``, shape and dtype default to the data's."""
    if data is not None:
        data = np.asanyarray(data[...] if isinstance(data, Array) else data)
        shape = data.shape if shape is None else shape
        dtype = data.dtype if dtype is None else dtype
    if shape is None:
        raise MetadataError("create_array needs a shape (or data)", field="shape")
    metadata = build_array_metadata(shape=shape, dtype=dtype, **options)
    build_pipeline(metadata, config)   # validates the codecs against the chunk shapes
    return metadata, data


def new_array(store: Store, path: str, *, config: ArrayConfig, overwrite: bool = False,
              data: Any = None, shape: Any = None, dtype: Any = None,
              metadata: ArrayMetadata | None = None, **options: Any) -> Array:
    """Create the array at ``path`` (normalised) and return it. With ``data``, shape and
    dtype default to the data's and the data is written. ``options`` are the metadata
    arguments of :func:`kvzarr.create_array`; ``metadata`` (from :func:`array_metadata`)
    replaces them all."""
    if metadata is None:
        metadata, data = array_metadata(config=config, data=data, shape=shape, dtype=dtype,
                                        **options)
    # The Array builds and validates the codec pipeline before anything is written, and
    # its metadata carries the codecs with their defaults filled in.
    array = Array(store, path, metadata, config=config)
    with store.transaction():
        made, cleared, seen = prepare_node_path(store, path, overwrite)
        store.set(metadata_key(path), array.metadata.to_bytes())
        if data is not None:
            array[...] = data
        sync_consolidated(store, changed=[*made, path], removed=[path] if cleared else (),
                          known=seen)
    return array


def new_group(store: Store, path: str, *, attributes: dict[str, Any] | None = None,
              overwrite: bool = False) -> GroupMetadata:
    """Create the group at ``path`` (normalised); return its metadata."""
    metadata = GroupMetadata(attributes=dict(attributes or {}))
    with store.transaction():
        made, cleared, seen = prepare_node_path(store, path, overwrite)
        store.set(metadata_key(path), metadata.to_bytes())
        sync_consolidated(store, changed=[*made, path], removed=[path] if cleared else (),
                          known=seen)
    return metadata


def prepare_node_path(store: Store, path: str, overwrite: bool
                      ) -> tuple[list[str], bool, dict[str, bytes]]:
    """Inside a write transaction: clear ``path`` (or fail) and make sure its ancestors
    are groups. Walks up from the parent to the nearest ancestor that exists, creating
    the missing groups on the way: an existing group got its own ancestors when it was
    made, so the common case (the parent exists) costs one read. Returns the paths of
    the groups it made, whether it erased something at ``path``, and the ancestors'
    documents it read or wrote (for :func:`sync_consolidated`, which need not read them
    again)."""
    cleared = False
    if store.exists(metadata_key(path)) or (overwrite and path and any(
            True for _ in store.list_prefix(path + "/"))):
        if not overwrite:
            raise NodeExistsError("a node already exists; pass overwrite=True to replace it",
                                  path="/" + path)
        store.erase_prefix(path + "/" if path else "")
        cleared = True
    if not path:
        return [], cleared, {}
    ancestor = path
    missing = []
    seen = {}
    while ancestor:
        ancestor = ancestor.rpartition("/")[0]
        data = store.get(metadata_key(ancestor))
        if data is None:
            missing.append(ancestor)
            continue
        if _node_type(data, ancestor) != "group":
            raise NodeTypeError("an ancestor of the new node is an array",
                                path="/" + ancestor)
        seen[ancestor] = data
        break
    if missing:
        empty = GroupMetadata().to_bytes()
        store.set_many([(metadata_key(a), empty) for a in missing])
        seen.update((a, empty) for a in missing)
    return missing, cleared, seen


#: zarr.json bytes -> node_type of small documents: the parent of many new arrays is
#: read once per create
_NODE_TYPES = BoundedMemo(256)
_NODE_TYPE_DOC_MAX = 4096


def _node_type(data: bytes, path: str) -> str:
    """The node_type of a zarr.json document, read without building its metadata."""
    node_type = _NODE_TYPES.get(data)
    if node_type is None:
        # a large document is mostly a consolidating group's, which this process may
        # have just written: read back without parsing
        doc = parsed_document(data, path) if len(data) > _NODE_TYPE_DOC_MAX \
            else load_json(data, "/" + path)
        node_type = doc.get("node_type")
        if doc.get("zarr_format") != 3 or node_type not in ("array", "group"):
            # not a v3 node: let the full parser say what is wrong with it
            parse_node_metadata(doc, "/" + path)
        if len(data) <= _NODE_TYPE_DOC_MAX:
            _NODE_TYPES.keep(data, node_type)
    return node_type
