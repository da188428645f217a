"""The Zarr v2 golden files are intact and say what the manifest says, checked without kvzarr.

``v2/expected/manifest.json`` lists every array of every golden store (see README.md). These
tests hold the files to it with tools other than kvzarr's v2 reader: each store's bytes
against the digest recorded when it was written; each raw ``.zarray`` / ``.zattrs`` /
``.zgroup`` (and ``.zmetadata``) against the manifest; each array's first chunk decoded
with numcodecs alone against the expected contents; and every array read by zarr-python 3
against the expected contents, where zarr-python 3 can read it. Where it cannot
(``zarr3_reads`` false, with the reason in ``zarr3_note``), the test checks that it still
cannot, so that the manifest stays true when zarr-python changes.
"""

from __future__ import annotations

import functools
import json

import numcodecs
import numpy as np
import pytest

from .goldenlib import (
    ENTRY_FIELDS,
    EXPECTED,
    V2,
    as_objects,
    expected_values,
    load_manifest,
    numpy_dtype,
    raw_items,
    raw_json,
    same,
    store_digest,
)

MANIFEST_DOC = load_manifest()
ENTRIES = MANIFEST_DOC["entries"]
STORES = {s["store_file"]: s for s in MANIFEST_DOC["stores"]}


def _id(entry):
    return f"{entry['store_file']}:{entry['path']}"


def _key(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


# ------------------------------------------------------------------ the manifest itself


def test_manifest_entries_have_the_documented_fields():
    assert MANIFEST_DOC["schema"] == 1
    seen = set()
    for e in ENTRIES:
        assert tuple(sorted(e)) == tuple(sorted(ENTRY_FIELDS)), _id(e)
        assert (e["store_file"], e["path"]) not in seen, _id(e)
        seen.add((e["store_file"], e["path"]))
        assert e["store_kind"] == STORES[e["store_file"]]["store_kind"], _id(e)
        assert e["order"] in ("C", "F"), _id(e)
        assert e["chunks_written"] in ("all", "some", "none"), _id(e)
        assert isinstance(e["zarr3_reads"], bool), _id(e)
        # a reason is given exactly when zarr-python 3 cannot read the array
        assert (e["zarr3_note"] is None) == e["zarr3_reads"], _id(e)
        assert (EXPECTED / e["expected"]).is_file(), _id(e)
        assert e["expected"].endswith(".json") == (e["dtype"] == "|O"), _id(e)


def test_every_store_file_is_listed_and_present():
    on_disk = {p.name for p in V2.iterdir() if p.name != "expected"}
    assert on_disk == set(STORES)
    assert {e["store_file"] for e in ENTRIES} == set(STORES)
    kinds = {s["store_kind"] for s in STORES.values()}
    assert {"LMDBStore", "SQLiteStore", "DirectoryStore", "NestedDirectoryStore", "ZipStore",
            "LocalStore"} <= kinds
    assert any(s["consolidated"] and s["writer"].startswith("zarr-python 2.18")
               for s in STORES.values())


def test_zarr2_stores_hold_the_same_catalogue():
    """Every zarr-python 2 store holds the same arrays, with the same expected contents
    (left out only where zarr-python 2 cannot write the array into that store kind)."""
    zarr2 = [s for s in STORES.values() if s["writer"].startswith("zarr-python 2")]
    paths = {s["store_file"]: {e["path"]: e["expected"] for e in ENTRIES
                               if e["store_file"] == s["store_file"]} for s in zarr2}
    union = {}
    for p in paths.values():
        union.update(p)
    for name, p in paths.items():
        missing = set(union) - set(p)
        # order/F_U3: LMDBStore refuses it; separators/dot_i4: NestedDirectoryStore nests
        assert missing <= {"order/F_U3", "separators/dot_i4"}, (name, missing)
        assert all(union[k] == v for k, v in p.items()), name


@pytest.mark.parametrize("store_file", sorted(STORES))
def test_store_file_is_intact(store_file):
    assert store_digest(V2 / store_file) == STORES[store_file]["sha256"]


# ------------------------------------------------------------------ the raw documents


@pytest.mark.parametrize("store_file", sorted(STORES))
def test_raw_documents_match_the_manifest(store_file):
    items = raw_items(store_file)
    for e in (e for e in ENTRIES if e["store_file"] == store_file):
        meta = raw_json(store_file, _key(e["path"], ".zarray"))
        assert meta["zarr_format"] == 2, _id(e)
        for field in ("dtype", "shape", "chunks", "order", "compressor", "filters",
                      "fill_value"):
            assert meta[field] == e[field], (_id(e), field)
        assert meta.get("dimension_separator") == e["dimension_separator"], _id(e)
        assert raw_json(store_file, _key(e["path"], ".zattrs")) == e["attributes"], _id(e)
        numpy_dtype(meta["dtype"])  # every dtype is one numpy knows
        # an array's chunk keys: none where nothing was written, else at least one
        prefix = _key(e["path"], "")
        chunk_keys = [k for k in items if k.startswith(prefix)
                      and not k[len(prefix):].startswith(".")
                      and k[len(prefix):].replace(".", "/").split("/")[0].isdigit()]
        assert bool(chunk_keys) == (e["chunks_written"] != "none"
                                    and 0 not in e["shape"]), _id(e)
    for g in (g for g in MANIFEST_DOC["groups"] if g["store_file"] == store_file):
        assert raw_json(store_file, _key(g["path"], ".zgroup")) == {"zarr_format": 2}
        attrs_key = _key(g["path"], ".zattrs")
        assert (raw_json(store_file, attrs_key) if attrs_key in items else {}) \
            == g["attributes"], (store_file, g["path"])


@pytest.mark.parametrize("store_file", sorted(s for s in STORES if STORES[s]["consolidated"]))
def test_consolidated_metadata_is_every_document(store_file):
    """.zmetadata holds exactly the store's metadata documents, as they are in the store."""
    items = raw_items(store_file)
    doc = json.loads(items[".zmetadata"])
    assert doc["zarr_consolidated_format"] == 1
    documents = {k: json.loads(v) for k, v in items.items()
                 if k.rsplit("/", 1)[-1] in (".zarray", ".zattrs", ".zgroup")}
    consolidated = doc["metadata"]
    if STORES[store_file]["writer"].startswith("zarr-python 3"):
        # zarr-python 3.1 adds its own (v3-style) "consolidated_metadata" field to the
        # .zgroup of each subgroup inside .zmetadata, which the .zgroup file does not have
        consolidated = {k: {f: x for f, x in v.items() if f != "consolidated_metadata"}
                        if k.endswith(".zgroup") else v for k, v in consolidated.items()}
    assert consolidated == documents


# ------------------------------------------------------------------ the first chunk


@pytest.fixture(autouse=True, scope="module")
def _allow_unpickling():
    # numcodecs decodes Pickle only when told to; the golden files are the project's own
    previous = numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE
    numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE = True
    yield
    numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE = previous


def decode_chunk(entry, data: bytes) -> np.ndarray:
    """One chunk decoded as the Zarr v2 specification says: the compressor, then the filters
    in reverse order, then the bytes as ``dtype`` in ``order`` (numcodecs does each step)."""
    buf = data
    if entry["compressor"] is not None:
        buf = numcodecs.get_codec(entry["compressor"]).decode(buf)
    for f in reversed(entry["filters"] or []):
        buf = numcodecs.get_codec(f).decode(buf)
    dtype = numpy_dtype(entry["dtype"])
    arr = buf if isinstance(buf, np.ndarray) and buf.dtype == dtype else \
        numcodecs.compat.ensure_ndarray(buf).view(dtype)
    return arr.reshape(entry["chunks"], order=entry["order"])


@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_first_chunk_decodes_to_the_expected_values(entry):
    """Chunk (0, 0, ...) decoded with numcodecs alone equals the expected file there (so
    the expected files are checked for the arrays zarr-python 3 cannot read too)."""
    expected = expected_values(entry)
    sep = entry["dimension_separator"] or "."
    key = _key(entry["path"], sep.join(["0"] * len(entry["shape"])) or "0")
    items = raw_items(entry["store_file"])
    if entry["chunks_written"] == "none" or 0 in entry["shape"]:
        assert key not in items
        return
    chunk = decode_chunk(entry, items[key])
    region = tuple(slice(0, min(c, s)) for c, s in zip(entry["chunks"], entry["shape"]))
    assert same(chunk[region], expected[region]), _id(entry)


# ------------------------------------------------------------------ zarr-python 3


@functools.cache
def zarr3_root(store_file: str):
    """The store opened read-only with zarr-python 3: LocalStore and ZipStore on the files
    themselves, a MemoryStore holding the raw items for LMDB and SQLite (zarr-python 3 has
    no store of those kinds)."""
    import zarr
    from zarr.core.buffer import default_buffer_prototype

    path = V2 / store_file
    kind = STORES[store_file]["store_kind"]
    if kind in ("LMDBStore", "SQLiteStore"):
        buffer = default_buffer_prototype().buffer
        store = zarr.storage.MemoryStore(
            {k: buffer.from_bytes(v) for k, v in raw_items(store_file).items()})
    elif kind == "ZipStore":
        store = zarr.storage.ZipStore(path, mode="r")
    else:
        store = zarr.storage.LocalStore(path, read_only=True)
    # a store with a zarr3_note is one zarr-python 3 cannot open through its .zmetadata
    consolidated = STORES[store_file]["consolidated"] and STORES[store_file]["zarr3_note"] is None
    return zarr.open_group(store, mode="r", zarr_format=2, use_consolidated=consolidated)


@pytest.mark.parametrize("store_file", sorted(s for s in STORES if STORES[s]["zarr3_note"]))
def test_zarr_python_3_still_cannot_open_through_zmetadata(store_file):
    """The store-level zarr3_note is still true (else drop it in make_v2.py)."""
    import zarr

    store = zarr.storage.LocalStore(V2 / store_file, read_only=True)
    with pytest.raises(ValueError, match="No Zarr data type found"):
        zarr.open_group(store, mode="r", zarr_format=2, use_consolidated=True)


def zarr3_read(entry) -> np.ndarray:
    got = zarr3_root(entry["store_file"])[entry["path"]][...]
    got = np.asarray(got)
    if entry["dtype"] == "|O" or got.dtype.kind == "T":
        got = as_objects(got)
    return got


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_zarr_python_3_reads_the_expected_values(entry):
    expected = expected_values(entry)
    if entry["zarr3_reads"]:
        assert same(zarr3_read(entry), expected), _id(entry)
        return
    try:
        got = zarr3_read(entry)
    except Exception:
        return  # still cannot, as zarr3_note says
    assert not same(got, expected), (
        f"zarr-python 3 now reads {_id(entry)}: set zarr3_reads in make_v2.py")
