"""The adapter interface every system implements, so that one workload's code drives
kvzarr, zarr-python 2 and 3, TensorStore and the raw engines alike.

A system keeps its data under one private directory (``root``). A *location* is one place
for a store in it (a directory, a database file, an archive, or a name for an in-memory
store); every repetition of a write gets a fresh location, so no system pays for
overwriting the last repetition's data. Arrays are reached through a :class:`Handle`.
What a system cannot do, :meth:`System.lacks` names with the reason, and the workload
reports "n/a" with it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

#: the features a workload may ask about
FEATURES = ("write", "shards", "groups", "multiprocess", "shared-writes", "bytes-written")


def numcodecs_compressor(codec: dict[str, Any]) -> Any:
    """The numcodecs compressor of a workload's codec spec (None: uncompressed), for the
    systems that take numcodecs objects (zarr-python 2, the raw engines)."""
    from numcodecs import Blosc, GZip
    if codec["id"] == "none":
        return None
    if codec["id"] == "blosc-zstd":
        return Blosc(cname="zstd", clevel=codec["clevel"], shuffle=Blosc.SHUFFLE)
    if codec["id"] == "gzip":
        return GZip(level=codec["level"])
    raise ValueError(codec)


class Handle:
    """An open array. The default implementation speaks zarr-python's API."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def read(self, selection: Any) -> np.ndarray:
        return self.array[selection]

    def write(self, selection: Any, value: np.ndarray) -> None:
        self.array[selection] = value

    def points(self, coords: tuple[np.ndarray, ...]) -> np.ndarray:
        """Coordinate (vindex) selection: one element per coordinate tuple."""
        return self.array.vindex[coords]

    def element(self, index: tuple[int, ...]) -> Any:
        return self.array[index]


class System:
    """Base adapter; subclasses override what their system does differently."""

    #: feature -> reason the system lacks it
    missing: dict[str, str] = {}
    #: what the system documents about processes writing into one chunk at once
    shared_writes = "not promised"

    def __init__(self, info: Any, root: Path | str) -> None:
        self.info = info
        self.name = info.name
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def lacks(self, feature: str) -> str | None:
        assert feature in FEATURES, feature
        return self.missing.get(feature)

    # -- locations ---------------------------------------------------------------------

    def location(self, tag: str) -> str:
        """A fresh location; the default is a path under root with the store's suffix."""
        return str(self.root / (tag + self.suffix))

    suffix = ""

    def drop(self, loc: str) -> None:
        """Release and delete the data at ``loc`` (untimed)."""
        self.close(loc)
        path = Path(loc)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            # kvzarr's directory store keeps its key lock files beside the root
            shutil.rmtree(path.parent / f".{path.name}.kvzarr-locks", ignore_errors=True)
        else:
            # the store's file and what lives beside it (-lock, -wal, .lock, ...)
            near = [path, *path.parent.glob(path.name + "-*"),
                    *path.parent.glob(path.name + ".*")]
            for p in near:
                if not p.exists():
                    continue
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)

    # -- arrays --------------------------------------------------------------------------

    def create(self, loc: str, name: str, shape: tuple[int, ...], dtype: str,
               chunks: tuple[int, ...], codec: dict[str, Any],
               shards: tuple[int, ...] | None = None) -> Handle:
        raise NotImplementedError

    def finish(self, loc: str) -> None:
        """End of a write phase: whatever makes the writes complete and readable by a
        new reader (closing an archive, flushing). Timed with the writes."""

    def load(self, loc: str, name: str, data: np.ndarray, chunks: tuple[int, ...],
             codec: dict[str, Any], shards: tuple[int, ...] | None = None) -> None:
        """Put ``data`` at ``loc`` as array ``name`` for a read workload (untimed). A
        system that cannot write overrides this to build the data by other means."""
        h = self.create(loc, name, data.shape, data.dtype.name, chunks, codec, shards)
        h.write(Ellipsis, data)
        self.finish(loc)

    def open(self, loc: str, name: str, write: bool = False) -> Handle:
        raise NotImplementedError

    def close(self, loc: str) -> None:
        """Release open handles on ``loc`` (untimed)."""

    # -- hierarchy (W4) --------------------------------------------------------------------

    def h_root(self, loc: str) -> Any:
        """The root group of a new hierarchy at ``loc``."""
        raise NotImplementedError

    def h_group(self, parent: Any, name: str) -> Any:
        raise NotImplementedError

    def h_array(self, group: Any, name: str, attrs: dict[str, Any]) -> None:
        """A small single-chunk int32 array with attributes in ``group``."""
        raise NotImplementedError

    def h_attrs(self, loc: str, path: str) -> dict[str, Any]:
        """Open the array at ``path`` (a fresh open, not a cached object); its attributes."""
        raise NotImplementedError

    def h_children(self, loc: str, path: str) -> list[str]:
        """Names of the children of the group at ``path``."""
        raise NotImplementedError

    # -- multi-process (W6) --------------------------------------------------------------

    def child_args(self) -> tuple[str, str]:
        """What a child process needs to rebuild this adapter: (system name, root)."""
        return self.name, str(self.root)
