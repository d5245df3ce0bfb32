"""No test reaches into what codemode keeps private: tests pin behaviour, not internals.

A test that reads `engine.pool._abandoned` or imports `codemode.x._y` breaks when the
internals move, though nothing a host or a model sees changed, and it passes on code whose
behaviour is wrong if the private state says what it expects. So a test reads only public
names: an attribute access `x._name` (not a dunder) is allowed on `self` and `cls` alone
(a test's own helper class), and no import names an underscored segment of a codemode
module path, or an underscored name from a codemode module.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
OWN = frozenset({"self", "cls"})
PUBLIC_UNDERSCORED = frozenset({"os._exit"})
"""Names the standard library documents as public, underscore and all."""
PENDING: frozenset[str] = frozenset()
"""Test folders another change is cleaning now; empty this once it has landed."""


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def reaches(tree: ast.AST) -> list[tuple[int, str]]:
    """Every reach into a private name in one test module: (line, what)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in OWN:
                continue
            if ast.unparse(node) in PUBLIC_UNDERSCORED:
                continue
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "codemode" and any(private(part) for part in parts):
                    found.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            parts = node.module.split(".")
            if parts[0] != "codemode":
                continue
            names = [alias.name for alias in node.names]
            if any(private(part) for part in parts) or any(private(name) for name in names):
                found.append((node.lineno, f"from {node.module} import {', '.join(names)}"))
    return found


def test_no_test_reads_a_private_attribute_or_imports_a_private_module() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        relative = path.relative_to(TESTS)
        if relative.parts[0] in PENDING:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{relative}:{line}: {what}" for line, what in reaches(tree)]
    assert found == []


def test_the_check_sees_each_kind_of_reach_and_lets_the_rest_be() -> None:
    source = (
        "import codemode.capabilities._plain\n"
        "from codemode._internal import thing\n"
        "from codemode.binding import _explain, bind\n"
        "from pydantic_monty import _binary\n"
        "engine.pool._abandoned\n"
        "self._own\n"
        "cls._registry\n"
        "value.__class__\n"
        "os._exit\n"
    )
    assert reaches(ast.parse(source)) == [
        (1, "import codemode.capabilities._plain"),
        (2, "from codemode._internal import thing"),
        (3, "from codemode.binding import _explain, bind"),
        (5, "engine.pool._abandoned"),
    ]
