"""Chunk key encodings (core spec "Chunk key encoding",
https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html).

``default``: ``c`` then ``separator + index`` per dimension (``c/1/23``; a 0-d array is
``c``). ``v2``: the indices joined by the separator with no prefix (``1.23``; 0-d is
``0``). ``must_understand: false`` is not allowed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import MetadataError, UnsupportedExtensionError
from .extensions import split_extension


@dataclass(frozen=True)
class ChunkKeyEncoding:
    name: str  # "default" or "v2"
    separator: str

    def __post_init__(self) -> None:
        if self.name not in ("default", "v2"):
            raise UnsupportedExtensionError(f"unsupported chunk key encoding {self.name!r}",
                                            field="chunk_key_encoding")
        if self.separator not in ("/", "."):
            raise MetadataError(f"separator must be '/' or '.', got {self.separator!r}",
                                field="chunk_key_encoding.configuration.separator")

    def encode(self, coords: Sequence[int]) -> str:
        """The key of the chunk at grid ``coords``, relative to the array's path."""
        if self.name == "default":
            if not coords:
                return "c"
            return "c" + self.separator + self.separator.join(map(str, coords))
        if not coords:
            return "0"
        return self.separator.join(map(str, coords))

    def encode_grid(self, coords: Sequence[Sequence[int]]) -> list[str]:
        """The keys of every chunk in the Cartesian product of per-dimension ``coords``,
        in C order: the same keys as :meth:`encode` of each, built a dimension at a time
        (a big write names tens of thousands of chunks)."""
        if not coords:
            return [self.encode(())]
        sep = self.separator
        head = "c" + sep if self.name == "default" else ""
        keys = [head + str(i) for i in coords[0]]
        for dim in coords[1:]:
            tails = [sep + str(i) for i in dim]
            keys = [k + t for k in keys for t in tails]
        return keys

    def encode_many(self, coords: Sequence[Sequence[int]], prefix: str = "") -> list[str]:
        """``prefix`` + :meth:`encode` of each of ``coords`` (all of one length), built a
        dimension at a time: a read of many small chunks names thousands of them."""
        if not coords or not coords[0]:
            return [prefix + self.encode(c) for c in coords]
        sep = self.separator
        columns = list(zip(*coords))
        head = prefix + ("c" + sep if self.name == "default" else "")
        keys = [head + str(i) for i in columns[0]]
        for column in columns[1:]:
            keys = [k + sep + str(i) for k, i in zip(keys, column)]
        return keys

    def decode(self, key: str, ndim: int) -> tuple[int, ...] | None:
        """Grid coordinates of a relative chunk key, or None if it is not a chunk key of
        an array with ``ndim`` dimensions."""
        if self.name == "default":
            if ndim == 0:
                return () if key == "c" else None
            head = "c" + self.separator
            if not key.startswith(head):
                return None
            parts = key[len(head):].split(self.separator)
        else:
            if ndim == 0:
                return () if key == "0" else None
            parts = key.split(self.separator)
        if len(parts) != ndim or not all(p.isdigit() and p.isascii() for p in parts):
            return None
        return tuple(int(p) for p in parts)

    @property
    def chunk_prefix(self) -> str:
        """Relative prefix under which every chunk key lies ("" when keys have none)."""
        return "c" + self.separator if self.name == "default" and self.separator == "/" else ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {"separator": self.separator}}


def parse_chunk_key_encoding(doc: Any) -> ChunkKeyEncoding:
    name, config = split_extension(doc, "chunk_key_encoding", allow_ignore=False)
    if name not in ("default", "v2"):
        raise UnsupportedExtensionError(f"unsupported chunk key encoding {name!r}",
                                        field="chunk_key_encoding")
    unknown = set(config) - {"separator"}
    if unknown:
        raise MetadataError(f"unknown configuration members {sorted(unknown)}",
                            field="chunk_key_encoding.configuration")
    separator = config.get("separator", "/" if name == "default" else ".")
    if not isinstance(separator, str):
        raise MetadataError("separator must be a string",
                            field="chunk_key_encoding.configuration.separator")
    return ChunkKeyEncoding(name, separator)
