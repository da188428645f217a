"""Named regression tests of hostile input at the store boundary: byte ranges past 2**31,
2**32 and 2**63, damaged and truncated store files (read in a separate process: a
damaged LMDB file once killed the reader with SIGBUS), names that are not Unicode text
or too long for a file name, values and keys another program wrote. Each input is
written out; the fuzz targets in tests/fuzz/ search around them."""

from __future__ import annotations

import errno
import os
import sqlite3
import struct
import tracemalloc
import warnings
import zipfile
import zlib
from pathlib import Path

import lmdb
import pytest

import kvzarr
from kvzarr.errors import (ChecksumMismatchError, InvalidKeyError, InvalidStoredKeyWarning,
                           KvzarrError, StoreError, UnsupportedOperationError)
from kvzarr.stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest
from kvzarr.stores.filesystem import FilesystemStore
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.sql import SQLStore
from kvzarr.stores.zip import ZipStore

from .damage import (CONTENT, Reader, check_outcome, damaged_copy, digest, flippable,
                     make_store_file)

POSTGRES = os.environ.get("KVZARR_TEST_POSTGRES_URL")


@pytest.fixture(scope="module")
def reader():
    r = Reader()
    yield r
    r.close()


# --- byte ranges ------------------------------------------------------------------------

def _sql_stores(tmp_path: Path) -> list[SQLStore]:
    stores = [SQLStore(tmp_path / "x.sqlite")]
    if POSTGRES:
        stores.append(SQLStore(POSTGRES, table=f"t_{os.getpid()}_{id(tmp_path) % 10**6}"))
    return stores


def test_sqlite_substr_offset_past_2_31_is_not_truncated(tmp_path):
    """substr() reads its arguments as 32-bit ints: RangeRequest(2**32, 2**32 + 4) on a
    10-byte value read bytes 0-3. Every offset of 2**31 or more now reads nothing."""
    for store in _sql_stores(tmp_path):
        try:
            store.set("v", b"0123456789")
            assert store.get_partial_values([("v", RangeRequest(2**32, 2**32 + 4))]) == [b""]
            assert store.get_partial_values([
                ("v", RangeRequest(2**31, 2**31 + 4)), ("v", RangeRequest(2**32 + 3, 2**33)),
                ("v", OffsetRequest(2**32)), ("v", OffsetRequest(2**32 + 2)),
                ("v", RangeRequest(2**31 - 1, 2**31 + 1)), ("v", RangeRequest(2, 2**32 + 5)),
                ("v", SuffixRequest(2**32 + 2)), ("v", RangeRequest(2**63, 2**64)),
            ]) == [b"", b"", b"", b"", b"", b"23456789", b"0123456789", b""]
        finally:
            if POSTGRES and store.table != "kvzarr":
                with store.engine.begin() as conn:
                    conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{store.table}"')
            store.close()


def test_sql_partial_write_past_the_largest_value_is_refused(tmp_path):
    """A partial write whose end no SQL value can reach fails before any SQL runs (its
    offset would have been truncated by substr() too); the value is unchanged."""
    with SQLStore(tmp_path / "x.sqlite") as store:
        store.set("v", b"0123456789")
        for offset in (2**31 - 1, 2**32, 2**32 + 2):
            with pytest.raises(StoreError):
                store.set_partial_values([("v", offset, b"xy")])
        assert store.get("v") == b"0123456789"


def test_filesystem_range_reads_past_4_gib_on_a_sparse_value(tmp_path):
    """A real value of more than 4 GiB (a sparse file: it costs no disk) read at offsets
    past 2**31 and 2**32, where a 32-bit offset anywhere would read other bytes."""
    store = FilesystemStore(tmp_path / "data")
    store.set("big", b"")
    path = tmp_path / "data" / "big"
    size = 2**32 + 64
    with open(path, "r+b") as f:
        f.truncate(size)
        for at, mark in ((0, b"HEAD"), (2**31, b"AT31"), (2**32, b"AT32"), (size - 4, b"TAIL")):
            f.seek(at)
            f.write(mark)
    try:
        assert store.getsize("big") == size
        got = store.get_partial_values([
            ("big", RangeRequest(0, 4)), ("big", RangeRequest(2**31, 2**31 + 4)),
            ("big", RangeRequest(2**32, 2**32 + 4)), ("big", SuffixRequest(4)),
            ("big", OffsetRequest(size - 4)), ("big", RangeRequest(size, size + 4)),
            ("big", RangeRequest(2**33, 2**33 + 4)), ("big", RangeRequest(2**63, 2**64))])
        assert got == [b"HEAD", b"AT31", b"AT32", b"TAIL", b"TAIL", b"", b"", b""]
    finally:
        path.unlink()


# --- damaged store files ------------------------------------------------------------------

def test_truncated_lmdb_file_raises_instead_of_sigbus(tmp_path, reader):
    """An LMDB file cut at 8192, 12288, 16380 bytes... killed the process with SIGBUS on
    the first read. It now fails to open with StoreError (its meta page claims pages the
    file does not have), read in a separate process so a signal would show."""
    original = make_store_file("lmdb", tmp_path / "orig")
    size = original.stat().st_size
    assert size > 16384
    cuts = sorted({0, 100, 4095, 4096, 8191, 8192, 12288, 16380, 16384, size // 2,
                   size - 4096, size - 1})
    for cut in cuts:
        path = damaged_copy(original, tmp_path / f"cut{cut}" / "x.lmdb", cut=cut)
        answer = reader.read("lmdb", path)
        check_outcome(answer, f"LMDB file cut at {cut}")
        if 0 < cut < size:
            assert answer.get("open_error") == "StoreError", (cut, answer)


def test_lmdb_meta_page_damage_raises_or_reads_correct_data(tmp_path, reader):
    """Bits flipped in the meta pages (page size, last page, root page, magic, txnid):
    a StoreError at open, or correct data (an older snapshot may have fewer keys)."""
    original = make_store_file("lmdb", tmp_path / "orig")
    psize = struct.unpack_from("=I", original.read_bytes(), 16 + 24)[0]
    fields = [16, 20, 16 + 24, 16 + 64, 16 + 112, 16 + 120, 16 + 128, 10]   # see meta.py
    for meta in (0, psize):
        for field in fields:
            for mask in (0x01, 0x10, 0x80):
                at = meta + field
                path = damaged_copy(original, tmp_path / "flip" / "x.lmdb", flips=[(at, mask)])
                check_outcome(reader.read("lmdb", path), f"LMDB byte {at} ^ {mask:#x}")


def test_damaged_sqlite_file_raises_store_error(tmp_path, reader):
    """A SQLite file cut short, or not a database at all, is a StoreError ("file is not
    a database", "database disk image is malformed" translated), never a crash."""
    original = make_store_file("sqlite", tmp_path / "orig")
    size = original.stat().st_size
    for cut in sorted({1, 50, 99, 100, 4096, 16384, 16385, size // 2, size - 1}):
        path = damaged_copy(original, tmp_path / f"cut{cut}" / "x.sqlite", cut=cut)
        answer = reader.read("sqlite", path)
        check_outcome(answer, f"SQLite file cut at {cut}")
        if cut < 16384 * 2:
            assert "open_error" in answer or any(
                v.startswith("error:") for v in answer["values"].values()) or \
                not answer["keys"], (cut, answer)
    junk = tmp_path / "junk" / "x.sqlite"
    junk.parent.mkdir()
    junk.write_bytes(b"this is not a database" * 1000)
    with pytest.raises(StoreError, match="not a SQLite database"):
        SQLStore(junk, read_only=True)
    for at in range(0, 100):
        path = damaged_copy(original, tmp_path / "flip" / "x.sqlite", flips=[(at, 0x41)])
        check_outcome(reader.read("sqlite", path), f"SQLite header byte {at} ^ 0x41")


def test_sqlite_file_cut_mid_page_with_its_change_counter_flipped_is_refused(tmp_path):
    """Regression (found by the long fuzz run): a SQLite file cut inside a page, whose
    header's change counter no longer matches its version-valid-for number (so SQLite
    ignores the page count in the header), read the pages past the cut as zeros: a
    value whose overflow pages were cut off came back wrong, with no error. A file that
    is not a whole number of pages, or shorter than a valid header counts, is refused
    when the store opens, and a whole file still opens."""
    original = make_store_file("sqlite", tmp_path / "orig")
    size = original.stat().st_size
    page = int.from_bytes(original.read_bytes()[16:18], "big")
    assert size % page == 0 and size // page >= 3
    cut = size - 2 * page + 921                     # inside the second-to-last page
    path = damaged_copy(original, tmp_path / "cut" / "x.sqlite", cut=cut, flips=[(24, 1)])
    with pytest.raises(StoreError, match="cut short: .* whole number"):
        SQLStore(path, read_only=True)
    whole_pages = damaged_copy(original, tmp_path / "pages" / "x.sqlite",
                               cut=size - page)     # the header still counts every page
    with pytest.raises(StoreError, match="cut short: its header counts"):
        SQLStore(whole_pages, read_only=True)
    with SQLStore(original, read_only=True) as store:
        assert sorted(store.list()) == sorted(CONTENT)


def test_truncated_zip_archive_raises_store_error(tmp_path, reader):
    original = make_store_file("zip", tmp_path / "orig")
    size = original.stat().st_size
    for cut in sorted({1, 21, 22, 100, size // 3, size // 2, size - 23, size - 22, size - 1}):
        path = damaged_copy(original, tmp_path / f"cut{cut}" / "x.zip", cut=cut)
        answer = reader.read("zip", path)
        check_outcome(answer, f"zip archive cut at {cut}")
        assert answer.get("open_error") == "StoreError", (cut, answer)


def _zip_with_member(path: Path, method: int, data: bytes, declared: bytes) -> Path:
    """An archive whose one member ``m`` is declared with compression ``method`` and
    the size and CRC of ``declared``, holding ``data`` as its compressed bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("m", data)
        z.writestr("ok", b"fine")
    raw = bytearray(path.read_bytes())
    for sig, method_at, crc_at in ((b"PK\x03\x04", 8, 14), (b"PK\x01\x02", 10, 16)):
        at = raw.find(sig)                    # the first header of each kind is m's
        struct.pack_into("<H", raw, at + method_at, method)
        struct.pack_into("<LLL" if sig == b"PK\x03\x04" else "<LLL", raw, at + crc_at,
                         zlib.crc32(declared), len(data), len(declared))
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA,
                                    zipfile.ZIP_DEFLATED])
@pytest.mark.parametrize("data", [b"", b"x", b"not compressed at all" * 20,
                                  b"BZh91AY&SY" + bytes(40), b"\x09\x04\x05\x00" + bytes(30)],
                         ids=["empty", "one-byte", "text", "bzip2-header", "lzma-header"])
def test_zip_member_declared_compressed_holding_other_data_raises_kvzarr_error(
        tmp_path, method, data):
    """A member declared bzip2 (or LZMA, or deflate) that holds other data raised
    OSError, EOFError or zlib.error; now a kvzarr error of that key, and the archive's
    other members still read."""
    path = _zip_with_member(tmp_path / "x.zip", method, data, b"the declared value")
    with ZipStore(path, read_only=True) as store:
        with pytest.raises((ChecksumMismatchError, StoreError)) as caught:
            store.get("m")
        assert caught.value.key == "m"
        with pytest.raises(KvzarrError):
            store.get_partial_values([("m", RangeRequest(0, 4))])
        assert store.get("ok") == b"fine"


def test_zip_member_of_unknown_method_is_unsupported(tmp_path):
    path = _zip_with_member(tmp_path / "x.zip", 9, b"deflate64 data", b"value")
    with ZipStore(path, read_only=True) as store:
        with pytest.raises(UnsupportedOperationError):
            store.get("m")


def test_zip_members_of_other_tools_compressions_still_read(tmp_path):
    for method in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA, zipfile.ZIP_DEFLATED):
        path = tmp_path / f"{method}.zip"
        with zipfile.ZipFile(path, "w", method) as z:
            z.writestr("a/b", bytes(range(256)) * 100)
        with ZipStore(path, read_only=True) as store:
            assert store.get("a/b") == bytes(range(256)) * 100
            assert store.get_partial_values([("a/b", RangeRequest(250, 260))]) == \
                [(bytes(range(256)) * 100)[250:260]]


def test_zip_member_that_inflates_past_its_size_stops_at_its_size(tmp_path):
    """A deflate member declaring 10 bytes whose data inflates to 64 MiB: decoded no
    further than its declared size (then refused by its CRC), never inflated whole."""
    bomb = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = bomb.compress(bytes(64 << 20)) + bomb.flush()
    path = _zip_with_member(tmp_path / "x.zip", zipfile.ZIP_DEFLATED, data, bytes(10))
    with ZipStore(path, read_only=True) as store:
        tracemalloc.start()
        try:
            for read in (lambda: store.get("m"),
                         lambda: store.get_partial_values([("m", RangeRequest(0, 10))])):
                try:
                    read()
                except ChecksumMismatchError:
                    pass
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 << 20, peak


def test_zip_directory_claiming_more_than_the_file_raises_store_error(tmp_path):
    """Sizes in the directory that the file cannot hold (a ZIP64 central directory of
    2**60 bytes, a stored member of 2**40) fail the open, not a read of 2**60 bytes."""
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a", b"12345")
    raw = bytearray(path.read_bytes())
    cd = raw.find(b"PK\x01\x02")
    struct.pack_into("<L", raw, cd + 24, 2**32 - 2)      # uncompressed size of "a"
    bad = tmp_path / "bad.zip"
    bad.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match="cannot hold"):
        ZipStore(bad, read_only=True)
    raw = bytearray(path.read_bytes())
    eocd = raw.rfind(b"PK\x05\x06")
    struct.pack_into("<L", raw, eocd + 12, 2**31)          # central directory size
    bad.write_bytes(bytes(raw))
    with pytest.raises(StoreError):
        ZipStore(bad, read_only=True)


# --- values and keys another program wrote --------------------------------------------------

def test_sql_value_stored_as_text_is_refused(tmp_path):
    """A value stored as TEXT (or INTEGER, REAL) by another program raised TypeError, or
    read an INTEGER 5 as five zero bytes; every read of it is now a StoreError naming the
    key, and the other values read as before."""
    path = tmp_path / "x.sqlite"
    with SQLStore(path) as store:
        store.set_many([("ok", b"fine"), ("zarr.json", b"{}")])
    with sqlite3.connect(path) as db:
        db.executemany('INSERT INTO "kvzarr" (k, v) VALUES (?, ?)',
                       [("t", "text value é"), ("i", 5), ("r", 2.5), ("e", "")])
    with SQLStore(path) as store:
        for key in ("t", "i", "r", "e"):
            for read in (lambda: store.get(key), lambda: store.get_many([key, "ok"]),
                         lambda: store.get_many([key]), lambda: store.getsize(key),
                         lambda: store.get_partial_values([(key, RangeRequest(0, 3))]),
                         lambda: store.get_partial_values([(key, None), ("ok", None)]),
                         lambda: list(store.iter_values([key, "ok"]))):
                with pytest.raises(StoreError, match="not as a BLOB") as caught:
                    read()
                assert caught.value.key == key
            assert store.exists(key)
        assert store.get_many(["ok", "zarr.json"]) == [b"fine", b"{}"]
        assert store.getsize("ok") == 4


@pytest.mark.parametrize("name", ["a\ud800", "\udc80", "x/\udfff/y", "\ud83d\ude00\ud800"])
def test_lone_surrogate_names_are_invalid_on_every_store(store_factory, name):
    """'a\\ud800' was a UnicodeEncodeError on every file-backed store and a valid name
    on MemoryStore; now InvalidKeyError on all of them, and nothing is written."""
    store = store_factory.make()
    root = kvzarr.open_group(store, mode="w")
    for make in (lambda: root.create_group(name), lambda: root.create_array(
            name, shape=(2,), dtype="i1"), lambda: kvzarr.create_group(store, path=name),
            lambda: kvzarr.open_group(store, path=name, mode="r"),
            lambda: root[name]):
        with pytest.raises(InvalidKeyError):
            make()
    assert list(store.list()) == ["zarr.json"]


def test_directory_store_overlong_names_in_exists_listing_and_erase_prefix(tmp_path):
    """exists, listing and erase_prefix raised OSError ENAMETOOLONG for a name too long
    for the filesystem, where get and set raised StoreError; every operation now says
    InvalidKeyError, for a segment over max_segment_bytes and for one over the OS's own
    limits alike."""
    store = FilesystemStore(tmp_path / "data")
    store.set("a/b", b"1")
    for name in ("n" * 256, "n" * 211, "n" * 5000, "/".join(["d" * 200] * 30)):
        key = f"a/{name}"
        for op in (lambda: store.exists(key), lambda: store.get(key),
                   lambda: store.set(key, b"x"), lambda: store.getsize(key),
                   lambda: store.erase(key), lambda: list(store.list_prefix(key + "/")),
                   lambda: list(store.list_dir(key + "/")),
                   lambda: store.erase_prefix(key + "/")):
            with pytest.raises(InvalidKeyError):
                op()
    longest = "a/" + "n" * store.max_segment_bytes       # the longest name: all works
    store.set(longest, b"2")
    assert store.exists(longest) and store.get(longest) == b"2"
    assert list(store.list_prefix("a/")) == ["a/b", longest]


def _invalid_keys_written_by_another_program(kind: str, tmp_path: Path):
    """A store of ``kind`` holding a group 'a' and the invalid keys '/x/zarr.json',
    'a//zarr.json', 'a/b//c' written under the store's feet; returns the store."""
    group = b'{"zarr_format": 3, "node_type": "group", "attributes": {}}'
    valid = {"zarr.json": group, "a/zarr.json": group}
    invalid = ["/x/zarr.json", "a//zarr.json", "a/b//c"]
    if kind == "sql":
        store = SQLStore(tmp_path / "x.sqlite")
        store.set_many(valid.items())
        with sqlite3.connect(tmp_path / "x.sqlite") as db:
            db.executemany('INSERT INTO "kvzarr" (k, v) VALUES (?, ?)',
                           [(k, group) for k in invalid + ["a\\b/zarr.json"]])
        return store
    store = LMDBStore(tmp_path / "x.lmdb")
    store.set_many(valid.items())
    store.close()
    env = lmdb.open(str(tmp_path / "x.lmdb"), subdir=False, lock=True, map_size=1 << 24)
    with env.begin(write=True) as txn:
        for k in invalid:
            txn.put(k.encode(), group)
        txn.put(b"a/\xff/zarr.json", group)                      # not UTF-8
    env.close()
    return LMDBStore(tmp_path / "x.lmdb")


@pytest.mark.parametrize("kind", ["sql", "lmdb"])
def test_store_holding_invalid_keys_lists_no_empty_child(tmp_path, kind):
    """An SQL or LMDB store holding '/x/zarr.json' and 'a//zarr.json' listed a child
    named '' and members(max_depth=None) recursed forever. The listings now leave such
    keys out with an InvalidStoredKeyWarning, and the hierarchy is the valid part."""
    store = _invalid_keys_written_by_another_program(kind, tmp_path)
    with store:
        with pytest.warns(InvalidStoredKeyWarning):
            keys = list(store.list())
        assert keys == ["a/zarr.json", "zarr.json"]
        with pytest.warns(InvalidStoredKeyWarning):
            assert list(store.list_dir("")) == ["a/", "zarr.json"]
        with pytest.warns(InvalidStoredKeyWarning):
            assert list(store.list_dir("a/")) == ["b/", "zarr.json"]   # b/ holds a/b//c
        with pytest.warns(InvalidStoredKeyWarning):
            assert list(store.list_prefix("a/")) == ["a/zarr.json"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InvalidStoredKeyWarning)
            root = kvzarr.open_group(store, mode="r")
            assert [name for name, _ in root.members(max_depth=None)] == ["a"]
            assert root.tree().splitlines() == ["/", "  a"]


def test_filesystem_names_that_are_not_keys_are_skipped(tmp_path):
    """Files other programs put under the root with names no key can have (a backslash,
    bytes that are not UTF-8) are left out of listings with a warning."""
    store = FilesystemStore(tmp_path / "data")
    store.set("a/zarr.json", b"{}")
    (tmp_path / "data" / "a" / "back\\slash").write_bytes(b"x")
    try:
        os.mkdir(os.path.join(os.fsencode(tmp_path / "data" / "a"), b"\xff"))
    except OSError as e:           # a filesystem that refuses names that are not UTF-8
        assert e.errno in (errno.EILSEQ, errno.EINVAL)
    with pytest.warns(InvalidStoredKeyWarning):
        assert list(store.list_dir("a/")) == ["zarr.json"]
    with pytest.warns(InvalidStoredKeyWarning):
        assert list(store.list()) == ["a/zarr.json"]


def test_node_names_under_the_reserved_prefix_are_refused(tmp_path):
    store = kvzarr.MemoryStore()
    root = kvzarr.open_group(store, mode="w")
    for name in ("__kvzarr", "__kvzarr/crc", "/__kvzarr/x/"):
        with pytest.raises(InvalidKeyError):
            root.create_group(name)
        with pytest.raises(InvalidKeyError):
            kvzarr.create_array(store, name=name, shape=(1,), dtype="i1")
    root.create_group("__kvzarr_not_reserved")        # only the prefix itself is
    assert list(store.list()) == ["__kvzarr_not_reserved/zarr.json", "zarr.json"]


def test_store_file_content_is_what_the_oracle_expects(tmp_path, reader):
    """The damage tests' oracle against undamaged files: every key, value, size and
    range read back exactly (so a damaged file that passes really read right)."""
    for kind in ("lmdb", "sqlite", "zip"):
        path = make_store_file(kind, tmp_path / kind)
        answer = reader.read(kind, path)
        check_outcome(answer, kind)
        assert sorted(answer["keys"]) == sorted(CONTENT)
        assert answer["values"] == {k: digest(v) for k, v in CONTENT.items()}
        assert flippable(kind, path)
