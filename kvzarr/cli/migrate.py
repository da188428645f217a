"""``kvzarr migrate v3 TARGET [--to DST] [--path P] [--dry-run]``: migrate the Zarr v2 /
v1 hierarchy in TARGET to Zarr v3, as :func:`kvzarr.migrate_v3` does:

* every v2 array and group and v1 array gets a ``zarr.json`` that reads the same chunk
  bytes (no chunk is rewritten) and loses its old documents; v2 consolidated metadata
  becomes v3 consolidated metadata;
* in place, all of it in one transaction (a failure leaves the store as it was), or,
  with ``--to DST``, into a verified copy of TARGET (TARGET unchanged);
* prints, for each node, what it was and each choice the conversion made (a null fill
  value, Blosc's automatic shuffle, an object array of strings); ``--dry-run`` prints
  the same and writes nothing.

Progress bars go to stderr when it is a terminal; the report to stdout.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="migrate a Zarr v2 / v1 hierarchy to Zarr v3",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("version", choices=["v3"], help="the format to migrate to")
    p.add_argument("target", metavar="TARGET", help="the store: a path or URL")
    p.add_argument("--to", metavar="DST", default=None,
                   help="migrate into a copy of TARGET here instead of in place")
    p.add_argument("--path", default=None,
                   help="the group or array to migrate (default: the whole store)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would be done; write nothing")
    p.set_defaults(run=lambda args: run(args.target, args.to, args.path, args.dry_run))


def run(target: str, to: str | None, path: str | None, dry_run: bool) -> int:
    import kvzarr

    from .common import ProgressBars
    with ProgressBars(unit=" nodes") as bars:
        report = kvzarr.migrate_v3(target, to=to, path=path, dry_run=dry_run,
                                   progress=bars)
    print(report)
    return 0
