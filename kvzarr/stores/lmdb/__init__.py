"""The LMDB backend (specification: stores/lmdb.md).

``store.py`` holds :class:`LMDBStore`; ``env.py`` the per-process side of an environment
(sharing, fork handling, map growth, locks, error translation); ``keymap.py`` the mapping
of keys longer than LMDB's 511 bytes and the ordered scans over it.
"""

from .env import DURABILITY
from .store import LMDBStore

__all__ = ["DURABILITY", "LMDBStore"]
