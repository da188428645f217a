"""``kvzarr cp SRC DST [--path P] [--overwrite] [--skip-reserved] [--batch-keys N]
[--batch-mb MB]``: copy a hierarchy, or the node at P and everything below it, from one
store to another (any two of LMDB, SQLite, PostgreSQL, zip, directory), as
:func:`kvzarr.copy_store` does:

* chunks are copied as their stored bytes, never decoded or re-encoded;
* the destination is written in batches, one transaction each, chunks first and
  ``zarr.json`` documents last (an interrupted copy shows no partly copied node);
* every value is read back from the destination and checked against the CRC-32C taken
  while copying (a difference is exit status 1, the keys named on stderr);
* nodes already in DST are not replaced without ``--overwrite`` (exit status 2);
* the transformers' ``__kvzarr/`` records of the copied values (checksums) are copied
  along, still true for the same bytes; ``--skip-reserved`` leaves them out;
* a batch is at most N values or MB MiB; into a zip archive the whole copy is one
  transaction (one central directory).

Progress bars go to stderr when it is a terminal; the summary to stdout.
"""

from __future__ import annotations

import argparse
import sys

from ..copying import BATCH_BYTES, BATCH_KEYS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cp", help="copy a hierarchy or a node between stores",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", metavar="SRC", help="the store to copy from: a path or URL")
    p.add_argument("dest", metavar="DST", help="the store to copy into (created if absent)")
    p.add_argument("--path", default=None,
                   help="the group or array to copy (default: the whole store)")
    p.add_argument("--overwrite", action="store_true",
                   help="erase what DST holds at the path first")
    p.add_argument("--skip-reserved", action="store_true",
                   help="do not copy the transformers' __kvzarr/ records (checksums)")
    p.add_argument("--batch-keys", type=int, default=BATCH_KEYS, metavar="N",
                   help=f"values per destination transaction (default {BATCH_KEYS})")
    p.add_argument("--batch-mb", type=float, default=BATCH_BYTES / 2 ** 20, metavar="MB",
                   help=f"MiB per destination transaction (default {BATCH_BYTES >> 20})")
    p.set_defaults(run=lambda args: run(args.source, args.dest, args.path, args.overwrite,
                                        not args.skip_reserved, args.batch_keys,
                                        int(args.batch_mb * 2 ** 20)))


def run(source: str, dest: str, path: str | None, overwrite: bool = False,
        reserved: bool = True, batch_keys: int = BATCH_KEYS,
        batch_bytes: int = BATCH_BYTES) -> int:
    import kvzarr
    from ..errors import CopyVerificationError
    from .common import ProgressBars, human_size
    try:
        with ProgressBars() as bars:
            report = kvzarr.copy_store(source, dest, path=path, overwrite=overwrite,
                                       reserved=reserved, batch_keys=batch_keys,
                                       batch_bytes=batch_bytes, progress=bars)
    except CopyVerificationError as e:
        print(f"kvzarr: {e}", file=sys.stderr)
        for key in e.keys:
            print(f"kvzarr: differs after copying: {key}", file=sys.stderr)
        return 1
    where = f" /{path.strip('/')}" if path and path.strip("/") else ""
    extra = f", {report.reserved} reserved" if report.reserved else ""
    erased = f"; erased {report.erased} values first" if report.erased else ""
    print(f"copied{where} from {source} to {dest}: {report.nodes} "
          f"node{'s' if report.nodes != 1 else ''}, {report.values} values{extra} "
          f"({human_size(report.bytes)}) in {report.transactions} "
          f"transaction{'s' if report.transactions != 1 else ''}{erased}; "
          f"verified {report.verified} values")
    return 0
