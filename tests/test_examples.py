"""Every program in examples/ runs as a user runs it: ``python examples/NAME.py`` in a
fresh empty directory, in its own process. It must exit 0 and print no warning (nothing
on stderr). New examples are picked up by file name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs_without_errors_or_warnings(name, tmp_path):
    result = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    assert result.stderr == "", f"{name} wrote to stderr:\n{result.stderr}"
    assert result.stdout.strip(), f"{name} printed nothing"
