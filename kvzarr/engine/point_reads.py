"""The ``a[i, j]`` fast path: one element by integer index, without an indexer.

Reading one element through the general machinery (classify the selection, build an
indexer, project it on the grid, allocate an output) costs several times the store
lookup itself. For a selection of in-bounds integers on a regular, unsharded grid this
module computes the chunk key and the offset inside the chunk directly, does one
``store.get`` and, when the chunk is stored as plain bytes (the ``bytes`` codec alone),
reads the one element out of the value without decoding the chunk.

Anything else (slices, arrays, fields, out-of-bounds or negative-beyond-range indices,
sharded or rectilinear arrays, variable-length types) returns :data:`NOT_A_POINT` and
goes the general way, which also raises the proper errors. The results are the same as
the general path's: a numpy scalar of the array's data type, the fill value for a
missing chunk (or :class:`~kvzarr.errors.ChunkNotFoundError` when
``read_missing_chunks`` is off), and :class:`~kvzarr.errors.CodecError` for a value of
the wrong length.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ChunkNotFoundError

#: returned by :meth:`PointReader.index` for a selection this path does not handle
NOT_A_POINT = None


class PointReader:
    """Single-element reads of one array (built from its ChunkIO)."""

    def __init__(self, io: Any) -> None:
        self.io = io
        self.shape = io.metadata.shape
        grid = io.grid
        dtype = io.dtype
        self.usable = (grid.is_regular and not io.pipeline.supports_partial
                       and dtype.kind not in "OUST" and dtype.fields is None
                       and len(self.shape) > 0)
        if not self.usable:
            return
        self.chunk_shape = grid.chunk_shape
        self.spec = io.spec(tuple(0 for _ in self.shape))
        # C-order strides of a chunk, in elements
        strides, step = [], 1
        for n in reversed(self.chunk_shape):
            strides.append(step)
            step *= n
        self.strides = tuple(reversed(strides))
        self.fill = np.asarray(io.metadata.fill_value, dtype=dtype)[()]
        # a chunk stored as plain C-order bytes: read one element out of the value
        self.stored_dtype = io.plain_dtype
        if self.stored_dtype is not None:
            self.chunk_nbytes = math.prod(self.chunk_shape) * self.stored_dtype.itemsize

    def index(self, selection: Any) -> tuple[int, ...] | None:
        """The normalised index if ``selection`` is one in-bounds integer per dimension."""
        if not self.usable:
            return NOT_A_POINT
        if type(selection) is not tuple:
            selection = (selection,)
        shape = self.shape
        if len(selection) != len(shape):
            return NOT_A_POINT
        out = []
        for i, n in zip(selection, shape):
            if type(i) is not int:
                if not isinstance(i, np.integer):
                    return NOT_A_POINT  # bool, float, slice, array, field name, ...
                i = int(i)
            if i < 0:
                i += n
            if not 0 <= i < n:
                return NOT_A_POINT  # the general path raises the bounds error
            out.append(i)
        return tuple(out)

    def read(self, index: tuple[int, ...]) -> Any:
        """The element at ``index`` (from :meth:`index`) as a numpy scalar."""
        io = self.io
        coords, local, offset = [], [], 0
        for i, c, s in zip(index, self.chunk_shape, self.strides):
            q, r = divmod(i, c)
            coords.append(q)
            local.append(r)
            offset += r * s
        key = io.key(coords)
        data = io.store.get(key)
        if data is None:
            if not io.config.read_missing_chunks:
                raise ChunkNotFoundError("chunk is missing and read_missing_chunks is off",
                                         key=key)
            return self.fill
        stored = self.stored_dtype
        if stored is not None and len(data) == self.chunk_nbytes:
            return np.frombuffer(data, stored, 1, offset * stored.itemsize)[0]
        return io.pipeline.decode(data, self.spec, key=key)[tuple(local)]
