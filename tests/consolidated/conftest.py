"""Fixtures and the oracle of the consolidated metadata tests.

``store_factory``: every store backend, as the store tests build them. ``expected_member``
is the oracle: the member a consolidating group should hold, computed straight from the
store's keys with ``json`` (not with kvzarr's own walk), in zarr-python 3's form and key
order.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from kvzarr.stores.base import Store
from kvzarr.transformers.base import Transformer
from tests.stores.conftest import store_factory  # noqa: F401

EMPTY = {"kind": "inline", "must_understand": False, "metadata": {}}


def doc_key(path: str) -> str:
    return f"{path}/zarr.json" if path else "zarr.json"


def stored_member(store: Store, path: str = "") -> Any:
    """The member as the store holds it now (None when the group has none)."""
    return json.loads(store.get(doc_key(path))).get("consolidated_metadata")


def expected_member(store: Store, path: str = "") -> dict[str, Any]:
    """What the member of the group at ``path`` must be: every node document below it,
    groups with an empty member, keys by depth then case-folded NFKC text."""
    prefix = path + "/" if path else ""
    entries = {}
    for key in store.list_prefix(prefix):
        if not key.endswith("/zarr.json") or key == doc_key(path):
            continue
        rel = key[len(prefix):-len("/zarr.json")]
        doc = json.loads(store.get(key))
        if doc["node_type"] == "group":
            doc["consolidated_metadata"] = EMPTY
        entries[rel] = doc
    order = sorted(entries, key=lambda k: (k.count("/"),
                                           unicodedata.normalize("NFKC", k).casefold(), k))
    return {"kind": "inline", "must_understand": False,
            "metadata": {k: entries[k] for k in order}}


def assert_member_true(store: Store, path: str = "") -> None:
    got = stored_member(store, path)
    want = expected_member(store, path)
    assert got == want
    assert list(got["metadata"]) == list(want["metadata"])   # zarr-python's key order


def snapshot(store: Store) -> dict[str, bytes]:
    return {k: store.get(k) for k in store.list()}


class Recording(Transformer):
    """A pass-through transformer that records the store operations made through it
    (name and keys), to tell which reads and writes an operation costs."""

    name = "recording"

    def __init__(self, base: Store | None = None) -> None:
        super().__init__(base)
        self.calls: list[tuple[str, Any]] = []

    def get(self, key: str) -> Any:
        self.calls.append(("get", key))
        return super().get(key)

    def get_many(self, keys: Any) -> Any:
        self.calls.append(("get_many", tuple(keys)))
        return super().get_many(keys)

    def exists_many(self, keys: Any) -> Any:
        self.calls.append(("exists_many", tuple(keys)))
        return super().exists_many(keys)

    def _list_dir(self, prefix: str) -> Any:
        self.calls.append(("list_dir", prefix))
        return super()._list_dir(prefix)

    def _set(self, key: str, value: bytes) -> None:
        self.calls.append(("set", key))
        super()._set(key, value)

    def _set_many(self, items: Any) -> None:
        items = list(items)
        self.calls.append(("set_many", tuple(k for k, _ in items)))
        super()._set_many(items)

    def written_keys(self) -> list[str]:
        out = []
        for op, keys in self.calls:
            if op == "set":
                out.append(keys)
            elif op == "set_many":
                out.extend(keys)
        return out
