"""Imports only go down the layers, and no modules import each other
in a circle: checked on the source with ast.

The floors, top to bottom: api -> group -> hierarchy -> array -> engine -> codecs ->
metadata documents (v3) / indexing / grid -> transformers -> stores -> runtime / errors.
``kvzarr.metadata.v3`` parses the ``codecs`` member, so the documents sit above the
codecs, while the data types, chunk key encodings and extension names sit below them.
Codecs name byte ranges, which live with the stores (``kvzarr.stores.byteranges``): that
one module is the codecs' only way into the stores package.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kvzarr"

_ABOVE_STORES = ["kvzarr.codecs", "kvzarr.grid", "kvzarr.indexing", "kvzarr.array",
                 "kvzarr.group", "kvzarr.metadata", "kvzarr.engine", "kvzarr.api",
                 "kvzarr.hierarchy", "kvzarr.creation", "kvzarr.node", "kvzarr.cli",
                 "kvzarr.attributes", "kvzarr.compaction", "kvzarr.copying",
                 "kvzarr.array_info", "kvzarr.consolidated", "kvzarr.move",
                 "kvzarr.vectors"]

# layer -> kvzarr modules it must never import (prefix match on the dotted name)
FORBIDDEN = {
    "kvzarr.runtime": ["kvzarr.stores", "kvzarr.transformers", *_ABOVE_STORES],
    "kvzarr.stores": ["kvzarr.transformers", *_ABOVE_STORES],
    # transformers see stores through the interface only, never a backend
    "kvzarr.transformers": [*_ABOVE_STORES, "kvzarr.stores.lmdb", "kvzarr.stores.sql",
                            "kvzarr.stores.zip", "kvzarr.stores.filesystem",
                            "kvzarr.stores.memory", "kvzarr.stores.url"],
    "kvzarr.codecs": ["kvzarr.stores.base", "kvzarr.stores.lmdb", "kvzarr.stores.sql",
                      "kvzarr.stores.zip", "kvzarr.stores.filesystem", "kvzarr.stores.memory",
                      "kvzarr.stores.url", "kvzarr.transformers", "kvzarr.array",
                      "kvzarr.group", "kvzarr.engine", "kvzarr.api", "kvzarr.hierarchy",
                      "kvzarr.metadata.v3", "kvzarr.metadata.v2"],
    # (the chunk engine never touches consolidated metadata: only documents change it)
    "kvzarr.engine": ["kvzarr.array", "kvzarr.group", "kvzarr.api", "kvzarr.hierarchy",
                      "kvzarr.consolidated", "kvzarr.transformers", "kvzarr.stores.lmdb", "kvzarr.stores.sql",
                      "kvzarr.stores.zip", "kvzarr.stores.filesystem",
                      "kvzarr.stores.memory"],
    "kvzarr.indexing": ["kvzarr.codecs", "kvzarr.stores", "kvzarr.array", "kvzarr.metadata",
                        "kvzarr.engine", "kvzarr.api"],
    "kvzarr.grid": ["kvzarr.codecs", "kvzarr.stores", "kvzarr.indexing", "kvzarr.array",
                    "kvzarr.engine"],
    "kvzarr.metadata.dtypes": ["kvzarr.codecs", "kvzarr.stores", "kvzarr.metadata.v3",
                               "kvzarr.metadata.v2"],
    "kvzarr.array": ["kvzarr.group", "kvzarr.api", "kvzarr.hierarchy", "kvzarr.compaction"],
    "kvzarr.compaction": ["kvzarr.cli"],
    # copying moves values between stores: it never decodes them, so no engine or codecs
    "kvzarr.copying": ["kvzarr.cli", "kvzarr.engine", "kvzarr.codecs", "kvzarr.array",
                       "kvzarr.api", "kvzarr.group", "kvzarr.hierarchy"],
    "kvzarr.array_info": ["kvzarr.cli", "kvzarr.api", "kvzarr.group", "kvzarr.hierarchy"],
    "kvzarr.hierarchy": ["kvzarr.group", "kvzarr.api"],
    # consolidated metadata sits just above the documents: every node module calls it
    "kvzarr.consolidated": ["kvzarr.array", "kvzarr.group", "kvzarr.api", "kvzarr.hierarchy",
                            "kvzarr.node", "kvzarr.move", "kvzarr.engine"],
    "kvzarr.group": ["kvzarr.api"],
    # the vector format is built on the public layers; nothing below it knows of it
    "kvzarr.vectors": ["kvzarr.cli"],
    "kvzarr.errors": ["kvzarr."],
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


SOURCES = sorted(PACKAGE.rglob("*.py"))
MODULES = {module_name(p): p for p in SOURCES}


def imported_modules(path: Path) -> set[str]:
    """Every dotted name ``path`` imports, at module level or inside functions (a lazy
    import is still a dependency): ``from X import a`` gives ``X`` and ``X.a``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def module_dependencies(path: Path) -> set[str]:
    """The kvzarr modules ``path`` depends on: each import resolved to the module it
    names (``from X import a`` names the submodule ``X.a`` when there is one, else
    ``X``; ``from X.y import Z`` names ``X.y``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    named = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                named.add(sub if sub in MODULES else target)
    deps = set()
    for target in named:
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != name:
            deps.add(target)
    return deps


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a set of
    modules that import each other in a circle; self-imports count too."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:   # iterative enough for a package of ~100 modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down(path):
    name = module_name(path)
    for layer, banned in FORBIDDEN.items():
        if name == layer or name.startswith(layer + "."):
            for target in imported_modules(path):
                for prefix in banned:
                    assert not (target == prefix.rstrip(".") or target.startswith(prefix)), (
                        f"{name} imports {target}, above its layer")


def test_no_import_cycles():
    graph = {name: module_dependencies(path) for name, path in MODULES.items()}
    assert import_cycles(graph) == []


def test_the_checkers_see_imports_and_cycles():
    # guard against checkers that pass because they find nothing
    found = imported_modules(PACKAGE / "engine" / "chunk_io.py")
    assert "kvzarr.stores.base" in found and "kvzarr.codecs.pipeline" in found
    deps = module_dependencies(PACKAGE / "engine" / "chunk_io.py")
    assert {"kvzarr.engine.plain_chunks", "kvzarr.codecs.pipeline",
            "kvzarr.runtime.workers"} <= deps
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c"], ["e"]]
