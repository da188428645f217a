"""The PNG of a run: for each workload, each kvzarr store's ratio to the best peer on
every metric, as horizontal bars on a log axis with 1× (= the best peer) marked and the
"more than 2× slower" zone shaded. Needs matplotlib (installed in the peers3
environment only; it is not a dependency of kvzarr).

    python -m benchmarks.chart results/latest.json results/ratios.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .report import Results, fmt_ratio

COLORS = {"kvzarr-fs": "#1f77b4", "kvzarr-lmdb": "#2ca02c", "kvzarr-sql": "#ff7f0e",
          "kvzarr-zip": "#9467bd", "kvzarr-memory": "#7f7f7f"}


def draw(run: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = Results(run)
    kv = [s for s in res.systems if res.family(s) == "kvzarr"]
    panels = []
    for wl, info in run.get("workloads", {}).items():
        rows = []
        for metric in res.metric_order.get(wl, []):
            best = res.best_peer(wl, metric)
            if best is None:
                continue
            ratios = {}
            for s in kv:
                v = res.value(s, wl, metric)
                if v is not None:
                    ratios[s] = res.ratio(wl, metric, v, best[1])
            if ratios:
                rows.append((metric, best[0], ratios))
        if rows:
            panels.append((wl, info.get("title", wl), rows))
    if not panels:
        raise SystemExit("nothing to draw: no metric has both a peer and a kvzarr number")

    # Pack the panels into two columns of about equal height; a panel is as tall as
    # its metrics, so every bar has the same thickness.
    ncols = 2
    columns: list[list[int]] = [[] for _ in range(ncols)]
    used = [0] * ncols
    for idx, (_, _, rows) in enumerate(panels):
        col = used.index(min(used))
        columns[col].append(idx)
        used[col] += len(rows)
    units = max(used)
    unit_in = 0.24 * len(kv) + 0.3
    fig = plt.figure(figsize=(17, units * unit_in + 1.2))
    grid = fig.add_gridspec(units, ncols, hspace=0.75 / unit_in, wspace=0.5)
    axes = {}
    for col, members in enumerate(columns):
        at = 0
        for idx in members:
            n = len(panels[idx][2])
            axes[idx] = fig.add_subplot(grid[at:at + n, col])
            at += n
    bar_h = 0.8 / len(kv)
    for idx, (wl, title, rows) in enumerate(panels):
        ax = axes[idx]
        labels = []
        for i, (metric, peer, ratios) in enumerate(rows):
            y0 = len(rows) - 1 - i
            labels.append((y0, f"{metric}\nvs {peer}"))
            for j, s in enumerate(kv):
                if s not in ratios:
                    continue
                y = y0 + 0.4 - (j + 0.5) * bar_h
                r = ratios[s]
                lost = res.lost(s, wl, metric)
                r = max(r, 0.006)   # off the axis on the left: drawn at its edge
                ax.barh(y, r, height=bar_h * 0.9, color=COLORS.get(s, "#333"),
                        hatch="///" if lost else None, edgecolor="white" if lost else None)
                ax.text(r * 1.08, y, fmt_ratio(ratios[s]) + (" LOST DATA" if lost else ""),
                        va="center", fontsize=7.5, color="#b00" if lost else "black")
        ax.set_xscale("log")
        ax.set_xlim(0.005, 400)
        ax.axvline(1.0, color="black", linewidth=1.2)
        ax.axvspan(0.005, 0.5, color="#d62728", alpha=0.07)
        ax.set_yticks([y for y, _ in labels], [t for _, t in labels], fontsize=8.5)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_title(title, fontsize=11, loc="left")
        ax.grid(axis="x", which="major", alpha=0.3)
        ax.tick_params(axis="x", labelsize=8)
    for col, members in enumerate(columns):
        if members:
            axes[members[-1]].set_xlabel(
                "× best peer (log scale; right of the black line = faster than every peer)",
                fontsize=8.5)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS.get(s, "#333")) for s in kv]
    height = units * unit_in + 1.2
    fig.legend(handles, kv, loc="upper center", ncol=len(kv), fontsize=10,
               bbox_to_anchor=(0.5, 1 - 0.1 / height))
    fig.suptitle(f"kvzarr against the best peer on each metric (run {run.get('started', '')},"
                 f" median of {run['args'].get('repeat')}); shaded: more than 2× slower",
                 y=1 - 0.5 / height, fontsize=12)
    fig.subplots_adjust(top=1 - 1.0 / height, bottom=0.6 / height, left=0.14, right=0.98)
    fig.savefig(path, dpi=90)


def main() -> None:
    run = json.loads(Path(sys.argv[1]).read_text())
    draw(run, Path(sys.argv[2]))
    print(sys.argv[2])


if __name__ == "__main__":
    main()
