"""The soak (benchmarks/soak.py) cannot rot: a few seconds of it find no lost update, and
its checker does catch one that is planted."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import soak


def test_a_short_soak_loses_nothing(tmp_path):
    # two stores keep it to a few seconds: the one with key locks and a transactional one
    # (the lead's long runs cover every store)
    for kind in ("directory", "sqlite"):
        result = soak.soak_store(kind, procs=2, seconds=1.2, check_every=0.4, seed=1,
                                 workdir=str(tmp_path))
        assert not soak.broken(result), soak.format_result(result)
        assert result["operations"] > 20 and result["self_checks"] >= 2, result
        assert result["checker_scans"] >= 1, result


def test_the_checker_finds_a_lost_update(tmp_path):
    """A record claiming values the store does not hold is reported, element by element,
    attribute and node alike: the zeros of a real run mean something."""
    spec = soak.store_spec("lmdb", str(tmp_path))
    soak.setup(spec, 2)
    record = {"elements": {"shared": {"0": soak.SEQ_BASE + 7}, "sharded": {}},
              "tile": None, "whole": None, "attr": soak.SEQ_BASE + 3, "priv": None,
              "live": {"n0": 0}, "gone": []}
    problems = soak.final_check(spec, 2, [{"p": 0, "record": record}])
    assert len(problems) == 3, problems
    assert any("shared[0]" in p for p in problems)
    assert any("attribute p0" in p for p in problems)
    assert any("nodes/p0/n0" in p for p in problems)
    assert not soak.final_check(spec, 2, [{"p": 1, "record": {
        "elements": {"shared": {}, "sharded": {}}, "tile": 0, "whole": 0, "attr": None,
        "priv": np.zeros(16, dtype="int64").tolist(), "live": {}, "gone": ["n9"]}}])


def test_cli_refuses_an_unknown_store():
    with pytest.raises(SystemExit):
        soak.main(["--stores", "nosuch", "--minutes", "0.01"])
