"""Scaling: does a store's cost per item stay flat as the store grows?

For each store (LMDB, SQLite, a directory; kvzarr's defaults, so the durable ones sync
every commit) and each size, in a fresh store:

* **W2 shape**: an array of 4 KiB chunks (32 x 32 float32, random data, uncompressed),
  100 chunks wide, written slab by slab (``--slab`` chunks per write call, one commit
  each), then read all slab by slab, then ``--points`` random single elements read one by
  one (each a chunk read). Cost: microseconds per chunk (per element read for the last),
  the median over the slabs (over ten batches of the points): a burst of noise on the
  machine moves one slab, not the size's number.
* **W4 listing**: one group with N child groups (created in one transaction), listed
  ``--passes`` times. Cost: microseconds per child listed.
* **Stored bytes** after the W2 writes: the disk space the store holds (allocated blocks
  of every file, the database's journal or log included) as a multiple of the payload.

"Flat" means the cost per item at the largest size is within 25% of the cost at the
middle size. The smallest size is shown but not judged: at 10 children a listing's
fixed cost (opening the group) is most of it, which is not a cost of the store's size.

The raw engines (``raw-lmdb``, ``raw-sqlite``, ``raw-files``: py-lmdb, sqlite3 and plain
files with no Zarr on top, at kvzarr's durability and, for LMDB, with its write map,
``systems/raw_engines.py``) do the
same: the same keys, 4 KiB values, one transaction per slab, the same single reads, one
key per child. Where a kvzarr store's cost grows and its engine's grows as much (within
10%), the report says the growth is the engine's.

    python benchmarks/scaling.py                        # 10k/100k/1M chunks, 10/1k/100k
    python benchmarks/scaling.py --chunks 1000,10000 --children 10,1000 --stores lmdb

Writes ``scaling.json``, ``scaling.md`` and (with matplotlib) ``scaling.png``, a log-log
chart of cost per item against the store's size, to ``--out``. Needs disk for the
largest size of one store at a time (1,000,000 chunks: about 4.1 GB plus overhead); each
store is removed after its size is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kvzarr  # noqa: E402
from benchmarks.systems.raw_engines import open_kv  # noqa: E402

CHUNK = 32                  # 32 x 32 float32 = 4 KiB
WIDTH = 100                 # chunks per row of chunks, as W2
FLAT = 1.25                 # allowed growth of cost per item, middle size to largest
ENGINE_SLACK = 1.10         # a store's growth within this of its engine's is the engine's
#: the single reads are timed in this many batches, and the median batch's cost kept: on
#: a shared machine one slow second would otherwise decide a size's number
POINT_BATCHES = 10
#: each kvzarr store's raw engine, and the name of its file or directory. LMDB copies
#: pages into the file at commit, as kvzarr's LMDB store does by default (its write map,
#: an option, also read slower for a while after a large write on a 2-core VM: kvzarr's
#: single reads ~45 µs right after writing 4 GB, 20-25 µs in the next passes, against
#: ~12 µs without it).
RAW = {"lmdb": ("raw-lmdb", "lmdb", "data.lmdb"),
       "sqlite": ("raw-sqlite", "sqlite", "data.sqlite"),
       "directory": ("raw-files", "files", "data")}
RAW_KINDS = {raw: (engine, name) for raw, engine, name in RAW.values()}


def open_store(kind: str, where: Path) -> Any:
    if kind == "lmdb":
        return kvzarr.open_store(where / "data.lmdb")
    if kind == "sqlite":
        return kvzarr.open_store(where / "data.sqlite")
    if kind == "directory":
        return kvzarr.open_store(where / "data")
    raise SystemExit(f"unknown store {kind!r}")


def disk_bytes(where: Path) -> int:
    """Allocated bytes of every file under ``where`` (sparse maps count what they use)."""
    total = 0
    for root, dirs, files in os.walk(where):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class ArraySteps:
    """W2's and W4's steps through kvzarr: an array of 4 KiB chunks, a group's children."""

    def __init__(self, kind: str, where: Path) -> None:
        self.store = open_store(kind, where)

    def create(self, rows: int) -> None:
        self.a = kvzarr.create_array(self.store, name="a", shape=(rows * CHUNK, WIDTH * CHUNK),
                                     chunks=(CHUNK, CHUNK), dtype="float32", compressors=None)

    def write(self, lo: int, hi: int, block: np.ndarray) -> None:
        self.a[lo * CHUNK:hi * CHUNK] = block

    def read(self, lo: int, hi: int) -> np.ndarray:
        return self.a[lo * CHUNK:hi * CHUNK]

    def same(self, got: np.ndarray, block: np.ndarray) -> bool:
        return np.array_equal(got, block)

    def element(self, i: int, j: int) -> Any:
        return self.a[i, j]

    def make_children(self, n: int) -> None:
        parent = kvzarr.open_group(self.store, mode="w").create_group("parent")
        with self.store.transaction():
            for i in range(n):
                parent.create_group(f"c{i:07d}")

    def lister(self) -> Callable[[], list[str]]:
        """A fresh handle's listing (opening the group is not timed)."""
        return kvzarr.open_group(self.store, path="parent", mode="r").group_keys

    def close(self) -> None:
        if hasattr(self.store, "close"):
            self.store.close()


class RawSteps:
    """The same steps on a raw engine: each chunk a key ``a/c/i/j`` holding its 4 KiB
    (one ``put_many``, one transaction, per slab; one ``get_many`` per slab read; one
    ``get`` per single read), one key ``parent/cN/zarr.json`` per child, listed by the
    engine's own prefix scan or ``scandir``."""

    def __init__(self, kind: str, where: Path) -> None:
        engine, name = RAW_KINDS[kind]
        self.kv = open_kv(engine, str(where / name))

    def create(self, rows: int) -> None:
        pass

    @staticmethod
    def _chunks(block: np.ndarray) -> list[bytes]:
        return [block[r:r + CHUNK, c * CHUNK:(c + 1) * CHUNK].tobytes()
                for r in range(0, block.shape[0], CHUNK) for c in range(WIDTH)]

    @staticmethod
    def _keys(lo: int, hi: int) -> list[str]:
        return [f"a/c/{r}/{c}" for r in range(lo, hi) for c in range(WIDTH)]

    def write(self, lo: int, hi: int, block: np.ndarray) -> None:
        self.kv.put_many(list(zip(self._keys(lo, hi), self._chunks(block))))

    def read(self, lo: int, hi: int) -> list[bytes | None]:
        return self.kv.get_many(self._keys(lo, hi))

    def same(self, got: list[bytes | None], block: np.ndarray) -> bool:
        return got == self._chunks(block)

    def element(self, i: int, j: int) -> Any:
        chunk = self.kv.get(f"a/c/{i // CHUNK}/{j // CHUNK}")
        return np.frombuffer(chunk, "float32")[i % CHUNK * CHUNK + j % CHUNK]

    def make_children(self, n: int) -> None:
        self.kv.put_many([(f"parent/c{i:07d}/zarr.json", b"{}") for i in range(n)])

    def lister(self) -> Callable[[], list[str]]:
        return lambda: self.kv.children("parent/")

    def close(self) -> None:
        self.kv.close()


def steps_for(kind: str, where: Path) -> ArraySteps | RawSteps:
    return (RawSteps if kind in RAW_KINDS else ArraySteps)(kind, where)


def w2(kind: str, nchunks: int, slab: int, points: int, base: Path) -> dict[str, float]:
    rows = max(1, nchunks // WIDTH)
    nchunks = rows * WIDTH
    slab_rows = max(1, slab // WIDTH)
    rng = np.random.default_rng(0)
    where = Path(tempfile.mkdtemp(dir=base))
    try:
        steps = steps_for(kind, where)
        steps.create(rows)
        slabs = [(r, min(rows, r + slab_rows)) for r in range(0, rows, slab_rows)]
        block = rng.random((slab_rows * CHUNK, WIDTH * CHUNK), dtype="float32")
        write: list[float] = []    # µs per chunk of each slab
        for lo, hi in slabs:       # the same random block in every slab: data is not timed
            t = timed(lambda: steps.write(lo, hi, block[:(hi - lo) * CHUNK]))
            write.append(t / ((hi - lo) * WIDTH) * 1e6)
        read: list[float] = []
        for lo, hi in slabs:
            got: list[Any] = []
            t = timed(lambda: got.append(steps.read(lo, hi)))
            read.append(t / ((hi - lo) * WIDTH) * 1e6)
            if not steps.same(got[0], block[:(hi - lo) * CHUNK]):
                raise SystemExit(f"{kind}: read back differs at rows {lo}..{hi}")
        ii = rng.integers(0, rows * CHUNK, points)
        jj = rng.integers(0, WIDTH * CHUNK, points)
        single: list[float] = []   # µs per element of each batch of points
        per = -(-points // POINT_BATCHES)
        for b in range(0, points, per):
            batch = list(zip(ii[b:b + per], jj[b:b + per]))
            t = timed(lambda: [steps.element(i, j) for i, j in batch])
            single.append(t / len(batch) * 1e6)
        steps.close()
        stored = disk_bytes(where)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    payload = nchunks * CHUNK * CHUNK * 4
    return {"items": nchunks, "write us/chunk": statistics.median(write),
            "read us/chunk": statistics.median(read),
            "single read us/element": statistics.median(single),
            "stored / payload": stored / payload}


def w4(kind: str, children: int, passes: int, base: Path) -> dict[str, float]:
    where = Path(tempfile.mkdtemp(dir=base))
    try:
        steps = steps_for(kind, where)
        steps.make_children(children)
        samples = []
        for _ in range(passes):
            listing = steps.lister()
            names: list[str] = []
            samples.append(timed(lambda: names.extend(listing())))
            if len(names) != children:
                raise SystemExit(f"{kind}: listed {len(names)} of {children} children")
        steps.close()
    finally:
        shutil.rmtree(where, ignore_errors=True)
    return {"items": children, "list us/child": statistics.median(samples) / children * 1e6}


def flatness(rows: list[dict[str, float]], metric: str) -> tuple[float, bool] | None:
    """Cost per item at the largest size over the middle size's, and whether it is flat."""
    if len(rows) < 2:
        return None
    mid, top = rows[len(rows) // 2 if len(rows) > 2 else 0][metric], rows[-1][metric]
    growth = top / mid
    return growth, growth <= FLAT


def engine_note(result: dict[str, Any], kind: str, part: str, metric: str,
                growth: float) -> str:
    """For a store whose cost is not flat: its raw engine's growth in the same run, and
    whether the store's is within :data:`ENGINE_SLACK` of it (the engine's own)."""
    raw = RAW.get(kind, (None,))[0]
    rows = result["stores"].get(raw, {}).get(part, [])
    judged = flatness(rows, metric) if len(rows) == len(result["sizes"][part]) else None
    if judged is None:
        return ""
    own = growth <= judged[0] * ENGINE_SLACK
    return (f" ({raw} {judged[0]:.2f}×: " +
            ("the engine's growth)" if own else "the engine grows less)"))


def markdown(result: dict[str, Any]) -> str:
    out = ["# Scaling: cost per item as the store grows", "",
           f"Run {result['started']} on {result['machine']}; "
           f"`{result['command']}`.", "",
           f"Flat: the cost per item at the largest size is at most {FLAT:g}× the cost "
           "at the middle size (the smallest is shown, not judged).", ""]
    for part, metrics in (("w2", ["write us/chunk", "read us/chunk",
                                  "single read us/element", "stored / payload"]),
                          ("w4", ["list us/child"])):
        out += [f"## {'W2 chunks' if part == 'w2' else 'W4 listing children'}", "",
                "| store | metric | " + " | ".join(
                    f"{n:,}" for n in result["sizes"][part]) + " | largest ÷ middle |",
                "|---|---|" + "---|" * (len(result["sizes"][part]) + 1)]
        for kind, by_part in result["stores"].items():
            rows = by_part.get(part, [])
            for metric in metrics:
                cells = [f"{r[metric]:.3g}" for r in rows]
                judged = flatness(rows, metric) if metric != "stored / payload" else None
                verdict = "" if judged is None else \
                    f"{judged[0]:.2f}× {'flat' if judged[1] else '**not flat**'}"
                if judged is not None and not judged[1]:
                    verdict += engine_note(result, kind, part, metric, judged[0])
                out.append(f"| {kind} | {metric} | " + " | ".join(cells) + f" | {verdict} |")
        out.append("")
    return "\n".join(out)


def chart(result: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [("w2", "write us/chunk"), ("w2", "read us/chunk"),
              ("w2", "single read us/element"), ("w4", "list us/child")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    for ax, (part, metric) in zip(axes, panels):
        for kind, by_part in result["stores"].items():
            rows = by_part.get(part, [])
            if rows:
                ax.plot([r["items"] for r in rows], [r[metric] for r in rows], marker="o",
                        label=kind)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("children" if part == "w4" else "chunks in the store")
        ax.set_title(metric.replace("us/", "µs per "), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores",
                    default="lmdb,sqlite,directory,raw-lmdb,raw-sqlite,raw-files")
    ap.add_argument("--chunks", default="10000,100000,1000000")
    ap.add_argument("--children", default="10,1000,100000")
    ap.add_argument("--slab", type=int, default=10000, help="chunks per write call")
    ap.add_argument("--points", type=int, default=5000)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--workdir", default=None, help="where the stores are made")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    sizes = {"w2": [int(n) for n in args.chunks.split(",") if n],
             "w4": [int(n) for n in args.children.split(",") if n]}
    base = Path(args.workdir or tempfile.mkdtemp(prefix="kvzarr-scaling-"))
    base.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": f"{os.cpu_count()} cores",
        "command": "python benchmarks/scaling.py " + " ".join(argv or sys.argv[1:]),
        "sizes": sizes, "stores": {}}
    for kind in args.stores.split(","):
        parts: dict[str, list[dict[str, float]]] = {"w2": [], "w4": []}
        for n in sizes["w2"]:
            row = w2(kind, n, args.slab, args.points, base)
            parts["w2"].append(row)
            print(kind, "W2", {k: round(v, 3) for k, v in row.items()}, flush=True)
        for n in sizes["w4"]:
            row = w4(kind, n, args.passes, base)
            parts["w4"].append(row)
            print(kind, "W4", {k: round(v, 3) for k, v in row.items()}, flush=True)
        result["stores"][kind] = parts
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(result, indent=1))
    (out / "scaling.md").write_text(markdown(result))
    drew = chart(result, out / "scaling.png")
    print(markdown(result))
    print(f"wrote {out / 'scaling.json'}, {out / 'scaling.md'}"
          + (f", {out / 'scaling.png'}" if drew else " (no chart: matplotlib missing)"))
    if not args.workdir:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
