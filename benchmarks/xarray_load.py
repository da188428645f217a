"""xarray ``open_zarr(...).load()`` of one 2-variable dataset stored two ways, in one run:
in a SQLite file through ``kvzarr.ZarrStore``, and in a directory through zarr-python's
own LocalStore. Prints the median seconds of each (with min-max) and their ratio.

    python benchmarks/xarray_load.py --repeat 5
    python benchmarks/xarray_load.py --time 240 --side 512 --compressor none

Needs xarray and zarr-python 3 next to kvzarr (``pip install -e ".[test]"``); the
benchmark driver (run.py) does not run it. Both stores are written once (untimed) with
the same chunks and codecs, then read alternately, so a slow spell of the machine falls
on both. The data is read from the page cache: this compares the software.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def dataset(n_time: int, side: int):
    import numpy as np
    import xarray as xr
    rng = np.random.default_rng(0)
    t = np.arange(n_time)
    smooth = np.sin(np.linspace(0, 20, side))[None, :, None] * np.cos(
        np.linspace(0, 12, side))[None, None, :]
    temp = (smooth * 10 + t[:, None, None] * 0.01).astype("float32")
    rain = rng.gamma(0.5, 2.0, (n_time, side, side)).astype("float32")
    return xr.Dataset({"temp": (("time", "y", "x"), temp),
                       "rain": (("time", "y", "x"), rain)},
                      coords={"time": t, "y": np.arange(side), "x": np.arange(side)})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--time", type=int, default=120, help="length of the time axis")
    p.add_argument("--side", type=int, default=256, help="y and x sizes")
    p.add_argument("--chunk", type=int, default=10, help="time steps per chunk")
    p.add_argument("--compressor", choices=["default", "none"], default="default",
                   help="zarr-python's default (zstd) or none")
    p.add_argument("--offload-bytes", default="default",
                   help="ZarrStore.offload_bytes for the reads: 'default', 'none' (always "
                        "inline on zarr's event loop) or a size in bytes (0: always on "
                        "zarr's thread pool)")
    args = p.parse_args(argv)

    import xarray as xr
    import zarr

    import kvzarr

    ds = dataset(args.time, args.side).chunk({"time": args.chunk})
    enc = {} if args.compressor == "default" else {
        v: {"compressors": None} for v in ds.data_vars}
    mb = sum(v.nbytes for v in ds.data_vars.values()) / 1e6
    with tempfile.TemporaryDirectory(prefix="kvzarr-xarray-") as tmp:
        sqlite_path, directory = Path(tmp) / "data.sqlite", Path(tmp) / "data.zarr"
        ds.to_zarr(kvzarr.ZarrStore(sqlite_path), mode="w", encoding=enc)
        ds.to_zarr(zarr.storage.LocalStore(directory), mode="w", encoding=enc)

        def ours() -> kvzarr.ZarrStore:
            st = kvzarr.ZarrStore(sqlite_path, read_only=True)
            if args.offload_bytes != "default":
                st.offload_bytes = (None if args.offload_bytes == "none"
                                    else int(args.offload_bytes))
            return st

        stores = {
            "kvzarr ZarrStore (SQLite)": ours,
            "zarr LocalStore (directory)": lambda: zarr.storage.LocalStore(directory,
                                                                           read_only=True),
        }
        times: dict[str, list[float]] = {name: [] for name in stores}
        for _ in range(args.repeat):
            for name, make in stores.items():
                t0 = time.perf_counter()
                with xr.open_zarr(make()) as got:
                    got.load()
                times[name].append(time.perf_counter() - t0)
        for name, make in stores.items():       # correctness, untimed
            with xr.open_zarr(make()) as got:
                xr.testing.assert_identical(got.load(), ds.load())
        (ours, t_ours), (theirs, t_theirs) = times.items()
        print(f"xarray open_zarr + load(): 2 variables, {mb:.0f} MB, chunks of "
              f"{args.chunk} x {args.side} x {args.side}, compressor {args.compressor}, "
              f"{args.repeat} repetitions (median, min-max seconds); ZarrStore "
              f"offload_bytes {args.offload_bytes}")
        for name, ts in times.items():
            print(f"  {name:30s} {statistics.median(ts):8.3f} s  "
                  f"({min(ts):.3f}-{max(ts):.3f})  {mb / statistics.median(ts):7.0f} MB/s")
        ratio = statistics.median(t_theirs) / statistics.median(t_ours)
        print(f"  speed of {ours} / {theirs}: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
