"""The current process id without a system call per check.

Stores that hold process-bound resources (LMDB environments, lock files) check on every
operation whether they are still in the process that opened them. ``os.getpid()`` is a
system call, which costs as much as a whole LMDB lookup; this module keeps the id in a
variable that a fork handler refreshes in the child.

It also runs the fork hooks of objects that live and die by the thousand (a SQL
store's backend and its housekeeping threads): ``os.register_at_fork`` keeps every
callable it is given for the life of the process, so one handler per object would be a
leak; :func:`on_fork_in_child` holds its method weakly and forgets it with its object.
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Callable

_pid = os.getpid()
#: the methods to call in a forked child, held weakly, by registration number
_hooks: dict[int, weakref.WeakMethod] = {}
_numbers = itertools.count()


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()
    for ref in list(_hooks.values()):     # in registration order (a dict keeps it)
        method = ref()
        if method is not None:
            method()


if hasattr(os, "register_at_fork"):   # POSIX only; elsewhere no fork()
    os.register_at_fork(after_in_child=_after_fork_in_child)


def current_pid() -> int:
    """``os.getpid()``, as of the last fork."""
    return _pid


def on_fork_in_child(method: Callable[[], None]) -> None:
    """Call the bound ``method`` (no arguments) in every forked child of this process,
    for as long as its object lives (the object's death drops the hook)."""
    number = next(_numbers)
    _hooks[number] = weakref.WeakMethod(
        method, lambda _dead, number=number: _hooks.pop(number, None))  # type: ignore[arg-type]
