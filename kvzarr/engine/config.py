"""ArrayConfig: the runtime settings of an array (not stored in its metadata)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ArrayConfig:
    """Runtime settings of an array; not stored in metadata."""
    #: store chunks that equal the fill value (default: erase them)
    write_empty_chunks: bool = False
    #: a missing chunk reads as the fill value (default) instead of raising ChunkNotFoundError
    read_missing_chunks: bool = True
    #: gap and span limits for merging byte ranges of one shard into one read
    coalesce_max_gap: int = 64 * 1024
    coalesce_max_bytes: int = 16 * 1024 * 1024
    #: bytes of decoded shard indexes an array handle keeps between reads, each used
    #: only while the store's change counter says its shard is unchanged (0: none;
    #: engine/index_cache.py)
    shard_index_cache_bytes: int = 16 * 1024 * 1024


#: the settings of an array opened without any (shared: the config is immutable)
DEFAULT_CONFIG = ArrayConfig()


def array_config(config: Any, write_empty_chunks: bool | None = None) -> ArrayConfig:
    """The ArrayConfig of the ``config=`` and ``write_empty_chunks=`` arguments the
    opening functions take (a config, a dict of its fields, or None)."""
    if config is None and write_empty_chunks is None:
        return DEFAULT_CONFIG
    cfg = config if isinstance(config, ArrayConfig) else ArrayConfig(**(config or {}))
    if write_empty_chunks is not None:
        cfg = replace(cfg, write_empty_chunks=write_empty_chunks)
    return cfg
