"""The two binary formats inside a vector dataset: the fragment index ("ZVFG" v1) and
object manifests, against the byte layouts zarr-vectors 0.9.2 writes (worked examples
from its fragment-index and object-index documentation), round trips of random content
and hostile blobs, which must raise CodecError and nothing else; and the chunk names
of ``nonempty_chunks``."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.errors import CodecError, MetadataError
from kvzarr.vectors import fragments, grid, manifests


def _i64(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


def test_worked_example_mixed_fragments():
    # fragments [(0, 2), explicit [5, 3], (2, 0)]: header, bitmap 0b101 padded to 8
    # bytes, two range rows, explicit offsets [0, 2], explicit rows 5 and 3 (80 bytes)
    expected = (bytes.fromhex("4746565a01000000") + struct.pack("<II", 3, 2)
                + bytes([0b101]) + bytes(7) + _i64(0, 2) + _i64(2, 0)
                + struct.pack("<II", 0, 2) + _i64(5, 3))
    blob = fragments.encode([(0, 2), np.array([5, 3]), (2, 0)])
    assert blob == expected and len(blob) == 80
    index = fragments.decode(blob)
    assert index.count == 3 and not index.all_ranges()
    assert index.rows(0).tolist() == [0, 1]
    assert index.rows(1).tolist() == [5, 3]
    assert index.rows(2).tolist() == []


def test_empty_index_is_its_header():
    assert fragments.encode_ranges(np.zeros(0), np.zeros(0)) == bytes.fromhex(
        "4746565a010000000000000000000000")
    assert fragments.decode(fragments.encode([])).count == 0


def test_all_ranges_index_of_a_64_bin_chunk():
    counts = np.zeros(64, dtype=np.int64)
    counts[0], counts[16] = 2, 1
    blob = fragments.encode_ranges(np.cumsum(counts) - counts, counts)
    # 16 header + 8 bitmap + 64 * 16 ranges + the explicit offsets' leading 0
    assert len(blob) == 1052
    assert blob[16:24] == b"\xff" * 8
    index = fragments.decode(blob)
    assert index.tiles(3)
    assert index.rows(16).tolist() == [2]
    assert index.rows_of(np.array([0, 16])).tolist() == [0, 1, 2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.integers(0, 1000), st.integers(0, 50)),
    st.lists(st.integers(0, 2000), max_size=8).map(np.array)), max_size=40))
def test_fragment_index_round_trip(frags):
    index = fragments.decode(fragments.encode(frags))
    assert index.count == len(frags)
    for f, frag in enumerate(frags):
        want = np.arange(frag[0], frag[0] + frag[1]) if isinstance(frag, tuple) else frag
        assert index.rows(f).tolist() == list(want)
    if frags:
        picks = np.arange(len(frags))[::-1]
        assert index.rows_of(picks).tolist() == sum((index.rows(int(f)).tolist()
                                                    for f in picks), [])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 199), st.integers(0, 255))
def test_damaged_fragment_index_raises_codec_error(noise, at, byte):
    good = bytearray(fragments.encode([(0, 2), np.array([5, 3]), (2, 0)]))
    for blob in (bytes(noise), bytes(good[:at % len(good)]),
                 bytes(good[:at % len(good)]) + bytes([byte]) + bytes(good[at % len(good) + 1:])):
        try:
            index = fragments.decode(blob)
        except CodecError:
            continue
        # whatever decodes names rows a reader bounds by its cell before listing them
        try:
            index.check_rows(1000, "k")
        except CodecError:
            continue
        for f in range(index.count):
            assert index.rows(f).max(initial=0) < 1000


def test_fragment_rows_outside_the_chunk_are_refused():
    index = fragments.decode(fragments.encode([(0, 5)]))
    with pytest.raises(CodecError):
        index.check_rows(4, "k")
    index.check_rows(5, "k")


def test_huge_claimed_fragment_count_is_refused_without_allocating():
    blob = struct.pack("<IHHII", fragments.MAGIC, 1, 0, 2 ** 32 - 1, 2 ** 32 - 1)
    with pytest.raises(CodecError):
        fragments.decode(blob)


def test_manifest_worked_examples():
    # object 1 -> [((0,0,0), 1)] is 37 bytes; object 3 -> [((-1,0,0), 0)]
    one = manifests.encode(np.array([[0, 0, 0]]), np.array([1]))
    assert one == struct.pack("<I", 1) + _i64(0, 0, 0) + b"\0" + _i64(1)
    three = manifests.encode(np.array([[-1, 0, 0]]), np.array([0]))
    assert three[4:12] == b"\xff" * 8 and len(three) == 37
    assert manifests.encode(np.zeros((0, 3)), np.zeros(0)) == b"\0\0\0\0"
    chunks, frags = manifests.decode(one, 3)
    assert chunks.tolist() == [[0, 0, 0]] and frags.tolist() == [1]


def test_manifest_modes_one_and_two_expand():
    blob = (struct.pack("<I", 3)
            + _i64(1, 2) + b"\0" + _i64(7)
            + _i64(3, 4) + b"\1" + _i64(10, 3)
            + _i64(-5, 6) + b"\2" + struct.pack("<I", 2) + _i64(9, 4))
    chunks, frags = manifests.decode(blob, 2)
    assert frags.tolist() == [7, 10, 11, 12, 9, 4]
    assert chunks.tolist() == [[1, 2], [3, 4], [3, 4], [3, 4], [-5, 6], [-5, 6]]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.integers(1, 4))
def test_damaged_manifest_raises_codec_error(noise, sid):
    try:
        chunks, frags = manifests.decode(noise, sid)
    except CodecError:
        return
    assert chunks.shape == (len(frags), sid)


def test_manifest_with_trailing_bytes_or_bad_mode_is_refused():
    good = manifests.encode(np.array([[0, 0]]), np.array([1]))
    with pytest.raises(CodecError):
        manifests.decode(good + b"\0", 2)
    bad_mode = good[:4 + 16] + b"\7" + good[4 + 17:]
    with pytest.raises(CodecError):
        manifests.decode(bad_mode, 2)
    huge_range = struct.pack("<I", 1) + _i64(0) + b"\1" + _i64(0, 2 ** 40)
    with pytest.raises(CodecError):
        manifests.decode(huge_range, 1)


# --- chunk names (``nonempty_chunks``) -------------------------------------------------

_NAME_EDITS = st.sampled_from(["", "01", "+", "trailing", "double-dot", " ", "not-str"])


@st.composite
def _chunk_name_lists(draw):
    ndim = draw(st.integers(1, 4))
    names = []
    for _ in range(draw(st.integers(0, 6))):
        coords = draw(st.lists(st.integers(-300, 300), min_size=ndim, max_size=ndim))
        name: object = ".".join(map(str, coords))
        edit = draw(_NAME_EDITS) if draw(st.integers(0, 9)) == 0 else ""
        if edit == "01":
            name = name.replace("1", "01", 1)     # type: ignore[union-attr]
        elif edit == "+":
            name = "+" + name                     # type: ignore[operator]
        elif edit == "trailing":
            name = name + ".0"                    # type: ignore[operator]
        elif edit == "double-dot":
            name = name.replace(".", "..", 1)     # type: ignore[union-attr]
        elif edit == " ":
            name = " " + name                     # type: ignore[operator]
        elif edit == "not-str":
            name = coords
        names.append(name)
    return ndim, names


@settings(max_examples=400, deadline=None)
@given(_chunk_name_lists())
def test_chunk_name_list_parses_as_each_name_does(case):
    # the batch parser readers use on every query answers as the one-name parser does:
    # the same sorted coordinates, or the same error for the first bad name
    ndim, names = case
    try:
        want = np.asarray(sorted(grid.parse_chunk_name(n, ndim, "w") for n in names),
                          dtype=np.int64).reshape(len(names), ndim)
    except MetadataError as e:
        with pytest.raises(MetadataError) as got:
            grid.parse_chunk_names(names, ndim, "w")
        assert str(got.value) == str(e)
    else:
        got_rows = grid.parse_chunk_names(names, ndim, "w")
        assert got_rows.dtype == np.int64 and got_rows.tolist() == want.tolist()
