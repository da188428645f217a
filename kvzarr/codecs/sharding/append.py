"""The append-only write strategy of the sharding codec (codecs/sharding-indexed v1.0,
"Binary shard format": *Append-only*): the index arithmetic of appending changed inner
chunks and a new index to a shard, and of its garbage.

A shard's garbage is every byte that no index entry reads and that is not the index:
``size - index size - bytes of the stored inner chunks``. It is computed from the index
alone, so it is exact after any crash and needs no record of its own. (Entries that
share bytes, which other writers may produce, can make it negative: it is then 0.)

Appending needs the index at the end (an index at the start cannot move) and a crc32c
checksum as the last index codec: a reader that meets a half-written append on a store
that cannot hide one then gets a checksum error instead of a wrong index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .layout import MISSING, ShardIndex

#: RewriteUpdate.reason of a dense rewrite past the policy's garbage limit
COMPACTION = "garbage past max_garbage"


def append_refusal(index_location: str, index_codec_names: Sequence[str]) -> str | None:
    """Why shards of this configuration are rewritten instead of appended to, or None."""
    if index_location != "end":
        return "the shard index is at the start"
    if not index_codec_names or index_codec_names[-1] != "crc32c":
        return "the shard index has no crc32c checksum"
    return None


def garbage(index: ShardIndex, size: int, index_size: int) -> int:
    """Bytes of a ``size``-byte shard that neither the index nor a stored inner chunk
    holds."""
    e = index.entries
    live = int(e[index.present, 1].sum(dtype=np.uint64))
    return max(size - index_size - live, 0)


def appended_index(index: ShardIndex, new: Mapping[int, bytes | None], size: int,
                   rank: np.ndarray) -> tuple[ShardIndex, list[bytes]]:
    """The index after appending the inner chunks ``new`` (flat id -> encoded bytes, or
    None for a chunk that is now the fill value and no longer stored) to a shard of
    ``size`` bytes, and the chunk bytes to append, in write order (``rank``: each flat
    id's position in it, the Morton order zarr-python writes). Untouched inner chunks
    keep their offsets."""
    entries = index.entries.copy()
    parts: list[bytes] = []
    offset = size
    for i in sorted(new, key=rank.__getitem__):
        data = new[i]
        if data is None:
            entries[i] = MISSING
            continue
        n = memoryview(data).nbytes
        entries[i, 0], entries[i, 1] = offset, n
        parts.append(data)
        offset += n
    return ShardIndex(entries), parts
