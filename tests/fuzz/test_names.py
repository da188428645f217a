"""Fuzz target: names through the Store API and the node API on every backend (memory,
directory, zip, LMDB, SQLite, and PostgreSQL when the tests have a server). Hypothesis
text with lone surrogates, NUL, '/', '.', '..', backslashes, the reserved prefix and very
long names. The answer must be the same on every store: accepted everywhere (and read
back), or the same kvzarr error everywhere. The one allowed difference is a store's
declared limit (``max_key_bytes``, ``max_segment_bytes``): a name past it is an
InvalidKeyError on that store only. The named regression tests are in
tests/stores/test_hostile_input.py."""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvzarr
from kvzarr.errors import InvalidKeyError, KvzarrError
from kvzarr.node import metadata_key, normalize_path
from kvzarr.stores.filesystem import FilesystemStore
from kvzarr.stores.keys import is_valid_key
from kvzarr.stores.lmdb import LMDBStore
from kvzarr.stores.memory import MemoryStore
from kvzarr.stores.sql import SQLStore
from kvzarr.stores.zip import ZipStore

from .settings import fuzz_settings

SPECIAL = ["/", "//", ".", "..", "\x00", "\\", "\ud800", "\udc80", "\udfff", "__kvzarr",
           "zarr.json", "é", "\U0001F600", "n" * 211, "n" * 300, "a", "b"]
NAMES = st.lists(st.one_of(st.text(st.characters(exclude_categories=()), max_size=6),
                           st.sampled_from(SPECIAL)), min_size=1, max_size=6).map("".join)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("names")
    out = {"memory": MemoryStore(), "filesystem": FilesystemStore(base / "dir"),
           "zip": ZipStore(base / "x.zip", fsync=False),
           "lmdb": LMDBStore(base / "x.lmdb", durability="none"),
           "sqlite": SQLStore(base / "x.sqlite", synchronous="NORMAL")}
    if os.environ.get("KVZARR_TEST_POSTGRES_URL"):
        out["postgresql"] = SQLStore(os.environ["KVZARR_TEST_POSTGRES_URL"],
                                     table=f"t_{uuid.uuid4().hex[:12]}")
    yield out
    for store in out.values():
        if isinstance(store, SQLStore) and store.engine.dialect.name == "postgresql":
            with store.engine.begin() as conn:
                conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{store.table}"')
        store.close()


def outcome(op) -> str:
    """"ok" or the name of the kvzarr error ``op`` raised (anything else fails)."""
    try:
        op()
    except KvzarrError as e:
        return type(e).__name__
    return "ok"


def within_limits(key: str, store) -> bool:
    return is_valid_key(key, store.max_key_bytes, store.max_segment_bytes)


def same_answer(answers: dict[str, str], keys: list[str], stores: dict) -> None:
    """Equal answers where the keys are within every store's limits; InvalidKeyError on
    a store whose limits a key exceeds (its other stores still agree)."""
    limited = {n for n, s in stores.items() if not all(within_limits(k, s) for k in keys)
               and all(is_valid_key(k) for k in keys)}
    for n in limited:
        assert answers[n] == "InvalidKeyError", (n, answers)
    rest = {answers[n] for n in stores if n not in limited}
    assert len(rest) <= 1, answers


@fuzz_settings(60)
@given(name=NAMES)
def test_names_through_the_store_api_get_one_answer_on_every_store(stores, name):
    answers = {}
    for n, store in stores.items():
        answers[n] = outcome(lambda: store.set(name, b"v"))
        if answers[n] == "ok":
            assert store.get(name) == b"v" and store.exists(name), n
            assert name in list(store.list_prefix("")), n
            assert store.getsize(name) == 1, n
            store.erase(name)
            assert not store.exists(name), n
        else:
            for op in (lambda: store.get(name), lambda: store.exists(name),
                       lambda: store.erase(name), lambda: store.getsize(name)):
                assert outcome(op) == answers[n], n
        assert list(store.list()) == [], n
    same_answer(answers, [name], stores)
    if not is_valid_key(name):
        assert set(answers.values()) == {"InvalidKeyError"}, answers


@fuzz_settings(40)
@given(name=NAMES)
def test_names_through_the_node_api_get_one_answer_on_every_store(stores, name):
    answers = {}
    for n, store in stores.items():
        root = kvzarr.open_group(store, mode="w")
        answers[n] = outcome(lambda: root.create_group(name))
        array = outcome(lambda: kvzarr.create_array(store, name=name + "/arr", shape=(2,),
                                                    dtype="i1", overwrite=True))
        if answers[n] == "ok":
            assert outcome(lambda: kvzarr.open_group(store, path=name, mode="r")) == "ok"
            assert array == "ok" or array == "InvalidKeyError", (n, array)
        # the walk ends, and raises nothing but kvzarr errors
        outcome(lambda: list(root.members(max_depth=None)))
        store.erase_prefix("")
    try:
        path = normalize_path(name)
    except (KvzarrError, InvalidKeyError):
        assert len(set(answers.values())) == 1, answers
        return
    same_answer(answers, [metadata_key(path)], stores)
