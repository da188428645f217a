"""``kvzarr ls STORE [PATH]``: the members of a group, one per line.

A group is shown as ``NAME/``; an array as ``NAME  SHAPE  DATA-TYPE  CHUNKS``, the data
type as its ``zarr.json`` names it. PATH (default: the root) may name an array: its own
line is shown. Nothing is written; a missing store or node is exit status 2.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ls", help="list the members of a group", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", help="the store: a path or URL")
    p.add_argument("path", nargs="?", help="a group or array in it (default: the root)")
    p.set_defaults(run=lambda args: run(args.store, args.path))


def run(target: str, path: str | None) -> int:
    import kvzarr
    from .common import open_existing
    with open_existing(target) as store:
        node = kvzarr.open(store, mode="r", path=path)
        if isinstance(node, kvzarr.Array):
            rows = [_row(node.basename or "/", node)]
        else:
            rows = [_row(name, child) for name, child in node.members()]
    print(_columns(rows), end="")
    return 0


def _row(name: str, node: object) -> list[str]:
    import kvzarr
    from .common import chunk_text, data_type_name
    if isinstance(node, kvzarr.Array):
        return [name, str(node.shape), data_type_name(node), chunk_text(node)]
    return [name + "/"]


def _columns(rows: list[list[str]]) -> str:
    """Rows as left-aligned columns two spaces apart, one line each."""
    widths = [max((len(r[i]) for r in rows if len(r) > i), default=0)
              for i in range(max((len(r) for r in rows), default=0))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip()
             for r in rows]
    return "".join(line + "\n" for line in lines)
