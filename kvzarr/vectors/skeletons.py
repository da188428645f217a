"""Skeletons: trees of nodes stored with ``links_convention``
"implicit_sequential_with_branches", as zarr-vectors 0.9.2's ``write_graph(kind=
"skeleton")`` stores them.

Edges are ``[child, parent]``. The nodes are renumbered depth first from the root (the
first node that is nobody's child), children in the order their edges were given, and
stored like a graph's. An edge is then stored only where reading cannot imply it: a
reader takes each node's parent to be the node read just before it, except at the start
of a fragment, so an edge whose child is read right after its parent, inside one
fragment, is left out. Each object must be one tree: a second root in one object would
read back joined to the node before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import VectorDataError


def depth_first(n: int, edges: np.ndarray) -> np.ndarray:
    """``order[new] = old``: the nodes depth first from the root, children in edge order
    (nodes no edge reaches come last, in their order)."""
    children: dict[int, list[int]] = {}
    if len(edges):
        by_parent = np.argsort(edges[:, 1], kind="stable")
        for child, parent in edges[by_parent].tolist():
            children.setdefault(parent, []).append(child)
    is_child = np.zeros(n, dtype=bool)
    is_child[edges[:, 0]] = True
    roots = np.flatnonzero(~is_child)
    root = int(roots[0]) if len(roots) else 0
    order: list[int] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        stack.extend(c for c in reversed(children.get(node, [])) if c not in seen)
    order += [i for i in range(n) if i not in seen]
    return np.asarray(order, dtype=np.int64)


def check_one_root_per_object(edges: np.ndarray, ids: np.ndarray) -> None:
    has_parent = np.zeros(len(ids), dtype=bool)
    has_parent[edges[:, 0]] = True
    roots = ids[~has_parent]
    values, counts = np.unique(roots, return_counts=True)
    if np.any(counts > 1):
        oid = int(values[counts > 1][0])
        raise VectorDataError(f"a skeleton stores one tree per object, but object {oid} "
                              f"has {int(counts[counts > 1][0])} roots: give each tree its "
                              f"own object id, or write a graph", field="edges")


def reorder(pos: np.ndarray, edges: np.ndarray, ids: np.ndarray,
            attributes: dict[str, Any] | None) -> tuple:
    """Positions, edges, object ids and vertex attributes in depth-first order."""
    order = depth_first(len(pos), edges)
    new = np.empty(len(pos), dtype=np.int64)
    new[order] = np.arange(len(pos))
    attrs = {k: np.asarray(v)[order] for k, v in (attributes or {}).items()} or None
    return pos[order], new[edges] if len(edges) else edges, ids[order], attrs


def stored_edges(edges: np.ndarray, read_index: np.ndarray,
                 fragment_start: np.ndarray) -> np.ndarray:
    """The edges a reader cannot imply (a mask over ``edges``)."""
    if not len(edges):
        return np.zeros(0, dtype=bool)
    child, parent = edges[:, 0], edges[:, 1]
    implied = (read_index[child] == read_index[parent] + 1) & ~fragment_start[child]
    return ~implied


def implied_parents(n: int, starts: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """Each output node's parent (-1 for none): the node before it except at a
    fragment's start, then the stored edges' ``[child, parent]`` over that."""
    parent = np.arange(-1, n - 1, dtype=np.int64)
    if len(starts):
        parent[starts] = -1
    if len(stored):
        parent[stored[:, 0]] = stored[:, 1]
    return parent
