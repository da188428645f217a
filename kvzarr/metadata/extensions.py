"""How extension points are written in v3 metadata (core spec, "Extension definition").

An extension is a short-hand name string (``"bytes"``) or an object
``{"name": ..., "configuration": {...}, "must_understand": bool}``. kvzarr reads both and
always writes the full object. An unknown extension whose ``must_understand`` is
``false`` may be ignored; any other unknown extension is an error.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import MetadataError

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9\-_.]+$|^[a-z]$")


def split_extension(doc: Any, field: str, *, allow_ignore: bool = True
                    ) -> tuple[str, dict[str, Any]]:
    """Return ``(name, configuration)`` of an extension value (string or object)."""
    if isinstance(doc, str):
        return doc, {}
    if not isinstance(doc, dict):
        raise MetadataError(f"expected a name or an object, got {type(doc).__name__}",
                            field=field)
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise MetadataError("extension object needs a non-empty string 'name'", field=field)
    config = doc.get("configuration", {})
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise MetadataError("'configuration' must be an object", field=f"{field}.configuration")
    mu = doc.get("must_understand", True)
    if not isinstance(mu, bool):
        raise MetadataError("'must_understand' must be a boolean",
                            field=f"{field}.must_understand")
    if not mu and not allow_ignore:
        raise MetadataError(f"must_understand: false is not allowed for {field}", field=field)
    extra = set(doc) - {"name", "configuration", "must_understand"}
    if extra:
        raise MetadataError(f"unexpected members {sorted(extra)} in extension object",
                            field=field)
    return name, config


def may_ignore(doc: Any) -> bool:
    """True when an unknown extension value explicitly allows being ignored."""
    return isinstance(doc, dict) and doc.get("must_understand") is False


def extension_json(name: str, configuration: dict[str, Any] | None) -> dict[str, Any]:
    """The full object form kvzarr writes (``configuration`` omitted when None)."""
    out: dict[str, Any] = {"name": name}
    if configuration is not None:
        out["configuration"] = configuration
    return out
