"""Deterministic test data and the codec choices the workloads name.

Smooth data compresses the way model output does; random data is what small-chunk and
random-access workloads use so that no codec or zero-chunk shortcut helps anyone.
A codec is named by a small dict every adapter translates to its own objects:
``{"id": "none"}``, ``{"id": "blosc-zstd", "clevel": 3}`` (byte shuffle),
``{"id": "gzip", "level": 5}``.
"""

from __future__ import annotations

import numpy as np

NONE = {"id": "none"}
BLOSC_ZSTD = {"id": "blosc-zstd", "clevel": 3}
GZIP = {"id": "gzip", "level": 5}

CODECS = {"uncompressed": NONE, "blosc-zstd": BLOSC_ZSTD}


def smooth_float32(rows: int, cols: int) -> np.ndarray:
    """A smooth 2-D float32 field (a product of sines), never equal to the fill value 0."""
    y = np.linspace(0, 20, rows, dtype="float32")[:, None]
    x = np.linspace(0, 30, cols, dtype="float32")[None, :]
    return (np.sin(y) * np.cos(x) * 100 + 101).astype("float32")


def random_float32(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).random(shape, dtype="float32") + 1).astype("float32")


def image_uint16(side: int, seed: int = 0) -> np.ndarray:
    """A smooth uint16 image with a little noise: gzip has real work to do."""
    y = np.linspace(0, 12, side, dtype="float32")[:, None]
    x = np.linspace(0, 9, side, dtype="float32")[None, :]
    base = (np.sin(y) * np.cos(x) * 20000 + 30000).astype("uint16")
    noise = np.random.default_rng(seed).integers(0, 64, (side, side), dtype="uint16")
    return base + noise + 1


def bulk_shape(mib: float, cols: int = 4096) -> tuple[int, int]:
    """Rows x cols of a float32 array of about ``mib`` MiB, rows a multiple of 256."""
    rows = max(256, int(mib * (1 << 20) // (4 * cols)) // 256 * 256)
    return rows, cols
