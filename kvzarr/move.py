"""Moving a node, and every key below it, to another path of the same store.

One write transaction: on a transactional store a reader sees the node at its old path
or at its new one, never both or neither, and a crash leaves one of the two. The keys
are copied through the store's public operations (a storage transformer's records move
with their values), a batch at a time, then the old ones are erased, then the
consolidated metadata of the groups above either path that hold it is updated.

On a store without transactions (a directory) the same steps are each atomic per key,
in an order that keeps every moment readable: the array data first, then the node
documents deepest first with the moved node's own ``zarr.json`` (v2: ``.zarray`` /
``.zgroup``) last (the new path is a
node only once all of it is there); then the old node's ``zarr.json`` (the old path
stops being a node), then the rest of its keys; then the consolidated metadata. A crash
while copying leaves the node whole at its old path and keys without a ``zarr.json``
under the new one (a later move there is refused until ``store.erase_prefix(dest +
"/")`` removes them); a crash after the copy and before the old ``zarr.json`` is erased
leaves the node whole at both paths; a crash while erasing leaves it whole at its new
path and stray keys under the old one. In every case the consolidated metadata above
may still describe the old path (``kvzarr.consolidate_metadata`` rebuilds it). The move
is not isolated from other writers of the subtree on such a store.
"""

from __future__ import annotations

from .errors import MetadataError, NodeExistsError, NodeNotFoundError
from .formats import DOCUMENTS, NODE_DOCUMENTS, node_keys
from .hierarchy import prepare_node_path, sync_any_consolidated
from .stores.base import Store

#: keys read and written per step: bounds the memory a move of large chunks takes
_BATCH = 64


def move_node(store: Store, source: str, dest: str, zarr_format: int = 3) -> None:
    """Move the node at ``source`` (a normalised path) with its subtree to ``dest``,
    making the missing groups above ``dest``; the node and its groups are of
    ``zarr_format`` (3, or 2: the documents are ``.zarray``/``.zgroup``/``.zattrs``
    instead of ``zarr.json``). NodeNotFoundError when no node is at ``source``;
    NodeExistsError when anything is stored at or below ``dest``; MetadataError for a
    move into the node itself; NodeTypeError when an array is above ``dest``. A failed
    move changes nothing."""
    if not source or not dest:
        raise MetadataError("a move needs a source and a destination below the group",
                            path="/" + (source or dest))
    if dest == source or dest.startswith(source + "/"):
        raise MetadataError(f"cannot move a node into itself ({dest!r})", path="/" + source)
    documents = set(DOCUMENTS[zarr_format])
    nodes_named = set(NODE_DOCUMENTS[zarr_format])
    with store.transaction():
        if not any(store.exists_many(node_keys(source, zarr_format))):
            raise NodeNotFoundError("no array or group to move", path="/" + source)
        if any(store.exists_many(node_keys(dest))) or any(
                True for _ in store.list_prefix(dest + "/")):
            raise NodeExistsError("the destination already holds keys", path="/" + dest,
                                  hint="delete it first, or choose another name")
        made, _, _ = prepare_node_path(store, dest, overwrite=False, zarr_format=zarr_format)
        keys = list(store.list_prefix(source + "/"))
        # data first, then documents deepest first, the moved node's own last (its
        # attributes before the document that makes it a node)
        keys.sort(key=lambda k: (k.rpartition("/")[2] in documents, -k.count("/"),
                                 k.rpartition("/")[2] in nodes_named))
        cut = len(source)
        for i in range(0, len(keys), _BATCH):
            batch = keys[i:i + _BATCH]
            store.set_many([(dest + k[cut:], v) for k, v in zip(batch, store.get_many(batch))
                            if v is not None])
        store.erase_values(node_keys(source, zarr_format))
        store.erase_prefix(source + "/")
        nodes = [dest + k[cut:].rpartition("/")[0] for k in keys
                 if k.rpartition("/")[2] in nodes_named]
        sync_any_consolidated(store, zarr_format, changed=[*made, *nodes], removed=[source])


__all__ = ["move_node"]
