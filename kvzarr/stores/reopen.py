"""Stores crossing processes: a store pickles to what opens it again, never to its
connections, locks, maps or thread state.

:meth:`Store.__reduce__ <kvzarr.stores.base.Store.__reduce__>` asks the store for the
arguments of its class that open the same data (``Store._reopen_args``: a path or URL
and the options it was opened with; a storage transformer: the store below it and its
options) and pickles ``reopen(class, args, kwargs)``. Unpickling calls :func:`reopen`
in the receiving process, which opens the store there.

Once per process: everything unpickled from the same description in one process
shares one open store. dask and multiprocessing send tasks one at a time, each with its
own copy of the array; without the sharing every task would open its own connection
pool, lock files or LMDB handle and leave them open. A store opened here stays open
until somebody closes it (the next unpickling then opens it afresh) or the process ends;
its commits are durable when they return, so ending the process without closing it
loses nothing. The original store in the sending process is never touched.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable
from typing import Any

#: (class, args, sorted kwargs) -> the store unpickling that description opened here
_opened: dict[Hashable, Any] = {}
_lock = threading.Lock()


def reopen(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The store ``cls(*args, **kwargs)`` in this process: the one opened earlier from the
    same description while it is still open, else a new one (kept for the next)."""
    key: Hashable = (cls, args, tuple(sorted(kwargs.items())))
    try:
        hash(key)
    except TypeError:           # an option that is not hashable: open a store of its own
        return cls(*args, **kwargs)
    with _lock:
        for stale in [k for k, s in _opened.items() if s.closed]:
            del _opened[stale]     # closed since: forget them (and the stores under them)
        store = _opened.get(key)
        if store is None:
            store = _opened[key] = cls(*args, **kwargs)
        return store


def _after_fork_in_child() -> None:
    # a thread of the parent may have held the lock when it forked; the stores themselves
    # reopen what they hold after a fork (each backend's own fork handling)
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
