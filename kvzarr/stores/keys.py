"""The one key validator every store calls at its boundary.

A key is a ``str`` of ``/``-separated segments (Zarr v3 core spec, "Stores"): no empty
segment, no leading or trailing ``/``, no ``.`` or ``..`` segment, no NUL and no
backslash (so no key can name a place outside a filesystem or zip root, on any OS).
A prefix is ``""`` (the root) or a valid key followed by ``/``.
"""

from __future__ import annotations

from ..errors import InvalidKeyError

#: Keys under this prefix belong to kvzarr's storage transformers (checksums, logs).
RESERVED_PREFIX = "__kvzarr/"


def check_key(key: str, max_bytes: int | None = None) -> str:
    """Return ``key`` if it is valid, else raise :class:`InvalidKeyError`."""
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
    if max_bytes is not None and len(key.encode("utf-8")) > max_bytes:
        raise InvalidKeyError(f"key longer than {max_bytes} bytes", key=key)
    return key


def _has_dot_segment(key: str) -> bool:
    return any(seg in (".", "..") for seg in key.split("/"))


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is ``""`` or a valid key followed by ``/``."""
    if prefix == "":
        return prefix
    if not isinstance(prefix, str) or not prefix.endswith("/"):
        raise InvalidKeyError("a prefix is '' or ends with '/'", key=repr(prefix))
    check_key(prefix[:-1])
    return prefix


def prefix_successor(prefix: str) -> str | None:
    """Smallest string greater than every string starting with ``prefix`` (for range
    scans ``prefix <= key < successor``); ``None`` when there is no bound (``""``)."""
    if not prefix:
        return None
    # '/' is never the largest code point, so bumping the last character is enough.
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
