"""What every fuzz target asserts about one input: it finishes within a time bound, and
the only exceptions that escape the public API are kvzarr.errors ones."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from kvzarr.errors import KvzarrError

#: seconds one input may take before it counts as a hang (generous: shared machines)
PER_INPUT_SECONDS = 20.0


class Hang(BaseException):
    """One input ran past :data:`PER_INPUT_SECONDS` (a BaseException, so no
    ``except Exception`` in the code under test swallows it)."""


def _alarm(signum, frame):  # pragma: no cover - only on a hang
    raise Hang(f"one input took more than {PER_INPUT_SECONDS} s")


@contextlib.contextmanager
def bounded_time(seconds: float = PER_INPUT_SECONDS) -> Iterator[None]:
    """Fail the input with :class:`Hang` if the block runs past ``seconds``."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def only_kvzarr_errors(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` within the time bound: its result, or the KvzarrError it
    raised. Any other exception propagates and fails the test."""
    with bounded_time():
        try:
            return fn(*args, **kwargs)
        except KvzarrError as e:
            return e
