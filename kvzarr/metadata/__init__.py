"""Metadata documents: v3 ``zarr.json``, data types, chunk key encodings, extensions.

The parts below the codecs (data types, chunk key encodings, extension names) load here;
the documents (:mod:`.v3`, which parse the ``codecs`` member and so sit above the codecs)
load on first use of one of their names.
"""

from .chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from .dtypes import DataType, data_type_from_numpy, parse_data_type

_DOCUMENTS = ("ZARR_JSON", "ArrayMetadata", "GroupMetadata", "encode_json", "load_json",
              "parse_node_metadata")

__all__ = ["ArrayMetadata", "ChunkKeyEncoding", "DataType", "GroupMetadata", "ZARR_JSON",
           "data_type_from_numpy", "encode_json", "load_json", "parse_chunk_key_encoding",
           "parse_data_type", "parse_node_metadata"]


def __getattr__(name: str):
    if name in _DOCUMENTS:
        from . import v3
        return getattr(v3, name)
    raise AttributeError(name)
