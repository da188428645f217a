"""``kvzarr compact TARGET [PATH] [--dry-run]``: lay out again, without garbage, every
shard under PATH that appended partial writes left garbage in (:func:`kvzarr.compact`).

A progress bar goes to stderr (when it is a terminal); the summary to stdout. Exit
status 1 when a shard could not be read (each is named on stderr and left as it was),
2 for a kvzarr error (no such store or node, a read-only store).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compact", help="rewrite appended shards without their garbage")
    p.add_argument("target", help="the store: a path or URL")
    p.add_argument("path", nargs="?", help="a group or array in it (default: the root)")
    p.add_argument("--dry-run", action="store_true",
                   help="only measure what compaction would reclaim")
    p.set_defaults(run=lambda args: run(args.target, args.path, args.dry_run))


def run(target: str, path: str | None, dry_run: bool = False) -> int:
    from tqdm import tqdm

    import kvzarr
    from .common import human_size as _size

    bar: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit="shard", file=sys.stderr, disable=None,
                       desc="measuring" if dry_run else "compacting")
        else:
            bar.update(done - bar.n)

    try:
        report = kvzarr.compact(target, path, dry_run=dry_run, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    verb = "would compact" if dry_run else "compacted"
    print(f"{target}{'/' + path.strip('/') if path else ''}: {verb} {report.compacted} of "
          f"{report.chunks} shards in {report.arrays} sharded "
          f"{'array' if report.arrays == 1 else 'arrays'}; "
          f"{_size(report.reclaimed)} {'reclaimable' if dry_run else 'reclaimed'} "
          f"({_size(report.bytes_before)} -> {_size(report.bytes_after)})"
          + (f"; the store freed {_size(report.store_reclaimed)} more"
             if report.store_reclaimed else ""))
    for key, problem in report.corrupt:
        print(f"kvzarr: cannot read shard {key!r}, left as it is: {problem}", file=sys.stderr)
    return 1 if report.corrupt else 0

