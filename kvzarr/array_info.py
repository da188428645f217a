"""ArrayInfo: the readable summary ``Array.info`` and ``Array.info_complete()`` return,
with the rows zarr-python's ``ArrayInfo`` prints (``Type`` ... ``Chunks Initialized``)
and kvzarr's own (dimension names, the store and its transformer stack, the path).
"""

from __future__ import annotations

import json
from typing import Any

from .stores.base import Store
from .transformers.base import stack_layers


class ArrayInfo:
    """A summary of an array; ``repr`` prints it, one ``Name : value`` row per line.

    The data type and fill value are shown as the array's ``zarr.json`` names them (the
    Zarr v3 spec's "data_type" and "fill_value" members). ``stored`` (bytes) and
    ``initialized`` (chunks or shards written) are given by ``info_complete()`` only:
    building the static summary never reads the store."""

    def __init__(self, array: Any, *, stored: int | None = None,
                 initialized: int | None = None) -> None:
        self.array = array
        #: bytes of the array in the store (``zarr.json`` and chunks), or None
        self.stored = stored
        #: chunks (shards, when sharded) present in the store, or None
        self.initialized = initialized

    def rows(self) -> list[tuple[str, str]]:
        """The (name, value) rows ``repr`` prints, in order."""
        a = self.array
        m = a.metadata
        sharded = a._sharding is not None
        grid = m.chunk_grid
        rows = [("Type", "Array"), ("Zarr format", str(m.zarr_format)),
                ("Data type", _json(m.data_type.to_json())),
                ("Fill value", _json(m.data_type.fill_to_json(m.fill_value))),
                ("Shape", str(a.shape))]
        if sharded:
            rows.append(("Shard shape", str(grid.chunk_shape) if grid.is_regular
                         else f"rectilinear {a.write_chunk_sizes}"))
        rows.append(("Chunk shape", str(a.chunks) if grid.is_regular or sharded
                     else f"rectilinear {a.chunk_sizes}"))
        rows += [("Order", a.order), ("Read-only", str(a.read_only)),
                 ("Store type", type(stack_layers(a.store)[-1]).__name__),
                 ("Filters", str(a.filters)), ("Serializer", str(a.serializer)),
                 ("Compressors", str(a.compressors))]
        if a.dimension_names is not None:
            rows.append(("Dimension names", str(a.dimension_names)))
        rows += [("Store", repr(stack_layers(a.store)[-1])),
                 ("Transformers", describe_transformers(a.store)), ("Path", a.name),
                 ("No. bytes", byte_info(a.nbytes))]
        if self.stored is not None:
            rows.append(("No. bytes stored", byte_info(self.stored)))
            if self.stored > 0:
                rows.append(("Storage ratio", f"{a.nbytes / self.stored:.1f}"))
        if self.initialized is not None:
            rows.append(("Shards Initialized" if sharded else "Chunks Initialized",
                         f"{self.initialized}/{a.nchunks}"))
        return rows

    def __repr__(self) -> str:
        rows = self.rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}} : {v}" for k, v in rows)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def byte_info(size: int) -> str:
    """``size`` bytes as zarr-python's info shows them: ``512``, ``4096 (4.0K)``."""
    if size < 1024:
        return str(size)
    for unit, scale in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if size < scale << 10:
            return f"{size} ({size / scale:.1f}{unit})"
    return f"{size} ({size / (1 << 50):.1f}P)"


def describe_transformers(store: Store) -> str:
    """The storage transformers between the array and its store, top first, each with
    its options and counters; "none" without any."""
    parts = []
    for layer in stack_layers(store)[:-1]:
        opts = ", ".join(f"{k}={v!r}" for k, v in layer.options().items())
        stats = ", ".join(f"{k} {v}" for k, v in layer.stats().items())
        parts.append(f"{layer.name}({opts})" + (f" [{stats}]" if stats else ""))
    return " > ".join(parts) if parts else "none"


__all__ = ["ArrayInfo", "byte_info", "describe_transformers"]
