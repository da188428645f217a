"""``kvzarr demo [STORE]``: write, read back and verify a sample dataset (the main job).

The read-back reopens STORE read-only, as another program would; a store that cannot be
reopened (``memory://``, which lives only in this process) is read back through the
handle that wrote it. Exit status 1 when what is read back differs from what was written.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ..stores import MemoryStore

#: where ``kvzarr demo`` writes when no store is named: one file, no server
DEFAULT_DEMO_STORE = "kvzarr-demo.sqlite"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="write, read back and verify a sample dataset")
    p.add_argument("store", nargs="?", default=DEFAULT_DEMO_STORE)
    p.set_defaults(run=lambda args: run(args.store))


def run(target: str) -> int:
    import kvzarr

    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:1024, 0:1024]
    field = (np.sin(x / 97.0) * np.cos(y / 61.0) * 1000).astype("float32")
    noise = rng.integers(0, 1 << 16, size=(512, 512), dtype="uint16")

    t0 = time.perf_counter()
    store = kvzarr.open_store(target)
    # a memory store lives in this process only: reopening its URL would give a new,
    # empty store, so its read-back goes through this handle (and closes it after)
    reopenable = not isinstance(store, MemoryStore)
    try:
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
        if reopenable:
            store.close()
            store = kvzarr.open_store(target, mode="r")

        t0 = time.perf_counter()
        reopened = kvzarr.open_group(store, mode="r")
        ok = (np.array_equal(reopened["climate/temperature"][...], field)
              and np.array_equal(reopened["imaging/tiles"][100:300, 7:77], noise[100:300, 7:77])
              and list(reopened["labels"][...]) == ["ocean", "land", "ice", "cloud"]
              and np.array_equal(reopened["climate/temperature"][::7, 5:1000:11],
                                 field[::7, 5:1000:11]))
        tree = reopened.tree()
    finally:
        store.close()
    read = time.perf_counter() - t0
    print(tree)
    print(f"store: {target}")
    print(f"wrote {field.nbytes + noise.nbytes} bytes in {written:.3f} s, "
          f"read back and verified in {read:.3f} s: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1
