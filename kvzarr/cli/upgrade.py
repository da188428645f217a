"""``kvzarr upgrade URL [--table T]``: migrate a SQL store to this kvzarr's schema."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("upgrade", help="migrate a SQL store's schema")
    p.add_argument("url")
    p.add_argument("--table", help="the store's table, when it is not the default")
    p.set_defaults(run=lambda args: run(args.url, args.table))


def run(url: str, table: str | None) -> int:
    from ..stores.sql import upgrade
    old, new = upgrade(url, table=table)
    print(f"{url}: schema version {old} -> {new}")
    return 0
