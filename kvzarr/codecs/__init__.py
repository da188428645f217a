"""Codecs (core spec "Codecs"): one module per codec, the pipeline, the registry.

Importing this package registers the core codecs; ``numcodecs.*`` names resolve on demand.
"""

from .base import (ArrayArrayCodec, ArrayBytesCodec, ByteSource, BytesBytesCodec,
                   ChunkArraySpec, Codec)
from .blosc import BloscCodec
from .bytes import BytesCodec
from .crc32c import Crc32cCodec
from .gzip import GzipCodec
from .numcodecs_adapter import (NumcodecsArrayArrayCodec, NumcodecsArrayBytesCodec,
                                NumcodecsBytesBytesCodec, numcodecs_codec,
                                numcodecs_codec_class)
from .pipeline import CodecPipeline
from .registry import codec_from_json, codecs_from_json, get_codec_class, register_codec
from .sharding_indexed import ShardingCodec
from .transpose import TransposeCodec
from .vlen import VlenBytesCodec, VlenUtf8Codec
from .zstd import ZstdCodec

__all__ = [
    "ArrayArrayCodec", "ArrayBytesCodec", "ByteSource", "BytesBytesCodec", "ChunkArraySpec",
    "Codec", "CodecPipeline", "BloscCodec", "BytesCodec", "Crc32cCodec", "GzipCodec",
    "NumcodecsArrayArrayCodec", "NumcodecsArrayBytesCodec", "NumcodecsBytesBytesCodec",
    "ShardingCodec", "TransposeCodec", "VlenBytesCodec", "VlenUtf8Codec", "ZstdCodec", "codec_from_json", "codecs_from_json", "get_codec_class",
    "numcodecs_codec", "numcodecs_codec_class", "register_codec",
]
