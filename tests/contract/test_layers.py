"""Imports flow one way: the core imports no adapter, adapters share only neutral modules,
and the demo host uses only the public API, as a real host would."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import codemode

SRC = Path(codemode.__file__).parent

CORE_MODULES = frozenset(
    {
        "codemode",
        "codemode.app",
        "codemode.binding",
        "codemode.context",
        "codemode.errors",
        "codemode.events",
        "codemode.language",
        "codemode.limits",
        "codemode.payloads",
        "codemode.preflight",
        "codemode.syntax",
        "codemode.testing",
        "codemode.tracing",
        "codemode.types",
        "codemode.values",
    }
)
CORE_PACKAGES = ("codemode.authz", "codemode.capabilities", "codemode.http", "codemode.runtime")
ADAPTERS = ("codemode.mcp", "codemode.web", "codemode.gateway", "codemode.cli")
ENTRY_POINT = "codemode.__main__"
TOP = frozenset({"codemode.cli", ENTRY_POINT})
"""The command line sits above every adapter and may import any of them."""
DEMO = "codemode.demo"
PUBLIC = frozenset(
    {"codemode", "codemode.authz", "codemode.errors", "codemode.events", "codemode.testing"}
)

LAZY_SERVING_IMPORTS = {
    ("codemode.app", "CodeMode.http_app"): frozenset({"codemode.mcp", "codemode.web"}),
    ("codemode.app", "CodeMode.run"): frozenset({"codemode.mcp"}),
    ("codemode.app", "CodeMode.add_mcp_server"): frozenset({"codemode.gateway"}),
}
"""The one documented exception: CodeMode's two serving conveniences and its MCP client
(`add_mcp_server`) import an adapter inside the function, so importing the core never
loads one."""


def module_names() -> dict[str, Path]:
    """Every module under src/codemode by its dotted name."""
    names = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = ["codemode", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer(module: str) -> str | None:
    if module in CORE_MODULES or any(within(module, p) for p in CORE_PACKAGES):
        return "core"
    if module == ENTRY_POINT or any(within(module, a) for a in ADAPTERS):
        return "adapter"
    if within(module, DEMO):
        return "demo"
    return None


@dataclass(frozen=True)
class Import:
    line: int
    function: str
    """Dotted name of the enclosing function ("CodeMode.run"), or "" at module level."""
    target: str


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: frozenset[str]) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.known = known
        self.scope: list[str] = []
        self.found: list[Import] = []

    def _nested(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _nested

    def _add(self, node: ast.stmt, target: str) -> None:
        self.found.append(Import(node.lineno, ".".join(self.scope), target))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")
            parent = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{parent}.{base}" if base else parent
        self._add(node, base)
        for alias in node.names:
            if f"{base}.{alias.name}" in self.known:
                self._add(node, f"{base}.{alias.name}")


def imports(
    module: str, source: str, known: frozenset[str], is_package: bool = False
) -> list[Import]:
    visitor = _Imports(module, is_package, known)
    visitor.visit(ast.parse(source))
    return visitor.found


def wrong_way(
    module: str, source: str, known: frozenset[str], is_package: bool = False
) -> list[str]:
    """Each import of `module` that goes against the layers, as `module:line: why`."""
    kind = layer(module)
    own = next((a for a in ADAPTERS if within(module, a)), None)
    problems = []
    for found in imports(module, source, known, is_package):
        target, where = found.target, f"{module}:{found.line}"
        adapter = next((a for a in ADAPTERS if within(target, a)), None)
        lazy = LAZY_SERVING_IMPORTS.get((module, found.function), frozenset())
        if kind == "core" and adapter is not None and adapter not in lazy:
            problems.append(f"{where}: the core imports the adapter {target}")
        elif kind == "demo" and within(target, "codemode") and not is_public(target):
            problems.append(f"{where}: the demo imports the non-public {target}")
        elif kind == "adapter" and module not in TOP and adapter not in (None, own):
            problems.append(f"{where}: adapters share neutral modules, not {target}")
    return problems


def is_public(target: str) -> bool:
    return target in PUBLIC or within(target, DEMO)


KNOWN = frozenset(module_names())


def test_every_module_belongs_to_a_layer() -> None:
    assert [name for name in module_names() if layer(name) is None] == []


def test_no_import_goes_against_the_layers() -> None:
    problems = []
    for name, path in module_names().items():
        source = path.read_text(encoding="utf-8")
        problems += wrong_way(name, source, KNOWN, path.name == "__init__.py")
    assert problems == []


class TestTheChecker:
    def test_flags_an_adapter_import_at_the_top_of_a_core_module(self) -> None:
        """Adding `from codemode.mcp import x` to the runtime fails the layer test."""
        source = "from __future__ import annotations\n\nfrom codemode.mcp import build_server\n"
        assert wrong_way("codemode.runtime.engine", source, KNOWN) == [
            "codemode.runtime.engine:3: the core imports the adapter codemode.mcp"
        ]

    def test_flags_relative_and_submodule_spellings(self) -> None:
        source = "from ..web import routes\nfrom codemode import cli\nimport codemode.mcp.tools\n"
        assert wrong_way("codemode.runtime.engine", source, KNOWN) == [
            "codemode.runtime.engine:1: the core imports the adapter codemode.web",
            "codemode.runtime.engine:1: the core imports the adapter codemode.web.routes",
            "codemode.runtime.engine:2: the core imports the adapter codemode.cli",
            "codemode.runtime.engine:3: the core imports the adapter codemode.mcp.tools",
        ]

    def test_allows_the_lazy_serving_imports_by_name_only(self) -> None:
        source = (
            "class CodeMode:\n"
            "    def run(self):\n"
            "        from codemode.mcp import serve_stdio\n"
            "    def execute(self):\n"
            "        from codemode.mcp import serve_stdio\n"
            "    def http_app(self):\n"
            "        from codemode.web import web_routes\n"
            "from codemode.mcp import http_app\n"
        )
        assert wrong_way("codemode.app", source, KNOWN) == [
            "codemode.app:5: the core imports the adapter codemode.mcp",
            "codemode.app:8: the core imports the adapter codemode.mcp",
        ]
        assert wrong_way("codemode.runtime.engine", source, KNOWN) == [
            "codemode.runtime.engine:3: the core imports the adapter codemode.mcp",
            "codemode.runtime.engine:5: the core imports the adapter codemode.mcp",
            "codemode.runtime.engine:7: the core imports the adapter codemode.web",
            "codemode.runtime.engine:8: the core imports the adapter codemode.mcp",
        ]

    def test_flags_the_demo_reaching_past_the_public_api(self) -> None:
        source = (
            "from codemode import CodeMode\n"
            "from codemode.authz import AllowAll\n"
            "from codemode.demo.store import Store\n"
            "from codemode.runtime import Engine\n"
        )
        assert wrong_way("codemode.demo.host", source, KNOWN) == [
            "codemode.demo.host:4: the demo imports the non-public codemode.runtime"
        ]

    def test_flags_one_adapter_importing_another(self) -> None:
        assert wrong_way("codemode.web.routes", "from codemode.mcp.tools import ok\n", KNOWN) == [
            "codemode.web.routes:1: adapters share neutral modules, not codemode.mcp.tools"
        ]
