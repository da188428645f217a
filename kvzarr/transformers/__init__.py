"""Storage transformers: Stores that wrap Stores, between the chunk engine and the store
(imports only go down; ``tests/test_layers.py``). One module each, on one delegating base class
(:class:`~.base.Transformer`):

* :class:`Cache` (``"cache"``): a bounded LRU of values, absent keys and listings,
  coherent with writes through it and with commits of other processes;
* :class:`Checksum` (``"checksum"``): CRC32C per block of every value, kept out of band
  under ``__kvzarr/`` keys and verified on every read;
* :class:`AppendShards` (``"append_shards"``): the sharding specification's append-only
  write strategy, with garbage tracking and compaction.

Stacks are built by :func:`kvzarr.open_store` and every opening function through
``transformers=[...]``, listed from the array down to the store.
"""

from .base import Transformer, stack_layers
from .stack import TRANSFORMERS, build_stack

__all__ = ["AppendShards", "Cache", "Checksum", "TRANSFORMERS", "Transformer",
           "build_stack", "stack_layers"]


def __getattr__(name: str):
    from .stack import transformer_class
    for key, (_, cls) in TRANSFORMERS.items():
        if cls == name:
            return transformer_class(key)
    raise AttributeError(name)
