"""What keeping consolidated metadata true costs: creating 200 arrays one by one (each
its own transaction, as a user's loop does) in a group without consolidated metadata and
in one with it, on each store; and, to show the plain path did not get slower, the same
plain creates (and attribute changes and appends, the other metadata changes) in a
source tree from before the change.

    git archive main | tar -x -C /tmp/kvzarr-before
    .venv/bin/python benchmarks/consolidated_creates.py --before /tmp/kvzarr-before \\
        --after . --rounds 5

Each round runs the trees in alternating subprocesses; the report gives, per operation,
the median over the rounds (microseconds per array) and the ratios: consolidated / plain
within the "after" tree, and after / before for the plain operations. Standard library
only; the trees run with the interpreter that runs this script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

#: the measuring process: builds the stores in a temporary directory, prints one JSON
MEASURE = r'''
import json, os, sys, tempfile, time
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, os.environ["KVZARR_TREE"])
import numpy as np
import kvzarr

N = int(os.environ["KVZARR_N"])
tmp = tempfile.mkdtemp()
has_consolidate = hasattr(kvzarr, "consolidate_metadata")
out = {}


def open_store(kind, name):
    if kind == "memory":
        return kvzarr.MemoryStore()
    suffix = {"lmdb": ".lmdb", "sqlite": ".sqlite", "filesystem": ".zarr"}[kind]
    return kvzarr.open_store(os.path.join(tmp, name + suffix))


def per_array(seconds):
    return seconds / N * 1e6


for kind in ("memory", "lmdb", "sqlite", "filesystem"):
    for consolidated in ((False, True) if has_consolidate else (False,)):
        label = f"{kind} {'consolidated' if consolidated else 'plain'}"
        store = open_store(kind, label.replace(" ", "-"))
        root = kvzarr.open_group(store, attributes={"title": "bench"})
        if consolidated:
            kvzarr.consolidate_metadata(store)
        t = time.perf_counter()
        for i in range(N):
            root.create_array(f"a{i:04d}", shape=(16,), chunks=(16,), dtype="int32",
                              attributes={"units": "K", "index": i})
        out[f"{label} create"] = per_array(time.perf_counter() - t)
        arrays = [root[f"a{i:04d}"] for i in range(N)]
        t = time.perf_counter()
        for a in arrays:
            a.attrs["touched"] = True
        out[f"{label} set attribute"] = per_array(time.perf_counter() - t)
        t = time.perf_counter()
        for a in arrays:
            a.append(np.arange(4, dtype="int32"))
        out[f"{label} append"] = per_array(time.perf_counter() - t)
        t = time.perf_counter()
        for a in arrays:
            a[0:4] = 1                      # a chunk write: must cost the same either way
        out[f"{label} chunk write"] = per_array(time.perf_counter() - t)
        store.close()
import shutil
shutil.rmtree(tmp, ignore_errors=True)
print(json.dumps({"file": kvzarr.__file__, "us": out}))
'''


def run(tree: str, n: int) -> dict[str, float]:
    root = os.path.abspath(tree)
    env = dict(os.environ, KVZARR_TREE=root, KVZARR_N=str(n))
    done = subprocess.run([sys.executable, "-c", MEASURE], env=env, check=True,
                          capture_output=True, text=True, cwd="/")
    answer = json.loads(done.stdout)
    if not answer["file"].startswith(root + os.sep):
        raise SystemExit(f"measured {answer['file']}, not the tree {root}")
    return answer["us"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="source tree before the change")
    parser.add_argument("--after", required=True, help="source tree after the change")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--arrays", type=int, default=200)
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for r in range(args.rounds):
        order = [("before", args.before), ("after", args.after)]
        for label, tree in order if r % 2 == 0 else order[::-1]:
            for op, us in run(tree, args.arrays).items():
                results[label].setdefault(op, []).append(us)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    med = {label: {op: statistics.median(v) for op, v in ops.items()}
           for label, ops in results.items()}
    after, before = med["after"], med["before"]
    print(f"{args.arrays} arrays, {args.rounds} rounds; microseconds per array (median)")
    print(f"{'operation':36} {'before':>9} {'after':>9} {'after/before':>13} "
          f"{'consolidated':>13} {'cons./plain':>12}")
    for op in after:
        if " plain " not in op:
            continue
        cons = op.replace(" plain ", " consolidated ")
        b = before.get(op)
        print(f"{op:36} {b if b is not None else float('nan'):9.1f} {after[op]:9.1f} "
              f"{(after[op] / b) if b else float('nan'):13.3f} {after.get(cons, float('nan')):13.1f} "
              f"{after.get(cons, float('nan')) / after[op]:12.3f}")


if __name__ == "__main__":
    main()
