"""Arrays and groups crossing real processes (spawn and fork): a node pickles to where it
lives (store, path, read_only, config) and reads its metadata again on the other side,
so a resize between pickling and unpickling is seen; a node on a MemoryStore refuses
with a clear error."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import kvzarr
from kvzarr.errors import NodeNotFoundError, NodeTypeError, NotPicklableError, ReadOnlyError


def use_array(blob: bytes) -> dict:
    """In the other process: unpickle an array, read it, write into it."""
    a = pickle.loads(blob)
    out = {"shape": a.shape, "data": a[...].tolist(), "read_only": a.read_only,
           "config": a.config, "attrs": dict(a.attrs)}
    try:
        a[0] = -1
        out["wrote"] = True
    except ReadOnlyError:
        out["wrote"] = False
    return out


@pytest.mark.parametrize("name", ["x.lmdb", "x.sqlite"])
def test_array_pickled_before_a_resize_is_unpickled_with_the_new_shape(
        tmp_path, name, other_process):
    a = kvzarr.create_array(tmp_path / name, name="g/a", shape=(5,), chunks=(2,),
                            dtype="i4", fill_value=0, write_empty_chunks=True)
    a[...] = np.arange(5)
    blob = pickle.dumps(a)
    a.resize(7)
    a[5:] = [5, 6]
    a.attrs["units"] = "m"
    got = other_process.submit(use_array, blob).result(60)
    assert got["shape"] == (7,) and got["data"] == list(range(7))
    assert got["attrs"] == {"units": "m"} and got["wrote"] and not got["read_only"]
    assert got["config"] == a.config and got["config"].write_empty_chunks
    assert a[0] == -1                                 # the other process's write landed
    a.close()


def test_read_only_array_stays_read_only_in_another_process(tmp_path, other_process):
    path = tmp_path / "x.sqlite"
    kvzarr.create_array(path, shape=(3,), dtype="u1", fill_value=7).close()
    with kvzarr.open_array(path, mode="r") as ro:
        got = other_process.submit(use_array, pickle.dumps(ro)).result(60)
    assert got["read_only"] and not got["wrote"] and got["data"] == [7, 7, 7]


def grow_group(blob: bytes) -> list[str]:
    g = pickle.loads(blob)
    g.create_group("from_child")
    return sorted(g)


def test_group_pickles_and_works_in_another_process(tmp_path, other_process):
    root = kvzarr.open_group(tmp_path / "x.lmdb")
    root.create_array("a", shape=(2,), dtype="i2")
    got = other_process.submit(grow_group, pickle.dumps(root)).result(60)
    assert got == ["a", "from_child"] and sorted(root) == ["a", "from_child"]
    root.close()


def test_nodes_on_a_memory_store_refuse_to_be_pickled():
    root = kvzarr.open_group("memory://")
    a = root.create_array("a", shape=(2,), dtype="i2")
    for node in (root, a):
        with pytest.raises(NotPicklableError, match="cannot be sent to another process"):
            pickle.dumps(node)


def test_a_node_deleted_or_replaced_before_unpickling_is_reported(tmp_path):
    root = kvzarr.open_group(tmp_path / "x.sqlite")
    a = root.create_array("a", shape=(2,), dtype="i2")
    blob = pickle.dumps(a)
    del root["a"]
    with pytest.raises(NodeNotFoundError):
        pickle.loads(blob)
    root.create_group("a")
    with pytest.raises(NodeTypeError, match="no longer"):
        pickle.loads(blob)
    root.close()


def test_unpickled_nodes_share_one_store_per_process(tmp_path):
    root = kvzarr.open_group(tmp_path / "x.sqlite")
    a = root.create_array("a", shape=(2,), dtype="i2")
    one, two = pickle.loads(pickle.dumps(a)), pickle.loads(pickle.dumps(root))
    assert one.store is two.store and one.store is not root.store
    one.close()                        # an unpickled node does not own the shared store
    assert not two.store.closed
    two.store.close()
    root.close()
