"""The one key validator every store calls at its boundary, and the check that keeps
keys another program wrote out of listings.

A key is a ``str`` of ``/``-separated segments (Zarr v3 core spec, "Stores"): no empty
segment, no leading or trailing ``/``, no ``.`` or ``..`` segment, no NUL and no
backslash (so no key can name a place outside a filesystem or zip root, on any OS), and
it is Unicode text: a lone surrogate code point (``"a\\ud800"``, which no encoding can
store) is refused. A prefix is ``""`` (the root) or a valid key followed by ``/``.

Store limits are declared by the store and applied here: ``max_key_bytes`` (the whole
key in UTF-8) and ``max_segment_bytes`` (each segment: a file name on the filesystem
store). Every refusal is :class:`InvalidKeyError`, the same on every store.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from ..errors import InvalidKeyError, InvalidStoredKeyWarning

#: Keys under this prefix belong to kvzarr's storage transformers (checksums, logs).
RESERVED_PREFIX = "__kvzarr/"


def check_key(key: str, max_bytes: int | None = None,
              max_segment_bytes: int | None = None) -> str:
    """Return ``key`` if it is valid (and within the given limits, in UTF-8 bytes), else
    raise :class:`InvalidKeyError`."""
    if not isinstance(key, str):
        raise InvalidKeyError(f"store keys are str, not {type(key).__name__}", key=repr(key))
    if not key:
        raise InvalidKeyError("empty key", key=key)
    # Fast path: the common key has none of the characters that need a closer look.
    if ("//" in key or key[0] == "/" or key[-1] == "/" or "\x00" in key or "\\" in key
            or (key[0] == "." or "/." in key) and _has_dot_segment(key)):
        raise InvalidKeyError(
            "invalid key: empty, '.' or '..' segments, leading/trailing '/', NUL and "
            "backslash are not allowed", key=key)
    if key.isascii():               # a flag of the str object: no scan
        size = len(key)
    else:
        try:
            size = len(key.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidKeyError("invalid key: a lone surrogate code point is not "
                                  "Unicode text and no store can hold it",
                                  key=key) from None
    if max_bytes is not None and size > max_bytes:
        raise InvalidKeyError(f"key longer than {max_bytes} bytes", key=key)
    if (max_segment_bytes is not None and size > max_segment_bytes
            and max(len(s.encode("utf-8")) for s in key.split("/")) > max_segment_bytes):
        raise InvalidKeyError(f"a segment of the key is longer than {max_segment_bytes} "
                              f"bytes, the longest name this store can hold", key=key)
    return key


def _has_dot_segment(key: str) -> bool:
    return any(seg in (".", "..") for seg in key.split("/"))


#: below this many keys check_keys checks them one by one
_JOINED_MIN = 8


def check_keys(keys: Sequence[str], max_bytes: int | None = None,
               max_segment_bytes: int | None = None) -> None:
    """:func:`check_key` of each of ``keys``, raising for the first invalid one. Many
    plain keys (ASCII, no segment starting with a dot) are checked at once, by string
    methods on their join, instead of a Python call per key: a group listing checked
    100 keys twice, a third of its time."""
    if len(keys) >= _JOINED_MIN and _plain(keys, max_bytes, max_segment_bytes):
        return
    for key in keys:
        check_key(key, max_bytes, max_segment_bytes)


def _plain(keys: Sequence[str], max_bytes: int | None,
           max_segment_bytes: int | None) -> bool:
    """Whether every key is valid by the rules of check_key, seen on their join with
    NUL (which no valid key holds); False also where this cannot tell at once."""
    try:
        joined = "\x00".join(keys)
    except TypeError:
        return False                    # a key that is not a str
    if (joined.count("\x00") != len(keys) - 1 or not joined.isascii()
            or "\\" in joined or "//" in joined or "\x00\x00" in joined
            or "/\x00" in joined or "\x00/" in joined or "/." in joined
            or "\x00." in joined or joined[0] in "/.\x00" or joined[-1] in "/\x00"):
        return False
    limit = min(max_bytes if max_bytes is not None else len(joined),
                max_segment_bytes if max_segment_bytes is not None else len(joined))
    # (ASCII: characters are bytes; a key within both limits has segments within both)
    return len(joined) <= limit or max(map(len, keys)) <= limit


def check_prefix(prefix: str, max_segment_bytes: int | None = None) -> str:
    """Return ``prefix`` if it is ``""`` or a valid key followed by ``/``."""
    if prefix == "":
        return prefix
    if not isinstance(prefix, str) or not prefix.endswith("/"):
        raise InvalidKeyError("a prefix is '' or ends with '/'", key=repr(prefix))
    check_key(prefix[:-1], None, max_segment_bytes)
    return prefix


def is_valid_key(key: str, max_bytes: int | None = None,
                 max_segment_bytes: int | None = None) -> bool:
    try:
        check_key(key, max_bytes, max_segment_bytes)
    except InvalidKeyError:
        return False
    return True


def valid_keys(keys: Iterable[str], where: str, max_bytes: int | None = None,
               max_segment_bytes: int | None = None) -> Iterator[str]:
    """``keys`` (from a store's listing) without the invalid ones, each of which is
    reported by an :class:`InvalidStoredKeyWarning`. Such keys were written by another
    program ("/x/zarr.json", "a//b", a name that is not UTF-8); kvzarr can neither read
    nor write them, and a listing that showed them would make nodes of them."""
    for key in keys:
        if is_valid_key(key, max_bytes, max_segment_bytes):
            yield key
        else:
            _warn(key, where)


def valid_children(names: Iterable[str], prefix: str, where: str,
                   max_segment_bytes: int | None = None) -> Iterator[str]:
    """The entries of a ``list_dir(prefix)`` (``name`` or ``name/``) that name a valid
    child; the others (an empty name from ``"a//b"``, ``".."``, a lone surrogate) are
    reported by an :class:`InvalidStoredKeyWarning` and left out. Taken a few hundred
    at a time, each lot checked at once where its names are plain (see check_keys)."""
    names = iter(names)
    while lot := list(islice(names, _CHILDREN_LOT)):
        if len(lot) >= _JOINED_MIN and _plain_children(lot, max_segment_bytes):
            yield from lot
            continue
        for name in lot:
            if isinstance(name, str):
                bare = name[:-1] if name.endswith("/") else name
                if "/" not in bare and is_valid_key(bare, None, max_segment_bytes):
                    yield name
                    continue
                _warn(prefix + name, where)
            else:
                _warn(name, where)


#: names valid_children takes from a listing at a time
_CHILDREN_LOT = 256


def _plain_children(names: list[str], max_segment_bytes: int | None) -> bool:
    """Whether every entry is a valid single segment, with or without one trailing
    ``/``, seen on their join; False also where this cannot tell at once."""
    try:
        joined = "\x00".join(names) + "\x00"
    except TypeError:
        return False
    if joined.count("\x00") != len(names):
        return False
    joined = joined.replace("/\x00", "\x00")      # the trailing "/" of directories
    if ("/" in joined or not joined.isascii() or "\\" in joined or "\x00\x00" in joined
            or "\x00." in joined or joined[0] in ".\x00"):
        return False
    return (max_segment_bytes is None or len(joined) <= max_segment_bytes
            or max(map(len, names)) <= max_segment_bytes)


def _warn(key: object, where: str) -> None:
    warnings.warn(InvalidStoredKeyWarning(
        f"{where} holds the key {key!r}, which is not a valid key (written by another "
        f"program?): it is left out of the listing"), stacklevel=3)


def ancestor_paths(path: str) -> list[str]:
    """The paths above ``path`` (a key or node path without a leading ``/``), nearest
    first, ending with the root ``""``; none for the root itself."""
    out = []
    while path:
        path = path.rpartition("/")[0]
        out.append(path)
    return out


def prefix_successor(prefix: str) -> str | None:
    """Smallest string greater than every string starting with ``prefix`` (for range
    scans ``prefix <= key < successor``); ``None`` when there is no bound (``""``)."""
    if not prefix:
        return None
    # '/' is never the largest code point, so bumping the last character is enough.
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
