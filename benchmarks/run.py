"""The one command: build what the suite needs, run every chosen workload for every
chosen system, each in a subprocess of the system's own environment, and write the
results (JSON), the report (Markdown) and the chart (PNG). Standard library only.

    python benchmarks/run.py                                  # everything, defaults
    python benchmarks/run.py --workloads W1,W2 --systems kvzarr,zarr3-local --repeat 5
    python benchmarks/run.py --scale 0.1                      # a quick look
    python benchmarks/run.py --param W2.chunks=100000         # the issue's full W2
    python benchmarks/run.py --profile kvzarr-fs:W2           # cProfile a slow path
    python benchmarks/run.py --report-only benchmarks/results/latest.json

Systems run one after another (the machines are small and shared); a crash, a timeout
or a wrong answer in one job is reported in its cells and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import envs, report  # noqa: E402
from benchmarks.systems import SYSTEMS, expand  # noqa: E402
from benchmarks.worker import RESULT_MARK  # noqa: E402

ALL_WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W6"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default=",".join(ALL_WORKLOADS),
                   help="comma-separated, e.g. W1,W5 (default: all)")
    p.add_argument("--systems", default="all",
                   help="comma-separated system names or groups: all, kvzarr, peers, raw, "
                        "zarr3, zarr2, tensorstore (default: all)")
    p.add_argument("--scale", type=float, default=1.0, help="size factor for every workload")
    p.add_argument("--repeat", type=int, default=3, help="repetitions per metric (>= 1)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every system this many times per workload, taking turns, and "
                        "pool their repetitions (on a shared machine a slow spell then "
                        "falls on every system, not on whichever ran during it)")
    p.add_argument("--budget", type=float, default=5.0,
                   help="seconds one loop of small operations may take before it stops "
                        "and reports the rate of what it ran")
    p.add_argument("--param", action="append", default=[], metavar="Wn.name=value",
                   help="override a workload parameter (JSON value), repeatable")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per job")
    p.add_argument("--peers3-python", help="use this interpreter for kvzarr, zarr-python 3, "
                   "TensorStore and the raw engines instead of building benchmarks/.envs/peers3")
    p.add_argument("--zarr2-python", help="use this interpreter for zarr-python 2 instead "
                   "of building benchmarks/.envs/zarr2")
    p.add_argument("--out", type=Path, default=HERE / "results", help="results directory")
    p.add_argument("--workdir", help="where the systems write their data (default: a "
                   "temporary directory)")
    p.add_argument("--profile", default="", metavar="SYSTEM:Wn,...",
                   help="run these jobs under cProfile; the top functions go to "
                        "OUT/profiles/ (SYSTEM may be a group, Wn may be '*')")
    p.add_argument("--no-chart", action="store_true", help="skip the PNG")
    p.add_argument("--report-only", type=Path, metavar="RUN.json",
                   help="only rebuild report.md and the chart from a results file")
    p.add_argument("--list", action="store_true", help="list systems and workloads")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def workload_params(args: argparse.Namespace, names: list[str]) -> dict[str, dict]:
    """Each workload's parameters: DEFAULTS, scaled, then --param overrides. Reads the
    workload modules' tables without importing numpy: they are plain literals."""
    import ast
    out: dict[str, dict] = {}
    overrides: dict[str, dict] = {}
    for item in args.param:
        key, _, value = item.partition("=")
        wl, _, name = key.partition(".")
        if wl not in ALL_WORKLOADS or not name or not _:
            raise SystemExit(f"--param {item!r}: expected Wn.name=value")
        try:
            overrides.setdefault(wl, {})[name] = json.loads(value)
        except json.JSONDecodeError:
            overrides.setdefault(wl, {})[name] = value
    for wl in names:
        src = (HERE / "workloads" / f"{_module(wl)}.py").read_text()
        tree = ast.parse(src)
        consts = {t.id: ast.literal_eval(node.value) for node in tree.body
                  if isinstance(node, ast.Assign) for t in node.targets
                  if isinstance(t, ast.Name) and t.id in ("DEFAULTS", "TITLE")}
        out[wl] = {"title": consts["TITLE"], "defaults": consts["DEFAULTS"],
                   "overrides": overrides.get(wl, {})}
    return out


def _module(wl: str) -> str:
    from benchmarks.workloads import MODULES
    return MODULES[wl]


def profile_wanted(spec: str, system: str, workload: str) -> bool:
    for item in filter(None, (x.strip() for x in spec.split(","))):
        sys_part, _, wl_part = item.partition(":")
        systems = expand(sys_part) if sys_part else []
        if system in systems and wl_part in ("", "*", workload):
            return True
    return False


def run_job(py: str, job: dict, timeout: float) -> dict:
    """One (system, workload) in a subprocess; a crash or timeout becomes an error."""
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(HERE.parent) + os.pathsep
           + os.environ.get("PYTHONPATH", ""), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([py, "-m", "benchmarks.worker"], cwd=str(HERE.parent),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(json.dumps(job), timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"system": job["system"], "workload": job["workload"], "metrics": [],
                "error": f"timed out after {timeout:.0f} s", "seconds": timeout}
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    lines = [ln for ln in (stderr or stdout).strip().splitlines() if ln.strip()]
    return {"system": job["system"], "workload": job["workload"], "metrics": [],
            "error": f"worker exited with {proc.returncode}: "
                     + (lines[-1].strip() if lines else "no output"),
            "traceback": "\n".join(lines[-15:]), "seconds": time.perf_counter() - t0}


def pool_results(into: dict, more: dict) -> dict:
    """Add the repetitions of ``more`` (a later round of the same job) to ``into`` and
    recompute its medians; ``into`` is updated in place and returned."""
    import statistics
    by_name = {m["name"]: m for m in into.get("metrics", [])}
    for m in more.get("metrics", []):
        mine = by_name.get(m["name"])
        if mine is None:
            into.setdefault("metrics", []).append(m)
            by_name[m["name"]] = m
            continue
        mine["values"] = mine.get("values", []) + m.get("values", [])
        if m.get("lost") is not None:
            mine["lost"] = (mine.get("lost") or []) + m["lost"]
        for key in ("na", "error", "note"):
            mine[key] = mine.get(key) or m.get(key)
        if mine["values"]:
            mine.update(median=statistics.median(mine["values"]), min=min(mine["values"]),
                        max=max(mine["values"]))
    into["error"] = into.get("error") or more.get("error")
    into["seconds"] = into.get("seconds", 0) + more.get("seconds", 0)
    return into


def source_state() -> str:
    """The commit of the checkout being measured, '+ changes' when kvzarr/ differs."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE.parent,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "kvzarr"],
                               cwd=HERE.parent, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + (" + uncommitted changes" if dirty else "")


def summarize(result: dict) -> str:
    parts = []
    for m in result.get("metrics", []):
        if "median" in m:
            lost = f" lost {m['lost'][0]:,}" if m.get("lost") else ""
            parts.append(f"{m['name']} {report.fmt(m['median'])} {m['unit']}{lost}")
    text = "; ".join(parts) or "no numbers"
    if result.get("error"):
        text += f"  [{result['error'].splitlines()[0][:160]}]"
    return text


def write_outputs(run: dict, out: Path, chart_py: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(report.render(run))
    if chart_py:
        done = subprocess.run([chart_py, "-m", "benchmarks.chart", str(out / "latest.json"),
                               str(out / "ratios.png")], cwd=str(HERE.parent),
                              capture_output=True, text=True)
        if done.returncode:
            print(f"[chart] not drawn: {done.stderr.strip().splitlines()[-1:]}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for name, s in SYSTEMS.items():
            print(f"{name:20} {s.family:7} {s.label}")
        for wl in ALL_WORKLOADS:
            print(wl, workload_params(args, [wl])[wl]["title"])
        return 0
    if args.report_only:
        run = json.loads(args.report_only.read_text())
        out = args.report_only.parent
        (out / "latest.json").write_text(json.dumps(run, indent=1))
        write_outputs(run, out, None if args.no_chart else
                      (args.peers3_python or str(envs.ensure("peers3"))))
        print(out / "report.md")
        return 0

    workloads = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    bad = [w for w in workloads if w not in ALL_WORKLOADS]
    if bad:
        raise SystemExit(f"unknown workloads {bad}; choose from {ALL_WORKLOADS}")
    systems = expand(args.systems)
    wl_info = workload_params(args, workloads)

    pythons: dict[str, str] = {}

    def python_for(env_name: str) -> str:
        if env_name not in pythons:
            given = args.peers3_python if env_name == "peers3" else args.zarr2_python
            pythons[env_name] = given or str(envs.ensure(env_name))
        return pythons[env_name]

    needed = sorted({SYSTEMS[s].env for s in systems} | {"peers3"})
    for env_name in needed:
        python_for(env_name)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="kvzarr-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    run = {"started": started.strftime("%Y-%m-%d %H:%M UTC"),
           "host": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "machine": platform.machine()},
           "source": source_state(),
           "args": {"repeat": args.repeat, "rounds": args.rounds, "scale": args.scale,
                    "budget": args.budget,
                    "params": args.param, "systems": systems, "workloads": workloads},
           "versions": {e: envs.versions(py) for e, py in pythons.items()},
           "systems": {s: {k: v for k, v in vars(SYSTEMS[s]).items() if k != "kwargs"}
                       for s in systems},
           "workloads": {}, "results": []}
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = started.strftime("%Y%m%d-%H%M%S")
    run_file = args.out / f"run-{stamp}.json"
    t_start = time.perf_counter()
    try:
        for wl in workloads:
            info = wl_info[wl]
            print(f"== {wl}: {info['title']}", flush=True)
            params = None
            pooled: dict[str, dict] = {}
            for _ in range(args.rounds):
                for system in systems:
                    job = {"system": system, "workload": wl, "repeat": args.repeat,
                           "budget": args.budget, "workdir": str(workdir),
                           "scale": args.scale, "params": info["overrides"],
                           "profile": (str(args.out / "profiles" / f"{system}-{wl}.txt")
                                       if profile_wanted(args.profile, system, wl)
                                       else None)}
                    result = run_job(python_for(SYSTEMS[system].env), job, args.timeout)
                    params = params or result.get("params")
                    if system in pooled:
                        result = pool_results(pooled[system], result)
                    else:
                        run["results"].append(result)
                    pooled[system] = result
                    print(f"  {system:16} {result.get('seconds', 0):6.1f} s  "
                          f"{summarize(result)}", flush=True)
                    run["seconds"] = time.perf_counter() - t_start
                    run_file.write_text(json.dumps(run, indent=1))
            run["workloads"][wl] = {"title": info["title"], "params": params or {}}
    finally:
        run["seconds"] = time.perf_counter() - t_start
        run_file.write_text(json.dumps(run, indent=1))
        (args.out / "latest.json").write_text(json.dumps(run, indent=1))
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    write_outputs(run, args.out, None if args.no_chart else python_for("peers3"))
    print(f"\n{run_file}\n{args.out / 'report.md'}"
          + ("" if args.no_chart else f"\n{args.out / 'ratios.png'}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
