"""The systems the suite compares, by name. Standard library only: the driver reads this
table without importing numpy or any peer.

Each entry names the adapter class that drives it (one module per family), the virtual
environment it runs in (``peers3``: kvzarr, zarr-python 3, TensorStore, the raw engines;
``zarr2``: zarr-python 2, which cannot share an interpreter with zarr-python 3), the raw
engine that does the same byte work (its "raw limit"), and what it promises on disk, so
the report can say what each number was bought with.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SystemInfo:
    name: str
    family: str          # "kvzarr", "peer" or "raw"
    module: str          # adapter module under benchmarks.systems
    cls: str             # adapter class in it
    env: str             # "peers3" or "zarr2"
    limit: str           # the raw system doing the same byte work
    label: str           # what it is, for the report
    durability: str      # what a finished write promises, for the report
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: an option variant, run only when named (not part of "all" or "kvzarr")
    variant: bool = False
    #: the storage engine underneath ("files": one file per key, "lmdb", "sqlite",
    #: "zip", "memory", "postgresql", "ocdbt": TensorStore's own log-structured
    #: database in files), for the same-engine rule (bars.py); "" leaves a system out
    #: of it (a transformer stack or zarr-python on kvzarr, which have bars of their own)
    engine: str = ""
    #: whether a finished write has been fsynced (None: nothing to sync, in memory or
    #: read-only), so that the rule compares equal durabilities only
    synced: bool | None = None
    #: when a finished write becomes part of the stored data, for other readers and
    #: across a crash of the writer: "write" (when it returns), "close" (only when the
    #: store is closed or flushed: zip writers that write the directory then), None
    #: (read-only or in memory: counts as both); the rule compares equals only
    commits: str | None = "write"


def _k(store: str, label: str, limit: str, durability: str, suffix: str = "",
       options: dict[str, Any] | None = None,
       transformers: list[Any] | None = None, variant: bool | None = None,
       zarr_format: int = 3) -> SystemInfo:
    """A kvzarr system; ``transformers`` (as ``kvzarr.open_store`` takes them) stack
    storage transformers on the store. A system with a suffix is a variant (run only
    when named) unless ``variant`` says otherwise. A plain store (no transformers, Zarr
    v3) is in the same-engine rule, synced or not as its options say."""
    options = options or {}
    plain = not transformers and zarr_format == 3
    return SystemInfo(f"kvzarr-{store}{suffix}", "kvzarr", "kvzarr_sys", "KvzarrSystem",
                      "peers3", limit, label, durability,
                      {"store": store, "options": options,
                       "transformers": transformers or [], "zarr_format": zarr_format},
                      variant=bool(suffix) if variant is None else variant,
                      engine=STORE_ENGINES[store] if plain else "",
                      synced=_synced(store, options),
                      commits=None if store == "memory" else
                      "close" if options.get("directory") == "close" else "write")


#: the engine under each kvzarr store
STORE_ENGINES = {"fs": "files", "lmdb": "lmdb", "sql": "sqlite", "zip": "zip",
                 "memory": "memory", "pg": "postgresql"}


def _synced(store: str, options: dict[str, Any]) -> bool | None:
    """Whether the store's commit is fsynced with these options (its defaults: the
    directory store does not sync, the transactional stores do)."""
    if store == "memory":
        return None
    if store == "fs":
        return bool(options.get("fsync", False))
    if store == "lmdb":
        return options.get("durability", "full") != "none"
    if store == "sql":       # synchronous=NORMAL in WAL mode syncs at checkpoints only
        return options.get("synchronous", "FULL") == "FULL"
    if store == "zip":
        return bool(options.get("fsync", True))
    return True              # PostgreSQL: the server's synchronous_commit


#: the cache the ``-cache`` variants stack on their store: room for W2's and W3's data
CACHE = {"name": "cache", "max_bytes": 256 << 20}


SYSTEMS: dict[str, SystemInfo] = {s.name: s for s in [
    _k("fs", "kvzarr FilesystemStore", "raw-files", "atomic per key, no fsync"),
    _k("lmdb", "kvzarr LMDBStore", "raw-lmdb", "transactional, fsync per commit"),
    _k("sql", "kvzarr SQLStore (SQLite)", "raw-sqlite",
       "transactional, WAL, synchronous=FULL"),
    _k("zip", "kvzarr ZipStore", "raw-files",
       "transactional, commit appended and fsynced (compaction rewrites)"),
    _k("memory", "kvzarr MemoryStore", "raw-memory", "in memory"),
    # the same stores with the durability of the peers they are compared with, to tell
    # the price of syncing apart from the price of the software
    _k("lmdb", "kvzarr LMDBStore, durability='none'", "raw-lmdb",
       "never fsynced, as zarr-python 2's LMDBStore", "-nosync", {"durability": "none"}),
    # LMDB's write map with sync (by default it is on only without: stores/lmdb.md,
    # "Write map"): faster in large transactions, slower in small ones (group "writemap")
    _k("lmdb", "kvzarr LMDBStore, write_map=True", "raw-lmdb",
       "transactional, fsync per commit, written through the map", "-writemap",
       {"write_map": True}),
    _k("sql", "kvzarr SQLStore, synchronous='NORMAL'", "raw-sqlite",
       "WAL synced at checkpoints only", "-normal", {"synchronous": "NORMAL"}),
    # the documented bulk-loading option: the rollback journal writes new pages once
    # (durable as the default; a commit and readers wait for each other)
    _k("sql", "kvzarr SQLStore, journal_mode='DELETE'", "raw-sqlite",
       "transactional, rollback journal, synchronous=FULL", "-delete",
       {"journal_mode": "DELETE"}),
    _k("zip", "kvzarr ZipStore, fsync=False", "raw-files", "commit appended, no fsync",
       "-nofsync", {"fsync": False}),
    # the zip store writing its directory at close, as the zip peers do (stores/zip.md,
    # "Commits held until a directory"): the equal-durability pair of zarr2-zip and
    # zarr3-zip
    _k("zip", "kvzarr ZipStore, fsync=False, directory='close'", "raw-files",
       "members appended per commit, directory at close, no fsync", "-close",
       {"fsync": False, "directory": "close"}),
    # the directory store syncing each value and its directory, as TensorStore's file
    # kvstore does by default (ts-file): the equal-durability pair of that peer
    _k("fs", "kvzarr FilesystemStore, fsync=True", "raw-files",
       "atomic per key, fsync per key (file and directory)", "-fsync", {"fsync": True}),
    # the directory store without its key locks: what the locks cost (W2, W3, W6)
    _k("fs", "kvzarr FilesystemStore, key_locks=False", "raw-files",
       "atomic per key, no fsync, no key lock", "-nolock", {"key_locks": False}),
    # the transactional stores under a Cache (256 MiB): its warm reads against an
    # in-memory store's (the bars), its cold ones against the store's own
    _k("lmdb", "kvzarr LMDBStore under a Cache", "raw-lmdb",
       "transactional, fsync per commit", "-cache", transformers=[CACHE]),
    _k("sql", "kvzarr SQLStore (SQLite) under a Cache", "raw-sqlite",
       "transactional, WAL, synchronous=FULL", "-cache", transformers=[CACHE]),
    # PostgreSQL, when KVZARR_BENCH_POSTGRES_URL names a server (else n/a): with and
    # without the cache, and the raw round trips (psycopg2) as the limit
    _k("pg", "kvzarr SQLStore (PostgreSQL)", "raw-postgresql",
       "transactional, the server's synchronous_commit", variant=True),
    _k("pg", "kvzarr SQLStore (PostgreSQL) under a Cache", "raw-postgresql",
       "transactional, the server's synchronous_commit", "-cache", transformers=[CACHE]),
    # the checksum transformer (CRC-32C per block, verified on every read) on the stores
    # with transactions, against the same store without it in the same run
    _k("lmdb", "kvzarr LMDBStore + checksum", "raw-lmdb",
       "transactional, fsync per commit; records in the value's transaction", "-checksum",
       transformers=["checksum"]),
    _k("sql", "kvzarr SQLStore (SQLite) + checksum", "raw-sqlite",
       "transactional, WAL, synchronous=FULL; records in the value's transaction",
       "-checksum", transformers=["checksum"]),
    # the same with other block sizes, to choose the default by measurement
    # (--systems checksum-blocks; see kvzarr/transformers/checksum/__init__.py)
    *[_k(store, f"kvzarr {what} + checksum, {size >> 10} KiB blocks", limit, durability,
         f"-checksum-{size >> 10}k", transformers=[{"name": "checksum", "block_size": size}])
      for size in (4 << 10, 64 << 10, 256 << 10, 1 << 20)
      for store, what, limit, durability in (
          ("lmdb", "LMDBStore", "raw-lmdb", "transactional, fsync per commit"),
          ("sql", "SQLStore (SQLite)", "raw-sqlite", "transactional, WAL, synchronous=FULL"))],
    # the append-only shard writer (AppendShards, max_garbage 0.5) on the stores that
    # append natively: partial shard writes append instead of rewriting the shard
    _k("fs", "kvzarr FilesystemStore + AppendShards", "raw-files",
       "atomic per key (appends too), no fsync", "-append",
       transformers=["append_shards"]),
    _k("sql", "kvzarr SQLStore (SQLite) + AppendShards", "raw-sqlite",
       "transactional, WAL, synchronous=FULL", "-append", transformers=["append_shards"]),
    # Zarr v2 arrays and groups (kvzarr create_array(zarr_format=2): .zarray documents,
    # "." chunk keys, numcodecs compressors) on the stores zarr-python 2 had, against
    # zarr-python 2's LMDBStore / SQLiteStore and kvzarr's v3 arrays (--systems v2)
    _k("lmdb", "kvzarr LMDBStore, Zarr v2 arrays", "raw-lmdb",
       "transactional, fsync per commit", "-v2", zarr_format=2),
    _k("sql", "kvzarr SQLStore (SQLite), Zarr v2 arrays", "raw-sqlite",
       "transactional, WAL, synchronous=FULL", "-v2", zarr_format=2),
    SystemInfo("zarr3-local", "peer", "zarr3_sys", "Zarr3System", "peers3", "raw-files",
               "zarr-python 3 LocalStore", "atomic per key, no fsync", {"store": "local"},
               engine="files", synced=False),
    # zarr-python 3 on kvzarr's stores through kvzarr.ZarrStore (its adapter), against
    # zarr-python on its own LocalStore (--systems zarrstore)
    SystemInfo("zarr3-kvzarr-lmdb", "kvzarr", "zarr3_sys", "Zarr3System", "peers3",
               "raw-lmdb", "zarr-python 3 on kvzarr.ZarrStore(LMDBStore)",
               "transactional, fsync per commit (zarr's concurrent writes share one)",
               {"store": "kvzarr", "suffix": ".lmdb"}, variant=True),
    SystemInfo("zarr3-kvzarr-sql", "kvzarr", "zarr3_sys", "Zarr3System", "peers3",
               "raw-sqlite", "zarr-python 3 on kvzarr.ZarrStore(SQLStore on SQLite)",
               "transactional, WAL, synchronous=FULL (zarr's concurrent writes share "
               "one commit)", {"store": "kvzarr", "suffix": ".sqlite"}, variant=True),
    # the same at LocalStore's durability (it never syncs): LMDB never synced, SQLite
    # syncing its log at checkpoints only (the nearest SQLite comes without risking the
    # file), as the kvzarr-lmdb-nosync and kvzarr-sql-normal variants
    SystemInfo("zarr3-kvzarr-lmdb-nosync", "kvzarr", "zarr3_sys", "Zarr3System", "peers3",
               "raw-lmdb", "zarr-python 3 on kvzarr.ZarrStore(LMDBStore, durability='none')",
               "transactional, never fsynced", {"store": "kvzarr", "suffix": ".lmdb",
                                                 "options": {"durability": "none"}},
               variant=True),
    SystemInfo("zarr3-kvzarr-sql-normal", "kvzarr", "zarr3_sys", "Zarr3System", "peers3",
               "raw-sqlite",
               "zarr-python 3 on kvzarr.ZarrStore(SQLStore on SQLite, synchronous='NORMAL')",
               "transactional, WAL synced at checkpoints only",
               {"store": "kvzarr", "suffix": ".sqlite", "options": {"synchronous": "NORMAL"}},
               variant=True),
    # the same with kvzarr's calls always on zarr's thread pool (-threads) or always
    # inline on its event loop (-inline) instead of by value size (ZarrStore.offload_bytes)
    SystemInfo("zarr3-kvzarr-lmdb-threads", "kvzarr", "zarr3_sys", "Zarr3System", "peers3",
               "raw-lmdb", "zarr-python 3 on kvzarr.ZarrStore(LMDBStore), calls on threads",
               "transactional, fsync per commit (zarr's concurrent writes share one)",
               {"store": "kvzarr", "suffix": ".lmdb", "offload_bytes": 0}, variant=True),
    SystemInfo("zarr3-kvzarr-lmdb-inline", "kvzarr", "zarr3_sys", "Zarr3System", "peers3",
               "raw-lmdb", "zarr-python 3 on kvzarr.ZarrStore(LMDBStore), calls inline",
               "transactional, fsync per commit (zarr's concurrent writes share one)",
               {"store": "kvzarr", "suffix": ".lmdb", "offload_bytes": None}, variant=True),
    SystemInfo("zarr3-kvzarr-sql-threads", "kvzarr", "zarr3_sys", "Zarr3System", "peers3",
               "raw-sqlite", "zarr-python 3 on kvzarr.ZarrStore(SQLite), calls on threads",
               "transactional, WAL, synchronous=FULL (zarr's concurrent writes share "
               "one commit)", {"store": "kvzarr", "suffix": ".sqlite", "offload_bytes": 0},
               variant=True),
    SystemInfo("zarr3-kvzarr-sql-inline", "kvzarr", "zarr3_sys", "Zarr3System", "peers3",
               "raw-sqlite", "zarr-python 3 on kvzarr.ZarrStore(SQLite), calls inline",
               "transactional, WAL, synchronous=FULL (zarr's concurrent writes share "
               "one commit)", {"store": "kvzarr", "suffix": ".sqlite", "offload_bytes": None},
               variant=True),
    SystemInfo("zarr3-zip", "peer", "zarr3_sys", "Zarr3System", "peers3", "raw-files",
               "zarr-python 3 ZipStore",
               "no fsync; directory at close; overwrites append duplicates",
               {"store": "zip"},
               engine="zip", synced=False, commits="close"),
    SystemInfo("zarr3-memory", "peer", "zarr3_sys", "Zarr3System", "peers3", "raw-memory",
               "zarr-python 3 MemoryStore", "in memory", {"store": "memory"},
               engine="memory", synced=None, commits=None),
    SystemInfo("ts-file", "peer", "tensorstore_sys", "TensorStoreSystem", "peers3",
               "raw-files", "TensorStore zarr3 on file", "atomic per key, fsync per key",
               {"kvstore": "file"},
               engine="files", synced=True),
    # TensorStore's file kvstore with its per-file sync turned off (context resource
    # file_io_sync=false): the equal-durability pair of kvzarr-fs (no fsync)
    SystemInfo("ts-file-nosync", "peer", "tensorstore_sys", "TensorStoreSystem", "peers3",
               "raw-files", "TensorStore zarr3 on file, file_io_sync=false",
               "atomic per key, no fsync", {"kvstore": "file",
                                            "context": {"file_io_sync": False}},
               variant=True,
               engine="files", synced=False),
    SystemInfo("ts-ocdbt", "peer", "tensorstore_sys", "TensorStoreSystem", "peers3",
               "raw-files", "TensorStore zarr3 on OCDBT", "copy-on-write B-tree, fsync",
               {"kvstore": "ocdbt"},
               engine="ocdbt", synced=True),
    SystemInfo("ts-zip", "peer", "tensorstore_sys", "TensorStoreSystem", "peers3",
               "raw-files", "TensorStore zarr3 on zip (read-only)", "read-only",
               {"kvstore": "zip"},
               engine="zip", synced=None, commits=None),
    SystemInfo("zarr2-lmdb", "peer", "zarr2_sys", "Zarr2System", "zarr2", "raw-lmdb",
               "zarr-python 2 LMDBStore",
               "never fsynced: sync off, and its flush()/close() skip the sync",
               {"store": "lmdb"},
               engine="lmdb", synced=False),
    SystemInfo("zarr2-sqlite", "peer", "zarr2_sys", "Zarr2System", "zarr2", "raw-sqlite",
               "zarr-python 2 SQLiteStore", "autocommit per key (rollback journal)",
               {"store": "sqlite"},
               engine="sqlite", synced=True),
    SystemInfo("zarr2-directory", "peer", "zarr2_sys", "Zarr2System", "zarr2", "raw-files",
               "zarr-python 2 DirectoryStore", "atomic per key, no fsync",
               {"store": "directory"},
               engine="files", synced=False),
    SystemInfo("zarr2-zip", "peer", "zarr2_sys", "Zarr2System", "zarr2", "raw-files",
               "zarr-python 2 ZipStore",
               "no fsync; directory at close; overwrites append duplicates",
               {"store": "zip"},
               engine="zip", synced=False, commits="close"),
    SystemInfo("raw-memory", "raw", "raw_sys", "RawSystem", "peers3", "raw-memory",
               "memcpy into a dict (+ numcodecs encode/decode)", "in memory",
               {"engine": "memory"},
               engine="memory", synced=None, commits=None),
    SystemInfo("raw-files", "raw", "raw_sys", "RawSystem", "peers3", "raw-files",
               "one plain file per chunk (+ numcodecs)", "no fsync", {"engine": "files"},
               engine="files", synced=False),
    SystemInfo("raw-lmdb", "raw", "raw_sys", "RawSystem", "peers3", "raw-lmdb",
               "py-lmdb puts/gets (+ numcodecs)", "fsync per commit", {"engine": "lmdb"},
               engine="lmdb", synced=True),
    SystemInfo("raw-sqlite", "raw", "raw_sys", "RawSystem", "peers3", "raw-sqlite",
               "sqlite3 inserts/selects (+ numcodecs)", "WAL, synchronous=FULL",
               {"engine": "sqlite"},
               engine="sqlite", synced=True),
    SystemInfo("raw-postgresql", "raw", "raw_sys", "RawSystem", "peers3", "raw-postgresql",
               "psycopg2 inserts/selects, one round trip each (+ numcodecs)",
               "the server's synchronous_commit", {"engine": "postgresql"}, variant=True,
               engine="postgresql", synced=True),
]}

#: names accepted by --systems besides single system names
GROUPS = {
    "all": [n for n, s in SYSTEMS.items() if not s.variant],
    "kvzarr": [n for n, s in SYSTEMS.items() if s.family == "kvzarr" and not s.variant],
    "variants": [n for n, s in SYSTEMS.items() if s.variant],
    "peers": [n for n, s in SYSTEMS.items() if s.family == "peer"],
    "raw": [n for n, s in SYSTEMS.items() if s.family == "raw"],
    "zarr3": [n for n in SYSTEMS if n.startswith("zarr3-")],
    "zarr2": [n for n in SYSTEMS if n.startswith("zarr2-")],
    "tensorstore": [n for n in SYSTEMS if n.startswith("ts-")],
    # the cache's bars: cached systems against an in-memory store, PostgreSQL's limit
    "cache": ["kvzarr-memory", "kvzarr-lmdb", "kvzarr-sql", "kvzarr-lmdb-cache",
              "kvzarr-sql-cache", "kvzarr-pg", "kvzarr-pg-cache", "raw-postgresql"],
    # every bar of the storage transformers (cache, checksum, append_shards) in one run
    "transformers": ["kvzarr-memory", "kvzarr-fs", "kvzarr-lmdb", "kvzarr-sql",
                     "kvzarr-lmdb-cache", "kvzarr-sql-cache", "kvzarr-pg", "kvzarr-pg-cache",
                     "raw-postgresql", "kvzarr-lmdb-checksum", "kvzarr-sql-checksum",
                     "kvzarr-fs-append", "kvzarr-sql-append"],
    # issue 16's same-engine rule (bars.py): every plain kvzarr store at each durability,
    # the peers and the raw engines (PostgreSQL has a group of its own: cache)
    "rule": [n for n, s in SYSTEMS.items() if s.engine and s.engine != "postgresql"
             and n not in ("kvzarr-fs-nolock", "kvzarr-lmdb-writemap")],
    # the durable LMDBStore with and without its write map, on the
    # workloads that tell them apart: --workloads W1,W2,W3,W6
    "writemap": ["kvzarr-lmdb", "kvzarr-lmdb-writemap", "raw-lmdb", "kvzarr-memory"],
    # the directory store's bars (issue 16 item 4) with both durabilities: kvzarr-fs
    # against TensorStore without sync, kvzarr-fs-fsync against TensorStore's default
    "dir": ["kvzarr-fs", "kvzarr-fs-fsync", "ts-file", "ts-file-nosync", "raw-files",
            "zarr2-directory", "zarr3-local"],
    # zarr-python 3 through kvzarr.ZarrStore against zarr-python 3 on LocalStore
    "v2": ["kvzarr-lmdb-v2", "kvzarr-sql-v2", "kvzarr-lmdb", "kvzarr-sql", "zarr2-lmdb",
           "zarr2-sqlite"],
    "zarrstore": ["zarr3-local", "zarr3-kvzarr-lmdb", "zarr3-kvzarr-sql",
                  "zarr3-kvzarr-lmdb-nosync", "zarr3-kvzarr-sql-normal"],
    "zarrstore-threads": ["zarr3-local", "zarr3-kvzarr-lmdb", "zarr3-kvzarr-sql",
                          "zarr3-kvzarr-lmdb-threads", "zarr3-kvzarr-sql-threads",
                          "zarr3-kvzarr-lmdb-inline", "zarr3-kvzarr-sql-inline"],
    "checksum-blocks": ["kvzarr-lmdb", "kvzarr-sql", "kvzarr-lmdb-checksum",
                        "kvzarr-sql-checksum"] + [n for n in SYSTEMS if "-checksum-" in n],
}


def expand(spec: str) -> list[str]:
    """``"kvzarr,zarr3-local"`` -> system names, in table order, without repeats."""
    wanted: list[str] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        names = GROUPS.get(part) or ([part] if part in SYSTEMS else None)
        if names is None:
            raise SystemExit(f"unknown system {part!r}; choose from "
                             f"{sorted(GROUPS) + list(SYSTEMS)}")
        wanted.extend(n for n in names if n not in wanted)
    return [n for n in SYSTEMS if n in wanted]


def make_system(name: str, root: Any) -> Any:
    """An adapter instance for ``name`` keeping its data under ``root`` (imports the
    family's module, so only in a worker)."""
    info = SYSTEMS[name]
    module = importlib.import_module(f"{__name__}.{info.module}")
    return getattr(module, info.cls)(info, root)
