"""The ``kvzarr`` command.

    kvzarr demo [STORE]        write, read back and verify a sample dataset (the main job)
    kvzarr info STORE [PATH]   show the hierarchy or one array
    kvzarr upgrade URL [--table T]   migrate a SQL store to this kvzarr's schema
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

#: where ``kvzarr demo`` writes when no store is named: one file, no server
DEFAULT_DEMO_STORE = "kvzarr-demo.sqlite"


def _demo(target: str) -> int:
    import kvzarr

    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:1024, 0:1024]
    field = (np.sin(x / 97.0) * np.cos(y / 61.0) * 1000).astype("float32")
    noise = rng.integers(0, 1 << 16, size=(512, 512), dtype="uint16")

    t0 = time.perf_counter()
    with kvzarr.open_store(target) as store:
        root = kvzarr.open_group(store, mode="w", attributes={"title": "kvzarr demo"})
        temp = root.create_array("climate/temperature", shape=field.shape, dtype="float32",
                                 chunks=(256, 256), dimension_names=["y", "x"],
                                 attributes={"units": "K"})
        temp[...] = field
        tiles = root.create_array("imaging/tiles", shape=noise.shape, dtype="uint16",
                                  chunks=(64, 64), shards=(256, 256))
        tiles[...] = noise
        labels = root.create_array("labels", shape=(4,), dtype=str)
        labels[...] = np.array(["ocean", "land", "ice", "cloud"])
    written = time.perf_counter() - t0

    t0 = time.perf_counter()
    with kvzarr.open_store(target, mode="r") as store:
        reopened = kvzarr.open_group(store, mode="r")
        ok = (np.array_equal(reopened["climate/temperature"][...], field)
              and np.array_equal(reopened["imaging/tiles"][100:300, 7:77], noise[100:300, 7:77])
              and list(reopened["labels"][...]) == ["ocean", "land", "ice", "cloud"]
              and np.array_equal(reopened["climate/temperature"][::7, 5:1000:11],
                                 field[::7, 5:1000:11]))
        tree = reopened.tree()
    read = time.perf_counter() - t0
    print(tree)
    print(f"store: {target}")
    print(f"wrote {field.nbytes + noise.nbytes} bytes in {written:.3f} s, "
          f"read back and verified in {read:.3f} s: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def _info(target: str, path: str | None) -> int:
    import kvzarr
    with kvzarr.open_store(target, mode="r") as store:
        node = kvzarr.open(store, mode="r", path=path)
        print(node.tree() if isinstance(node, kvzarr.Group) else node.info)
    return 0


def _upgrade(url: str, table: str | None) -> int:
    from .stores.sql import upgrade
    old, new = upgrade(url, table=table)
    print(f"{url}: schema version {old} -> {new}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kvzarr", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="write, read back and verify a sample dataset")
    demo.add_argument("store", nargs="?", default=DEFAULT_DEMO_STORE)
    info = sub.add_parser("info", help="show a hierarchy or an array")
    info.add_argument("store")
    info.add_argument("path", nargs="?")
    upgrade = sub.add_parser("upgrade", help="migrate a SQL store's schema")
    upgrade.add_argument("url")
    upgrade.add_argument("--table", help="the store's table, when it is not the default")
    args = parser.parse_args(argv)
    from .errors import KvzarrError
    try:
        if args.command == "demo":
            return _demo(args.store)
        if args.command == "info":
            return _info(args.store, args.path)
        return _upgrade(args.url, args.table)
    except KvzarrError as e:
        print(f"kvzarr: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
