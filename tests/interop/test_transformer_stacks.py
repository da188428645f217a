"""What other Zarr readers see of a store written through storage transformers: nothing
of them. A directory and a zip archive written by kvzarr through every transformer stack
(each transformer alone, all three in every order) are read bit-exactly by zarr-python 3
and TensorStore, and zarr-python lists no reserved ``__kvzarr/`` key as a child.

The writes are the ones that exercise the transformers: whole arrays, then tiles and
single elements written into existing chunks and shards (the append-only writer appends
to shards where the store can append), then a read back through the stack.
"""

from __future__ import annotations

import warnings
import zipfile

import numpy as np
import pytest

import kvzarr
from kvzarr.transformers import stack_layers

from ..transformers.conftest import STACKS

zarr = pytest.importorskip("zarr")
ts = pytest.importorskip("tensorstore")

SHAPE = (96, 80)
SHARDS = (32, 40)
INNER = (8, 10)
GZIP = [{"name": "gzip", "configuration": {"level": 1}}]


def _model() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(12)
    return {"plain": rng.integers(0, 60000, SHAPE, dtype="uint16"),
            "sharded": rng.random(SHAPE).astype("float32")}


def _write(target: str, stack: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Write the hierarchy through the stack; returns what each array must hold."""
    want = _model()
    rng = np.random.default_rng(5)
    root = kvzarr.open_group(target, mode="w", transformers=list(stack),
                             attributes={"stack": list(stack)})
    plain = root.create_array("g/plain", shape=SHAPE, chunks=(16, 16), dtype="uint16",
                              compressors=GZIP)
    sharded = root.create_array("g/sharded", shape=SHAPE, chunks=INNER, shards=SHARDS,
                                dtype="float32", compressors=GZIP)
    plain[...] = want["plain"]
    sharded[...] = want["sharded"]
    for _ in range(12):      # tiles into existing shards: the append-only writer's case
        i, j = rng.integers(0, SHAPE[0] // INNER[0]), rng.integers(0, SHAPE[1] // INNER[1])
        sel = (slice(i * INNER[0], (i + 1) * INNER[0]), slice(j * INNER[1], (j + 1) * INNER[1]))
        tile = rng.random(INNER).astype("float32")
        sharded[sel] = tile
        want["sharded"][sel] = tile
    for _ in range(6):       # single elements: read-modify-write of one chunk / inner chunk
        i, j = int(rng.integers(0, SHAPE[0])), int(rng.integers(0, SHAPE[1]))
        plain[i, j] = 7
        sharded[i, j] = -1.5
        want["plain"][i, j] = 7
        want["sharded"][i, j] = -1.5
    for _ in range(2):       # through the stack (the second time from a cache's memory)
        np.testing.assert_array_equal(sharded[...], want["sharded"])
    # the transformers did their part: tiles appended where the store appends, checksum
    # records written beside the values, hits served from the cache
    layers = {type(t).__name__: t for t in stack_layers(root.store)}
    if "AppendShards" in layers:
        appended = layers["AppendShards"].stats()["appends"]
        assert appended > 0 if target.endswith(".zarr") else appended == 0
    if "Checksum" in layers:
        assert any(k.startswith("__kvzarr/") for k in layers["Checksum"].base.list())
    if "Cache" in layers and stack_layers(root.store)[-1].change_counter() is not None:
        assert layers["Cache"].stats()["hits"] > 0   # (a directory has no change counter)
    root.store.close()
    return want


def _zarr_python_store(target: str, kind: str):
    from zarr.storage import LocalStore, ZipStore
    return LocalStore(target, read_only=True) if kind == "directory" else \
        ZipStore(target, mode="r")


def _tensorstore_kvstore(target: str, kind: str, name: str) -> dict:
    if kind == "directory":
        return {"driver": "file", "path": f"{target}/g/{name}/"}
    return {"driver": "zip", "base": {"driver": "file", "path": target}, "path": f"g/{name}/"}


@pytest.mark.parametrize("stack", STACKS, ids="+".join)
@pytest.mark.parametrize("kind", ["directory", "zip"])
def test_other_readers_see_nothing_of_the_transformers(tmp_path, kind, stack):
    target = str(tmp_path / ("data.zarr" if kind == "directory" else "data.zip"))
    want = _write(target, stack)

    zstore = _zarr_python_store(target, kind)
    with warnings.catch_warnings():
        # zarr-python warns about a directory without zarr.json among the root's children
        # (the reserved __kvzarr/ one) and then leaves it out, as it must
        warnings.filterwarnings("ignore", message="Object at __kvzarr is not recognized")
        root = zarr.open_group(zstore, mode="r")
        assert [name for name, _ in root.members()] == ["g"]
        assert sorted(n for n, _ in root["g"].members()) == ["plain", "sharded"]
    assert root.attrs["stack"] == list(stack)
    for name, data in want.items():
        got = zarr.open_array(zstore, path=f"g/{name}", mode="r")[...]
        assert got.dtype == data.dtype
        np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"),
                                      data.view(f"u{data.dtype.itemsize}"))
        arr = ts.open({"driver": "zarr3", "kvstore": _tensorstore_kvstore(target, kind, name)},
                      open=True, read=True).result()
        got = arr.read().result()
        np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"),
                                      data.view(f"u{data.dtype.itemsize}"))
        # and kvzarr without any transformer reads the same
        np.testing.assert_array_equal(kvzarr.open_array(target, path=f"g/{name}",
                                                        mode="r")[...], data)
    if kind == "zip":
        with zipfile.ZipFile(target) as zf:     # one member per key: nothing duplicated
            names = zf.namelist()
        assert len(names) == len(set(names))
