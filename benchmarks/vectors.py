"""Point clouds: kvzarr.vectors against zarr-vectors, side by side in one run.

The acceptance bar of ``kvzarr.vectors``: 1,000,000 random 3-D points (uniform float32 in
[0, 1000)^3), chunks 200^3, bins 50^3; a write takes at most 0.5x zarr-vectors' time
and a 1% bounding-box read at most 0.5x its time, on LMDB, SQLite and the filesystem
store, zarr-vectors writing to its own directory store (zarr-python's LocalStore).

Systems (``kvzarr.vectors.write_points`` / ``read_points`` and zarr-vectors'
``zarr_vectors.types.points.write_points`` / ``read_points``, the same arguments):

* ``zarr-vectors``: a directory path; zarr-python's LocalStore never fsyncs;
* ``kvzarr-fs``: a directory path: the FilesystemStore, whose default is no fsync;
* ``kvzarr-lmdb``, ``kvzarr-sqlite``: a ``.lmdb`` / ``.sqlite`` path, the stores'
  defaults: every commit synced (LMDB ``durability="full"``, SQLite WAL with
  ``synchronous=FULL``);
* ``kvzarr-lmdb-nosync``, ``kvzarr-sqlite-nosync``: the same files written through a
  store the benchmark opens itself with the options of ``benchmarks/systems``' variants
  (``LMDBStore(path, durability="none")``, ``SQLStore(path, synchronous="NORMAL")``:
  WAL synced at checkpoints only), passed as the target. Opening and closing that store
  is timed with the write, as the path systems open and close theirs inside the call.

zarr-vectors never syncs, so the write bars are judged at equal durability:
``kvzarr-fs``, ``kvzarr-lmdb-nosync`` and ``kvzarr-sqlite-nosync`` against it. The
durable defaults are shown beside them, for what syncing costs.

Metrics:

* **write**: ``write_points`` of all points into a fresh target; **write + attribute**:
  the same with one float32 vertex attribute. Each is the median of ``--repeat``
  repetitions, the systems taking turns; before each, the previous target is removed and
  ``os.sync()`` runs (untimed), so nobody pays for another's dirty pages.
* **1% box read**: ``read_points(bbox=...)`` of a cube of edge 1000 * 0.01^(1/3) (about
  215.4) at corner 400 (on the chunk grid) and at corner 450 (off it); **full read**:
  ``read_points()`` of everything. The median of ``--calls`` calls (``--full-calls`` for
  the full read) after one warm-up call, the systems taking turns call by call. kvzarr is
  timed two ways: "path per call" (the target given as a path each call, as a
  zarr-vectors user calls it: the store is opened and closed inside) and "open store" (one
  ``kvzarr.open_store(path, mode="r")`` reused); zarr-vectors likewise with a path each
  call and with one ``zarr_vectors.open_store(path)`` group reused. The read bar is
  path against path; open against open is shown too. The reads run on the defaults'
  files only: the no-sync variants write the same bytes, and a read does not sync.

Every answer of kvzarr is checked against zarr-vectors' (the write's summary dict, the
number of points, the positions, the attribute's values); a wrong answer stops the run
with exit status 1 and says what differed.

    python benchmarks/vectors.py                    # 1,000,000 points, 5 repetitions
    python benchmarks/vectors.py --points 100000 --repeat 3 --calls 20

Writes ``vectors.md`` and ``vectors.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kvzarr  # noqa: E402
import kvzarr.vectors  # noqa: E402

BAR = 0.5                   # kvzarr's time at most this times zarr-vectors'
DOMAIN = 1000.0             # points uniform in [0, DOMAIN)^3
CHUNK = (200.0,) * 3
BIN = (50.0,) * 3
EDGE = DOMAIN * 0.01 ** (1 / 3)    # a cube holding 1% of the domain
BOXES = {"1% box read, corner 400 (on the chunk grid)": 400.0,
         "1% box read, corner 450 (off the chunk grid)": 450.0}
PEER = "zarr-vectors"


class System:
    """One way of writing and reading: a library, a target kind and the options of the
    store it opens (``options`` None: the target is a path, the library opens it)."""

    def __init__(self, name: str, suffix: str, durability: str, equal: bool | None,
                 store: str | None = None, options: dict[str, Any] | None = None,
                 reads: bool = True) -> None:
        self.name, self.suffix, self.durability, self.equal = name, suffix, durability, equal
        self.store_kind, self.options, self.reads = store, options, reads

    @property
    def peer(self) -> bool:
        return self.name == PEER

    def describe_target(self) -> str:
        if self.peer:
            return "directory path (zarr-python LocalStore)"
        if self.options is None:
            return {"": "directory path", ".lmdb": "`.lmdb` path",
                    ".sqlite": "`.sqlite` path"}[self.suffix]
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        cls = "LMDBStore" if self.store_kind == "lmdb" else "SQLStore"
        return f"`{cls}(path, {opts})` passed as the target"

    # -- the calls ---------------------------------------------------------------------

    def _lib(self) -> Any:
        if self.peer:
            from zarr_vectors.types import points
            return points
        return kvzarr.vectors

    def _open_own(self, path: str) -> Any:
        if self.store_kind == "lmdb":
            return kvzarr.stores.LMDBStore(path, **self.options)
        return kvzarr.stores.SQLStore(path, **self.options)

    def write(self, path: str, positions: np.ndarray, **kw: Any) -> dict[str, Any]:
        lib = self._lib()
        if self.options is None:
            return lib.write_points(path, positions, **kw)
        store = self._open_own(path)
        try:
            return lib.write_points(store, positions, **kw)
        finally:
            store.close()

    def read(self, target: Any, **kw: Any) -> dict[str, Any]:
        return self._lib().read_points(target, **kw)

    def open(self, path: str) -> Any:
        if self.peer:
            import zarr_vectors
            return zarr_vectors.open_store(path)
        return kvzarr.open_store(path, mode="r")

    def close(self, handle: Any) -> None:
        if not self.peer:
            handle.close()


SYSTEMS = [
    System(PEER, "", "no fsync", None),
    System("kvzarr-fs", "", "atomic per key, no fsync (the default)", True),
    System("kvzarr-lmdb", ".lmdb", "fsync per commit (the default)", False),
    System("kvzarr-lmdb-nosync", ".lmdb", "never fsynced (durability='none')", True,
           "lmdb", {"durability": "none"}, reads=False),
    System("kvzarr-sqlite", ".sqlite", "WAL, synchronous=FULL: fsync per commit "
           "(the default)", False),
    System("kvzarr-sqlite-nosync", ".sqlite", "WAL, synchronous=NORMAL: synced at "
           "checkpoints only", True, "sql", {"synchronous": "NORMAL"}, reads=False),
]


class WrongAnswer(Exception):
    pass


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def summary(values: list[float]) -> dict[str, Any]:
    return {"values": values, "median": statistics.median(values), "min": min(values),
            "max": max(values)}


def remove(path: Path) -> None:
    """A target and whatever its engine put beside it (lock, log and shared-memory
    files), then its directory."""
    shutil.rmtree(path.parent, ignore_errors=True)


def same_points(name: str, what: str, got: dict[str, Any], want: dict[str, Any],
                attribute: str | None = None) -> bool:
    """Raise :class:`WrongAnswer` unless ``got`` holds the points of ``want``: the same
    count and the same positions (and attribute values). Returns whether the order is
    the same too (a different order of the same points is reported, not fatal)."""
    gp, wp = np.asarray(got["positions"]), np.asarray(want["positions"])
    if got["vertex_count"] != want["vertex_count"] or gp.shape != wp.shape:
        raise WrongAnswer(f"{name}, {what}: {got['vertex_count']} points {gp.shape}, "
                          f"{PEER} {want['vertex_count']} {wp.shape}")
    cols = [gp]
    wcols = [wp]
    if attribute is not None:
        ga = np.asarray(got["vertex_attributes"][attribute]).reshape(len(gp), -1)
        wa = np.asarray(want["vertex_attributes"][attribute]).reshape(len(wp), -1)
        cols.append(ga)
        wcols.append(wa)
    g = np.column_stack([c.astype(np.float64) for c in cols])
    w = np.column_stack([c.astype(np.float64) for c in wcols])
    if np.array_equal(g, w):
        return True
    gs = g[np.lexsort(g.T[::-1])]
    ws = w[np.lexsort(w.T[::-1])]
    if not np.array_equal(gs, ws):
        bad = int(np.any(gs != ws, axis=1).sum())
        raise WrongAnswer(f"{name}, {what}: {bad} of {len(gs)} points differ from "
                          f"{PEER}'s (as sorted sets)")
    return False


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    positions = rng.random((args.points, 3), dtype=np.float32) * np.float32(DOMAIN)
    attribute = {"intensity": rng.random(args.points, dtype=np.float32)}
    shape = dict(chunk_shape=CHUNK, bin_shape=BIN)
    names = [s.name for s in SYSTEMS]
    metrics: dict[str, dict[str, Any]] = {}
    checks: dict[str, Any] = {"order differs": []}
    counter = iter(range(1 << 30))

    def fresh(system: System) -> Path:
        return base / f"{system.name}-{next(counter)}" / f"points{system.suffix}"

    # -- writes ------------------------------------------------------------------------
    last: dict[str, Path] = {}
    for metric, extra in (("write", {}), ("write + 1 float32 attribute",
                                          {"vertex_attributes": attribute})):
        times: dict[str, list[float]] = {n: [] for n in names}
        for _ in range(args.repeat):
            for system in SYSTEMS:
                old = last.pop(system.name, None)
                if old is not None:
                    remove(old)
                path = fresh(system)
                path.parent.mkdir(parents=True)
                gc.collect()
                os.sync()
                t, result = timed(lambda: system.write(str(path), positions, **shape,
                                                       **extra))
                times[system.name].append(t)
                last[system.name] = path
                checks.setdefault(f"{metric} summary", {})[system.name] = result
            want = checks[f"{metric} summary"][PEER]
            for n in names:
                if checks[f"{metric} summary"][n] != want:
                    raise WrongAnswer(f"{n}, {metric}: returned "
                                      f"{checks[f'{metric} summary'][n]}, {PEER} {want}")
        metrics[metric] = {n: summary(v) for n, v in times.items()}
        print(metric, {n: round(metrics[metric][n]["median"], 4) for n in names},
              flush=True)
        if extra:
            # the attribute reads back as zarr-vectors' does (untimed)
            lo = [BOXES[next(iter(BOXES))]] * 3
            box = (lo, [v + EDGE for v in lo])
            want = SYSTEMS[0].read(str(last[PEER]), bbox=box, attribute_names=["intensity"])
            for system in SYSTEMS[1:]:
                got = system.read(str(last[system.name]), bbox=box,
                                  attribute_names=["intensity"])
                if not same_points(system.name, "attribute read", got, want, "intensity"):
                    checks["order differs"].append(f"{system.name}: attribute read")
            checks["attribute read points"] = int(want["vertex_count"])

    # -- reads -------------------------------------------------------------------------
    # a fresh dataset without the attribute per system that reads (written untimed)
    for system in SYSTEMS:
        remove(last.pop(system.name))
        if system.reads:
            path = fresh(system)
            path.parent.mkdir(parents=True)
            system.write(str(path), positions, **shape)
            last[system.name] = path
    readers = [s for s in SYSTEMS if s.reads]
    handles = {s.name: s.open(str(last[s.name])) for s in readers}
    ways: list[tuple[str, System, Callable[..., dict[str, Any]]]] = []
    for s in readers:
        path = str(last[s.name])
        ways.append((f"{s.name} path", s, lambda s=s, p=path, **kw: s.read(p, **kw)))
        ways.append((f"{s.name} open", s,
                     lambda s=s, h=handles[s.name], **kw: s.read(h, **kw)))
    reads = [(title, {"bbox": ([lo] * 3, [lo + EDGE] * 3)}, args.calls)
             for title, lo in BOXES.items()]
    reads.append(("full read", {}, args.full_calls))
    try:
        for title, kw, calls in reads:
            # warm-up, and every way's answer against zarr-vectors' through a path
            want = ways[0][2](**kw)
            checks.setdefault("points read", {})[title] = int(want["vertex_count"])
            checks.setdefault("points in the box (numpy)", {})[title] = (
                in_box(positions, kw["bbox"]) if kw else len(positions))
            for label, _, call in ways:
                if not same_points(label, title, call(**kw), want):
                    checks["order differs"].append(f"{label}: {title}")
            times = {label: [] for label, _, _ in ways}
            for _ in range(calls):
                for label, _, call in ways:
                    gc.collect()
                    t, got = timed(lambda: call(**kw))
                    if got["vertex_count"] != want["vertex_count"]:
                        raise WrongAnswer(f"{label}, {title}: {got['vertex_count']} points, "
                                          f"{PEER} {want['vertex_count']}")
                    times[label].append(t)
            metrics[title] = {label: summary(v) for label, v in times.items()}
            print(title, {k: round(v["median"] * 1e3, 3) for k, v in metrics[title].items()},
                  "ms", flush=True)
    finally:
        for s in readers:
            s.close(handles[s.name])
        for path in last.values():
            remove(path)
    return {"metrics": metrics, "checks": checks}


def in_box(positions: np.ndarray, box: Any) -> int:
    """How many of ``positions`` the closed box holds (numpy's count, for the report)."""
    lo, hi = (np.asarray(b, dtype=np.float64) for b in box)
    p = positions.astype(np.float64)
    return int(np.all((p >= lo) & (p <= hi), axis=1).sum())


def bars(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every bar: kvzarr's median time over zarr-vectors' on the same metric, judged at
    most :data:`BAR`. ``acceptance`` marks the bars of the acceptance criterion (writes
    at equal durability, box reads with a path per call)."""
    m = result["metrics"]
    out = []
    for s in SYSTEMS[1:]:
        ratio = m["write"][s.name]["median"] / m["write"][PEER]["median"]
        out.append({"metric": "write", "system": s.name, "against": PEER, "ratio": ratio,
                    "pass": ratio <= BAR, "acceptance": bool(s.equal),
                    "note": "equal durability" if s.equal else
                    "kvzarr syncs, zarr-vectors does not: not at equal durability"})
    for title in BOXES:
        for s in SYSTEMS[1:]:
            if not s.reads:
                continue
            for way, peer_way, acceptance in (("path", "path", True), ("open", "open", False)):
                mine = m[title][f"{s.name} {way}"]["median"]
                peer = m[title][f"{PEER} {peer_way}"]["median"]
                out.append({"metric": title, "system": f"{s.name} {way}",
                            "against": f"{PEER} {peer_way}", "ratio": mine / peer,
                            "pass": mine / peer <= BAR, "acceptance": acceptance,
                            "note": "a path per call, as a zarr-vectors user calls it"
                            if way == "path" else
                            "an open kvzarr Store against an open zarr-vectors group"})
    return out


def _fmt(seconds: float, unit: str) -> str:
    v = seconds * (1e3 if unit == "ms" else 1)
    return f"{v:.3g}" if v < 100 else f"{v:,.0f}"


def markdown(result: dict[str, Any]) -> str:
    m, p = result["metrics"], result["params"]
    out = ["# Point clouds: kvzarr.vectors against zarr-vectors", "",
           f"Run {result['started']} on {result['machine']} in {result['seconds']:.0f} s; "
           f"`{result['command']}`.", "",
           "Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + ".",
           "",
           f"{p['points']:,} random 3-D points (uniform float32 in [0, {DOMAIN:g})^3, seed "
           f"{p['seed']}), chunks {CHUNK[0]:g}^3, bins {BIN[0]:g}^3; box reads: a cube of "
           f"edge {EDGE:.1f} (1% of the domain). Writes: median of {p['repeat']} "
           f"repetitions (min–max), a fresh target each; box reads: median of "
           f"{p['calls']} calls after a warm-up, full reads of {p['full_calls']}. Ratio: "
           f"kvzarr's median time ÷ {PEER}' (lower is better; the bar is ≤ {BAR:g}).", "",
           "## Systems", "",
           "| system | target | durability | equal durability to zarr-vectors |",
           "|---|---|---|---|"]
    for s in SYSTEMS:
        eq = "—" if s.equal is None else "**yes**" if s.equal else "no (kvzarr syncs)"
        out.append(f"| {s.name} | {s.describe_target()} | {s.durability} | {eq} |")
    out.append("")

    all_bars = bars(result)
    acc = [b for b in all_bars if b["acceptance"]]
    failed = [b for b in acc if not b["pass"]]
    out += ["## Bars", "",
            f"**Acceptance: {'PASS' if not failed else 'FAIL'}** ({len(acc) - len(failed)} "
            f"of {len(acc)} bars: writes at equal durability, 1% box reads with a path "
            "per call).", ""]
    for heading, chosen in (("Acceptance bars", acc),
                            ("The same bar on the other comparisons (not acceptance bars)",
                             [b for b in all_bars if not b["acceptance"]])):
        out += [f"### {heading}", ""]
        for b in chosen:
            out.append(f"- {'PASS' if b['pass'] else 'FAIL'}: {b['metric']}: {b['system']} "
                       f"÷ {b['against']} = {b['ratio']:.3f} (≤ {BAR:g}; {b['note']})")
        out.append("")

    for metric in ("write", "write + 1 float32 attribute"):
        out += [f"## {metric.capitalize()} (s)", "",
                f"| system | median s | min–max | ÷ {PEER} | equal durability |",
                "|---|---|---|---|---|"]
        peer = m[metric][PEER]["median"]
        for s in SYSTEMS:
            r = m[metric][s.name]
            eq = "—" if s.equal is None else "yes" if s.equal else "no"
            ratio = "1" if s.peer else f"**{r['median'] / peer:.2f}**"
            out.append(f"| {s.name} | {_fmt(r['median'], 's')} | {_fmt(r['min'], 's')}–"
                       f"{_fmt(r['max'], 's')} | {ratio} | {eq} |")
        out.append("")

    for title in list(BOXES) + ["full read"]:
        unit, rows = "ms", m[title]
        count = result["checks"]["points read"][title]
        out += [f"## {title[0].upper() + title[1:]} (ms, {count:,} points)", "",
                f"| system | path per call | ÷ {PEER} path | open store | ÷ {PEER} open |",
                "|---|---|---|---|---|"]
        pp, po = rows[f"{PEER} path"]["median"], rows[f"{PEER} open"]["median"]
        for s in SYSTEMS:
            if not s.reads:
                continue
            a, b = rows[f"{s.name} path"], rows[f"{s.name} open"]
            ra = "1" if s.peer else f"**{a['median'] / pp:.2f}**"
            rb = "1" if s.peer else f"**{b['median'] / po:.2f}**"
            out.append(f"| {s.name} | {_fmt(a['median'], unit)} ({_fmt(a['min'], unit)}–"
                       f"{_fmt(a['max'], unit)}) | {ra} | {_fmt(b['median'], unit)} "
                       f"({_fmt(b['min'], unit)}–{_fmt(b['max'], unit)}) | {rb} |")
        out.append("")
    out += ["For zarr-vectors, \"open store\" is one `zarr_vectors.open_store(path)` group "
            "reused; for kvzarr one `kvzarr.open_store(path, mode=\"r\")`. The no-sync "
            "variants are not read: their files hold the same bytes.", "",
            "## Answers", ""]
    c = result["checks"]
    out.append(f"- Every kvzarr answer equals {PEER}': the write summaries, the number of "
               "points and the positions of every read (box reads: "
               + ", ".join(f"{v:,}" for k, v in c["points read"].items() if k != "full read")
               + f" points), and the attribute's values in a box "
               f"({c['attribute read points']:,} points).")
    numpy_counts = c["points in the box (numpy)"]
    off = [f"{k}: numpy counts {numpy_counts[k]:,}, both libraries {v:,}"
           for k, v in c["points read"].items() if numpy_counts[k] != v]
    out.append("- numpy's count of the points in each closed box agrees." if not off else
               "- numpy's count of the points in the closed box differs: " + "; ".join(off)
               + ".")
    if c["order differs"]:
        out.append("- The same points in a different order: " + "; ".join(c["order differs"])
                   + ".")
    else:
        out.append(f"- The points come in the same order as {PEER}'.")
    out.append("")
    return "\n".join(out)


def versions() -> dict[str, str]:
    import zarr
    import zarr_vectors
    v = {"kvzarr": getattr(kvzarr, "__version__", "?"),
         "zarr-vectors": zarr_vectors.__version__, "zarr-python": zarr.__version__,
         "numpy": np.__version__, "python": sys.version.split()[0]}
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "kvzarr"],
                               capture_output=True, text=True, timeout=10,
                               cwd=Path(__file__).resolve().parents[1])
        if head.returncode == 0:
            v["kvzarr"] += f" ({head.stdout.strip()}" + (
                " with uncommitted changes" if dirty.stdout.strip() else "") + ")"
    except OSError:
        pass
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5, help="repetitions of each write")
    ap.add_argument("--calls", type=int, default=30, help="timed calls of each box read")
    ap.add_argument("--full-calls", type=int, default=5, help="timed calls of the full read")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="where the datasets are made")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="kvzarr-vectors-", dir=args.workdir))
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t0 = time.perf_counter()
    try:
        result = run(args, base)
    except WrongAnswer as e:
        print(f"WRONG ANSWER: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result.update({
        "started": started, "seconds": time.perf_counter() - t0,
        "machine": f"{os.cpu_count()} cores",
        "command": " ".join(["python benchmarks/vectors.py",
                             *(sys.argv[1:] if argv is None else argv)]),
        "versions": versions(),
        "params": {"points": args.points, "repeat": args.repeat, "calls": args.calls,
                   "full_calls": args.full_calls, "seed": args.seed, "chunk": CHUNK,
                   "bin": BIN, "box_edge": EDGE},
        "systems": {s.name: {"target": s.describe_target(), "durability": s.durability,
                             "equal_durability": s.equal} for s in SYSTEMS}})
    result["bars"] = bars(result)
    result["acceptance"] = all(b["pass"] for b in result["bars"] if b["acceptance"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "vectors.json").write_text(json.dumps(result, indent=1, default=str))
    text = markdown(result)
    (out / "vectors.md").write_text(text)
    print(text)
    print(f"wrote {out / 'vectors.json'}, {out / 'vectors.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
