"""``kvzarr ls``, ``tree``, ``info``, ``--version``, ``--help`` and the exit statuses,
through ``kvzarr.cli.main`` on real stores."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kvzarr
from kvzarr.cli import ERROR, FOUND_PROBLEMS, OK, main


@pytest.fixture
def sample(tmp_path):
    """A SQLite file with a group, a plain array, a sharded array and a rectilinear one."""
    target = str(tmp_path / "s.sqlite")
    root = kvzarr.open_group(target, mode="w", attributes={"title": "sample"})
    a = root.create_array("g/plain", shape=(10, 4), chunks=(5, 4), dtype="int16",
                          fill_value=-1, dimension_names=["y", "x"],
                          attributes={"units": "m"})
    a[...] = np.arange(40, dtype="int16").reshape(10, 4)
    s = root.create_array("g/tiles", shape=(64, 64), chunks=(8, 8), shards=(32, 32),
                          dtype="float32", fill_value=float("nan"))
    s[:32, :] = 1.5
    r = root.create_array("ragged", shape=(10,), chunks=[[3, 3, 4]], dtype="uint8",
                          compressors=None)
    r[...] = np.arange(10, dtype="uint8")
    root.store.close()
    return target


def test_ls_lists_the_members_of_a_group(sample, capsys):
    assert main(["ls", sample]) == OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "g/"
    assert lines[1].split()[:2] == ["ragged", "(10,)"] and "uint8" in lines[1]
    assert "rectilinear chunks [2x3, 4]" in lines[1]
    assert main(["ls", sample, "g"]) == OK
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["plain", "tiles"]
    assert "int16" in lines[0] and "chunks (5, 4)" in lines[0]
    assert "float32" in lines[1] and "shards (32, 32) of (8, 8)" in lines[1]
    assert main(["ls", sample, "g/plain"]) == OK          # an array: its own line
    assert capsys.readouterr().out.split()[:2] == ["plain", "(10,"]


def test_tree_draws_the_hierarchy(sample, capsys):
    assert main(["tree", sample]) == OK
    assert capsys.readouterr().out.splitlines() == [
        "/",
        "├── g/",
        "│   ├── plain (10, 4) int16, chunks (5, 4)",
        "│   └── tiles (64, 64) float32, shards (32, 32) of (8, 8)",
        "└── ragged (10,) uint8, rectilinear chunks [2x3, 4]",
    ]
    assert main(["tree", sample, "g"]) == OK
    assert capsys.readouterr().out.splitlines()[0] == "/g"


def _rows(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in
            (line.partition(" : ") for line in text.splitlines())}


def test_info_describes_an_array_as_zarr_names_it(sample, capsys):
    assert main(["info", sample, "g/plain"]) == OK
    rows = _rows(capsys.readouterr().out)
    assert rows["Data type"] == "int16" and rows["Fill value"] == "-1"
    assert rows["Shape"] == "(10, 4)" and rows["Chunk shape"] == "(5, 4)"
    assert rows["Dimension names"] == "('y', 'x')"
    assert rows["No. bytes"] == "80" and rows["Chunks Initialized"] == "2/2"
    assert json.loads(rows["Attributes"]) == {"units": "m"}
    assert [c["name"] for c in json.loads(rows["Codecs"])] == ["bytes", "zstd"]
    a = kvzarr.open_array(sample, path="g/plain", mode="r")
    assert int(rows["No. bytes stored"].split()[0]) == a.nbytes_stored()
    assert rows["Storage ratio"] == f"{80 / a.nbytes_stored():.1f}"
    assert rows["Store type"] == "SQLStore"


def test_info_of_sharded_and_rectilinear_arrays(sample, capsys):
    assert main(["info", sample, "g/tiles"]) == OK
    rows = _rows(capsys.readouterr().out)
    assert rows["Shard shape"] == "(32, 32)" and rows["Chunk shape"] == "(8, 8)"
    assert rows["Fill value"] == "NaN" and rows["Shards Initialized"] == "2/4"
    assert json.loads(rows["Codecs"])[0]["name"] == "sharding_indexed"
    assert "ZstdCodec" in rows["Compressors"]
    assert main(["info", sample, "ragged"]) == OK
    rows = _rows(capsys.readouterr().out)
    assert rows["Chunk shape"] == "rectilinear ((3, 3, 4),)"
    assert rows["Compressors"] == "()" and rows["Chunks Initialized"] == "3/3"
    assert json.loads(rows["Chunk grid"])["name"] == "rectilinear"


def test_info_describes_a_group(sample, capsys):
    assert main(["info", sample]) == OK
    rows = _rows(capsys.readouterr().out)
    assert rows["Type"] == "Group" and rows["Path"] == "/"
    assert rows["Members"] == "2 (1 arrays, 1 groups)"
    assert json.loads(rows["Attributes"]) == {"title": "sample"}
    with kvzarr.open_store(sample, mode="r") as store:
        total = sum(len(store.get(k)) for k in store.list())
    assert rows["No. bytes stored"].split()[0] == str(total)


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"kvzarr {kvzarr.__version__}"
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for command in ("demo", "ls", "tree", "info", "cp", "verify", "compact", "upgrade"):
        assert f"kvzarr {command}" in text
    assert "Exit status:" in text
    for status in (OK, FOUND_PROBLEMS, ERROR, 130):
        assert f"\n  {status} " in text


@pytest.mark.parametrize("command", ["ls", "tree", "info"])
def test_reading_commands_on_a_missing_store_exit_2_and_create_nothing(tmp_path, capsys,
                                                                       command):
    for name in ("missing.sqlite", "missing.lmdb", "missing.zip", "missing"):
        assert main([command, str(tmp_path / name)]) == ERROR
        assert "no store at this path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["ls", "tree", "info"])
def test_reading_commands_on_a_missing_node_exit_2(sample, capsys, command):
    assert main([command, sample, "nope"]) == ERROR
    assert "no array or group found" in capsys.readouterr().err
