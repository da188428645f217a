"""SQLite settings for bulk writes of large values, measured side by side (issue 16, item 6).

Writes ``--mib`` values of ``--value-kib`` each into a fresh SQLite file per trial with
plain ``sqlite3`` (no kvzarr), under each setting below, the settings taking turns for
``--rounds`` rounds; prints the median MB/s of each and its ratio to the first. A trial
is timed from opening the file to closing it, so a checkpoint the writer leaves behind
(WAL) is paid inside the trial, as a store that is closed after a bulk load pays it.

Settings (``name: what differs``):

* ``wal-16k``: kvzarr's default: WAL, 16 KiB pages, ``synchronous=FULL``, one
  transaction, SQLite's automatic checkpoint every 1000 pages;
* ``wal-4k``: the same at SQLite's default 4 KiB pages (raw-sqlite in run.py);
* ``wal-64k``: the same at 64 KiB pages;
* ``wal-16k-ckpt0``: the automatic checkpoint off, one ``PRAGMA wal_checkpoint`` after
  the commit (the pages are still written twice, in one pass each);
* ``wal-16k-normal``: ``synchronous=NORMAL`` (not durable on power loss);
* ``delete-16k`` / ``delete-4k``: the rollback journal (``journal_mode=DELETE``): pages
  appended to the file are not journaled, so a bulk load writes its bytes once;
* ``zarr2``: zarr-python 2's SQLiteStore: rollback journal, 4 KiB pages, one
  autocommitted ``REPLACE`` per value.

``--per-value`` commits every value on its own (W6's pattern, one process) instead of
one transaction for all. Run: ``python benchmarks/sqlite_bulk.py --rounds 3``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time

SETTINGS = {
    "wal-16k": dict(journal="WAL", page=16384),
    "wal-4k": dict(journal="WAL", page=4096),
    "wal-64k": dict(journal="WAL", page=65536),
    "wal-16k-ckpt0": dict(journal="WAL", page=16384, autockpt=0),
    "wal-16k-normal": dict(journal="WAL", page=16384, sync="NORMAL"),
    "delete-16k": dict(journal="DELETE", page=16384),
    "delete-4k": dict(journal="DELETE", page=4096),
    "zarr2": dict(journal="DELETE", page=4096, autocommit=True),
}


def trial(path: str, values: list[bytes], journal: str, page: int, sync: str = "FULL",
          autockpt: int | None = None, autocommit: bool = False,
          per_value: bool = False) -> float:
    t0 = time.perf_counter()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size = {page}")
    db.execute(f"PRAGMA journal_mode = {journal}")
    db.execute(f"PRAGMA synchronous = {sync}")
    if autockpt is not None:
        db.execute(f"PRAGMA wal_autocheckpoint = {autockpt}")
    db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
    sql = "INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
    items = [(f"a/c/{i}", v) for i, v in enumerate(values)]
    if autocommit:
        for item in items:
            db.execute("REPLACE INTO kv VALUES (?, ?)", item)
    elif per_value:
        for item in items:
            db.execute("BEGIN IMMEDIATE")
            db.execute(sql, item)
            db.execute("COMMIT")
    else:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(sql, items)
        db.execute("COMMIT")
    if autockpt == 0:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    db.close()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--value-kib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--per-value", action="store_true")
    ap.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    args = ap.parse_args()
    n = args.mib * 1024 // args.value_kib
    values = [os.urandom(args.value_kib * 1024) for _ in range(n)]
    names = args.settings.split(",")
    times: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for r in range(args.rounds):
            for name in names:
                path = os.path.join(d, f"{name}-{r}.sqlite")
                times[name].append(trial(path, values, per_value=args.per_value,
                                         **SETTINGS[name]))
                for suffix in ("", "-wal", "-shm", "-journal"):
                    if os.path.exists(path + suffix):
                        os.remove(path + suffix)
    mb = n * args.value_kib * 1024 / 1e6
    first = None
    print(f"{n} values of {args.value_kib} KiB, {'one commit each' if args.per_value else 'one transaction'}, "
          f"{args.rounds} rounds (median MB/s, min-max)")
    for name in names:
        rates = [mb / t for t in times[name]]
        med = statistics.median(rates)
        first = first or med
        print(f"  {name:16s} {med:8.0f}  ({min(rates):.0f}-{max(rates):.0f})  "
              f"{med / first:5.2f}x")


if __name__ == "__main__":
    main()
