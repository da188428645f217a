"""What the data type tests share: fill-value checks, JSON round trips, bit patterns,
short spellings of parametrised types, and arrays written or opened by zarr-python."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import settings

from kvzarr.errors import MetadataError
from kvzarr.metadata.dtypes import DataType, parse_data_type

HSET = settings(max_examples=150, deadline=None)
SD = np.dtypes.StringDType()
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bad_fill(dtype: DataType, value) -> None:
    with pytest.raises(MetadataError) as info:
        dtype.fill_from_json(value)
    assert info.value.field == "fill_value"


def bad_data_type(doc, error=MetadataError) -> None:
    with pytest.raises(error) as info:
        parse_data_type(doc)
    assert info.value.field == "data_type"


def through_json(dtype: DataType, value):
    """fill_to_json -> real JSON text -> fill_from_json (NaN/inf must never be numbers)."""
    text = json.dumps(dtype.fill_to_json(value), allow_nan=False)
    return dtype.fill_from_json(json.loads(text))


def raw(dtype: DataType, value) -> bytes:
    return np.array(value, dtype=dtype.numpy_dtype).tobytes()


def zp_metadata(tmp_path, dtype, **kwargs) -> dict:
    """The zarr.json zarr-python 3.1.6 writes for an array of ``dtype``."""
    import zarr
    path = tmp_path / "zp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.create_array(str(path), shape=(2,), chunks=(2,), dtype=dtype, compressors=None,
                          **kwargs)
    return json.loads((path / "zarr.json").read_text())


def zp_open_with(tmp_path, data_type, fill_value, codecs):
    """Open with zarr-python an array whose metadata kvzarr types wrote."""
    import zarr
    path = tmp_path / "ours"
    path.mkdir()
    doc = {"zarr_format": 3, "node_type": "array", "shape": [2], "data_type": data_type,
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": fill_value, "codecs": codecs, "attributes": {}}
    (path / "zarr.json").write_text(json.dumps(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_array(str(path), mode="r")


def float_bits(name: str, bits: int):
    dtype = np.dtype(name)
    return np.array(bits, dtype=UINT[dtype.itemsize]).view(dtype)[()]


def bits_of(value, name: str) -> int:
    dtype = np.dtype(name)
    return int(np.array(value, dtype=dtype).view(UINT[dtype.itemsize]))


def dt64(unit="us", scale=10):
    return parse_data_type({"name": "numpy.datetime64",
                            "configuration": {"unit": unit, "scale_factor": scale}})


def td64(unit="ns", scale=1):
    return parse_data_type({"name": "numpy.timedelta64",
                            "configuration": {"unit": unit, "scale_factor": scale}})


def struct(*fields):
    return parse_data_type({"name": "struct", "configuration": {"fields": [
        {"name": n, "data_type": t} for n, t in fields]}})
