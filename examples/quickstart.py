"""A first tour of kvzarr: arrays, groups, selections and sharding in one store.

Run:  python examples/quickstart.py [STORE]     (default: a new directory ./quickstart.zarr)
"""

import sys

import numpy as np

import kvzarr

target = sys.argv[1] if len(sys.argv) > 1 else "quickstart.zarr"
root = kvzarr.open_group(target, mode="w", attributes={"project": "quickstart"})

# A 2-D float array in 100x100 chunks, compressed with blosc-zstd.
temps = root.create_array(
    "weather/temperature", shape=(365, 720), chunks=(100, 100), dtype="float32",
    compressors=[{"name": "blosc", "configuration": {
        "cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}],
    dimension_names=["day", "lon"], attributes={"units": "degC"})
days = np.arange(365)[:, None]
temps[...] = (15 + 10 * np.sin(days / 58.0) + np.linspace(-5, 5, 720)).astype("float32")

print("basic   :", temps[100, 10:15])
print("strided :", temps[::100, ::240].shape)
print("oindex  :", temps.oindex[[0, 180, 364], [0, 719]])
print("vindex  :", temps.vindex[[0, 180, 364], [0, 360, 719]])
print("blocks  :", temps.blocks[1, 2].shape)

# Sharded: 64x64 chunks packed into 256x256 shards (one stored object per shard).
image = root.create_array("imaging/raw", shape=(512, 512), chunks=(64, 64), shards=(256, 256),
                          dtype="uint16", fill_value=0)
image[100:200, 300:400] = 4095
print("shard   :", image[150, 350], image.shards, image.chunks, image.nchunks_initialized)

# Rectilinear chunks: one chunk per month.
months = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
rain = root.create_array("weather/rain", shape=(365,), chunks=[months], dtype="float32")
rain[...] = np.random.default_rng(0).gamma(1.0, 2.0, 365).astype("float32")
print("months  :", rain.write_chunk_sizes[0][:3], "...")

print(root.tree())
