"""Migrating a large Zarr v2 hierarchy to v3 in place (``kvzarr.migrate_v3``): N v2
arrays (in groups of 100, each with a few chunks and attributes) are written untimed,
then migrated; prints the seconds of the plan (read and convert every document) and of
the whole migration, per store, and checks a sample of arrays reads the same after.

    python benchmarks/migrate_v2.py --arrays 10000 --stores lmdb,sqlite

Needs only kvzarr (and numcodecs, a dependency); the benchmark driver (run.py) does
not run it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def build(store, n_arrays: int) -> None:
    import numpy as np

    import kvzarr
    root = kvzarr.open_group(store, mode="w", zarr_format=2)
    with store.transaction():
        for g in range((n_arrays + 99) // 100):
            group = root.create_group(f"g{g:04d}")
            for i in range(min(100, n_arrays - 100 * g)):
                a = group.create_array(f"a{i:03d}", shape=(64,), chunks=(16,), dtype="<i4",
                                       compressors={"id": "zlib", "level": 1},
                                       fill_value=0, attributes={"index": i})
                a[...] = np.arange(64, dtype="<i4") + i


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arrays", type=int, default=10000)
    p.add_argument("--stores", default="lmdb,sqlite")
    args = p.parse_args(argv)

    import numpy as np

    import kvzarr
    from kvzarr.migration import plan
    suffix = {"lmdb": ".lmdb", "sqlite": ".sqlite", "directory": "", "zip": ".zip"}
    print(f"migrate_v3 in place: {args.arrays} v2 arrays (4 chunks each) in groups of 100")
    with tempfile.TemporaryDirectory(prefix="kvzarr-migrate-") as tmp:
        for name in args.stores.split(","):
            where = str(Path(tmp) / f"data{suffix[name]}")
            store = kvzarr.open_store(where)
            t0 = time.perf_counter()
            build(store, args.arrays)
            t_build = time.perf_counter() - t0
            t0 = time.perf_counter()
            nodes = plan(store, "")
            t_plan = time.perf_counter() - t0
            t0 = time.perf_counter()
            report = kvzarr.migrate_v3(store)
            t_all = time.perf_counter() - t0
            assert report.arrays == args.arrays and len(nodes) == len(report.nodes)
            for g, i in ((0, 0), ((args.arrays - 1) // 100, (args.arrays - 1) % 100)):
                a = kvzarr.open_array(store, path=f"g{g:04d}/a{i:03d}", mode="r")
                assert a.metadata.zarr_format == 3 and a.attrs["index"] == i
                np.testing.assert_array_equal(a[...], np.arange(64) + i)
            store.close()
            print(f"  {name:10s} plan {t_plan:6.2f} s, migration {t_all:6.2f} s "
                  f"({args.arrays / t_all:,.0f} arrays/s; writing them took {t_build:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
