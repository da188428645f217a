"""numpy.datetime64 and numpy.timedelta64 (temporal.py): units, scale factors and fill
values, against what zarr-python 3.1.6 writes and reads."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvzarr.errors import MetadataError
from kvzarr.metadata.dtypes import data_type_from_numpy
from kvzarr.metadata.dtypes.temporal import NAT, DateTime64Type, TimeDelta64Type

from .dtype_helpers import (HSET, bad_data_type, bad_fill, dt64, raw, td64, through_json,
                            zp_metadata, zp_open_with)

zarr = pytest.importorskip("zarr")


@pytest.mark.parametrize("unit", ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps",
                                  "fs", "as"])
def test_temporal_units(unit):
    d, t = dt64(unit, 3), td64(unit, 3)
    assert isinstance(d, DateTime64Type) and isinstance(t, TimeDelta64Type)
    assert d.numpy_dtype == np.dtype(f"M8[3{unit}]")
    assert t.numpy_dtype == np.dtype(f"m8[3{unit}]")
    assert d.itemsize == t.itemsize == 8 and d.has_endianness
    assert data_type_from_numpy(f"M8[3{unit}]") == d
    assert data_type_from_numpy(f">m8[3{unit}]") == t
    assert d.to_json() == {"name": "numpy.datetime64",
                           "configuration": {"unit": unit, "scale_factor": 3}}


def test_temporal_micro_sign_and_generic():
    assert dt64("μs", 10) == dt64("us", 10)
    assert dt64("μs", 10).to_json()["configuration"]["unit"] == "us"
    generic = dt64("generic", 1)
    assert generic.numpy_dtype == np.dtype("M8")
    assert data_type_from_numpy("M8") == generic
    assert data_type_from_numpy("m8") == td64("generic", 1)
    assert generic.fill_from_json("NaT") is not None
    bad_fill(generic, 5)  # numpy's generic unit holds nothing but NaT
    bad_data_type({"name": "numpy.datetime64",
                   "configuration": {"unit": "generic", "scale_factor": 2}})


@pytest.mark.parametrize("config", [
    {"unit": "us"}, {"scale_factor": 1}, {}, {"unit": "x", "scale_factor": 1},
    {"unit": "US", "scale_factor": 1}, {"unit": "us", "scale_factor": 0},
    {"unit": "us", "scale_factor": 2**31}, {"unit": "us", "scale_factor": True},
    {"unit": "us", "scale_factor": "1"}, {"unit": "us", "scale_factor": 1.0},
    {"unit": "us", "scale_factor": 1, "endian": "little"}, {"unit": 1, "scale_factor": 1}])
def test_temporal_bad_configuration(config):
    bad_data_type({"name": "numpy.datetime64", "configuration": config})
    bad_data_type({"name": "numpy.timedelta64", "configuration": config})


def test_temporal_scale_factor_bounds():
    assert dt64("s", 2**31 - 1).numpy_dtype == np.dtype(f"M8[{2**31 - 1}s]")
    bad_data_type("numpy.datetime64")  # configuration is required


def test_temporal_fill():
    d = dt64("us", 10)
    nat = d.fill_from_json("NaT")
    assert np.isnat(nat) and nat.dtype == d.numpy_dtype
    assert d.fill_to_json(nat) == NAT == -(2**63)  # integer form, as zarr-python writes
    assert np.isnat(d.fill_from_json(-(2**63)))
    assert np.isnat(d.default_fill())
    v = d.fill_from_json(12345)
    assert v == np.datetime64(12345, "10us") and d.fill_to_json(v) == 12345
    assert d.fill_from_json(2**63 - 1).view(np.int64) == 2**63 - 1
    for value in [2**63, -(2**63) - 1, 1.0, True, "2020-01-01", "nat", None, [1]]:
        bad_fill(d, value)
    t = td64("ms", 1)
    assert t.fill_from_json(-5) == np.timedelta64(-5, "ms")
    bad_fill(t, 0.5)


@HSET
@given(st.integers(-(2**63), 2**63 - 1))
def test_temporal_fill_round_trip(count):
    for dtype in (dt64("ns", 7), td64("D", 1)):
        value = dtype.fill_from_json(count)
        assert raw(dtype, through_json(dtype, value)) == np.int64(count).tobytes()


def test_temporal_coerce_fill():
    s = dt64("s", 1)
    assert s.coerce_fill(np.datetime64("2020-01-01")) == np.datetime64("2020-01-01T00:00:00")
    assert s.coerce_fill(dt.datetime(2020, 1, 1, 12)) == np.datetime64("2020-01-01T12:00:00")
    assert s.coerce_fill(dt.date(2020, 1, 2)) == np.datetime64("2020-01-02")
    assert s.coerce_fill("2020-01-01T00:00:01") == np.datetime64("2020-01-01T00:00:01")
    assert np.isnat(s.coerce_fill(np.datetime64("NaT"))) and np.isnat(s.coerce_fill(None))
    assert s.coerce_fill(5) == np.datetime64(5, "s")
    us10 = dt64("us", 10)
    assert us10.coerce_fill(np.datetime64("2020-01-01T00:00:00.00002")) == np.datetime64(
        "2020-01-01T00:00:00.00002")
    ms = td64("ms", 1)
    # np.timedelta64 is an integer subclass: it must convert by unit, not by count
    assert ms.coerce_fill(np.timedelta64(5, "s")).view(np.int64) == 5000
    assert ms.coerce_fill(dt.timedelta(seconds=2)).view(np.int64) == 2000
    bad = [
        (us10, np.datetime64("2020-01-01T00:00:00.000001")),  # not a multiple of 10 us
        (s, np.timedelta64(1, "s")), (ms, np.datetime64("2020-01-01")),
        (s, dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)), (s, "not a date"),
        (s, 1.5), (s, True), (ms, "5"), (td64("D", 1), np.timedelta64(1, "h")),
        (dt64("ns", 1), np.datetime64("9999-01-01")),  # overflows int64 nanoseconds
    ]
    for dtype, value in bad:
        with pytest.raises(MetadataError) as info:
            dtype.coerce_fill(value)
        assert info.value.field == "fill_value"


def test_temporal_is_fill():
    d = dt64("s", 1)
    nat = d.default_fill()
    assert d.is_fill(np.full(3, np.datetime64("NaT"), dtype="M8[s]"), nat)
    assert not d.is_fill(np.array(["NaT", "2020-01-01"], dtype="M8[s]"), nat)
    one = d.fill_from_json(1)
    assert d.is_fill(np.full((2, 2), 1, dtype=np.int64).view("M8[s]"), one)
    assert d.is_fill(np.full(2, 1, dtype=">i8").view(">M8[s]"), one)


@pytest.mark.parametrize("numpy_dtype", ["M8[10us]", "m8[ns]", "M8[s]", "m8[3D]"])
def test_temporal_matches_zarr_python(tmp_path, numpy_dtype):
    doc = zp_metadata(tmp_path, numpy_dtype)
    ours = data_type_from_numpy(numpy_dtype)
    assert doc["data_type"] == ours.to_json()
    assert doc["fill_value"] == ours.fill_to_json(ours.default_fill())
    arr = zp_open_with(tmp_path, ours.to_json(), ours.fill_to_json(ours.fill_from_json(42)),
                       [{"name": "bytes", "configuration": {"endian": "little"}}])
    assert arr.dtype == ours.numpy_dtype
    assert np.array(arr.fill_value, dtype=ours.numpy_dtype).view(np.int64) == 42
