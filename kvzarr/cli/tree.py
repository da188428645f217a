"""``kvzarr tree STORE [PATH]``: the hierarchy below a group, drawn as a tree.

Each array shows its shape, data type (as ``zarr.json`` names it) and chunk layout.
PATH defaults to the root. Nothing is written; a missing store or node is exit status 2.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tree", help="draw the hierarchy below a group", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", help="the store: a path or URL")
    p.add_argument("path", nargs="?", help="a group in it (default: the root)")
    p.set_defaults(run=lambda args: run(args.store, args.path))


def run(target: str, path: str | None) -> int:
    import kvzarr
    from .common import open_existing
    with open_existing(target) as store:
        node = kvzarr.open(store, mode="r", path=path)
        print(render(node))
    return 0


def render(node: Any) -> str:
    """``node`` and everything below it as lines of a tree (``├──``, ``└──``)."""
    import kvzarr
    if isinstance(node, kvzarr.Array):
        return _label(node.name, node)
    # members are listed depth first, parents before children: nest them by path
    children: dict[str, list[tuple[str, Any]]] = {"": []}
    for name, member in node.members(max_depth=None):
        parent = name.rpartition("/")[0]
        children.setdefault(parent, []).append((name, member))
        children.setdefault(name, [])
    lines = [node.name]

    def walk(parent: str, indent: str) -> None:
        kids = children.get(parent, [])
        for i, (name, member) in enumerate(kids):
            last = i == len(kids) - 1
            lines.append(indent + ("└── " if last else "├── ")
                         + _label(name.rpartition("/")[2], member))
            walk(name, indent + ("    " if last else "│   "))

    walk("", "")
    return "\n".join(lines)


def _label(name: str, node: Any) -> str:
    import kvzarr
    from .common import chunk_text, data_type_name
    if isinstance(node, kvzarr.Array):
        return f"{name} {node.shape} {data_type_name(node)}, {chunk_text(node)}"
    return name + "/"
