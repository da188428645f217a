"""What the checks at the store boundary cost: byte requests and keys checked once per
call, on the paths W2 (single-element reads of small chunks) and W3 (tiles of a sharded
array: many byte-range reads) take. Two source trees (before, after) run the same
operations in alternating subprocesses, round after round, and the medians are compared.

    git archive main | tar -x -C /tmp/kvzarr-before
    .venv/bin/python benchmarks/store_boundary.py --before /tmp/kvzarr-before --after . \\
        --rounds 7

Each operation is timed with ``timeit`` inside its process (best of 5 repeats, in ns per
operation); the report gives, per operation, the median over the rounds of each tree and
their ratio (after / before). Standard library only; the trees run with the interpreter
that runs this script (which must have kvzarr's dependencies).
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
import json, os, sys, tempfile, timeit, random
# the tree named by KVZARR_TREE, not an editable install's (its finder comes first)
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, os.environ["KVZARR_TREE"])
import numpy as np
import kvzarr
from kvzarr.stores.byteranges import RangeRequest
from kvzarr.stores.memory import MemoryStore
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.sql import SQLStore
from kvzarr.stores.filesystem import FilesystemStore

tmp = tempfile.mkdtemp()
stores = {"memory": MemoryStore(), "lmdb": LMDBStore(os.path.join(tmp, "x.lmdb")),
          "sqlite": SQLStore(os.path.join(tmp, "x.sqlite")),
          "filesystem": FilesystemStore(os.path.join(tmp, "fs"))}
out = {}

def best(stmt, number):
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number * 1e9

out["RangeRequest()"] = best(lambda: RangeRequest(4096, 8192), 200_000)
rng = random.Random(0)
for name, store in stores.items():
    store.set("k/0", bytes(65536))
    one = [("k/0", RangeRequest(4096, 8192))]
    many = [("k/0", RangeRequest(i * 1024, i * 1024 + 512)) for i in range(16)]
    n = 20_000 if name == "memory" else 5_000
    out[f"{name} get"] = best(lambda: store.get("k/0"), n)
    out[f"{name} 1 range"] = best(lambda: store.get_partial_values(one), n)
    out[f"{name} 16 ranges"] = best(lambda: store.get_partial_values(many), n // 4)
    # W2: single elements of a 1024 x 1024 float32 array in 32 x 32 chunks
    a = kvzarr.create_array(store, name="w2", shape=(1024, 1024), chunks=(32, 32),
                            dtype="float32", compressors=None, overwrite=True)
    a[...] = np.arange(1024 * 1024, dtype="float32").reshape(1024, 1024)
    points = [(rng.randrange(1024), rng.randrange(1024)) for _ in range(2000)]
    out[f"{name} W2 element"] = best(lambda: [a[i, j] for i, j in points], 1) / len(points)
    # W3: 64 x 64 tiles of a 2048 x 2048 uint16 array, shards 512^2, inner chunks 64^2, gzip
    b = kvzarr.create_array(store, name="w3", shape=(2048, 2048), chunks=(64, 64),
                            shards=(512, 512), dtype="uint16",
                            compressors={"name": "gzip", "configuration": {"level": 5}},
                            overwrite=True)
    b[...] = (np.arange(2048 * 2048) % 65536).astype("uint16").reshape(2048, 2048)
    tiles = [(rng.randrange(32) * 64, rng.randrange(32) * 64) for _ in range(500)]
    out[f"{name} W3 tile"] = best(lambda: [b[i:i + 64, j:j + 64] for i, j in tiles],
                                  1) / len(tiles)
for store in stores.values():
    store.close()
print(json.dumps({"file": kvzarr.__file__, "ns": out}))
'''


def run(tree: str) -> dict[str, float]:
    root = os.path.abspath(tree)
    env = dict(os.environ, KVZARR_TREE=root)
    done = subprocess.run([sys.executable, "-c", MEASURE], env=env, check=True,
                          capture_output=True, text=True, cwd="/")
    answer = json.loads(done.stdout)
    if not answer["file"].startswith(root + os.sep):
        raise SystemExit(f"measured {answer['file']}, not the tree {root}")
    return answer["ns"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="source tree before the change")
    parser.add_argument("--after", required=True, help="source tree after the change")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for r in range(args.rounds):
        order = [("before", args.before), ("after", args.after)]
        for label, tree in order if r % 2 == 0 else order[::-1]:
            for op, ns in run(tree).items():
                results[label].setdefault(op, []).append(ns)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'operation':28} {'before ns':>12} {'after ns':>12} {'after/before':>13}")
    for op in results["before"]:
        b = statistics.median(results["before"][op])
        a = statistics.median(results["after"][op])
        print(f"{op:28} {b:12.0f} {a:12.0f} {a / b:13.3f}")


if __name__ == "__main__":
    main()
