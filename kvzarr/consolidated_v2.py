"""Zarr v2 consolidated metadata (``.zmetadata``): read for listings, written by
:func:`consolidate_v2`, and kept true by kvzarr's changes to v2 nodes.

zarr-python 2 (``zarr.consolidate_metadata``) and zarr-python 3 (for ``zarr_format=2``)
write, at a group, a ``.zmetadata`` document holding a copy of every metadata document
below it::

    {"metadata": {".zgroup": {...}, ".zattrs": {...},
                  "temp/.zarray": {...}, "temp/.zattrs": {...}, ...},
     "zarr_consolidated_format": 1}

with keys relative to that group. Readers that open it (xarray does by default) see
only what it says, so after kvzarr creates, resizes, changes the attributes of, or
deletes a v2 node, :func:`sync_v2_consolidated` rewrites the entries of that node (and,
for a deletion, of everything below it) in every ``.zmetadata`` above it, from the
documents the store holds now, in the caller's write transaction. Entries of other
nodes, and members other tools added to the document, are kept as they are.

A v2 group lists its members from the ``.zmetadata`` at its own path when there is one
and it is valid (:func:`read_v2_view`: every entry parses, every node's parent group is
in it), as zarr-python's ``open_consolidated`` does; else from the store, with a
warning when it is not valid (:func:`kvzarr.consolidated.view_or_warn`, as for v3).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .consolidated import ConsolidatedView
from .errors import MetadataError
from .metadata.v2 import ZARRAY, ZATTRS, ZGROUP, ZMETADATA, parse_v2_array, parse_v2_group
from .metadata.v3 import ArrayMetadata, GroupMetadata
from .runtime.memo import BoundedMemo
from .stores.base import Store
from .stores.keys import ancestor_paths

_DOCUMENTS = (ZARRAY, ZGROUP, ZATTRS)


def _key(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def sync_v2_consolidated(store: Store, *, changed: Iterable[str] = (),
                         removed: Iterable[str] = ()) -> None:
    """Bring every ``.zmetadata`` at or above the given v2 nodes up to date (inside a
    write transaction; joins the caller's). ``changed`` nodes get the entries of the
    documents the store holds for them now; ``removed`` nodes lose their entries and
    those of everything below them. One batched read of the candidate ``.zmetadata``
    documents when none exists."""
    changed, removed = list(changed), list(removed)
    holders = sorted({a for p in changed + removed for a in (p, *ancestor_paths(p))})
    with store.transaction():
        found = store.get_many([_key(a, ZMETADATA) for a in holders])
        holding = [(a, data) for a, data in zip(holders, found) if data is not None]
        if not holding:
            return
        current = {}
        if changed:
            keys = [_key(p, n) for p in changed for n in _DOCUMENTS]
            current = dict(zip(keys, store.get_many(keys)))
        for holder, data in holding:
            doc = _load(data, holder)
            entries = doc["metadata"]
            for p in removed:
                rel = _relative(p, holder)
                if rel is None:
                    continue
                below = f"{rel}/" if rel else ""
                for k in [k for k in entries if k.startswith(below)]:
                    del entries[k]
            for p in changed:
                rel = _relative(p, holder)
                if rel is None:
                    continue
                for name in _DOCUMENTS:
                    entry = _key(rel, name)
                    value = current[_key(p, name)]
                    if value is None:
                        entries.pop(entry, None)
                    else:
                        entries[entry] = json.loads(value)
            store.set(_key(holder, ZMETADATA), _encode(doc))


def _relative(path: str, holder: str) -> str | None:
    """``path`` relative to the group ``holder`` ("" for the holder itself), or None
    when it is not at or below it."""
    if not holder:
        return path
    if path == holder:
        return ""
    return path[len(holder) + 1:] if path.startswith(holder + "/") else None


def _load(data: bytes, holder: str) -> dict[str, Any]:
    where = _key(holder, ZMETADATA)
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError(f"not JSON: {e}", path=where) from e
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        raise MetadataError("consolidated metadata without a 'metadata' object",
                            path=where, field="metadata")
    return doc


def _encode(doc: dict[str, Any]) -> bytes:
    # as zarr-python writes it: indented by 4, keys sorted, ASCII
    return json.dumps(doc, indent=4, sort_keys=True, ensure_ascii=True,
                      separators=(",", ": ")).encode()


# -- reading ------------------------------------------------------------------------------

#: .zmetadata bytes -> its view, or the MetadataError that makes it invalid
_VIEWS = BoundedMemo(16)


def read_v2_view(data: bytes | None, path: str) -> ConsolidatedView | None:
    """The view of the ``.zmetadata`` document ``data`` of the group at ``path`` (None:
    there is none); MetadataError, naming what is wrong, when it is not valid."""
    if data is None:
        return None
    data = bytes(data)
    hit = _VIEWS.get(data)
    if hit is None:
        try:
            hit = _parse_view(_load(data, path), path)
        except MetadataError as e:
            hit = e
        _VIEWS.keep(data, hit)
    if isinstance(hit, MetadataError):
        raise hit
    return hit


def _parse_view(doc: dict[str, Any], path: str) -> ConsolidatedView:
    by_node: dict[str, dict[str, Any]] = {}
    for key, value in doc["metadata"].items():
        rel, _, name = key.rpartition("/")
        if name in _DOCUMENTS:
            by_node.setdefault(rel, {})[name] = value
    nodes: dict[str, ArrayMetadata | GroupMetadata] = {}
    for rel, docs in by_node.items():
        where = "/" + _key(path, rel)
        if ZARRAY in docs:
            nodes[rel] = parse_v2_array(docs[ZARRAY], docs.get(ZATTRS), where)
        elif ZGROUP in docs:
            nodes[rel] = parse_v2_group(docs[ZGROUP], docs.get(ZATTRS), where)
    children: dict[str, list[str]] = {}
    for rel in nodes:
        if not rel:
            continue
        parent, _, name = rel.rpartition("/")
        if not isinstance(nodes.get(parent), GroupMetadata):
            raise MetadataError(f"consolidated metadata holds {rel!r} but not its parent "
                                f"group {parent!r}", path=_key(path, ZMETADATA))
        children.setdefault(parent, []).append(name)
    for names in children.values():
        names.sort()
    return ConsolidatedView(nodes, children)


# -- writing ------------------------------------------------------------------------------

def consolidate_v2(store: Store, path: str) -> dict[str, Any]:
    """Write the ``.zmetadata`` of the v2 group at ``path``: every v2 document below it
    (found by walking the groups, never listing chunks), in one write transaction.
    Returns the document written."""
    with store.transaction():
        entries: dict[str, Any] = {}
        level = [path]
        while level:
            keys = [_key(p, n) for p in level for n in _DOCUMENTS]
            values = store.get_many(keys)
            groups = []
            for i, p in enumerate(level):
                rel = p[len(path) + 1:] if path else p
                docs = values[3 * i:3 * i + 3]
                for name, value in zip(_DOCUMENTS, docs):
                    if value is not None:
                        entries[_key(rel, name)] = json.loads(value)
                if docs[1] is not None and docs[0] is None:    # a group: go down
                    groups.append(p)
            level = [_key(g, e[:-1]) for g in groups
                     for e in store.list_dir(f"{g}/" if g else "") if e.endswith("/")]
        doc = {"metadata": entries, "zarr_consolidated_format": 1}
        store.set(_key(path, ZMETADATA), _encode(doc))
    return doc


__all__ = ["consolidate_v2", "read_v2_view", "sync_v2_consolidated"]
