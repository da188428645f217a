"""Pending writes of an open transaction, kept beside the committed data until commit:
the one piece of bookkeeping the memory and zip stores share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: marks a key erased inside the transaction
DELETED: Any = object()


def merged_keys(committed: Iterable[str], pending: Mapping[str, Any], prefix: str) -> list[str]:
    """The sorted keys under ``prefix`` as the transaction sees them: the committed keys
    with its pending sets added and its pending erases removed."""
    keys = set(committed)
    for key, value in pending.items():
        if key.startswith(prefix):
            if value is DELETED:
                keys.discard(key)
            else:
                keys.add(key)
    return sorted(keys)
