"""Zarr v3 ``zarr.json`` documents for arrays and groups (core spec "Array metadata",
"Group metadata"; zarr-python 3's ``src/zarr/core/metadata/v3.py`` for what it writes).

Parsing checks every member's type and raises :class:`MetadataError` naming the field.
Unknown top-level members are allowed only as objects with ``"must_understand": false``;
they are kept and written back. Writing uses zarr-python's member order and always the
full object form of extensions, so what kvzarr writes other readers take as is. The JSON
is compact (no indentation; zarr-python indents by 2): whitespace means nothing to a
reader, and the json module indents only in pure Python, which cost more than all the
rest of creating an array. Documents are UTF-8 with non-ASCII text as is.

Hostile documents get a MetadataError, never another exception and never work or memory
in proportion to a number they hold: nesting deeper than the interpreter's recursion
limit is refused where it is parsed; more than :data:`MAX_NDIM` dimensions (numpy's
limit: such an array could be created but never read), extents and chunk edges past
2**63 - 1 (numpy's index type) and chunks larger than numpy can hold are refused here and
at creation (:func:`check_geometry`); rectilinear ``[value, count]`` runs stay runs
(:mod:`kvzarr.grid`).

The members that repeat from array to array (data type, chunk grid, chunk key encoding,
codecs) are parsed once per distinct value and the immutable result is reused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..codecs.pipeline import CodecPipeline
from ..codecs.registry import codecs_from_json
from ..codecs.registry import generation as codec_generation
from ..errors import MetadataError, UnsupportedExtensionError
from ..grid import MAX_INDEX, MAX_NDIM, ChunkGrid, chunk_grid_to_json, parse_chunk_grid
from ..runtime.memo import BoundedMemo
from .chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from .dtypes import DataType, parse_data_type
from .extensions import may_ignore

ZARR_JSON = "zarr.json"

_ARRAY_MEMBERS = {"zarr_format", "node_type", "shape", "data_type", "chunk_grid",
                  "chunk_key_encoding", "fill_value", "codecs", "attributes",
                  "dimension_names", "storage_transformers"}
_GROUP_MEMBERS = {"zarr_format", "node_type", "attributes", "consolidated_metadata"}


@dataclass(frozen=True)
class ArrayMetadata:
    shape: tuple[int, ...]
    data_type: DataType
    chunk_grid: ChunkGrid
    #: "regular" or "rectilinear": the form the grid is written in
    chunk_grid_name: str
    chunk_key_encoding: ChunkKeyEncoding
    fill_value: Any
    #: codec objects (kvzarr.codecs.base.Codec), in metadata order
    codecs: tuple[Any, ...]
    attributes: dict[str, Any] = field(default_factory=dict)
    dimension_names: tuple[str | None, ...] | None = None
    storage_transformers: tuple[dict[str, Any], ...] = ()
    #: unknown members with must_understand: false, kept verbatim
    extra: dict[str, Any] = field(default_factory=dict)
    #: 3 for ``zarr.json`` documents; 2 for metadata parsed from or built for ``.zarray``
    zarr_format: int = 3
    #: for v2: what :mod:`kvzarr.metadata.v2` needs to write the documents back in their
    #: own form; opaque to every other layer
    legacy: Any = None

    node_type = "array"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def to_json(self) -> dict[str, Any]:
        _only_v3(self)
        doc: dict[str, Any] = {
            "shape": list(self.shape),
            "data_type": self.data_type.to_json(),
            "chunk_grid": chunk_grid_to_json(self.chunk_grid, self.chunk_grid_name),
            "chunk_key_encoding": self.chunk_key_encoding.to_json(),
            "fill_value": self.data_type.fill_to_json(self.fill_value),
            "codecs": [c.to_json() for c in self.codecs],
            "attributes": self.attributes,
        }
        if self.dimension_names is not None:
            doc["dimension_names"] = list(self.dimension_names)
        doc["zarr_format"] = 3
        doc["node_type"] = "array"
        doc["storage_transformers"] = list(self.storage_transformers)
        doc.update(self.extra)
        return doc

    def to_bytes(self) -> bytes:
        return encode_json(self.to_json())

    def with_shape(self, shape: tuple[int, ...]) -> "ArrayMetadata":
        return replace(self, shape=tuple(shape), chunk_grid=self.chunk_grid.with_shape(shape))

    def with_attributes(self, attributes: dict[str, Any]) -> "ArrayMetadata":
        return replace(self, attributes=attributes)


@dataclass(frozen=True)
class GroupMetadata:
    attributes: dict[str, Any] = field(default_factory=dict)
    #: zarr-python's inline consolidated metadata, kept verbatim (not used for reads)
    consolidated_metadata: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: as in :class:`ArrayMetadata`
    zarr_format: int = 3
    legacy: Any = None

    node_type = "group"

    def to_json(self) -> dict[str, Any]:
        _only_v3(self)
        doc: dict[str, Any] = {"attributes": self.attributes, "zarr_format": 3}
        if self.consolidated_metadata is not None:
            doc["consolidated_metadata"] = self.consolidated_metadata
        doc["node_type"] = "group"
        doc.update(self.extra)
        return doc

    def to_bytes(self) -> bytes:
        return encode_json(self.to_json())

    def with_attributes(self, attributes: dict[str, Any]) -> "GroupMetadata":
        return replace(self, attributes=attributes)


def _only_v3(metadata: ArrayMetadata | GroupMetadata) -> None:
    """A v2 node written as ``zarr.json`` would turn a v2 hierarchy into a v3 one behind
    its users' backs: v2 documents are written only by :mod:`kvzarr.metadata.v2`."""
    if metadata.zarr_format != 3:
        raise MetadataError(f"zarr_format {metadata.zarr_format} metadata has no zarr.json "
                            "form: v2 metadata is written by kvzarr.metadata.v2",
                            field="zarr_format")


# allow_nan=False: non-finite floats must already be encoded as strings. No indent, so
# the C encoder does the work.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def check_geometry(shape: tuple[int, ...], grid: ChunkGrid, data_type: DataType) -> None:
    """MetadataError if no numpy array could hold this array's chunks: more than
    :data:`MAX_NDIM` dimensions, an extent past 2**63 - 1, or a chunk (the largest codec
    shape of the grid) of more bytes than numpy can address. Costs O(dimensions + runs),
    whatever the numbers say."""
    if len(shape) > MAX_NDIM:
        raise MetadataError(f"the array has {len(shape)} dimensions, more than the "
                            f"{MAX_NDIM} numpy supports", field="shape")
    for n in shape:
        if n > MAX_INDEX:
            raise MetadataError(f"extent {n} is larger than {MAX_INDEX}", field="shape")
    largest = [max(d.unique_edge_lengths) for d in grid.dimensions]
    itemsize = max(data_type.numpy_dtype.itemsize, 1)
    if math.prod(largest) * itemsize > MAX_INDEX:
        raise MetadataError(f"a chunk of shape {largest} of {data_type.name} has more bytes "
                            f"than numpy can hold ({MAX_INDEX})", field="chunk_grid")


def encode_json(doc: dict[str, Any]) -> bytes:
    try:
        return _ENCODER.encode(doc).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise MetadataError(f"metadata is not JSON-serializable: {e}") from e
    except RecursionError:
        raise MetadataError("metadata is nested too deeply to be written as JSON") from None


def load_json(data: bytes | str, path: str | None = None) -> dict[str, Any]:
    """Parse a metadata document; broken JSON, nesting deeper than the recursion limit
    or a non-object is a MetadataError."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError(f"metadata is not valid JSON: {e}", path=path) from e
    except RecursionError:
        raise MetadataError("metadata JSON is nested too deeply", path=path) from None
    if not isinstance(doc, dict):
        raise MetadataError("metadata must be a JSON object", path=path)
    return doc


def parse_node_metadata(data: bytes | str | dict[str, Any], path: str | None = None
                        ) -> ArrayMetadata | GroupMetadata:
    doc = data if isinstance(data, dict) else load_json(data, path)
    try:
        return _parse_node(doc, path)
    except RecursionError:
        # members that nest (codecs inside sharding codecs, attributes) walked deeper
        # than the interpreter allows
        raise MetadataError("metadata is nested too deeply", path=path) from None


def _parse_node(doc: dict[str, Any], path: str | None) -> ArrayMetadata | GroupMetadata:
    fmt = doc.get("zarr_format")
    if fmt != 3:
        raise MetadataError(f"zarr_format must be 3, got {fmt!r}", path=path, field="zarr_format")
    node_type = doc.get("node_type")
    try:
        if node_type == "array":
            return parse_array_metadata(doc)
        if node_type == "group":
            return parse_group_metadata(doc)
    except MetadataError as e:
        if e.path is None:
            e.path = path
        raise
    raise MetadataError(f"node_type must be 'array' or 'group', got {node_type!r}",
                        path=path, field="node_type")


#: (member, repr of its JSON value) -> parsed value; values are immutable, so arrays
#: share them. Bounded in entries and in key length (a long rectilinear grid is not kept).
_MEMO = BoundedMemo(1024)
_MEMO_KEY_MAX = 4096


def _memoized(member: Any, doc: Any, parse: Callable[[Any], Any]) -> Any:
    """``parse(doc)``, reused for every equal ``doc``. ``repr`` of a parsed JSON value
    tells its type apart (1, 1.0, true, "1"), so equal keys mean equal documents. Only
    successes are kept: a bad document raises its error every time."""
    key = (member, repr(doc))
    value = _MEMO.get(key)
    if value is None:
        value = parse(doc)
        if len(key[1]) <= _MEMO_KEY_MAX:
            _MEMO.keep(key, value)
    return value


def _parse_codecs(docs: Any) -> tuple[Any, ...]:
    codecs = tuple(codecs_from_json(docs))
    CodecPipeline(codecs)  # checks the codec kinds and their order
    return codecs


def _extra_members(doc: dict[str, Any], known: set[str]) -> dict[str, Any]:
    extra = {}
    for key in doc.keys() - known:
        if may_ignore(doc[key]):
            extra[key] = doc[key]
        else:
            raise UnsupportedExtensionError(
                f"unknown metadata member {key!r} (only members with "
                f"\"must_understand\": false may be ignored)", field=key)
    return extra


def _attributes(doc: dict[str, Any]) -> dict[str, Any]:
    attrs = doc.get("attributes", {})
    if not isinstance(attrs, dict):
        raise MetadataError("attributes must be an object", field="attributes")
    return attrs


def parse_group_metadata(doc: dict[str, Any]) -> GroupMetadata:
    cm = doc.get("consolidated_metadata")
    if cm is not None and not isinstance(cm, dict):
        raise MetadataError("consolidated_metadata must be an object",
                            field="consolidated_metadata")
    return GroupMetadata(attributes=_attributes(doc), consolidated_metadata=cm,
                         extra=_extra_members(doc, _GROUP_MEMBERS))


def parse_array_metadata(doc: dict[str, Any]) -> ArrayMetadata:
    for required in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value",
                     "codecs"):
        if required not in doc:
            raise MetadataError("required member is missing", field=required)
    shape = doc["shape"]
    if (not isinstance(shape, list)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        raise MetadataError(f"shape must be a list of non-negative integers, got {shape!r}",
                            field="shape")
    if len(shape) > MAX_NDIM:       # before anything loops over the dimensions
        raise MetadataError(f"the array has {len(shape)} dimensions, more than the "
                            f"{MAX_NDIM} numpy supports", field="shape")
    shape = tuple(shape)
    data_type = _memoized("data_type", doc["data_type"], parse_data_type)
    grid, grid_name = _memoized("chunk_grid", (doc["chunk_grid"], shape),
                                lambda d: parse_chunk_grid(*d))
    check_geometry(shape, grid, data_type)
    cke = _memoized("chunk_key_encoding", doc["chunk_key_encoding"],
                    parse_chunk_key_encoding)
    fill = data_type.fill_from_json(doc["fill_value"])
    # (a codec registered since may parse the same document differently)
    codecs = _memoized(("codecs", codec_generation()), doc["codecs"], _parse_codecs)
    dim_names = doc.get("dimension_names")
    if dim_names is not None:
        if (not isinstance(dim_names, list) or len(dim_names) != len(shape)
                or not all(n is None or isinstance(n, str) for n in dim_names)):
            raise MetadataError(
                f"dimension_names must be a list of {len(shape)} strings or nulls",
                field="dimension_names")
        dim_names = tuple(dim_names)
    transformers = doc.get("storage_transformers", [])
    if not isinstance(transformers, list):
        raise MetadataError("storage_transformers must be a list", field="storage_transformers")
    for t in transformers:
        if not may_ignore(t):
            name = t.get("name") if isinstance(t, dict) else t
            raise UnsupportedExtensionError(f"unsupported storage transformer {name!r}",
                                            field="storage_transformers")
    return ArrayMetadata(
        shape=shape, data_type=data_type, chunk_grid=grid, chunk_grid_name=grid_name,
        chunk_key_encoding=cke, fill_value=fill, codecs=codecs, attributes=_attributes(doc),
        dimension_names=dim_names, storage_transformers=tuple(transformers),
        extra=_extra_members(doc, _ARRAY_MEMBERS))
