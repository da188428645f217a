"""Copying a hierarchy, or one node of it, from one store to another, value by value:
:func:`copy_store` (and ``kvzarr cp SRC DST [--path P]``).

Promises
--------
* **Bytes, never re-encoded.** Every value (chunks, shards, ``zarr.json`` documents) is
  read from the source and written to the destination as the same bytes: codecs are not
  run, so any codec the source holds (even one kvzarr cannot decode) is copied intact,
  and the copy reads back bit for bit as the source did.
* **Verified.** While copying, a CRC-32C and the length of every value are kept; after
  the copy every value is read back from the destination and compared with them. A
  difference raises :class:`~kvzarr.errors.CopyVerificationError` naming the keys.
* **One transaction per batch** on the destination: values are written in batches
  (``batch_keys`` values or ``batch_bytes`` bytes, whichever comes first), each in one
  write transaction (``set_many``). The source is read inside ONE read transaction for
  the whole copy, so on a transactional source (LMDB, SQL, zip, memory) the copy is
  of one consistent snapshot even while others write to it; a directory source should
  not be written to meanwhile.
* **Memory** stays within about twice ``batch_bytes`` (the batch being written and the
  values read for the next; a single value larger than that is held whole), whether
  the values are small chunks or large shards, plus each copied key and its checksum.
* **Nothing appears half copied.** Chunks are written first and the ``zarr.json``
  documents last (deepest nodes first, the ancestors of ``path`` at the very end), so
  every node's document lands after all of its chunks: a copy interrupted at any
  moment (a crash, a full disk) leaves chunks no document refers to yet, and nodes
  that are complete, never an array that reads partly as fill values. Such leftovers
  make the next copy refuse (they are existing content) until it is run with
  ``overwrite=True``, which erases them first.
* **Existing nodes are not overwritten** unless ``overwrite=True``: any value already
  under the copied path on the destination (or any value at all, when the whole store
  is copied) makes the copy raise :class:`~kvzarr.errors.NodeExistsError` before it
  writes anything. With ``overwrite=True`` those values are erased first, in one
  transaction, then the copy runs (a crash after that leaves the old node gone and
  the new one partly copied, invisible as above). A zip archive named by its path is
  written in one transaction (one central directory): a copy that fails or is killed
  leaves it as it was.
* **Ancestors.** Copying ``path="a/b"`` into a store that lacks group ``a`` (or the
  root) copies those groups' ``zarr.json`` from the source, or writes empty groups where
  the source has none, so the node is reachable. An ancestor that is an array on the
  destination refuses the copy (:class:`~kvzarr.errors.NodeTypeError`) before anything
  is written.

Reserved keys
-------------
Keys under ``__kvzarr/`` (:data:`kvzarr.stores.keys.RESERVED_PREFIX`) hold the storage
transformers' bookkeeping, e.g. the checksum transformer's record of each value at
``__kvzarr/crc/<key>``. Since values are copied byte for byte, such records stay true
for the copies, so with ``reserved=True`` (the default) they are copied like any value:
all of them when the whole store is copied, and for ``path="P"`` those of the copied
values (``__kvzarr/<owner>/P/...``, the layout the transformers use for per-key
records). A store copied from a checksummed file is therefore checksummed too, and
``kvzarr verify`` works on the copy. With ``overwrite=True`` the destination's records
of the values erased are erased with them, so no stale record remains. When the
destination is a transformer stack that owns such keys (a ``Checksum`` layer writes its
own records and refuses writes to them), pass ``reserved=False``; a source opened
through such a stack shows no records, so none are copied.

Thread/process promises: the copy uses the stores' own transactions and nothing else;
two copies into the same destination path at once can both pass the existence check
(the check and the writes are not one transaction): do not run them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from itertools import chain
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import crc32c as _crc32c

from .errors import (CopyVerificationError, InvalidKeyError, MetadataError, NodeExistsError,
                     NodeNotFoundError, NodeTypeError, StoreConfigError, StoreError)
from .formats import documents_of, node_exists, node_keys, read_node
from .metadata.v2 import ZARRAY, ZATTRS, ZGROUP, ZMETADATA
from .metadata.v3 import ZARR_JSON, GroupMetadata
from .node import normalize_path
from .stores import open_store
from .stores.base import Store
from .stores.keys import RESERVED_PREFIX, ancestor_paths
from .stores.zip import ZipStore
from .transformers.base import stack_layers

#: defaults: a batch is at most this many values or about this many bytes
BATCH_KEYS = 1000
BATCH_BYTES = 64 << 20
#: the most values read from the source in one ``get_many``
_READ_GROUP = 64

#: ``progress(stage, done, total)``: stage is "copy" or "verify", counts are values
Progress = Callable[[str, int, int], None]


@dataclass
class CopyReport:
    """What :func:`copy_store` did."""
    #: values written (chunks, documents and reserved keys)
    values: int = 0
    #: bytes written
    bytes: int = 0
    #: nodes copied (``zarr.json`` documents, ancestor groups included)
    nodes: int = 0
    #: reserved ``__kvzarr/`` values among ``values``
    reserved: int = 0
    #: values read back from the destination and found equal (0 without verification)
    verified: int = 0
    #: write transactions on the destination (the erasure of ``overwrite`` included;
    #: into a zip archive named by its path they are parts of one)
    transactions: int = 0
    #: destination values erased first by ``overwrite=True``
    erased: int = 0
    #: the keys copied, in the order written
    keys: list[str] = field(default_factory=list, repr=False)


def copy_store(source: Any, dest: Any, *, path: str | None = None, overwrite: bool = False,
               verify: bool = True, reserved: bool = True, batch_keys: int = BATCH_KEYS,
               batch_bytes: int = BATCH_BYTES, progress: Progress | None = None
               ) -> CopyReport:
    """Copy the node at ``path`` (default: the whole store) and everything below it from
    ``source`` to the same path in ``dest``; return a :class:`CopyReport`.

    ``source`` and ``dest`` are Stores (transformer stacks included) or paths/URLs as
    :func:`kvzarr.open_store` takes them; a path or URL is opened here (the source
    read-only: a missing source is :class:`~kvzarr.errors.StoreError` and nothing is
    created) and closed again. See the module docstring for what is promised about
    bytes, verification, batches, crashes, existing nodes and reserved keys.

    Errors: :class:`NodeNotFoundError` when ``path`` is no node of the source,
    :class:`NodeExistsError` when the destination holds values there (without
    ``overwrite``), :class:`NodeTypeError` when an ancestor of ``path`` is an array on
    the destination, :class:`StoreConfigError` for bad batch sizes or a source and
    destination that are the same store, :class:`CopyVerificationError` when what the
    destination returns differs from what was copied.
    """
    if isinstance(batch_keys, bool) or not isinstance(batch_keys, int) or batch_keys < 1:
        raise StoreConfigError(f"batch_keys must be a positive integer, not {batch_keys!r}",
                               field="batch_keys")
    if isinstance(batch_bytes, bool) or not isinstance(batch_bytes, int) or batch_bytes < 1:
        raise StoreConfigError(f"batch_bytes must be a positive integer, not {batch_bytes!r}",
                               field="batch_bytes")
    node_path = normalize_path(path)
    _refuse_same_target(source, dest)
    src = _open_source(source)
    try:
        _check_source(src, node_path)   # before a new destination file is made for nothing
        dst = dest if isinstance(dest, Store) else open_store(dest, mode="a")
        try:
            if stack_layers(src)[-1] is stack_layers(dst)[-1]:
                raise StoreConfigError("source and destination are the same store",
                                       field="dest")
            with _whole_copy(dst, opened_here=dst is not dest):
                return _copy(src, dst, node_path, overwrite=overwrite, verify=verify,
                             reserved=reserved, batch_keys=batch_keys,
                             batch_bytes=batch_bytes, progress=progress or _no_progress)
        finally:
            if dst is not dest:
                dst.close()
    finally:
        if src is not source:
            src.close()


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


def _whole_copy(dst: Store, opened_here: bool) -> AbstractContextManager[Any]:
    """One write transaction around the whole copy into a zip archive named by its
    path: each commit of a zip archive writes its whole central directory, so one
    transaction writes one, and its members are appended as they are set (no batch
    stays in memory). 50,000 values of 4 KiB from SQLite, side script, alternating:
    1.02-1.04 s against 1.17-1.42 with a transaction per batch, and no dead directories
    left in the archive (190 MB against 263 MB). A copy that fails or is killed leaves
    the archive as it was. Other destinations: a transaction per batch."""
    if opened_here and isinstance(dst, ZipStore):
        return dst.transaction()
    return nullcontext()


def _open_source(source: Any) -> Store:
    if isinstance(source, Store):
        return source
    if source is None:
        raise StoreConfigError("copy_store needs a source store", field="source")
    text = os.fspath(source)
    if "://" not in text and not os.path.exists(text):
        # opening it would create an empty store, which has nothing to copy
        raise StoreError("no store at this path", path=text)
    return open_store(text, mode="r")


def _check_source(src: Store, path: str) -> None:
    """NodeNotFoundError unless the source has a node at ``path`` (any value at all,
    for the root)."""
    if path:
        if not node_exists(src, path):
            raise NodeNotFoundError("no array or group found in the source",
                                    path="/" + path)
    elif next(iter(src.list_prefix("")), None) is None:
        raise NodeNotFoundError("the source store holds nothing to copy", path="/")


def _refuse_same_target(source: Any, dest: Any) -> None:
    """Two targets naming one file or directory (``x.sqlite``, ``./x.sqlite`` and
    ``sqlite:///x.sqlite`` alike): refused before either is opened, since erasing the
    destination (``overwrite``) would erase the source. Two spellings of one database
    server URL are not detected."""
    if isinstance(source, Store) or isinstance(dest, Store) or source is None or dest is None:
        return
    a, b = os.fspath(source), os.fspath(dest)
    pa, pb = _local_path(a), _local_path(b)
    if pa is not None and pb is not None:
        same = os.path.exists(pa) and os.path.exists(pb) and os.path.samefile(pa, pb)
    else:
        same = a == b and not a.startswith("memory://")
    if same:
        raise StoreConfigError("source and destination are the same store", field="dest")


def _local_path(target: str) -> str | None:
    """The file or directory a target names, or None for a server or memory URL."""
    if "://" not in target:
        return target
    if target.startswith("file://"):
        return unquote(target[len("file://"):])
    if target.startswith("sqlite") and ":///" in target:
        return unquote(target.split(":///", 1)[1].split("?", 1)[0])
    return None


def _copy(src: Store, dst: Store, path: str, *, overwrite: bool, verify: bool,
          reserved: bool, batch_keys: int, batch_bytes: int,
          progress: Progress) -> CopyReport:
    report = CopyReport()
    ancestors = ancestor_paths(path)
    with src.transaction(write=False):
        keys = _source_keys(src, path, reserved)
        existing = _existing_keys(dst, path)
        if existing and not overwrite:
            raise NodeExistsError(
                f"the destination already holds {len(existing)} "
                f"value{'s' if len(existing) != 1 else ''} there (e.g. {existing[0]!r})",
                path="/" + path, hint="pass overwrite=True (kvzarr cp --overwrite) to "
                                      "replace them")
        fmt = _format_of(src, path)
        missing_ancestors = _missing_ancestors(dst, ancestors, fmt)
        if existing:
            with dst.transaction():
                # one prefix erasure (a range delete where the store has one) and the
                # records of the erased values
                dst.erase_prefix(path + "/" if path else "")
                dst.erase_values([k for k in existing if k.startswith(RESERVED_PREFIX)])
            report.erased = len(existing)
            report.transactions += 1
        ordered = _write_order(keys)
        ancestor_items = _ancestor_items(src, missing_ancestors, reserved, fmt)
        digests: dict[str, tuple[int, int]] = {}
        total = len(ordered) + len(ancestor_items)
        progress("copy", 0, total)
        for batch in _batches(src, ordered, ancestor_items, batch_keys, batch_bytes):
            with dst.transaction():
                dst.set_many(batch)
            report.transactions += 1
            for key, value in batch:
                digests[key] = (len(value), _crc32c.crc32c(value))
                report.values += 1
                report.bytes += len(value)
                report.keys.append(key)
                if key.startswith(RESERVED_PREFIX):
                    report.reserved += 1
                elif key.rsplit("/", 1)[-1] in _NODE_DOCUMENTS:
                    report.nodes += 1
            progress("copy", report.values, total)
    if verify:
        report.verified = _verify(dst, report.keys, digests, batch_keys, batch_bytes,
                                  progress)
    return report


def _source_keys(src: Store, path: str, reserved: bool) -> list[str]:
    if not path:
        keys = list(src.list_prefix(""))
        return keys if reserved else [k for k in keys if not k.startswith(RESERVED_PREFIX)]
    _check_source(src, path)   # again, inside the read transaction
    keys = list(src.list_prefix(path + "/"))
    if reserved:
        keys.extend(_reserved_under(src, path))
    return keys


def _reserved_under(store: Store, path: str) -> Iterator[str]:
    """The per-key records of the values under ``path``: ``__kvzarr/<owner>/<path>/...``."""
    try:
        owners = [o for o in store.list_dir(RESERVED_PREFIX) if o.endswith("/")]
    except InvalidKeyError:
        return   # a transformer stack that owns the prefix and hides it: nothing shown
    for owner in owners:
        yield from store.list_prefix(f"{RESERVED_PREFIX}{owner}{path}/")


def _existing_keys(dst: Store, path: str) -> list[str]:
    """What the destination holds where the copy goes (the whole store for the root)."""
    if not path:
        return list(dst.list_prefix(""))
    keys = list(dst.list_prefix(path + "/"))
    if keys:
        # only with values there: records without values are stale, erased with them
        keys.extend(_reserved_under(dst, path))
    return keys


def _format_of(src: Store, path: str) -> int:
    """The Zarr format of the copied node, from which documents it has (never parsed:
    the copy takes documents kvzarr cannot read as they are): 2 for ``.zarray`` /
    ``.zgroup`` without a ``zarr.json``, else 3."""
    if not path:
        return 3
    v3, *v2 = src.exists_many(node_keys(path, 3) + node_keys(path, 2))
    return 2 if any(v2) and not v3 else 3


def _missing_ancestors(dst: Store, ancestors: list[str], zarr_format: int) -> list[str]:
    """The ancestors the destination lacks (deepest first), up to the first one it has,
    which must be a group (NodeTypeError otherwise) of the copied node's Zarr format
    (MetadataError otherwise: a v2 node never goes into a v3 hierarchy, nor the
    reverse)."""
    missing = []
    for a in ancestors:
        try:
            found = read_node(dst, a)
        except MetadataError:      # unreadable: not a group to build on
            raise NodeTypeError("an ancestor of the copied node is not a readable group "
                                "on the destination", path="/" + a) from None
        if found is None:
            missing.append(a)
            continue
        if not isinstance(found, GroupMetadata):
            raise NodeTypeError("an ancestor of the copied node is an array on the "
                                "destination", path="/" + a)
        if found.zarr_format != zarr_format:
            raise MetadataError(f"the copied node is Zarr v{zarr_format} but the group "
                                f"above it on the destination is v{found.zarr_format}",
                                path="/" + a, field="zarr_format")
        break
    return missing


def _ancestor_items(src: Store, missing: list[str], reserved: bool, zarr_format: int
                    ) -> list[tuple[str, bytes]]:
    """The documents of the ancestors the destination lacks: the source's group
    documents (with their records, when reserved keys are copied), else empty groups
    of the copied node's format."""
    items: list[tuple[str, bytes]] = []
    records: list[tuple[str, bytes]] = []
    for a in missing:
        try:
            found = read_node(src, a, zarr_format)
        except MetadataError:
            found = None
        if not isinstance(found, GroupMetadata):
            found = GroupMetadata(zarr_format=zarr_format)
            docs = documents_of(a, found)
        else:      # the source's own bytes
            keys = [k for k, _ in documents_of(a, found)]
            docs = list(zip(keys, src.get_many(keys)))
        for key, doc in docs:
            if doc is None:
                continue
            items.append((key, bytes(doc)))
            if reserved:
                records.extend(_records_of(src, key))
    return records + items


def _records_of(store: Store, key: str) -> list[tuple[str, bytes]]:
    """The per-key records of ``key`` (``__kvzarr/<owner>/<key>``) the store holds."""
    try:
        owners = [o for o in store.list_dir(RESERVED_PREFIX) if o.endswith("/")]
    except InvalidKeyError:
        return []
    names = [f"{RESERVED_PREFIX}{owner}{key}" for owner in owners]
    return [(n, bytes(v)) for n, v in zip(names, store.get_many(names)) if v is not None]


#: the names of the documents that make a node (v3, v2), and the other metadata
#: documents (v2 attributes and consolidated metadata), which go before them
_NODE_DOCUMENTS = {ZARR_JSON, ZARRAY, ZGROUP}
_OTHER_DOCUMENTS = {ZATTRS, ZMETADATA}


def _write_order(keys: list[str]) -> list[str]:
    """Data first, then reserved records, then the metadata documents deepest first
    (at each node its v2 attributes before the ``zarr.json`` / ``.zarray`` /
    ``.zgroup`` that makes it a node), the copied node's own document last: nothing is
    visible before its chunks."""
    data, records, docs = [], [], []
    for k in keys:
        name = k.rpartition("/")[2]
        if k.startswith(RESERVED_PREFIX):
            records.append(k)
        elif name in _NODE_DOCUMENTS or name in _OTHER_DOCUMENTS:
            docs.append(k)
        else:
            data.append(k)
    docs.sort(key=lambda k: (-k.count("/"), k.rpartition("/")[2] in _NODE_DOCUMENTS, k))
    return data + records + docs


def _batches(src: Store, keys: list[str], extra: list[tuple[str, bytes]],
             batch_keys: int, batch_bytes: int) -> Iterator[list[tuple[str, bytes]]]:
    """(key, value) batches in the order of ``keys`` then ``extra`` (the ancestors'
    documents), each of at most ``batch_keys`` values, closed once it reaches
    ``batch_bytes``."""
    batch: list[tuple[str, bytes]] = []
    size = 0
    for key, value in chain(_read(src, keys, batch_bytes), extra):
        batch.append((key, value))
        size += len(value)
        if len(batch) >= batch_keys or size >= batch_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _read(src: Store, keys: list[str], batch_bytes: int) -> Iterator[tuple[str, bytes]]:
    """(key, value) of ``keys`` in order, read with ``get_many`` in groups sized from the
    values read so far (about ``batch_bytes`` a group, at most ``_READ_GROUP`` keys,
    starting with one key), so that memory stays near one batch whether the values are
    small chunks or large shards. A key that vanished since it was listed is skipped:
    inside the read transaction of a transactional store that cannot happen."""
    start, group_size, seen, seen_bytes = 0, 1, 0, 0
    while start < len(keys):
        group = keys[start:start + group_size]
        start += len(group)
        for key, value in zip(group, src.get_many(group)):
            if value is None:
                continue
            seen += 1
            seen_bytes += len(value)
            yield key, bytes(value)
        average = max(1, seen_bytes // max(1, seen))
        group_size = max(1, min(_READ_GROUP, batch_bytes // average))


def _verify(dst: Store, keys: list[str], digests: dict[str, tuple[int, int]],
            batch_keys: int, batch_bytes: int, progress: Progress) -> int:
    """Read every copied value back from ``dst`` and compare its length and CRC-32C with
    what was written: one read transaction per group of at most ``batch_keys`` values
    or about ``batch_bytes`` bytes (their lengths are known)."""
    bad: list[str] = []
    done = 0
    progress("verify", 0, len(keys))
    for group in _groups(keys, digests, batch_keys, batch_bytes):
        with dst.transaction(write=False):
            for i, value in dst.iter_values(group):
                key = group[i]
                if value is None or (len(value), _crc32c.crc32c(value)) != digests[key]:
                    bad.append(key)
        done += len(group)
        progress("verify", done, len(keys))
    if bad:
        raise CopyVerificationError(
            f"{len(bad)} of {len(keys)} copied values read back different from the source "
            f"(first: {bad[0]!r})", keys=bad, key=bad[0])
    return len(keys)


def _groups(keys: list[str], digests: dict[str, tuple[int, int]], batch_keys: int,
            batch_bytes: int) -> Iterator[list[str]]:
    group: list[str] = []
    size = 0
    for key in keys:
        group.append(key)
        size += digests[key][0]
        if len(group) >= batch_keys or size >= batch_bytes:
            yield group
            group, size = [], 0
    if group:
        yield group


__all__ = ["BATCH_BYTES", "BATCH_KEYS", "CopyReport", "copy_store"]
