"""Codec registry: name -> class, and parsing of the ``codecs`` metadata member."""

from __future__ import annotations

from typing import Any

from ..errors import MetadataError, UnsupportedExtensionError
from ..metadata.extensions import may_ignore, split_extension
from .base import Codec

_CODECS: dict[str, type[Codec]] = {}
#: bumped by every registration: codecs parsed before it may resolve differently now
_generation = 0


def register_codec(cls: type[Codec], *aliases: str) -> type[Codec]:
    """Register ``cls`` under ``cls.name`` (and any aliases read on input)."""
    global _generation
    for name in (cls.name, *aliases):
        _CODECS[name] = cls
    _generation += 1
    return cls


def generation() -> int:
    """How many registrations there have been: memos of parsed ``codecs`` members key on
    it, so a registration makes them parse again."""
    return _generation


def get_codec_class(name: str) -> type[Codec] | None:
    _load_builtin()
    if name in _CODECS:
        return _CODECS[name]
    if name.startswith("numcodecs."):
        from .numcodecs_adapter import numcodecs_codec_class
        return numcodecs_codec_class(name)
    return None


def codec_from_json(doc: Any, field: str = "codecs") -> Codec | None:
    """A codec from its metadata form; None for an unknown codec that may be ignored."""
    name, config = split_extension(doc, field)
    cls = get_codec_class(name)
    if cls is None:
        if may_ignore(doc):
            return None
        raise UnsupportedExtensionError(f"unsupported codec {name!r}", field=field)
    return cls.from_config(config)


def codecs_from_json(docs: Any, field: str = "codecs") -> list[Codec]:
    if not isinstance(docs, list):
        raise MetadataError("codecs must be a list", field=field)
    out = []
    for i, doc in enumerate(docs):
        codec = codec_from_json(doc, f"{field}[{i}]")
        if codec is not None:
            out.append(codec)
    return out


_loaded = False


def _load_builtin() -> None:
    """Import the codec modules once; each registers itself."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib
    for module in ("bytes", "transpose", "gzip", "blosc", "zstd", "crc32c",
                   "vlen", "sharding_indexed"):
        importlib.import_module(f"{__package__}.{module}")
