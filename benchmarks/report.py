"""The Markdown report of one run: a headline table, the issue's speed bars checked with
numbers, and one table per workload (system x metric). Standard library only.

Cells give the median with min-max over the repetitions. Ratios are "how many times
better": ``x peer`` compares with the best peer (zarr-python 2/3, TensorStore) on that
metric, ``x raw`` with the raw engine doing the same byte work; above 1 is better, for
rates and for "lower is better" metrics (bytes written) alike. A system that lost
elements to concurrent writers is never the best peer for that metric.

    python -m benchmarks.report results/run-....json [report.md]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from . import bars

#: (workload, metric) pairs of the headline table, in order
HEADLINE = [
    ("W1", "write all, blosc-zstd"), ("W1", "read all, blosc-zstd"),
    ("W1", "write all, uncompressed"), ("W1", "read all, uncompressed"),
    ("W2", "write all"), ("W2", "read all"), ("W2", "single-element reads"),
    ("W2", "single-element reads, warm"), ("W2", "batched selection"),
    ("W3", "sharded: write all"), ("W3", "sharded: tile reads"),
    ("W3", "sharded: tile reads, warm"),
    ("W3", "sharded: tile writes"), ("W3", "sharded: bytes written per tile"),
    ("W4", "create arrays"), ("W4", "open + read attributes"),
    ("W4", "list a group's children"),
    ("W5", "a[::7], blosc-zstd"), ("W5", "a[::3, 5:4000:11], blosc-zstd"),
    ("W6", "4 writers, disjoint chunks"), ("W6", "4 writers, shared chunks"),
]


class Results:
    """Lookups over one run's JSON."""

    def __init__(self, run: dict[str, Any]) -> None:
        self.run = run
        self.systems: dict[str, dict[str, Any]] = run["systems"]
        self.cells: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.metric_order: dict[str, list[str]] = {}
        self.units: dict[tuple[str, str], tuple[str, str]] = {}
        for job in run["results"]:
            self.jobs[job["system"], job["workload"]] = job
            order = self.metric_order.setdefault(job["workload"], [])
            for m in job.get("metrics", []):
                self.cells[job["system"], job["workload"], m["name"]] = m
                if m["name"] not in order:
                    order.append(m["name"])
                self.units[job["workload"], m["name"]] = (m["unit"], m.get("better", "higher"))

    def family(self, system: str) -> str:
        return self.systems[system]["family"]

    def _info(self, system: str, key: str) -> Any:
        """A field of the system table as the run recorded it, or as the table now
        says for runs older than the field."""
        if key in self.systems[system]:
            return self.systems[system][key]
        from .systems import SYSTEMS
        info = SYSTEMS.get(system)
        return getattr(info, key) if info is not None else None

    def engine(self, system: str) -> str:
        return self._info(system, "engine") or ""

    def synced(self, system: str) -> bool | None:
        return self._info(system, "synced")

    def commits(self, system: str) -> str | None:
        return self._info(system, "commits")

    def value(self, system: str, workload: str, metric: str) -> float | None:
        m = self.cells.get((system, workload, metric))
        return None if m is None or "median" not in m else m["median"]

    def lost(self, system: str, workload: str, metric: str) -> int:
        m = self.cells.get((system, workload, metric))
        return 0 if m is None or not m.get("lost") else int(statistics.median(m["lost"]))

    def better(self, workload: str, metric: str) -> str:
        return self.units.get((workload, metric), ("", "higher"))[1]

    def best_peer(self, workload: str, metric: str) -> tuple[str, float] | None:
        lower = self.better(workload, metric) == "lower"
        found = [(v, s) for s in self.systems if self.family(s) == "peer"
                 and (v := self.value(s, workload, metric)) is not None
                 and not self.lost(s, workload, metric)]
        if not found:
            return None
        v, s = (min if lower else max)(found)
        return s, v

    def raw_limit(self, system: str, workload: str, metric: str) -> tuple[str, float] | None:
        raw = self.systems[system]["limit"]
        m = self.cells.get((system, workload, metric))
        target = (m or {}).get("limit_metric") or metric
        v = self.value(raw, workload, target)
        return None if v is None else (raw, v)

    def ratio(self, workload: str, metric: str, ours: float, theirs: float) -> float:
        if self.better(workload, metric) == "lower":
            return theirs / ours if ours else float("inf")
        return ours / theirs if theirs else float("inf")


def fmt(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_ratio(r: float) -> str:
    return f"{r:.2f}×" if r < 10 else f"{r:.0f}×"


def _status(res: Results, system: str, workload: str) -> str | None:
    """'skipped: ...' / 'failed: ...' for a job without metrics, else None."""
    job = res.jobs.get((system, workload))
    if job is None:
        return "not run"
    err = job.get("error")
    if err and not job.get("metrics"):
        if any(k in err for k in ("ModuleNotFoundError", "ImportError")):
            return f"skipped: not importable ({err})"
        if err.startswith("unsupported: "):     # the system cannot run here at all
            return f"n/a: {err[len('unsupported: '):]}"
        return f"failed: {err}"
    return None


def cell(res: Results, system: str, workload: str, metric: str,
         notes: list[str]) -> str:
    def footnote(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"<sup>{notes.index(text) + 1}</sup>"

    status = _status(res, system, workload)
    if status:
        word = status.split(":")[0] if status.startswith(("skipped", "n/a")) else "failed"
        return word + footnote(status)
    m = res.cells.get((system, workload, metric))
    if m is None:
        err = res.jobs[system, workload].get("error")
        return "failed" + footnote(f"failed: {err}") if err else "—"
    if m.get("na"):
        return "n/a" + footnote(m["na"])
    if m.get("error"):
        return "failed" + footnote(m["error"])
    if "median" not in m:
        return "—"
    text = f"**{fmt(m['median'])}** ({fmt(m['min'])}–{fmt(m['max'])})"
    parts = []
    best = res.best_peer(workload, metric)
    if best and best[0] != system:
        parts.append(f"{fmt_ratio(res.ratio(workload, metric, m['median'], best[1]))} peer")
    elif best:
        parts.append("best peer")
    if res.family(system) != "raw":
        raw = res.raw_limit(system, workload, metric)
        if raw:
            parts.append(f"{fmt_ratio(res.ratio(workload, metric, m['median'], raw[1]))} raw")
    if m.get("lost"):
        parts.append(f"**lost {statistics.median(m['lost']):,.0f}** elements")
    if m.get("note") and "time budget" in m["note"]:
        parts.append(footnote(m["note"].split(";")[0]))
    return text + ("<br>" + " · ".join(parts) if parts else "")


def workload_table(res: Results, workload: str, title: str) -> list[str]:
    metrics = res.metric_order.get(workload, [])
    systems = [s for s in res.systems if (s, workload) in res.jobs]
    if not systems:
        return []
    notes: list[str] = []
    head = [f"## {title}", ""]
    if not metrics:
        head.append("No metrics.")
    cols = [f"{m} ({res.units[workload, m][0]}"
            + (", lower is better" if res.better(workload, m) == "lower" else "") + ")"
            for m in metrics]
    lines = ["| system | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for s in systems:
        row = [cell(res, s, workload, m, notes) for m in metrics]
        lines.append(f"| {s} | " + " | ".join(row) + " |")
    foot = [""] + [f"<sup>{i + 1}</sup> {n}  " for i, n in enumerate(notes)]
    return head + lines + foot + [""]


def headline(res: Results) -> list[str]:
    kv = [s for s in res.systems if res.family(s) == "kvzarr"]
    lines = ["| workload | metric | best peer | " + " | ".join(kv) + " |",
             "|---" * (len(kv) + 3) + "|"]
    for workload, metric in HEADLINE:
        if (workload, metric) not in res.units:
            continue
        unit, better = res.units[workload, metric]
        best = res.best_peer(workload, metric)
        peer = f"{best[0]} {fmt(best[1])} {unit}" if best else "—"
        row = []
        for s in kv:
            v = res.value(s, workload, metric)
            m = res.cells.get((s, workload, metric)) or {}
            if v is None:
                row.append("n/a" if m.get("na") else ("failed" if m.get("error")
                           or _status(res, s, workload) else "—"))
            elif best:
                text = fmt_ratio(res.ratio(workload, metric, v, best[1]))
                row.append(f"**{text}**" if res.ratio(workload, metric, v, best[1]) < 0.5
                           else text)
            else:
                row.append(f"{fmt(v)} {unit}")
            if res.lost(s, workload, metric):
                row[-1] += " (lost)"
        label = metric + (" (lower is better)" if better == "lower" else "")
        lines.append(f"| {workload} | {label} | {peer} | " + " | ".join(row) + " |")
    return lines


def speed_bars(res: Results) -> list[str]:
    """The issues' bars (bars.py), each with its numbers and a pass/fail."""
    out = ["| bar | measured | verdict |", "|---|---|---|"]
    for bar in bars.check(res):
        if bar.theirs is None:
            measured = f"lost {bar.ours:,.0f}"
        else:
            measured = (f"{fmt(bar.ours)} vs {bar.theirs[0]} {fmt(bar.theirs[1])} = "
                        f"{fmt_ratio(bar.ratio)}")
        if bar.limit is not None:
            measured += f"; {bar.limit[0]} {fmt(bar.limit[1])} = {fmt_ratio(bar.limit[2])}"
        verdict = "pass" if bar.passed else "FAIL"
        if bar.passed and bar.limit is not None and bar.ratio is not None and bar.ratio < 1:
            verdict = "pass (engine-bound)"
        out.append(f"| {bar.label} | {measured} | {verdict} |")
    slow = []
    for (s, workload, metric), m in res.cells.items():
        if res.family(s) != "kvzarr" or "median" not in m:
            continue
        best = res.best_peer(workload, metric)
        if best and res.ratio(workload, metric, m["median"], best[1]) < 0.5:
            slow.append((workload, metric, s, res.ratio(workload, metric, m["median"],
                                                         best[1]), best))
    out += ["", "More than 2× slower than the best peer (each needs a note):", ""]
    if not slow:
        out.append("none")
    for workload, metric, s, r, best in sorted(slow):
        out.append(f"* {workload} {metric}: {s} at {fmt_ratio(r)} of {best[0]}")
    return out


def render(run: dict[str, Any]) -> str:
    res = Results(run)
    env = run.get("versions", {})
    lines = ["# kvzarr benchmark report", "",
             f"Run {run.get('started', '?')} on {run.get('host', {}).get('cpus', '?')} CPUs "
             f"({run.get('host', {}).get('platform', '?')}), "
             f"{run.get('seconds', 0) / 60:.1f} minutes, kvzarr at {run.get('source', '?')}; "
             f"repeat {run['args'].get('repeat')}"
             + (f" in each of {run['args']['rounds']} rounds taking turns"
                if run["args"].get("rounds", 1) > 1 else "")
             + f", scale {run['args'].get('scale')}, "
             f"time budget {run['args'].get('budget')} s per loop of small operations.", "",
             "Versions: " + "; ".join(f"{k}: " + ", ".join(f"{n} {v}" for n, v in d.items())
                                      for k, d in env.items()), "",
             "Cells: **median** (min–max) over the repetitions. `× peer`: this median "
             "against the best peer's (zarr-python 3/2, TensorStore) on the same metric; "
             "`× raw`: against the raw engine doing the same byte work. Above 1× is "
             "better, for rates and for \"lower is better\" metrics alike. Every read is "
             "checked against what was written; a wrong answer discards the system's "
             "numbers for the workload.", "",
             "## Headline: kvzarr against the best peer (× ratio, above 1 is better)", ""]
    lines += headline(res)
    lines += ["", "Bold: more than 2× behind the best peer. \"(lost)\": elements were lost "
              "to concurrent writers.", "", "## The issues' speed bars", ""]
    lines += speed_bars(res)
    lines += ["", "## Systems", "", "| system | what | durability of a finished write | "
              "raw limit |", "|---|---|---|---|"]
    for name, s in res.systems.items():
        lines.append(f"| {name} | {s['label']} | {s['durability']} | {s['limit']} |")
    lines.append("")
    for workload, info in run.get("workloads", {}).items():
        params = ", ".join(f"{k}={v}" for k, v in info.get("params", {}).items())
        lines += workload_table(res, workload, f"{info.get('title', workload)}")
        if params:
            lines.insert(len(lines) - 1, f"Parameters: {params}.")
            lines.insert(len(lines) - 1, "")
    return "\n".join(lines) + "\n"


def main() -> None:
    run = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(sys.argv[1]).with_suffix(".md")
    out.write_text(render(run))
    print(out)


if __name__ == "__main__":
    main()
