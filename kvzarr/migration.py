"""Migrating Zarr v2 and v1 hierarchies to Zarr v3: :func:`migrate_v3` (and ``kvzarr
migrate v3 TARGET [--to DST] [--dry-run]``).

What it does
------------
Every v2 array, v2 group and v1 array at or below ``path`` gets a ``zarr.json`` that
reads the SAME chunk bytes (:func:`kvzarr.metadata.v2.v2_to_v3`,
:func:`kvzarr.metadata.v1.v1_to_v3`: the ``v2`` chunk key encoding keeps the chunk keys
valid, order "F" becomes a ``transpose`` codec, filters ``numcodecs.*`` codecs, the
compressor the matching v3 codec), and its old documents (``.zarray``, ``.zgroup``,
``.zattrs``, v1 ``meta`` and ``attrs``) are removed. No chunk is read or rewritten, so a
migration costs a few reads and writes per node, not per chunk. A group that held v2
consolidated metadata (``.zmetadata``) holds v3 consolidated metadata afterwards
(:func:`kvzarr.consolidate_metadata`), so readers that listed it from one document
still can. Each conversion that had to choose (a ``null`` fill value, Blosc's automatic
shuffle, an object array of strings) says what it chose in the report.

Promises
--------
* **In place, one transaction.** Every document is converted (and so every refusal
  raised) before anything is written; then all ``zarr.json`` documents are written and
  the old documents erased in ONE write transaction. On a transactional store (LMDB,
  SQL, zip, memory) a failure or a crash at any moment leaves the store exactly as it
  was, or wholly migrated. A directory has no transactions: the documents are written
  first and the old ones erased after, so an interruption leaves nodes with both, which
  kvzarr then refuses to open without ``zarr_format=`` (run the migration again: it
  finishes the job, taking the v2 documents as the truth).
* **Into another store** (``to=``): the whole source store is copied byte for byte and
  verified (:func:`kvzarr.copy_store`; a node alone would get v3 ancestor groups), then
  the copy is migrated in place at ``path``; the source is not changed.
* **Dry run**: the same conversions and the same report, nothing written (the store is
  opened read-only).
* A node that already has a ``zarr.json`` next to its v2 documents is migrated from the
  v2 documents (they are what zarr-python 2 and kvzarr's v2 reader used) and the stale
  ``zarr.json`` replaced; the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .errors import KvzarrError, NodeNotFoundError
from .formats import DOCUMENTS, document_keys, parse_documents
from .metadata import v1, v2
from .metadata.v3 import ZARR_JSON, ArrayMetadata, GroupMetadata
from .api import open_store
from .stores.base import Store

#: ``progress(stage, done, total)``: stage "plan", "copy", "verify" or "write"
Progress = Callable[[str, int, int], None]


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


@dataclass
class NodeMigration:
    """One node's migration: where, what it was, what it becomes and why."""
    path: str
    node_type: str              # "array" or "group"
    from_format: int            # 2 or 1
    metadata: ArrayMetadata | GroupMetadata    # the v3 metadata written
    notes: list[str] = field(default_factory=list)
    #: the keys of the old documents, erased
    old_keys: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        head = f"/{self.path}: Zarr v{self.from_format} {self.node_type} -> v3"
        return head + "".join(f"\n    {n}" for n in self.notes)


@dataclass
class MigrationReport:
    """What :func:`migrate_v3` did (or, with ``dry_run``, would do)."""
    target: str
    dry_run: bool
    nodes: list[NodeMigration] = field(default_factory=list)
    #: groups whose v2 consolidated metadata became v3 consolidated metadata
    consolidated: list[str] = field(default_factory=list)

    @property
    def arrays(self) -> int:
        return sum(1 for n in self.nodes if n.node_type == "array")

    @property
    def groups(self) -> int:
        return sum(1 for n in self.nodes if n.node_type == "group")

    def __str__(self) -> str:
        verb = "would migrate" if self.dry_run else "migrated"
        lines = [str(n) for n in self.nodes]
        lines.append(f"{verb} {self.arrays} arrays and {self.groups} groups in "
                     f"{self.target}" + (" (dry run: nothing written)" if self.dry_run
                                         else ""))
        return "\n".join(lines)


def migrate_v3(target: Any, *, path: str | None = None, to: Any = None,
               dry_run: bool = False, transformers: Any = None,
               progress: Progress | None = None) -> MigrationReport:
    """Migrate the v2 / v1 hierarchy at ``path`` (the whole store by default) of
    ``target`` (a path, URL or Store) to Zarr v3, in place or, with ``to``, into another
    store (the source unchanged). Returns the report: per node its old format and the
    choices made. See the module docstring for the promises. NodeNotFoundError when no
    node is at ``path``; MetadataError / UnsupportedExtensionError (naming the document
    and field) when a node cannot be converted, before anything is written."""
    from .node import normalize_path
    progress = progress or _no_progress
    node_path = normalize_path(path)
    label = target if isinstance(target, str) else repr(target)
    if to is not None and not dry_run:
        # the whole store: copying one node would give it v3 ancestor groups
        from .copying import copy_store
        copy_store(target, to, progress=progress)
        target, label = to, to if isinstance(to, str) else repr(to)
    report = MigrationReport(target=label, dry_run=dry_run)
    # planned on a read-only handle first: a path with no store is refused, not created
    with _opened(target, "r", transformers) as store:
        report.nodes = plan(store, node_path, progress)
        report.consolidated = _holding_zmetadata(store, report.nodes)
    if dry_run or not report.nodes:
        return report
    with _opened(target, "r+", transformers) as store, store.transaction():
        # planned again inside the write transaction: what is written is converted
        # from what the store holds as it commits
        report.nodes = plan(store, node_path)
        report.consolidated = _holding_zmetadata(store, report.nodes)
        _apply(store, report, progress)
    return report


@contextmanager
def _opened(target: Any, mode: str, transformers: Any) -> Iterator[Store]:
    store = open_store(target, mode=mode, transformers=transformers)
    try:
        yield store
    finally:
        if not isinstance(target, Store):
            store.close()


def _holding_zmetadata(store: Store, nodes: list[NodeMigration]) -> list[str]:
    groups = [n.path for n in nodes if n.node_type == "group" and n.from_format == 2]
    found = store.exists_many([f"{p}/{v2.ZMETADATA}" if p else v2.ZMETADATA
                               for p in groups])
    return [p for p, there in zip(groups, found) if there]


def plan(store: Store, path: str, progress: Progress = _no_progress
         ) -> list[NodeMigration]:
    """The migration of every v2 / v1 node at or below ``path``, converted but not
    written, parents before children. v3 nodes are passed over (and not descended
    into: a v3 group's members are v3)."""
    from .formats import read_node
    root = read_node(store, path, None) if not _both_formats(store, path) else \
        read_node(store, path, 2)
    if root is None:
        raise NodeNotFoundError("no array or group found", path="/" + path)
    out: list[NodeMigration] = []
    level = [(path, root)]
    while level:
        for p, metadata in level:
            if metadata.zarr_format != 3:
                out.append(_convert(p, metadata))
        progress("plan", len(out), len(out))
        level = _children(store, [(p, m) for p, m in level
                                  if isinstance(m, GroupMetadata) and m.zarr_format == 2])
    stale = store.exists_many([f"{n.path}/{ZARR_JSON}" if n.path else ZARR_JSON
                               for n in out])
    for n, there in zip(out, stale):
        if there:
            n.notes.append(f"a zarr.json was there beside the v{n.from_format} documents: "
                           f"replaced by the one converted from them")
    return out


def _both_formats(store: Store, path: str) -> bool:
    keys = [f"{path}/{n}" if path else n for n in (ZARR_JSON, v2.ZARRAY, v2.ZGROUP)]
    found = store.exists_many(keys)
    return found[0] and (found[1] or found[2])


def _children(store: Store, groups: list[tuple[str, GroupMetadata]]
              ) -> list[tuple[str, ArrayMetadata | GroupMetadata]]:
    """The v2 members of the v2 ``groups``, one listing per group and one batch read
    of all their documents."""
    names = DOCUMENTS[2]
    paths = []
    for p, _ in groups:
        prefix = f"{p}/" if p else ""
        paths += [prefix + e[:-1] for e in store.list_dir(prefix) if e.endswith("/")]
    if not paths:
        return []
    values = store.get_many([f"{p}/{n}" for p in paths for n in names])
    found = []
    for i, p in enumerate(paths):
        node = parse_documents(dict(zip(names, values[3 * i:3 * i + 3])), p, 2)
        if node is not None:
            found.append((p, node))
    return found


def _convert(path: str, metadata: ArrayMetadata | GroupMetadata) -> NodeMigration:
    fmt = metadata.zarr_format
    try:
        if isinstance(metadata, GroupMetadata):
            new, notes = v2.v2_group_to_v3(metadata)
        elif fmt == 2:
            new, notes = v2.v2_to_v3(metadata)
        else:
            new, notes = v1.v1_to_v3(metadata)
    except KvzarrError as e:
        if e.path is None:       # say which node cannot be migrated
            e.path = "/" + path
        raise
    return NodeMigration(path=path, node_type=metadata.node_type, from_format=fmt,
                         metadata=new, notes=list(notes),
                         old_keys=document_keys(path, fmt))


def _apply(store: Store, report: MigrationReport, progress: Progress) -> None:
    """Write every ``zarr.json`` and erase the old documents, in one transaction (on a
    directory: documents first, old keys after)."""
    from .consolidated import consolidate
    nodes = report.nodes
    docs = [(f"{n.path}/{ZARR_JSON}" if n.path else ZARR_JSON, n.metadata.to_bytes())
            for n in nodes]
    old = [k for n in nodes for k in n.old_keys]
    old += [f"{p}/{v2.ZMETADATA}" if p else v2.ZMETADATA for p in report.consolidated]
    with store.transaction():
        progress("write", 0, len(nodes))
        store.set_many(docs)
        store.erase_values(old)
        for p in report.consolidated:
            consolidate(store, p)
        progress("write", len(nodes), len(nodes))


__all__ = ["MigrationReport", "NodeMigration", "migrate_v3", "plan"]
