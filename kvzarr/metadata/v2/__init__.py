"""Zarr v2 metadata (https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html): ``.zarray``,
``.zgroup`` and ``.zattrs`` as kvzarr's :class:`~kvzarr.metadata.v3.ArrayMetadata` /
:class:`~kvzarr.metadata.v3.GroupMetadata` with ``zarr_format=2``, written back in their
own form, and converted to v3 metadata that reads the same chunks.

* :mod:`.dtypes` — v2 dtype strings and fill values as kvzarr data types;
* :mod:`.codecs` — ``order``/``filters``/``compressor`` as a kvzarr codec chain;
* :mod:`.documents` — parsing and writing the documents, new v2 arrays and groups;
* :mod:`.convert` — v2 -> v3 metadata.

A v2 metadata object's codecs encode exactly the bytes zarr-python 2 writes and decode
what it reads, so the chunk engine treats v2 and v3 arrays alike; only the documents
differ, and ``ArrayMetadata.to_json``/``to_bytes`` refuse to write a v2 one as
``zarr.json``.
"""

from .convert import v2_group_to_v3, v2_to_v3
from .documents import (ZARRAY, ZATTRS, ZGROUP, ZMETADATA, V2ArrayLegacy, V2GroupLegacy,
                        build_v2_array_metadata, build_v2_group_metadata, parse_v2_array,
                        parse_v2_group, v2_array_documents, v2_group_documents)
from .dtypes import V2DType, parse_v2_dtype

__all__ = ["ZARRAY", "ZATTRS", "ZGROUP", "ZMETADATA", "V2ArrayLegacy", "V2DType",
           "V2GroupLegacy", "build_v2_array_metadata", "build_v2_group_metadata",
           "parse_v2_array", "parse_v2_dtype", "parse_v2_group", "v2_array_documents",
           "v2_group_documents", "v2_group_to_v3", "v2_to_v3"]
