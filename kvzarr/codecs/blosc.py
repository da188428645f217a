"""The ``blosc`` codec (codecs/blosc, v1.0): bytes -> bytes, the Blosc 1 container format.

Configuration::

    {"name": "blosc", "configuration": {"typesize": 4, "cname": "lz4", "clevel": 1,
                                        "shuffle": "shuffle", "blocksize": 0}}

No aliases. ``cname`` is one of blosclz, lz4, lz4hc, snappy, zlib, zstd; ``clevel``
0..9; ``shuffle`` noshuffle | shuffle | bitshuffle (the v2 integers 0/1/2 are not
accepted in v3 metadata); ``typesize`` >= 1; ``blocksize`` >= 0 (0 = automatic).

Promises:

* Like zarr-python 3, a missing ``typesize`` or ``shuffle`` (on read, or ``None`` when
  built in Python) is chosen by :meth:`evolve` from the data type: typesize = itemsize,
  shuffle = bitshuffle for one-byte types, else shuffle. The chosen values are recorded
  in the metadata, as the spec requires. Missing ``cname``/``clevel``/``blocksize``
  read as zarr-python's defaults (zstd, 5, 0).
* Encoding goes through numcodecs' Blosc with the same parameters zarr-python passes
  (including ``typesize``), single-threaded, so the bytes are identical to zarr-python's.
  Blosc's own threads stay off: they would make the block layout depend on thread
  timing. The array layer runs codecs in a thread pool (the compressors release the
  GIL); a large chunk encoded alone has its blocks compressed on that pool and laid out
  in order, which gives the single-threaded bytes (:mod:`.blosc_blocks`).
* Corrupt input raises :class:`CodecError`; the header's compressed size must equal the
  length of the data (blosc itself would read past the end of a truncated chunk).
* Decoding is bounded (:mod:`.bounds`): the header's decoded size (``nbytes``, Blosc 1
  format, https://github.com/Blosc/c-blosc/blob/main/README_HEADER.rst) is checked
  against what the chunk can hold before Blosc allocates it (:class:`DecodedSizeError`).
"""

from __future__ import annotations

from typing import Any

import numcodecs.blosc as _nc_blosc

from ..errors import CodecError, MetadataError
from . import blosc_blocks
from .base import BytesBytesCodec, ChunkArraySpec
from .bounds import compressed_bound
from .decoders import unblosc
from .registry import register_codec

CNAMES = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")
SHUFFLES = ("noshuffle", "shuffle", "bitshuffle")
_SHUFFLE_INT = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}

# numcodecs picks blosc's threaded global context when called from the main thread unless
# told otherwise; zarr-python makes the same setting. Respect a user's explicit choice.
if _nc_blosc.use_threads is None:
    _nc_blosc.use_threads = False


class BloscCodec(BytesBytesCodec):
    """Blosc meta-compression (shuffle + an internal compressor)."""

    name = "blosc"

    def __init__(self, *, typesize: int | None = None, cname: str = "zstd", clevel: int = 5,
                 shuffle: str | None = None, blocksize: int = 0) -> None:
        # None = "choose from the data type in evolve()"; until then zarr-python's
        # placeholders (typesize 1, bitshuffle) are what encode and to_json use
        self._tunable = frozenset(k for k, v in (("typesize", typesize), ("shuffle", shuffle))
                                  if v is None)
        self.typesize = 1 if typesize is None else _parse_typesize(typesize)
        self.cname = _parse_choice(cname, CNAMES, "cname")
        self.clevel = _parse_int(clevel, "clevel", 0, 9)
        self.shuffle = "bitshuffle" if shuffle is None else _parse_choice(shuffle, SHUFFLES,
                                                                           "shuffle")
        self.blocksize = _parse_int(blocksize, "blocksize", 0, None)

    @classmethod
    def from_config(cls, configuration: dict[str, Any]) -> "BloscCodec":
        extra = set(configuration) - {"typesize", "cname", "clevel", "shuffle", "blocksize"}
        if extra:
            raise MetadataError(f"unknown blosc configuration keys {sorted(extra)}",
                                field=f"blosc.{sorted(extra)[0]}")
        for key in ("typesize", "shuffle"):
            # null is not a value the spec allows; absence is handled by evolve()
            if key in configuration and configuration[key] is None:
                raise MetadataError(f"blosc {key} must not be null", field=f"blosc.{key}")
        return cls(typesize=configuration.get("typesize"),
                   cname=configuration.get("cname", "zstd"),
                   clevel=configuration.get("clevel", 5),
                   shuffle=configuration.get("shuffle"),
                   blocksize=configuration.get("blocksize", 0))

    def to_json(self) -> dict[str, Any]:
        return {"name": "blosc", "configuration": {
            "typesize": self.typesize, "cname": self.cname, "clevel": self.clevel,
            "shuffle": self.shuffle, "blocksize": self.blocksize}}

    def evolve(self, spec: ChunkArraySpec) -> "BloscCodec":
        if not self._tunable:
            return self
        itemsize = spec.data_type.itemsize or 1  # variable-length data: plain bytes
        return BloscCodec(
            typesize=itemsize if "typesize" in self._tunable else self.typesize,
            cname=self.cname, clevel=self.clevel,
            shuffle=(("bitshuffle" if itemsize == 1 else "shuffle")
                     if "shuffle" in self._tunable else self.shuffle),
            blocksize=self.blocksize)

    def encode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        try:
            return blosc_blocks.compress(data, self.cname.encode("ascii"), self.clevel,
                                         _SHUFFLE_INT[self.shuffle], self.blocksize,
                                         self.typesize)
        except Exception as e:  # e.g. a buffer over blosc's 2 GiB limit
            raise CodecError(f"blosc could not compress the chunk: {e}") from e

    def decode(self, data: bytes, spec: ChunkArraySpec) -> bytes:
        return unblosc(data, None)

    def decode_bounded(self, data: bytes, spec: ChunkArraySpec,
                       max_size: int | None) -> bytes:
        return unblosc(data, max_size)

    def max_encoded_size(self, size: int | None) -> int | None:
        return None if size is None else compressed_bound(size)


def _parse_typesize(value: Any) -> int:
    return _parse_int(value, "typesize", 1, None)


def _parse_int(value: Any, key: str, low: int, high: int | None) -> int:
    if (not isinstance(value, int) or isinstance(value, bool) or value < low
            or (high is not None and value > high)):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise MetadataError(f"blosc {key} must be an integer {bound}, got {value!r}",
                            field=f"blosc.{key}")
    return value


def _parse_choice(value: Any, choices: tuple[str, ...], key: str) -> str:
    if not isinstance(value, str) or value not in choices:
        hint = "v2 integers 0/1/2 are written as names in v3" if key == "shuffle" else None
        raise MetadataError(f"blosc {key} must be one of {', '.join(choices)}, got {value!r}",
                            field=f"blosc.{key}", hint=hint)
    return value


register_codec(BloscCodec)
