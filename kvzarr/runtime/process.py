"""The current process id without a system call per check.

Stores that hold process-bound resources (LMDB environments, lock files) check on every
operation whether they are still in the process that opened them. ``os.getpid()`` is a
system call, which costs as much as a whole LMDB lookup; this module keeps the id in a
variable that a fork handler refreshes in the child.
"""

from __future__ import annotations

import os

_pid = os.getpid()


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()


if hasattr(os, "register_at_fork"):   # POSIX only; elsewhere no fork()
    os.register_at_fork(after_in_child=_after_fork_in_child)


def current_pid() -> int:
    """``os.getpid()``, as of the last fork."""
    return _pid
