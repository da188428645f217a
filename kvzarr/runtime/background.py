"""A store's housekeeping on a thread of its own, so that the writer never waits for
it: the checkpoints that large SQLite commits leave behind (stores/sql/checkpoint.py)
and the early flushes of a large transaction's bytes (stores/writeback.py).

Promises:

* ``request()`` returns at once; the job runs on a thread, never twice at once, and a
  request while it runs makes it run once more when done (so what was asked for after
  it began is covered too);
* a run that raises is skipped: the next request runs it again;
* :meth:`BackgroundJob.wait` returns once no run of this process is under way; a forked
  child neither waits for nor uses its parent's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .process import current_pid, on_fork_in_child


class BackgroundJob:
    """Runs ``job()`` on a thread named ``name`` when asked, never twice at once.
    ``daemon``: whether an exiting interpreter may cut a run short (else it waits)."""

    def __init__(self, job: Callable[[], None], name: str, daemon: bool) -> None:
        self._job = job
        self._name = name
        self._daemon = daemon
        self._reset()
        on_fork_in_child(self._reset)   # the parent's thread does not exist in the child

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._busy = False
        self._again = False
        self._pid = current_pid()

    def request(self) -> None:
        """Run the job soon, on the thread (started if none runs)."""
        with self._lock:
            if self._busy:
                self._again = True
                return
            self._busy = True
            self._thread = threading.Thread(target=self._run, daemon=self._daemon,
                                            name=self._name)
            self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self._job()
            except Exception:    # skipped: the next request runs it again
                pass
            with self._lock:
                if not self._again:
                    self._busy = False
                    return
                self._again = False

    def wait(self) -> None:
        """Return once no run of this process is under way."""
        thread = self._thread
        if thread is not None and self._pid == current_pid() \
                and thread is not threading.current_thread():
            thread.join()
