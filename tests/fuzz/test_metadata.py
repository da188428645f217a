"""Fuzzing metadata: mutated ``zarr.json`` documents read through the public API on every
store, and the named regression tests of issue 13's metadata bugs.

A mutation starts from a valid document kvzarr wrote (regular, rectilinear, sharded and
string arrays; a group) and either changes its structure (a member replaced by a value of
the wrong type, a huge number, deep nesting; a member deleted or added) or its bytes
(truncated, bytes flipped or inserted, random bytes). Opening and reading the node must
then give a node or a kvzarr.errors exception, within a time bound, never anything else.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvzarr
from kvzarr.array import Array
from kvzarr.errors import KvzarrError, MetadataError
from kvzarr.grid import MAX_INDEX, VaryingDimension
from kvzarr.group import Group
from kvzarr.metadata.v3 import MAX_NDIM

from tests.stores.conftest import store_factory  # noqa: F401 (every store backend)

from .guard import bounded_time, only_kvzarr_errors
from .settings import fuzz_settings

DEEP = "\x00deep\x00"   # placeholder for a nesting too deep for json.dumps to write


def _base_documents() -> dict[str, dict]:
    store = kvzarr.MemoryStore()
    kvzarr.create_array(store, name="regular", shape=(4, 6), chunks=(2, 3), dtype="float32",
                        compressors=[{"name": "blosc", "configuration": {"cname": "zstd"}}],
                        attributes={"a": [1, {"b": 2}]})
    kvzarr.create_array(store, name="rect", shape=(10, 4), chunks=[[3, 3, 4], [2, 2]],
                        dtype="int16")
    kvzarr.create_array(store, name="sharded", shape=(8, 8), chunks=(2, 2), shards=(4, 4),
                        dtype="uint8", compressors=[{"name": "gzip",
                                                     "configuration": {"level": 1}}])
    kvzarr.create_array(store, name="text", shape=(3,), chunks=(2,), dtype=str)
    kvzarr.create_group(store, path="group", attributes={"x": {"y": [1, 2, None]}})
    docs = {name: json.loads(store.get(f"{name}/zarr.json"))
            for name in ("regular", "rect", "sharded", "text", "group")}
    # a run-length rectilinear dimension, as other writers write it
    docs["rect"]["chunk_grid"]["configuration"]["chunk_shapes"][1] = [[2, 2]]
    return docs


BASE = _base_documents()

_NUMBERS = st.sampled_from([0, -1, 1, 2**31, 2**32, 2**53 + 1, MAX_INDEX, 2**63, 2**64,
                            10**18, 10**100, 0.5, -0.0, float("inf"), float("nan")])
_LEAVES = st.one_of(_NUMBERS, st.integers(), st.floats(), st.booleans(), st.none(),
                    st.text(max_size=8), st.sampled_from([
                        "", "bytes", "regular", "rectilinear", "inline", "end", "start",
                        "little", "big", "\ud800", DEEP, "gzip", "zstd", "blosc", "crc32c",
                        "transpose", "sharding_indexed", "vlen-utf8", "vlen-bytes",
                        "numcodecs.delta", "numcodecs.zlib", "numcodecs.fixedscaleoffset",
                        "numcodecs.packbits", "numcodecs.shuffle", "int8", "float64",
                        "string", "bool", "v2", "default", "/", ".", "r8", "r24",
                        "r99999999999999999", "r" + "9" * 5000]))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["name", "configuration", "chunk_shape", "codecs",
                                     "must_understand", "kind", "x"]), inner, max_size=3)),
    max_leaves=8)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutate(doc, path, op, value):
    doc = json.loads(json.dumps(doc))
    if not path:
        return value if op == "replace" else doc
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if op == "replace":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif op == "add" and isinstance(parent, dict):
        parent[f"extra_{len(parent)}"] = value
    elif op == "add":
        parent.append(value)
    elif op == "wrap":
        parent[last] = [parent[last]]
    return doc


def _dumps(doc, depth: int) -> bytes:
    text = json.dumps(doc, ensure_ascii=False)
    deep = "[" * depth + "]" * depth
    return text.replace(json.dumps(DEEP), deep).encode("utf-8", "surrogatepass")


@st.composite
def documents(draw, names):
    """A mutated zarr.json: (node name, bytes)."""
    name = draw(st.sampled_from(names))
    doc = BASE[name]
    kind = draw(st.sampled_from(["structure", "structure", "structure", "bytes"]))
    if kind == "structure":
        paths = list(_paths(doc))
        for _ in range(draw(st.integers(1, 3))):
            path = draw(st.sampled_from(paths))
            op = draw(st.sampled_from(["replace", "replace", "delete", "add", "wrap"]))
            doc = _mutate(doc, path, op, draw(_VALUES))
            paths = list(_paths(doc))
        depth = draw(st.sampled_from([1, 50, 5000, 200_000]))
        return name, _dumps(doc, depth)
    data = bytearray(json.dumps(doc).encode())
    how = draw(st.sampled_from(["truncate", "flip", "insert", "random"]))
    if how == "truncate":
        del data[draw(st.integers(0, len(data) - 1)):]
    elif how == "flip":
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
    elif how == "insert":
        i = draw(st.integers(0, len(data)))
        data[i:i] = draw(st.binary(min_size=1, max_size=8))
    else:
        data = bytearray(draw(st.binary(max_size=64)))
    return name, bytes(data)


def _exercise(store, path: str) -> None:
    """What a reader does with a node: open it, look at it, read a little of it."""
    node = kvzarr.open(store, path=path, mode="r")
    dict(node.attrs)
    if isinstance(node, Array):
        node.shape, node.dtype, node.fill_value, node.nchunks
        if node.size:
            node[(0,) * node.ndim]
            node[tuple(slice(0, 3) for _ in range(node.ndim))]
        if node.size * node.dtype.itemsize <= 1 << 20:
            node[...]
    elif isinstance(node, Group):
        list(node.members(max_depth=None))


@fuzz_settings(60)
@given(data=st.data())
def test_mutated_array_metadata_gives_a_node_or_a_kvzarr_error(store_factory, data):
    store = _store_with_chunks(store_factory)
    name, doc = data.draw(documents(["regular", "rect", "sharded", "text"]))
    store.set(f"{name}/zarr.json", doc)
    only_kvzarr_errors(_exercise, store, name)


@fuzz_settings(30)
@given(data=st.data())
def test_mutated_group_metadata_gives_a_node_or_a_kvzarr_error(store_factory, data):
    store = _store_with_chunks(store_factory)
    name, doc = data.draw(documents(["group"]))
    store.set(f"{name}/zarr.json", doc)
    only_kvzarr_errors(_exercise, store, name)


def _store_with_chunks(store_factory):
    """One store per test (hypothesis calls the test once per input with the same
    factory): the base nodes with their chunks written, built on the first input."""
    store = getattr(store_factory, "fuzz_store", None)
    if store is None:
        store = store_factory.make()
        for name, doc in BASE.items():
            store.set(f"{name}/zarr.json", json.dumps(doc).encode())
        for name in ("regular", "rect", "sharded", "text"):
            a = kvzarr.open_array(store, path=name)
            a[...] = (np.arange(math.prod(a.shape)).reshape(a.shape).astype(str)
                      if name == "text" else np.arange(math.prod(a.shape)).reshape(a.shape))
        store_factory.fuzz_store = store
    return store


# --- named regression tests (issue 13) ------------------------------------------------

def _array_doc(**changes) -> bytes:
    doc = json.loads(json.dumps(BASE["regular"]))
    doc.update(changes)
    return json.dumps(doc).encode()


def _rect_doc(shape, chunk_shapes) -> bytes:
    doc = json.loads(json.dumps(BASE["rect"]))
    doc["shape"] = shape
    doc["chunk_grid"]["configuration"]["chunk_shapes"] = chunk_shapes
    doc["codecs"] = [{"name": "bytes", "configuration": {"endian": "little"}}]
    return json.dumps(doc).encode()


def test_rectilinear_run_of_2_pow_32_chunks_is_not_expanded():
    """``[[1, 2**32]]`` was expanded into a list of 2**32 integers (MemoryError). It is
    one run: the array opens and reads at once, in a few MB."""
    store = kvzarr.MemoryStore()
    store.set("a/zarr.json", _rect_doc([2**32, 4], [[[1, 2**32]], [[2, 2]]]))
    with bounded_time(10):
        a = kvzarr.open_array(store, path="a")
        assert a.cdata_shape == (2**32, 2)
        np.testing.assert_array_equal(a[2**32 - 2:, :], np.zeros((2, 4), dtype="int16"))
        a[2**32 - 1, 1] = 7
        assert a[2**32 - 1, 1] == 7
        assert store.get("a/c/4294967295/0") is not None
        assert a.oindex[[0, 2**31, 2**32 - 1], 1].tolist() == [0, 0, 7]
    doc = json.loads(a.metadata.to_bytes())
    assert doc["chunk_grid"]["configuration"]["chunk_shapes"] == [[[1, 2**32]], [[2, 2]]]


def test_rectilinear_runs_answer_like_expanded_edges():
    runs = [(3, 2), (1, 1), (5, 3), (2, 1)]
    edges = [e for e, n in runs for _ in range(n)]
    lazy = VaryingDimension.from_runs(runs, 20)
    plain = VaryingDimension(edges, 20)
    assert lazy == plain and lazy.edges == tuple(edges)
    cum = np.cumsum(edges)
    for idx in range(sum(edges)):
        assert lazy.index_to_chunk(idx) == int(np.searchsorted(cum, idx, side="right"))
    for ix in range(lazy.nchunks):
        assert lazy.chunk_offset(ix) == (int(cum[ix - 1]) if ix else 0)
        assert lazy.chunk_size(ix) == edges[ix]
    ixs = np.arange(lazy.nchunks)
    assert lazy.offsets(ixs).tolist() == [lazy.chunk_offset(int(i)) for i in ixs]
    pts = np.arange(20)
    assert lazy.indices_to_chunks(pts).tolist() == [lazy.index_to_chunk(int(i)) for i in pts]
    assert lazy.nchunks == int(np.searchsorted(cum, 20, side="left")) + 1


@pytest.mark.parametrize("chunk_shapes", [
    [[[1, 2**63]], [[2, 2]]],          # count 2**63
    [[[2**63, 1]], [[2, 2]]],          # edge 2**63
    [[[2**62, 2]], [[2, 2]]],          # edges summing to 2**63
    [[2**64], [[2, 2]]],               # a plain edge past uint64
])
def test_rectilinear_edges_or_counts_past_2_pow_63_are_a_metadata_error(chunk_shapes):
    """Edges or counts >= 2**63 raised OverflowError (numpy int64)."""
    store = kvzarr.MemoryStore()
    store.set("a/zarr.json", _rect_doc([10, 4], chunk_shapes))
    with pytest.raises(MetadataError):
        kvzarr.open_array(store, path="a")


@pytest.mark.parametrize("shape, chunk_shape", [
    ([2**63, 4], [1, 2]), ([4, 6], [2**63, 3]), ([4, 6], [2**64, 3]),
    ([2**62, 2**62], [2**62, 2**62]),    # a chunk numpy cannot hold
])
def test_regular_extents_or_chunks_past_what_numpy_can_index_are_a_metadata_error(
        shape, chunk_shape):
    store = kvzarr.MemoryStore()
    doc = json.loads(_array_doc(shape=shape))
    doc["chunk_grid"]["configuration"]["chunk_shape"] = chunk_shape
    store.set("a/zarr.json", json.dumps(doc).encode())
    with pytest.raises(MetadataError):
        kvzarr.open_array(store, path="a")


def test_array_of_more_dimensions_than_numpy_allows_is_refused_at_creation_and_parse():
    """65 dimensions (numpy 2's limit is 64) were created and could not be read."""
    store = kvzarr.MemoryStore()
    ndim = MAX_NDIM + 1
    with pytest.raises(MetadataError) as info:
        kvzarr.create_array(store, name="a", shape=(1,) * ndim, chunks=(1,) * ndim,
                            dtype="uint8")
    assert info.value.field == "shape"
    assert store.get("a/zarr.json") is None
    doc = json.loads(_array_doc(shape=[1] * ndim))
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [1] * ndim
    store.set("a/zarr.json", json.dumps(doc).encode())
    with pytest.raises(MetadataError):
        kvzarr.open_array(store, path="a")
    # the limit itself works end to end, plain and sharded (whose shards are viewed with
    # twice as many axes where numpy allows it, else inner chunk by inner chunk)
    a = kvzarr.create_array(store, name="b", shape=(2,) * MAX_NDIM, chunks=(1,) * MAX_NDIM,
                            dtype="uint8", fill_value=3)
    assert a[(0,) * MAX_NDIM] == 3
    a[(1,) * MAX_NDIM] = 9
    a[(slice(0, 1),) * MAX_NDIM] = 4
    assert a[(1,) * MAX_NDIM] == 9 and a[(0,) * MAX_NDIM] == 4
    # a shard's index has one dimension more than the shard
    with pytest.raises(MetadataError):
        kvzarr.create_array(store, name="s", shape=(2,) * MAX_NDIM, chunks=(1,) * MAX_NDIM,
                            shards=(2,) + (1,) * (MAX_NDIM - 1), dtype="uint8")
    nd = MAX_NDIM - 1
    s = kvzarr.create_array(store, name="s", shape=(2,) * nd, chunks=(1,) * nd,
                            shards=(2,) + (1,) * (nd - 1), dtype="uint8")
    s[(slice(None),) + (0,) * (nd - 1)] = [5, 6]
    assert s[(slice(None),) + (0,) * (nd - 1)].tolist() == [5, 6]
    assert s[(1,) + (0,) * (nd - 1)] == 6


@pytest.mark.parametrize("where", ["attributes", "codec", "top"])
def test_deeply_nested_zarr_json_is_a_metadata_error(where):
    """Nesting past the recursion limit raised RecursionError."""
    store = kvzarr.MemoryStore()
    depth = 100_000
    deep = "[" * depth + "]" * depth
    if where == "attributes":
        text = _array_doc(attributes=DEEP)
    elif where == "codec":
        text = _array_doc(codecs=[{"name": "bytes", "configuration": DEEP}])
    else:
        text = json.dumps(DEEP).encode()
    store.set("a/zarr.json", text.replace(json.dumps(DEEP).encode(), deep.encode()))
    with pytest.raises(MetadataError):
        kvzarr.open(store, path="a")


def _nested_sharding_doc(depth: int) -> bytes:
    codec = '{"name": "bytes", "configuration": {"endian": "little"}}'
    for _ in range(depth):
        codec = ('{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 3], '
                 '"codecs": [' + codec + '], "index_codecs": [{"name": "bytes", '
                 '"configuration": {"endian": "little"}}]}}')
    doc = _array_doc(codecs=DEEP, data_type="uint8", fill_value=0)
    doc = json.loads(doc)
    doc["shape"] = [4, 6]
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [2, 3]
    return json.dumps(doc).encode().replace(json.dumps(DEEP).encode(),
                                            b"[" + codec.encode() + b"]")


def test_nested_sharding_codecs_cost_work_in_proportion_to_their_depth():
    """Each sharding codec validated its inner pipeline twice (once evolving it, once
    validating the result), so opening an array of 60 nested shards took 2**60 steps."""
    store = kvzarr.MemoryStore()
    store.set("a/zarr.json", _nested_sharding_doc(60))
    with bounded_time(10):
        a = kvzarr.open_array(store, path="a")
        a[1, 2] = 7
        assert a[1, 2] == 7 and a[0, 0] == 0


@pytest.mark.parametrize("depth", [200, 300, 330, 400, 2000])
def test_nested_sharding_codecs_at_any_depth_open_or_give_a_metadata_error(depth):
    """Deeper than the interpreter's recursion limit allows (in the JSON parser or in
    parsing the codecs), a MetadataError; never a RecursionError."""
    store = kvzarr.MemoryStore()
    store.set("a/zarr.json", _nested_sharding_doc(depth))
    with bounded_time(20):
        try:
            kvzarr.open_array(store, path="a")
        except MetadataError:
            pass


def test_sharding_inner_chunk_ratio_of_10_pow_17_does_not_enumerate_inner_chunks():
    """A shard of 10**17 x 10 elements in inner chunks of 1 x 10: its layout was built with
    np.ndindex over 10**17 inner chunks (MemoryError). Now it is arithmetic; reading a
    missing shard gives the fill value, and a stored value shorter than its index (16 *
    10**17 bytes) is a CodecError, without allocating the index."""
    store = kvzarr.MemoryStore()
    doc = json.loads(_array_doc(shape=[10**17, 10], data_type="uint8", fill_value=5))
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [10**17, 10]
    doc["codecs"] = [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 10],
        "codecs": [{"name": "bytes"}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}],
        "index_location": "end"}}]
    store.set("a/zarr.json", json.dumps(doc).encode())
    with bounded_time(10):
        a = kvzarr.open_array(store, path="a")
        assert a.chunks == (1, 10)
        np.testing.assert_array_equal(a[:2, :3], np.full((2, 3), 5, dtype="uint8"))
        store.set("a/c/0/0", bytes(100))
        with pytest.raises(KvzarrError):
            a[:2, :3]
    layout = a._sharding._layout((10**17, 10))
    assert layout.nchunks == 10**17
    assert layout.chunk_coords(10**17 - 1) == (10**17 - 1, 0)
    assert layout.flat_id(layout.chunk_coords(123456789)) == 123456789


_EMPTY_READ = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import kvzarr
    store = kvzarr.MemoryStore()
    a = kvzarr.create_array(store, name="a", shape=(0, 2**31), chunks=(1, 1), dtype="uint16")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results = [a[...], a[:, 5:], a.oindex[:, [1, 2]], a[0:0, 0]]
    a[...] = 1
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"shapes": [list(r.shape) for r in results],
                      "growth_kib": after - before}))
""")


def test_reading_an_empty_array_of_shape_0_by_2_pow_31_allocates_nothing():
    """``[0, 2**31]`` in chunks of 1 x 1: the selection over the second dimension was
    projected onto its 2**31 chunks (gigabytes) though the result has no element."""
    out = subprocess.run([sys.executable, "-c", _EMPTY_READ], check=True,
                         capture_output=True, text=True, timeout=120)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["shapes"] == [[0, 2**31], [0, 2**31 - 5], [0, 2], [0]]
    assert got["growth_kib"] < 64 * 1024, got


def test_rectilinear_grid_of_many_dimensions_does_not_enumerate_codec_shapes():
    """40 dimensions of 2 distinct edges each: the codecs were evolved for each of the
    2**40 codec shapes."""
    store = kvzarr.MemoryStore()
    ndim = 40
    doc = json.loads(_rect_doc([3] * ndim, [[1, 2]] * ndim))
    doc["data_type"] = "uint8"
    doc["fill_value"] = 0
    doc["codecs"] = [{"name": "bytes"}]
    store.set("a/zarr.json", json.dumps(doc).encode())
    with bounded_time(10):
        a = kvzarr.open_array(store, path="a")
        assert a[(2,) * ndim] == 0
