"""The ``transpose`` codec (codecs/transpose, v1.0): array -> array, permutes dimensions.

Configuration::

    {"name": "transpose", "configuration": {"order": [2, 0, 1]}}

No aliases. ``B_shape[i] = A_shape[order[i]]``: encoding is ``A.transpose(order)``.

Promises:

* ``order`` is a permutation of ``0 .. n-1`` (checked on read) with ``n`` the number of
  dimensions of the chunk (checked by :meth:`validate`). The legacy ``"C"``/``"F"``
  constants are rejected, as the spec and zarr-python 3 do.
* Encoding and decoding return views, never copies: the next codec (``bytes``) makes
  the one C-order copy it needs anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CodecError, MetadataError
from .base import ArrayArrayCodec, ChunkArraySpec
from .registry import register_codec


class TransposeCodec(ArrayArrayCodec):
    """Permute the dimensions of a chunk."""

    name = "transpose"

    def __init__(self, order: Sequence[int]) -> None:
        self.order = _parse_order(order)
        self._inverse = tuple(int(i) for i in np.argsort(self.order))

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "TransposeCodec":
        extra = set(configuration) - {"order"}
        if extra:
            raise MetadataError(f"unknown transpose configuration keys {sorted(extra)}",
                                field=f"transpose.{sorted(extra)[0]}")
        if "order" not in configuration:
            raise MetadataError("transpose needs 'order'", field="transpose.order")
        return cls(configuration["order"])

    def to_json(self) -> dict[str, Any]:
        return {"name": "transpose", "configuration": {"order": list(self.order)}}

    def validate(self, spec: ChunkArraySpec) -> None:
        if len(self.order) != len(spec.shape):
            raise MetadataError(
                f"transpose order {list(self.order)} has {len(self.order)} entries, "
                f"the chunk has {len(spec.shape)} dimensions", field="transpose.order")

    def resolve_spec(self, spec: ChunkArraySpec) -> ChunkArraySpec:
        self._check_ndim(len(spec.shape))
        return spec.with_shape(tuple(spec.shape[i] for i in self.order))

    def encode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> np.ndarray:
        self._check_ndim(chunk.ndim)
        return chunk.transpose(self.order)

    def decode(self, chunk: np.ndarray, spec: ChunkArraySpec) -> np.ndarray:
        self._check_ndim(chunk.ndim)
        return chunk.transpose(self._inverse)

    def _check_ndim(self, ndim: int) -> None:
        if ndim != len(self.order):
            raise CodecError(f"transpose order {list(self.order)} does not fit a chunk "
                             f"of {ndim} dimensions")


def _parse_order(order: Any) -> tuple[int, ...]:
    if isinstance(order, str):
        raise MetadataError(f"transpose order {order!r} is a legacy constant",
                            field="transpose.order",
                            hint="write an explicit permutation such as [1, 0]")
    if not isinstance(order, (list, tuple)):
        raise MetadataError(f"transpose order must be a list of integers, got {order!r}",
                            field="transpose.order")
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))
               for i in order):
        raise MetadataError(f"transpose order must be a list of integers, got {order!r}",
                            field="transpose.order")
    parsed = tuple(int(i) for i in order)
    if sorted(parsed) != list(range(len(parsed))):
        raise MetadataError(f"transpose order {list(parsed)} is not a permutation of "
                            f"0..{len(parsed) - 1}", field="transpose.order")
    return parsed


register_codec(TransposeCodec)
