"""Helpers the golden-file writers and the tests share: the manifest, the raw items of a
golden store, the expected values of an entry, comparing values, store digests.

For tests of a v2 reader (the manifest schema is in README.md)::

    from tests.golden.goldenlib import expected_values, load_manifest, same
    for entry in load_manifest()["entries"]:
        ...open V2 / entry["store_file"], read entry["path"], compare with
        same(got, expected_values(entry))

Imports nothing of zarr (the writers run under different zarr-python versions).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import lmdb
import numpy as np

HERE = Path(__file__).resolve().parent
V2 = HERE / "v2"
EXPECTED = V2 / "expected"
MANIFEST = EXPECTED / "manifest.json"
# the fields every manifest entry has (see README.md)
ENTRY_FIELDS = ("store_file", "store_kind", "writer", "path", "dtype", "shape", "chunks",
                "order", "compressor", "filters", "fill_value", "dimension_separator",
                "attributes", "chunks_written", "expected", "zarr3_reads", "zarr3_note")


def load_manifest() -> dict:
    """``v2/expected/manifest.json``: {"schema", "description", "stores", "groups", "entries"}."""
    return json.loads(MANIFEST.read_text())


@functools.cache
def _store_kinds() -> dict[str, str]:
    return {s["store_file"]: s["store_kind"] for s in load_manifest()["stores"]}


@functools.cache
def raw_items(store_file: str) -> dict[str, bytes]:
    """Every key and value of a golden store (``store_file`` relative to ``v2/``), read with
    the plain library of its kind, read-only: nothing is written beside the files (LMDB is
    opened with ``lock=False``, SQLite as immutable)."""
    path = V2 / store_file
    kind = _store_kinds()[store_file]
    if kind == "LMDBStore":
        env = lmdb.open(str(path), readonly=True, lock=False)
        try:
            with env.begin() as txn:
                return {bytes(k).decode(): bytes(v) for k, v in txn.cursor()}
        finally:
            env.close()
    if kind == "SQLiteStore":
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            return {k: bytes(v) for k, v in db.execute("SELECT k, v FROM zarr")}
        finally:
            db.close()
    if kind == "ZipStore":
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            assert len(names) == len(set(names)), "duplicate zip entries"
            return {n: zf.read(n) for n in names}
    return {p.relative_to(path).as_posix(): p.read_bytes()
            for p in sorted(path.rglob("*")) if p.is_file()}


def raw_json(store_file: str, key: str):
    """The JSON document at ``key`` of a golden store."""
    return json.loads(raw_items(store_file)[key].decode())


def numpy_dtype(doc) -> np.dtype:
    """A .zarray dtype (a string, or a list of fields) as numpy's dtype."""
    if isinstance(doc, str):
        return np.dtype(doc)
    return np.dtype([(f[0], numpy_dtype(f[1])) if len(f) == 2
                     else (f[0], numpy_dtype(f[1]), tuple(f[2])) for f in doc])


def expected_values(entry) -> np.ndarray:
    """The expected contents: the .npy, or the JSON form of an object array as objects."""
    path = EXPECTED / entry["expected"]
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False)
    doc = json.loads(path.read_text())
    kind = doc["kind"]
    flat = _flatten(doc["values"], len(doc["shape"]))
    if kind == "bytes_base64":
        flat = [base64.b64decode(v) for v in flat]
    elif kind.startswith("arrays:"):
        flat = [np.array(v, dtype=kind.split(":", 1)[1]) for v in flat]
    out = np.empty(len(flat), dtype=object)
    for i, v in enumerate(flat):  # one by one: numpy would make equal-length lists an axis
        out[i] = v
    return out.reshape(doc["shape"])


def _flatten(nested, ndim: int) -> list:
    if ndim == 0:
        return [nested]
    if ndim == 1:
        return list(nested)
    return [x for row in nested for x in _flatten(row, ndim - 1)]


def as_objects(values: np.ndarray) -> np.ndarray:
    """An array of strings or bytes as zarr-python 3 returns it (numpy's StringDType,
    or objects), as an object array of plain Python values."""
    out = np.empty(values.size, dtype=object)
    out[:] = [v if isinstance(v, (bytes, np.ndarray)) else str(v) for v in values.reshape(-1)]
    return out.reshape(values.shape)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Same dtype, shape and bytes (so NaN payloads and -0.0 count); object arrays element by
    element, with the same Python types."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.hasobject:
        return all(same_object(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1)))
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def same_object(x, y) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and same(x, y)
    return type(x) is type(y) and x == y


def expected_object_json(values: np.ndarray) -> dict:
    """An object array as JSON: strings and JSON values as they are, bytes as base64, numeric
    arrays as lists with their dtype."""
    flat = list(values.reshape(-1))
    if all(isinstance(v, bytes) for v in flat):
        kind, out = "bytes_base64", [base64.b64encode(v).decode() for v in flat]
    elif all(isinstance(v, np.ndarray) for v in flat):
        dtypes = {v.dtype.str for v in flat}
        assert len(dtypes) == 1, dtypes
        kind, out = f"arrays:{dtypes.pop()}", [v.tolist() for v in flat]
    elif all(isinstance(v, str) for v in flat):
        kind, out = "str", flat
    else:
        kind, out = "json", flat
    return {"kind": kind, "shape": list(values.shape), "values": _nest(out, values.shape)}


def _nest(flat: list, shape: tuple) -> Any:
    """A flat list in C order as nested lists of ``shape`` (as ``ndarray.tolist`` would)."""
    if len(shape) == 0:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def store_digest(path: Path) -> str:
    """SHA-256 over a store file, or over the sorted (relative name, bytes) of a directory."""
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            rel = f.relative_to(path).as_posix().encode()
            h.update(len(rel).to_bytes(8, "little") + rel)
            data = f.read_bytes()
            h.update(len(data).to_bytes(8, "little") + data)
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def update_manifest(stores: list[dict], entries: list[dict], groups: list[dict]) -> None:
    """Replace this writer's stores, entries and groups in the manifest, keep the others."""
    old = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    mine = {s["store_file"] for s in stores}

    def keep(items):
        return [i for i in items if i["store_file"] not in mine]

    doc = {
        "schema": 1,
        "description": "Zarr v2 golden files: one entry per array of each store file; "
                       "see tests/golden/README.md",
        "stores": sorted(keep(old.get("stores", [])) + stores, key=lambda s: s["store_file"]),
        "groups": sorted(keep(old.get("groups", [])) + groups,
                         key=lambda g: (g["store_file"], g["path"])),
        "entries": sorted(keep(old.get("entries", [])) + entries,
                          key=lambda e: (e["store_file"], e["path"])),
    }
    MANIFEST.write_text(dump_manifest(doc))


def dump_manifest(doc: dict) -> str:
    """JSON with one line per store, group and entry (so that a change shows as one line)."""
    def line(item):
        return json.dumps(item, sort_keys=True, ensure_ascii=False)

    parts = []
    for key in sorted(doc):
        value = doc[key]
        if isinstance(value, list):
            body = ",\n".join(f"  {line(v)}" for v in value)
            parts.append(f" {json.dumps(key)}: [\n{body}\n ]")
        else:
            parts.append(f" {json.dumps(key)}: {line(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
