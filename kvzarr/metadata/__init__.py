"""Metadata documents: v3 ``zarr.json``, data types, chunk key encodings, extensions."""

from .chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from .dtypes import DataType, data_type_from_numpy, parse_data_type
from .v3 import (ZARR_JSON, ArrayMetadata, GroupMetadata, encode_json, load_json,
                 parse_node_metadata)

__all__ = ["ArrayMetadata", "ChunkKeyEncoding", "DataType", "GroupMetadata", "ZARR_JSON",
           "data_type_from_numpy", "encode_json", "load_json", "parse_chunk_key_encoding",
           "parse_data_type", "parse_node_metadata"]
