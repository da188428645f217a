"""The Zarr Vector Format: point clouds (and, as they land, polylines, meshes and
graphs) stored in Zarr v3 inside any kvzarr store, byte-compatible with zarr-vectors
0.9.2 (https://github.com/AllenInstitute/zarr-vectors-py).

The functions keep the reference's names, arguments and return values. Where it takes a
store, kvzarr takes any kvzarr target — a path, URL, Store or transformer stack — and an
optional ``path=`` inside it. A write is one transaction on the stores that have them.

    >>> import numpy as np, kvzarr
    >>> store = kvzarr.MemoryStore()
    >>> pts = np.array([[10, 10, 10], [60, 10, 10], [250, 260, 10]], dtype=float)
    >>> kvzarr.vectors.write_points(store, pts, chunk_shape=(200,) * 3,
    ...                             bin_shape=(50,) * 3)["chunk_count"]
    2
    >>> kvzarr.vectors.read_points(store, bbox=([50, 0, 0], [100, 40, 40]))["positions"]
    array([[60., 10., 10.]], dtype=float32)
"""

from .meshes import read_graph, read_mesh, write_graph, write_mesh
from .points import read_points, write_points
from .polylines import read_lines, read_polylines, write_lines, write_polylines
from .pyramid import build_pyramid
from .validate import ValidationResult, validate

__all__ = ["ValidationResult", "build_pyramid", "read_graph", "read_lines", "read_mesh", "read_points",
           "read_polylines", "validate", "write_graph", "write_lines", "write_mesh",
           "write_points", "write_polylines"]
