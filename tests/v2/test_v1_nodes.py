"""Zarr v1 arrays (the golden files in tests/golden/v1, written by zarr 1.1.0) through
kvzarr's nodes: detected, read on every backend, refused for writes, and migrated to v3
(read the same by kvzarr and zarr-python 3 afterwards)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import ReadOnlyError
from kvzarr.stores import open_store

GOLDEN = Path(__file__).parent.parent / "golden" / "v1"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())["arrays"]
NAMES = sorted(MANIFEST)


def v1_store(name: str, kind: str, tmp: Path) -> str:
    """The golden array ``name`` copied, key by key, into a new store of ``kind``."""
    target = {"directory": str(tmp / name), "lmdb": str(tmp / f"{name}.lmdb"),
              "sqlite": str(tmp / f"{name}.sqlite"), "zip": str(tmp / f"{name}.zip")}[kind]
    if kind == "directory":
        shutil.copytree(GOLDEN / name, target)
        return target
    with open_store(target) as st:
        st.set_many([(p.name, p.read_bytes()) for p in sorted((GOLDEN / name).iterdir())])
    return target


def expected(name: str) -> np.ndarray:
    return np.load(GOLDEN / f"{name}.npy", allow_pickle=False)


@pytest.mark.parametrize("kind", ["directory", "lmdb", "sqlite", "zip"])
def test_every_golden_v1_array_reads_as_zarr_1_wrote_it(kind: str, tmp_path: Path) -> None:
    for name in NAMES:
        with kvzarr.open_array(v1_store(name, kind, tmp_path), mode="r") as a:
            assert a.metadata.zarr_format == 1, name
            want = expected(name)
            assert a.shape == want.shape, name
            np.testing.assert_array_equal(a[...], want, err_msg=name)
            sel = tuple(slice(None, None, 2) for _ in want.shape)
            np.testing.assert_array_equal(a[sel], want[sel], err_msg=name)


def snapshot(where: str) -> dict[str, bytes]:
    with open_store(where, mode="r") as st:
        return {k: st.get(k) for k in st.list()}


def test_v1_arrays_refuse_writes_with_the_way_out(tmp_path: Path) -> None:
    where = v1_store("i4_zlib_C_spec_example", "sqlite", tmp_path)
    before = snapshot(where)
    a = kvzarr.open_array(where)             # mode "a": still read only, being v1
    for write in (lambda: a.__setitem__(0, 1), lambda: a.attrs.__setitem__("x", 1),
                  lambda: a.resize((1,) * a.ndim)):
        with pytest.raises(ReadOnlyError) as err:
            write()
        assert "migrate" in (err.value.hint or "")
    a.close()
    assert snapshot(where) == before


@pytest.mark.filterwarnings("ignore:Numcodecs codecs are not in the Zarr version 3")
def test_migrated_v1_arrays_read_the_same_in_kvzarr_and_zarr_python(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    for name in NAMES:
        where = v1_store(name, "directory", tmp_path)
        chunks = {p.name: p.read_bytes() for p in Path(where).iterdir()
                  if p.name not in ("meta", "attrs")}
        report = kvzarr.migrate_v3(where)
        assert report.arrays == 1 and report.nodes[0].from_format == 1, name
        left = {p.name for p in Path(where).iterdir()}
        assert "meta" not in left and "attrs" not in left and "zarr.json" in left
        assert {n: (Path(where) / n).read_bytes() for n in chunks} == chunks   # untouched
        want = expected(name)
        got = kvzarr.open_array(where, mode="r")
        assert got.metadata.zarr_format == 3
        np.testing.assert_array_equal(got[...], want, err_msg=name)
        if want.dtype.kind not in "SUV":       # zarr-python 3 reads these differently
            theirs = zarr.open_array(kvzarr.ZarrStore(where, read_only=True), mode="r")
            np.testing.assert_array_equal(theirs[...], want, err_msg=name)
