"""Which Zarr format a node is stored in, and its metadata documents in that format.

A node's metadata lives in different keys per format version:

* Zarr v3: ``<path>/zarr.json`` (core spec, "Metadata").
* Zarr v2: ``<path>/.zarray`` or ``<path>/.zgroup``, with the user attributes in
  ``<path>/.zattrs`` (Zarr v2 spec, "Metadata" and "Attributes").
* Zarr v1: ``<path>/meta`` with the attributes in ``<path>/attrs`` (Zarr v1 spec,
  "Metadata"; v1 has arrays only).

:func:`read_node` reads a node's documents and says which format it is in. With
``zarr_format=None`` the format is detected: a ``zarr.json`` wins, as zarr-python 3
reads a node that has one beside v2 documents (a half-done migration by another tool;
``zarr_format=2`` reads the v2 documents, and :func:`kvzarr.migrate_v3` replaces the
stale ``zarr.json``), while v2 and v1 documents at one path are refused (MetadataError
naming both keys). ``zarr_format=1``, ``2`` or ``3`` reads that format only. :func:`write_node` writes a node's documents in its own format, so a v2 hierarchy
is never given a ``zarr.json`` unless it is migrated (:mod:`kvzarr.migration`).
:func:`rewrite_node` is the read-modify-write of an existing node's documents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .errors import MetadataError, NodeNotFoundError, ValueTypeError
from .metadata import v1, v2
from .metadata.v3 import (ZARR_JSON, ArrayMetadata, GroupMetadata, encode_json, load_json,
                          parse_node_metadata)
from .stores.base import Store

Metadata = ArrayMetadata | GroupMetadata

#: the format versions kvzarr reads
FORMATS = (1, 2, 3)

#: per format, the names of the keys that make a node (the attributes are not among
#: them: a lone ``.zattrs`` is no node)
NODE_DOCUMENTS = {3: (ZARR_JSON,), 2: (v2.ZARRAY, v2.ZGROUP), 1: (v1.META,)}

#: the names read, in one batch, to find a node that has no ``zarr.json``
_LEGACY = (v2.ZARRAY, v2.ZGROUP, v1.META, v2.ZATTRS, v1.ATTRS)


def check_zarr_format(zarr_format: Any) -> int | None:
    """``zarr_format`` as given to an opening function: None (detect), 1, 2 or 3."""
    if zarr_format is None:
        return None
    if isinstance(zarr_format, bool) or zarr_format not in FORMATS:
        raise ValueTypeError(f"zarr_format must be None, 1, 2 or 3, not {zarr_format!r}",
                             field="zarr_format")
    return int(zarr_format)


def _a(metadata: Metadata) -> str:
    return "an array" if isinstance(metadata, ArrayMetadata) else "a group"


def _key(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


#: per format, the names of every metadata document a node may have (its attributes
#: included)
DOCUMENTS = {3: (ZARR_JSON,), 2: (v2.ZARRAY, v2.ZGROUP, v2.ZATTRS), 1: (v1.META, v1.ATTRS)}


def document_keys(path: str, zarr_format: int) -> list[str]:
    """The keys that may hold the documents of a node at ``path`` in ``zarr_format``,
    its attributes included."""
    return [_key(path, n) for n in DOCUMENTS[zarr_format]]


def node_keys(path: str, zarr_format: int | None = None) -> list[str]:
    """The keys whose presence makes a node at ``path`` (of any format when
    ``zarr_format`` is None)."""
    formats = FORMATS if zarr_format is None else (zarr_format,)
    return [_key(path, n) for f in formats for n in NODE_DOCUMENTS[f]]


def read_node(store: Store, path: str, zarr_format: int | None = None) -> Metadata | None:
    """The metadata of the node at ``path`` (normalised), or None when there is none (in
    the format asked for). With ``zarr_format=None`` a ``zarr.json`` is read first and,
    when there is one, wins (one read: the cost of opening a v3 node); else the v2 and
    v1 documents are read in one batch."""
    if zarr_format in (None, 3):
        data = store.get(_key(path, ZARR_JSON))
        if data is not None or zarr_format == 3:
            return None if data is None else parse_node_metadata(data, path="/" + path)
    values = dict(zip(_LEGACY, store.get_many([_key(path, n) for n in _LEGACY])))
    return parse_documents(values, path, zarr_format)


def parse_documents(values: dict[str, bytes | None], path: str,
                    zarr_format: int | None = None) -> Metadata | None:
    """The node that the documents ``values`` (name -> bytes or None, names as in
    :data:`_LEGACY` and ``zarr.json``) of the node at ``path`` make, or None."""
    found = [f for f in (3, 2, 1)
             if any(values.get(n) is not None for n in NODE_DOCUMENTS[f])]
    where = "/" + path
    if zarr_format is None:
        if len(found) > 1:
            names = [n for f in found for n in NODE_DOCUMENTS[f] if values.get(n) is not None]
            raise MetadataError(
                f"documents of two Zarr formats at one node ({', '.join(names)}): which "
                f"one is true cannot be told", path=where, field="zarr_format",
                hint="open it with zarr_format=2 or zarr_format=3, or remove the stale "
                     "documents")
        if not found:
            return None
        zarr_format = found[0]
    elif zarr_format not in found:
        return None
    if zarr_format == 3:
        return parse_node_metadata(values[ZARR_JSON], path=where)
    if zarr_format == 2:
        zarray, zgroup = values.get(v2.ZARRAY), values.get(v2.ZGROUP)
        if zarray is not None and zgroup is not None:
            raise MetadataError("both .zarray and .zgroup at one node", path=where,
                                field=".zgroup")
        if zarray is not None:
            return v2.parse_v2_array(zarray, values.get(v2.ZATTRS), path)
        return v2.parse_v2_group(zgroup, values.get(v2.ZATTRS), path)
    return v1.parse_v1_array(values[v1.META], values.get(v1.ATTRS), path)


def require_node(store: Store, path: str, zarr_format: int | None = None) -> Metadata:
    """:func:`read_node`, raising NodeNotFoundError when there is no node."""
    found = read_node(store, path, zarr_format)
    if found is None:
        kind = "" if zarr_format is None else f"Zarr v{zarr_format} "
        raise NodeNotFoundError(f"no {kind}array or group found", path="/" + (path or ""))
    return found


def node_exists(store: Store, path: str) -> bool:
    """Whether a node of any format is at ``path``."""
    return any(store.exists_many(node_keys(path)))


def documents_of(path: str, metadata: Metadata) -> list[tuple[str, bytes | None]]:
    """``(key, bytes)`` of each document ``metadata`` is stored as (bytes None: a key
    to erase, as ``.zattrs`` when a v2 node's attributes became empty and it had
    none)."""
    fmt = metadata.zarr_format
    if fmt == 3:
        return [(_key(path, ZARR_JSON), metadata.to_bytes())]
    if fmt == 2:
        if isinstance(metadata, ArrayMetadata):
            doc, attrs = v2.v2_array_documents(metadata)
            first = v2.ZARRAY
        else:
            doc, attrs = v2.v2_group_documents(metadata)
            first = v2.ZGROUP
        return [(_key(path, first), doc), (_key(path, v2.ZATTRS), attrs)]
    raise MetadataError("kvzarr reads Zarr v1 arrays but does not write them: migrate "
                        "the array to v3 first", path="/" + path, field="zarr_format",
                        hint="kvzarr migrate v3 TARGET")


def write_node(store: Store, path: str, metadata: Metadata) -> None:
    """Write (or replace) the documents of the node at ``path`` in its format."""
    write_node_documents(store, documents_of(path, metadata))


def write_node_documents(store: Store, docs: list[tuple[str, bytes | None]]) -> None:
    """Write what :func:`documents_of` gives: set each document, erase each None."""
    store.set_many([(k, v) for k, v in docs if v is not None])
    gone = [k for k, v in docs if v is None]
    if gone:
        store.erase_values(gone)


def rewrite_node(store: Store, path: str, metadata: Metadata,
                 edit: Callable[[dict[str, Any]], None]) -> Metadata:
    """Inside the caller's write transaction and key lock: read the node at ``path``
    again (in ``metadata``'s format), let ``edit`` change its document, and write it
    back; return the new metadata. NodeNotFoundError if the node is gone.

    A v3 node's ``zarr.json`` is edited as it is stored, so members other tools wrote
    keep their form. For a v2 node ``edit`` sees ``{"shape": [...], "attributes":
    {...}}`` and the result is written back through :mod:`kvzarr.metadata.v2` (the
    other members of ``.zarray`` as they were)."""
    where = "/" + path
    fmt = metadata.zarr_format
    if fmt == 3:
        key = _key(path, ZARR_JSON)
        data = store.get(key)
        if data is None:
            raise NodeNotFoundError("node was deleted", path=where)
        doc = load_json(data, where)
        if doc.get("node_type") != metadata.node_type:
            raise MetadataError(f"the node is no longer {_a(metadata)}", path=where)
        edit(doc)
        fresh = parse_node_metadata(doc, where)
        store.set(key, encode_json(doc))
        return fresh
    keys = document_keys(path, fmt)
    stored = dict(zip(keys, store.get_many(keys)))
    current = parse_documents({k.rpartition("/")[2]: v for k, v in stored.items()}, path,
                              fmt)
    if current is None:
        raise NodeNotFoundError("node was deleted", path=where)
    if type(current) is not type(metadata):
        raise MetadataError(f"the node is no longer {_a(metadata)}", path=where)
    doc: dict[str, Any] = {"attributes": dict(current.attributes)}
    if isinstance(current, ArrayMetadata):
        doc["shape"] = list(current.shape)
    edit(doc)
    changes: dict[str, Any] = {"attributes": doc.get("attributes") or {}}
    if isinstance(current, ArrayMetadata):
        changes["shape"] = tuple(doc["shape"])
    docs = documents_of(path, replace(current, **changes))
    # only the documents whose content changes are written: an attribute change leaves
    # .zarray as its writer wrote it, a resize leaves .zattrs
    node_changed = isinstance(current, ArrayMetadata) and changes["shape"] != current.shape
    attrs_changed = changes["attributes"] != current.attributes
    write_node_documents(store, [(k, v) for k, v in docs
                                 if (node_changed if k.endswith((v2.ZARRAY, v2.ZGROUP))
                                     else attrs_changed)])
    # what is stored now is parsed again: what the handle holds is what is stored
    fresh = parse_documents({k.rpartition("/")[2]: v for k, v in docs}, path, fmt)
    assert fresh is not None
    return fresh


__all__ = ["DOCUMENTS", "FORMATS", "NODE_DOCUMENTS", "check_zarr_format", "document_keys",
           "documents_of", "node_exists", "node_keys", "parse_documents", "read_node",
           "require_node", "rewrite_node", "write_node", "write_node_documents"]
