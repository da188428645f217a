"""Fixtures and helpers of the Zarr v2 tests: ``target``, an empty location of every
backend (as ``kvzarr.ZarrStore`` and kvzarr's opening functions take it), and a v2
hierarchy written into it by zarr-python 3."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.stores import open_store
from tests.zarr_store.conftest import BACKEND_NAMES, make_target


def kv_store(target):
    return target if isinstance(target, kvzarr.Store) else open_store(target)


@pytest.fixture(params=BACKEND_NAMES)
def target(request, tmp_path: Path):
    if request.param == "postgresql" and not os.environ.get("KVZARR_TEST_POSTGRES_URL"):
        pytest.skip("no PostgreSQL server")
    t = make_target(request.param, tmp_path)
    yield t
    if isinstance(t, kvzarr.Store):
        t.close()


def write_v2_hierarchy(target) -> dict[str, np.ndarray]:
    """A v2 hierarchy written by zarr-python 3, through kvzarr.ZarrStore; its arrays."""
    import numcodecs
    import zarr
    zs = kvzarr.ZarrStore(target)
    root = zarr.open_group(zs, mode="w", zarr_format=2, attributes={"title": "v2"})
    data = {
        "plain": np.arange(60, dtype="<i4").reshape(6, 10),
        # (quarters: the delta filter sums them back exactly)
        "sub/big_endian_f": (np.arange(35, dtype=">f8") / 4).reshape(5, 7),
        "sub/nested_keys": np.arange(24, dtype="<u2").reshape(2, 3, 4),
        "flags": np.array([True, False, True, True, False]),
    }
    root.create_array("plain", shape=(6, 10), chunks=(4, 4), dtype="<i4",
                      compressors=numcodecs.Zlib(level=3), fill_value=-1,
                      attributes={"units": "m"})[...] = data["plain"]
    root.create_array("sub/big_endian_f", shape=(5, 7), chunks=(2, 3), dtype=">f8",
                      order="F", filters=[numcodecs.Delta(dtype=">f8")],
                      compressors=numcodecs.Blosc(cname="lz4", shuffle=1),
                      fill_value=0.25)[...] = data["sub/big_endian_f"]
    root.create_array("sub/nested_keys", shape=(2, 3, 4), chunks=(1, 2, 3), dtype="<u2",
                      chunk_key_encoding={"name": "v2", "separator": "/"},
                      compressors=None, fill_value=0)[...] = data["sub/nested_keys"]
    root.create_array("flags", shape=(5,), chunks=(2,), dtype="bool",
                      fill_value=False)[...] = data["flags"]
    zs.close()
    return data


def keys_of(target) -> list[str]:
    st = kv_store(target)
    try:
        return sorted(st.list())
    finally:
        if st is not target:
            st.close()
