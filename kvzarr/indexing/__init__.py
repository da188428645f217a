"""Selections -> chunk projections (SPEC-NOTES §3 and §4; seed 003 corrected).

Every selection kind zarr-python 3 supports becomes an :class:`Indexer` over a
:class:`~kvzarr.grid.ChunkGrid` (regular or rectilinear). Iterating it yields one
:class:`ChunkProjection` per touched chunk; see :mod:`kvzarr.indexing.projection` for how
the array layer applies them. One module per concern:

* :mod:`.dims` — per-dimension projection (the corrected NCZarr algorithm, §4.4)
* :mod:`.projection` — ``ChunkProjection``, the cross product over dimensions
* :mod:`.basic` — basic and block selections (§3.2, §3.5)
* :mod:`.orthogonal` — ``oindex`` (§3.3)
* :mod:`.vindex` — coordinate and mask selections (§3.4)
* :mod:`.normalize` — predicates and the ``a[sel]`` dispatch (§3.1)
* :mod:`.values` — values for a set (§3.7)
* :mod:`.partial` — a chunk selection as an orthogonal box plus a sub-selection (shards)

Errors follow the table of §3.6 with the classes of :mod:`kvzarr.errors`.
"""

from .basic import BasicIndexer, BlockIndexer
from .normalize import classify_selection, pop_fields
from .orthogonal import OrthogonalIndexer
from .partial import apply_orthogonal, to_orthogonal
from .projection import ChunkProjection, Indexer
from .values import prepare_value
from .vindex import CoordinateIndexer, MaskIndexer, vindex_indexer

__all__ = [
    "BasicIndexer", "BlockIndexer", "ChunkProjection", "CoordinateIndexer", "Indexer",
    "MaskIndexer", "OrthogonalIndexer", "apply_orthogonal", "classify_selection",
    "pop_fields", "prepare_value", "to_orthogonal", "vindex_indexer",
]
