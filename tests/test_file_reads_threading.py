"""Reading many small plain chunks from a directory store: from the page cache one thread
reads them (two threads handing the GIL back and forth at every system call read at about
0.6x the speed); when the first chunks wait for the disk, the pool reads the rest."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.runtime import workers
from kvzarr.stores.filesystem import FilesystemStore


class SlowDisk(FilesystemStore):
    """A directory store whose every read waits as a disk would."""

    def _get(self, key: str) -> bytes | None:
        time.sleep(0.001)
        return super()._get(key)

    def _read_run_into(self, keys, view, size, lo, hi):  # type: ignore[no-untyped-def]
        time.sleep(0.001 * (hi - lo))
        return super()._read_run_into(keys, view, size, lo, hi)

    def _read_run_unlinked(self, keys, view, size, lo, hi):  # type: ignore[no-untyped-def]
        time.sleep(0.001 * (hi - lo))
        return super()._read_run_unlinked(keys, view, size, lo, hi)


def _read_spied(monkeypatch: pytest.MonkeyPatch, array: kvzarr.Array
                ) -> tuple[np.ndarray, list[tuple[int, bool]]]:
    """The array read whole, and (items, parallel) of each hand-off it made to the pool
    (a map of items, or of runs of items)."""
    calls: list[tuple[int, bool]] = []
    grouped, ranges = workers.map_grouped, workers.map_ranges

    def spy_grouped(fn, items, parallel):  # type: ignore[no-untyped-def]
        calls.append((len(list(items)), parallel))
        return grouped(fn, items, parallel)

    def spy_ranges(run, lo, hi, parallel):  # type: ignore[no-untyped-def]
        calls.append((hi - lo, parallel))
        return ranges(run, lo, hi, parallel)
    monkeypatch.setattr(workers, "map_grouped", spy_grouped)
    monkeypatch.setattr(workers, "map_ranges", spy_ranges)
    got = array[...]
    monkeypatch.setattr(workers, "map_grouped", grouped)
    monkeypatch.setattr(workers, "map_ranges", ranges)
    return got, calls


@pytest.fixture
def data() -> np.ndarray:
    return np.random.default_rng(1).random((20 * 8, 10 * 8), dtype=np.float32)


@pytest.mark.parametrize("store_class, pool", [(FilesystemStore, False), (SlowDisk, True)],
                         ids=["page cache", "disk waits"])
def test_small_plain_chunks_go_to_the_pool_only_when_reads_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: np.ndarray,
        store_class: type, pool: bool) -> None:
    kvzarr.create_array(FilesystemStore(tmp_path / "a"), shape=data.shape, chunks=(8, 8),
                        dtype="float32", compressors=None)[...] = data
    if not pool:     # "fast" whatever the machine's load: only the slow disk is slow
        monkeypatch.setattr(workers, "PROBE_SECONDS", 1.0)
    got, calls = _read_spied(monkeypatch, kvzarr.open_array(store_class(tmp_path / "a")))
    np.testing.assert_array_equal(got, data)
    probe = workers.PROBE_ITEMS
    assert calls == [(200 - probe, pool)]          # the probe read the first chunks itself


def test_large_or_compressed_chunks_always_use_the_pool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "PROBE_SECONDS", 1.0)
    rng = np.random.default_rng(2)
    for name, shape, chunks, compressors in [
            ("64 KiB plain", (128 * 40, 128), (128, 128), None),
            ("small zstd", (8 * 20, 8 * 10), (8, 8), "auto")]:
        data = rng.random(shape, dtype=np.float32)
        kvzarr.create_array(FilesystemStore(tmp_path / name), shape=shape, chunks=chunks,
                            dtype="float32", compressors=compressors)[...] = data
        got, calls = _read_spied(monkeypatch,
                                 kvzarr.open_array(FilesystemStore(tmp_path / name)))
        np.testing.assert_array_equal(got, data)
        nchunks = (shape[0] // chunks[0]) * (shape[1] // chunks[1])
        assert nchunks > workers.PROBE_ITEMS
        assert calls == [(nchunks, True)], name
