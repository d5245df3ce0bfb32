"""Public signatures name only public types, and packages are entered by their front door.

A host reads a public signature and imports what it names: every class in the annotations
of a public module's names (their parameters, returns, fields and public methods) is
defined in a public module or exported by one. Inside codemode, a module uses another
package only through the names that package's `__init__` exports (`__all__`), or through
a public module, so the modules behind a front door can move without breaking their users.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import codemode
from codemode.runtime.sandbox import MontySandbox
from codemode.testing import Call, Done
from tests.contract.test_public_api import PUBLIC_MODULES as PUBLIC

PUBLIC_MODULES = tuple(sorted(PUBLIC))
"""The modules a host imports from, as tests/contract/test_public_api.py pins them."""

SRC = Path(codemode.__file__).parent

JSON_ALIASES = {"JSONValue": Any, "JSONObject": dict[str, Any]}
"""`codemode.types`' recursive aliases are strings for the type checker; at run time they
stand for what they hold, JSON made of built-in types only."""


def _checking_only_names(module: types.ModuleType) -> dict[str, Any]:
    """The names a module imports under `if TYPE_CHECKING:`, imported for real, so its
    annotations can be resolved."""
    names: dict[str, Any] = {}
    source = inspect.getsource(module)
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                imported = importlib.import_module(statement.module)
                for alias in statement.names:
                    names[alias.asname or alias.name] = getattr(imported, alias.name)
    return names


def _hints(value: Any) -> dict[str, Any]:
    """`value`'s annotations, resolved in its module with its checking-only imports."""
    module = sys.modules[value.__module__]
    namespace = {**vars(module), **_checking_only_names(module), **JSON_ALIASES}
    return typing.get_type_hints(value, globalns=namespace, localns=JSON_ALIASES)


def _classes(annotation: Any) -> Iterator[type]:
    """Every class an annotation names, at any depth (`list[Call] | None` names Call)."""
    if isinstance(annotation, type):
        yield annotation
    origin = typing.get_origin(annotation)
    if isinstance(origin, type):
        yield origin
    for argument in typing.get_args(annotation):
        for one in argument if isinstance(argument, list | tuple) else [argument]:
            yield from _classes(one)


def _annotated(module: types.ModuleType) -> Iterator[tuple[str, Any]]:
    """Each public name of `module` whose annotations a host reads: functions, classes
    (their fields), and the classes' public methods and properties, by dotted name."""
    for name in module.__all__:
        value = getattr(module, name)
        where = f"{module.__name__}.{name}"
        if inspect.isfunction(value):
            yield where, value
        elif inspect.isclass(value) and value.__module__.startswith("codemode"):
            yield where, value
            for attribute, member in vars(value).items():
                if attribute.startswith("_") and attribute != "__init__":
                    continue
                if isinstance(member, property):
                    member = member.fget
                member = getattr(member, "__func__", member)  # a class or static method
                if inspect.isfunction(member):
                    yield f"{where}.{attribute}", member


def private_types(where: str, value: Any, exported: set[int]) -> list[str]:
    """`where (field): private.Class` for each private class `value`'s annotations name."""
    found = []
    for field, annotation in _hints(value).items():
        if field.startswith("_"):  # a private field is no part of the signature
            continue
        for cls in _classes(annotation):
            home = cls.__module__
            private = home.startswith("codemode") and home not in PUBLIC_MODULES
            if private and id(cls) not in exported:
                found.append(f"{where} ({field}): {home}.{cls.__qualname__}")
    return found


def private_types_in_public_signatures() -> list[str]:
    """Each private class a public signature names, with the name that names it."""
    modules = [importlib.import_module(name) for name in PUBLIC_MODULES]
    exported = {id(getattr(module, name)) for module in modules for name in module.__all__}
    found = []
    for module in modules:
        for where, value in _annotated(module):
            found += private_types(where, value, exported)
    return sorted(set(found))


def test_public_signatures_name_only_public_types() -> None:
    assert private_types_in_public_signatures() == []


# -- front doors ---------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    names = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = ["codemode", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


MODULES = _modules()
PACKAGES = frozenset(
    name for name, path in MODULES.items() if path.name == "__init__.py" and name != "codemode"
)
"""codemode's subpackages: each `__init__` is the front door of the modules under it."""

FREESTANDING = frozenset({"codemode.mcp.compat"})
"""Modules that import nothing of codemode, imported by themselves so that a lower layer
can use them without loading their package (tests/contract/test_layers.py)."""

PENDING: frozenset[tuple[str, str]] = frozenset()
"""Imports past a front door in code being moved now, each to be dropped as it lands."""


def _owner(module: str) -> str | None:
    """The package whose front door `module` stands behind, if it is one's submodule."""
    package = module.rpartition(".")[0]
    return package if package in PACKAGES else None


def _imported(module: str, source: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """Each codemode module `module` imports (at any depth, `TYPE_CHECKING` included)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield node.lineno, full if full in MODULES else base


def past_front_doors(module: str, source: str, is_package: bool = False) -> list[str]:
    """Each import of `module` that reaches past another package's front door."""
    problems = []
    for line, target in _imported(module, source, is_package):
        owner = _owner(target)
        if owner is None or target in PUBLIC_MODULES or target in FREESTANDING:
            continue
        if target in PACKAGES:  # a subpackage is entered by its own front door
            continue
        if module == owner or module.startswith(owner + "."):  # its own package
            continue
        if (module, target) in PENDING:
            continue
        problems.append(f"{module}:{line}: imports {target}, not from {owner}")
    return problems


def _sources() -> Iterator[tuple[str, str, bool]]:
    for name, path in MODULES.items():
        yield name, path.read_text(encoding="utf-8"), path.name == "__init__.py"


def test_packages_are_entered_by_their_front_door() -> None:
    problems = [p for found in _sources() for p in past_front_doors(*found)]
    assert problems == []


def test_every_front_door_declares_what_it_exports() -> None:
    """A package's `__init__` lists its exports in a sorted `__all__`, each importable."""
    for name in sorted(PACKAGES):
        package = importlib.import_module(name)
        exported = list(package.__all__)
        assert exported == sorted(exported, key=lambda n: (not n.isupper(), n)), name
        assert all(hasattr(package, one) for one in exported), name


def test_the_pending_imports_are_still_there() -> None:
    """An entry of `PENDING` goes once its import does: the list only shrinks."""
    imports = {
        (name, target)
        for name, source, is_package in _sources()
        for _, target in _imported(name, source, is_package)
    }
    assert sorted(PENDING - imports) == []


class TestTheCheckers:
    def test_a_private_class_in_a_signature_is_named(self) -> None:
        def probe(sandbox: MontySandbox | None, name: str) -> list[int]:
            """A signature naming the private implementation of the sandbox."""
            return []

        assert private_types("probe", probe, set()) == [
            "probe (sandbox): codemode.runtime.sandbox.MontySandbox"
        ]
        assert private_types("probe", probe, {id(MontySandbox)}) == []

    def test_classes_are_found_at_any_depth(self) -> None:
        found = set(_classes(list[tuple[Call, ...]] | dict[str, Done] | None))
        assert {Call, Done} <= found

    def test_flags_a_submodule_of_another_package(self) -> None:
        source = (
            "from codemode.runtime.deadline import Deadline\n"
            "from codemode.runtime import Timer\n"
            "from codemode.capabilities import typehints\n"
            "import codemode.http.server\n"
        )
        assert past_front_doors("codemode.testing", source) == [
            "codemode.testing:1: imports codemode.runtime.deadline, not from codemode.runtime",
            "codemode.testing:3: imports codemode.capabilities.typehints, not from "
            "codemode.capabilities",
            "codemode.testing:4: imports codemode.http.server, not from codemode.http",
        ]

    def test_allows_its_own_package_and_public_modules(self) -> None:
        source = (
            "from codemode.clock import Clock\n"
            "from . import sandbox\n"
            "from codemode.authz.cedar import CedarAuthorizer\n"
            "from codemode.errors import Where\n"
            "from codemode.mcp.compat import patch\n"
        )
        assert past_front_doors("codemode.runtime.engine", source) == []
