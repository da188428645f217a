"""Keys checked many at once (kvzarr/stores/keys.py: check_keys, valid_children) decide
exactly as the one-key checks do: the same keys pass, the first invalid key raises the
same error, and a listing keeps and warns about the same names."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvzarr.errors import InvalidKeyError, InvalidStoredKeyWarning
from kvzarr.stores import keys as keys_module
from kvzarr.stores.keys import check_key, check_keys, is_valid_key, valid_children

# segments mostly plain, some with every character the rules look at
_TRICKY = ["", ".", "..", ".a", "a.", "a\x00b", "a\\b", "\ud800", "é", "a/", "/", "//"]
_segment = st.one_of(
    st.from_regex(r"[a-z0-9_.\-]{1,12}", fullmatch=True),
    st.sampled_from(_TRICKY),
    st.text(min_size=0, max_size=4))
_key = st.one_of(st.lists(_segment, min_size=1, max_size=4).map("/".join),
                 st.sampled_from(["", "/a", "a/", "a//b", "x" * 40, "a/..", "a/./b", "a/b/.",
                                  "..", "a\\b", "a\x00b", "é/a", "a/\ud800"]))
_plain_key = st.lists(st.from_regex(r"[a-z0-9_\-][a-z0-9_.\-]{0,11}", fullmatch=True),
                      min_size=1, max_size=4).map("/".join)
_limits = st.sampled_from([None, 8, 16, 255])


def _first_error(keys: list[object], max_bytes: int | None,
                 max_segment_bytes: int | None) -> str | None:
    for k in keys:
        try:
            check_key(k, max_bytes, max_segment_bytes)  # type: ignore[arg-type]
        except InvalidKeyError as e:
            return str(e)
    return None


def _outcome(keys: list[object], max_bytes: int | None,
             max_segment_bytes: int | None) -> str | None:
    try:
        check_keys(keys, max_bytes, max_segment_bytes)  # type: ignore[arg-type]
    except InvalidKeyError as e:
        return str(e)
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_plain_key, _key), min_size=0, max_size=20), _limits, _limits)
def test_check_keys_decides_as_check_key_on_each(keys: list[str], max_bytes: int | None,
                                                  max_segment_bytes: int | None) -> None:
    assert _outcome(keys, max_bytes, max_segment_bytes) == \
        _first_error(keys, max_bytes, max_segment_bytes)


@settings(max_examples=200, deadline=None)
@given(st.lists(_plain_key, min_size=8, max_size=30), _key, st.integers(0, 29), _limits)
def test_one_bad_key_among_many_plain_ones_is_found(keys: list[str], bad: str, at: int,
                                                    limit: int | None) -> None:
    keys.insert(min(at, len(keys)), bad)
    assert _outcome(keys, limit, limit) == _first_error(keys, limit, limit)


def test_keys_that_are_not_str_are_refused_in_a_batch() -> None:
    keys: list[object] = [f"a/{i}" for i in range(10)]
    keys[4] = b"a/4"
    with pytest.raises(InvalidKeyError, match="not bytes"):
        check_keys(keys)  # type: ignore[arg-type]


def test_plain_batches_take_the_joined_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = keys_module.check_key
    monkeypatch.setattr(keys_module, "check_key",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    check_keys([f"g/a{i:05d}/zarr.json" for i in range(100)], 1024, 255)
    assert calls == []          # no key checked alone
    with pytest.raises(InvalidKeyError):
        check_keys([f"g/a{i:05d}/zarr.json" for i in range(99)] + ["g/../x"], 1024, 255)


def _reference_children(names: list[object], limit: int | None) -> tuple[list[object], int]:
    kept, warned = [], 0
    for name in names:
        if isinstance(name, str):
            bare = name[:-1] if name.endswith("/") else name
            if "/" not in bare and is_valid_key(bare, None, limit):
                kept.append(name)
                continue
        warned += 1
    return kept, warned


_entry = st.one_of(
    st.from_regex(r"[a-z0-9_\-][a-z0-9_.\-]{0,10}/?", fullmatch=True),
    st.sampled_from(_TRICKY + ["a//", "./", "../", "x" * 300 + "/"]),
    st.text(max_size=5))


@settings(max_examples=300, deadline=None)
@given(st.lists(_entry, max_size=600), _limits)
def test_valid_children_keeps_and_warns_as_one_name_at_a_time(
        names: list[str], limit: int | None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = list(valid_children(iter(names), "p/", "store", limit))
    want, warned = _reference_children(names, limit)
    assert kept == want
    assert sum(issubclass(w.category, InvalidStoredKeyWarning) for w in caught) == warned


_plain_entry = st.from_regex(r"[a-z0-9_\-][a-z0-9_.\-]{0,10}/?", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(_plain_entry, min_size=8, max_size=40), _entry, st.integers(0, 39),
       _limits)
def test_one_bad_name_among_many_plain_ones_is_left_out(
        names: list[str], bad: str, at: int, limit: int | None) -> None:
    names.insert(min(at, len(names)), bad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = list(valid_children(names, "p/", "store", limit))
    want, warned = _reference_children(names, limit)
    assert kept == want
    assert sum(issubclass(w.category, InvalidStoredKeyWarning) for w in caught) == warned
