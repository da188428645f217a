"""``kvzarr info STORE [PATH]``: show a hierarchy or one array."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="show a hierarchy or an array")
    p.add_argument("store")
    p.add_argument("path", nargs="?")
    p.set_defaults(run=lambda args: run(args.store, args.path))


def run(target: str, path: str | None) -> int:
    import kvzarr
    with kvzarr.open_store(target, mode="r") as store:
        node = kvzarr.open(store, mode="r", path=path)
        print(node.tree() if isinstance(node, kvzarr.Group) else node.info)
    return 0
