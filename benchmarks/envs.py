"""The virtual environments the suite runs in, built on first use under
``benchmarks/.envs/`` from the package index and reused while their requirements stay the
same. Standard library only.

* ``peers3``: kvzarr (this checkout, editable) with its LMDB and SQL backends,
  zarr-python 3, TensorStore, numcodecs, py-lmdb and matplotlib (for the chart only;
  it is not a dependency of kvzarr).
* ``zarr2``: zarr-python 2 with numcodecs and py-lmdb; zarr-python 2 and 3 are both
  ``import zarr`` and cannot live in one interpreter.

An environment records the requirements it was built from in ``requirements.txt``; a
change rebuilds it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ENV_DIR = HERE / ".envs"

REQUIREMENTS = {
    "peers3": ["numpy>=2", "zarr==3.1.6", "tensorstore>=0.1.70", "numcodecs>=0.16",
               "lmdb>=1.4", "SQLAlchemy>=2", "matplotlib>=3.8", "-e " + str(REPO)],
    "zarr2": ["numpy>=1.26", "zarr>=2.18,<3", "numcodecs", "lmdb>=1.4"],
}


def python_of(env_path: Path) -> Path:
    return env_path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure(name: str, log=print) -> Path:
    """The python of environment ``name``, building or rebuilding it when needed."""
    path = ENV_DIR / name
    wanted = "\n".join(REQUIREMENTS[name]) + "\n"
    if any(req.startswith("-e ") for req in REQUIREMENTS[name]):
        # kvzarr installed editable: a new dependency of its must rebuild the environment
        wanted += "".join(f"# kvzarr needs {dep}\n" for dep in _kvzarr_dependencies())
    stamp = path / "requirements.txt"
    py = python_of(path)
    if py.exists() and stamp.exists() and stamp.read_text() == wanted:
        return py
    log(f"[setup] building the {name} environment in {path} (one time) ...")
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    cmd = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    for req in REQUIREMENTS[name]:
        cmd.extend(req.split(" ", 1) if req.startswith("-e ") else [req])
    subprocess.run(cmd, check=True)
    stamp.write_text(wanted)
    log(f"[setup] {name} ready")
    return py


def _kvzarr_dependencies() -> list[str]:
    """The dependencies pyproject.toml gives kvzarr (and its extras)."""
    import tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        deps.extend(extra)
    return sorted(set(deps))


def versions(py: str | os.PathLike) -> dict[str, str]:
    """Installed versions of the packages that matter, as seen by ``py``."""
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {'python': sys.version.split()[0]}\n"
            "for n in ('kvzarr', 'zarr', 'tensorstore', 'numcodecs', 'numpy', 'lmdb',"
            " 'SQLAlchemy'):\n"
            "    try: out[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: pass\n"
            "print(json.dumps(out))")
    try:
        done = subprocess.run([str(py), "-c", code], capture_output=True, text=True,
                              check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return {}
    import json
    return json.loads(done.stdout)


if __name__ == "__main__":
    for env_name in sys.argv[1:] or list(REQUIREMENTS):
        print(ensure(env_name))
