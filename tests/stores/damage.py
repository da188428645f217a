"""Damaged store files for the tests of damaged-file handling: store files built with
known content, ways to damage them, and a reader in a separate process (a damaged file
could kill a process with a signal; the reader's exit says which).

The oracle (:func:`check_outcome`): opening and reading a damaged file either raises a
kvzarr error or returns correct data, key by key: every key listed is one the file held
and every value read is that key's value (a damaged file may lose keys, never change
them). Damage is confined to what the format can tell: truncation anywhere, and bits
flipped in the structures a reader checks (LMDB's meta pages, SQLite's database header,
the fixed fields of zip headers, zip member data under its CRC). Bits flipped in an
LMDB or SQLite data page can change a value silently in either engine (neither keeps
checksums), so no oracle could judge them.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

#: the reader process's source: reads one JSON request per line, answers one per line
READER = r'''
import hashlib, json, sys, warnings
warnings.simplefilter("ignore")
from kvzarr.errors import KvzarrError
from kvzarr.stores.byteranges import RangeRequest

def digest(b):
    return "none" if b is None else hashlib.sha1(b).hexdigest()

def open_store(kind, path):
    if kind == "lmdb":
        from kvzarr.stores.lmdb import LMDBStore
        return LMDBStore(path, read_only=True)
    if kind == "sqlite":
        from kvzarr.stores.sql import SQLStore
        return SQLStore(path, read_only=True)
    from kvzarr.stores.zip import ZipStore
    return ZipStore(path, read_only=True)

def read_all(kind, path):
    out = {"values": {}, "ranges": {}, "sizes": {}}
    try:
        store = open_store(kind, path)
    except KvzarrError as e:
        return {"open_error": type(e).__name__}
    try:
        try:
            out["keys"] = list(store.list())
            out["children"] = list(store.list_dir(""))
        except KvzarrError as e:
            out["list_error"] = type(e).__name__
            out["keys"] = []
        for key in out["keys"]:
            for what, read in (("values", lambda: digest(store.get(key))),
                               ("sizes", lambda: store.getsize(key)),
                               ("ranges", lambda: digest(store.get_partial_values(
                                   [(key, RangeRequest(1, 300))])[0]))):
                try:
                    out[what][key] = read()
                except KvzarrError as e:
                    out[what][key] = "error:" + type(e).__name__
    finally:
        try:
            store.close()
        except KvzarrError:
            pass
    return out

for line in sys.stdin:
    ask = json.loads(line)
    print(json.dumps({"started": ask["path"]}), flush=True)
    try:
        answer = read_all(ask["kind"], ask["path"])
    except BaseException as e:      # a builtin exception escaped: the test fails on it
        answer = {"escaped": f"{type(e).__name__}: {e}"}
    print(json.dumps(answer), flush=True)
'''


class Reader:
    """One reader process for many damaged files. :meth:`read` raises AssertionError
    naming the file if the process died (a signal) or hung past ``timeout``."""

    def __init__(self, timeout: float = 120.0) -> None:
        self.timeout = timeout
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", READER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        self._buffer = b""   # read with os.read: a buffered reader hides lines from select

    def _line(self, path: str) -> dict[str, Any]:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                self.proc.kill()
                self.proc.wait()
                self._start()
                raise AssertionError(f"reading {path} took more than {self.timeout} s")
            more = os.read(fd, 1 << 16)
            if not more:
                code = self.proc.wait()
                self._start()
                raise AssertionError(f"the reader process died with exit status {code} "
                                     f"(a negative status is a signal) reading {path}")
            self._buffer += more
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def read(self, kind: str, path: Path) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps({"kind": kind, "path": str(path)}).encode() + b"\n")
        self.proc.stdin.flush()
        assert self._line(str(path)) == {"started": str(path)}
        return self._line(str(path))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def digest(value: bytes) -> str:
    return hashlib.sha1(value).hexdigest()


#: the content of every store file made here
CONTENT: dict[str, bytes] = {
    "zarr.json": b'{"zarr_format": 3, "node_type": "group"}',
    **{f"a/c/{i}": bytes([i]) * (37 * i + 1) for i in range(40)},
    "a/big": bytes(range(256)) * 160,                 # 40 KiB: overflow pages in LMDB
    "b/zarr.json": b"{}",
}


def make_store_file(kind: str, directory: Path, compression: int | None = None) -> Path:
    """A store file of ``kind`` ("lmdb", "sqlite", "zip") holding :data:`CONTENT`,
    written in one commit and closed (a single file: no WAL, no lock file needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    if kind == "lmdb":
        from kvzarr.stores.lmdb import LMDBStore
        path = directory / "x.lmdb"
        store = LMDBStore(path, write_map=False)
    elif kind == "sqlite":
        from kvzarr.stores.sql import SQLStore
        path = directory / "x.sqlite"
        store = SQLStore(path)
    else:
        import zipfile
        from kvzarr.stores.zip import ZipStore
        path = directory / "x.zip"
        store = ZipStore(path, compression=compression or zipfile.ZIP_STORED)
    store.set_many(CONTENT.items())
    store.close()
    return path


def damaged_copy(original: Path, target: Path, *, cut: int | None = None,
                 flips: list[tuple[int, int]] = ()) -> Path:
    """A copy of ``original`` at ``target``, cut to ``cut`` bytes and with the bytes at
    each ``(offset, mask)`` of ``flips`` XORed with the mask."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in (target, Path(f"{target}-lock"), Path(f"{target}-wal"),
                  Path(f"{target}-shm"), target.with_name(target.name + ".lock")):
        if stale.exists():
            stale.unlink()
    shutil.copyfile(original, target)
    with open(target, "r+b") as f:
        for offset, mask in flips:
            f.seek(offset)
            byte = f.read(1)
            if byte:
                f.seek(offset)
                f.write(bytes([byte[0] ^ mask]))
        if cut is not None:
            f.truncate(cut)
    return target


def flippable(kind: str, path: Path) -> list[tuple[int, int]]:
    """``[start, end)`` regions of a store file whose bits the oracle can judge (see
    the module docstring)."""
    data = path.read_bytes()
    if kind == "lmdb":
        psize = struct.unpack_from("=I", data, 16 + 24)[0]
        return [(0, 2 * psize)]
    if kind == "sqlite":
        return [(0, 100)]
    return _zip_regions(data)


def _zip_regions(data: bytes) -> list[tuple[int, int]]:
    """Fixed fields of every local header and central directory entry (not the name
    lengths or names: a renamed member is a different key with no check to catch it),
    the end record, and the member data (each member's CRC-32 covers it)."""
    eocd = data.rfind(b"PK\x05\x06")
    count = struct.unpack_from("<H", data, eocd + 10)[0]
    cd_offset = struct.unpack_from("<L", data, eocd + 16)[0]
    regions = [(eocd, eocd + 22)]
    pos = cd_offset
    for _ in range(count):
        name_len, extra_len, comment_len = struct.unpack_from("<3H", data, pos + 28)
        local = struct.unpack_from("<L", data, pos + 42)[0]
        csize = struct.unpack_from("<L", data, pos + 20)[0]
        regions += [(pos, pos + 28), (pos + 34, pos + 46)]           # skip name length
        lname, lextra = struct.unpack_from("<2H", data, local + 26)
        regions += [(local, local + 26)]
        start = local + 30 + lname + lextra
        if csize:
            regions.append((start, start + csize))
        pos += 46 + name_len + extra_len + comment_len
    return regions


def check_outcome(answer: dict[str, Any], what: str) -> None:
    """Assert the reader's answer for one damaged file is kvzarr errors or correct data."""
    assert "escaped" not in answer, f"{what}: a builtin exception escaped: {answer['escaped']}"
    if "open_error" in answer:
        return
    expected = {k: digest(v) for k, v in CONTENT.items()}
    ranges = {k: digest(v[1:300]) for k, v in CONTENT.items()}
    for key in answer["keys"]:
        assert key in CONTENT, f"{what}: listed a key the file never held: {key!r}"
    for key, got in answer["values"].items():
        if not got.startswith("error:") and got != "none":
            assert got == expected[key], f"{what}: wrong value for {key!r}"
            # a member whose whole value checks out is read right in part, too
            assert answer["ranges"][key] in (ranges[key],) or \
                answer["ranges"][key].startswith("error:"), f"{what}: wrong range of {key!r}"
            size = answer["sizes"][key]
            assert size == len(CONTENT[key]) or str(size).startswith("error:"), \
                f"{what}: wrong size of {key!r}"
