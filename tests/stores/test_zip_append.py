"""ZipStore commits that append in place: the archive after every commit is a zip that
zipfile, zarr-python 3 and TensorStore read; member data is written once; a torn append
(a killed writer, or one still running) is never read by kvzarr and is cut by the next
writer; compaction frees dead bytes."""

from __future__ import annotations

import io
import multiprocessing
import os
import random
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr
import zarr.storage

import kvzarr
from kvzarr.stores import zip as zipmod
from kvzarr.stores import writeback, zipappend, zipcommit, zipformat
from kvzarr.stores.zip import ZipStore

from .kill_trials import killed_runs, one_generation


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "x.zip"


def zip_contents(path: Path) -> dict[str, bytes]:
    """The archive as Python's zipfile reads it, CRCs checked."""
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        names = zf.namelist()
        assert names == sorted(set(names)), "one member per key, in key order"
        return {n: zf.read(n) for n in names}


# --- member data is written once ---------------------------------------------------------

def test_building_a_hierarchy_one_commit_per_node_writes_each_member_once(path: Path
                                                                          ) -> None:
    """Issue 16 item 5: building a hierarchy node by node used to rewrite the whole archive
    at every commit (O(N^2) member bytes). Now each commit writes its own member once plus
    the central directory the zip format requires (46 bytes + the name per member), and
    no member is ever copied: the member bytes written in total are O(N)."""
    n, node = 300, b'{"zarr_format": 3, "node_type": "group", "attributes": {}}'
    with ZipStore(path, fsync=False) as store:
        store.set("zarr.json", node)               # replaces the empty archive
        rewrites = store._rewrites
        member_bytes = 0
        for i in range(n):
            before = path.stat().st_size
            store.set(f"g{i:04d}/zarr.json", node)
            archive = store._archive
            grown = path.stat().st_size - before
            directory = archive.end - archive.cd_start
            # what this commit added besides the directory: exactly its one new member
            member_bytes += grown - directory
            assert grown - directory == 30 + len(f"g{i:04d}/zarr.json") + len(node)
            assert directory < 100 * (i + 2) + 22
        assert store._rewrites == rewrites, "no commit rewrote (copied) the archive"
        assert member_bytes == n * (30 + len("g0000/zarr.json") + len(node))
    assert len(zip_contents(path)) == n + 1


def _written() -> int:
    """Bytes this process handed to write(2)-family calls so far (Linux)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="no /proc/self/io")
@pytest.mark.parametrize("fresh", [True, False])
def test_a_first_commit_into_an_empty_archive_writes_its_members_once(
        path: Path, fresh: bool) -> None:
    """The commit into an archive with no members (a new one, or one whose members were
    all erased) writes them to a new file that replaces the archive: once, not appended
    and then copied into a rewrite."""
    store = ZipStore(path, fsync=False)
    if not fresh:
        store.set("x", b"erased next")
        store.erase("x")
    values = [(f"c/{i}", random.Random(i).randbytes(64 << 10)) for i in range(64)]
    before = _written()
    with store.transaction():
        store.set_many(values[:32])
        assert store.get("c/3") == values[3][1]      # read back before the commit
        store.set_many(values[32:])
    written = _written() - before
    data = sum(len(v) for _, v in values)
    assert data <= written < data * 1.1
    assert not [p for p in path.parent.iterdir() if zipcommit.TEMP_MARKER in p.name]
    store.close()
    assert zip_contents(path) == dict(values)


def _first_commit_then_killed(path: str, gen: int, ready, go) -> None:
    store = ZipStore(path)
    go.wait(60)
    with store.transaction():
        store.set_many([(f"c/{i}", bytes(64 << 10)) for i in range(16)])
        ready.set()
        time.sleep(60)                               # killed here


def test_a_writer_killed_in_a_first_commit_leaves_the_empty_archive(path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    ZipStore(path).close()
    empty = path.read_bytes()
    for _ in killed_runs(ctx, _first_commit_then_killed, str(path), 1, lambda run: 0.05):
        pass
    assert path.read_bytes() == empty
    assert [p for p in path.parent.iterdir() if zipcommit.TEMP_MARKER in p.name]
    with ZipStore(path) as store:                    # a writer removes the new file
        assert list(store.list()) == []
    assert not [p for p in path.parent.iterdir() if zipcommit.TEMP_MARKER in p.name]
    assert zip_contents(path) == {}


# --- valid after every commit ------------------------------------------------------------

@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_large_values_checksummed_on_the_worker_threads_stay_in_order(
        path: Path, compression: int) -> None:
    # large values are checksummed (and deflated) on the pool: each member must still
    # get its own CRC and bytes, in the order of the batch
    rng = np.random.default_rng(3)
    values = {f"c/{i}": rng.integers(0, 4, size=200_000 + 4096 * i, dtype=np.uint8).tobytes()
              for i in range(12)}
    assert len(values) >= 4 and min(map(len, values.values())) >= zipcommit._PARALLEL_VALUE_BYTES
    with ZipStore(path, fsync=False, compression=compression) as store:
        store.set_many(list(values.items()))
        assert store.get_many(list(values)) == list(values.values())
    assert zip_contents(path) == values


def test_a_checksum_failing_while_stored_values_are_written_leaves_no_member(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # stored values are written while the threads sum them; a sum that fails must cut
    # what was written, and the store go on from the archive as it was
    values = [(f"c/{i}", bytes([i]) * 300_000) for i in range(8)]
    with ZipStore(path, fsync=False) as store:
        store.set("before", b"old")
        size = path.stat().st_size
        real = zipcommit.zlib_ng.crc32
        calls = []

        def failing(data: object) -> int:
            calls.append(1)
            if len(calls) == 5:
                raise MemoryError("simulated")
            return real(data)

        monkeypatch.setattr(zipcommit.zlib_ng, "crc32", failing)
        with pytest.raises(MemoryError):
            store.set_many(values)
        assert len(calls) >= 5
        monkeypatch.setattr(zipcommit.zlib_ng, "crc32", real)
        assert path.stat().st_size == size
        assert zip_contents(path) == {"before": b"old"}
        store.set_many(values)
    assert zip_contents(path) == {"before": b"old", **dict(values)}


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_zipfile_reads_the_archive_after_every_appending_commit(path: Path,
                                                                compression: int) -> None:
    rng = random.Random(5)
    model: dict[str, bytes] = {}
    with ZipStore(path, fsync=False, compression=compression) as store:
        for step in range(60):
            with store.transaction():
                for _ in range(rng.randint(1, 4)):
                    key = f"k/{rng.randint(0, 15)}"
                    if rng.random() < 0.25:
                        store.erase(key)
                        model.pop(key, None)
                    else:
                        value = bytes([step]) * rng.randint(0, 3000)
                        store.set(key, value)
                        model[key] = value
            assert zip_contents(path) == model
            assert list(store.list()) == sorted(model)
            # each appending commit changed the records the one before kept
            # (zipdirectory.py); zip_contents checked their order and contents
            assert store._archive.records is not None or step < 2
        # appends only, after the empty archive and the commit that replaced it
        assert store._rewrites == 2
        assert store.compact() > 0
        assert store._rewrites == 3
        assert zip_contents(path) == model
        assert store.compact() == 0                # nothing dead any more
        store.set("after/compaction", b"x")
        model["after/compaction"] = b"x"
    assert zip_contents(path) == model
    with ZipStore(path, read_only=True) as ro:
        assert {k: ro.get(k) for k in ro.list()} == model


def test_commits_compact_when_dead_bytes_pass_the_threshold(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zipmod, "COMPACT_MIN_DEAD", 64 << 10)
    with ZipStore(path, fsync=False) as store:
        for i in range(200):
            store.set_many([(f"v/{j}", bytes([i]) * 4096) for j in range(8)])
            size = path.stat().st_size
            # at most half the file dead, or less than the threshold (plus this commit)
            assert size <= 2 * (store._archive.end - store._archive.dead) + (64 << 10) * 2
        assert 5 < store._rewrites < 200
    assert zip_contents(path) == {f"v/{j}": bytes([199]) * 4096 for j in range(8)}


def _copied(sources, copy) -> tuple[bytes, list[tuple[int, int]]]:
    """The file ``copy(writer, sources)`` writes, and the copies' (header, data) offsets."""
    with tempfile.TemporaryFile() as f:
        writer = zipformat.ArchiveWriter(f.fileno())
        copies = copy(writer, sources)
        writer.flush()
        f.seek(0)
        return f.read(), [(m.header_offset, m.data_offset) for m in copies]


def test_compaction_copies_runs_of_members_with_the_bytes_of_copying_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction copies members that lie end to end under the local headers this
    store writes as one run: the new file is byte for byte the member-by-member copy,
    also for another tool's members (other headers, data descriptors, bytes prepended),
    members larger than a run, and members left apart by replaced ones."""
    from .test_zip import _foreign_archives
    monkeypatch.setattr(zipformat, "_COPY_CHUNK", 64 << 10)
    one_by_one = zipformat.copy_member

    def check(archive: Any) -> list[str]:
        """Both copies of ``archive``'s members compared; the members copied singly."""
        # in name order, as a compaction copies them
        sources = [(archive, m) for m in sorted([*archive.members.values(),
                                                 *archive.foreign], key=lambda m: m.name)]
        each = _copied(sources, lambda out, src: [one_by_one(out, f, m) for f, m in src])
        singles: list[str] = []
        with monkeypatch.context() as patch:
            patch.setattr(zipformat, "copy_member",
                          lambda out, f, m: singles.append(m.name) or one_by_one(out, f, m))
            runs = _copied(sources, zipformat.copy_members)
        assert runs == each
        return singles

    rng = random.Random(5)
    for base in [None, *_foreign_archives(tmp_path)]:
        path = tmp_path / f"copy-{base.name if base else 'new'}.zip"
        if base is not None:
            path.write_bytes(base.read_bytes())
        with ZipStore(path, fsync=False) as store:
            theirs = {m.name for m in [*store._archive.members.values(),
                                       *store._archive.foreign]}
            for step in range(6):
                store.set_many([(f"k/{rng.randrange(40)}",
                                 rng.randbytes(rng.randrange(3000))) for _ in range(20)])
                store.set(f"big/{step}", rng.randbytes(150 << 10))   # wider than a run
                if step == 2:
                    # members scattered among replaced ones, the other tool's as it
                    # wrote them: those whose local header is not this store's (a
                    # data descriptor, a ZIP64 extra, bzip2's version) copied one by
                    # one, with the big ones
                    singles = set(check(store._archive))
                    assert {f"big/{i}" for i in range(3)} <= singles
                    assert singles - {f"big/{i}" for i in range(3)} <= theirs
                    assert bool(singles & theirs) == (base is not None)
                    store.compact()            # the members in name order: long runs
            model = {k: store.get(k) for k in store.list()}
            assert sorted(check(store._archive)) == [f"big/{i}" for i in range(6)]
            store.compact()
        with ZipStore(path, read_only=True) as ro:
            assert {k: ro.get(k) for k in ro.list()} == model


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists open files by /proc")
def test_the_file_a_compaction_replaced_is_closed_off_the_writers_thread(path: Path) -> None:
    """Its last close frees its blocks: done on a sync thread, but done (no descriptor
    of a deleted archive stays open)."""
    def deleted_archives() -> list[str]:
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(str(path)) and target.endswith("(deleted)"):
                found.append(target)
        return found

    with ZipStore(path, fsync=False) as store:
        store.set_many([(f"k/{i}", bytes(4096)) for i in range(64)])
        store.set("k/0", b"new")
        old = store._archive
        assert store.compact() > 0
        assert old.close_aside and not store._archive.close_aside
        del old
        deadline = time.monotonic() + 10
        while deleted_archives() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert deleted_archives() == []
        assert store.get("k/0") == b"new"


def peers_read(path: Path, model: np.ndarray) -> None:
    """zarr-python 3's ZipStore and TensorStore's zip kvstore read array ``a`` of the
    archive at ``path`` as ``model``."""
    theirs = zarr.storage.ZipStore(path, mode="r")
    try:
        np.testing.assert_array_equal(zarr.open_array(theirs, path="a", mode="r")[:],
                                      model)
    finally:
        theirs.close()
    t = ts.open({"driver": "zarr3", "kvstore": {
        "driver": "zip", "base": {"driver": "file", "path": str(path)},
        "path": "a/"}}, read=True).result()
    np.testing.assert_array_equal(t.read().result(), model)


def test_zarr_python_and_tensorstore_read_an_array_built_by_appends(path: Path) -> None:
    """Many appending commits (writes, overwrites, erased chunks), then a compaction: each
    time zarr-python 3's ZipStore and TensorStore's zip kvstore read the same array."""
    model = np.zeros((40, 40), dtype="int32")
    arr = kvzarr.create_array(str(path), name="a", shape=model.shape, chunks=(10, 10),
                              dtype="int32", fill_value=0)
    rng = np.random.default_rng(3)

    def check() -> None:
        peers_read(path, model)

    for step in range(12):
        r, c = rng.integers(0, 30, 2)
        model[r:r + 10, c:c + 10] = step + 1
        arr[r:r + 10, c:c + 10] = step + 1        # one commit per touched chunk
        if step % 4 == 3:
            model[:10, :10] = 0
            arr[:10, :10] = 0                      # a chunk of fill: its key is erased
        check()
    with ZipStore(path) as store:
        assert store.compact() > 0
    check()


# --- torn appends --------------------------------------------------------------------------

def _inner_zip() -> bytes:
    """A small zip archive: a value that, cut right after it, ends in a valid-looking end
    of central directory record."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("fake", b"not a member of the store")
    return buf.getvalue()


def test_a_torn_append_ending_in_a_zip_shaped_value_is_not_read(path: Path,
                                                                tmp_path: Path) -> None:
    """A reader that sees the file in the middle of an append (or after its writer was
    killed) where the bytes so far end with a value that is itself a zip archive must
    not take that value's directory for the store's: the commit record says the archive
    still ends where it ended."""
    with ZipStore(path) as store:
        store.set("a", b"1")
    old = path.read_bytes()
    # The bytes a commit of "blob" appends, produced on a copy of the archive.
    copy = tmp_path / "copy.zip"
    copy.write_bytes(old)
    blob = _inner_zip()
    with ZipStore(copy) as other:
        other.set("blob", blob)
    appended = copy.read_bytes()[len(old):]
    record = zipappend.read_record(os.open(tmp_path / "copy.zip.lock", os.O_RDONLY))
    cut = appended.index(blob) + len(blob)         # the torn file ends with the inner zip
    st = path.stat()
    lock = os.open(f"{path}.lock", os.O_RDWR)
    zipappend.write_record(lock, zipappend.CommitRecord(
        st.st_dev, st.st_ino, record.committed, record.target, record.tail_start,
        record.tail_crc), durable=False)
    os.close(lock)
    with open(path, "ab") as f:
        f.write(appended[:cut])
    with zipfile.ZipFile(path) as zf:              # what a reader without the record sees
        assert zf.namelist() == ["fake"]
    with ZipStore(path, read_only=True) as ro:     # kvzarr: the archive before the append
        assert list(ro.list()) == ["a"]
        assert ro.get("a") == b"1"
    assert path.read_bytes()[:len(old)] == old     # readers never truncate
    assert path.stat().st_size == len(old) + cut
    with open(path, "ab") as f:                    # the append finishes
        f.write(appended[cut:])
    with ZipStore(path, read_only=True) as ro:
        assert ro.get_many(["a", "blob"]) == [b"1", blob]
    with open(path, "r+b") as f:                   # a writer killed mid-append
        f.truncate(len(old) + cut)
    with ZipStore(path) as store:                  # the next writer cuts the torn tail
        assert path.read_bytes() == old
        assert list(store.list()) == ["a"]
    assert zip_contents(path) == {"a": b"1"}


def test_a_reader_keeps_its_view_while_the_file_grows_with_a_torn_tail(path: Path) -> None:
    with ZipStore(path) as store, ZipStore(path, read_only=True) as ro:
        store.set("a", b"1")
        assert ro.get("a") == b"1"
        counter = ro.change_counter()
        archive = ro._archive
        size = path.stat().st_size
        st = path.stat()
        lock = os.open(f"{path}.lock", os.O_RDWR)
        zipappend.write_record(lock, zipappend.CommitRecord(
            st.st_dev, st.st_ino, size, size + 10_000, size + 9_000, 0), durable=False)
        os.close(lock)
        with open(path, "ab") as f:
            f.write(b"PK\x05\x06" + b"\0" * 500)  # a running append, not yet complete
        assert ro.get("a") == b"1"
        assert ro.change_counter() == counter
        assert ro._archive is archive              # the directory is not parsed again
        store.set("b", b"2")                       # the next writer cuts and appends
        assert ro.get_many(["a", "b"]) == [b"1", b"2"]
        assert ro.change_counter() != counter
    assert zip_contents(path) == {"a": b"1", "b": b"2"}


KEYS, SIZE = 8, 64 << 10
TRIALS = 14


def _slow_writes() -> None:
    """Widen the moments a kill can land inside an append: members are written 16 KiB at
    a time (the real writes, in smaller pieces)."""
    write_at = zipcommit.write_at

    def slowly(fd: int, buffers, offset: int) -> None:
        for b in buffers:
            view = memoryview(b).cast("B")
            for at in range(0, len(view), 16 << 10):
                piece = view[at:at + (16 << 10)]
                write_at(fd, [piece], offset)
                offset += len(piece)
                time.sleep(0.0005)
    zipcommit.write_at = slowly


def _generation(path: str, gen: int, ready, go) -> None:
    _slow_writes()
    store = ZipStore(path)
    go.wait(60)
    with store.transaction():
        ready.set()                                # each set appends its member now
        for i in range(KEYS):
            store.set(f"v/{i}", bytes([gen]) * SIZE)
        store.set(f"gen/{gen}", b"")               # the archive grows: dead bytes vary


def _state(path: Path) -> tuple[int, bool]:
    """The generation every key holds (fails on a mix), and whether the file ends in a
    torn tail that kvzarr did not read."""
    with ZipStore(path, read_only=True) as store:
        values = store.get_many([f"v/{i}" for i in range(KEYS)])
        torn = store._archive.end < path.stat().st_size
    return one_generation(values, SIZE), torn


def test_killed_appending_commits_leave_old_or_new_and_the_next_open_repairs(path: Path
                                                                            ) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ZipStore(path) as store:
        store.set_many([(f"v/{i}", bytes([0]) * SIZE) for i in range(KEYS)])
    current, torn_seen, committed = 0, 0, 0
    rng = random.Random(7)
    # the appends take ~20-60 ms
    for run in killed_runs(ctx, _generation, str(path), TRIALS,
                           lambda run: rng.uniform(0, 0.1)):
        state, torn = _state(path)
        torn_seen += torn
        assert state in (current, run)
        committed += state == run
        current = state
    assert torn_seen >= 2, "too few kills landed inside an append; the test proved little"
    assert committed >= 2, "too few commits finished before the kill"
    with ZipStore(path):                           # opening for writing cuts a torn tail
        pass
    assert _state(path) == (current, False)
    contents = zip_contents(path)
    assert {contents[f"v/{i}"][0] for i in range(KEYS)} == {current}


@pytest.mark.skipif(not writeback.available(), reason="no fdatasync on this system")
def test_a_large_durable_commit_flushes_its_members_early(path: Path) -> None:
    # every WRITEBACK_BYTES appended by one durable transaction the archive is flushed
    # on the store's thread; small commits never ask, and no-fsync stores never do
    big = [(f"big/{i}", bytes([i]) * (1 << 20))
           for i in range(2 * writeback.WRITEBACK_BYTES // (1 << 20) + 2)]
    with ZipStore(path) as store:
        wb = store._writeback
        for i in range(20):
            store.set(f"small/{i}", b"x" * 1000)
        wb.wait()
        assert wb.started == 0
        with store.transaction():
            for key, value in big:
                store.set(key, value)
        deadline = time.monotonic() + 10
        while wb.started < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert wb.started >= 1
    assert zip_contents(path) == {**{f"small/{i}": b"x" * 1000 for i in range(20)},
                                  **dict(big)}
    with ZipStore(path, fsync=False) as nosync:
        assert nosync._writeback is None
