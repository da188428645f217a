"""Building a transformer stack from ``transformers=[...]``: names, option dicts or
instances, listed from the array down to the store."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from ..errors import KvzarrError, StoreConfigError
from ..stores.base import Store
from .base import Transformer

#: name -> (module, class) of every transformer ``transformers=[...]`` knows by name
TRANSFORMERS = {
    "cache": ("cache", "Cache"),
    "checksum": ("checksum", "Checksum"),
    "append_shards": ("append_shards", "AppendShards"),
}


def transformer_class(name: str) -> type[Transformer]:
    """The class registered under ``name``; StoreConfigError for an unknown name."""
    if not isinstance(name, str) or name not in TRANSFORMERS:
        raise StoreConfigError(f"unknown storage transformer {name!r}", field="transformers",
                               hint=f"known: {', '.join(sorted(TRANSFORMERS))}")
    module, cls = TRANSFORMERS[name]
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)


def make_transformer(item: Any) -> Transformer:
    """A new, unbound transformer for one item of ``transformers=[...]``: a name
    (``"cache"``), a dict with ``"name"`` and options (``{"name": "cache",
    "max_bytes": 1 << 30}``), or an unbound instance (used as it is)."""
    if isinstance(item, Transformer):
        return item
    if isinstance(item, str):
        return transformer_class(item)()
    if isinstance(item, dict):
        options = dict(item)
        cls = transformer_class(options.pop("name", None))
        return cls(**options)
    raise StoreConfigError(
        f"a transformer is a name, a dict with a 'name' or a Transformer, not "
        f"{type(item).__name__}", field="transformers")


def build_stack(store: Store, transformers: Iterable[Any] | None) -> Store:
    """``store`` under the transformers listed (top first); ``store`` itself for none.
    Nothing is bound unless every item is valid, so a bad list leaves no half stack."""
    if transformers is None:
        return store
    if isinstance(transformers, (str, dict, Transformer)):
        transformers = [transformers]
    try:
        items = [make_transformer(t) for t in transformers]
    except KvzarrError:
        raise
    except TypeError as e:   # options a transformer's constructor does not take
        raise StoreConfigError(f"bad transformer options: {e}", field="transformers") from e
    if len({id(t) for t in items}) != len(items):
        raise StoreConfigError("the same transformer instance is listed twice",
                               field="transformers")
    for t in items:
        if t.bound:
            raise StoreConfigError(f"this {type(t).__name__} is already part of a stack",
                                   field="transformers",
                                   hint="create a new transformer for each stack")
    top = store
    for t in reversed(items):
        top = t.bind(top)
    return top
