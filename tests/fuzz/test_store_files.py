"""Fuzz target: damaged store files (LMDB, SQLite, zip) cut and bit-flipped at random,
opened and read in a separate process (a signal there fails the test, naming the input)
with a time bound. Only kvzarr errors or correct data may come out; see
tests/stores/damage.py for the oracle and which bytes it can judge. The named
regression tests are in tests/stores/test_hostile_input.py."""

from __future__ import annotations

import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ..stores.damage import Reader, check_outcome, damaged_copy, flippable, make_store_file
from .settings import fuzz_settings

KINDS = {"lmdb": ("lmdb", None), "sqlite": ("sqlite", None), "zip": ("zip", None),
         "zip-deflated": ("zip", zipfile.ZIP_DEFLATED)}


@pytest.fixture(scope="module")
def reader():
    r = Reader(timeout=60)
    yield r
    r.close()


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    base = tmp_path_factory.mktemp("originals")
    return {name: make_store_file(kind, base / name, compression)
            for name, (kind, compression) in KINDS.items()}


@pytest.mark.parametrize("name", sorted(KINDS))
@fuzz_settings(30)
@given(data=st.data())
def test_damaged_store_files_raise_kvzarr_errors_or_read_correct_data(
        name, originals, reader, tmp_path_factory, data):
    kind = KINDS[name][0]
    original = originals[name]
    size = original.stat().st_size
    regions = flippable(kind, original)
    cut = data.draw(st.one_of(st.none(), st.integers(0, size - 1)), label="cut")
    flips = []
    for _ in range(data.draw(st.integers(0 if cut is not None else 1, 4), label="flips")):
        start, end = regions[data.draw(st.integers(0, len(regions) - 1))]
        flips.append((data.draw(st.integers(start, end - 1)),
                      data.draw(st.integers(1, 255))))
    path = damaged_copy(original, tmp_path_factory.getbasetemp() / "damaged" / name
                        / original.name, cut=cut, flips=flips)
    check_outcome(reader.read(kind, path), f"{name} cut at {cut}, flips {flips}")
