"""The shape of the source tree: sizes, import cycles, and a test file for every module.

These hold the structure the next features plug into: a module does one job in under 600
lines, no class grows past about 400, imports never run in a circle (counting those inside
functions), and every module of the runtime, the sources and the MCP adapter has a test
file named after it, so a reader finds a module's tests where the tree says they are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import codemode

SRC = Path(codemode.__file__).parent
TESTS = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400
MIRRORED = ("runtime", "sources", "mcp", "continuations")
"""Packages whose every module has a test file containing the module's name."""


def modules() -> Iterator[tuple[str, Path, bool]]:
    """Every module under src/codemode: its dotted name, its path, whether it is a package."""
    for path in sorted(SRC.rglob("*.py")):
        parts = ["codemode", *path.relative_to(SRC).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        yield ".".join(parts), path, is_package


def imported(name: str, path: Path, is_package: bool, known: frozenset[str]) -> set[str]:
    """The codemode modules `name` imports anywhere in its text, functions included."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    found.add(f"{base}.{alias.name}")
                elif base in known:
                    found.add(base)
    found.discard(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_module_imports_in_a_circle() -> None:
    found = list(modules())
    known = frozenset(name for name, _, _ in found)
    graph = {name: imported(name, path, is_package, known) for name, path, is_package in found}
    assert cycles(graph) == []


def test_the_cycle_finder_sees_a_circle_through_a_function_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_module_over_600_lines_and_no_class_over_400() -> None:
    too_long = []
    for name, path, _ in modules():
        text = path.read_text(encoding="utf-8")
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno is not None
                if (length := node.end_lineno - node.lineno + 1) > MAX_CLASS_LINES:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []


def test_every_mirrored_module_has_a_test_file_named_after_it() -> None:
    """`codemode/runtime/pool.py` has `tests/runtime/test_pool.py` (or `test_pool_*.py`):
    the tests of a module are where the tree says they are."""
    missing = []
    for name, _, is_package in modules():
        parts = name.split(".")
        if len(parts) < 3 or parts[1] not in MIRRORED or is_package:
            continue
        folder = TESTS.joinpath(*parts[1:-1])
        stem = parts[-1].lstrip("_")
        if not [*folder.glob(f"test_{stem}.py"), *folder.glob(f"test_{stem}_*.py")]:
            missing.append(name)
    assert missing == []
