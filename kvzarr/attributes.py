"""User attributes of an array or group, as a mutable mapping.

Every change is a read-modify-write of the node's ``zarr.json`` inside one store
transaction, so two processes setting different attributes both keep theirs on a
transactional store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Protocol


class _Node(Protocol):
    def _attributes(self) -> dict[str, Any]: ...

    def _update_attributes(self, change: Callable[[dict[str, Any]], None]) -> None: ...


class Attributes(MutableMapping[str, Any]):
    """``node.attrs``: the node's user attributes (JSON values) as a mutable mapping.
    Reads answer from the metadata the node handle holds (as it was when the handle was
    opened or last changed through it); each change writes at once, as a
    read-modify-write of the stored ``zarr.json`` in one store transaction, changing
    only the keys it names."""

    def __init__(self, node: _Node) -> None:
        self._node = node

    def __getitem__(self, key: str) -> Any:
        return self._node._attributes()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._node._update_attributes(lambda attrs: attrs.__setitem__(key, value))

    def __delitem__(self, key: str) -> None:
        if key not in self._node._attributes():
            raise KeyError(key)
        self._node._update_attributes(lambda attrs: attrs.pop(key, None))

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._node._attributes()))

    def __len__(self) -> int:
        return len(self._node._attributes())

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Set several attributes (``dict.update``'s arguments) in one write, one
        transaction, not one per key."""
        new = dict(*args, **kwargs)
        self._node._update_attributes(lambda attrs: attrs.update(new))

    def put(self, attributes: dict[str, Any]) -> None:
        """Replace all attributes with ``attributes``, in one write."""
        def replace(attrs: dict[str, Any]) -> None:
            attrs.clear()
            attrs.update(attributes)
        self._node._update_attributes(replace)

    def asdict(self) -> dict[str, Any]:
        """A copy of the attributes as a plain dict."""
        return dict(self._node._attributes())

    def __repr__(self) -> str:
        return repr(self._node._attributes())
