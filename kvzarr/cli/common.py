"""What the subcommands share: opening a store to read without creating one, progress
bars on stderr, sizes for people, and names as the Zarr metadata gives them."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..errors import StoreError


def open_existing(target: str, *, mode: str = "r") -> Any:
    """The store at ``target`` (a path or URL); a path where nothing is raises
    StoreError instead of making an empty store there (opening writable would create
    one, and a read-only directory store would just look empty)."""
    import kvzarr
    if "://" not in target and not os.path.exists(target):
        raise StoreError("no store at this path", path=target)
    return kvzarr.open_store(target, mode=mode)


class ProgressBars:
    """A ``progress(stage, done, total)`` callback for the library's long operations
    (:func:`kvzarr.copy_store`): one tqdm bar per stage on stderr, shown only when
    stderr is a terminal (``disable=None``), closed by ``with`` or :meth:`close`."""

    def __init__(self, unit: str = " values") -> None:
        self.unit = unit
        self._bars: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        bar = self._bars.get(stage)
        if bar is None:
            from tqdm import tqdm
            for other in self._bars.values():   # a new stage: the last one is done
                other.close()
            bar = self._bars[stage] = tqdm(total=total, unit=self.unit, desc=stage,
                                           file=sys.stderr, disable=None)
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()

    def __enter__(self) -> "ProgressBars":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def human_size(n: float) -> str:
    """``1,234 B``, ``5.2 MiB``: bytes for people."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n):,} B" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"


def data_type_name(array: Any) -> str:
    """The array's data type as its ``zarr.json`` names it ("float32", "string", or an
    extension's name)."""
    return array.metadata.data_type.name


def chunk_text(array: Any) -> str:
    """The stored chunk layout in a few words: ``chunks (256, 256)``, ``shards (256,
    256) of (64, 64)``, or ``rectilinear chunks`` with the sizes per dimension."""
    sharded = any(c.name == "sharding_indexed" for c in array.codecs)
    if not array.metadata.chunk_grid.is_regular:
        sizes = "; ".join(_runs(d) for d in array.write_chunk_sizes)
        if sharded:
            return f"rectilinear shards [{sizes}] of {array.chunks}"
        return f"rectilinear chunks [{sizes}]"
    if sharded:
        return f"shards {array.shards} of {array.chunks}"
    return f"chunks {array.chunks}"


def _runs(sizes: tuple[int, ...]) -> str:
    """``4x10, 5`` for (10, 10, 10, 10, 5): the sizes of one dimension, run-length."""
    out: list[str] = []
    i = 0
    while i < len(sizes):
        j = i
        while j < len(sizes) and sizes[j] == sizes[i]:
            j += 1
        out.append(f"{j - i}x{sizes[i]}" if j - i > 1 else str(sizes[i]))
        i = j
    return ", ".join(out)
