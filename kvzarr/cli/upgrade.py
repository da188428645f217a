"""``kvzarr upgrade URL [--table T]``: migrate a SQL store to this kvzarr's schema.

The migration runs in one transaction (all of it or nothing). A path where no database
file is is exit status 2 and nothing is created. A one-step progress bar (with the time
taken) goes to stderr when it is a terminal: the migration reports no steps of its own.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("upgrade", help="migrate a SQL store's schema", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", help="the SQL store: a SQLite path or a SQLAlchemy URL")
    p.add_argument("--table", help="the store's table, when it is not the default")
    p.set_defaults(run=lambda args: run(args.url, args.table))


def run(url: str, table: str | None) -> int:
    from tqdm import tqdm

    from ..stores.sql import upgrade
    with tqdm(total=1, desc="upgrading", unit=" schema", file=sys.stderr,
              disable=None) as bar:
        old, new = upgrade(url, table=table)
        bar.update(1)
    print(f"{url}: schema version {old} -> {new}")
    return 0
