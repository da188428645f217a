"""Selections -> chunk projections (zarr-python 3's ``src/zarr/core/indexing.py`` semantics;
slices projected as in netCDF-C's ``libnczarr/zchunking.c``).

Every selection kind zarr-python 3 supports becomes an :class:`Indexer` over a
:class:`~kvzarr.grid.ChunkGrid` (regular or rectilinear). Iterating it yields one
:class:`ChunkProjection` per touched chunk; see :mod:`kvzarr.indexing.projection` for how
the array layer applies them. One module per concern:

* :mod:`.dims` — per-dimension projection (the NCZarr slice projection, vectorised)
* :mod:`.projection` — ``ChunkProjection``, the cross product over dimensions
* :mod:`.basic` — basic and block selections (zarr-python ``BasicIndexer``, ``BlockIndexer``)
* :mod:`.orthogonal` — ``oindex`` (zarr-python ``OrthogonalIndexer``)
* :mod:`.vindex` — coordinate and mask selections (``CoordinateIndexer``, ``MaskIndexer``)
* :mod:`.normalize` — predicates and the ``a[sel]`` dispatch (as zarr-python's)
* :mod:`.values` — values for a set
* :mod:`.partial` — a chunk selection as an orthogonal box plus a sub-selection (shards)

Errors have zarr-python's types (``BoundsCheckError``, ``NegativeStepError``,
``VindexInvalidSelectionError``, all ``IndexError``) from :mod:`kvzarr.errors`.
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
