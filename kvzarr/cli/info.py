"""``kvzarr info STORE [PATH]``: describe one array or group.

An array: the rows of ``Array.info_complete()`` (shape; data type and fill value as its
``zarr.json`` names them; shard and chunk shapes, or the chunk sizes of a rectilinear
grid; filters, serializer and compressors; dimension names; bytes, bytes stored and the
compression ratio; chunks written), then its chunk grid, codecs and attributes as they
are stored (JSON). A group: its members, the bytes stored below it and its attributes.
PATH defaults to the root. Nothing is written; a missing store or node is exit status 2.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..grid import chunk_grid_to_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="describe an array or a group", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", help="the store: a path or URL")
    p.add_argument("path", nargs="?", help="an array or group in it (default: the root)")
    p.set_defaults(run=lambda args: run(args.store, args.path))


def run(target: str, path: str | None) -> int:
    import kvzarr
    from .common import open_existing
    with open_existing(target) as store:
        node = kvzarr.open(store, mode="r", path=path)
        print(describe(node))
    return 0


def describe(node: Any) -> str:
    """The text ``kvzarr info`` prints for ``node``."""
    import kvzarr
    if isinstance(node, kvzarr.Array):
        rows = node.info_complete().rows()
        m = node.metadata
        rows += [("Chunk grid", _compact(chunk_grid_to_json(m.chunk_grid, m.chunk_grid_name))),
                 ("Chunk key encoding", _compact(m.chunk_key_encoding.to_json())),
                 ("Codecs", _compact([c.to_json() for c in m.codecs])),
                 ("Attributes", _compact(m.attributes))]
    else:
        rows = _group_rows(node)
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}} : {v}" for k, v in rows)


def _group_rows(group: Any) -> list[tuple[str, str]]:
    import kvzarr
    from ..array_info import byte_info
    members = list(group.members())
    arrays = sum(1 for _, m in members if isinstance(m, kvzarr.Array))
    prefix = f"{group.path}/" if group.path else ""
    return [("Type", "Group"), ("Zarr format", str(group.metadata.zarr_format)),
            ("Path", group.name),
            ("Store", repr(group.store)), ("Read-only", str(group.read_only)),
            ("Members", f"{len(members)} ({arrays} arrays, {len(members) - arrays} groups)"),
            ("No. bytes stored", byte_info(group.store.getsize_prefix(prefix))),
            ("Attributes", _compact(group.metadata.attributes))]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
