"""A plain install prints no warning: importing kvzarr, using every codec family, and the
``kvzarr demo`` a new user runs first, each in a fresh interpreter with warnings turned
into errors, leave stderr empty.

The warning a new user met (issue 14): numcodecs >= 0.16.4 issues a DeprecationWarning
when it is imported and finds the ``crc32c`` package (a kvzarr dependency) but not
``google-crc32c``; and it registers that warning with a filter of its own, ahead of
``-W error``, so the warning is printed, not raised. kvzarr imports numcodecs for blosc,
zstd and ``numcodecs.*`` codecs, so the fix is in kvzarr's dependencies:
``google-crc32c`` is one, and numcodecs uses it.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import requires

from packaging.requirements import Requirement


def _quiet_run(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "error", "-X", "dev", "-c", code],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_google_crc32c_is_a_dependency_of_the_plain_install():
    """Not an extra: the plain ``pip install kvzarr`` brings it."""
    plain = {Requirement(r).name.lower() for r in requires("kvzarr") or []
             if Requirement(r).marker is None}
    assert "google-crc32c" in plain


def test_import_and_codecs_print_no_warning(tmp_path):
    code = """
import numpy as np
import kvzarr
root = kvzarr.open_group("x.zarr", mode="w")
for name, compressors in [("blosc", "auto"),
                          ("zstd", [{"name": "zstd", "configuration": {"level": 3,
                                                                     "checksum": False}}]),
                          ("gzip", [{"name": "gzip", "configuration": {"level": 1}}]),
                          ("crc32c", [{"name": "crc32c"}]),
                          ("nc", [{"name": "numcodecs.zlib", "configuration": {"level": 1}}])]:
    a = root.create_array(name, shape=(100,), chunks=(10,), dtype="int32",
                          compressors=compressors)
    a[...] = np.arange(100)
    assert (a[...] == np.arange(100)).all()
print(kvzarr.SQLStore, kvzarr.LMDBStore, kvzarr.ZipStore)
"""
    result = _quiet_run(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_demo_prints_no_crc32c_deprecation_warning(tmp_path):
    code = "import sys; from kvzarr.cli import main; sys.exit(main(['demo']))"
    result = _quiet_run(code, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == "", result.stderr
    assert result.stdout.rstrip().endswith("OK")
    assert (tmp_path / "kvzarr-demo.sqlite").is_file()


def test_the_demo_output_is_ignored_by_git():
    from pathlib import Path
    repo = Path(__file__).resolve().parents[1]
    if not (repo / ".git").exists():
        return            # an installed copy: no repository to check
    ignored = subprocess.run(
        ["git", "check-ignore", "kvzarr-demo.sqlite", "kvzarr-demo.sqlite-wal",
         "kvzarr-demo.sqlite-shm"], cwd=repo, capture_output=True, text=True)
    assert ignored.stdout.split() == ["kvzarr-demo.sqlite", "kvzarr-demo.sqlite-wal",
                                      "kvzarr-demo.sqlite-shm"]
