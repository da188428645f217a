"""W4 hierarchy: create 2,000 single-chunk arrays (int32, 16 elements, three attributes)
spread over 20 groups; open each array afresh and read its attributes; list every
group's children (ops/s; every group is listed ``list_passes`` times, as 20 listings
take a few milliseconds on a fast store: too short to time well). Attributes and
listings are checked against what was created.
"""

from __future__ import annotations

from typing import Any

from ..harness import CorrectnessError, Recorder

TITLE = "W4 hierarchy: 2,000 arrays in 20 groups"
DEFAULTS = {"groups": 20, "arrays": 2000, "list_passes": 5}


def scaled(params: dict[str, Any], factor: float) -> dict[str, Any]:
    groups = max(2, int(params["groups"] * min(1.0, factor * 4)))
    return {**params, "groups": groups,
            "arrays": max(groups * 2, int(params["arrays"] * factor))}


def attrs_of(i: int) -> dict[str, Any]:
    return {"units": "K", "index": i, "long_name": f"variable number {i}"}


def run(system: Any, p: dict[str, Any], rec: Recorder, repeat: int) -> None:
    names = ("create arrays", "open + read attributes", "list a group's children")
    units = ("arrays/s", "arrays/s", "groups/s")
    reason = system.lacks("groups")
    if reason:
        for n, u in zip(names, units):
            rec.na(n, u, reason)
        return
    ngroups, narrays = p["groups"], p["arrays"]
    items = [(i % ngroups, i) for i in range(narrays)]
    path = [f"g{g:02d}/a{i:05d}" for g, i in items]
    for r in range(repeat):
        loc = system.location(f"w4-{r}")
        try:
            root = system.h_root(loc)
            groups: dict[int, Any] = {}

            def create(item: tuple[int, int]) -> int:
                g, i = item
                if g not in groups:
                    groups[g] = system.h_group(root, f"g{g:02d}")
                system.h_array(groups[g], f"a{i:05d}", attrs_of(i))
                return i

            made = rec.loop_rate(names[0], units[0], items, create, total=narrays,
                                 tail=lambda: system.finish(loc))
            got = rec.loop_rate(names[1], units[1], made,
                                lambda i: system.h_attrs(loc, path[i]), total=len(made))
            for i, attrs in zip(made, got):
                if attrs != attrs_of(i):
                    raise CorrectnessError(f"attributes of {path[i]}: {attrs!r}")
            listings = sorted(groups) * p.get("list_passes", 1)
            listed = rec.loop_rate(names[2], units[2], listings,
                                   lambda g: system.h_children(loc, f"g{g:02d}"),
                                   total=len(listings))
            for g, children in zip(listings, listed):
                want = sorted(f"a{i:05d}" for gg, i in items[:len(made)] if gg == g)
                if sorted(children) != want:
                    raise CorrectnessError(f"children of g{g:02d}: {len(children)} names, "
                                           f"expected {len(want)}")
        finally:
            system.drop(loc)
