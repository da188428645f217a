"""Storage transformers in one stack: a cache, checksums and append-only shard writes.

Run:  python examples/transformers.py [STORE]   (default: a new file tiles.sqlite)
"""

import sys

import numpy as np

import kvzarr
from kvzarr.transformers import stack_layers

target = sys.argv[1] if len(sys.argv) > 1 else "tiles.sqlite"

# Listed from the array down to the store.
with kvzarr.open_store(target, transformers=["cache", "checksum", "append_shards"]) as store:
    root = kvzarr.open_group(store, mode="w")
    image = root.create_array("image", shape=(1024, 1024), chunks=(64, 64),
                              shards=(512, 512), dtype="uint16", fill_value=0)
    image[...] = np.arange(1024 * 1024, dtype="uint16").reshape(1024, 1024)

    # Small updates of big shards: each appends one inner chunk and an index.
    for i in range(8):
        image[i * 64:(i + 1) * 64, 0:64] = i
    # Repeated reads come from the cache; every read is verified.
    for _ in range(3):
        tile = image[128:192, 0:64]
    assert (tile == 2).all()
    print(image.info)

    for layer in stack_layers(store)[:-1]:
        print(f"{layer.name:>13}: {layer.stats()}")

# The scrub: every value against its checksum (`kvzarr verify STORE` does the same).
with kvzarr.open_store(target, transformers=["checksum"]) as store:
    report = store.verify()
    print(report.summary())
    assert report.ok

# Remove the garbage the appends left (`kvzarr compact STORE` does the same), through
# the checksum layer: every write to a store with checksums must go through it.
report = kvzarr.compact(target, transformers=["checksum"])
print(f"compacted {report.compacted} shards, reclaimed {report.reclaimed:,} bytes")
