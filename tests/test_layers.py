"""Imports only go down the layers (DESIGN.md "Style"): checked on the source with ast."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kvzarr"

# layer -> kvzarr modules it must never import (prefix match on the dotted name)
FORBIDDEN = {
    "kvzarr.stores": ["kvzarr.codecs", "kvzarr.grid", "kvzarr.indexing", "kvzarr.array",
                      "kvzarr.group", "kvzarr.metadata", "kvzarr.chunk_io", "kvzarr.api",
                      "kvzarr.transformers"],
    "kvzarr.transformers": ["kvzarr.codecs", "kvzarr.grid", "kvzarr.indexing", "kvzarr.array",
                            "kvzarr.group", "kvzarr.metadata", "kvzarr.chunk_io", "kvzarr.api"],
    "kvzarr.codecs": ["kvzarr.stores", "kvzarr.transformers", "kvzarr.array", "kvzarr.group",
                      "kvzarr.chunk_io", "kvzarr.api"],
    "kvzarr.indexing": ["kvzarr.codecs", "kvzarr.stores", "kvzarr.array", "kvzarr.metadata",
                        "kvzarr.chunk_io", "kvzarr.api"],
    "kvzarr.grid": ["kvzarr.codecs", "kvzarr.stores", "kvzarr.indexing", "kvzarr.array"],
    "kvzarr.byteranges": ["kvzarr.stores", "kvzarr.codecs", "kvzarr.metadata", "kvzarr.grid",
                          "kvzarr.indexing", "kvzarr.array"],
    "kvzarr.errors": ["kvzarr."],
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
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


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down(path):
    name = module_name(path)
    for layer, banned in FORBIDDEN.items():
        if name == layer or name.startswith(layer + "."):
            for target in imported_modules(path):
                for prefix in banned:
                    assert not (target == prefix.rstrip(".") or target.startswith(prefix)), (
                        f"{name} imports {target}, above its layer")


def test_the_checker_sees_imports():
    # guard against a checker that passes because it finds nothing
    found = imported_modules(PACKAGE / "chunk_io.py")
    assert "kvzarr.stores.base" in found and "kvzarr.codecs.pipeline" in found
