"""The ``kvzarr`` command: each subcommand through ``kvzarr.cli.main`` (exit status and
output), and the installed console script once, as a user runs it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
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
    assert main(["info", target]) == 0
    tree = capsys.readouterr().out
    assert "g" in tree and "a (10, 4) int16" in tree
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
