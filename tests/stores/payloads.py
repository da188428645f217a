"""Test values that say where they came from: ``payload(tag, i, size)`` repeats
``"tag:i;"`` to ``size`` bytes, so a value read back under the wrong key, from the wrong
writer or cut short never equals the one expected."""

from __future__ import annotations


def payload(tag: object, i: int, size: int) -> bytes:
    unit = f"{tag}:{i};".encode()
    return (unit * (size // len(unit) + 1))[:size]
