"""The ``kvzarr`` command: each subcommand through ``kvzarr.cli.main`` (exit status and
output), and the installed console script once, as a user runs it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import kvzarr
from kvzarr.cli import main


def test_demo_writes_reads_back_and_verifies(tmp_path, capsys):
    target = tmp_path / "demo.sqlite"
    assert main(["demo", str(target)]) == 0
    out = capsys.readouterr().out
    assert "read back and verified" in out and out.rstrip().endswith("OK")
    root = kvzarr.open_group(str(target), mode="r")
    assert sorted(root.keys()) == ["climate", "imaging", "labels"]
    assert root["imaging/tiles"].shards == (256, 256)


def test_info_shows_a_hierarchy_and_an_array(tmp_path, capsys):
    target = str(tmp_path / "x.zarr")
    root = kvzarr.open_group(target, mode="w")
    root.create_array("g/a", shape=(10, 4), chunks=(5, 4), dtype="int16")[...] = 7
    assert main(["tree", target]) == 0
    tree = capsys.readouterr().out
    assert "g/" in tree and "a (10, 4) int16" in tree
    assert main(["info", target]) == 0
    assert "Members          : 1 (0 arrays, 1 groups)" in capsys.readouterr().out
    assert main(["info", target, "g/a"]) == 0
    info = capsys.readouterr().out
    assert "Shape              : (10, 4)" in info and "Chunks Initialized : 2/2" in info


def test_a_kvzarr_error_is_exit_status_2_with_the_message_on_stderr(tmp_path, capsys):
    assert main(["info", str(tmp_path / "missing.sqlite")]) == 2
    assert capsys.readouterr().err.startswith("kvzarr: ")
    target = str(tmp_path / "x.zarr")
    kvzarr.open_group(target, mode="w")
    assert main(["info", target, "nope"]) == 2
    assert "no array or group found" in capsys.readouterr().err


def test_upgrade_migrates_an_old_sql_store(tmp_path, capsys):
    from kvzarr.stores.sql import SCHEMA_VERSION
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as db:   # schema version 1, as stores/sql.md documents it
        db.executescript("""
            CREATE TABLE kvzarr_version (version_num VARCHAR(32) NOT NULL,
                CONSTRAINT kvzarr_version_pkc PRIMARY KEY (version_num));
            INSERT INTO kvzarr_version (version_num) VALUES ('0001');
            CREATE TABLE kvzarr (k TEXT COLLATE "BINARY" NOT NULL, v BLOB NOT NULL,
                PRIMARY KEY (k));""")
    assert main(["info", str(path)]) == 2
    assert "kvzarr upgrade" in capsys.readouterr().err
    assert main(["upgrade", str(path)]) == 0
    assert f"schema version 1 -> {SCHEMA_VERSION}" in capsys.readouterr().out


def _appended_array(target: str) -> np.ndarray:
    """A sharded array at ``g/img`` whose shards hold garbage (tiles appended)."""
    store = kvzarr.open_store(target, transformers=[{"name": "append_shards",
                                                     "max_garbage": 1.0}])
    a = kvzarr.create_array(store, name="g/img", shape=(128, 128), chunks=(16, 16),
                            shards=(64, 64), dtype="uint16", fill_value=0)
    want = np.arange(128 * 128, dtype="uint16").reshape(128, 128)
    a[:] = want
    for i in range(8):
        a[i * 16:(i + 1) * 16, 0:16] = i
        want[i * 16:(i + 1) * 16, 0:16] = i
    store.close()
    return want


@pytest.mark.parametrize("suffix", ["", ".sqlite"])
def test_compact_reclaims_garbage_and_says_how_much(tmp_path, capsys, suffix):
    target = str(tmp_path / f"x{suffix}")
    want = _appended_array(target)
    assert main(["compact", target, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would compact 2 of 4 shards in 1 sharded array" in out and "reclaimable" in out
    assert main(["compact", target, "g"]) == 0
    out = capsys.readouterr().out
    assert "compacted 2 of 4 shards in 1 sharded array" in out and "reclaimed" in out
    assert main(["compact", target, "g/img"]) == 0
    assert "compacted 0 of 4 shards" in capsys.readouterr().out
    np.testing.assert_array_equal(kvzarr.open_array(target, path="g/img", mode="r")[:], want)


def test_compact_of_a_zip_archive_also_frees_the_replaced_members(tmp_path, capsys):
    # every tile written into a shard appended a new copy of the shard to the archive;
    # the copies it replaced are only freed when the archive is rewritten
    target = tmp_path / "x.zip"
    want = _appended_array(str(target))
    before = target.stat().st_size
    assert main(["compact", str(target)]) == 0
    out = capsys.readouterr().out
    assert "of 4 shards" in out and "the store freed" in out
    after = target.stat().st_size
    assert after < before
    with zipfile.ZipFile(target) as zf:
        assert zf.testzip() is None
        live = sum(i.compress_size + 30 + len(i.filename) for i in zf.infolist())
    assert after - live < 64 * 1024      # what is left besides the members: directory
    report = kvzarr.compact(str(target))
    assert report.compacted == 0 and report.store_reclaimed == 0
    np.testing.assert_array_equal(kvzarr.open_array(str(target), path="g/img", mode="r")[:],
                                  want)


def test_compact_errors(tmp_path, capsys):
    assert main(["compact", str(tmp_path / "missing")]) == 2
    assert "no array or group found" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()           # nothing created
    target = str(tmp_path / "x")
    _appended_array(target)
    assert main(["compact", target, "nope"]) == 2
    shard = tmp_path / "x" / "g" / "img" / "c" / "1" / "0"
    before = shard.read_bytes()
    shard.write_bytes(before[:-1] + bytes([before[-1] ^ 1]))   # its index checksum breaks
    assert main(["compact", target]) == 1
    captured = capsys.readouterr()
    assert "g/img/c/1/0" in captured.err and "crc32c" in captured.err
    assert "compacted 1 of 4 shards" in captured.out


def test_compact_shows_a_progress_bar_on_a_terminal(tmp_path):
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios
    target = str(tmp_path / "x")
    _appended_array(target)
    pid, fd = pty.fork()
    if pid == 0:                      # the child: kvzarr compact on a terminal
        os.execv(sys.executable, [sys.executable, "-c", "import sys; from kvzarr.cli "
                                  f"import main; sys.exit(main(['compact', {target!r}]))"])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))  # 100 columns
    output = bytearray()
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:               # the child closed the terminal
            break
        if not data:
            break
        output.extend(data)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    text = output.decode(errors="replace")
    assert "compacting: 100%" in text and "4/4" in text and "compacted 2 of 4" in text


def test_usage_errors_exit_2_as_argparse_does(capsys):
    with pytest.raises(SystemExit) as e:
        main(["no-such-command"])
    assert e.value.code == 2


def test_the_console_script_runs(tmp_path):
    script = Path(sys.executable).with_name("kvzarr")
    if not script.exists():
        pytest.skip("the kvzarr console script is not installed next to this Python")
    target = tmp_path / "d.sqlite"
    done = subprocess.run([str(script), "demo", str(target)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    a = kvzarr.open_array(str(target), path="climate/temperature", mode="r")
    assert a.shape == (1024, 1024) and np.isfinite(a[0, :10]).all()
