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
from .consolidated_v2 import sync_v2_consolidated
from .creation import build_array_metadata, build_v2_metadata
from .engine.config import ArrayConfig
from .errors import MetadataError, NodeExistsError, NodeTypeError
from .formats import node_exists, node_keys, read_node, write_node
from .metadata.v3 import ArrayMetadata, GroupMetadata, load_json, parse_node_metadata
from .node import metadata_key
from .runtime.memo import BoundedMemo
from .stores.base import Store


def array_metadata(*, config: ArrayConfig, data: Any = None, shape: Any = None,
                   dtype: Any = None, zarr_format: int = 3, **options: Any
                   ) -> tuple[ArrayMetadata, Any]:
    """The metadata of a new array in ``zarr_format`` (3 or 2), checked all through (the
    codec pipeline included), and ``data`` as an array (or None), without touching any
    store: what :func:`new_array` writes. With ``data``, shape and dtype default to the
    data's."""
    if data is not None:
        data = np.asanyarray(data[...] if isinstance(data, Array) else data)
        shape = data.shape if shape is None else shape
        dtype = data.dtype if dtype is None else dtype
    if shape is None:
        raise MetadataError("create_array needs a shape (or data)", field="shape")
    if zarr_format == 2:
        metadata = build_v2_metadata(shape=shape, dtype=dtype, **options)
    elif zarr_format == 3:
        options.pop("order", None)     # v3 has no order (a transpose codec instead)
        metadata = build_array_metadata(shape=shape, dtype=dtype, **options)
    else:
        raise MetadataError(f"kvzarr creates Zarr v3 and v2 arrays, not v{zarr_format}",
                            field="zarr_format")
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
        made, cleared, seen = prepare_node_path(store, path, overwrite,
                                                array.metadata.zarr_format)
        write_node(store, path, array.metadata)
        if data is not None:
            array[...] = data
        sync_any_consolidated(store, array.metadata.zarr_format, changed=[*made, path],
                              removed=[path] if cleared else (), known=seen)
    return array


def new_group(store: Store, path: str, *, attributes: dict[str, Any] | None = None,
              overwrite: bool = False, zarr_format: int = 3) -> GroupMetadata:
    """Create the group at ``path`` (normalised) in ``zarr_format`` (3 or 2); return its
    metadata."""
    metadata = GroupMetadata(attributes=dict(attributes or {}), zarr_format=zarr_format)
    with store.transaction():
        made, cleared, seen = prepare_node_path(store, path, overwrite, zarr_format)
        write_node(store, path, metadata)
        sync_any_consolidated(store, zarr_format, changed=[*made, path],
                              removed=[path] if cleared else (), known=seen)
    return metadata


def sync_any_consolidated(store: Store, zarr_format: int, *, changed: Any = (),
                          removed: Any = (), known: Any = None) -> None:
    """The consolidated metadata above changed nodes kept true, in their format: v3
    members of ``zarr.json`` (:mod:`kvzarr.consolidated`), v2 ``.zmetadata``
    (:mod:`kvzarr.consolidated_v2`)."""
    if zarr_format == 3:
        sync_consolidated(store, changed=changed, removed=removed, known=known)
    else:
        sync_v2_consolidated(store, changed=changed, removed=removed)


def prepare_node_path(store: Store, path: str, overwrite: bool, zarr_format: int = 3
                      ) -> tuple[list[str], bool, dict[str, bytes]]:
    """Inside a write transaction: clear ``path`` (or fail) and make sure its ancestors
    are groups of ``zarr_format`` (a v2 hierarchy is never given a ``zarr.json``, nor a
    v3 one a ``.zgroup``: MetadataError). Walks up from the parent to the nearest
    ancestor that exists, creating the missing groups on the way: an existing group got
    its own ancestors when it was made, so the common case (the parent exists) costs one
    read. Returns the paths of the groups it made, whether it erased something at
    ``path``, and the v3 ancestors' documents it read or wrote (for
    :func:`sync_consolidated`, which need not read them again)."""
    cleared = False
    if node_exists(store, path) or (overwrite and path and any(
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
            found = read_node(store, ancestor) if zarr_format != 3 or any(
                store.exists_many(node_keys(ancestor, 2) + node_keys(ancestor, 1))) else None
            if found is None:
                missing.append(ancestor)
                continue
            if not isinstance(found, GroupMetadata):
                raise NodeTypeError("an ancestor of the new node is an array",
                                    path="/" + ancestor)
            _check_same_format(found.zarr_format, zarr_format, ancestor)
            break
        if _node_type(data, ancestor) != "group":
            raise NodeTypeError("an ancestor of the new node is an array",
                                path="/" + ancestor)
        _check_same_format(3, zarr_format, ancestor)
        seen[ancestor] = data
        break
    if missing:
        empty = GroupMetadata(zarr_format=zarr_format)
        for a in missing:
            write_node(store, a, empty)
        if zarr_format == 3:
            seen.update((a, empty.to_bytes()) for a in missing)
    return missing, cleared, seen


def _check_same_format(ancestor_format: int, zarr_format: int, ancestor: str) -> None:
    if ancestor_format != zarr_format:
        raise MetadataError(
            f"the group above is Zarr v{ancestor_format}: a Zarr v{zarr_format} node "
            f"cannot go inside it", path="/" + ancestor, field="zarr_format",
            hint=f"create it with zarr_format={ancestor_format}, or migrate the hierarchy "
                 f"(kvzarr migrate v3)")


def hierarchy_format(store: Store, path: str) -> int:
    """The Zarr format a new node at ``path`` takes when none is asked for: the nearest
    existing ancestor group's (3 when there is none)."""
    ancestor = path
    while ancestor:
        ancestor = ancestor.rpartition("/")[0]
        found = read_node(store, ancestor)
        if found is not None:
            return found.zarr_format
    return 3


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
