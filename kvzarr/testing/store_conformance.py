"""The store conformance suite: the contract of :mod:`kvzarr.stores.base` (Zarr v3 core
spec, "Abstract store interface") as pytest tests, for every store and transformer stack.

Subclass :class:`StoreConformance` in a test module and provide a ``store`` fixture that
yields an empty, writable store (and closes it afterwards)::

    import pytest
    from kvzarr.testing import StoreConformance
    from kvzarr.stores.filesystem import FilesystemStore

    class TestFilesystem(StoreConformance):
        @pytest.fixture
        def store(self, tmp_path):
            with FilesystemStore(tmp_path / "data") as s:
                yield s

        def reopen(self, store, *, read_only):
            return FilesystemStore(store.root, read_only=read_only)

Tests that need an optional capability skip by ``store.capabilities`` only, never by the
store's type. ``reopen`` (optional) returns a new handle on the data of a closed store;
without it the read-only tests build ``type(store)(read_only=True)``.
"""

from __future__ import annotations

import array
import pickle
import threading
from typing import Any

import numpy as np
import pytest

from ..stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest
from ..errors import (AppendConflictError, ConflictError, InvalidByteRangeError,
                      InvalidKeyError, NotPicklableError, ReadOnlyError, StoreClosedError,
                      UnsupportedOperationError, ValueTypeError)
from ..stores.base import Store
from ..transformers.base import stack_layers

#: Keys every store must refuse with InvalidKeyError.
BAD_KEYS: list[Any] = [
    "", ".", "..", "a/..", "../a", "a/../b", "a/./b", "./a", "/a", "/", "a/", "a//b",
    "a\x00b", "a\\b", "..\\a", 1, b"a", None, ("a",),
    # lone surrogates: not Unicode text, so no encoding (and no store) can hold them
    "a\ud800", "\udc80/b", "x/\udfff", "\ud83d",
]
#: Prefixes every store must refuse (a prefix is "" or a valid key followed by "/").
BAD_PREFIXES: list[Any] = ["a", "/", "a//", "../", "./", "/a/", "a/../", "a\\/", 1, b"a/",
                           "a\ud800/", "\udcff/"]

#: Unicode keys, including a pair that differ only in normalisation (NFC/NFD) and a pair
#: that sort differently in code points than in UTF-16 units.
UNICODE_KEYS = ["ü", "日本/語", "\U0001F600", "\uff5e", "é", "e\u0301", "a/Ω/b"]

ALL_BYTES = bytes(range(256)) * 17


def dump(store: Store) -> dict[str, bytes | None]:
    """Every key and value of a store (what "unchanged" is compared on)."""
    return {k: store.get(k) for k in store.list()}


def _write_ops() -> list[tuple[str, Any]]:
    """Every write operation of the interface, each as (name, store -> None)."""
    return [
        ("set", lambda s: s.set("w/new", b"x")),
        ("set existing", lambda s: s.set("a/b", b"changed")),
        ("set_many", lambda s: s.set_many([("w/1", b"1"), ("w/2", b"2")])),
        ("set_partial_values", lambda s: s.set_partial_values([("a/b", 0, b"Z")])),
        ("erase", lambda s: s.erase("a/b")),
        ("erase missing", lambda s: s.erase("nope")),
        ("erase_values", lambda s: s.erase_values(["a/b", "c"])),
        ("erase_prefix", lambda s: s.erase_prefix("a/")),
        ("erase_prefix root", lambda s: s.erase_prefix("")),
        ("append", lambda s: s.append("a/b", b"more", expected_size=2)),
        ("write transaction", lambda s: s.transaction().__enter__()),
        ("key_lock", lambda s: s.key_lock(["a/b"]).__enter__()),
    ]


class StoreConformance:
    """Every promise of the Store interface. See the module docstring for how to use it."""

    @pytest.fixture
    def store(self) -> Store:          # pragma: no cover - subclasses provide it
        raise NotImplementedError("subclass StoreConformance and provide a store fixture")

    def reopen(self, store: Store, *, read_only: bool) -> Store | None:
        """A new handle on the data of ``store`` (already closed), or None when the data
        does not outlive its handle."""
        return None

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def require(store: Store, capability: str) -> None:
        if not getattr(store.capabilities, capability):
            pytest.skip(f"store lacks capability {capability!r}")

    @staticmethod
    def populate(store: Store) -> dict[str, bytes]:
        data = {"a/b": b"ab", "a/c/d": b"acd", "c": b"c", "zarr.json": b"{}",
                "e/f/g": ALL_BYTES}
        store.set_many(data.items())
        return data

    # -- get / set -------------------------------------------------------------------------

    def test_empty_store(self, store: Store) -> None:
        assert list(store.list()) == []
        assert list(store.list_dir("")) == []
        assert store.get("zarr.json") is None
        assert not store.exists("zarr.json")
        assert store.getsize("zarr.json") is None

    def test_set_get(self, store: Store) -> None:
        store.set("a/b", b"hello")
        value = store.get("a/b")
        assert isinstance(value, bytes)
        assert value == b"hello"
        assert store.get("a") is None          # a prefix is not a key
        assert store.get("a/b/c") is None      # nor is a path below a key

    def test_overwrite(self, store: Store) -> None:
        store.set("k", b"first value")
        store.set("k", b"2nd")
        assert store.get("k") == b"2nd"
        assert store.getsize("k") == 3
        assert list(store.list()) == ["k"]

    def test_bytes_like_values(self, store: Store) -> None:
        store.set("ba", bytearray(b"bytearray"))
        store.set("mv", memoryview(b"xxmemoryview")[2:])
        store.set("arr", array.array("H", [1, 2, 0xFFFF]))
        assert store.get("ba") == b"bytearray"
        assert store.get("mv") == b"memoryview"
        assert store.get("arr") == array.array("H", [1, 2, 0xFFFF]).tobytes()

    def test_non_bytes_value_refused(self, store: Store) -> None:
        store.set("k", b"v")
        with pytest.raises(TypeError):
            store.set("k", "a str is not bytes")
        with pytest.raises(TypeError):
            store.set_many([("n1", b"ok"), ("n2", 12345)])
        assert dump(store) == {"k": b"v"}

    def test_empty_value(self, store: Store) -> None:
        store.set("empty", b"")
        assert store.get("empty") == b""
        assert store.exists("empty")
        assert store.getsize("empty") == 0
        assert list(store.list()) == ["empty"]
        assert store.get_partial_values([("empty", RangeRequest(0, 10)),
                                         ("empty", SuffixRequest(3))]) == [b"", b""]

    def test_all_byte_values(self, store: Store) -> None:
        store.set("bin", ALL_BYTES)
        assert store.get("bin") == ALL_BYTES
        assert store.getsize("bin") == len(ALL_BYTES)
        assert store.get_partial_values([("bin", RangeRequest(250, 262))]) == [
            bytes([250, 251, 252, 253, 254, 255, 0, 1, 2, 3, 4, 5])]

    def test_large_value(self, store: Store) -> None:
        big = bytes(range(256)) * (8 * 1024 * 1024 // 256)    # 8 MiB
        big = big[:-3] + b"END"
        store.set("big", big)
        assert store.getsize("big") == 8 * 1024 * 1024
        assert store.get("big") == big
        tail, mid = store.get_partial_values([("big", SuffixRequest(3)),
                                              ("big", RangeRequest(5_000_000, 5_000_004))])
        assert tail == b"END"
        assert mid == bytes([5_000_000 % 256 + i for i in range(4)])

    def test_unicode_keys(self, store: Store) -> None:
        for i, key in enumerate(UNICODE_KEYS):
            store.set(key, str(i).encode())
        for i, key in enumerate(UNICODE_KEYS):
            assert store.get(key) == str(i).encode(), key
        assert list(store.list()) == sorted(UNICODE_KEYS)
        assert store.get("e\u0301") != store.get("é")
        assert list(store.list_dir("a/")) == ["Ω/"]
        assert list(store.list_prefix("日本/")) == ["日本/語"]

    def test_case_sensitive_keys(self, store: Store) -> None:
        store.set("a/B", b"upper")
        store.set("a/b", b"lower")
        assert store.get("a/B") == b"upper"
        assert store.get("a/b") == b"lower"
        assert list(store.list_dir("a/")) == ["B", "b"]
        store.erase("a/b")
        assert store.get("a/B") == b"upper"
        assert store.get("A/b") is None

    def test_long_key(self, store: Store) -> None:
        key = "/".join(["segment%03d" % i for i in range(40)])     # 439 characters
        store.set(key, b"deep")
        assert store.get(key) == b"deep"
        assert list(store.list()) == [key]

    # -- exists / getsize / get_many / set_many ------------------------------------------

    def test_exists(self, store: Store) -> None:
        store.set("a/b", b"1")
        assert store.exists("a/b")
        assert not store.exists("a")
        assert not store.exists("a/b/c")
        assert not store.exists("A/b")

    def test_getsize(self, store: Store) -> None:
        store.set("s", b"12345")
        assert store.getsize("s") == 5
        assert store.getsize("missing") is None

    def test_get_many(self, store: Store) -> None:
        data = self.populate(store)
        keys = ["c", "missing", "a/b", "c", "e/f/g"]
        assert store.get_many(keys) == [data["c"], None, data["a/b"], data["c"], ALL_BYTES]
        assert store.get_many([]) == []

    def test_exists_many(self, store: Store) -> None:
        self.populate(store)
        keys = ["c", "missing", "a/b", "c", "e/f/g", "a"]
        assert store.exists_many(keys) == [True, False, True, True, True, False]
        assert store.exists_many([]) == []
        many = [f"x/{i:04d}" for i in range(1200)]          # more than one SQL batch
        store.set_many([(k, b"") for k in many[::2]])        # empty values exist too
        assert store.exists_many(many) == [i % 2 == 0 for i in range(1200)]
        with pytest.raises(InvalidKeyError):
            store.exists_many(["ok", "../escape"])

    def test_get_many_views(self, store: Store) -> None:
        data = self.populate(store)
        keys = ["c", "missing", "e/f/g"]
        assert store.get_many_views(keys) == [data["c"], None, ALL_BYTES]   # copies
        with store.transaction(write=False):
            views = store.get_many_views(keys)
            assert [None if v is None else bytes(v) for v in views] == \
                [data["c"], None, ALL_BYTES]

    def test_read_many_into(self, store: Store) -> None:
        store.set_many([("r/0", b"abcd"), ("r/1", b"wxyz"), ("r/2", b"toolong"),
                        ("r/3", b""), ("r/4", b"abc")])
        # (enough keys for a store's bulk path: the directory store's reads without
        # link counts start at 8)
        keys = ["r/1", "missing", "r/2", "r/0", "r/3", "r/4", "r/1", "r/0", "missing"]
        buffer = bytearray(b"." * 4 * len(keys) + b"!")
        sizes = store.read_many_into(keys, buffer, 4)
        assert sizes == [4, None, 7, 4, 0, 3, 4, 4, None]
        # exact-length values in their places, absent keys' places untouched (other
        # lengths' places are undefined), nothing past the end
        places = [bytes(buffer[4 * i:4 * i + 4]) for i in range(len(keys))]
        assert [places[i] for i in (0, 1, 3, 6, 7, 8)] == \
            [b"wxyz", b"....", b"abcd", b"wxyz", b"abcd", b"...."]
        assert buffer[-1:] == b"!"
        into = np.zeros((2, 4), dtype=np.uint8)                 # numpy memory too
        assert store.read_many_into(["r/0", "r/1"], into, 4) == [4, 4]
        assert into.tobytes() == b"abcdwxyz"
        many = [f"rm/{i:04d}" for i in range(1200)]         # more than one SQL batch
        store.set_many([(k, k[-4:].encode()) for k in many[1::2]])
        big = bytearray(4 * len(many))
        assert store.read_many_into(many, big, 4) == [4 if i % 2 else None
                                                      for i in range(len(many))]
        assert bytes(big[4:8]) == b"0001" and bytes(big[:4]) == bytes(4)
        with store.transaction(write=False):        # inside a read transaction too
            assert store.read_many_into(["r/0", "r/3"], buffer, 4) == [4, 0]
        assert bytes(buffer[:4]) == b"abcd"

    def test_read_many_into_refuses_bad_buffers_and_keys(self, store: Store) -> None:
        store.set("r/0", b"abcd")
        for bad in (bytes(8), bytearray(7), memoryview(bytearray(16))[::2], "text", None):
            with pytest.raises(ValueTypeError):
                store.read_many_into(["r/0", "r/0"], bad, 4)
        with pytest.raises(InvalidKeyError):
            store.read_many_into(["r/0", "../escape"], bytearray(8), 4)

    def test_read_many_into_sees_the_transaction_s_own_writes(self, store: Store) -> None:
        store.set("w/0", b"old!")
        buffer = bytearray(8)
        with store.transaction():
            store.set("w/0", b"new!")
            store.set("w/1", b"more")
            assert store.read_many_into(["w/0", "w/1"], buffer, 4) == [4, 4]
        assert bytes(buffer) == b"new!more"

    def test_iter_values(self, store: Store) -> None:
        data = self.populate(store)
        keys = ["c", "missing", "a/b", "c", "e/f/g"]
        with store.transaction(write=False):
            # each value copied before the next is asked for, as a reader must
            got = [(i, None if v is None else bytes(v)) for i, v in store.iter_values(keys)]
        assert sorted(got) == [(0, data["c"]), (1, None), (2, data["a/b"]), (3, data["c"]),
                               (4, ALL_BYTES)]
        many = [f"y/{i:04d}" for i in range(1200)]          # more than one SQL batch
        store.set_many([(k, k.encode()) for k in many[1::2]])
        with store.transaction(write=False):
            got = dict((i, None if v is None else bytes(v))
                       for i, v in store.iter_values(many))
        assert got == {i: (k.encode() if i % 2 else None) for i, k in enumerate(many)}
        with pytest.raises(InvalidKeyError):
            with store.transaction(write=False):
                list(store.iter_values(["ok", "../escape"]))

    def test_iter_values_sees_the_transaction_s_own_writes(self, store: Store) -> None:
        if not store.capabilities.transactional:
            pytest.skip("no transactions")
        self.populate(store)
        with store.transaction():
            store.set("c", b"new")
            store.erase("a/b")
            got = {i: None if v is None else bytes(v)
                   for i, v in store.iter_values(["c", "a/b"])}
        assert got == {0: b"new", 1: None}

    def test_set_many(self, store: Store) -> None:
        items = [(f"many/{i:04d}", i.to_bytes(2, "big")) for i in range(500)]
        store.set_many(iter(items))         # any iterable
        assert list(store.list_prefix("many/")) == [k for k, _ in items]
        assert store.get_many([k for k, _ in items]) == [v for _, v in items]

    def test_set_many_keeps_the_last_value_of_a_repeated_key(self, store: Store) -> None:
        # as sequential sets, also where a store writes one call's items on several
        # threads: the second values come in the other key order, so that a store that
        # splits the list among threads would meet each key's two writes at once
        keys = [f"rep/{i:03d}" for i in range(200)]
        items = [(k, b"first") for k in keys] + [(k, b"last " + k.encode()) for k in keys[::-1]]
        store.set_many(items)
        assert store.get_many(keys) == [b"last " + k.encode() for k in keys]

    def test_set_many_buffer_values(self, store: Store) -> None:
        # Read-only views of one block (what a bulk array write hands down) are stored
        # as their bytes; a writable buffer changed after the call changes nothing,
        # also when the transaction is still open (LMDB may replay it after map growth).
        block = np.arange(64, dtype=np.uint8)
        block.flags.writeable = False
        flat = memoryview(block)
        scratch = bytearray(b"before")
        with store.transaction():
            store.set_many([(f"views/{i}", flat[i * 16:(i + 1) * 16]) for i in range(4)]
                           + [("views/scratch", scratch)])
            scratch[:] = b"after!"
            store.set("views/big", bytes(1 << 20))
        assert store.get_many([f"views/{i}" for i in range(4)]) == [
            bytes(range(i * 16, (i + 1) * 16)) for i in range(4)]
        assert store.get("views/scratch") == b"before"
        assert all(type(v) is bytes for v in store.get_many(["views/0", "views/scratch"]))

    def test_set_many_later_item_wins(self, store: Store) -> None:
        store.set_many([("k", b"first"), ("j", b"j"), ("k", b"second")])
        assert store.get("k") == b"second"

    # -- erase -----------------------------------------------------------------------------

    def test_erase(self, store: Store) -> None:
        data = self.populate(store)
        store.erase("a/b")
        store.erase("a/b")              # erasing a missing key is a no-op
        store.erase("never/was")
        del data["a/b"]
        assert dump(store) == data
        assert not store.exists("a/b")

    def test_erase_values(self, store: Store) -> None:
        data = self.populate(store)
        store.erase_values(["c", "missing", "e/f/g"])
        for k in ("c", "e/f/g"):
            del data[k]
        assert dump(store) == data

    def test_erase_prefix(self, store: Store) -> None:
        self.populate(store)
        store.set_many([("ab", b"sibling"), ("a0", b"after")])
        store.erase_prefix("a/")
        assert dump(store) == {"c": b"c", "zarr.json": b"{}", "e/f/g": ALL_BYTES,
                               "ab": b"sibling", "a0": b"after"}
        store.erase_prefix("nothing/here/")
        store.erase_prefix("e/f/")
        assert "e/f/g" not in dump(store)
        store.erase_prefix("")
        assert dump(store) == {}

    def test_erase_prefix_is_not_a_wildcard(self, store: Store) -> None:
        store.set_many([("x_/1", b"1"), ("xy/1", b"2"), ("x%/1", b"3"), ("xa/1", b"4")])
        store.erase_prefix("x_/")
        store.erase_prefix("x%/")
        assert dump(store) == {"xy/1": b"2", "xa/1": b"4"}

    # -- partial values --------------------------------------------------------------------

    def test_get_partial_values(self, store: Store) -> None:
        value = b"0123456789"
        store.set("v", value)
        requests = [
            ("v", RangeRequest(2, 5)),        # b"234"
            ("v", RangeRequest(0, 0)),        # b""
            ("v", RangeRequest(8, 100)),      # clipped past the end: b"89"
            ("v", RangeRequest(10, 20)),      # starts at the end: b""
            ("v", RangeRequest(50, 60)),      # starts past the end: b""
            ("v", OffsetRequest(7)),          # b"789"
            ("v", OffsetRequest(0)),          # whole value
            ("v", OffsetRequest(10)),         # b""
            ("v", OffsetRequest(15)),         # b""
            ("v", SuffixRequest(3)),          # b"789"
            ("v", SuffixRequest(0)),          # b""
            ("v", SuffixRequest(10)),         # whole value
            ("v", SuffixRequest(1000)),       # longer than the value: whole value
            ("v", None),                      # whole value
            ("missing", RangeRequest(0, 1)),
            ("missing", SuffixRequest(1)),
            ("missing", None),
        ]
        assert store.get_partial_values(requests) == [
            b"234", b"", b"89", b"", b"", b"789", value, b"", b"", b"789", b"", value,
            value, value, None, None, None]
        assert store.get_partial_values([]) == []

    #: offsets every store answers alike: past 32-bit and 64-bit integers included
    FAR_OFFSETS = [2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 32 + 1, 2 ** 63 - 1, 2 ** 63,
                   2 ** 64 + 3, 10 ** 30]

    def test_get_partial_values_far_past_the_end(self, store: Store) -> None:
        """A range that starts past the end reads b"" and a length or suffix past any
        size reads what exists, for offsets that a 32-bit or 64-bit integer in a
        backend would truncate or overflow (SQLite's substr once read bytes 0-3 for
        [2**32, 2**32 + 4))."""
        value = b"0123456789"
        store.set_many([("far/v", value), ("far/appended", b"01234")])
        if store.capabilities.appends:
            store.append("far/appended", b"56789", expected_size=5)
        else:
            store.set("far/appended", value)
        for key in ("far/v", "far/appended"):
            for far in self.FAR_OFFSETS:
                got = store.get_partial_values([
                    (key, RangeRequest(far, far + 4)), (key, OffsetRequest(far)),
                    (key, RangeRequest(0, far)), (key, RangeRequest(3, far)),
                    (key, SuffixRequest(far)), (key, RangeRequest(far, far)),
                    ("far/missing", RangeRequest(far, far + 4))])
                assert got == [b"", b"", value, value[3:], value, b"", None], (key, far)
                # one request alone takes each store's single-range path
                assert store.get_partial_values([(key, RangeRequest(far, far + 4))]) == [b""]
                assert store.get_partial_values([(key, SuffixRequest(far))]) == [value]

    @pytest.mark.parametrize("bad", [-1, -(2 ** 63), 1.5, "3", True, None, b"1"], ids=repr)
    def test_byte_request_numbers_checked(self, store: Store, bad: Any) -> None:
        """A request's numbers are integers >= 0, or InvalidByteRangeError when the
        request is made; anything but a request (or None) is a ValueTypeError at the
        store's boundary, before any read."""
        store.set("v", b"0123456789")
        for make in (lambda: RangeRequest(bad, 5), lambda: RangeRequest(0, bad),
                     lambda: OffsetRequest(bad), lambda: SuffixRequest(bad)):
            with pytest.raises(InvalidByteRangeError):
                make()
        with pytest.raises(InvalidByteRangeError):
            RangeRequest(5, 4)
        for not_a_request in ((0, 4), slice(0, 4), 3, "0-4"):
            with pytest.raises(ValueTypeError):
                store.get_partial_values([("v", not_a_request)])
            with pytest.raises(ValueTypeError):
                store.get_partial_values([("v", None), ("v", not_a_request)])
        # integers of other types (numpy's) are integers
        assert store.get_partial_values([("v", RangeRequest(np.int64(2), np.uint64(4)))]) \
            == [b"23"]

    def test_get_partial_values_mixed_keys_keep_order(self, store: Store) -> None:
        store.set_many([("p/a", b"aaaaXaaaa"), ("p/b", b"bbbbYbbbb")])
        got = store.get_partial_values([("p/b", RangeRequest(4, 5)), ("p/a", RangeRequest(4, 5)),
                                        ("p/b", OffsetRequest(8)), ("p/a", SuffixRequest(1))])
        assert got == [b"Y", b"X", b"b", b"a"]

    def test_get_partial_values_reads_one_snapshot(self, store: Store,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
        """A writer (another thread) that commits between the reads of two requests is
        seen by both or by neither."""
        self.require(store, "transactional")
        store.set_many([("s/a", b"old-a"), ("s/b", b"old-b")])
        writers: list[threading.Thread] = []

        def write_both() -> None:
            with store.transaction():
                store.set_many([("s/a", b"new-a"), ("s/b", b"new-b")])

        def after_first_read(name: str) -> Any:
            read = getattr(bottom, name)

            def hooked(*args: Any, **kwargs: Any) -> Any:
                out = read(*args, **kwargs)
                if not writers:
                    writers.append(threading.Thread(target=write_both))
                    writers[0].start()
                    # Stores with snapshots let it commit now; others make it wait.
                    writers[0].join(timeout=0.5)
                return out
            return hooked

        # hooked where the reads happen: the store at the bottom of a transformer stack
        bottom = stack_layers(store)[-1]
        for name in ("_get", "_get_range", "_get_ranges"):
            if hasattr(bottom, name):
                monkeypatch.setattr(bottom, name, after_first_read(name))
        got = store.get_partial_values([("s/a", OffsetRequest(0)), ("s/b", None)])
        monkeypatch.undo()
        assert writers, "the first read did not go through a hooked method"
        writers[0].join(timeout=30)
        assert got in ([b"old-a", b"old-b"], [b"new-a", b"new-b"])
        assert store.get_many(["s/a", "s/b"]) == [b"new-a", b"new-b"]

    def test_set_partial_values(self, store: Store) -> None:
        store.set("v", b"0123456789")
        if not store.capabilities.partial_writes:
            with pytest.raises(UnsupportedOperationError):
                store.set_partial_values([("v", 2, b"AB")])
            assert dump(store) == {"v": b"0123456789"}
            return
        store.set_partial_values([("v", 2, b"AB"), ("v", 8, b"YZ")])
        assert store.get("v") == b"01AB4567YZ"
        store.set_partial_values([("v", 10, b"++")])            # at the end: appends
        assert store.get("v") == b"01AB4567YZ++"
        store.set_partial_values([("new", 0, b"fresh")])        # missing key: created
        assert store.get("new") == b"fresh"
        store.set_partial_values([("gap", 3, b"x")])            # gap filled with zeros
        assert store.get("gap") == b"\x00\x00\x00x"
        with pytest.raises(InvalidByteRangeError):
            store.set_partial_values([("v", -1, b"x")])
        for bad in (2 ** 63, 2 ** 64, 1.5, True):      # past any value's size, or no int
            with pytest.raises(InvalidByteRangeError):
                store.set_partial_values([("v", bad, b"x")])
        assert dump(store) == {"v": b"01AB4567YZ++", "new": b"fresh",
                               "gap": b"\x00\x00\x00x"}

    # -- append (where capabilities.appends) ---------------------------------------------

    #: the parts appended by the append tests, and the whole value they make
    APPEND_PARTS = [b"head-", ALL_BYTES, b"", b"-tail", bytes(70_000)]

    def _appended(self, store: Store, key: str = "ap/k") -> bytes:
        """``key`` set to the first part, then every other part appended."""
        store.set(key, self.APPEND_PARTS[0])
        size = len(self.APPEND_PARTS[0])
        for part in self.APPEND_PARTS[1:]:
            store.append(key, part, expected_size=size)
            size += len(part)
        return b"".join(self.APPEND_PARTS)

    def test_append_unsupported_changes_nothing(self, store: Store) -> None:
        if store.capabilities.appends:
            pytest.skip("the store appends")
        store.set("k", b"v")
        with pytest.raises(UnsupportedOperationError):
            store.append("k", b"w", expected_size=1)
        assert dump(store) == {"k": b"v"}

    def test_append(self, store: Store) -> None:
        self.require(store, "appends")
        whole = self._appended(store)
        assert store.get("ap/k") == whole
        assert store.getsize("ap/k") == len(whole)
        assert store.exists("ap/k")
        assert list(store.list()) == ["ap/k"]
        assert list(store.list_dir("ap/")) == ["k"]
        # ranges inside one part, across parts, clipped, offsets and suffixes
        n0, n1 = len(b"head-"), len(ALL_BYTES)
        requests = [RangeRequest(0, 3), RangeRequest(3, n0 + 4), RangeRequest(n0 + n1 - 2,
                    n0 + n1 + 3), RangeRequest(len(whole) - 5, len(whole) + 100),
                    RangeRequest(len(whole) + 1, len(whole) + 9), OffsetRequest(n0 + 7),
                    OffsetRequest(len(whole)), SuffixRequest(70_003), SuffixRequest(0),
                    SuffixRequest(10 ** 9), None]
        got = store.get_partial_values([("ap/k", r) for r in requests])
        assert got == [whole[0:3], whole[3:n0 + 4], whole[n0 + n1 - 2:n0 + n1 + 3],
                       whole[-5:], b"", whole[n0 + 7:], b"", whole[-70_003:], b"", whole,
                       whole]
        many = [RangeRequest(i * 997, i * 997 + 50) for i in range(150)]   # > 64 ranges
        assert store.get_partial_values([("ap/k", r) for r in many]) == [
            whole[r.start:r.end] for r in many]
        assert store.get_many(["ap/k", "nope", "ap/k"]) == [whole, None, whole]
        assert store.exists_many(["ap/k", "nope"]) == [True, False]
        with store.transaction(write=False):
            views = store.get_many_views(["ap/k"])
            assert bytes(views[0]) == whole
            got = {i: bytes(v) for i, v in store.iter_values(["ap/k", "nope"])
                   if v is not None}
        assert got == {0: whole}
        store.close()
        again = self.reopen(store, read_only=True)    # persistent stores: still there
        if again is not None:
            try:
                assert again.get("ap/k") == whole
                assert again.getsize("ap/k") == len(whole)
                assert again.get_partial_values([("ap/k", SuffixRequest(9))]) == [whole[-9:]]
            finally:
                again.close()

    def test_append_is_a_compare_and_append(self, store: Store) -> None:
        self.require(store, "appends")
        store.set_many([("c/k", b"12345"), ("c/other", b"o")])
        for wrong in (0, 4, 6, 1000):
            with pytest.raises(AppendConflictError) as info:
                store.append("c/k", b"x", expected_size=wrong)
            assert isinstance(info.value, ConflictError) and info.value.key == "c/k"
        with pytest.raises(AppendConflictError):
            store.append("c/absent", b"x", expected_size=0)
        with pytest.raises(AppendConflictError):       # a prefix is not a value
            store.append("c", b"x", expected_size=0)
        assert dump(store) == {"c/k": b"12345", "c/other": b"o"}
        store.append("c/k", b"6", expected_size=5)
        with pytest.raises(AppendConflictError):       # the size the caller read is stale
            store.append("c/k", b"7", expected_size=5)
        assert dump(store) == {"c/k": b"123456", "c/other": b"o"}

    def test_append_bad_arguments(self, store: Store) -> None:
        self.require(store, "appends")
        store.set("k", b"abc")
        for bad in (-1, 1.5, "3", None, True):
            with pytest.raises(InvalidByteRangeError):
                store.append("k", b"x", expected_size=bad)
        with pytest.raises(TypeError):
            store.append("k", "text", expected_size=3)
        with pytest.raises(InvalidKeyError):
            store.append("../k", b"x", expected_size=3)
        assert dump(store) == {"k": b"abc"}

    def test_append_to_empty_and_nothing(self, store: Store) -> None:
        self.require(store, "appends")
        store.set("e", b"")
        store.append("e", b"", expected_size=0)
        assert store.get("e") == b"" and store.getsize("e") == 0 and store.exists("e")
        store.append("e", b"abc", expected_size=0)
        store.append("e", b"", expected_size=3)
        assert store.get("e") == b"abc" and store.getsize("e") == 3
        store.append("e", memoryview(b"xxdef")[2:], expected_size=3)
        assert store.get("e") == b"abcdef"

    def test_writes_after_append_replace_the_whole_value(self, store: Store) -> None:
        self.require(store, "appends")
        whole = self._appended(store, "w/set")
        self._appended(store, "w/many")
        self._appended(store, "w/erase")
        self._appended(store, "w/values")
        self._appended(store, "w/prefix/x")
        self._appended(store, "w/empty")
        store.set("w/set", b"new")
        assert store.get("w/set") == b"new" and store.getsize("w/set") == 3
        assert store.get_partial_values([("w/set", SuffixRequest(2))]) == [b"ew"]
        store.set_many([("w/many", b"m")])
        store.set("w/empty", b"")
        store.erase("w/erase")
        store.erase_values(["w/values"])
        store.erase_prefix("w/prefix/")
        assert dump(store) == {"w/set": b"new", "w/many": b"m", "w/empty": b""}
        assert store.getsize("w/empty") == 0
        # appending again starts from the new value, not from old parts
        store.append("w/set", b"!", expected_size=3)
        store.append("w/empty", b"?", expected_size=0)
        store.set("w/erase", b"back")
        assert dump(store) == {"w/set": b"new!", "w/many": b"m", "w/empty": b"?",
                               "w/erase": b"back"}
        if store.capabilities.partial_writes:
            self._appended(store, "w/patch")
            store.set_partial_values([("w/patch", 2, b"XY"), ("w/patch", len(whole), b"++")])
            assert store.get("w/patch") == whole[:2] + b"XY" + whole[4:] + b"++"
            store.append("w/patch", b"#", expected_size=len(whole) + 2)
            assert store.get("w/patch") == whole[:2] + b"XY" + whole[4:] + b"++#"

    def test_append_in_a_transaction(self, store: Store) -> None:
        self.require(store, "appends")
        store.set("t/k", b"base")
        with store.transaction():
            store.append("t/k", b"+1", expected_size=4)
            store.append("t/k", b"+2", expected_size=6)
            assert store.get("t/k") == b"base+1+2"
            assert store.getsize("t/k") == 8
            assert store.get_partial_values([("t/k", SuffixRequest(3))]) == [b"1+2"]
        assert store.get("t/k") == b"base+1+2"
        with store.transaction(write=False):
            with pytest.raises(UnsupportedOperationError):
                store.append("t/k", b"no", expected_size=8)
        if not store.capabilities.transactional:
            return

        class Boom(Exception):
            pass

        with pytest.raises(Boom):
            with store.transaction():
                store.append("t/k", b"+3", expected_size=8)
                store.set("t/new", b"n")
                store.append("t/new", b"m", expected_size=1)
                raise Boom()
        assert dump(store) == {"t/k": b"base+1+2"}
        assert store.getsize("t/k") == 8
        store.set("t/fresh", b"f")     # the first append of a value, rolled back
        with pytest.raises(Boom):
            with store.transaction():
                store.append("t/fresh", b"g", expected_size=1)
                raise Boom()
        assert store.get("t/fresh") == b"f" and store.getsize("t/fresh") == 1
        store.append("t/fresh", b"h", expected_size=1)
        assert store.get("t/fresh") == b"fh"

    # -- listing ---------------------------------------------------------------------------

    def test_list_sorted(self, store: Store) -> None:
        keys = ["b", "a/z", "a/b/c", "a-", "a0", "a.b", "A", "_", "%", "~", "zz/0", "zz/10",
                "zz/9"]
        for k in reversed(keys):
            store.set(k, k.encode())
        assert list(store.list()) == sorted(keys)
        assert list(store.list_prefix("")) == sorted(keys)

    def test_list_prefix(self, store: Store) -> None:
        store.set_many((k, b"") for k in ["a/b", "a/c/d", "a0", "a.b", "ab/c", "e/f/g", "a-/x"])
        assert list(store.list_prefix("a/")) == ["a/b", "a/c/d"]
        assert list(store.list_prefix("a/c/")) == ["a/c/d"]
        assert list(store.list_prefix("ab/")) == ["ab/c"]
        assert list(store.list_prefix("b/")) == []
        assert list(store.list_prefix("a/b/")) == []          # a key is not a prefix

    def test_list_prefix_is_not_a_wildcard(self, store: Store) -> None:
        store.set_many([("x_/1", b"1"), ("xy/1", b"2"), ("x%/1", b"3"), ("xa/1", b"4"),
                        ("X_/1", b"5")])
        assert list(store.list_prefix("x_/")) == ["x_/1"]
        assert list(store.list_prefix("x%/")) == ["x%/1"]
        assert list(store.list_dir("x_/")) == ["1"]
        assert list(store.list_dir("x%/")) == ["1"]

    def test_list_dir(self, store: Store) -> None:
        # The spec's example: keys "a/b", "a/c", "a/d/e", "a/f/g".
        store.set_many((k, b"") for k in ["a/b", "a/c", "a/d/e", "a/f/g", "a/f/h/i", "z"])
        assert list(store.list_dir("a/")) == ["b", "c", "d/", "f/"]
        assert list(store.list_dir("a/f/")) == ["g", "h/"]
        assert list(store.list_dir("")) == ["a/", "z"]
        assert list(store.list_dir("b/")) == []
        assert list(store.list_dir("a/b/")) == []

    def test_list_dir_order_around_slash(self, store: Store) -> None:
        # '.' < '/' < '0' in code points: a child prefix sorts between them.
        store.set_many((k, b"") for k in ["a/b.txt", "a/b/c", "a/b/d/e", "a/b0", "a/c",
                                          "a/B/x"])
        assert list(store.list_dir("a/")) == ["B/", "b.txt", "b/", "b0", "c"]

    def test_list_dir_key_and_prefix_of_same_name(self, store: Store) -> None:
        """Both forms are listed when both exist; a store that cannot hold a key that is
        also a prefix refuses the second write with InvalidKeyError, unchanged."""
        store.set("g/a/b", b"below")
        try:
            store.set("g/a", b"key")
        except InvalidKeyError:
            assert dump(store) == {"g/a/b": b"below"}
        else:
            assert list(store.list_dir("g/")) == ["a", "a/"]
            assert list(store.list_prefix("g/")) == ["g/a", "g/a/b"]
            assert store.get("g/a") == b"key"
        store.set("h/a", b"key")
        try:
            store.set("h/a/b", b"below")
        except InvalidKeyError:
            assert store.get("h/a") == b"key"
            assert list(store.list_prefix("h/")) == ["h/a"]
        else:
            assert list(store.list_dir("h/")) == ["a", "a/"]
            assert store.get("h/a/b") == b"below"

    def test_listing_reflects_erase(self, store: Store) -> None:
        store.set_many([("d/x/1", b""), ("d/y", b"")])
        store.erase("d/x/1")
        assert list(store.list_dir("d/")) == ["y"]
        assert list(store.list_dir("")) == ["d/"]
        assert list(store.list()) == ["d/y"]

    # -- invalid keys ----------------------------------------------------------------------

    @pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
    def test_invalid_key_refused(self, store: Store, key: Any) -> None:
        data = self.populate(store)
        ops = [
            lambda: store.get(key),
            lambda: store.set(key, b"x"),
            lambda: store.erase(key),
            lambda: store.exists(key),
            lambda: store.getsize(key),
            lambda: store.get_many(["a/b", key]),
            lambda: store.set_many([("ok/1", b"1"), (key, b"x")]),
            lambda: store.erase_values(["a/b", key]),
            lambda: store.get_partial_values([("a/b", None), (key, RangeRequest(0, 1))]),
        ]
        for op in ops:
            with pytest.raises(InvalidKeyError):
                op()
        assert dump(store) == data

    def test_key_limits_are_one_answer_on_every_operation(self, store: Store) -> None:
        """A key past the store's declared limits (``max_key_bytes``, and
        ``max_segment_bytes`` for a store that keeps a segment as a file name) is refused
        with InvalidKeyError by every operation: reads, writes, listings and erasing
        alike, never an error of the OS or the engine."""
        data = self.populate(store)
        too_long = []
        if store.max_segment_bytes is not None:
            too_long.append("p/" + "s" * (store.max_segment_bytes + 1) + "/q")
            too_long.append("p/" + "\u00e9" * (store.max_segment_bytes // 2 + 1))
        if store.max_key_bytes is not None:
            too_long.append("/".join(["k" * 100] * (store.max_key_bytes // 101 + 1)))
        if not too_long:
            pytest.skip("the store declares no key limits")
        for key in too_long:
            ops = [lambda: store.get(key), lambda: store.set(key, b"x"),
                   lambda: store.exists(key), lambda: store.getsize(key),
                   lambda: store.erase(key), lambda: store.get_many([key]),
                   lambda: store.set_many([(key, b"x")]),
                   lambda: store.get_partial_values([(key, RangeRequest(0, 1))])]
            if store.max_segment_bytes is not None:
                ops += [lambda: list(store.list_prefix(key + "/")),
                        lambda: list(store.list_dir(key + "/")),
                        lambda: store.erase_prefix(key + "/")]
            for op in ops:
                with pytest.raises(InvalidKeyError):
                    op()
        assert dump(store) == data

    @pytest.mark.parametrize("prefix", BAD_PREFIXES, ids=repr)
    def test_invalid_prefix_refused(self, store: Store, prefix: Any) -> None:
        data = self.populate(store)
        for op in (store.list_prefix, store.list_dir, store.erase_prefix):
            with pytest.raises(InvalidKeyError):
                out = op(prefix)
                if out is not None:
                    list(out)
        assert dump(store) == data

    # -- read-only -------------------------------------------------------------------------

    def _read_only_handle(self, store: Store) -> tuple[Store, dict[str, bytes]]:
        data = self.populate(store)
        store.close()
        ro = self.reopen(store, read_only=True)
        if ro is None:
            ro = self.new_read_only(store)
            data = {}
        return ro, data

    def new_read_only(self, store: Store) -> Store:
        """A new, empty, read-only store like ``store`` (for stores whose data does not
        outlive the handle). A transformer stack's test overrides it."""
        try:
            return type(store)(read_only=True)       # type: ignore[call-arg]
        except TypeError:
            pytest.skip("no way to open this store read-only: override reopen()")

    @pytest.mark.parametrize("name", [name for name, _ in _write_ops()])
    def test_read_only_refuses_writes(self, store: Store, name: str) -> None:
        ro, data = self._read_only_handle(store)
        try:
            assert ro.read_only
            assert dump(ro) == data
            op = dict(_write_ops())[name]
            with pytest.raises(ReadOnlyError):
                op(ro)
            assert dump(ro) == data
            # reads still work
            assert ro.get_many(list(data)) == list(data.values())
            assert list(ro.list_dir("")) == sorted({k.split("/")[0] + ("/" if "/" in k else "")
                                                    for k in data})
        finally:
            ro.close()
        again = self.reopen(store, read_only=False)
        if again is not None:
            try:
                assert dump(again) == data
            finally:
                again.close()

    # -- transactions ----------------------------------------------------------------------

    def test_transaction_groups_writes(self, store: Store) -> None:
        with store.transaction() as txn:
            assert txn is store
            store.set("t/1", b"1")
            store.set_many([("t/2", b"2"), ("t/3", b"3")])
            store.erase("t/3")
        assert dump(store) == {"t/1": b"1", "t/2": b"2"}

    def test_read_transaction_refuses_writes(self, store: Store) -> None:
        store.set("k", b"v")
        with store.transaction(write=False):
            assert store.get("k") == b"v"
            assert store.get_many(["k"]) == [b"v"]
            with pytest.raises(UnsupportedOperationError):
                store.set("k", b"changed")
            with pytest.raises(UnsupportedOperationError):
                store.erase("k")
            with pytest.raises(UnsupportedOperationError):
                with store.transaction():
                    pass
        assert dump(store) == {"k": b"v"}

    def test_transaction_rolls_back_on_exception(self, store: Store) -> None:
        self.require(store, "transactional")
        data = self.populate(store)

        class Boom(Exception):
            pass

        with pytest.raises(Boom):
            with store.transaction():
                store.set("a/b", b"overwritten")
                store.set("new/key", b"new")
                store.set_many([("c", b"changed"), ("new/2", b"2")])
                store.erase("zarr.json")
                store.erase_values(["e/f/g"])
                store.erase_prefix("a/c/")
                raise Boom()
        assert dump(store) == data

    def test_transaction_writes_visible_inside(self, store: Store) -> None:
        self.require(store, "transactional")
        store.set_many([("in/old", b"old"), ("in/gone", b"gone"), ("in/sub/x", b"x")])
        with store.transaction():
            store.set("in/new", b"new value")
            store.set("in/old", b"changed")
            store.erase("in/gone")
            store.erase_prefix("in/sub/")
            assert store.get("in/new") == b"new value"
            assert store.get("in/old") == b"changed"
            assert store.get("in/gone") is None
            assert store.exists("in/new") and not store.exists("in/gone")
            assert store.getsize("in/new") == 9
            assert store.get_many(["in/new", "in/gone", "in/sub/x"]) == [b"new value", None,
                                                                         None]
            assert store.get_partial_values([("in/new", RangeRequest(0, 3)),
                                             ("in/new", SuffixRequest(5)),
                                             ("in/gone", None)]) == [b"new", b"value", None]
            assert list(store.list_prefix("in/")) == ["in/new", "in/old"]
            assert list(store.list_dir("in/")) == ["new", "old"]
            assert list(store.list()) == ["in/new", "in/old"]
        assert dump(store) == {"in/new": b"new value", "in/old": b"changed"}

    def test_nested_transactions_join(self, store: Store) -> None:
        self.require(store, "transactional")
        store.set("n/base", b"base")
        with pytest.raises(RuntimeError):
            with store.transaction():
                store.set("n/outer", b"1")
                with store.transaction():
                    store.set("n/inner", b"2")
                    store.erase("n/base")
                assert store.get("n/inner") == b"2"       # the inner one did not commit alone
                raise RuntimeError("roll back the outer transaction")
        assert dump(store) == {"n/base": b"base"}
        with store.transaction():
            with store.transaction():
                store.set("n/inner", b"2")
            store.set("n/outer", b"1")
        assert dump(store) == {"n/base": b"base", "n/inner": b"2", "n/outer": b"1"}

    def test_reader_thread_never_sees_half_a_transaction(self, store: Store) -> None:
        self.require(store, "transactional")
        keys = [f"iso/{i}" for i in range(8)]
        store.set_many([(k, b"old") for k in keys])
        everything = keys + ["iso/extra"]
        old, new = [b"old"] * 8 + [None], [b"new"] * 9
        written, release = threading.Event(), threading.Event()
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                with store.transaction():
                    for k in keys:
                        store.set(k, b"new")
                    store.set("iso/extra", b"new")
                    written.set()
                    release.wait(30)
            except BaseException as e:          # pragma: no cover - reported below
                errors.append(e)
                written.set()

        seen: dict[str, Any] = {}

        def reader() -> None:
            seen["many"] = store.get_many(everything)
            seen["listed"] = list(store.list_prefix("iso/"))

        w = threading.Thread(target=writer)
        w.start()
        assert written.wait(30)
        r = threading.Thread(target=reader)
        r.start()
        r.join(1.0)                             # a store may block readers during a write
        finished_before_commit = not r.is_alive()
        release.set()
        r.join(30)
        w.join(30)
        assert not errors, errors
        assert seen["many"] in (old, new)
        if finished_before_commit:
            assert seen["many"] == old
            assert seen["listed"] == keys
        else:
            assert seen["listed"] in (keys, sorted(everything))
        assert store.get_many(everything) == new

    def test_failed_batch_changes_nothing(self, store: Store) -> None:
        data = self.populate(store)
        with pytest.raises(InvalidKeyError):
            store.set_many([("fine/1", b"1"), ("fine/../2", b"2")])
        with pytest.raises(InvalidKeyError):
            store.erase_values(["a/b", "/abs"])
        assert dump(store) == data

    # -- change counter ----------------------------------------------------------------------

    def other_writer(self, store: Store) -> Store:
        """Another handle on the data of ``store`` (``store`` itself where its data lives
        in its handle): the "someone else" who commits in the change counter tests."""
        other = self.reopen(store, read_only=False)
        return store if other is None else other

    @staticmethod
    def counter_of(store: Store) -> Any:
        token = store.change_counter()
        if token is None:
            pytest.skip("store has no change counter")
        hash(token)                              # a token is hashable
        return token

    def test_change_counter_stays_without_commits(self, store: Store) -> None:
        self.populate(store)
        token = self.counter_of(store)
        store.get("a/b")
        store.get_many(["c", "nope"])
        store.get_partial_values([("e/f/g", RangeRequest(1, 9))])
        list(store.list_dir("a/"))
        with store.transaction(write=False):
            assert store.change_counter() == token
        assert store.change_counter() == token

    def test_change_counter_moves_with_every_commit(self, store: Store) -> None:
        self.populate(store)
        seen = [self.counter_of(store)]
        for write in (lambda: store.set("a/b", b"new"),
                      lambda: store.set_many([("x/1", b"1"), ("x/2", b"2")]),
                      lambda: store.erase("c"),
                      lambda: store.erase_prefix("x/")):
            write()
            token = store.change_counter()
            assert token not in seen
            seen.append(token)

    def test_change_counter_sees_another_handle_commit(self, store: Store) -> None:
        self.populate(store)
        other = self.other_writer(store)
        token = self.counter_of(store)
        thread = threading.Thread(target=lambda: other.set("a/b", b"from another handle"))
        thread.start()
        thread.join(30)
        assert store.change_counter() != token
        assert store.get("a/b") == b"from another handle"

    def test_change_counter_names_the_read_snapshot(self, store: Store) -> None:
        """Inside a read transaction the token stays that of its snapshot while another
        handle commits; afterwards it moves on."""
        self.require(store, "transactional")
        self.populate(store)
        other = self.other_writer(store)
        with store.transaction(write=False):
            token = self.counter_of(store)
            before = store.get("a/b")
            # a store whose readers block writers commits after the transaction ends
            writer = threading.Thread(target=lambda: other.set("a/b", b"committed"))
            writer.start()
            writer.join(0.5)
            assert store.change_counter() == token
            assert store.get("a/b") == before
        writer.join(30)
        assert store.change_counter() != token
        assert store.get("a/b") == b"committed"

    def test_change_counter_of_a_write_transaction_is_its_commit(self, store: Store) -> None:
        """In a write transaction: before any write, the token of the state it began
        from; after writes, the token the store has once it commits."""
        self.require(store, "transactional")
        self.populate(store)
        start = self.counter_of(store)
        with store.transaction():
            assert store.change_counter() == start
            store.set("a/b", b"changed")
            promised = store.change_counter()
        assert promised != start
        assert store.change_counter() == promised
        with store.transaction():                # a transaction that writes nothing
            empty = store.change_counter()
        assert empty == promised == store.change_counter()

    def test_change_counter_promise_is_kept_by_a_commit_that_changes_nothing(
            self, store: Store) -> None:
        """A write transaction that only erases a missing key changes no data; the token
        it promised must still be the store's after it commits, and must not come back
        for another handle's later commit."""
        self.require(store, "transactional")
        self.populate(store)
        other = self.other_writer(store)
        start = self.counter_of(store)
        with store.transaction():
            store.erase("not/there")
            promised = store.change_counter()
        assert store.change_counter() == promised
        other.set("c", b"by another handle")
        assert store.change_counter() not in (start, promised)


    # -- key locks (where capabilities.key_locks) -----------------------------------------

    def test_key_lock_without_the_capability_does_nothing(self, store: Store) -> None:
        if store.capabilities.key_locks:
            pytest.skip("the store has key locks")
        with store.key_lock(["a/b", "c"]):
            store.set("a/b", b"inside")
        assert store.get("a/b") == b"inside"
        with pytest.raises(InvalidKeyError):
            store.key_lock(["/bad"])

    def test_key_lock_makes_read_modify_writes_exclusive(self, store: Store) -> None:
        """Threads incrementing one value under its key lock lose no increment (each
        holds a second key too, in a different order: no deadlock)."""
        self.require(store, "key_locks")
        store.set("n", b"0")
        rounds, threads = 40, 4

        def bump(k: int) -> None:
            keys = ["n", f"other/{k}"] if k % 2 else [f"other/{k}", "n"]
            for _ in range(rounds):
                with store.key_lock(keys):
                    value = int(store.get("n"))
                    threading.Event().wait(0.0002)   # widen the window a lost update needs
                    store.set("n", str(value + 1).encode())

        workers = [threading.Thread(target=bump, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert int(store.get("n")) == rounds * threads

    def test_key_lock_excludes_another_handle(self, store: Store) -> None:
        """A second handle on the same data waits for the lock until the first lets go;
        the holding thread may take it again (re-entrant); a lock on an unrelated key is
        not held up."""
        self.require(store, "key_locks")
        other = self.other_writer(store)
        got = threading.Event()

        def take() -> None:
            with other.key_lock(["chunk/0"]):
                got.set()

        with store.key_lock(["chunk/0"]):
            with store.key_lock(["chunk/0"]):       # re-entrant in the holding thread
                pass
            waiter = threading.Thread(target=take)
            waiter.start()
            assert not got.wait(0.3), "another handle got a lock that is held"
        assert got.wait(30), "the lock was not handed on once released"
        waiter.join(30)
        with pytest.raises(InvalidKeyError):
            store.key_lock(["a//b"])

    # -- closing, and crossing processes -------------------------------------------------

    def test_close_is_idempotent_and_a_closed_store_refuses_every_operation(
            self, store: Store) -> None:
        self.populate(store)
        store.close()
        store.close()
        assert store.closed
        for name, op in _OPERATIONS_ON_A_CLOSED_STORE:
            with pytest.raises(StoreClosedError):
                op(store)
                pytest.fail(f"{name} worked on a closed store")
        with pytest.raises(StoreClosedError):
            pickle.dumps(store)

    def test_pickled_store_opens_the_same_data(self, store: Store) -> None:
        """A store that claims ``multi_process`` pickles to what opens its data again
        (the same stack of layers with the same options; one store per process for the
        same description); any other refuses with NotPicklableError. Processes proper
        are tried in the tests of the stores and of dask."""
        data = self.populate(store)
        if not store.capabilities.multi_process:
            with pytest.raises(NotPicklableError):
                pickle.dumps(store)
            return
        blob = pickle.dumps(store)
        clone = pickle.loads(blob)
        try:
            assert clone is not store and clone.read_only == store.read_only
            assert pickle.loads(blob) is clone         # once per process
            assert [(type(layer), getattr(layer, "options", dict)())
                    for layer in stack_layers(clone)] == \
                [(type(layer), getattr(layer, "options", dict)())
                 for layer in stack_layers(store)]
            assert dump(clone) == data
            clone.set("from/clone", b"1")
            assert store.get("from/clone") == b"1"
        finally:
            clone.close()
        assert not store.closed and pickle.loads(blob) is not clone   # closed: opened anew
        pickle.loads(blob).close()


#: every operation of the interface, as (name, store -> anything)
_OPERATIONS_ON_A_CLOSED_STORE: list[tuple[str, Any]] = [
    ("get", lambda s: s.get("a/b")),
    ("get_partial_values", lambda s: s.get_partial_values([("a/b", None), ("c", None)])),
    ("get_many", lambda s: s.get_many(["a/b", "c"])),
    ("exists_many", lambda s: s.exists_many(["a/b"])),
    ("get_many_views", lambda s: s.get_many_views(["a/b"])),
    ("iter_values", lambda s: list(s.iter_values(["a/b"]))),
    ("read_many_into", lambda s: s.read_many_into(["a/b"], bytearray(2), 2)),
    ("set", lambda s: s.set("a/b", b"x")),
    ("set_many", lambda s: s.set_many([("a/b", b"x")])),
    ("set_partial_values", lambda s: s.set_partial_values([("a/b", 0, b"x")])),
    ("append", lambda s: s.append("a/b", b"x", expected_size=1)),
    ("key_lock", lambda s: s.key_lock(["a/b"])),
    ("change_counter", lambda s: s.change_counter()),
    ("append_policy", lambda s: s.append_policy()),
    ("erase", lambda s: s.erase("a/b")),
    ("erase_values", lambda s: s.erase_values(["a/b"])),
    ("erase_prefix", lambda s: s.erase_prefix("a/")),
    ("exists", lambda s: s.exists("a/b")),
    ("getsize", lambda s: s.getsize("a/b")),
    ("list", lambda s: list(s.list())),
    ("list_prefix", lambda s: list(s.list_prefix("a/"))),
    ("list_dir", lambda s: list(s.list_dir(""))),
    ("transaction", lambda s: s.transaction().__enter__()),
    ("read transaction", lambda s: s.transaction(write=False).__enter__()),
]
