"""Blosc 1 compression of one large buffer on several threads, giving exactly the bytes
single-threaded Blosc gives.

A Blosc 1 frame is a 16-byte header (version, compressor version, flags, typesize,
nbytes, blocksize, cbytes), a table of int32 block starts, then the blocks. Each block is
compressed on its own from its data and the parameters alone. Blosc's own threads lay
the blocks out in the order they finish, so with them the frame differs from run to run
(which is why kvzarr keeps them off). Here runs of consecutive whole blocks are
compressed as frames of their own, one by the caller and the others by the codec workers
(:func:`kvzarr.runtime.workers.share`), and their blocks are laid end to end, in order, under
one header: the frame single-threaded Blosc writes. There are as many runs as there are
idle cores plus the caller's (:func:`kvzarr.runtime.workers.idle_cores`); with none idle, as
when other writers keep the cores busy, the buffer is compressed in one call: splitting
it then only takes time from them and adds hand-offs.

Blosc's blocksize depends on the parameters and nbytes, never on the data: it is learnt
once per setting by compressing zeros, as is the blocksize argument that makes Blosc use
it for a part (Blosc scales a given blocksize for some compressors). The parallel path
is taken only where the result is the serial frame (the tests compare them for every
compressor):

* the buffer is a whole number (at least two) of blocks: Blosc compresses a shorter last
  block differently (it is not split by byte position);
* every part's header agrees with the whole frame's (flags, blocksize), so none was
  stored as a plain copy (the memcpyed flag);
* the blocks before each part compressed small enough that the whole frame's output
  budget there is at least the part's own: Blosc gives up compressing a split when its
  budget runs out, so a tighter budget could only change a part by failing it, and a
  failed part shows as memcpyed.

Anything else is compressed by the ordinary single-threaded call.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numcodecs.blosc as _nc_blosc

from ..runtime import workers
from ..runtime.memo import BoundedMemo

_HEADER = struct.Struct("<BBBBiii")
_MEMCPYED = 0x02
#: below this many bytes a buffer is compressed in one call (handing it out costs more)
MIN_PARALLEL_BYTES = 256 * 1024

_LAYOUT = BoundedMemo(256)


def compress(data: Any, cname: bytes, clevel: int, shuffle: int, blocksize: int,
             typesize: int) -> bytes:
    """``numcodecs.blosc.compress(data, cname, clevel, shuffle, blocksize, typesize)``
    single-threaded, computed on several threads where that gives the same bytes."""
    view = memoryview(data).cast("B")
    n = view.nbytes
    parts = _parts(n, cname, clevel, shuffle, blocksize, typesize)
    if parts is not None:
        frame = _assemble(view, parts, cname, clevel, shuffle, typesize)
        if frame is not None:
            return frame
    return _nc_blosc.compress(view, cname, clevel, shuffle, blocksize, typesize)


def _parts(n: int, cname: bytes, clevel: int, shuffle: int, blocksize: int,
           typesize: int) -> _Plan | None:
    """How to compress ``n`` bytes in parallel, or None when they are not worth it or
    not a whole number of at least two blocks."""
    if n < MIN_PARALLEL_BYTES or _nc_blosc.use_threads is not False or workers.in_worker():
        return None
    idle = workers.idle_cores()
    if idle < 1:
        return None
    layout = _layout(n, cname, clevel, shuffle, blocksize, typesize)
    if layout is None:
        return None
    head, bs, forced = layout
    nblocks = n // bs
    if n % bs or nblocks < 2:
        return None
    count = min(idle + 1, workers.WORKERS, nblocks)   # the caller's core and idle ones
    edges = [bs * (nblocks * i // count) for i in range(count + 1)]
    return _Plan(head, bs, forced, list(zip(edges[:-1], edges[1:])))


@dataclass(frozen=True)
class _Plan:
    head: tuple[int, int, int, int]   # version, compressor version, flags, typesize
    blocksize: int
    forced: int                       # the blocksize argument that gives it in a part
    parts: list[tuple[int, int]]      # (start, end) of each part, whole blocks


def _layout(n: int, cname: bytes, clevel: int, shuffle: int, blocksize: int,
            typesize: int) -> tuple[tuple[int, int, int, int], int, int] | None:
    """(header start, blocksize, blocksize argument for the parts) of ``n`` bytes at
    these settings, learnt from zeros once; None if Blosc would not block them."""
    key = (n, cname, clevel, shuffle, blocksize, typesize)
    if key in _LAYOUT:
        return _LAYOUT[key]
    layout = None
    head, bs = _probe(n, cname, clevel, shuffle, blocksize, typesize)
    if head is not None and 2 * bs <= n:
        # Blosc adjusts a blocksize it is given (codecs that split a block by byte
        # position get it multiplied by the typesize): find the argument that gives
        # ``bs`` back for a part of two blocks
        for forced in dict.fromkeys([bs, bs // typesize]):
            if forced > 0 and _probe(2 * bs, cname, clevel, shuffle, forced,
                                     typesize) == (head, bs):
                layout = (head, bs, forced)
                break
    return _LAYOUT.keep(key, layout)


def _probe(n: int, cname: bytes, clevel: int, shuffle: int, blocksize: int,
           typesize: int) -> tuple[tuple[int, int, int, int] | None, int]:
    frame = _nc_blosc.compress(bytes(n), cname, clevel, shuffle, blocksize, typesize)
    version, versionlz, flags, ts, _, bs, _ = _HEADER.unpack_from(frame)
    if flags & _MEMCPYED:
        return None, 0
    return (version, versionlz, flags, ts), bs


def _assemble(view: memoryview, plan: _Plan, cname: bytes, clevel: int, shuffle: int,
              typesize: int) -> bytes | None:
    bs = plan.blocksize
    frames = workers.share(
        lambda part: _nc_blosc.compress(view[part[0]:part[1]], cname, clevel, shuffle,
                                        plan.forced, typesize), plan.parts)
    n = view.nbytes
    nblocks = n // bs
    blocks: list[memoryview] = []
    before = 0   # compressed bytes of the blocks before the current part
    for (lo, hi), frame in zip(plan.parts, frames):
        version, versionlz, flags, ts, nbytes, fbs, cbytes = _HEADER.unpack_from(frame)
        k = (hi - lo) // bs
        if ((version, versionlz, flags, ts) != plan.head or nbytes != hi - lo
                or fbs != bs or cbytes != len(frame)):
            return None   # e.g. stored as a plain copy (memcpyed)
        # the whole frame's budget here (n + 16 minus what precedes) must be at least
        # the part's own (its nbytes + 16 minus its header and table)
        if before + 4 * (nblocks - k) > n - (hi - lo):
            return None
        fv = memoryview(frame)
        starts = struct.unpack_from(f"<{k}i", frame, _HEADER.size)
        ends = starts[1:] + (cbytes,)
        for s, e in zip(starts, ends):
            blocks.append(fv[s:e])
            before += e - s
    starts = []
    pos = _HEADER.size + 4 * nblocks
    for b in blocks:
        starts.append(pos)
        pos += b.nbytes
    return b"".join([_HEADER.pack(*plan.head, n, bs, pos),
                     struct.pack(f"<{nblocks}i", *starts), *blocks])
