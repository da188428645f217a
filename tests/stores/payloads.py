"""What the store tests write. Values that say where they came from: ``payload(tag, i,
size)`` repeats ``"tag:i;"`` to ``size`` bytes, so a value read back under the wrong key,
from the wrong writer or cut short never equals the one expected. And the counter that
concurrent writers increment (``increment``): a lost update shows as a smaller count."""

from __future__ import annotations

from typing import Any


def payload(tag: object, i: int, size: int) -> bytes:
    unit = f"{tag}:{i};".encode()
    return (unit * (size // len(unit) + 1))[:size]


def increment(store: Any, key: str = "counter") -> None:
    """Add 1 to the decimal counter at ``key`` (absent reads as 0): a read-modify-write,
    to be run inside a transaction."""
    store.set(key, b"%d" % (int(store.get(key) or b"0") + 1))
