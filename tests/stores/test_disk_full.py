"""A real full disk (a 2 MiB tmpfs): every store raises StoreFullError, keeps its old
state, and works again once space is freed. Skipped where tmpfs cannot be mounted
(mounting needs root)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from kvzarr.errors import StoreFullError
from kvzarr.stores.filesystem import FilesystemStore
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.sql import SQLStore
from kvzarr.stores.zip import ZipStore


@pytest.fixture
def tiny_disk(tmp_path: Path):
    mount = tmp_path / f"tiny-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


STORES = {
    "filesystem": lambda d: FilesystemStore(d / "data.zarr"),
    "zip": lambda d: ZipStore(d / "data.zip"),
    "sqlite": lambda d: SQLStore(d / "data.sqlite"),
    "lmdb": lambda d: LMDBStore(d / "data.lmdb", map_size_start=256 << 10),
    # writes through the map: a full disk must be an error, not SIGBUS (stores/lmdb.md)
    "lmdb-write-map": lambda d: LMDBStore(d / "data.lmdb", map_size_start=256 << 10,
                                          write_map=True),
}


@pytest.mark.parametrize("kind", sorted(STORES))
def test_full_disk_keeps_old_state(tiny_disk: Path, kind: str):
    store = STORES[kind](tiny_disk)
    store.set("keep", b"old")
    blob = os.urandom(256 << 10)
    with pytest.raises(StoreFullError) as info:
        if store.capabilities.transactional:
            with store.transaction():
                store.set("keep", b"new")
                for i in range(16):  # 4 MiB into 2 MiB
                    store.set(f"big/{i}", blob)
        else:
            for i in range(16):
                store.set(f"big/{i}", blob)
    assert "space" in str(info.value).lower() or "full" in str(info.value).lower()
    assert store.get("keep") == b"old"
    if store.capabilities.transactional:
        assert list(store.list_prefix("big/")) == []
    else:  # atomic per key: whole values or none, never a torn one
        assert all(store.get(k) == blob for k in store.list_prefix("big/"))
        store.erase_prefix("big/")
    store.set("after", b"fine")
    assert store.get("after") == b"fine"
    store.close()
