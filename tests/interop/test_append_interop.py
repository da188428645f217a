"""Shards that AppendShards appended to (with garbage in them) and shards compacted
afterwards are read bit-exactly by zarr-python 3 and TensorStore, from a directory and
from a zip archive; each side goes on writing shards the other appended to.

The append-only layout is one the sharding specification allows ("Binary shard format":
any order of inner chunks, unused bytes between them, the index at the end), so nothing
in the array's metadata changes and other readers need no knowledge of it.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvzarr
from kvzarr.stores.zip import ZipStore

zarr = pytest.importorskip("zarr")
ts = pytest.importorskip("tensorstore")

SHAPE, INNER, SHARD = (96, 80), (8, 10), (32, 40)
NAME = "img"


def _appended(root) -> tuple[np.ndarray, kvzarr.Store]:
    """An array on a directory written whole, then in parts through AppendShards (never
    compacting): its shards hold garbage. Returns the expected values and the stack."""
    store = kvzarr.open_store(kvzarr.FilesystemStore(root), transformers=[
        {"name": "append_shards", "max_garbage": 1.0}])
    a = kvzarr.create_array(store, name=NAME, shape=SHAPE, chunks=INNER, shards=SHARD,
                            dtype="float32", fill_value=float("nan"),
                            compressors=[{"name": "gzip", "configuration": {"level": 5}}])
    rng = np.random.default_rng(11)
    want = rng.standard_normal(SHAPE).astype("float32")
    want[40:64, :] = np.nan             # whole shards' worth of fill: inner chunks dropped
    a[:] = want
    for _ in range(60):
        y, x = rng.integers(0, SHAPE[0] - 1), rng.integers(0, SHAPE[1] - 1)
        h, w = rng.integers(1, 12), rng.integers(1, 14)
        block = rng.standard_normal((min(h, SHAPE[0] - y), min(w, SHAPE[1] - x)))
        a[y:y + h, x:x + w] = block.astype("float32")
        want[y:y + h, x:x + w] = block
    a[0:8, 0:10] = np.nan               # an inner chunk back to the fill value
    want[0:8, 0:10] = np.nan
    assert store.stats()["appends"] > 50
    assert kvzarr.compact(store, dry_run=True).reclaimed > 0      # there is garbage
    return want, store


def _zarr_python(store_or_path, mode="r"):
    return zarr.open_array(store=store_or_path, path=NAME, mode=mode)


def _tensorstore(kvstore: dict, write: bool = False):
    spec = {"driver": "zarr3", "kvstore": kvstore}
    return ts.open(spec, open=True, read=True, write=write).result()


def _file(root) -> dict:
    return {"driver": "file", "path": str(root / NAME) + "/"}


def _zip(path) -> dict:
    return {"driver": "zip", "base": {"driver": "file", "path": str(path)}, "path": NAME + "/"}


def _equal(got, want) -> None:
    np.testing.assert_array_equal(np.asarray(got).view("uint32"), want.view("uint32"))


def _to_zip(src: kvzarr.Store, path) -> None:
    with ZipStore(path) as z:
        z.set_many((k, src.get(k)) for k in src.list())


def _read_everywhere(tmp_path, root, want) -> None:
    _equal(_zarr_python(str(root))[:], want)
    _equal(_zarr_python(str(root))[5:29, 33:71], want[5:29, 33:71])     # partial reads
    _equal(_tensorstore(_file(root)).read().result(), want)
    _equal(_tensorstore(_file(root))[70:90, 3:9].read().result(), want[70:90, 3:9])
    archive = tmp_path / f"copy-{len(list(tmp_path.iterdir()))}.zip"
    _to_zip(kvzarr.FilesystemStore(root, read_only=True), archive)
    _equal(_zarr_python(zarr.storage.ZipStore(archive, mode="r"))[:], want)
    _equal(_tensorstore(_zip(archive)).read().result(), want)
    with ZipStore(archive, read_only=True) as z:
        _equal(kvzarr.open_array(z, path=NAME, mode="r")[:], want)


def test_appended_and_compacted_shards_read_everywhere(tmp_path):
    root = tmp_path / "d"
    want, store = _appended(root)
    _read_everywhere(tmp_path, root, want)
    report = kvzarr.compact(store)
    assert report.compacted > 0 and not report.corrupt
    assert kvzarr.compact(store, dry_run=True).reclaimed == 0
    _read_everywhere(tmp_path, root, want)


def test_others_write_into_appended_shards_and_kvzarr_appends_to_theirs(tmp_path):
    root = tmp_path / "d"
    want, store = _appended(root)
    # zarr-python rewrites a shard kvzarr appended to; TensorStore another one
    z = _zarr_python(str(root), mode="r+")
    z[3:6, 2:30] = 1.5
    want[3:6, 2:30] = 1.5
    t = _tensorstore(_file(root), write=True)
    t[70:75, 41:79].write(np.full((5, 38), -2.0, "float32")).result()
    want[70:75, 41:79] = -2.0
    a = kvzarr.open_array(store, path=NAME)
    _equal(a[:], want)
    # kvzarr appends to the shards they wrote; they read what it appended
    before = store.stats()["appends"]
    a[0:8, 20:30] = 4.0
    a[72:80, 50:60] = 5.0
    want[0:8, 20:30] = 4.0
    want[72:80, 50:60] = 5.0
    assert store.stats()["appends"] == before + 2
    _equal(_zarr_python(str(root))[:], want)
    _equal(_tensorstore(_file(root)).read().result(), want)
