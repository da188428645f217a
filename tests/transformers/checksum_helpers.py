"""Helpers of the checksum transformer tests: a stack over a real store of one backend,
bit flips written through the raw store under it, and a dump of everything the raw store
holds (values and records), which "unchanged" is compared on."""

from __future__ import annotations

from typing import Any

from kvzarr.stores.base import Store
from kvzarr.transformers import Checksum, build_stack
from kvzarr.transformers.checksum import RECORD_PREFIX

from .conftest import StoreFactory


def stacked(factory: StoreFactory, **options: Any) -> tuple[Store, Store]:
    """A writable Checksum stack over a new store of ``factory``, and that store."""
    raw = factory.make()
    return build_stack(raw, [Checksum(**options)]), raw


def flip(raw: Store, key: str, at: int, bit: int = 0) -> bytes:
    """Flip one bit of the stored value of ``key`` (through the raw store, so no record
    changes); returns the value as it was."""
    old = raw.get(key)
    assert old is not None, key
    damaged = bytearray(old)
    damaged[at] ^= 1 << bit
    raw.set(key, bytes(damaged))
    return old


def record_of(raw: Store, key: str) -> bytes | None:
    return raw.get(RECORD_PREFIX + key)


def everything(raw: Store) -> dict[str, bytes | None]:
    return {k: raw.get(k) for k in raw.list()}
