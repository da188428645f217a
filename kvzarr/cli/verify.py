"""``kvzarr verify TARGET [PATH] [--repair-missing]``: scrub a store's checksum records.

Every value under PATH (the whole store without one) is read and checked against the
record the checksum storage transformer keeps for it (:mod:`kvzarr.transformers.checksum`).
One line per key that is not simply good goes to stdout (MISMATCH with the block and both
CRC-32C values, CORRUPT RECORD, RECORD WITHOUT VALUE, UNPROTECTED, INTERRUPTED WRITE),
then a summary; a progress bar goes to stderr when it is a terminal. Exit status 1 when
anything is bad (a mismatch, a corrupt record, a record without its value), 0 otherwise:
unprotected values and interrupted writes are reported but are not bad.
``--repair-missing`` opens the store writable and gives every unprotected value a record
(and completes interrupted writes), in batched transactions.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="verify every value against its checksum record",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="the store: a path or URL, as kvzarr.open_store takes it")
    p.add_argument("path", nargs="?", default="",
                   help="a node path: verify only the keys below it")
    p.add_argument("--repair-missing", action="store_true",
                   help="add records for values that have none (written by another tool)")
    p.add_argument("--block-size", type=int, default=None,
                   help="bytes per checksummed block of the records a repair writes")
    p.set_defaults(run=lambda args: run(args.target, args.path, args.repair_missing,
                                        args.block_size))


def run(target: str, path: str, repair_missing: bool = False,
        block_size: int | None = None) -> int:
    from tqdm import tqdm

    import kvzarr
    from ..errors import StoreError
    from ..transformers import Checksum

    if "://" not in target and not os.path.exists(target):
        # (opening it would create an empty store, which has nothing to verify)
        raise StoreError("no store at this path", path=target)
    options = {} if block_size is None else {"block_size": block_size}
    checksum = Checksum(missing="trust", **options)
    prefix = path.strip("/") + "/" if path.strip("/") else ""
    with kvzarr.open_store(target, mode="r+" if repair_missing else "r",
                           transformers=[checksum]) as store:
        show = sys.stderr.isatty()
        total = sum(1 for _ in store.list_prefix(prefix)) if show else None
        with tqdm(total=total, unit=" values", desc="verify", file=sys.stderr,
                  disable=not show) as bar:
            report = checksum.verify(
                prefix, repair_missing=repair_missing,
                on_finding=lambda f: tqdm.write(str(f), file=sys.stdout),
                progress=lambda values, _: bar.update(values))
    print(report.summary())
    return 0 if report.ok else 1
