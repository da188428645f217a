"""Writes through a durable directory store (``FilesystemStore(fsync=True)``): the engine
hands it whole chunks in groups (``Store.batches_writes``), which it writes and syncs on
its sync threads with one directory sync per group, under the chunks' key locks. Held to
numpy over selections, chunkings, codecs and shards, like the memory store in
test_array_properties."""

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvzarr
from kvzarr.stores import filesystem
from kvzarr.stores.filesystem import FilesystemStore

from .test_array_properties import SETTINGS, arrays, basic_selection, orthogonal_selection

CODECS = {"plain": None, "gzip": [{"name": "gzip", "configuration": {"level": 1}}]}


@settings(SETTINGS, max_examples=25)
@given(data=st.data(), spec=arrays(), sharded=st.booleans(),
       codec=st.sampled_from(sorted(CODECS)))
def test_durable_directory_writes_match_numpy(data, spec, sharded, codec):
    shape, chunks = spec
    root = tempfile.mkdtemp()
    try:
        store = FilesystemStore(root, fsync=True)
        assert store.batches_writes
        kwargs = {}
        if sharded and all(isinstance(c, int) for c in chunks):
            kwargs["shards"] = tuple(2 * c for c in chunks)
        a = kvzarr.create_array(store, name="a", shape=shape, chunks=chunks, dtype="int32",
                                fill_value=-7, compressors=CODECS[codec], **kwargs)
        ref = np.full(shape, -7, dtype="int32")
        values = np.arange(1, ref.size + 1, dtype="int32").reshape(shape)
        a[...] = values                        # every chunk whole: the grouped path
        ref[...] = values
        sel = data.draw(basic_selection(shape))
        a[sel] = -values[sel]                  # whole chunks and read-modify-writes
        ref[sel] = -values[sel]
        osel = data.draw(orthogonal_selection(shape))
        a.oindex[osel] = 5
        ref[np.ix_(*_ix(osel, shape))] = 5
        reopened = kvzarr.open_array(FilesystemStore(root), path="a", mode="r")
        assert reopened[...].tobytes() == ref.tobytes()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _ix(osel, shape):
    return [np.arange(n)[s] if isinstance(s, slice) else
            (np.nonzero(s)[0] if s.dtype == bool else s) for s, n in zip(osel, shape)]


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_a_durable_array_write_syncs_the_chunk_directory_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str) -> None:
    # A set per chunk (the path of a store that does not batch) synced the chunks'
    # directory after each rename: 64 syncs of a/c for 64 chunks.
    store = FilesystemStore(tmp_path / "d", fsync=True)
    a = kvzarr.create_array(store, name="a", shape=(64 * 8192,), chunks=(8192,),
                            dtype="float64", compressors=CODECS[codec])
    synced: list[str] = []
    real = filesystem._fsync_directory

    def fsync_directory(directory):
        synced.append(Path(directory).relative_to(tmp_path / "d").as_posix())
        real(directory)
    monkeypatch.setattr(filesystem, "_fsync_directory", fsync_directory)
    data = np.random.default_rng(1).normal(size=a.shape)
    a[...] = data
    # the groups (plain chunks in one, encoded ones as the encoders hand them over) are
    # all part of the write's transaction, which syncs each directory once at its end
    assert synced.count("a/c") == 1, synced
    np.testing.assert_array_equal(kvzarr.open_array(FilesystemStore(tmp_path / "d"),
                                                    path="a")[...], data)
