"""Soak: N processes x T minutes of mixed work on one store, with an invariant checker.

    python3 benchmarks/soak.py --stores lmdb,sqlite,postgresql --processes 8 --minutes 10

(``postgresql`` uses the server named by KVZARR_BENCH_POSTGRES_URL; ``directory`` is the
FilesystemStore, whose key locks make its read-modify-writes exclusive;
``directory-nolock`` the same without them, which loses updates: the checker at work.)

Each writer process ``p`` of ``P`` runs random operations through the public API until the
time is up: single elements into chunks every writer shares (``shared``: element ``i``
belongs to writer ``i % P``) and into shards (``sharded``), tiles of rows that share their
chunks with another writer (``tiles``), whole chunks (``whole``), attribute updates of
one shared group (``attrs``: an RMW of one ``zarr.json`` by everyone), resizes of its
own array, creates and deletes of its own groups and arrays, listings, and reads. Every
value it writes encodes its owner and a sequence number (``(p + 1) * 10**9 + seq``); it
records what it committed (the last value of every element, tile, chunk and attribute it
owns, its array's shape and contents, the nodes it made and removed).

The invariant checker:

* each writer, every ``--check-every`` seconds, reads back everything it owns: anything
  not equal to what it last committed is a **lost update** (no one else writes it);
* a checker process scans the shared arrays meanwhile: every element holds 0 or a value
  of its owner (a **foreign** value is corruption); a tile holds one value throughout (a
  **torn** tile; on the directory store, which has no transactions across keys, within
  each chunk only); every node listed can be opened unless its owner deletes it;
* at the end the parent compares the store with every writer's final record: lost
  updates, nodes that vanished or came back.

A ConflictError (busy beyond the store's timeout) is retried; conflicts and retries are
counted. The report gives operations, retries, conflicts, lost updates (must be 0; each
check that finds an element not as committed counts it, so one lost element seen by
three checks counts 3), torn and foreign reads (must be 0). Exit status 1 when any
invariant broke.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from typing import Any

import numpy as np

#: elements of ``shared`` and ``sharded`` per writer
PER_WRITER = 128
#: rows of ``tiles`` per writer; tile chunks are twice as tall, so each is shared by two
TILE_ROWS, TILE_COLS = 4, 64
#: a value: (owner + 1) * SEQ_BASE + sequence number
SEQ_BASE = 10 ** 9
#: operations and their weights
MIX = {"element": 30, "shard_element": 15, "tile": 12, "whole_chunk": 8, "read": 12,
       "attrs": 6, "resize": 5, "create": 5, "delete": 3, "list": 4}
#: attempts of one operation that keeps meeting ConflictError
ATTEMPTS = 8
POSTGRES_URL = "KVZARR_BENCH_POSTGRES_URL"
#: "directory-nolock" is the directory store with key_locks=False: it loses updates, which
#: shows the checker catching them
STORES = ("lmdb", "sqlite", "postgresql", "directory", "directory-nolock")


# --- opening stores ----------------------------------------------------------------------

def open_store(spec: dict[str, str]) -> Any:
    import kvzarr
    kind, where = spec["kind"], spec["where"]
    if kind == "postgresql":
        from kvzarr.stores.sql import SQLStore
        return SQLStore(where, table=spec["table"])
    if kind in ("directory", "directory-nolock"):
        return kvzarr.FilesystemStore(where, key_locks=kind == "directory")
    return kvzarr.open_store(where)


def store_spec(kind: str, workdir: str) -> dict[str, str] | None:
    if kind == "postgresql":
        url = os.environ.get(POSTGRES_URL)
        if not url:
            return None
        return {"kind": kind, "where": url, "table": f"soak_{os.getpid()}"}
    suffix = {"lmdb": ".lmdb", "sqlite": ".sqlite", "directory": ".zarr",
              "directory-nolock": ".zarr"}[kind]
    return {"kind": kind, "where": os.path.join(workdir, f"soak{suffix}")}


def drop_store(spec: dict[str, str]) -> None:
    if spec["kind"] == "postgresql":
        import psycopg2
        scheme, sep, rest = spec["where"].partition("://")
        conn = psycopg2.connect(f"{scheme.split('+')[0]}{sep}{rest}")  # a libpq URL
        conn.autocommit = True
        try:
            cur = conn.cursor()
            for name in (spec["table"], f"{spec['table']}_version",
                         f"{spec['table']}_info", f"{spec['table']}_segments"):
                cur.execute(f'DROP TABLE IF EXISTS "{name}"')
        finally:
            conn.close()
        return
    where = spec["where"]
    if os.path.isdir(where):
        shutil.rmtree(where, ignore_errors=True)
    elif os.path.exists(where):
        os.unlink(where)
    for extra in ("-lock", "-wal", "-shm"):
        if os.path.exists(where + extra):
            os.unlink(where + extra)


def setup(spec: dict[str, str], procs: int) -> None:
    import kvzarr
    store = open_store(spec)
    root = kvzarr.open_group(store, mode="w")
    n = procs * PER_WRITER
    root.create_array("shared", shape=(n,), chunks=(32,), dtype="int64", fill_value=0)
    root.create_array("sharded", shape=(n,), shards=(64,), chunks=(16,), dtype="int64",
                      fill_value=0)
    root.create_array("tiles", shape=(procs * TILE_ROWS, TILE_COLS),
                      chunks=(2 * TILE_ROWS, TILE_COLS // 2), dtype="int64", fill_value=0)
    root.create_array("whole", shape=(procs * 32,), chunks=(32,), dtype="int64",
                      fill_value=0)
    root.create_group("attrs")
    nodes = root.create_group("nodes")
    priv = root.create_group("priv")
    for p in range(procs):
        nodes.create_group(f"p{p}")
        priv.create_array(f"p{p}", shape=(16,), chunks=(8,), dtype="int64", fill_value=0)
    store.close()


# --- a writer ----------------------------------------------------------------------------

class Writer:
    """One writer process's work and its record of what it committed."""

    def __init__(self, spec: dict[str, str], p: int, procs: int, seed: int) -> None:
        import kvzarr
        self.kvzarr = kvzarr
        self.store = open_store(spec)
        self.root = kvzarr.open_group(self.store, mode="r+")
        self.p, self.procs = p, procs
        self.rng = random.Random(seed * 1000 + p)
        self.seq = 0
        self.stats: Counter[str] = Counter()
        #: kvzarr errors other than conflicts (each one a defect the run reports)
        self.errors: list[str] = []
        self.transactional = self.store.capabilities.transactional
        self.arrays = {name: self.root[name] for name in ("shared", "sharded", "tiles",
                                                             "whole")}
        self.priv = self.root[f"priv/p{p}"]
        self.attrs_group = self.root["attrs"]
        self.nodes = self.root[f"nodes/p{p}"]
        n = procs * PER_WRITER
        self.mine = np.arange(p, n, procs)
        #: what this writer committed; None marks a value a failed write left unknown
        self.elements: dict[str, dict[int, int | None]] = {"shared": {}, "sharded": {}}
        self.tile: int | None = 0
        self.whole: int | None = 0
        self.attr: int | None = None
        self.priv_data: np.ndarray | None = np.zeros(16, dtype="int64")
        self.live: dict[str, int] = {}        # node name -> the k it carries
        self.gone: set[str] = set()
        self.next_node = 0

    def value(self) -> int:
        self.seq += 1
        return (self.p + 1) * SEQ_BASE + self.seq

    def attempt(self, op: str, fn: Any) -> bool:
        """Run ``fn`` until it does not raise ConflictError (ATTEMPTS times); True if it
        succeeded. Any other kvzarr error is an error of the run (reported)."""
        from kvzarr.errors import ConflictError, KvzarrError
        for n in range(ATTEMPTS):
            try:
                fn()
                self.stats[f"op:{op}"] += 1
                return True
            except ConflictError:
                self.stats["conflicts"] += 1
                if n + 1 < ATTEMPTS:
                    self.stats["retries"] += 1
                    time.sleep(self.rng.uniform(0, 0.01 * 2 ** n))
            except KvzarrError as e:
                self.errors.append(f"{op}: {type(e).__name__}: {e}")
                return False
        self.stats["failed"] += 1
        return False

    # -- operations --------------------------------------------------------------------

    def op_element(self, name: str = "shared") -> None:
        i = int(self.rng.choice(self.mine))
        v = self.value()
        a = self.arrays[name]

        def write() -> None:
            a[i] = v
        self.elements[name][i] = v if self.attempt(name, write) else None

    def op_shard_element(self) -> None:
        self.op_element("sharded")

    def op_tile(self) -> None:
        v = self.value()
        rows = slice(self.p * TILE_ROWS, (self.p + 1) * TILE_ROWS)

        def write() -> None:
            self.arrays["tiles"][rows, :] = v
        self.tile = v if self.attempt("tile", write) else None

    def op_whole_chunk(self) -> None:
        v = self.value()

        def write() -> None:
            self.arrays["whole"][self.p * 32:(self.p + 1) * 32] = v
        self.whole = v if self.attempt("whole_chunk", write) else None

    def op_read(self) -> None:
        name = self.rng.choice(["shared", "sharded", "tiles", "whole"])
        self.attempt("read", lambda: self.arrays[name][...])

    def op_attrs(self) -> None:
        v = self.value()

        def write() -> None:
            self.attrs_group.attrs[f"p{self.p}"] = v
        self.attr = v if self.attempt("attrs", write) else None

    def op_resize(self) -> None:
        if self.priv_data is None:
            return
        n = self.rng.randint(4, 40)
        old = self.priv_data
        fill = self.value()

        def write() -> None:
            self.priv.resize(n)
            self.priv[:] = np.arange(n, dtype="int64") + fill
        if self.attempt("resize", write):
            self.priv_data = np.arange(n, dtype="int64") + fill
        else:
            self.priv_data = None
        del old

    def op_create(self) -> None:
        k = self.next_node
        self.next_node += 1
        name = f"n{k}"
        kind = self.rng.choice(["group", "array"])

        def write() -> None:
            # overwrite: a retry after a conflict in the write of the data starts over
            if kind == "group":
                self.nodes.create_group(name, attributes={"k": k}, overwrite=True)
            else:
                self.nodes.create_array(name, data=np.full(8, k, dtype="int32"),
                                        chunks=(4,), fill_value=0, attributes={"k": k},
                                        overwrite=True)
        if self.attempt("create", write):
            self.live[name] = k      # (after a failure the node's state is unknown: unchecked)

    def op_delete(self) -> None:
        if not self.live:
            return
        name = self.rng.choice(sorted(self.live))

        def write() -> None:
            del self.nodes[name]
        if self.attempt("delete", write):
            del self.live[name]
            self.gone.add(name)

    def op_list(self) -> None:
        self.attempt("list", lambda: sorted(self.nodes.keys()))

    # -- the self-check: everything this writer owns reads back as committed -------------

    def check(self) -> list[str]:
        bad: list[str] = []
        for name, record in self.elements.items():
            got = self.arrays[name][...]
            for i, v in record.items():
                if v is not None and int(got[i]) != v:
                    bad.append(f"{name}[{i}] = {int(got[i])}, committed {v}")
        rows = slice(self.p * TILE_ROWS, (self.p + 1) * TILE_ROWS)
        if self.tile is not None:
            tile = self.arrays["tiles"][rows, :]
            wrong = int((tile != self.tile).sum())
            if wrong:
                bad.append(f"tile: {wrong} elements differ from committed {self.tile}")
        if self.whole is not None:
            chunk = self.arrays["whole"][self.p * 32:(self.p + 1) * 32]
            if int((chunk != self.whole).sum()):
                bad.append(f"whole chunk differs from committed {self.whole}")
        if self.attr is not None:
            got_attr = self.kvzarr.open_group(self.store, path="attrs", mode="r"
                                              ).attrs.get(f"p{self.p}")
            if got_attr != self.attr:
                bad.append(f"attrs p{self.p} = {got_attr}, committed {self.attr}")
        if self.priv_data is not None:
            priv = self.kvzarr.open_array(self.store, path=f"priv/p{self.p}", mode="r")
            if priv.shape != self.priv_data.shape or not np.array_equal(priv[...],
                                                                        self.priv_data):
                bad.append(f"priv/p{self.p}: shape {priv.shape}, not as committed")
        bad += check_nodes(self.kvzarr, self.store, self.p, self.live, self.gone)
        return bad

    def run(self, deadline: float, check_every: float) -> dict[str, Any]:
        ops = list(MIX)
        weights = [MIX[o] for o in ops]
        next_check = time.monotonic() + check_every
        lost: list[str] = []
        while time.monotonic() < deadline:
            getattr(self, f"op_{self.rng.choices(ops, weights)[0]}")()
            if time.monotonic() >= next_check:
                found = self.check()
                self.stats["self_checks"] += 1
                lost += found
                next_check = time.monotonic() + check_every
        return {"p": self.p, "stats": dict(self.stats), "lost": lost,
                "record": self.record(), "op_errors": self.errors}

    def record(self) -> dict[str, Any]:
        return {"elements": {n: {str(i): v for i, v in r.items()}
                             for n, r in self.elements.items()},
                "tile": self.tile, "whole": self.whole, "attr": self.attr,
                "priv": None if self.priv_data is None else self.priv_data.tolist(),
                "live": self.live, "gone": sorted(self.gone)}


def check_nodes(kvzarr: Any, store: Any, p: int, live: dict[str, int],
                gone: set[str]) -> list[str]:
    """Every node writer ``p`` created and kept opens with its attributes (an array with
    its data); every node it deleted is gone."""
    from kvzarr.errors import NodeNotFoundError
    bad = []
    for name, k in live.items():
        try:
            node = kvzarr.open(store, path=f"nodes/p{p}/{name}", mode="r")
        except NodeNotFoundError:
            bad.append(f"nodes/p{p}/{name} was created and is missing")
            continue
        if node.attrs.get("k") != k:
            bad.append(f"nodes/p{p}/{name} has attributes {node.attrs.asdict()}")
        elif hasattr(node, "shape") and not np.array_equal(node[...], np.full(8, k)):
            bad.append(f"nodes/p{p}/{name} holds other data")
    for name in gone:
        if name in live:
            continue
        try:
            kvzarr.open(store, path=f"nodes/p{p}/{name}", mode="r")
            bad.append(f"nodes/p{p}/{name} was deleted and is back")
        except NodeNotFoundError:
            pass
    return bad


def _writer_main(spec: dict[str, str], p: int, procs: int, seed: int, start: Any,
                 seconds: float, check_every: float, results: Any) -> None:
    try:
        writer = Writer(spec, p, procs, seed)
        start.wait(120)
        out = writer.run(time.monotonic() + seconds, check_every)
        out["lost"] += writer.check()          # the last self-check, after the last write
        writer.store.close()
        results.put(out)
    except BaseException:
        results.put({"p": p, "error": traceback.format_exc()})


# --- the checker process -----------------------------------------------------------------

def scan(kvzarr: Any, store: Any, procs: int, transactional: bool) -> Counter[str]:
    """One pass over the shared arrays and the hierarchy (see the module docstring)."""
    from kvzarr.errors import NodeNotFoundError
    found: Counter[str] = Counter()
    root = kvzarr.open_group(store, mode="r")
    owners = np.arange(procs * PER_WRITER) % procs
    for name in ("shared", "sharded"):
        got = root[name][...]
        written = got != 0
        found["foreign"] += int(((got // SEQ_BASE - 1 != owners) & written).sum())
    tiles = root["tiles"][...]
    for p in range(procs):
        tile = tiles[p * TILE_ROWS:(p + 1) * TILE_ROWS]
        parts = [tile] if transactional else [tile[:, :TILE_COLS // 2],
                                              tile[:, TILE_COLS // 2:]]
        for part in parts:
            if len(np.unique(part)) != 1:
                found["torn"] += 1
        values = tile[tile != 0]
        found["foreign"] += int((values // SEQ_BASE - 1 != p).sum())
    whole = root["whole"][...].reshape(procs, 32)
    for p in range(procs):
        if len(np.unique(whole[p])) != 1:
            found["torn"] += 1
    for p in range(procs):
        group = kvzarr.open_group(store, path=f"nodes/p{p}", mode="r")
        for name in list(group.keys()):
            try:
                node = kvzarr.open(store, path=f"nodes/p{p}/{name}", mode="r")
                if "k" not in node.attrs:
                    found["unreadable_nodes"] += 1
            except NodeNotFoundError:
                pass                            # its owner deleted it since the listing
    found["scans"] += 1
    return found


def _checker_main(spec: dict[str, str], procs: int, start: Any, seconds: float,
                  check_every: float, results: Any) -> None:
    try:
        import kvzarr
        from kvzarr.errors import ConflictError
        store = open_store(spec)
        transactional = store.capabilities.transactional
        start.wait(120)
        deadline = time.monotonic() + seconds
        total: Counter[str] = Counter()
        while time.monotonic() < deadline:
            try:
                total += scan(kvzarr, store, procs, transactional)
            except ConflictError:
                total["conflicts"] += 1
            time.sleep(min(check_every, max(0.0, deadline - time.monotonic())))
        store.close()
        results.put({"checker": dict(total)})
    except BaseException:
        results.put({"checker": {}, "error": traceback.format_exc()})


# --- the final check ---------------------------------------------------------------------

def final_check(spec: dict[str, str], procs: int, outs: list[dict[str, Any]]) -> list[str]:
    """Compare the store with what every writer recorded as committed."""
    import kvzarr
    store = open_store(spec)
    root = kvzarr.open_group(store, mode="r")
    bad: list[str] = []
    arrays = {n: root[n][...] for n in ("shared", "sharded", "tiles", "whole")}
    for out in outs:
        p, rec = out["p"], out["record"]
        for name, record in rec["elements"].items():
            for i, v in record.items():
                if v is not None and int(arrays[name][int(i)]) != v:
                    bad.append(f"{name}[{i}] = {int(arrays[name][int(i)])}, committed {v}")
        tile = arrays["tiles"][p * TILE_ROWS:(p + 1) * TILE_ROWS]
        if rec["tile"] is not None and int((tile != rec["tile"]).sum()):
            bad.append(f"tile of writer {p} differs from committed {rec['tile']}")
        if rec["whole"] is not None and int((arrays["whole"][p * 32:(p + 1) * 32]
                                             != rec["whole"]).sum()):
            bad.append(f"whole chunk of writer {p} differs from committed {rec['whole']}")
        if rec["attr"] is not None and root["attrs"].attrs.get(f"p{p}") != rec["attr"]:
            bad.append(f"attribute p{p} lost: committed {rec['attr']}")
        if rec["priv"] is not None and root[f"priv/p{p}"][...].tolist() != rec["priv"]:
            bad.append(f"priv/p{p} differs from what was committed")
        bad += check_nodes(kvzarr, store, p, rec["live"], set(rec["gone"]))
    store.close()
    return bad


# --- one store ---------------------------------------------------------------------------

def soak_store(kind: str, procs: int, seconds: float, check_every: float, seed: int,
               workdir: str) -> dict[str, Any]:
    spec = store_spec(kind, workdir)
    if spec is None:
        return {"store": kind, "skipped": f"set {POSTGRES_URL} to a PostgreSQL URL"}
    drop_store(spec)
    setup(spec, procs)
    ctx = mp.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_writer_main, args=(spec, p, procs, seed, start, seconds,
                                                      check_every, results))
               for p in range(procs)]
    workers.append(ctx.Process(target=_checker_main, args=(spec, procs, start, seconds,
                                                           check_every, results)))
    for w in workers:
        w.start()
    time.sleep(0.5)              # let them import and open: the clock starts together
    start.set()
    t0 = time.monotonic()
    outs, checker, errors = [], {}, []
    for _ in workers:
        out = results.get(timeout=seconds + 600)
        if "error" in out:
            errors.append(out["error"])
        if "checker" in out:
            checker = out["checker"]
        elif "record" in out:
            outs.append(out)
    elapsed = time.monotonic() - t0
    for w in workers:
        w.join(60)
    stats: Counter[str] = Counter()
    lost = []
    for out in outs:
        stats.update(out["stats"])
        lost += out["lost"]
        errors += out["op_errors"]
    final = final_check(spec, procs, outs) if len(outs) == procs else []
    drop_store(spec)
    ops = sum(v for k, v in stats.items() if k.startswith("op:"))
    return {"store": kind, "processes": procs, "seconds": round(elapsed, 1),
            "operations": ops, "ops_per_second": round(ops / elapsed, 1),
            "by_operation": {k[3:]: v for k, v in sorted(stats.items())
                             if k.startswith("op:")},
            "retries": stats["retries"], "conflicts": stats["conflicts"],
            "failed_operations": stats["failed"], "self_checks": stats["self_checks"],
            "lost_updates": len(lost) + len(final),
            "torn_reads": checker.get("torn", 0), "foreign_values": checker.get("foreign", 0),
            "unreadable_nodes": checker.get("unreadable_nodes", 0),
            "checker_scans": checker.get("scans", 0),
            "problems": (lost + final)[:20], "errors": errors}


def broken(result: dict[str, Any]) -> bool:
    """Whether an invariant broke (or a process died) in ``result``."""
    if "skipped" in result:
        return False
    return bool(result["lost_updates"] or result["torn_reads"] or result["foreign_values"]
                or result["unreadable_nodes"] or result["errors"]
                or result["failed_operations"] or not result["checker_scans"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", default="lmdb,sqlite,postgresql",
                    help=f"comma-separated, of {', '.join(STORES)}")
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=10.0, help="per store")
    ap.add_argument("--check-every", type=float, default=5.0,
                    help="seconds between self-checks and checker scans")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="where the store files go (a temp dir)")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args(argv)
    kinds = [k.strip() for k in args.stores.split(",") if k.strip()]
    for k in kinds:
        if k not in STORES:
            ap.error(f"unknown store {k!r}; choose from {', '.join(STORES)}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="kvzarr-soak-")
    os.makedirs(workdir, exist_ok=True)
    results = []
    for kind in kinds:
        r = soak_store(kind, args.processes, args.minutes * 60, args.check_every, args.seed,
                       workdir)
        results.append(r)
        print(format_result(r), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if any(broken(r) for r in results) else 0


def format_result(r: dict[str, Any]) -> str:
    if "skipped" in r:
        return f"{r['store']}: skipped ({r['skipped']})"
    lines = [f"{r['store']}: {r['processes']} processes x {r['seconds']} s: "
             f"{r['operations']:,} operations ({r['ops_per_second']:,}/s), "
             f"{r['retries']} retries, {r['conflicts']} conflicts, "
             f"{r['failed_operations']} failed, lost updates {r['lost_updates']}, "
             f"torn reads {r['torn_reads']}, foreign values {r['foreign_values']}, "
             f"unreadable nodes {r['unreadable_nodes']} "
             f"({r['self_checks']} self-checks, {r['checker_scans']} checker scans)",
             "  " + ", ".join(f"{k} {v:,}" for k, v in r["by_operation"].items())]
    lines += [f"  PROBLEM: {p}" for p in r["problems"]]
    lines += [f"  ERROR: {e.strip().splitlines()[-1]}" for e in r["errors"]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
