"""Consolidated metadata: zarr-python 3's copy of a hierarchy's node documents inside a
group's own ``zarr.json``, read for listings and kept true by every hierarchy change
kvzarr makes.

The member, as zarr-python 3 writes it (``ConsolidatedMetadata.to_dict``; the Zarr v3
core spec, "Group metadata", allows this one member as a historical exception since
zarr-specs PR #373, and zarr-specs PR #309 proposes it as an extension)::

    "consolidated_metadata": {
        "kind": "inline", "must_understand": false,
        "metadata": {
            "temp":     {... the complete zarr.json of the array "temp" ...},
            "sub":      {... group "sub" ..., "consolidated_metadata":
                            {"kind": "inline", "must_understand": false, "metadata": {}}},
            "sub/x":    {... the complete zarr.json of "sub/x" ...}}}

Keys are paths relative to the consolidating group, one per node at every depth below
it (flat, not nested); each group's entry carries an empty ``consolidated_metadata``;
keys are ordered by depth, then by their NFKC case-folded text. The nodes' own
``zarr.json`` documents are not touched.

**Valid** (what a reader may use instead of the store): the member is an object with
``"kind": "inline"``, ``"must_understand": false`` (or absent) and a ``"metadata"``
object; every key there is a normal relative node path (no empty, ``.``, ``..`` or
``zarr.json`` segments, no leading or trailing ``/``); every entry parses as Zarr v3
array or group metadata; and every entry's parent (when not the consolidating group
itself) is an entry too, a group. Anything else is invalid: readers then list the store
(with :class:`~kvzarr.errors.InvalidConsolidatedMetadataWarning`), and the next change
through kvzarr below that group removes the member when it cannot even be updated.

**Kept true** (:func:`sync_consolidated`): every change kvzarr makes to a hierarchy (a new
node and the ancestors made for it, a delete, a resize or append, an attribute change, a
move) updates the member of every ancestor group that holds one, in the write
transaction of the change: on a transactional store a reader sees the change and the
updated member together or neither, a crash leaves both or neither, and concurrent
writers are serialised by the store's write transactions. On a store without
transactions (a directory) the node's own documents land first and then each holding
ancestor is updated (deepest first), each read-modify-write under the store's key lock
of that ``zarr.json`` with the changed nodes' documents read again under the lock, so
concurrent writers lose nothing; a crash between the two leaves that one change missing
from the member (:func:`consolidate` rebuilds it). Chunk writes never touch it: only the
document changes above call in here.

Changes made by other tools are not seen: zarr-python 3 itself leaves the member as it
was when it creates or deletes nodes. :func:`consolidate` rebuilds the member from the
store; opening with ``use_consolidated=False`` ignores it.
"""

from __future__ import annotations

import functools
import json
import unicodedata
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import (InvalidConsolidatedMetadataWarning, MetadataError, NodeNotFoundError,
                     NodeTypeError)
from .metadata.v3 import (ZARR_JSON, ArrayMetadata, GroupMetadata, encode_json, load_json,
                          parse_node_metadata)
from .runtime.memo import BoundedMemo
from .stores.base import Store
from .stores.keys import ancestor_paths

#: the member of a group's zarr.json that holds consolidated metadata
MEMBER = "consolidated_metadata"
#: a document without these bytes holds no member: most documents are passed over by
#: a substring search, without parsing them
_MARK = b'"consolidated_metadata"'


def _key(path: str) -> str:
    return f"{path}/{ZARR_JSON}" if path else ZARR_JSON


def _join(base: str, rel: str) -> str:
    return f"{base}/{rel}" if base and rel else base or rel


def _relative(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` when it lies strictly below it, else None."""
    if not base:
        return path or None
    return path[len(base) + 1:] if path.startswith(base + "/") else None


def empty_member() -> dict[str, Any]:
    """The member a group's entry carries, as zarr-python writes it."""
    return {"kind": "inline", "must_understand": False, "metadata": {}}


def as_entry(doc: dict[str, Any]) -> dict[str, Any]:
    """A node's zarr.json document as its entry in a consolidating group's member: as
    stored, except that a group's own member (if any) becomes the empty one."""
    if doc.get("node_type") == "group":
        doc = dict(doc)
        doc[MEMBER] = empty_member()
    return doc


@functools.lru_cache(maxsize=1 << 16)   # every update sorts all the keys again
def _order(rel: str) -> tuple[int, str, str]:
    # zarr-python's order (since 3.1.1): depth, then the case-folded NFKC text; the
    # text itself breaks ties so that the order is total
    return rel.count("/"), unicodedata.normalize("NFKC", rel).casefold(), rel


def member_of(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The member holding ``entries`` (relative path -> entry), keys in zarr-python's
    order."""
    return {"kind": "inline", "must_understand": False,
            "metadata": {rel: entries[rel] for rel in sorted(entries, key=_order)}}


def _check_rel(rel: Any) -> None:
    if (not isinstance(rel, str) or not rel or rel[0] == "/" or rel[-1] == "/"
            or any(p in ("", ".", "..", ZARR_JSON) for p in rel.split("/"))):
        raise MetadataError(f"{rel!r} is not a relative node path", field=MEMBER)


def member_entries(member: Any) -> dict[str, Any]:
    """The ``metadata`` object of a member whose form is valid (kind, must_understand,
    an object of objects); MetadataError otherwise. The entries themselves are not
    parsed here."""
    if not isinstance(member, dict):
        raise MetadataError("consolidated metadata must be an object", field=MEMBER)
    if member.get("kind") != "inline":
        raise MetadataError(f"consolidated metadata of kind {member.get('kind')!r}: only "
                            f"'inline' is known", field=MEMBER)
    if member.get("must_understand", False) is not False:
        raise MetadataError("consolidated metadata must have \"must_understand\": false",
                            field=MEMBER)
    entries = member.get("metadata")
    if not isinstance(entries, dict) or not all(isinstance(v, dict)
                                                for v in entries.values()):
        raise MetadataError("consolidated metadata's 'metadata' must be an object of "
                            "node documents", field=MEMBER)
    return entries


# -- reading -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ConsolidatedView:
    """A valid member, parsed: the metadata of every node below the consolidating group
    by relative path, and each group's children in name order."""
    nodes: dict[str, ArrayMetadata | GroupMetadata]
    #: relative path of a group ("" for the consolidating group) -> its children's names
    children: dict[str, list[str]]

    def child_names(self, rel: str) -> list[str]:
        return self.children.get(rel, [])


def parse_view(member: Any, path: str) -> ConsolidatedView:
    """The view of a member; MetadataError naming what is wrong when it is not valid
    (see the module docstring). ``path`` is the consolidating group's, for messages."""
    entries = member_entries(member)
    nodes: dict[str, ArrayMetadata | GroupMetadata] = {}
    for rel, doc in entries.items():
        _check_rel(rel)
        nodes[rel] = parse_node_metadata(doc, "/" + _join(path, rel))
    children: dict[str, list[str]] = {}
    for rel in nodes:
        parent, _, name = rel.rpartition("/")
        if parent and not isinstance(nodes.get(parent), GroupMetadata):
            raise MetadataError(f"consolidated metadata holds {rel!r} but not its parent "
                                f"group {parent!r}", field=MEMBER, path="/" + path)
        children.setdefault(parent, []).append(name)
    for names in children.values():
        names.sort()      # the store's listing order: code points
    return ConsolidatedView(nodes, children)


#: zarr.json bytes -> view, the error that made its member invalid, or _NO_MEMBER; a
#: listing reads the document again each time, and parses it only when it changed
_VIEWS = BoundedMemo(16)
_NO_MEMBER = object()


def read_view(data: bytes | None, path: str) -> ConsolidatedView | None:
    """The view of the member in the group document ``data`` at ``path``; None when
    there is no document or no member. MetadataError when the member is not valid."""
    if data is None or _MARK not in data:
        return None
    data = bytes(data)
    hit = _VIEWS.get(data)
    if hit is None:
        try:
            member = load_json(data, "/" + path).get(MEMBER)
            hit = _NO_MEMBER if member is None else parse_view(member, path)
        except MetadataError as e:
            hit = e
        _VIEWS.keep(data, hit)
    if hit is _NO_MEMBER:
        return None
    if isinstance(hit, MetadataError):
        raise hit
    return hit


def view_or_warn(data: bytes | None, path: str, required: bool,
                 read: Any = read_view, document: str = MEMBER) -> ConsolidatedView | None:
    """``read(data, path)`` (:func:`read_view`, or another form's reader such as
    :func:`kvzarr.consolidated_v2.read_v2_view`, whose ``document`` the messages name) for
    a reader: an invalid member is warned about and None is returned (the reader falls
    back to the store), unless ``required`` (then it raises, as does a missing member)."""
    where = "consolidated metadata" + ("" if document == MEMBER else f" ({document})")
    try:
        view = read(data, path)
    except MetadataError as e:
        if required:
            raise
        warnings.warn(f"{where} of group {'/' + path!r} is not valid, listing the store "
                      f"instead: {e}", InvalidConsolidatedMetadataWarning, stacklevel=3)
        return None
    if view is None and required:
        raise MetadataError(f"consolidated metadata was asked for but the group has "
                            f"{'none' if document == MEMBER else 'no ' + document}",
                            path="/" + path, field=document,
                            hint="write it with kvzarr.consolidate_metadata")
    return view


# -- writing -----------------------------------------------------------------------------

#: the documents with a member this process wrote last (bytes -> parsed document): the
#: next change under the same group reads back its own write without parsing it again
#: (a member of a few hundred nodes is tens of kilobytes of JSON)
_WRITTEN = BoundedMemo(8)


def parsed_document(data: bytes, path: str) -> dict[str, Any]:
    """``load_json(data)``, without parsing when this process wrote exactly these bytes
    as a consolidating group's document. The dict may be shared: do not change it."""
    doc = _WRITTEN.get(data)
    return doc if doc is not None else load_json(data, "/" + path)


def _write_document(store: Store, key: str, doc: dict[str, Any]) -> bytes:
    """Write ``doc`` (which nothing may change afterwards; its member built by
    :func:`member_of`) and remember it."""
    data = _encode_document(doc)
    store.set(key, data)
    _WRITTEN.keep(data, doc)
    return data


#: JSON text ("key":entry) of the entries written lately, by the identity of the
#: entry's dict (kept with it, so the id is not reused): the entries a member keeps from
#: one update to the next are the same objects (:func:`parsed_document`), so an update
#: encodes only the entries it changed and joins the rest as text
_ENTRY_TEXT = BoundedMemo(1 << 15)
#: what kvzarr writes (metadata.v3.encode_json), as text
_TEXT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
#: stands for the member while the rest of the document is encoded
_PLACEHOLDER = f"kvzarr-consolidated-member-{uuid.uuid4().hex}"


def _encode_document(doc: dict[str, Any]) -> bytes:
    """``encode_json(doc)``, with the member's entries joined from their remembered
    text: the same bytes, for the cost of encoding what changed."""
    member = doc[MEMBER]
    parts = []
    for rel, entry in member["metadata"].items():
        hit = _ENTRY_TEXT.get(id(entry))
        if hit is None or hit[0] is not entry or hit[1] != rel:
            hit = _ENTRY_TEXT.keep(id(entry), (entry, rel,
                                               f"{_TEXT.encode(rel)}:{_TEXT.encode(entry)}"))
        parts.append(hit[2])
    text = _TEXT.encode({**doc, MEMBER: _PLACEHOLDER}).replace(
        _TEXT.encode(_PLACEHOLDER),
        '{"kind":"inline","must_understand":false,"metadata":{' + ",".join(parts) + "}}", 1)
    return text.encode("utf-8")


def collect(store: Store, path: str) -> dict[str, dict[str, Any]]:
    """Relative path -> document of every node below the group at ``path``, found by
    walking the store (``list_dir`` group by group; arrays are not entered). Directories
    without a zarr.json are not nodes and are passed over, as zarr-python does. Each
    document must be a Zarr v3 node (MetadataError otherwise); it is copied as it is, so
    an array with a codec kvzarr does not implement is listed for the readers that do."""
    out: dict[str, dict[str, Any]] = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        base = _join(path, rel)
        prefix = base + "/" if base else ""
        dirs = [e[:-1] for e in store.list_dir(prefix) if e.endswith("/")]
        if not dirs:
            continue
        for name, data in zip(dirs, store.get_many([prefix + d + "/" + ZARR_JSON
                                                     for d in dirs])):
            if data is None:
                continue
            child = _join(rel, name)
            doc = load_json(data, "/" + prefix + name)
            node_type = doc.get("node_type")
            if doc.get("zarr_format") != 3 or node_type not in ("array", "group"):
                parse_node_metadata(doc, "/" + prefix + name)   # says what is wrong
            out[child] = doc
            if node_type == "group":
                pending.append(child)
    return out


def consolidate(store: Store, path: str) -> GroupMetadata:
    """Write the member of the group at ``path`` from what the store holds below it, in
    one write transaction (on a directory under the key lock of its zarr.json, which
    every kvzarr writer of the member takes, so no concurrent change is lost); return
    the group's new metadata. NodeNotFoundError / NodeTypeError when no group is there;
    MetadataError when a node below cannot be read."""
    key = _key(path)
    with store.transaction(), store.key_lock([key]):
        data = store.get(key)
        if data is None:
            raise NodeNotFoundError("no group found", path="/" + path)
        doc = load_json(data, "/" + path)
        if not isinstance(parse_node_metadata(doc, "/" + path), GroupMetadata):
            raise NodeTypeError("an array, not a group, is at this path", path="/" + path)
        doc[MEMBER] = member_of({rel: as_entry(d) for rel, d in collect(store, path).items()})
        data = _write_document(store, key, doc)
    # parsed from the bytes: the metadata handed out must not share the remembered dicts
    fresh = parse_node_metadata(data, "/" + path)
    assert isinstance(fresh, GroupMetadata)
    return fresh


def sync_consolidated(store: Store, *, changed: Iterable[str] = (),
                      removed: Iterable[str] = (),
                      known: Mapping[str, bytes] | None = None) -> None:
    """Bring the member of every group above the given nodes that holds one up to date
    with the store, in a write transaction (joining the caller's): ``changed`` nodes
    (created or with a new zarr.json) get their entry from the document the store holds
    now (none if it is gone), ``removed`` nodes lose the entries of their whole subtree
    (and, should the path hold a node again by now, get those the store has).

    Costs one batched read of the ancestors' documents when none holds a member (no JSON
    is parsed: a substring test passes them over); per holding ancestor a
    read-modify-write of its document (a document this process wrote last is not parsed
    again, and only the changed entries are encoded). ``known``: ancestors' documents the caller read in this
    transaction, not read again (used on a transactional store only: on a directory a
    member written since must be seen). A member that is not valid in form (see
    :func:`member_entries`) is removed rather than updated. See the module docstring for
    what each kind of store promises."""
    changed, removed = list(changed), list(removed)
    paths = changed + removed
    if len(paths) == 1:     # the common case: one node (its ancestors come nearest first)
        ancestors = ancestor_paths(paths[0])
    else:
        ancestors = sorted({a for p in paths for a in ancestor_paths(p)},
                           key=lambda a: -a.count("/") if a else 1)
    if not ancestors:
        return
    docs = dict(known) if known and store.capabilities.transactional else {}
    unread = [a for a in ancestors if a not in docs]
    if unread:
        # (inside the caller's transaction: every caller changes the nodes in one)
        docs.update(zip(unread, store.get_many([_key(a) for a in unread])))
    holders = [a for a in ancestors
               if (data := docs.get(a)) is not None and _MARK in data]
    if not holders:
        return
    with store.transaction():
        for holder in holders:   # deepest first
            # the key lock serialises this read-modify-write on a store without
            # transactions; taken alone (never inside another key lock: no lock order
            # to break)
            with store.key_lock([_key(holder)]):
                _update(store, holder, changed, removed)


def _update(store: Store, holder: str, changed: Sequence[str],
            removed: Sequence[str]) -> None:
    key = _key(holder)
    data = store.get(key)
    if data is None or _MARK not in data:
        return
    try:
        doc = dict(parsed_document(data, holder))    # changed below: a copy
    except MetadataError:
        return     # a broken document: nothing kvzarr or any reader can use
    if doc.get("node_type") != "group" or doc.get(MEMBER) is None:
        return     # the bytes were in an attribute
    try:
        entries = dict(member_entries(doc[MEMBER]))
    except MetadataError:
        del doc[MEMBER]     # cannot be updated, so it must not stay
        store.set(key, encode_json(doc))
        return
    mine_changed = [r for r in (_relative(p, holder) for p in changed) if r]
    mine_removed = [r for r in (_relative(p, holder) for p in removed) if r]
    for rel in mine_removed:
        _drop_subtree(entries, rel)
    paths = [_join(holder, r) for r in (*mine_changed, *mine_removed)]
    found = store.get_many([_key(p) for p in paths]) if paths else []
    for rel, doc_bytes in zip(mine_changed, found):
        if doc_bytes is None:
            _drop_subtree(entries, rel)
        else:
            entries[rel] = as_entry(load_json(doc_bytes, "/" + _join(holder, rel)))
    for rel, doc_bytes in zip(mine_removed, found[len(mine_changed):]):
        if doc_bytes is not None:     # made again since (a concurrent writer)
            node = load_json(doc_bytes, "/" + _join(holder, rel))
            entries[rel] = as_entry(node)
            if node.get("node_type") == "group":
                for sub, d in collect(store, _join(holder, rel)).items():
                    entries[f"{rel}/{sub}"] = as_entry(d)
    _add_missing_parents(store, holder, entries, mine_changed)
    doc[MEMBER] = member_of(entries)     # new objects: the parsed original is not changed
    _write_document(store, key, doc)


def _drop_subtree(entries: dict[str, Any], rel: str) -> None:
    entries.pop(rel, None)
    below = rel + "/"
    for k in [k for k in entries if k.startswith(below)]:
        del entries[k]


def _add_missing_parents(store: Store, holder: str, entries: dict[str, Any],
                         rels: Sequence[str]) -> None:
    """Entries for the groups between the holder and each changed node that the member
    lacks (it was stale, written by a tool that does not keep it), read from the store,
    so that every entry's parent is an entry."""
    missing = sorted({p for rel in rels if rel in entries
                      for p in ancestor_paths(rel) if p and p not in entries})
    if not missing:
        return
    for rel, data in zip(missing, store.get_many([_key(_join(holder, r)) for r in missing])):
        if data is not None:
            entries[rel] = as_entry(load_json(data, "/" + _join(holder, rel)))


__all__ = ["ConsolidatedView", "MEMBER", "as_entry", "collect", "consolidate",
           "member_entries", "member_of", "parse_view", "parsed_document", "read_view",
           "sync_consolidated", "view_or_warn"]
