"""The directory store's key locks (``Store.key_lock``, kvzarr/stores/keylocks.py) with
real processes: read-modify-writes through the Array API lose nothing, a SIGKILLed holder
releases its lock, a forked child does not inherit the parent's locks, and the lock files
stay out of every Zarr reader's sight."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import ConflictError, InvalidKeyError
from kvzarr.stores.filesystem import LOCK_DIR, FilesystemStore
from kvzarr.stores.keylocks import STRIPES, stripe_of

CONTEXT = mp.get_context("spawn")


def _element_writer(root: str, writer: int, writers: int, start, fsync: bool = False) -> None:
    a = kvzarr.open_array(FilesystemStore(root, fsync=fsync), path="a")
    start.wait(60)
    for i in range(writer, a.shape[0], writers):
        a[i] = i + 1                     # a read-modify-write of the one shared chunk


def _attribute_writer(root: str, writer: int, count: int, start) -> None:
    a = kvzarr.open_array(FilesystemStore(root), path="a")
    start.wait(60)
    for i in range(count):
        a.attrs[f"w{writer}_{i}"] = i     # a read-modify-write of zarr.json


def _run(target, args_of, n: int, start) -> None:
    procs = [CONTEXT.Process(target=target, args=args_of(k)) for k in range(n)]
    for p in procs:
        p.start()
    start.set()                               # they write at the same time
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * n


@pytest.mark.parametrize("fsync", [False, True], ids=["a set per chunk", "durable, set_many"])
def test_directory_store_eight_writers_into_one_chunk_lose_nothing(tmp_path, fsync):
    """The issue's case: 8 processes writing single elements into one chunk of a
    directory store kept 79 of 512 writes; under the key lock every one survives, on a
    durable store too (whose chunks go through set_many, on its sync threads)."""
    root = str(tmp_path / "data.zarr")
    kvzarr.create_array(FilesystemStore(root), name="a", shape=(512,), chunks=(512,),
                        dtype="int32", fill_value=0)
    start = CONTEXT.Event()
    _run(_element_writer, lambda k: (root, k, 8, start, fsync), 8, start)
    got = kvzarr.open_array(FilesystemStore(root), path="a", mode="r")[...]
    assert int((got == np.arange(1, 513)).sum()) == 512


def test_attribute_updates_from_processes_lose_nothing(tmp_path):
    root = str(tmp_path / "data.zarr")
    kvzarr.create_array(FilesystemStore(root), name="a", shape=(4,), dtype="int8")
    start = CONTEXT.Event()
    _run(_attribute_writer, lambda k: (root, k, 15, start), 4, start)
    attrs = kvzarr.open_array(FilesystemStore(root), path="a", mode="r").attrs.asdict()
    assert attrs == {f"w{w}_{i}": i for w in range(4) for i in range(15)}


_HOLDER = textwrap.dedent("""
    import sys, time
    from kvzarr.stores.filesystem import FilesystemStore
    store = FilesystemStore(sys.argv[1])
    with store.key_lock(["a/c/0"]):
        print("holding", flush=True)
        time.sleep(120)
""")


def test_a_sigkilled_holder_releases_its_lock(tmp_path):
    root = tmp_path / "data.zarr"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        store = FilesystemStore(root, lock_timeout=0.3)
        with pytest.raises(ConflictError):
            with store.key_lock(["a/c/0"]):
                pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        with store.key_lock(["a/c/0"]):       # the kernel released the dead holder's lock
            store.set("a/c/0", b"after")
        assert store.get("a/c/0") == b"after"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_share_the_parent_s_lock(tmp_path):
    """A child forked while the parent holds a lock shares the parent's lock file
    descriptions; it must open its own, and so wait like any other process."""
    store = FilesystemStore(tmp_path / "data.zarr", lock_timeout=0.3)
    with store.key_lock(["x"]):             # opens the stripe's file in the parent
        pass
    with store.key_lock(["x"]):
        pid = os.fork()
        if pid == 0:                          # the child: must NOT get the lock
            code = 1
            try:
                with store.key_lock(["x"]):
                    code = 2
            except ConflictError:
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_lock_files_live_beside_the_root_out_of_every_listing(tmp_path):
    root = tmp_path / "data.zarr"
    group = kvzarr.open_group(FilesystemStore(root), mode="w")
    a = group.create_array("a", shape=(8,), chunks=(4,), dtype="int32", fill_value=0)
    a[1] = 5                                  # a partial chunk write: takes a key lock
    a.attrs["x"] = 1                          # a metadata read-modify-write: too
    beside = tmp_path / f".data.zarr{LOCK_DIR}"
    assert beside.is_dir() and 0 < len(os.listdir(beside)) <= STRIPES
    assert sorted(os.listdir(root)) == ["a", "zarr.json"]
    zarr = pytest.importorskip("zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # zarr-python warns about foreign entries
        members = dict(zarr.open_group(str(root), mode="r").members())
    assert list(members) == ["a"] and members["a"][1] == 5


def test_lock_directory_inside_the_root_is_hidden_and_kept(tmp_path):
    """Where the root's parent is not writable the lock files live in the root under a
    hidden name (a lock directory already there wins): never listed, never erased by
    ``erase_prefix('')``, refused as a key."""
    root = tmp_path / "data.zarr"
    (root / LOCK_DIR).mkdir(parents=True)
    store = FilesystemStore(root)
    store.set("k", b"v")
    with store.key_lock(["k"]):
        pass
    assert len(os.listdir(root / LOCK_DIR)) == 1
    assert not (tmp_path / f".data.zarr{LOCK_DIR}").exists()
    assert list(store.list()) == ["k"] and list(store.list_dir("")) == ["k"]
    store.erase_prefix("")
    assert list(store.list()) == [] and (root / LOCK_DIR).is_dir()
    for key in (LOCK_DIR, f"{LOCK_DIR}/stripe-0", f"a/{LOCK_DIR}"):
        with pytest.raises(InvalidKeyError):
            store.set(key, b"x")


def test_stripes_are_the_same_in_every_process():
    """Every process must map a key to the same lock file (Python's str hash would not)."""
    out = subprocess.run(
        [sys.executable, "-c", "from kvzarr.stores.keylocks import stripe_of; "
                               "print(stripe_of('a/c/0/1'), stripe_of('zarr.json'))"],
        capture_output=True, text=True, check=True, env={**os.environ,
                                                         "PYTHONHASHSEED": "123"})
    assert out.stdout.split() == [str(stripe_of("a/c/0/1")), str(stripe_of("zarr.json"))]


_LOCK_IN_READ_ONLY_PARENT = textwrap.dedent("""
    import sys
    from kvzarr.stores.filesystem import FilesystemStore
    store = FilesystemStore(sys.argv[1])
    with store.key_lock(["k"]):
        store.set("k", b"locked")
    print(",".join(store.list()))
""")


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None,
                    reason="running as root without setpriv: permissions do not bind")
def test_lock_directory_falls_back_inside_the_root_when_the_parent_is_read_only(tmp_path):
    parent = tmp_path / "parent"
    root = parent / "data.zarr"
    FilesystemStore(root).set("k", b"v")
    os.chmod(parent, 0o555)
    try:
        cmd = [sys.executable, "-c", _LOCK_IN_READ_ONLY_PARENT, str(root)]
        if os.geteuid() == 0:       # root ignores permissions unless it drops the capability
            cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    finally:
        os.chmod(parent, 0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "k"                      # the lock directory is not a key
    assert (root / LOCK_DIR).is_dir() and not (parent / f".data.zarr{LOCK_DIR}").exists()
    assert FilesystemStore(root).get("k") == b"locked"


class _Watched(FilesystemStore):
    """A directory store that records, per chunk written, whether its thread held the
    key lock."""

    def __init__(self, root, fsync: bool = False) -> None:
        super().__init__(root, fsync=fsync)
        self.held = threading.local()
        self.sets: list[bool] = []

    def _key_lock(self, keys):
        inner = super()._key_lock(keys)
        held = self.held

        class Hold:
            def __enter__(self):
                inner.__enter__()
                held.depth = getattr(held, "depth", 0) + 1

            def __exit__(self, *exc):
                held.depth -= 1
                return inner.__exit__(*exc)
        return Hold()

    def locked(self) -> bool:
        return getattr(self.held, "depth", 0) > 0

    def _set(self, key, value):
        if "/c/" in f"/{key}":
            self.sets.append(self.locked())
        super()._set(key, value)

    def _set_many(self, items):
        # (a durable store writes the files on its sync threads: the lock is the caller's)
        self.sets.extend(self.locked() for key, _ in items if "/c/" in f"/{key}")
        super()._set_many(items)


@pytest.mark.parametrize("fsync", [False, True], ids=["a set per chunk", "set_many"])
def test_whole_chunks_are_encoded_outside_the_key_lock_and_stored_inside_it(
        tmp_path, monkeypatch, fsync):
    """A whole chunk depends on nothing stored: its encoding must not hold the lock that
    other writers' read-modify-writes wait for, but its set must (it may not land between
    another writer's read and write). A partial chunk is encoded under the lock. A
    durable store takes whole chunks in groups (batches_writes), under their locks."""
    from kvzarr.engine import chunk_io
    store = _Watched(tmp_path / "data.zarr", fsync=fsync)
    assert store.batches_writes is fsync
    a = kvzarr.create_array(store, name="a", shape=(64, 64), chunks=(16, 16),
                            dtype="float64", fill_value=0)
    encoded_locked: list[bool] = []
    real = chunk_io.ChunkIO._encode_chunk

    def encode(self, chunk, spec):
        encoded_locked.append(store.locked())
        return real(self, chunk, spec)
    monkeypatch.setattr(chunk_io.ChunkIO, "_encode_chunk", encode)

    a[...] = np.arange(64 * 64, dtype="float64").reshape(64, 64)       # 16 whole chunks
    assert encoded_locked == [False] * 16 and store.sets == [True] * 16
    encoded_locked.clear()
    store.sets.clear()
    a[3, 5] = -1.0                                                     # a read-modify-write
    assert encoded_locked == [True] and store.sets == [True]
    assert a[3, 5] == -1.0 and a[63, 63] == 64 * 64 - 1
