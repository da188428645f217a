"""ZipStore beyond the conformance suite: the archive stays a plain zip (zipfile and
zarr-python read it), commits are atomic swaps, crashes and concurrent writers."""

from __future__ import annotations

import asyncio
import io
import multiprocessing
import os
import stat
import struct
import tempfile
import threading
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import zarr
import zarr.storage
from zarr.core.buffer import default_buffer_prototype

from kvzarr.stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest
from kvzarr.errors import (ChecksumMismatchError, ConflictError, InvalidKeyError, ReadOnlyError,
                           StoreError, UnsupportedOperationError)
from kvzarr.stores import zip as zipmod
from kvzarr.stores.zip import TEMP_MARKER, ZipStore

from .kill_trials import killed_runs, one_generation
from .payloads import increment


def temp_files(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if TEMP_MARKER in n]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "x.zip"


# --- the archive is a plain zip ---------------------------------------------------------

def test_overwrite_and_erase_leave_no_duplicates(path: Path) -> None:
    with ZipStore(path) as store:
        for i in range(5):
            store.set("a/b", b"version %d" % i)
        store.set_many([("c/0", b"zero"), ("c/1", b"one"), ("zarr.json", b"{}")])
        store.set("c/0", b"zero again")
        store.erase("c/1")
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            assert names == ["a/b", "c/0", "zarr.json"]        # sorted, one per key
            assert zf.testzip() is None
            assert zf.read("a/b") == b"version 4"
            assert zf.read("c/0") == b"zero again"
            assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


def test_zipfile_reads_unicode_names_and_empty_values(path: Path) -> None:
    with ZipStore(path) as store:
        store.set_many([("ü/日本", b"unicode"), ("empty", b""), ("bin", bytes(range(256)))])
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        assert zf.read("ü/日本") == b"unicode"
        assert zf.read("empty") == b""
        assert zf.read("bin") == bytes(range(256))
        assert zf.getinfo("ü/日本").flag_bits & 0x800          # UTF-8 name flag


def test_zarr_python_reads_an_array_we_wrote(path: Path) -> None:
    data = np.arange(20 * 30, dtype="int32").reshape(20, 30)
    source = zarr.storage.MemoryStore()
    arr = zarr.create_array(store=source, shape=data.shape, chunks=(7, 8), dtype="int32")
    arr[:] = data
    with ZipStore(path) as store:
        store.set_many((k, v.to_bytes()) for k, v in source._store_dict.items())
        store.set("c/0/0", source._store_dict["c/0/0"].to_bytes())      # an overwrite
    theirs = zarr.storage.ZipStore(path, mode="r")
    try:
        np.testing.assert_array_equal(zarr.open_array(theirs, mode="r")[:], data)
        got = asyncio.run(theirs.get("zarr.json", prototype=default_buffer_prototype()))
        assert got.to_bytes() == source._store_dict["zarr.json"].to_bytes()
    finally:
        theirs.close()


def test_we_read_and_clean_a_zarr_python_archive(path: Path) -> None:
    theirs = zarr.storage.ZipStore(path, mode="w")
    arr = zarr.create_array(store=theirs, shape=(10,), chunks=(5,), dtype="uint8",
                            compressors=None)
    arr[:] = np.arange(10, dtype="uint8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # zipfile warns about the duplicate name
        arr[:5] = 99                             # zarr-python appends a duplicate member
    theirs.close()
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist().count("c/0") == 2
    with ZipStore(path) as store:
        assert store.get("c/0") == bytes([99] * 5)               # the last entry wins
        assert list(store.list_dir("c/")) == ["0", "1"]
        store.set("extra", b"x")                                  # one commit
        with zipfile.ZipFile(path) as zf:
            assert sorted(zf.namelist()) == sorted(set(zf.namelist()))
            assert zf.testzip() is None
    np.testing.assert_array_equal(zarr.open_array(zarr.storage.ZipStore(path, mode="r"))[:],
                                  [99] * 5 + [5, 6, 7, 8, 9])


def test_foreign_members_are_kept_but_not_keys(path: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("a/", b"")                   # a directory entry
        zf.writestr("../evil", b"outside")       # a name no key can have
        zf.writestr("a/b", b"fine")
        zf.writestr("bz", b"bzip2 " * 100, compress_type=zipfile.ZIP_BZIP2)
    with ZipStore(path) as store:
        assert list(store.list()) == ["a/b", "bz"]
        assert store.get("bz") == b"bzip2 " * 100                # decoded by zipfile
        assert store.get_partial_values([("bz", RangeRequest(0, 5))]) == [b"bzip2"]
        store.set("c", b"new")
        with pytest.raises(InvalidKeyError):
            store.set("../evil", b"x")
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["../evil", "a/", "a/b", "bz", "c"]
        assert zf.getinfo("bz").compress_type == zipfile.ZIP_BZIP2   # copied, not recoded
        assert zf.testzip() is None
    assert sorted(os.listdir(tmp_path)) == ["x.zip", "x.zip.lock"]


class _Unseekable(io.RawIOBase):
    """A write-only stream: zipfile then writes data descriptors after each member."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:                                  # type: ignore[override]
        self.data += b
        return len(b)


def _foreign_archives(tmp_path: Path) -> list[Path]:
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as zf:
        zf.comment = b"comment"
        zf.writestr("stored", b"s" * 100)
        zf.writestr("deflated", b"d" * 1000, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("bz/2", b"b" * 1000, compress_type=zipfile.ZIP_BZIP2)
        zf.writestr("ünï/cödé", b"u")
        zf.writestr("dup", b"first")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zf.writestr("dup", b"second")
        with zf.open("forced64", "w", force_zip64=True) as f:
            f.write(b"z" * 10)
    prefixed = tmp_path / "prefixed.zip"                 # a stub prepended, as in an sfx
    prefixed.write_bytes(b"#!/bin/sh\necho stub\n" * 5 + plain.read_bytes())
    streamed = tmp_path / "streamed.zip"
    stream = _Unseekable()
    with zipfile.ZipFile(stream, "w") as zf:
        zf.writestr("a/b", b"streamed " * 50)
        zf.writestr("c", b"")
    streamed.write_bytes(bytes(stream.data))
    return [plain, prefixed, streamed]


def test_directory_reader_agrees_with_zipfile(tmp_path: Path) -> None:
    for archive in _foreign_archives(tmp_path):
        with zipfile.ZipFile(archive) as zf:
            expected = [(i.filename, i.header_offset, i.compress_type, i.CRC,
                         i.compress_size, i.file_size) for i in zf.infolist()]
            comment = zf.comment
            contents = {n: zf.read(n) for n in zf.namelist()}
        with open(archive, "rb") as f:
            entries, got_comment = zipmod._read_directory(f.fileno(), str(archive))
        assert [(m.name, m.header_offset, m.method, m.crc, m.csize, m.size)
                for m in entries] == expected, archive.name
        assert got_comment == comment
        with ZipStore(archive) as store:
            assert {k: store.get(k) for k in store.list()} == contents
            store.set("added", b"+")                  # rewrite: copies every member raw
        with zipfile.ZipFile(archive) as zf:
            assert zf.testzip() is None
            assert {n: zf.read(n) for n in zf.namelist() if n != "added"} == contents
            assert all(not i.flag_bits & 0x08 for i in zf.infolist())   # no descriptors


def test_zip64_when_over_65535_members(path: Path) -> None:
    n = 70_000
    with ZipStore(path, fsync=False) as store:
        store.set_many((f"c/{i}", i.to_bytes(4, "little")) for i in range(n))
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert len(names) == n
        assert zf.read("c/69999") == (69999).to_bytes(4, "little")
    with open(path, "rb") as f:
        assert zipmod._SIG_EOCD64 in f.read()[-200:]
    with ZipStore(path, read_only=True) as store:
        assert store.get("c/12345") == (12345).to_bytes(4, "little")
        assert len(list(store.list_prefix("c/"))) == n


def test_zip64_size_and_offset_fields(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Lowering the limit exercises the ZIP64 extra fields that archives past 2 GiB need.
    monkeypatch.setattr(zipmod, "_ZIP64_LIMIT", 100)
    values = {f"k{i}": bytes([i]) * (50 + 40 * i) for i in range(6)}
    with ZipStore(path) as store:
        store.set_many(values.items())
        store.set("k0", b"small")
        values["k0"] = b"small"
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        assert {n: zf.read(n) for n in zf.namelist()} == values
        assert zf.getinfo("k5").header_offset > 100
    with ZipStore(path, read_only=True) as store:
        assert {k: store.get(k) for k in store.list()} == values
        assert store.get_partial_values([("k5", SuffixRequest(3))]) == [bytes([5]) * 3]


def test_archive_comment_and_file_mode_kept(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.comment = b"made elsewhere"
        zf.writestr("a", b"1")
    os.chmod(path, 0o640)
    with ZipStore(path) as store:
        store.set("b", b"2")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    with zipfile.ZipFile(path) as zf:
        assert zf.comment == b"made elsewhere"


# --- reads ------------------------------------------------------------------------------

def _data_offset(path: Path, name: str) -> int:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        head = f.read(30)
    name_len, extra_len = struct.unpack_from("<2H", head, 26)
    return info.header_offset + 30 + name_len + extra_len


def test_range_reads_seek_into_the_member_and_full_reads_check_the_crc(path: Path) -> None:
    value = bytes(range(256)) * 64
    with ZipStore(path) as store:
        store.set("v", value)
    # Damage the member's first byte: ranges elsewhere are still served straight from the
    # file (so they never read the whole member), a whole read notices the damage.
    offset = _data_offset(path, "v")
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(b"\xff")
    os.utime(path, ns=(1, 1))                     # make the change visible as a new file
    with ZipStore(path, read_only=True) as store:
        assert store.get_partial_values([("v", RangeRequest(1000, 1010)),
                                         ("v", SuffixRequest(4)),
                                         ("v", OffsetRequest(16380))]) == [
            value[1000:1010], value[-4:], value[16380:]]
        with pytest.raises(ChecksumMismatchError) as err:
            store.get("v")
        assert err.value.key == "v"
        with pytest.raises(ChecksumMismatchError) as err:   # read straight into place
            store.read_many_into(["v"], bytearray(len(value)), len(value))
        assert err.value.key == "v"
        # a member of another length is not read: its length is the answer
        assert store.read_many_into(["v", "w"], bytearray(8), 4) == [len(value), None]


def test_read_many_into_reads_stored_and_deflated_members_in_place(path: Path) -> None:
    values = {f"k/{i}": np.random.default_rng(i).bytes(512) for i in range(6)}
    with ZipStore(path, compression=zipfile.ZIP_DEFLATED) as store:
        store.set_many(list(values.items())[:3])
    with ZipStore(path) as store:                     # stored members, appended
        store.set_many(list(values.items())[3:])
        keys = list(values) + ["k/missing"]
        buffer = bytearray(512 * len(keys))
        assert store.read_many_into(keys, buffer, 512) == [512] * 6 + [None]
        assert bytes(buffer[:512 * 6]) == b"".join(values.values())


def test_deflated_members(path: Path) -> None:
    text = b"a compressible value " * 5000
    noise = np.random.default_rng(1).bytes(4096)
    with ZipStore(path, compression=zipfile.ZIP_DEFLATED, compresslevel=9) as store:
        assert not store.capabilities.partial_reads
        store.set_many([("text", text), ("noise", noise), ("empty", b"")])
        assert store.get("text") == text
        assert store.get_partial_values([("text", RangeRequest(50_000, 50_021)),
                                         ("text", SuffixRequest(6)),
                                         ("noise", RangeRequest(10, 20))]) == [
            text[50_000:50_021], b"value ", noise[10:20]]
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("text").compress_type == zipfile.ZIP_DEFLATED
        assert zf.getinfo("text").compress_size < len(text) // 10
        assert zf.getinfo("noise").compress_type == zipfile.ZIP_STORED   # did not shrink
        assert zf.testzip() is None
    with ZipStore(path) as store:                 # a stored-mode handle copies them raw
        store.set("more", b"x")
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("text").compress_type == zipfile.ZIP_DEFLATED
        assert zf.read("text") == text


def test_bad_options_and_files(path: Path, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOperationError) as err:
        ZipStore(path, compression=zipfile.ZIP_LZMA)
    assert err.value.field == "compression"
    with pytest.raises(StoreError):
        ZipStore(tmp_path / "missing.zip", read_only=True)
    assert not (tmp_path / "missing.zip").exists()
    (tmp_path / "junk.zip").write_bytes(b"this is not a zip archive at all, honestly")
    with pytest.raises(StoreError) as err:
        ZipStore(tmp_path / "junk.zip")
    assert err.value.path == str(tmp_path / "junk.zip")
    (tmp_path / "blank.zip").write_bytes(b"")         # an unfinished writer's file
    with ZipStore(tmp_path / "blank.zip") as store:
        assert list(store.list()) == []
        store.set("a", b"1")
    with zipfile.ZipFile(tmp_path / "blank.zip") as zf:
        assert zf.namelist() == ["a"]


def test_encrypted_members_refused(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("a", b"1")
    raw = bytearray(path.read_bytes())
    central = raw.index(b"PK\x01\x02")
    raw[central + 8] |= 0x01                      # general purpose flag: encrypted
    path.write_bytes(bytes(raw))
    with pytest.raises(StoreError) as err:
        ZipStore(path, read_only=True)
    assert err.value.key == "a"


def test_read_only_store_writes_nothing(path: Path) -> None:
    with ZipStore(path) as store:
        store.set("a", b"1")
    before = path.read_bytes()
    with ZipStore(path, read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.set("b", b"2")
        with pytest.raises(ReadOnlyError):
            ro.erase("a")
    assert path.read_bytes() == before


# --- transactions and the atomic swap ---------------------------------------------------

def test_failed_transaction_leaves_archive_byte_identical(path: Path) -> None:
    with ZipStore(path) as store:
        store.set_many([("a", b"1"), ("b", b"2")])
        before, ino = path.read_bytes(), os.stat(path).st_ino
        with pytest.raises(KeyError):
            with store.transaction():
                store.set("a", b"changed")
                store.erase("b")
                store.set("c", b"3")
                raise KeyError("abort")
        assert path.read_bytes() == before
        assert os.stat(path).st_ino == ino
        assert temp_files(path.parent) == []
        assert store.get_many(["a", "b", "c"]) == [b"1", b"2", None]


def test_batches_are_one_rewrite(path: Path) -> None:
    with ZipStore(path, fsync=False) as store:
        start = store._commits
        store.set_many((f"k/{i % 10}/{i}", b"%d" % i) for i in range(10_000))
        assert store._commits == start + 1
        with store.transaction():
            for i in range(100):
                store.set(f"t/{i}", b"t")
            store.erase_prefix("k/1/")
            store.erase_values(["k/2/2", "k/3/3"])
        assert store._commits == start + 2
        store.erase("no/such/key")                 # changes nothing: no rewrite
        with store.transaction():
            pass
        assert store._commits == start + 2
    with zipfile.ZipFile(path) as zf:
        assert len(zf.namelist()) == 10_000 - 1000 - 2 + 100


def test_a_second_handle_sees_each_commit(path: Path) -> None:
    with ZipStore(path) as a, ZipStore(path) as b:
        a.set("k", b"1")
        assert b.get("k") == b"1"
        b.set("k2", b"2")
        assert list(a.list()) == ["k", "k2"]
        with a.transaction(write=False):           # a read transaction is a snapshot
            b.set("k", b"changed")
            assert a.get("k") == b"1"
            assert list(a.list()) == ["k", "k2"]
        assert a.get("k") == b"changed"


def test_other_threads_do_not_see_an_open_transaction(path: Path) -> None:
    with ZipStore(path) as store:
        store.set("k", b"old")
        inside, done = threading.Event(), threading.Event()
        seen = []

        def reader() -> None:
            inside.wait(10)
            seen.append((store.get("k"), list(store.list())))
            done.set()

        t = threading.Thread(target=reader)
        t.start()
        with store.transaction():
            store.set("k", b"new")
            store.set("k2", b"new")
            inside.set()
            assert done.wait(10)                   # readers are never blocked by a writer
        t.join()
        assert seen == [(b"old", ["k"])]
        assert store.get_many(["k", "k2"]) == [b"new", b"new"]


def test_threads_sharing_a_handle_do_not_lose_updates(path: Path) -> None:
    with ZipStore(path, fsync=False) as store:
        store.set("counter", b"0")

        def work() -> None:
            for _ in range(25):
                with store.transaction():
                    increment(store)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.get("counter") == b"100"


def test_writer_lock_timeout(path: Path) -> None:
    with ZipStore(path) as a, ZipStore(path, lock_timeout=0.2) as b:
        with a.transaction():
            a.set("a", b"1")
            t0 = time.monotonic()
            with pytest.raises(ConflictError):
                b.set("b", b"2")
            assert 0.15 < time.monotonic() - t0 < 5
        b.set("b", b"2")
        assert a.get_many(["a", "b"]) == [b"1", b"2"]


def test_stale_temp_archive_removed_by_next_writer(path: Path) -> None:
    with ZipStore(path) as store:
        store.set("a", b"1")
    stale = path.parent / f".{path.name}{TEMP_MARKER}0123abcd"
    stale.write_bytes(b"half an archive")
    other = path.parent / f".other.zip{TEMP_MARKER}0123abcd"   # not this archive's
    other.write_bytes(b"x")
    with ZipStore(path, read_only=True) as ro:     # readers never delete
        assert ro.get("a") == b"1"
    assert stale.exists()
    with ZipStore(path) as store:
        assert store.get("a") == b"1"
    assert not stale.exists()
    assert other.exists()


# --- processes ----------------------------------------------------------------------------

KEYS, SIZE = 8, 256 << 10
KILLS = 100


def _generation(path: str, gen: int, ready, go=None) -> None:
    store = ZipStore(path)
    if go is not None:
        go.wait(60)
    with store.transaction():
        for i in range(KEYS):
            store.set(f"v/{i}", bytes([gen]) * SIZE)
        ready.set()                                # the commit starts when the block ends


def _state(path: Path) -> int:
    """The generation every key holds; fails on a mix of generations."""
    with ZipStore(path, read_only=True) as store:
        return one_generation(store.get_many([f"v/{i}" for i in range(KEYS)]), SIZE)


def test_killed_commit_leaves_old_or_new_archive(path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    t0 = time.monotonic()
    ready = ctx.Event()
    _generation(str(path), 0, ready)              # generation 0, and the commit's duration
    commit = max(time.monotonic() - t0, 0.02)
    current, mid_commit = 0, 0
    # killed from "before the commit starts" to "after it ends"
    for run in killed_runs(ctx, _generation, str(path), KILLS,
                           lambda run: commit * (run % 10) / 8):
        mid_commit += bool(temp_files(path.parent))
        state = _state(path)
        assert state in (current, run)
        current = state
    assert mid_commit >= 1, "no kill landed inside a commit; the test proved nothing"
    with ZipStore(path) as store:                  # the next writer cleans up
        store.set("after", b"ok")
    assert temp_files(path.parent) == []
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None


def _committer(path: str, name: str, n: int) -> None:
    store = ZipStore(path, fsync=False)
    for i in range(n):
        with store.transaction():
            store.set(f"{name}/{i}", b"%d" % i)
            increment(store)   # read-modify-write under the lock
    store.close()


def test_two_processes_commit_without_losing_updates(path: Path) -> None:
    ZipStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_committer, args=(str(path), name, 50)) for name in "pq"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with ZipStore(path, read_only=True) as store:
        assert store.get("counter") == b"100"
        for name in "pq":
            assert list(store.list_dir(f"{name}/")) == sorted(str(i) for i in range(50))
    with zipfile.ZipFile(path) as zf:
        assert len(zf.namelist()) == 101


# --- against a model ------------------------------------------------------------------------

_SEGMENTS = st.sampled_from(["a", "b", "B", "a.b", "a0", "ü", "z"])
_KEYS = st.lists(_SEGMENTS, min_size=1, max_size=3).map("/".join)
_OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), _KEYS, st.binary(max_size=40)),
    st.tuples(st.just("erase"), _KEYS, st.none()),
    st.tuples(st.just("erase_prefix"), _KEYS.map(lambda k: k + "/"), st.none()),
    st.tuples(st.just("aborted set"), _KEYS, st.binary(max_size=8)),
), max_size=12)


def _expected_dir(model: dict[str, bytes], prefix: str) -> list[str]:
    out = set()
    for key in model:
        if key.startswith(prefix):
            rest = key[len(prefix):]
            out.add(rest if "/" not in rest else rest[:rest.index("/") + 1])
    return sorted(out)


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(_OPS, min_size=1, max_size=4))
def test_matches_a_dict_model(batches: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.zip"
        model: dict[str, bytes] = {}
        with ZipStore(path, fsync=False) as store:
            for batch in batches:
                before = dict(model)
                try:
                    with store.transaction():
                        for op, key, value in batch:
                            if op == "set":
                                store.set(key, value)
                                model[key] = value
                            elif op == "erase":
                                store.erase(key)
                                model.pop(key, None)
                            elif op == "erase_prefix":
                                store.erase_prefix(key)
                                model = {k: v for k, v in model.items()
                                         if not k.startswith(key)}
                            else:
                                raise RuntimeError("abort this batch")
                except RuntimeError:
                    model = before                    # the whole batch rolled back
                assert {k: store.get(k) for k in store.list()} == model
            for prefix in ["", "a/", "a/b/", "ü/"]:
                assert list(store.list_dir(prefix)) == _expected_dir(model, prefix)
                assert list(store.list_prefix(prefix)) == sorted(
                    k for k in model if k.startswith(prefix))
        with zipfile.ZipFile(path) as zf:
            assert zf.namelist() == sorted(model)
            assert {n: zf.read(n) for n in zf.namelist()} == model


def test_large_members_read_ahead_on_the_pool_in_order_and_checked(path: Path) -> None:
    """iter_values reads members of 64 KiB and more on the worker threads: every value in
    its place, pending writes of the transaction seen, and a damaged member is still a
    ChecksumMismatchError (raised from the thread that found it)."""
    rng = np.random.default_rng(4)
    values = {f"c/{i}": rng.integers(0, 256, 70_000 + i, dtype=np.uint8).tobytes()
              for i in range(16)}
    keys = [*values, "c/missing"]
    assert min(map(len, values.values())) >= zipmod._READ_AHEAD_VALUE_BYTES
    with ZipStore(path, fsync=False) as store:
        store.set_many(list(values.items()))
        with store.transaction(write=False):
            got = dict(store.iter_values(keys))
        assert [got[i] for i in range(len(keys))] == [*values.values(), None]
        with store.transaction():
            store.set("c/3", b"pending" * 20_000)
            store.erase("c/4")
            got = dict(store.iter_values(keys))
        assert got[3] == b"pending" * 20_000 and got[4] is None and got[5] == values["c/5"]
        m = store._archive.members["c/9"]
        offset = store._archive.data_offset(m) + 1000
    with open(path, "r+b") as f:                 # one byte of c/9 flipped on disk
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    with ZipStore(path, read_only=True) as store:
        with store.transaction(write=False):
            with pytest.raises(ChecksumMismatchError) as info:
                list(store.iter_values(keys))
        assert info.value.key == "c/9"
