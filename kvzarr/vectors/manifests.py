"""Object manifests: where the fragments of one object lie, as zarr-vectors 0.9.2 stores
them in ``object_index/manifests`` (layout ``vlen_manifests_v2``).

One manifest, little-endian:

    u32 B                                   number of blocks
    B blocks:  i64 chunk[sid_ndim]          absolute chunk coordinates
               u8 mode
               mode 0: i64 fragment
               mode 1: i64 start, i64 count  (fragments start .. start + count - 1)
               mode 2: u32 n, i64 fragments[n]

Writers emit mode 0 only, one block per fragment in traversal order; readers take all
three. An absent object's manifest is ``B = 0`` (4 bytes). Trailing bytes are an error.
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import CodecError

#: the most fragments one decoded block may name (a mode-1 count is otherwise unbounded)
MAX_BLOCK_FRAGMENTS = 1 << 26

_U32 = struct.Struct("<I")


def block_dtype(sid_ndim: int) -> np.dtype:
    """One mode-0 block as a packed record."""
    return np.dtype([("chunk", "<i8", (sid_ndim,)), ("mode", "u1"), ("fragment", "<i8")])


def encode(chunks: np.ndarray, fragments: np.ndarray) -> bytes:
    """A manifest of mode-0 blocks: fragment ``fragments[i]`` of chunk ``chunks[i]``."""
    chunks = np.asarray(chunks, dtype=np.int64)
    rec = np.zeros(len(fragments), dtype=block_dtype(chunks.shape[1] if chunks.ndim == 2
                                                     else 0))
    if len(fragments):
        rec["chunk"] = chunks
        rec["fragment"] = fragments
    return _U32.pack(len(fragments)) + rec.tobytes()


def decode(blob: bytes, sid_ndim: int, key: str | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """``(chunks (M, sid_ndim), fragments (M,))``: one row per fragment the manifest names,
    in its order (mode-1 and mode-2 blocks expanded)."""
    data = memoryview(blob)
    if len(data) < 4:
        raise CodecError(f"a manifest needs at least 4 bytes, got {len(data)}", key=key)
    (n_blocks,) = _U32.unpack_from(data)
    rec = block_dtype(sid_ndim)
    if len(data) == 4 + n_blocks * rec.itemsize:   # the common case: all mode 0
        blocks = np.frombuffer(data, rec, n_blocks, 4)
        if np.all(blocks["mode"] == 0):
            return (blocks["chunk"].astype(np.int64).reshape(n_blocks, sid_ndim),
                    blocks["fragment"].astype(np.int64))
    return _decode_mixed(data, n_blocks, sid_ndim, key)


def _decode_mixed(data: memoryview, n_blocks: int, sid_ndim: int, key: str | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    chunks: list[np.ndarray] = []
    frags: list[np.ndarray] = []
    pos = 4
    head = 8 * sid_ndim + 1
    for _ in range(n_blocks):
        if len(data) < pos + head:
            raise CodecError("a manifest block is truncated", key=key)
        chunk = np.frombuffer(data, "<i8", sid_ndim, pos).astype(np.int64)
        mode = data[pos + 8 * sid_ndim]
        pos += head
        if mode == 0:
            _need(data, pos, 8, key)
            block = np.frombuffer(data, "<i8", 1, pos).astype(np.int64)
            pos += 8
        elif mode == 1:
            _need(data, pos, 16, key)
            start, count = (int(v) for v in np.frombuffer(data, "<i8", 2, pos))
            if count < 0 or count > MAX_BLOCK_FRAGMENTS or start < 0:
                raise CodecError(f"a manifest range block names {count} fragments from "
                                 f"{start}", key=key)
            block = np.arange(start, start + count, dtype=np.int64)
            pos += 16
        elif mode == 2:
            _need(data, pos, 4, key)
            (n,) = _U32.unpack_from(data, pos)
            pos += 4
            _need(data, pos, 8 * n, key)
            block = np.frombuffer(data, "<i8", n, pos).astype(np.int64)
            pos += 8 * n
        else:
            raise CodecError(f"manifest block mode {mode} is not 0, 1 or 2", key=key)
        chunks.append(np.broadcast_to(chunk, (len(block), sid_ndim)))
        frags.append(block)
    if pos != len(data):
        raise CodecError(f"a manifest has {len(data) - pos} bytes after its "
                         f"{n_blocks} blocks", key=key)
    if not frags:
        return np.zeros((0, sid_ndim), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(chunks), np.concatenate(frags)


def _need(data: memoryview, pos: int, size: int, key: str | None) -> None:
    if len(data) < pos + size:
        raise CodecError("a manifest block is truncated", key=key)
