"""The ordinary arrays of a vector dataset: object ids, manifests, object and group
attributes, groups. They are plain Zarr v3 arrays with zarr-python's defaults, written
here with the documents zarr-vectors 0.9.2 writes and read through kvzarr's Array, so
that any chunking or codec another writer chose reads too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..array import Array
from ..codecs.base import ChunkArraySpec
from ..codecs.pipeline import CodecPipeline
from ..errors import MetadataError
from ..metadata.v3 import ArrayMetadata, parse_array_metadata
from .cells import VLEN_BYTES, ZSTD
from .target import Target

BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}


def document(shape: tuple[int, ...], data_type: str, chunks: tuple[int, ...],
             codecs: list[dict[str, Any]], fill_value: Any,
             attributes: dict[str, Any]) -> dict[str, Any]:
    return {"shape": list(shape), "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill_value, "codecs": codecs, "attributes": attributes,
            "zarr_format": 3, "node_type": "array", "storage_transformers": []}


def bytes_document(n: int, chunk: int, attributes: dict[str, Any]) -> dict[str, Any]:
    return document((n,), "variable_length_bytes", (chunk,), [VLEN_BYTES, ZSTD], "",
                    attributes)


def encode(target: Target, path: str, doc: dict[str, Any], data: np.ndarray
           ) -> list[tuple[str, bytes]]:
    """The ``zarr.json`` and every chunk of ``data`` under the document ``doc``, as
    key-value pairs (edge chunks padded with the fill value, as Zarr v3 stores them)."""
    from ..metadata.v3 import encode_json
    meta = parse_array_metadata(doc)
    items = [(target.key(f"{path}/zarr.json"), encode_json(doc))]
    chunks = meta.chunk_grid.chunk_shape
    pipeline = CodecPipeline(meta.codecs)
    spec = ChunkArraySpec(tuple(chunks), meta.data_type, meta.fill_value)
    grid = tuple(math.ceil(s / c) for s, c in zip(data.shape, chunks))
    for block in np.ndindex(*grid):
        sel = tuple(slice(b * c, min((b + 1) * c, s))
                    for b, c, s in zip(block, chunks, data.shape))
        part = data[sel]
        if part.shape != tuple(chunks):
            full = np.empty(chunks, dtype=data.dtype)
            full[...] = meta.fill_value if data.dtype != object else b""
            full[tuple(slice(0, n) for n in part.shape)] = part
            part = full
        if _all_fill(part, meta.fill_value):   # (zarr-python stores no such chunk)
            continue
        value = pipeline.encode(np.ascontiguousarray(part), spec)
        if value is not None:
            key = meta.chunk_key_encoding.encode(block)
            items.append((target.key(f"{path}/{key}"), value))
    return items


def read(target: Target, path: str, doc: dict[str, Any] | None = None) -> np.ndarray:
    """The whole array at ``path`` (its document read first unless given)."""
    if doc is None:
        doc = target.require_json(f"{path}/zarr.json")
    if doc.get("zarr_format") != 3 or doc.get("node_type") != "array":
        raise MetadataError("not a Zarr v3 array document", key=target.key(path),
                            field="node_type")
    meta = parse_array_metadata(doc)
    if not isinstance(meta, ArrayMetadata):
        raise MetadataError("expected an array", key=target.key(path))
    node = target.root + "/" + path if target.root else path
    return Array(target.store, node, meta, read_only=True)[...]


def _all_fill(part: np.ndarray, fill: Any) -> bool:
    if part.dtype == object:
        return all(bytes(v) == bytes(fill) for v in part.ravel())
    if part.dtype.kind == "f" and isinstance(fill, float) and math.isnan(fill):
        return bool(np.all(np.isnan(part)))
    return bool(np.all(part == fill))


def fill_json(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, np.generic):
        return value.item()
    return value
