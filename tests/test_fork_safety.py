"""Regression: work on the worker pool before ``fork()`` must not hang the child.

The sharding codec used to keep a thread pool of its own that was not fork-safe: after a
sharded read in the parent, the first sharded read in a forked child queued its inner
chunks onto threads that did not exist in the child and waited forever. Every parallel
task now runs on the one fork-safe pool (kvzarr.runtime.workers).
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

import kvzarr
from kvzarr.runtime import workers
from kvzarr.stores.filesystem import FilesystemStore

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")

SHAPE, SHARDS, CHUNKS = (512, 512), (256, 256), (32, 32)


def _sharded(target) -> kvzarr.Array:
    a = kvzarr.create_array(target, shape=SHAPE, dtype="float64", chunks=CHUNKS,
                            shards=SHARDS, compressors=[{"name": "gzip",
                                                         "configuration": {"level": 1}}])
    a[...] = np.arange(np.prod(SHAPE), dtype="float64").reshape(SHAPE)
    return a


def _run_in_child(body) -> int:
    """Fork, run ``body()`` in the child (exit 0 if it returns True) and return the
    child's exit status; a child still running after 60 s is killed (a hang)."""
    pid = os.fork()
    if pid == 0:   # the child: never return into pytest
        code = 1
        try:
            code = 0 if body() else 3
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung (work queued on threads the child does not have)")


@pytest.mark.parametrize("store", ["memory", "sqlite", "durable directory"])
def test_sharded_reads_and_writes_in_a_child_after_the_parent_used_the_pool(tmp_path, store):
    target = {"memory": lambda: kvzarr.MemoryStore(),
              "sqlite": lambda: str(tmp_path / "x.sqlite"),
              # its files are written and synced on the second pool, of sync threads
              "durable directory": lambda: FilesystemStore(tmp_path / "d", fsync=True),
              }[store]()
    a = _sharded(target)
    want = a[...]
    # a whole shard decoded in the parent: its 64 inner chunks run on the worker threads
    np.testing.assert_array_equal(a[:256, :256], want[:256, :256])
    assert any(t.startswith("kvzarr-worker") for t in _thread_names())
    if store == "durable directory":
        target.set_many([(f"other/{i}", b"x") for i in range(16)])
        assert any(t.startswith("kvzarr-sync") for t in _thread_names())

    def child() -> bool:
        b = kvzarr.open_array(target) if store == "sqlite" else a
        ok = np.array_equal(b[:256, :256], want[:256, :256])      # sharded read
        b[:256, :256] = -want[:256, :256]                          # sharded write
        b[5:300:7, 3] = 1.5                                        # partial shard write
        expect = want.copy()
        expect[:256, :256] *= -1
        expect[5:300:7, 3] = 1.5
        return ok and np.array_equal(b[...], expect)

    assert _run_in_child(child) == 0
    # and the parent's pool still works afterwards
    np.testing.assert_array_equal(a[256:, 256:], want[256:, 256:])


def test_pool_tasks_in_a_child_forked_while_parent_tasks_run():
    release = __import__("threading").Event()
    busy = [workers.POOL.submit(release.wait, 30) for _ in range(2)]
    try:
        def child() -> bool:
            return workers.map_items(lambda x: x * 2, range(100), parallel=True) == \
                [x * 2 for x in range(100)]
        assert _run_in_child(child) == 0
    finally:
        release.set()
        for f in busy:
            f.result()


def _thread_names() -> list[str]:
    import threading
    return [t.name for t in threading.enumerate()]
