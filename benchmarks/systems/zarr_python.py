"""What the zarr-python 2 and 3 adapters share. Each runs in its own environment (both
are ``import zarr``), but opening arrays and groups, reading attributes, listing
children and reopening a zip archive between writing and reading are the same calls in
both; each subclass supplies ``self.zarr``, ``self.kind`` and its ``store(loc, write)``.
"""

from __future__ import annotations

import os
from typing import Any

from .base import Handle, System


class ZarrPythonSystem(System):
    zarr: Any
    kind: str
    _stores: dict[str, tuple[Any, str]]

    def store(self, loc: str, write: bool) -> Any:
        raise NotImplementedError

    def zip_store(self, loc: str, write: bool) -> Any:
        """The archive at ``loc``, open for writing ("w" new, "a" existing) or reading
        ("r"): reopened when the caller switches between the two."""
        st, mode = self._stores.get(loc, (None, ""))
        want = ("w" if not os.path.exists(loc) else "a") if write else "r"
        if st is not None and (mode == "r") == (want == "r"):
            return st
        self.close(loc)
        st = self.zarr.storage.ZipStore(loc, mode=want)
        self._stores[loc] = (st, want)
        return st

    def open(self, loc, name, write=False) -> Handle:
        return Handle(self.zarr.open_array(self.store(loc, write), path=name,
                                           mode="r+" if write else "r"))

    # -- hierarchy -----------------------------------------------------------------------

    def h_root(self, loc):
        return self.zarr.open_group(self.store(loc, True), mode="w")

    def h_group(self, parent, name):
        return parent.create_group(name)

    def h_attrs(self, loc, path):
        return self.zarr.open_array(self.store(loc, False), path=path,
                                    mode="r").attrs.asdict()

    def h_children(self, loc, path):
        return list(self.zarr.open_group(self.store(loc, False), path=path,
                                         mode="r").keys())
