"""FilesystemStore beyond the conformance suite: the promises of stores/filesystem.md."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from kvzarr.errors import InvalidKeyError, ReadOnlyError
from kvzarr.stores import filesystem, graves
from kvzarr.stores.filesystem import TEMP_MARKER, FilesystemStore


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "root"


def files_under(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` and what it holds, once the graves of replaced
    files (kvzarr.stores.graves) are gone."""
    graves.flush()
    out = {}
    for dirpath, _, names in os.walk(directory):
        for name in names:
            p = Path(dirpath) / name
            try:
                out[p.relative_to(directory).as_posix()] = p.read_bytes()
            except FileNotFoundError:   # a grave, where a sync thread (which does not
                continue                # wait in flush) runs this
    return out


def test_key_is_a_relative_file_path(root: Path) -> None:
    store = FilesystemStore(root)
    store.set("a/b/c", b"abc")
    store.set("zarr.json", b"{}")
    store.set("ü/日本", b"unicode")
    # The layout of the filesystem store spec: readable with no kvzarr at all.
    assert files_under(root) == {"a/b/c": b"abc", "zarr.json": b"{}", "ü/日本": b"unicode"}
    (root / "x" / "y").mkdir(parents=True)
    (root / "x" / "y" / "z").write_bytes(b"written by another tool")
    assert store.get("x/y/z") == b"written by another tool"
    assert list(store.list_dir("x/")) == ["y/"]


def test_replace_is_atomic_per_key(root: Path) -> None:
    store = FilesystemStore(root)
    size, rounds = 4 << 20, 50
    store.set("big", bytes([0]) * size)
    done = threading.Event()
    torn: list[tuple[int, set[int]]] = []
    reads = [0]

    def reader() -> None:
        while not done.is_set():
            value = store.get("big")
            reads[0] += 1
            if value is None or len(value) != size or value.count(value[:1]) != size:
                torn.append((len(value or b""), set((value or b"")[::65536])))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, rounds + 1):
            store.set("big", bytes([i]) * size)
    finally:
        done.set()
        t.join()
    assert torn == []
    assert reads[0] > 0
    assert store.get("big") == bytes([rounds]) * size
    graves.flush()                          # the replaced files' graves (graves.py)
    assert [n for n in os.listdir(root) if TEMP_MARKER in n] == []


@pytest.mark.parametrize("key", ["../escape", "a/../../escape", "/tmp/escape", "..\\escape",
                                 "a/..", "./escape", "a\x00b"])
def test_keys_cannot_escape_the_root(root: Path, tmp_path: Path, key: str) -> None:
    store = FilesystemStore(root)
    for op in (lambda: store.set(key, b"x"), lambda: store.get(key),
               lambda: store.erase(key), lambda: store.set_partial_values([(key, 0, b"x")])):
        with pytest.raises(InvalidKeyError):
            op()
    assert sorted(os.listdir(tmp_path)) == ["root"]
    assert files_under(root) == {}


def test_temp_files_are_never_listed(root: Path) -> None:
    store = FilesystemStore(root)
    store.set_many([("a/b", b"1"), ("c", b"2")])
    # What a writer killed between write and rename leaves behind.
    (root / f".c{TEMP_MARKER}deadbeef").write_bytes(b"half")
    (root / "a" / f".b{TEMP_MARKER}cafe").write_bytes(b"half")
    assert list(store.list()) == ["a/b", "c"]
    assert list(store.list_prefix("a/")) == ["a/b"]
    assert list(store.list_dir("")) == ["a/", "c"]
    assert list(store.list_dir("a/")) == ["b"]
    with pytest.raises(InvalidKeyError):
        store.get(f".c{TEMP_MARKER}deadbeef")
    with pytest.raises(InvalidKeyError):
        store.set(f"x{TEMP_MARKER}y", b"1")


def test_erase_prunes_empty_directories(root: Path) -> None:
    store = FilesystemStore(root)
    store.set_many([("a/b/c/d", b"1"), ("a/keep", b"2")])
    store.erase("a/b/c/d")
    assert not (root / "a" / "b").exists()
    assert (root / "a").is_dir()
    store.erase("a/keep")
    assert root.is_dir() and os.listdir(root) == []
    store.set_many([("p/q/r", b"1"), ("p/s", b"2")])
    store.erase_prefix("p/q/")
    assert os.listdir(root / "p") == ["s"]
    store.erase_prefix("p/")
    assert os.listdir(root) == []


def test_no_atomicity_across_keys(root: Path) -> None:
    """transaction() only groups work here: what ran before an error stays written."""
    store = FilesystemStore(root)
    assert not store.capabilities.transactional
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.set("first", b"1")
            raise RuntimeError("stop")
    assert store.get("first") == b"1"


def test_fsync_option_writes_the_same_bytes(root: Path) -> None:
    store = FilesystemStore(root, fsync=True)
    store.set("a/b", b"durable")
    store.set_partial_values([("a/b", 0, b"D")])
    assert (root / "a" / "b").read_bytes() == b"Durable"


def _record_syncs(monkeypatch: pytest.MonkeyPatch, root: Path,
                  seen: dict[str, dict[str, bytes]]) -> list[str]:
    """Record each directory sync of the store, with what the directory holds then."""
    synced: list[str] = []
    real = filesystem._fsync_directory

    def fsync_directory(directory: str | Path) -> None:
        rel = Path(directory).relative_to(root).as_posix()
        synced.append(rel)
        seen[rel] = files_under(Path(directory))
        real(directory)
    monkeypatch.setattr(filesystem, "_fsync_directory", fsync_directory)
    return synced


@pytest.mark.parametrize("batched", [False, True], ids=["one key", "set_many"])
def test_fsync_syncs_each_new_directory_in_its_parent(
        root: Path, monkeypatch: pytest.MonkeyPatch, batched: bool) -> None:
    # A new directory's entry lives in its parent: without that sync a power cut can
    # take the directory, and the durable keys in it, away.
    store = FilesystemStore(root, fsync=True)
    synced = _record_syncs(monkeypatch, root, {})
    if batched:
        store.set_many([("x/y/z/a", b"1"), ("x/y/z/b", b"2")])
    else:
        store.set("x/y/z/a", b"1")
    assert {".", "x", "x/y", "x/y/z"} <= set(synced)


def test_durable_batch_syncs_each_directory_once_after_its_renames(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FilesystemStore(root, fsync=True)
    items = [(f"c/{i}/{j}", bytes([i, j]) * 50) for i in range(3) for j in range(40)]
    store.set_many(items)                     # the directories exist now
    new = [(k, v[::-1] + b"new") for k, v in items]
    seen: dict[str, dict[str, bytes]] = {}
    synced = _record_syncs(monkeypatch, root, seen)
    store.set_many(new)
    assert sorted(synced) == ["c/0", "c/1", "c/2"]     # once each, not once per key
    for key, value in new:                    # each sync came after its keys' renames
        directory, name = key.rsplit("/", 1)
        assert seen[directory][name] == value
    # no new value was still in a temporary file; the temporary names seen there (the
    # syncs run on sync threads, where files_under cannot wait for the graves) are the
    # graves of replaced files, holding old values
    olds = {v for _, v in items}
    assert all(data in olds for files in seen.values() for name, data in files.items()
               if TEMP_MARKER in name)
    assert store.get_many([k for k, _ in new]) == [v for _, v in new]


@pytest.mark.parametrize("fails", [False, True], ids=["commit", "exception"])
def test_durable_transaction_syncs_each_directory_once_at_its_end(
        root: Path, monkeypatch: pytest.MonkeyPatch, fails: bool) -> None:
    # Inside a write transaction a set is durable when the transaction ends (as
    # Store.set promises); its directory waits for that end, not one sync per set. An
    # exception does not undo the writes (no atomicity here), so they are synced too.
    store = FilesystemStore(root, fsync=True)
    store.set_many([("d/0", b"old"), ("e/0", b"old")])
    seen: dict[str, dict[str, bytes]] = {}
    synced = _record_syncs(monkeypatch, root, seen)
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with store.transaction():
            store.set("d/0", b"new")
            store.set_many([(f"d/{i}", b"v%d" % i) for i in range(1, 9)])
            store.set("e/0", b"new")
            assert synced == []                  # nothing synced before the end
            if fails:
                raise RuntimeError("stop")
    assert sorted(synced) == ["d", "e"]
    assert seen["d"]["0"] == b"new" and seen["d"]["8"] == b"v8" and seen["e"]["0"] == b"new"
    synced.clear()
    store.set("d/0", b"alone")                   # outside a transaction: synced at once
    assert synced == ["d"]


def test_durable_transaction_ends_well_when_its_directory_was_erased_meanwhile(
        root: Path) -> None:
    # An erase prunes the directories it empties: the one the transaction's set wrote
    # into is gone by its end, with nothing left there to make durable.
    store = FilesystemStore(root, fsync=True)
    with store.transaction():
        store.set("p/q/k", b"1")
        store.set_many([("p/r/0", b"2"), ("p/r/1", b"3")])
        store.erase("p/q/k")
        store.erase_prefix("p/r/")
    assert not (root / "p").exists() and list(store.list()) == []


def test_durable_erases_sync_the_directory_that_lost_the_entry(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An unlinked file or a pruned directory is gone from its parent only once that
    # parent is synced: until then a power cut can bring an erased key back.
    store = FilesystemStore(root, fsync=True)
    store.set_many([("a/b/k", b"1"), ("a/b/l", b"2"), ("a/m", b"3"), ("p/q/r/s", b"4"),
                    ("t/u", b"5")])
    synced = _record_syncs(monkeypatch, root, {})
    store.erase("a/b/k")                     # a/b keeps l: the entry left a/b
    assert synced == ["a/b"]
    store.erase("a/b/l")                     # a/b emptied and pruned: a changed
    assert synced[1:] == ["a"]
    store.erase_prefix("p/q/")               # the tree, then p pruned: the root changed
    assert synced[2:] == ["."]
    del synced[:]
    with store.transaction():
        store.erase_values(["a/m", "t/u"])   # both pruned: the root, once, at the end
        assert synced == []
    assert synced == ["."]
    assert list(store.list()) == []


def test_durable_batch_writes_several_files_at_once_on_the_sync_threads(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each file's write waits for its fsync: the batch's waits overlap on
    # workers.SYNC_POOL. Two files meet at a barrier, which only threads writing at once
    # pass (one thread writing them in turn would wait there until the timeout).
    store = FilesystemStore(root, fsync=True)
    barrier = threading.Barrier(2, timeout=30)
    names: set[str] = set()
    real = filesystem._write_file

    def write_file(path: str, value: bytes, fsync: bool) -> None:
        names.add(threading.current_thread().name)
        if value in (b"meet-1", b"meet-2"):
            barrier.wait()
        real(path, value, fsync)
    monkeypatch.setattr(filesystem, "_write_file", write_file)
    items = [("g/first", b"meet-1")] + [(f"g/{i}", b"v%d" % i) for i in range(30)] \
        + [("g/last", b"meet-2")]
    store.set_many(items)
    assert all(name.startswith("kvzarr-sync") for name in names), names
    assert store.get_many([k for k, _ in items]) == [v for _, v in items]


def test_durable_batch_failure_reaches_the_caller_and_keeps_each_key_whole(
        root: Path) -> None:
    store = FilesystemStore(root, fsync=True)
    store.set("f", b"a file")
    items = [(f"h/{i}", b"new %d" % i) for i in range(20)] + [("f/x", b"under a file")]
    with pytest.raises(InvalidKeyError):
        store.set_many(items)
    got = store.get_many([k for k, _ in items[:-1]])
    assert all(v in (None, b"new %d" % i) for i, v in enumerate(got))
    assert store.get("f") == b"a file"
    assert not [p for p in root.rglob("*") if TEMP_MARKER in p.name]


def test_read_only_does_not_create_or_write(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    ro = FilesystemStore(missing, read_only=True)
    assert list(ro.list()) == []
    assert ro.get("a") is None
    with pytest.raises(ReadOnlyError):
        ro.set("a", b"1")
    assert not missing.exists()


def test_partial_write_keeps_per_key_atomicity(root: Path) -> None:
    store = FilesystemStore(root)
    store.set("v", b"0123456789")
    ino = os.stat(root / "v").st_ino
    store.set_partial_values([("v", 3, b"abc")])
    assert store.get("v") == b"012abc6789"
    assert os.stat(root / "v").st_ino != ino      # a new file renamed over the old one


def test_exists_many_stats_files_without_reading_them(root: Path) -> None:
    """A group's listing asks exists_many of every child's zarr.json: a stat each. A
    sparse value of 1 TiB would not fit in memory if it were read."""
    store = FilesystemStore(root)
    store.set("g/a/zarr.json", b"{}")
    store.set("g/b/c", b"1")
    with open(root / "g" / "huge", "wb") as f:
        f.truncate(1 << 40)
    assert store.exists_many(["g/a/zarr.json", "g/huge", "g/b/zarr.json", "g/b", "nope"]) \
        == [True, True, False, False, False]


def test_temp_file_names_differ_across_threads_and_a_forked_child(root: Path) -> None:
    """Temporary names come from a per-process random half and a counter, not a uuid4
    per write: threads of one process and a forked child never draw the same name."""
    from kvzarr.stores.filesystem import _temp_suffix
    seen: list[str] = []
    threads = [threading.Thread(target=lambda: seen.extend(_temp_suffix() for _ in range(2000)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == len(seen) == 8000
    assert all(len(s) == 32 and int(s, 16) >= 0 for s in seen)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                      # the child: its next name, then exit
        os.write(write_end, _temp_suffix().encode())
        os._exit(0)
    os.close(write_end)
    child = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    parent = _temp_suffix()
    assert child[:16] != parent[:16]                  # a new random half in the child
    store = FilesystemStore(root)
    store.set_many([(f"k/{i}", b"v") for i in range(50)])
    assert sorted(os.listdir(root / "k"), key=int) == [str(i) for i in range(50)]
