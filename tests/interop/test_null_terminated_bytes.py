"""``null_terminated_bytes`` (numpy ``S<n>``) against zarr-python 3.1 and TensorStore.

The data matrix of ``conftest`` (``SPECIAL_CASES``: ``|S6`` with several fills, codecs and
a sharded layout) already runs both ways through ``test_zarr_python``. Here: the fill value
forms zarr-python reads, the ones kvzarr refuses although zarr-python reads them, byte
strings inside structured types, and TensorStore (which has no such data type).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import MetadataError

from .conftest import NAME, assert_bit_equal, read_json

zarr = pytest.importorskip("zarr")
from zarr.storage import LocalStore  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore:The data type .* does not have a Zarr V3 specification")

DATA = np.array([b"", b"\x00", b"a\x00b", b"\xff\xff\xff\xff", b"abc"], dtype="S4")


def _zarr_python_array(root, fill_json):
    """A 7-element S4 array zarr-python wrote, chunks of 3 (the last one missing), with
    ``fill_json`` put into its metadata by hand afterwards."""
    arr = zarr.create_array(LocalStore(root), name=NAME, shape=(7,), chunks=(3,), dtype="S4")
    arr[:5] = DATA
    meta = root / NAME / "zarr.json"
    doc = read_json(meta)
    doc["fill_value"] = fill_json
    meta.write_text(json.dumps(doc))


@pytest.mark.parametrize("fill_json, fill", [
    ("", b""), ("YWI=", b"ab"), ("AAA=", b""), ("YQBiAA==", b"a\x00b"),
    ("/wAB/w==", b"\xff\x00\x01\xff")])
def test_fill_forms_zarr_python_reads_kvzarr_reads_alike(fill_json, fill, tmp_path):
    _zarr_python_array(tmp_path, fill_json)
    theirs = zarr.open_array(LocalStore(tmp_path, read_only=True), path=NAME, mode="r")
    ours = kvzarr.open_array(str(tmp_path), path=NAME, mode="r")
    assert ours.fill_value == fill and len(ours.fill_value) == len(fill)
    # zarr-python keeps decoded trailing NULs inside its np.bytes_ ("AAA=" gives a
    # two-byte value that prints as b""); as stored elements the two are the same
    as_stored = [np.array(v, dtype="S4").tobytes() for v in (ours.fill_value,
                                                             theirs.fill_value)]
    assert as_stored[0] == as_stored[1]
    # element 5 was written (as the fill of the time, b""); chunk 2 is missing
    expected = np.concatenate([DATA, np.array([b"", fill], dtype="S4")])
    assert_bit_equal(ours[...], expected)
    assert_bit_equal(theirs[...], expected)


@pytest.mark.parametrize("fill_json", ["YWJjZGU=", "YW I="])
def test_fill_forms_zarr_python_bends_are_refused(fill_json, tmp_path):
    """zarr-python truncates a fill longer than ``length_bytes`` (b"abcde" for S4) and
    drops characters that are not base64; kvzarr refuses both, naming the field."""
    _zarr_python_array(tmp_path, fill_json)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.open_array(LocalStore(tmp_path, read_only=True), path=NAME, mode="r")
    with pytest.raises(MetadataError) as info:
        kvzarr.open_array(str(tmp_path), path=NAME, mode="r")
    assert info.value.field == "fill_value"


@pytest.mark.parametrize("fill, ours_json, theirs_json", [
    (b"z", "eg==", "eg=="),
    # zarr-python encodes the NULs a user's fill ends with; kvzarr drops them (they are
    # padding, as zarr-extensions pull request #60 has it); each reads the other
    (b"z\x00", "eg==", "egA=")])
def test_kvzarr_writes_what_zarr_python_writes(fill, ours_json, theirs_json, tmp_path):
    """Same creation arguments, same zarr.json (the bytes codec without ``endian``), and
    the same chunk bytes, padding NULs included."""
    for peer, root in ((kvzarr, tmp_path / "kv"), (zarr, tmp_path / "zp")):
        arr = peer.create_array(str(root), name=NAME, shape=(7,), chunks=(3,), dtype="S4",
                                fill_value=fill, compressors=None)
        arr[:5] = DATA
    ours, theirs = (read_json(tmp_path / p / NAME / "zarr.json") for p in ("kv", "zp"))
    assert (ours.pop("fill_value"), theirs.pop("fill_value")) == (ours_json, theirs_json)
    assert ours == theirs
    assert ours["codecs"] == [{"name": "bytes"}]
    for root in ("kv", "zp"):
        assert kvzarr.open_array(str(tmp_path / root), path=NAME).fill_value == b"z"
        theirs_fill = zarr.open_array(str(tmp_path / root), path=NAME).fill_value
        assert np.array(theirs_fill, dtype="S4").tobytes() == b"z\x00\x00\x00"
    for key in ("c/0", "c/1"):
        assert ((tmp_path / "kv" / NAME / key).read_bytes()
                == (tmp_path / "zp" / NAME / key).read_bytes())
    assert (tmp_path / "kv" / NAME / "c/0").read_bytes() == DATA[:3].tobytes()


def test_big_endian_bytes_codec_is_read(tmp_path):
    """An ``endian`` on the bytes codec means nothing for single bytes: both read it."""
    _zarr_python_array(tmp_path, "YWI=")
    meta = tmp_path / NAME / "zarr.json"
    doc = read_json(meta)
    doc["codecs"][0] = {"name": "bytes", "configuration": {"endian": "big"}}
    meta.write_text(json.dumps(doc))
    arr = kvzarr.open_array(str(tmp_path), path=NAME, mode="r+")
    assert_bit_equal(arr[:5], DATA)
    arr[5:] = [b"\x01\x02\x03\x04", b"q"]
    theirs = zarr.open_array(LocalStore(tmp_path, read_only=True), path=NAME, mode="r")
    assert_bit_equal(theirs[...], arr[...])
    assert theirs[5:].tobytes() == b"\x01\x02\x03\x04q\x00\x00\x00"


def test_byte_string_fields_of_structured_types(tmp_path):
    dt = np.dtype([("id", "<i4"), ("tag", "S5")])
    fill = np.array((3, b"ab"), dtype=dt)[()]
    data = np.array([(1, b"x\x00y"), (2, b"hello")], dtype=dt)
    z = zarr.create_array(str(tmp_path / "zp"), name=NAME, shape=(4,), chunks=(3,),
                          dtype=dt, fill_value=fill)
    z[:2] = data
    field = read_json(tmp_path / "zp" / NAME / "zarr.json")["data_type"]["configuration"]
    assert field["fields"][1] == ["tag", {"name": "null_terminated_bytes",
                                          "configuration": {"length_bytes": 5}}]
    arr = kvzarr.open_array(str(tmp_path / "zp"), path=NAME, mode="r")
    assert arr[...].tobytes() == z[...].tobytes()
    assert arr["tag"].tolist() == [b"x\x00y", b"hello", b"ab", b"ab"]
    # kvzarr writes the registered struct form, the field fill in base64
    ours = kvzarr.create_array(str(tmp_path / "kv"), name=NAME, shape=(4,), chunks=(3,),
                               dtype=dt, fill_value=fill)
    ours[:2] = data
    doc = read_json(tmp_path / "kv" / NAME / "zarr.json")
    assert doc["fill_value"] == {"id": 3, "tag": "YWI="}
    assert kvzarr.open_array(str(tmp_path / "kv"), path=NAME)[...].tobytes() == \
        z[...].tobytes()


def test_tensorstore_has_no_null_terminated_bytes(tmp_path):
    """TensorStore's zarr3 driver (0.1.x) lists the data types it supports and this is not
    one of them: it refuses the array, so there is no TensorStore interop to test."""
    ts = pytest.importorskip("tensorstore")
    kvzarr.create_array(str(tmp_path), name=NAME, shape=(3,), chunks=(2,), dtype="S3")
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / NAME) + "/"}}
    with pytest.raises(ValueError, match="null_terminated_bytes data type is not one of"):
        ts.open(spec, open=True).result()
