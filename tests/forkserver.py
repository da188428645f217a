"""A forkserver context for SIGKILL trials: children fork from a clean server that has
already imported kvzarr and the test module (no inherited connections or threads), which
keeps many starts fast. Python 3.11's server ignores the parent's sys.path, so the
roots of the test package and of kvzarr are passed along in PYTHONPATH."""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import kvzarr


def forkserver_context(monkeypatch: Any, module: ModuleType,
                       preload: tuple[str, ...] = ("kvzarr.stores.sql",)) -> Any:
    """The forkserver context whose server preloads ``preload`` and the test ``module``
    (whose functions the children run)."""
    roots = [Path(module.__file__).resolve().parents[module.__name__.count(".")],
             Path(kvzarr.__file__).resolve().parents[1]]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(r) for r in roots] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([*preload, module.__name__])
    return ctx
