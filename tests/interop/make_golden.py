"""Regenerate the golden stores under ``tests/interop/golden/`` with the peers.

    python tests/interop/make_golden.py [output-directory]

``golden/zarr_python/`` is a hierarchy written by zarr-python 3.1, ``golden/tensorstore/``
arrays written by TensorStore's ``zarr3`` driver; both are the raw files of a filesystem
store. ``test_golden.py`` pins what kvzarr must read from them as literal numbers, so
regenerating with newer peers only changes the test outcome if the format changed.
The values written here and the literals there must be kept in step by hand.
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _f64(bits: int) -> np.float64:
    return np.array(bits, dtype=np.uint64).view(np.float64)[()]


def _f32(bits: int) -> np.float32:
    return np.array(bits, dtype=np.uint32).view(np.float32)[()]


def write_zarr_python(root: Path) -> None:
    import zarr
    from zarr.core.dtype import VariableLengthBytes
    from zarr.storage import LocalStore

    store = LocalStore(root)
    group = zarr.open_group(store, mode="w", attributes={"written_by": "zarr-python",
                                                         "note": "golden ✓"})

    # shards (4, 4) of inner chunks (2, 2); shard row 1 is never written and inner chunk
    # (1, 0) of shard (0, 0) holds only the fill, so zarr-python leaves it out
    a = group.create_array("sharded_u16", shape=(6, 5), chunks=(2, 2), shards=(4, 4),
                           dtype="uint16", fill_value=7, dimension_names=["y", "x"])
    block = np.arange(20, dtype=np.uint16).reshape(4, 5) * 3000
    block[0, 0] = 65535
    block[2:4, 0:2] = 7
    a[0:4, :] = block

    b = group.create_array("blosc_f64_nan", shape=(5, 3), chunks=(2, 2), dtype="float64",
                           fill_value=np.nan, compressors=zarr.codecs.BloscCodec(
                               cname="lz4", clevel=5, shuffle="shuffle"))
    b[0:3, :] = np.array([[1.5, -0.0, np.inf],
                          [-np.inf, _f64(1), 1e300],
                          [_f64(0x7FF8000000000001), -1.25, 0.1]])

    c = group.create_array("v2keys_i8", shape=(5, 4), chunks=(2, 3), dtype="int8",
                           fill_value=-1,
                           chunk_key_encoding={"name": "v2", "configuration": {"separator": "."}})
    c[0:3, :] = np.array([[-128, 127, 0, 1], [2, 3, -1, -2], [5, 6, 7, 8]], dtype=np.int8)

    d = group.create_array("strings", shape=(5,), chunks=(2,), dtype=str)
    d[0:4] = np.array(["", "a", "héllo", "🙂"], dtype=np.dtypes.StringDType())

    e = group.create_array("bytes_vlen", shape=(4,), chunks=(3,), dtype=VariableLengthBytes())
    e[0:3] = np.array([b"", b"\x00\x01", b"abc"], dtype=object)

    f = group.create_array("structured_legacy", shape=(3,), chunks=(2,),
                           dtype=[("a", "<i2"), ("b", "<f4")])
    f[0:2] = np.array([(-3, 1.5), (300, -0.0)], dtype=[("a", "<i2"), ("b", "<f4")])


def write_tensorstore(root: Path) -> None:
    import tensorstore as ts

    def create(name, metadata):
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": f"{root / name}/"},
                "metadata": metadata}
        return ts.open(spec, create=True).result()

    le = {"name": "bytes", "configuration": {"endian": "little"}}
    a = create("sharded_start_i32", {
        "shape": [5, 6], "data_type": "int32", "fill_value": -5,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 2],
            "codecs": [le, {"name": "gzip", "configuration": {"level": 1}}],
            "index_codecs": [le, {"name": "crc32c"}], "index_location": "start"}}]})
    a[0:3, :].write(np.arange(18, dtype=np.int32).reshape(3, 6) * 1000 - 9000).result()

    b = create("hexnan_f32", {
        "shape": [5], "data_type": "float32", "fill_value": "0x7fc00001",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "codecs": [le]})
    b[0:3].write(np.array([1.5, -0.0, _f32(0x7FA00000)], dtype=np.float32)).result()

    c = create("transpose_be_c64", {
        "shape": [3, 4], "data_type": "complex64", "fill_value": [1.0, -1.0],
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "."}},
        "codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}},
                   {"name": "bytes", "configuration": {"endian": "big"}},
                   {"name": "zstd", "configuration": {"level": 1, "checksum": True}},
                   {"name": "crc32c"}]})
    c[0:2, 0:4].write(np.array([[1 + 2j, -3.5j, 0, 4],
                                [5 - 5j, 6, -7.25 + 0.5j, 8j]], dtype=np.complex64)).result()


def main(argv: list[str]) -> None:
    out = Path(argv[1]) if len(argv) > 1 else HERE / "golden"
    for sub, writer in (("zarr_python", write_zarr_python), ("tensorstore", write_tensorstore)):
        target = out / sub
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zarr-python's "no v3 specification" notes
            writer(target)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {out} ({size} bytes)")


if __name__ == "__main__":
    main(sys.argv)
