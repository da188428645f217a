"""numcodecs object codecs (``json2``, ``msgpack2``, ``pickle``, ``vlen-array``) as the
array -> bytes codec of Zarr v2 object arrays (:class:`~kvzarr.metadata.dtypes.objects.ObjectType`).

zarr-python 2 hands an object codec the chunk as an object array and stores what it
returns; on reading it reshapes the codec's output to the chunk shape. These codecs are
not Zarr v3 codecs and are not registered: :mod:`kvzarr.metadata.v2` builds them.

Promises: the bytes are numcodecs' own for a C-ordered chunk (json2 and pickle record the
shape of the array they were given); decoding returns an object array of the chunk shape,
or raises CodecError (an element count other than the chunk's, corrupt data, or pickle
decoding while numcodecs forbids it: numcodecs refuses to unpickle unless its user allows
it, since unpickling runs code the file chooses).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numcodecs import registry as _nc_registry
from numcodecs.compat import ensure_bytes

from ..errors import CodecError, MetadataError
from .base import ArrayBytesCodec, ChunkArraySpec

OBJECT_CODEC_IDS = frozenset({"json2", "msgpack2", "pickle", "vlen-array"})


class NumcodecsObjectCodec(ArrayBytesCodec):
    """One numcodecs object codec, configured as its v2 document says."""

    def __init__(self, codec_id: str, configuration: dict[str, Any]) -> None:
        if codec_id not in OBJECT_CODEC_IDS:
            raise MetadataError(f"{codec_id!r} is not an object codec", field="filters")
        self.codec_id = codec_id
        self.name = f"numcodecs.{codec_id}"     # type: ignore[misc]
        self.configuration = dict(configuration)
        try:
            self._codec = _nc_registry.get_codec({"id": codec_id, **self.configuration})
        except Exception as e:
            raise MetadataError(f"invalid {codec_id} configuration {self.configuration!r}: "
                                f"{e}", field="filters") from None

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "NumcodecsObjectCodec":
        config = dict(configuration)
        return cls(config.pop("id"), config)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": dict(self.configuration)}

    def validate(self, spec: ChunkArraySpec) -> None:
        if spec.data_type.numpy_dtype != np.dtype(object):
            raise MetadataError(f"{self.name} encodes object arrays, not "
                                f"{spec.data_type.name}", field="filters")

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> bytes:
        chunk = np.ascontiguousarray(chunk, dtype=object)
        try:
            return ensure_bytes(self._codec.encode(chunk))
        except Exception as e:
            raise CodecError(f"{self.name} could not encode the chunk: {e}") from e

    def decode(self, data: bytes, spec: ChunkArraySpec) -> np.ndarray:
        try:
            out = self._codec.decode(data)
        except Exception as e:
            raise CodecError(f"{self.name} could not decode the chunk: {e}") from e
        out = np.asarray(out)
        if out.dtype != object:
            out = out.astype(object)
        if out.size != math.prod(spec.shape):
            raise CodecError(f"{self.name} decoded {out.size} elements, the chunk has "
                             f"{math.prod(spec.shape)}")
        return out.reshape(spec.shape)


__all__ = ["NumcodecsObjectCodec", "OBJECT_CODEC_IDS"]
