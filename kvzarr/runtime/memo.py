"""A bounded memo for parsed, immutable objects that many arrays share (metadata
members, data types, evolved codec pipelines, node types).

Such caches see a few distinct values hit over and over; emptying the memo when it is
full keeps it bounded without an LRU's bookkeeping on every hit.
"""

from __future__ import annotations

from typing import Any


class BoundedMemo(dict):
    """A dict that forgets every entry when a new one would exceed ``max_entries``."""

    def __init__(self, max_entries: int) -> None:
        super().__init__()
        self.max_entries = max_entries

    def keep(self, key: Any, value: Any) -> Any:
        """Remember ``value`` under ``key`` and return it."""
        if len(self) >= self.max_entries:
            self.clear()
        self[key] = value
        return value
