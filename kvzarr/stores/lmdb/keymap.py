"""How kvzarr keys become LMDB keys, and ordered scans over them (stores/lmdb.md,
"Key layout").

LMDB refuses keys longer than 511 bytes. A key of up to 511 UTF-8 bytes is stored as
those bytes; a longer key ``K`` is *mapped*: it is stored under

    K[:CUT] + b"\\x00" + sha256(K)            (exactly 511 bytes, CUT = 478)

with the value ``len(K) as 4 bytes big-endian + K + value``. Valid keys never contain
NUL, so a stored key is mapped exactly when it is 511 bytes long with NUL at ``CUT``,
and no plain key can collide with a mapped one.

Promises: every operation here sees the real keys only; scans return them in ascending
byte order (which is code-point order for UTF-8). The stored order differs from the
real order only inside a *group*, the stored keys sharing one ``CUT``-byte head ``X``:
there the mapped keys of ``X`` sit together, sorted by hash, right after ``X`` itself
and before every plain key that extends ``X`` (NUL sorts first). A scan therefore
sorts one group's mapped keys in memory and merges them with the plain keys that follow;
nothing else is buffered, and only keys longer than 478 bytes ever form a group.

Every function takes an open py-lmdb transaction; values handed back may be zero-copy
views that the caller must copy before the transaction ends.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import deque
from typing import Any, Iterable

#: LMDB's key size limit (MDB_MAXKEYSIZE in the default build).
MAX_KEY_BYTES = 511
DIGEST_BYTES = 32
#: Bytes of a long key kept readable at the front of its stored key.
CUT = MAX_KEY_BYTES - 1 - DIGEST_BYTES
_HEADER = 4


def stored_key(kb: bytes) -> bytes:
    """The LMDB key for the real key ``kb``."""
    if len(kb) <= MAX_KEY_BYTES:
        return kb
    return kb[:CUT] + b"\x00" + hashlib.sha256(kb).digest()


def is_mapped(sk: bytes) -> bool:
    return len(sk) == MAX_KEY_BYTES and sk[CUT] == 0


def wrap(kb: bytes, value: bytes) -> bytes:
    """The stored value of a mapped key: the real key in front of the value."""
    return b"".join((len(kb).to_bytes(_HEADER, "big"), kb, value))


def _real_key(raw: Any) -> bytes:
    n = int.from_bytes(raw[:_HEADER], "big")
    return bytes(raw[_HEADER:_HEADER + n])


def read(txn: Any, kb: bytes) -> Any:
    """The stored value of ``kb`` (bytes or a view), or None."""
    if len(kb) <= MAX_KEY_BYTES:
        return txn.get(kb)
    raw = txn.get(stored_key(kb))
    if raw is None:
        return None
    n = int.from_bytes(raw[:_HEADER], "big")
    if raw[_HEADER:_HEADER + n] != kb:
        # Another key with the same head and digest: a SHA-256 collision.
        raise LookupError("digest collision between two long keys")
    return raw[_HEADER + n:]


def put(txn: Any, kb: bytes, value: bytes) -> None:
    if len(kb) <= MAX_KEY_BYTES:
        txn.put(kb, value)
    else:
        txn.put(stored_key(kb), wrap(kb, value))


def prepare_many(items: Iterable[tuple[str, bytes]]) -> tuple[list[tuple[bytes, bytes]], int]:
    """The stored ``(key, value)`` pairs for ``(Zarr key, value)`` items, and their
    :func:`footprint` in total; one pass, as it runs once per chunk of a big write."""
    out: list[tuple[bytes, bytes]] = []
    append = out.append
    size = 0
    for key, value in items:
        kb = key.encode("utf-8")
        size += footprint(len(kb), len(value))
        append((kb, value) if len(kb) <= MAX_KEY_BYTES else (stored_key(kb), wrap(kb, value)))
    return out, size


def put_stored(txn: Any, pairs: list[tuple[bytes, bytes]]) -> None:
    """Store pairs from :func:`prepare_many` with one cursor pass."""
    txn.cursor().putmulti(pairs)


def delete(txn: Any, kb: bytes) -> None:
    txn.delete(stored_key(kb))


def footprint(key_len: int, value_len: int, page: int = 4096) -> int:
    """Rough bytes of map a new entry takes, to size the map before a big write: a
    value too big for half a page goes to whole overflow pages, a small entry shares
    leaf pages that run about half full."""
    if key_len > MAX_KEY_BYTES:
        value_len += key_len + _HEADER
        key_len = MAX_KEY_BYTES
    if value_len + key_len + 16 > page // 2:
        return -(-(value_len + 16) // page) * page
    return 2 * (value_len + key_len + 16)


def successor(prefix: bytes) -> bytes:
    """Smallest byte string above every string starting with ``prefix`` (non-empty).
    Stored heads end in bytes of valid UTF-8, never 0xFF, so bumping the last byte
    never overflows."""
    return prefix[:-1] + bytes((prefix[-1] + 1,))


# --- scans --------------------------------------------------------------------------

def _group_mapped(txn: Any, head: bytes) -> list[bytes]:
    """Real keys of the mapped entries of group ``head`` (len CUT), unsorted."""
    cur = txn.cursor()
    start = head + b"\x00"
    out = []
    ok = cur.set_range(start)
    while ok:
        sk = bytes(cur.key())
        if not sk.startswith(start):
            break
        out.append(_real_key(cur.value()))
        ok = cur.next()
    return out


def _plain_range(txn: Any, prefix: bytes) -> list[bytes]:
    """Stored keys starting with ``prefix`` (which is longer than CUT, so none of them
    is mapped: a mapped key has NUL at CUT and ``prefix`` has none)."""
    cur = txn.cursor()
    out = []
    if cur.set_range(prefix):
        for raw in cur.iternext(keys=True, values=False):
            sk = bytes(raw)
            if not sk.startswith(prefix):
                break
            out.append(sk)
    return out


def scan(txn: Any, prefix: bytes) -> list[bytes]:
    """Real keys starting with ``prefix``, ascending."""
    if len(prefix) > CUT:
        # Mapped keys with this prefix all sit in the group of prefix[:CUT].
        mapped = sorted(k for k in _group_mapped(txn, prefix[:CUT]) if k.startswith(prefix))
        return list(heapq.merge(mapped, _plain_range(txn, prefix)))
    cur = txn.cursor()
    out: list[bytes] = []
    pending: deque[bytes] = deque()   # sorted mapped keys of `group` not yet emitted
    group = b""
    ok = cur.set_range(prefix)
    while ok:
        sk = bytes(cur.key())
        if not sk.startswith(prefix):
            break
        if is_mapped(sk):
            # The whole run of one group's mapped keys is contiguous: take it at once.
            out.extend(pending)
            group = sk[:CUT]
            run = []
            while ok and is_mapped(sk) and sk.startswith(group):
                run.append(_real_key(cur.value()))
                ok = cur.next()
                sk = bytes(cur.key()) if ok else b""
            run.sort()
            pending = deque(run)
            continue
        if pending:
            if sk.startswith(group):
                while pending and pending[0] < sk:
                    out.append(pending.popleft())
            else:
                out.extend(pending)
                pending.clear()
        out.append(sk)
        ok = cur.next()
    out.extend(pending)
    return out


def _children(keys: list[bytes], n: int, out: list[bytes]) -> None:
    """Append the direct children (after byte ``n``) of sorted ``keys`` to ``out``."""
    for k in keys:
        cut = k.find(b"/", n)
        child = k[n:] if cut < 0 else k[n:cut + 1]
        if not out or out[-1] != child:
            out.append(child)


def scan_dir(txn: Any, prefix: bytes) -> list[bytes]:
    """Direct children of ``prefix``: bare names of keys, ``name/`` for subtrees. Each
    subtree of plain keys is skipped with one seek."""
    n = len(prefix)
    out: list[bytes] = []
    if n >= CUT:
        _children(scan(txn, prefix), n, out)
        return out
    cur = txn.cursor()
    ok = cur.set_range(prefix)
    while ok:
        sk = bytes(cur.key())
        if not sk.startswith(prefix):
            break
        if is_mapped(sk):
            head = sk[:CUT]
            cut = head.find(b"/", n)
            if cut >= 0:
                child = head[:cut + 1]
                out.append(child[n:])
                ok = cur.set_range(successor(child))
                continue
            # The child names of this group run past its head: list the group (its
            # mapped keys and the plain keys extending the head; the head itself, if it
            # is a key, was already seen) and take the children from the real keys.
            _children([k for k in scan(txn, head) if k != head], n, out)
            ok = cur.set_range(successor(head))
            continue
        cut = sk.find(b"/", n)
        if cut < 0:
            out.append(sk[n:])
            ok = cur.next()
        else:
            child = sk[:cut + 1]
            out.append(child[n:])
            ok = cur.set_range(successor(child))
    return out


def erase_prefix(txn: Any, prefix: bytes, db: Any) -> None:
    """Delete every real key starting with ``prefix`` (``db``: the main database)."""
    if not prefix:
        txn.drop(db, delete=False)
        return
    cur = txn.cursor()
    if len(prefix) > CUT:
        for kb in _group_mapped(txn, prefix[:CUT]):
            if kb.startswith(prefix):
                txn.delete(stored_key(kb))
    # With a prefix of at most CUT bytes every mapped key below it starts with it too,
    # so one range delete is exact; a longer prefix has only plain keys in its range.
    ok = cur.set_range(prefix)
    while ok:
        if not bytes(cur.key()).startswith(prefix):
            break
        ok = cur.delete()

