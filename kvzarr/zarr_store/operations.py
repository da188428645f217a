"""The mapping of zarr-python's store operations onto kvzarr's, in one place: each
function takes the kvzarr store (or transformer stack) first and does one zarr
operation with kvzarr's batch and range calls. :class:`~kvzarr.zarr_store.ZarrStore`
decides where they run (inline on zarr's event loop, or on the thread of an open
``transaction()`` block); these functions only say what they do.
"""

from __future__ import annotations

from typing import Any

from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer

from ..errors import ValueTypeError
from ..stores.base import Store
from ..stores.byteranges import OffsetRequest, RangeRequest, SuffixRequest


def byte_request(byte_range: Any) -> Any:
    """zarr's byte request as kvzarr's (None: the whole value)."""
    if byte_range is None:
        return None
    if isinstance(byte_range, RangeByteRequest):
        return RangeRequest(byte_range.start, byte_range.end)
    if isinstance(byte_range, OffsetByteRequest):
        return OffsetRequest(byte_range.offset)
    if isinstance(byte_range, SuffixByteRequest):
        return SuffixRequest(byte_range.suffix)
    # the words zarr's own stores use, which zarr's store tests look for
    raise ValueTypeError(f"Unexpected byte_range, got {byte_range!r}: a byte range is "
                         f"a RangeByteRequest, OffsetByteRequest or SuffixByteRequest")


def buffer_bytes(value: Any) -> memoryview:
    """A zarr Buffer's bytes as a read-only byte view, without a copy (a store that
    keeps values copies it; see ``Store.copies_values``)."""
    if not isinstance(value, Buffer):
        raise ValueTypeError(f"ZarrStore.set takes a zarr Buffer, not "
                             f"{type(value).__name__}")
    view = memoryview(value.as_buffer_like())
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view.toreadonly()


def read_one(store: Store, key: str, request: Any) -> Any:
    if request is None:
        return store.get(key)
    return store.get_partial_values([(key, request)])[0]


def read_ranges(store: Store, items: list[tuple[str, Any]]) -> list[Any]:
    return store.get_partial_values(items)


def exists(store: Store, key: str) -> bool:
    return store.exists(key)


def getsize(store: Store, key: str) -> int | None:
    return store.getsize(key)


def size_under(store: Store, prefix: str) -> int:
    with store.transaction(write=False):
        keys = store.list_prefix(prefix) if prefix else store.list()
        return sum(store.getsize(k) or 0 for k in list(keys))


def list_keys(store: Store, prefix: str) -> list[str]:
    """Keys starting with ``prefix``, which for zarr is any string: the listing of the
    directory it lies in (kvzarr lists ``""`` or ``"dir/"``), cut to the prefix."""
    cut = prefix.rfind("/") + 1
    directory, rest = prefix[:cut], prefix[cut:]
    keys = store.list_prefix(directory) if directory else store.list()
    return [k for k in keys if k.startswith(prefix)] if rest else list(keys)


def list_children(store: Store, prefix: str) -> list[str]:
    """The names of ``prefix``'s children as zarr names them: no trailing ``/``, each
    once (kvzarr lists a name that is both a key and a directory twice)."""
    names = []
    seen = set()
    for name in store.list_dir(prefix):
        name = name[:-1] if name.endswith("/") else name
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def is_empty(store: Store, prefix: str) -> bool:
    return next(iter(store.list_dir(prefix)), None) is None


def erase_prefix(store: Store, prefix: str) -> None:
    store.erase_prefix(prefix)


def set_if_absent(store: Store, key: str, value: memoryview) -> None:
    with store.key_lock([key]), store.transaction():
        if not store.exists(key):
            store.set(key, value)


def write(store: Store, ops: list[tuple[str, str, Any]]) -> None:
    """Apply ``("set", key, value)`` / ``("erase", key, None)`` in order, runs of one kind
    as one batch call."""
    i = 0
    while i < len(ops):
        kind, j = ops[i][0], i
        while j < len(ops) and ops[j][0] == kind:
            j += 1
        if kind == "set":
            if j - i == 1:
                store.set(ops[i][1], ops[i][2])
            else:
                store.set_many([(k, v) for _, k, v in ops[i:j]])
        elif j - i == 1:
            store.erase(ops[i][1])
        else:
            store.erase_values([k for _, k, _ in ops[i:j]])
        i = j


def write_group(store: Store, ops: list[tuple[str, str, Any]]) -> list[Exception | None]:
    """Group commit: ``ops`` in one write transaction; if that fails, each alone, so that
    each caller gets its own outcome. Never raises an Exception: returns one per op."""
    if len(ops) > 1:
        try:
            with store.transaction():
                write(store, ops)
            return [None] * len(ops)
        except Exception:
            pass      # tried one by one below: the group's failure may be one op's
    outcomes: list[Exception | None] = []
    for op in ops:
        try:
            write(store, [op])
            outcomes.append(None)
        except Exception as e:
            outcomes.append(e)
    return outcomes


def as_directory(prefix: str) -> str:
    """zarr's ``"group"`` or ``"group/"`` as kvzarr's prefix ``"group/"`` (``""``: all)."""
    if prefix and not prefix.endswith("/"):
        return prefix + "/"
    return prefix
