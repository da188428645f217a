"""Core speed floor: kvzarr's FilesystemStore against zarr-python 3's LocalStore, same run.

Workloads (the W1 bulk and W5 hyperslab workloads of the benchmark suite, sizes
parameterised): write and read a float32 2-D array in 1 MiB chunks, uncompressed and with
blosc-zstd level 3 + shuffle on smooth data, and the strided read ``a[::7]``. Each number
is the median of ``--repeat`` runs with min-max; every read is checked against the data.

    python benchmarks/bench_core.py [--mib 256] [--repeat 5] [--out results/core.md]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

BLOSC = {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle",
                                            "typesize": 4, "blocksize": 0}}


def make_data(mib: int) -> np.ndarray:
    # Smooth data, as a model field would be: compresses like real data does.
    cols = 4096
    rows = mib * (1 << 20) // (4 * cols)
    y = np.linspace(0, 20, rows, dtype="float32")[:, None]
    x = np.linspace(0, 30, cols, dtype="float32")[None, :]
    return (np.sin(y) * np.cos(x) * 100).astype("float32")


class KvzarrSystem:
    name = "kvzarr FilesystemStore"

    def __init__(self, root: Path) -> None:
        import kvzarr
        self.kvzarr = kvzarr
        self.root = root

    def create(self, shape, chunks, compressed):
        store = self.kvzarr.FilesystemStore(self.root)
        return self.kvzarr.create_array(store, name="a", shape=shape, chunks=chunks,
                                        dtype="float32", overwrite=True,
                                        compressors=[BLOSC] if compressed else None)

    def open(self):
        return self.kvzarr.open_array(self.kvzarr.FilesystemStore(self.root), path="a", mode="r")


class ZarrPythonSystem:
    name = "zarr-python 3 LocalStore"

    def __init__(self, root: Path) -> None:
        import zarr
        self.zarr = zarr
        self.root = root

    def create(self, shape, chunks, compressed):
        from zarr.codecs import BloscCodec
        store = self.zarr.storage.LocalStore(self.root)
        comps = [BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", typesize=4)] \
            if compressed else None
        return self.zarr.create_array(store, name="a", shape=shape, chunks=chunks,
                                      dtype="float32", overwrite=True, compressors=comps)

    def open(self):
        return self.zarr.open_array(self.zarr.storage.LocalStore(self.root, read_only=True),
                                    path="a", mode="r")


def timed(fn) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(mib: int, repeat: int) -> list[tuple[str, str, list[float], float]]:
    data = make_data(mib)
    rows_per_chunk = (1 << 20) // (4 * 1024)
    chunks = (rows_per_chunk, 1024)  # 1 MiB chunks
    strided = data[::7]
    results = []
    for compressed in (False, True):
        label = "blosc-zstd" if compressed else "uncompressed"
        for cls in (ZarrPythonSystem, KvzarrSystem):
            tmp = Path(tempfile.mkdtemp(prefix="kvzarr-bench-"))
            try:
                system = cls(tmp / "data")
                writes, reads, hyper = [], [], []
                for _ in range(repeat):
                    arr = system.create(data.shape, chunks, compressed)
                    writes.append(timed(lambda: arr.__setitem__(Ellipsis, data)))
                    arr = system.open()
                    box = {}
                    reads.append(timed(lambda: box.__setitem__("r", arr[...])))
                    if not np.array_equal(box["r"], data):
                        raise AssertionError(f"{system.name}: read-all returned wrong data")
                    hyper.append(timed(lambda: box.__setitem__("h", arr[::7])))
                    if not np.array_equal(box["h"], strided):
                        raise AssertionError(f"{system.name}: a[::7] returned wrong data")
                mb = data.nbytes / 1e6
                results.append((f"W1 write {label}", system.name, writes, mb))
                results.append((f"W1 read {label}", system.name, reads, mb))
                results.append((f"W5 a[::7] {label}", system.name, hyper, strided.nbytes / 1e6))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return results


def report(results, mib: int, repeat: int) -> str:
    lines = [f"# Core speed floor ({mib} MiB float32, 1 MiB chunks, median of {repeat})", "",
             "| workload | system | MB/s median (min–max) | kvzarr / zarr-python |",
             "|---|---|---|---|"]
    by_workload: dict[str, dict[str, tuple[float, float, float]]] = {}
    for workload, system, times, mb in results:
        rates = sorted(mb / t for t in times)
        by_workload.setdefault(workload, {})[system] = (statistics.median(rates), rates[0],
                                                        rates[-1])
    for workload, systems in by_workload.items():
        peer = systems["zarr-python 3 LocalStore"][0]
        for system, (med, lo, hi) in systems.items():
            ratio = f"{med / peer:.2f}x" if system.startswith("kvzarr") else ""
            lines.append(f"| {workload} | {system} | {med:,.0f} ({lo:,.0f}–{hi:,.0f}) | {ratio} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = report(run(args.mib, args.repeat), args.mib, args.repeat)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
