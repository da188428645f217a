"""The checksum transformer against a plain model (a dict of bytes), on every backend:
random values, block sizes, writes (whole, partial, erasures) and byte requests. Every
read answers what the model says, nothing raises (no false positive), and a scrub finds
every value good."""

from __future__ import annotations

from itertools import count

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvzarr.stores.byteranges import (OffsetRequest, RangeRequest, SuffixRequest,
                                      apply_byte_request)
from kvzarr.transformers import Checksum, build_stack

from .conftest import StoreFactory

_RUNS = count()
KEYS = ["a", "b/c", "b/d", "e/f/g"]

values = st.binary(max_size=1500)
offsets = st.integers(0, 1600)
requests = st.one_of(
    st.none(),
    st.tuples(offsets, st.integers(0, 400)).map(lambda t: RangeRequest(t[0], t[0] + t[1])),
    offsets.map(OffsetRequest),
    st.integers(0, 1700).map(SuffixRequest))
operations = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEYS), values),
    st.tuples(st.just("set_many"), st.lists(st.tuples(st.sampled_from(KEYS), values),
                                            max_size=3)),
    st.tuples(st.just("partial"), st.lists(st.tuples(st.sampled_from(KEYS), offsets,
                                                     st.binary(max_size=300)), max_size=3)),
    st.tuples(st.just("erase"), st.sampled_from(KEYS)),
    st.tuples(st.just("erase_prefix"), st.sampled_from(["b/", "e/", ""])),
)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(block_size=st.sampled_from([64, 128, 1024, 65536]),
       ops=st.lists(operations, min_size=1, max_size=8),
       reads=st.lists(st.tuples(st.sampled_from(KEYS), requests), max_size=8))
def test_the_stack_behaves_like_a_dict(store_factory: StoreFactory, block_size, ops, reads):
    if not hasattr(store_factory, "shared"):
        store_factory.shared = store_factory.make()
    raw = store_factory.shared
    run = f"r{next(_RUNS)}/"
    stack = build_stack(raw, [Checksum(block_size=block_size)])
    model: dict[str, bytes] = {}
    for op in ops:
        if op[0] == "set":
            stack.set(run + op[1], op[2])
            model[op[1]] = op[2]
        elif op[0] == "set_many":
            stack.set_many([(run + k, v) for k, v in op[1]])
            model.update(op[1])
        elif op[0] == "partial":
            if not stack.capabilities.partial_writes:
                continue
            stack.set_partial_values([(run + k, o, v) for k, o, v in op[1]])
            for k, o, v in op[1]:
                old = bytearray(model.get(k, b""))
                old.extend(bytes(max(0, o - len(old))))
                old[o:o + len(v)] = v
                model[k] = bytes(old)
        elif op[0] == "erase":
            stack.erase(run + op[1])
            model.pop(op[1], None)
        else:
            stack.erase_prefix(run + op[1])
            for k in [k for k in model if k.startswith(op[1])]:
                del model[k]
    assert stack.get_many([run + k for k in KEYS]) == [model.get(k) for k in KEYS]
    got = stack.get_partial_values([(run + k, r) for k, r in reads])
    assert got == [None if k not in model else apply_byte_request(model[k], r)
                   for k, r in reads]
    assert list(stack.list_prefix(run)) == sorted(run + k for k in model)
    report = stack.verify(run)
    assert report.findings == [] and report.values == len(model)
    assert stack.stats()["mismatches"] == 0
