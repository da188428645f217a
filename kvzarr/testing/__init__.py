"""Test helpers shipped with kvzarr: the store conformance suite (needs pytest).

    from kvzarr.testing import StoreConformance
"""

from .store_conformance import BAD_KEYS, BAD_PREFIXES, StoreConformance, dump

__all__ = ["BAD_KEYS", "BAD_PREFIXES", "StoreConformance", "dump"]
