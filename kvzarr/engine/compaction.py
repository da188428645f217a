"""Compaction of one array's chunks on demand: every stored chunk that holds garbage (a
shard that partial writes appended to) is laid out again without it, each inside its own
write transaction. What garbage is and how a shard is laid out is the codec's business
(``CodecPipeline.compact``); this module only walks the stored chunks.

Promises: a chunk is read, compacted and written back in one write transaction (on a
store without transactions: under the store's key lock of the chunk, which kvzarr's chunk
writers take too), so a concurrent kvzarr writer of the same chunk is never lost. A chunk the codec cannot read (a checksum mismatch, an index pointing past its
end) is reported and left exactly as it is. The new chunk holds the same encoded inner
chunks, so every reader reads the same values before and after.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

from ..errors import KvzarrError
from .chunk_io import ChunkIO

_NO_LOCK = nullcontext()


@dataclass
class CompactionReport:
    """What a compaction found and did (sizes in bytes)."""
    #: arrays whose chunks can hold garbage (partly written shards), and their chunks
    arrays: int = 0
    chunks: int = 0
    #: chunks laid out again (or, in a dry run, that would be)
    compacted: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    #: (key, what is wrong) of every chunk that could not be read; left unchanged
    corrupt: list[tuple[str, str]] = field(default_factory=list)
    #: bytes the store itself freed afterwards (a zip archive rewritten without the
    #: members the shards replaced); not part of :attr:`reclaimed`
    store_reclaimed: int = 0

    @property
    def reclaimed(self) -> int:
        """Bytes the compaction freed (or, in a dry run, would free)."""
        return self.bytes_before - self.bytes_after

    def add(self, other: "CompactionReport") -> None:
        """Add ``other``'s counts to this report (one report for several arrays)."""
        self.arrays += other.arrays
        self.chunks += other.chunks
        self.compacted += other.compacted
        self.bytes_before += other.bytes_before
        self.bytes_after += other.bytes_after
        self.corrupt.extend(other.corrupt)
        self.store_reclaimed += other.store_reclaimed


def compactable(io: ChunkIO) -> bool:
    """Whether the array's chunks can hold garbage: partial writes go through its codec
    (a shard with nothing around it)."""
    return io.pipeline.supports_partial


def stored_chunk_keys(io: ChunkIO) -> list[tuple[tuple[int, ...], str]]:
    """(grid coordinates, key) of every stored chunk of the array, in key order."""
    return [(coords, io.key(coords)) for coords in io.stored_chunk_coords()]


def compact_chunks(io: ChunkIO, chunks: list[tuple[tuple[int, ...], str]], *,
                   dry_run: bool = False,
                   progress: Callable[[str], None] | None = None) -> CompactionReport:
    """Compact ``chunks`` (from :func:`stored_chunk_keys`) of one array; ``progress(key)``
    after each. ``dry_run`` reads and measures but writes nothing."""
    report = CompactionReport(arrays=1)
    store = io.store
    caps = store.capabilities
    lock = store.key_lock if caps.key_locks and not caps.transactional and not dry_run \
        else None
    for coords, key in chunks:
        with (lock([key]) if lock is not None else _NO_LOCK), \
                store.transaction(write=not dry_run):
            data = store.get(key)
            if data is not None:
                report.chunks += 1
                size = len(data)
                report.bytes_before += size
                try:
                    result = io.pipeline.compact(data, io.spec(coords), key)
                except KvzarrError as e:
                    report.corrupt.append((key, str(e)))
                    result = None
                if result is None:
                    report.bytes_after += size
                else:
                    report.compacted += 1
                    report.bytes_after += len(result.data)
                    if not dry_run:
                        store.set(key, result.data)
        if progress is not None:
            progress(key)
    return report
