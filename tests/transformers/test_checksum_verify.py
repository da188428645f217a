"""The scrub (``Checksum.verify``) and ``kvzarr verify`` on every backend: flipped bits,
damaged records, records without values and values without records are each reported
once, with the key (and block and checksums); repairs give unprotected values records
that later reads accept; exit status 1 for anything bad, 0 otherwise, 2 for a kvzarr
error; one run of the real ``kvzarr`` command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import kvzarr
from kvzarr.cli import main
from kvzarr.errors import ChecksumMissingError, InvalidKeyError, ReadOnlyError
from kvzarr.transformers import Checksum, build_stack
from kvzarr.transformers.checksum import RECORD_PREFIX

from .checksum_helpers import flip, record_of, stacked
from .conftest import StoreFactory

BS = 128


def _populated(factory: StoreFactory):
    stack, raw = stacked(factory, block_size=BS)
    stack.set_many([(f"g/a/{i}", os.urandom(300 + i)) for i in range(10)]
                   + [("g/b/x", b"bx"), ("top", b"t")])
    return stack, raw


def _kinds(report) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in report.findings:
        out.setdefault(f.kind, []).append(f.key)
    return out


def test_a_clean_store_verifies(store_factory: StoreFactory):
    stack, _ = _populated(store_factory)
    report = stack.verify()
    assert report.ok and report.findings == [] and report.values == 12
    assert report.bytes == sum(300 + i for i in range(10)) + 3
    assert stack.verify("g/a/").values == 10
    assert "verified 12 values" in report.summary()


def test_every_kind_of_damage_is_reported_once(store_factory: StoreFactory):
    stack, raw = _populated(store_factory)
    flips = {"g/a/0": 0, "g/a/1": 127, "g/a/2": 128, "g/a/3": 302}     # block edges, end
    for key, at in flips.items():
        flip(raw, key, at, 5)
    raw.set("g/a/4", raw.get("g/a/4")[:-1])                        # shorter than its record
    rec = bytearray(record_of(raw, "g/a/5"))
    rec[9] ^= 1
    raw.set(RECORD_PREFIX + "g/a/5", bytes(rec))                   # a damaged record
    raw.erase("g/a/6")                                             # a record without value
    raw.set("g/a/zz", b"written by another tool")                  # a value without record
    report = stack.verify()
    kinds = _kinds(report)
    assert kinds == {"mismatch": ["g/a/0", "g/a/1", "g/a/2", "g/a/3", "g/a/4"],
                     "corrupt-record": ["g/a/5"], "orphan-record": ["g/a/6"],
                     "unprotected": ["g/a/zz"]}
    assert not report.ok and report.bad == 7
    for f in report.findings:
        if f.kind == "mismatch" and f.key in flips:
            assert f.block == flips[f.key] // BS and f.stored != f.computed
            assert f"stored crc32c {f.stored:08x}, computed {f.computed:08x}" in str(f)
    assert str(report.findings[0]).startswith("MISMATCH g/a/0: block 0 (bytes 0-127)")
    assert report.values == 12 and report.counts["unprotected"] == 1   # every value read
    assert stack.verify("g/b/").ok                  # a subtree without damage


def test_repair_missing_adds_records_and_touches_nothing_bad(store_factory: StoreFactory):
    stack, raw = _populated(store_factory)
    raw.set_many([("g/new/1", b"one"), ("g/new/2", os.urandom(1000))])
    flip(raw, "g/a/0", 3)
    damaged = raw.get("g/a/0")
    with pytest.raises(ChecksumMissingError):
        stack.get("g/new/2")
    seen = []
    report = stack.verify(repair_missing=True, on_finding=seen.append)
    assert report.findings == [] and report.repaired == 2
    assert sorted((f.kind, f.key, f.repaired) for f in seen) == [
        ("mismatch", "g/a/0", False), ("unprotected", "g/new/1", True),
        ("unprotected", "g/new/2", True)]
    assert stack.get("g/new/2") == raw.get("g/new/2")      # verified now
    assert raw.get("g/a/0") == damaged                    # a bad value is left alone
    again = stack.verify()
    assert _kinds(again) == {"mismatch": ["g/a/0"]}


def test_progress_is_reported_per_batch(store_factory: StoreFactory):
    stack, raw = stacked(store_factory, block_size=BS)
    stack.set_many([(f"p/{i:04d}", b"x" * 10) for i in range(600)])
    calls = []
    report = stack.verify(progress=lambda n, b: calls.append((n, b)))
    assert len(calls) == 3 and sum(n for n, _ in calls) == 600
    assert sum(b for _, b in calls) == 6000 == report.bytes


def test_bad_requests(store_factory: StoreFactory):
    stack, _ = _populated(store_factory)
    for prefix in ("g", "/g/", RECORD_PREFIX):
        with pytest.raises(InvalidKeyError):
            stack.verify(prefix)
    ro_base = store_factory.reopen(read_only=True)
    if ro_base is not None:
        ro = build_stack(ro_base, [Checksum()])
        assert ro.verify().ok
        with pytest.raises(ReadOnlyError):
            ro.verify(repair_missing=True)


# -- the command -------------------------------------------------------------------------

@pytest.fixture(params=["dir", "lmdb", "sqlite", "zip"])
def target(request, tmp_path) -> str:
    return {"dir": str(tmp_path / "d"), "lmdb": str(tmp_path / "s.lmdb"),
            "sqlite": f"sqlite:///{tmp_path / 's.sqlite'}",
            "zip": str(tmp_path / "s.zip")}[request.param]


def _write(target: str) -> None:
    a = kvzarr.create_array(target, name="grp/arr", shape=(40, 40), chunks=(10, 10),
                            dtype="i4", compressors=None, transformers=["checksum"])
    a[...] = np.arange(1600).reshape(40, 40)
    a.store.close()


def test_the_command_exit_status_and_lines(target, capsys):
    _write(target)
    assert main(["verify", target]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("verified 19 values (") and line.endswith(
        " bytes): 0 mismatched, 0 corrupt records, 0 records without value, 0 unprotected, "
        "0 interrupted writes")
    with kvzarr.open_store(target) as raw:
        flip(raw, "grp/arr/c/2/3", 17, 2)
        raw.set("grp/arr/c/9/9", b"foreign")
    assert main(["verify", target]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("MISMATCH grp/arr/c/2/3: block 0 (bytes 0-399): stored "
                               "crc32c ")
    assert lines[1] == "UNPROTECTED grp/arr/c/9/9: no checksum record"
    assert "1 mismatched" in lines[2] and "1 unprotected" in lines[2]
    assert main(["verify", target, "grp/arr/c/1"]) == 0       # a subtree without damage
    capsys.readouterr()
    assert main(["verify", target, "/grp/", "--repair-missing", "--block-size", "64"]) == 1
    assert "UNPROTECTED grp/arr/c/9/9: no checksum record (repaired)" in \
        capsys.readouterr().out
    with kvzarr.open_store(target) as raw:
        assert raw.get(RECORD_PREFIX + "grp/arr/c/9/9")[5] == 6     # log2 of 64
        raw.set("grp/arr/c/2/3", kvzarr.open_store(target, mode="r", transformers=[
            {"name": "checksum", "missing": "trust"}]).get("grp/arr/c/9/9"))
    assert main(["verify", target]) == 1


def test_the_command_s_errors(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nothing")]) == 2
    assert "no store at this path" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()
    _write(str(tmp_path / "d"))
    assert main(["verify", str(tmp_path / "d"), "a/../b"]) == 2
    assert main(["verify", str(tmp_path / "d"), "--block-size", "100",
                 "--repair-missing"]) == 2
    assert "block_size must be a power of two" in capsys.readouterr().err


def test_the_real_command(tmp_path):
    target = str(tmp_path / "s.lmdb")
    _write(target)
    with kvzarr.open_store(target) as raw:
        flip(raw, "grp/arr/c/0/0", 0)
    kvzarr_cmd = os.path.join(os.path.dirname(sys.executable), "kvzarr")
    done = subprocess.run([kvzarr_cmd, "verify", target], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("MISMATCH grp/arr/c/0/0: block 0 (bytes 0-399)")
    assert "1 mismatched" in done.stdout.splitlines()[-1]
    assert done.stderr == ""            # no progress bar when stderr is not a terminal
