"""The Group methods users reach for in zarr-python 3 (``require_array``,
``require_group``, ``zeros``/``ones``/``full``/``empty`` and their ``_like`` forms), held
against zarr-python's own behaviour on the same calls; and ``move`` (which zarr-python 3
declares but does not implement) on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import (IncompatibleNodeError, MetadataError, NodeExistsError,
                           NodeNotFoundError, NodeTypeError)
from tests.stores.conftest import store_factory  # noqa: F401

zarr = pytest.importorskip("zarr")


def _both():
    """A kvzarr group and a zarr-python group holding the same two nodes."""
    ours = kvzarr.open_group(kvzarr.MemoryStore())
    theirs = zarr.open_group(zarr.storage.MemoryStore(), mode="w")
    for g in (ours, theirs):
        g.create_array("arr", shape=(4, 2), chunks=(2, 2), dtype="int32")
        g.create_group("grp")
    return ours, theirs


def _outcome(call):
    """What a call gives: ("ok", shape, dtype) of the node, or the builtin error class
    zarr-python raises (kvzarr's errors subclass the same builtins)."""
    try:
        node = call()
    except (TypeError, ValueError, KeyError) as e:
        for builtin in (TypeError, ValueError, KeyError):
            if isinstance(e, builtin):
                return builtin.__name__
    return ("ok", getattr(node, "shape", None),
            str(node.dtype) if hasattr(node, "dtype") else None)


REQUIRE_ARRAY = {
    "existing, same shape and dtype": dict(name="arr", shape=(4, 2), dtype="int32"),
    "existing, dtype casts safely": dict(name="arr", shape=(4, 2), dtype="int64"),
    "existing, no dtype (float64)": dict(name="arr", shape=(4, 2)),
    "existing, dtype does not cast": dict(name="arr", shape=(4, 2), dtype="int8"),
    "existing, exact dtype differs": dict(name="arr", shape=(4, 2), dtype="int64", exact=True),
    "existing, exact dtype equal": dict(name="arr", shape=(4, 2), dtype="int32", exact=True),
    "existing, other shape": dict(name="arr", shape=(4, 3), dtype="int32"),
    "a group is there": dict(name="grp", shape=(4, 2), dtype="int32"),
    "nothing there": dict(name="new", shape=(3,), dtype="uint16"),
    "nothing there, int shape": dict(name="new", shape=5, dtype="float32"),
}


@pytest.mark.parametrize("kwargs", list(REQUIRE_ARRAY.values()), ids=list(REQUIRE_ARRAY))
def test_require_array_behaves_as_zarr_python(kwargs):
    ours, theirs = _both()
    kw = dict(kwargs)
    name = kw.pop("name")
    assert _outcome(lambda: ours.require_array(name, **kw)) == \
        _outcome(lambda: theirs.require_array(name, **kw))


def test_require_array_errors_are_kvzarr_errors_that_say_what_differs():
    ours, _ = _both()
    with pytest.raises(IncompatibleNodeError, match=r"shape \(4, 2\), not \(4, 3\)"):
        ours.require_array("arr", shape=(4, 3), dtype="int32")
    with pytest.raises(IncompatibleNodeError, match="int32 is not int8"):
        ours.require_array("arr", shape=(4, 2), dtype="int8")
    with pytest.raises(NodeTypeError, match="group"):
        ours.require_array("grp", shape=(1,))
    # an existing array comes back as it is, not created again
    ours["arr"][0] = [1, 2]
    np.testing.assert_array_equal(ours.require_array("arr", shape=(4, 2), dtype="int32")[0],
                                  [1, 2])


@pytest.mark.parametrize("name,overwrite", [("grp", False), ("arr", False), ("new", False),
                                            ("grp", True), ("a/b/c", False)])
def test_require_group_behaves_as_zarr_python(name, overwrite):
    ours, theirs = _both()
    got = [_outcome(lambda g=g: g.require_group(name, overwrite=overwrite))
           for g in (ours, theirs)]
    assert got[0] == got[1]
    if got[0] != "TypeError":
        assert sorted(ours.group_keys()) == sorted(theirs.group_keys())


def test_require_groups_and_require_on_a_read_only_group():
    ours, _ = _both()
    a, b = ours.require_groups("grp", "other")
    assert (a.path, b.path) == ("grp", "other")
    ro = kvzarr.Group(ours.store, "", ours.metadata, read_only=True)
    assert ro.require_group("grp").path == "grp"
    with pytest.raises(NodeNotFoundError):
        ro.require_group("missing")


@pytest.mark.parametrize("method,extra", [("zeros", {}), ("ones", {}), ("empty", {}),
                                          ("full", {"fill_value": 7})])
def test_array_helpers_behave_as_zarr_python(method, extra):
    ours, theirs = _both()
    kw = dict(name="h", shape=(3, 4), chunks=(2, 2), dtype="int16", **extra)
    a, z = getattr(ours, method)(**kw), getattr(theirs, method)(**kw)
    assert (a.shape, a.dtype, a.chunks) == (z.shape, z.dtype, z.chunks)
    assert a.fill_value == z.fill_value
    np.testing.assert_array_equal(a[...], z[...])
    with pytest.raises(TypeError):
        getattr(ours, method)("positional", shape=(1,), **extra)   # name is keyword-only


@pytest.mark.parametrize("method", ["zeros_like", "ones_like", "empty_like", "full_like"])
def test_like_helpers_take_shape_dtype_and_layout(method):
    ours, _ = _both()
    src = ours.create_array("src", shape=(6, 5), chunks=(3, 5), dtype="float32",
                            fill_value=2.5, dimension_names=["y", "x"])
    made = getattr(ours, method)(name="made", data=src)
    assert (made.shape, made.dtype, made.chunks) == (src.shape, src.dtype, src.chunks)
    assert made.dimension_names == ("y", "x")
    want = {"zeros_like": 0, "ones_like": 1, "empty_like": 0, "full_like": 2.5}[method]
    np.testing.assert_array_equal(made[...], np.full((6, 5), want, dtype="float32"))
    # from a numpy array: its shape and data type (full_like then needs a fill value,
    # as zarr-python's does)
    extra = {"fill_value": 3} if method == "full_like" else {}
    from_numpy = getattr(ours, method)(name="np", data=np.zeros((2, 3), dtype="uint8"),
                                       **extra)
    assert (from_numpy.shape, from_numpy.dtype) == ((2, 3), np.dtype("uint8"))
    if method == "full_like":
        with pytest.raises(TypeError):
            ours.full_like(name="np2", data=np.zeros(2))


# ------------------------------------------------------------------------------ move


def _all_items(store):
    return {k: store.get(k) for k in store.list()}


@pytest.mark.parametrize("transformers", [None, ["checksum"]], ids=["plain", "checksum"])
def test_move_carries_every_key_of_the_subtree(store_factory, transformers):
    store = kvzarr.open_store(store_factory.make(), transformers=transformers)
    root = kvzarr.open_group(store)
    data = np.arange(60, dtype="int32").reshape(6, 10)
    root.create_array("src/a", data=data, chunks=(2, 4), attributes={"k": "v"})
    root.create_array("src/sub/b", data=np.ones(5), chunks=(2,), shards=(4,))
    root.create_array("stay", data=np.arange(3))
    before = {k[len("src/"):]: v for k, v in _all_items(store).items() if k.startswith("src/")}
    root.move("src", "dst/deeper")
    after = _all_items(store)
    assert not [k for k in after if k.startswith("src/")]
    moved = {k[len("dst/deeper/"):]: v for k, v in after.items()
             if k.startswith("dst/deeper/")}
    assert moved == before
    assert sorted(root) == ["dst", "stay"]
    np.testing.assert_array_equal(root["dst/deeper/a"][...], data)
    assert root["dst/deeper/a"].attrs["k"] == "v"
    np.testing.assert_array_equal(root["dst/deeper/sub/b"][...], np.ones(5))
    reopened = store_factory.reopen()
    if reopened is not None:
        again = kvzarr.open_group(kvzarr.open_store(reopened, transformers=transformers))
        np.testing.assert_array_equal(again["dst/deeper/a"][...], data)


def test_move_refuses_what_cannot_be_moved_and_changes_nothing(store_factory):
    store = store_factory.make()
    root = kvzarr.open_group(store)
    root.create_array("a", shape=(2,), dtype="int8")
    root.create_group("g").create_array("x", shape=(1,), dtype="int8")
    store.set("stray/c/0", b"\x00")               # keys without a node under a name
    before = _all_items(store)
    cases = [(NodeNotFoundError, "missing", "z"), (NodeExistsError, "a", "g"),
             (NodeExistsError, "a", "g/x"), (NodeExistsError, "a", "stray"),
             (NodeTypeError, "g", "a/under"), (MetadataError, "g", "g/inside"),
             (MetadataError, "g", "g")]
    for error, source, dest in cases:
        with pytest.raises(error):
            root.move(source, dest)
        assert _all_items(store) == before, (source, dest)
    with pytest.raises(kvzarr.errors.ReadOnlyError):
        kvzarr.Group(store, "", root.metadata, read_only=True).move("a", "b")


def test_move_within_one_transaction_is_undone_with_it(store_factory):
    store = store_factory.make()
    if not store.capabilities.transactional:
        pytest.skip("the store has no transactions")
    root = kvzarr.open_group(store)
    root.create_array("a", data=np.arange(10), chunks=(3,))
    before = _all_items(store)
    with pytest.raises(RuntimeError):
        with store.transaction():
            root.move("a", "b")
            raise RuntimeError("abort")
    assert _all_items(store) == before
