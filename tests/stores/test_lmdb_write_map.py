"""LMDBStore's write map (stores/lmdb.md, "Write map"; by default on only without sync):
the mapped file is backed by allocated blocks, never made shorter under another process,
and files full of holes (another program's write map) are written through the file
instead."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path

import lmdb
import pytest

from kvzarr.errors import StoreConfigError
from kvzarr.stores.lmdb import LMDBStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the write map is used on Linux only")
SPAWN = multiprocessing.get_context("spawn")


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_the_mapped_file_is_allocated_and_as_long_as_the_map(tmp_path: Path) -> None:
    path = tmp_path / "x.lmdb"
    with LMDBStore(path, write_map=True) as s:
        assert s._shared.write_map
        s.set_many([(f"k/{i}", os.urandom(3000)) for i in range(2000)])   # grows the map
        size = os.path.getsize(path)
        assert size == s.map_size > 1 << 20
        assert _allocated(path) >= size
        assert s.get("k/1999") is not None


@pytest.mark.parametrize("options", [{}, {"durability": "relaxed"}, {"write_map": False},
                                     {"durability": "none", "write_map": False}])
def test_write_map_off_keeps_the_file_to_its_data(tmp_path: Path, options: dict) -> None:
    # off by default where commits sync: they would wait for whole folios
    path = tmp_path / "x.lmdb"
    with LMDBStore(path, **options) as s:
        assert not s._shared.write_map
        s.set("a", b"x" * 100)
        assert os.path.getsize(path) < s.map_size


def test_write_map_on_by_default_without_sync(tmp_path: Path) -> None:
    # nothing waits for write-back: the map saves a copy of each page
    path = tmp_path / "x.lmdb"
    with LMDBStore(path, durability="none") as s:
        assert s._shared.write_map
        s.set("a", b"x" * 100)
        assert os.path.getsize(path) == s.map_size


def test_a_file_full_of_holes_is_written_through_the_file(tmp_path: Path) -> None:
    # zarr-python 2's LMDBStore maps (and so sizes) its file to a huge sparse length
    path = tmp_path / "old.lmdb"
    env = lmdb.open(str(path), subdir=False, map_size=1 << 30, writemap=True)
    with env.begin(write=True) as txn:
        txn.put(b"zarr.json", b"{}")
    env.close()
    assert os.path.getsize(path) == 1 << 30
    before = _allocated(path)
    with LMDBStore(path, write_map=True) as s:
        assert not s._shared.write_map
        s.set("a/c/0", b"y" * 5000)
        assert s.get("zarr.json") == b"{}"
    assert _allocated(path) < before + (8 << 20)     # the holes were not filled


def test_one_process_cannot_mix_write_map_settings(tmp_path: Path) -> None:
    path = tmp_path / "x.lmdb"
    with LMDBStore(path, write_map=True):
        with pytest.raises(StoreConfigError) as info:
            LMDBStore(path, write_map=False)
        assert info.value.field == "write_map"


def _grower(path: str, rounds: int) -> None:
    with LMDBStore(path, durability="none", map_size_start=64 << 10, write_map=True) as s:
        for r in range(rounds):
            s.set_many([(f"g/{r}/{i}", os.urandom(4000)) for i in range(50)])


def _opener(path: str, rounds: int) -> None:
    seen = 0
    for _ in range(rounds):
        with LMDBStore(path, durability="none", write_map=True) as s:
            s.get("g/0/0")
            length = os.path.getsize(path)
            assert length >= seen, "the data file got shorter"
            seen = length


def test_growing_while_other_processes_open_never_cuts_the_file(tmp_path: Path) -> None:
    # An opener mapping the file shorter than a growing writer's map would cut the file
    # under the writer's pages: the writer would die of SIGBUS.
    path = str(tmp_path / "x.lmdb")
    LMDBStore(path, map_size_start=64 << 10, write_map=True).close()
    procs = [SPAWN.Process(target=_grower, args=(path, 60))]
    procs += [SPAWN.Process(target=_opener, args=(path, 40)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    with LMDBStore(path) as s:
        assert len(list(s.list_prefix("g/"))) == 60 * 50
