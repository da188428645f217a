"""What arrays and groups share: where they live, their metadata, their attributes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .attributes import Attributes
from .consolidated import sync_consolidated
from .consolidated_v2 import sync_v2_consolidated
from .errors import (InvalidKeyError, MetadataError, NodeTypeError, ReadOnlyError,
                     ValueTypeError)
from .formats import document_keys, require_node, rewrite_node
from .metadata.v3 import ZARR_JSON, ArrayMetadata, GroupMetadata
from .stores.base import Store
from .stores.keys import RESERVED_PREFIX


def normalize_path(path: str | None) -> str:
    """A node path without leading/trailing '/' ("" for the root). The rest of what a
    name may not hold (NUL, lone surrogates, the store's length limits) is refused by
    the store's key check (:func:`kvzarr.stores.keys.check_key`) with InvalidKeyError,
    the same on every store; names under ``__kvzarr`` are refused here (the keys below
    :data:`~kvzarr.stores.keys.RESERVED_PREFIX` belong to the storage transformers)."""
    if not path:
        return ""
    if not isinstance(path, str):
        raise ValueTypeError(f"a node path is a str, not {type(path).__name__}")
    if _RESERVED in path:
        _check_reserved(path.replace("\\", "/").strip("/"))
    if ("." not in path and "\\" not in path and "//" not in path and path[0] != "/"
            and path[-1] != "/"):
        return path   # already normal: no '.' (so no '..' or zarr.json), no extra '/'
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    for p in parts:
        if p in (".", ".."):
            raise MetadataError(f"node path may not contain {p!r} segments", path=path)
        if p == ZARR_JSON:
            raise MetadataError("a node may not be named 'zarr.json'", path=path)
    return "/".join(parts)


#: the first segment of the keys storage transformers own (RESERVED_PREFIX without "/")
_RESERVED = RESERVED_PREFIX[:-1]


def _check_reserved(normal: str) -> None:
    if normal == _RESERVED or normal.startswith(RESERVED_PREFIX):
        raise InvalidKeyError(f"node names under {_RESERVED!r} are reserved for kvzarr's "
                              f"storage transformers", key=normal)


def metadata_key(path: str) -> str:
    """The key of the ``zarr.json`` of the node at ``path`` (normalised)."""
    return f"{path}/{ZARR_JSON}" if path else ZARR_JSON


def read_node_metadata(store: Store, path: str, zarr_format: int | None = None
                       ) -> ArrayMetadata | GroupMetadata:
    """The parsed metadata of the node at ``path`` (normalised), in any Zarr format or
    the one ``zarr_format`` names (:mod:`kvzarr.formats`); NodeNotFoundError if there is
    none."""
    return require_node(store, path, zarr_format)


def reopen_node(cls: type, store: Store, path: str, read_only: bool,
                options: dict[str, Any]) -> Any:
    """A pickled node in the receiving process: its metadata read from the (reopened)
    store now. NodeNotFoundError if it was deleted meanwhile, NodeTypeError if an array
    became a group or the reverse."""
    metadata = read_node_metadata(store, path, options.pop("zarr_format", None))
    if not isinstance(metadata, cls._metadata_kind):
        raise NodeTypeError(f"a {cls.__name__} was pickled, but the node at this path is "
                            f"no longer one", path="/" + path)
    return cls(store, path, metadata, read_only=read_only, **options)


class Node:
    """Base of Array and Group: ``store``, ``path`` (without a leading "/"), the
    ``metadata`` read when the handle was made (a handle sees another handle's resize
    or attribute change once it is opened again), ``read_only``. Each operation runs in
    its own store transaction, or joins the caller's ``with store.transaction():``.

    Closing: ``node.close()`` (or leaving ``with kvzarr.open(...) as node:``) closes the
    store when the opening function opened it from a path or URL (the node owns it);
    every node on that store then raises StoreClosedError on use. A Store object passed
    in by the caller stays the caller's to close: ``close()`` leaves it open. Closing
    twice is a no-op.

    Processes: a node pickles to (store, path, read_only, options), never to its data
    or metadata; the receiving process opens the store (once per process, see
    :mod:`kvzarr.stores.reopen`) and reads the node's metadata afresh, so a resize or
    attribute change made in between is seen there. A node on a MemoryStore raises
    NotPicklableError. A node unpickled in another process does not own its store."""

    metadata: ArrayMetadata | GroupMetadata
    #: the metadata a node of this class stands for (checked when it is unpickled)
    _metadata_kind: type = object
    #: whether the opening function opened ``store`` for this node (close() closes it)
    _owns_store = False

    def __init__(self, store: Store, path: str, metadata: Any, *, read_only: bool = False) -> None:
        self.store = store
        self.path = path
        self.metadata = metadata
        self.read_only = read_only or store.read_only or metadata.zarr_format == 1

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store if this node owns it (see the class docstring)."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return (reopen_node, (type(self), self.store, self.path, self.read_only,
                              {**self._reopen_options(),
                               "zarr_format": self.metadata.zarr_format}))

    def _reopen_options(self) -> dict[str, Any]:
        """Keyword arguments of the constructor that travel with a pickled node."""
        return {}

    @property
    def name(self) -> str:
        """Absolute path of the node, as zarr-python names it ("/" for the root)."""
        return "/" + self.path

    @property
    def basename(self) -> str:
        """The last segment of the node's path ("" for the root)."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def attrs(self) -> Attributes:
        """The user attributes, a mutable mapping; each change is one transaction
        (:class:`~kvzarr.attributes.Attributes`)."""
        return Attributes(self)

    def _attributes(self) -> dict[str, Any]:
        return self.metadata.attributes

    def _check_writable(self) -> None:
        if self.metadata.zarr_format == 1:
            raise ReadOnlyError("Zarr v1 arrays are read only: kvzarr reads them and "
                                "migrates them to v3", path=self.name,
                                hint="kvzarr migrate v3 STORE (or kvzarr.migrate_v3)")
        if self.read_only:
            raise ReadOnlyError("node was opened read-only", path=self.name)

    def _update_attributes(self, change: Callable[[dict[str, Any]], None]) -> None:
        def edit(doc: dict[str, Any]) -> None:
            attrs = dict(doc.get("attributes") or {})
            change(attrs)
            doc["attributes"] = attrs
        self._rewrite_metadata(edit)

    def _rewrite_metadata(self, edit: Callable[[dict[str, Any]], None]) -> None:
        """Read-modify-write of this node's metadata documents (``zarr.json``; for a v2
        node ``.zarray``/``.zgroup`` and ``.zattrs``, see :func:`kvzarr.formats.rewrite_node`)
        in one transaction, under the store's key lock of them (no lost update on a store without transactions either;
        concurrent writers of the same document each see the other's change). Only the members
        ``edit`` changes are touched, so documents written by other tools keep their form.
        The result is parsed (validated) before it is written. The consolidated metadata
        of the groups above that hold it is updated in the same transaction (on a store
        without transactions right after, see :mod:`kvzarr.consolidated`)."""
        self._check_writable()
        keys = document_keys(self.path, self.metadata.zarr_format)
        with self.store.transaction():
            # the key lock makes it exclusive where the transaction does not (a
            # directory); released before the ancestors' locks are taken
            with self.store.key_lock(keys):
                fresh = rewrite_node(self.store, self.path, self.metadata, edit)
            if fresh.zarr_format == 3:
                sync_consolidated(self.store, changed=[self.path])
            else:
                sync_v2_consolidated(self.store, changed=[self.path])
        self._set_metadata(fresh)

    def _set_metadata(self, metadata: Any) -> None:
        self.metadata = metadata

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and other.store is self.store
                and other.path == self.path)

    def __hash__(self) -> int:
        return hash((id(self.store), self.path))
