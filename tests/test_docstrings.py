"""Every public thing of the public API has a docstring, so the library explains itself.

The public API is what ``kvzarr`` (its ``__all__``), ``kvzarr.stores``,
``kvzarr.transformers`` and ``kvzarr.errors`` export, and the public methods and
properties of the classes among them. The walk starts from the exports, so whatever is
added to them later is held to it too.

A method that overrides a documented one without a docstring of its own is documented
by the one it overrides (the contract is the base's): the walk looks the name up along
the class's whole MRO, mixins included. A class needs a docstring of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import types

import pytest

#: the modules whose exports are the public API
#: kvzarr.zarr_store is kvzarr.ZarrStore's package (lazy and outside ``kvzarr.__all__``,
#: since it imports zarr-python, an optional dependency the tests install)
PUBLIC_MODULES = ["kvzarr", "kvzarr.stores", "kvzarr.transformers", "kvzarr.errors",
                  "kvzarr.zarr_store"]


def _exports(module: types.ModuleType) -> dict[str, object]:
    """What a module exports: its ``__all__`` (resolved, lazy names included), else the
    public classes and functions it defines itself."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and (inspect.isclass(v) or inspect.isfunction(v))
                 and getattr(v, "__module__", None) == module.__name__]
    return {n: getattr(module, n) for n in names}


def _ours(obj: object) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "kvzarr"


def _own_class_doc(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    if doc and dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "("):
        return None          # the signature dataclasses writes when there is no docstring
    return doc.strip() if doc else None


_MEMBER_KINDS = (types.FunctionType, staticmethod, classmethod, property,
                 functools.cached_property)


def _member_doc(member: object) -> str | None:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if isinstance(member, functools.cached_property):
        member = member.func
    doc = getattr(member, "__doc__", None)
    return doc.strip() if doc else None


def _undocumented_members(cls: type) -> list[str]:
    """The public methods and properties of ``cls`` whose effective definition is
    kvzarr's and that no definition along the MRO documents."""
    missing = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        definitions = [(owner, owner.__dict__[name]) for owner in cls.__mro__
                       if name in owner.__dict__]
        if not definitions:
            continue
        owner, first = definitions[0]
        if not isinstance(first, _MEMBER_KINDS) or not _ours(owner):
            continue         # a data attribute, or something inherited from outside
        if not any(_member_doc(d) for _, d in definitions if isinstance(d, _MEMBER_KINDS)):
            missing.append(f"{owner.__module__}.{owner.__qualname__}.{name}")
    return missing


def _walk() -> tuple[list[str], int]:
    """(everything public without a docstring, the number of things checked)."""
    missing: list[str] = []
    seen: set[int] = set()
    checked = 0
    modules = [importlib.import_module(m) for m in PUBLIC_MODULES]
    while modules:
        module = modules.pop(0)
        if id(module) in seen:
            continue
        seen.add(id(module))
        checked += 1
        if not (module.__doc__ or "").strip():
            missing.append(f"module {module.__name__}")
        for name, obj in _exports(module).items():
            if id(obj) in seen:
                continue
            if isinstance(obj, types.ModuleType):
                if _ours(obj) or obj.__name__.startswith("kvzarr"):
                    modules.append(obj)
                continue
            seen.add(id(obj))
            if inspect.isclass(obj) and _ours(obj):
                checked += 1
                if not _own_class_doc(obj):
                    missing.append(f"class {obj.__module__}.{obj.__qualname__}")
                members = _undocumented_members(obj)
                checked += sum(1 for n in dir(obj) if not n.startswith("_"))
                missing.extend(members)
            elif inspect.isfunction(obj) and _ours(obj):
                checked += 1
                if not _member_doc(obj):
                    missing.append(f"function {obj.__module__}.{obj.__qualname__}")
    return sorted(set(missing)), checked


def test_every_public_class_function_and_method_has_a_docstring():
    missing, checked = _walk()
    assert checked > 100, "the walk found almost nothing: are the exports still there?"
    assert not missing, ("public API without a docstring (say what it does and what it "
                         "promises):\n  " + "\n  ".join(missing))


def test_the_walk_finds_a_missing_docstring():
    """The check itself: an undocumented method, an undocumented override of a
    documented mixin method, and an undocumented class are all caught."""

    class Documented:
        """A class."""

        def run(self):
            """Runs."""

    class Mixin:
        def run(self):
            pass

    Mixin.__module__ = Documented.__module__ = "kvzarr.fake"

    class Child(Mixin, Documented):
        """Documented child."""

        def other(self):
            pass

        @property
        def value(self):
            return 1

    Child.__module__ = "kvzarr.fake"
    assert [m.rsplit(".", 2)[-2:] for m in _undocumented_members(Child)] == [
        ["Child", "other"], ["Child", "value"]]

    @dataclasses.dataclass
    class Plain:
        x: int = 0

    assert _own_class_doc(Plain) is None


@pytest.mark.parametrize("module", ["kvzarr", "kvzarr.stores"])
@pytest.mark.parametrize("name", ["SQLStore", "LMDBStore", "ZipStore"])
def test_backends_are_importable_from_kvzarr_and_kvzarr_stores(module, name):
    mod = importlib.import_module(module)
    assert name in mod.__all__
    cls = getattr(mod, name)
    assert cls.__name__ == name and issubclass(cls, mod.Store)
    assert name in dir(mod)


def test_package_ships_py_typed():
    """PEP 561: the marker file exists and pyproject.toml puts it into the wheel."""
    import pathlib
    import tomllib

    import kvzarr

    package = pathlib.Path(kvzarr.__file__).parent
    assert (package / "py.typed").is_file()
    project = package.parent / "pyproject.toml"
    if not project.is_file():
        pytest.skip("not a source checkout (installed from a wheel, which has py.typed)")
    config = tomllib.loads(project.read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["kvzarr"]
