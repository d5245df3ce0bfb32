"""Imports flow one way, down this order of layers (each may import its own and the ones
before it, never one after it):

1. base: `types`, `errors`, `facts`, `limits`, `values`, `syntax`, `scopes`, `language`,
   `context`, `tracing`, `events`, `clock`: the shared vocabulary, importing nothing else
   of codemode;
2. capabilities: registration, names, type notation, schemas, search;
3. binding: keyword arguments -> handler arguments, and `preflight`, which checks a
   program's calls against the same signatures before it runs;
4. authz: the `Authorizer` port and the Cedar and Rego policies; above capabilities and
   binding, not below them as the style guide first drew it, because a policy is built
   from the capabilities it decides (their schemas, a snapshot) and names the closest
   action with binding's `closest_name`;
5. continuations: a program's life beyond one execute (the sealed state, the replay
   guards, the resume protocol), with approvals, its first user: `approvals` (the public
   front door) and `questions` (a call's arguments as the person asked reads them);
   below the runtime, which uses it to pause and restore, and which it knows only
   through a protocol that `CodeMode` gives it;
6. runtime: sandboxed execution;
7. sources: where capabilities come from (the host's functions, upstream MCP servers,
   REST APIs), one shape, still core (they serve nothing);
8. app: `CodeMode` and the `codemode` package, with the parts it delegates to (`options`,
   `discovery`, `engine_slot`, `programs`, `running`, `sessions`, `shaping`, `sourcing`,
   `tasks`), `payloads` (the one structured form every adapter renders) and `testing`
   (helpers for hosts' tests);
9. http: the security layer every HTTP route shares, and the uvicorn settings: above the
   whole core, so no core module imports HTTP serving at any level;
10. adapters: `mcp`, `web` and the `demo` host, peers that share only what lies below;
11. serving: `ServeConfig` and the stdio, HTTP and reloading servers, and `loading`, which
    turns what a command line names (an app, an `mcpServers` file, policy files) into
    the values serving takes;
12. cli: command-line parsing and printing, and `__main__`.

There are no exceptions: an import inside a function counts as one at the top of the
module. The SDK's gaps are pinned in modules that import nothing of codemode
(`codemode.mcp.compat` for the adapter, `codemode.mcp.taskwire` for the tasks extension
it does not speak yet, `codemode.sources.mcp.compat` for the upstream client). The demo host uses only the public API, as a real host would.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import codemode

SRC = Path(codemode.__file__).parent
PACKAGE = "codemode"


@dataclass(frozen=True)
class Layer:
    name: str
    members: tuple[str, ...]
    """Modules or packages (a package with every module under it); `codemode` itself is
    only the package's `__init__`."""
    peers: bool = False
    """Whether the members are peers that must not import one another."""


LAYERS = (
    Layer(
        "base",
        (
            "codemode.types",
            "codemode.clock",
            "codemode.errors",
            "codemode.facts",
            "codemode.reports",
            "codemode.limits",
            "codemode.values",
            "codemode.syntax",
            "codemode.scopes",
            "codemode.inert",
            "codemode.language",
            "codemode.context",
            "codemode.tracing",
            "codemode.events",
        ),
    ),
    Layer("capabilities", ("codemode.capabilities",)),
    Layer("binding", ("codemode.binding", "codemode.preflight")),
    Layer("authz", ("codemode.authz",)),
    Layer(
        "continuations",
        ("codemode.continuations", "codemode.approvals", "codemode.questions"),
    ),
    Layer("runtime", ("codemode.runtime",)),
    Layer("sources", ("codemode.sources",)),
    Layer(
        "app",
        (
            PACKAGE,
            "codemode.app",
            "codemode.options",
            "codemode.discovery",
            "codemode.engine_slot",
            "codemode.running",
            "codemode.sessions",
            "codemode.tasks",
            "codemode.shaping",
            "codemode.sourcing",
            "codemode.payloads",
            "codemode.programs",
            "codemode.composition",
            "codemode.keeping",
            "codemode.saving",
            "codemode.testing",
        ),
    ),
    Layer("http", ("codemode.http",)),
    Layer("adapters", ("codemode.mcp", "codemode.web", "codemode.demo"), peers=True),
    Layer("serving", ("codemode.serving", "codemode.loading")),
    Layer("cli", ("codemode.cli", "codemode.__main__")),
)


FREESTANDING = frozenset(
    {"codemode.mcp.compat", "codemode.mcp.taskwire", "codemode.sources.mcp.compat"}
)
"""Modules that import nothing of codemode: each SDK gap is pinned against the SDK alone."""
DEMO = "codemode.demo"
PUBLIC = frozenset(
    {
        "codemode",
        "codemode.approvals",
        "codemode.authz",
        "codemode.errors",
        "codemode.events",
        "codemode.sources",
        "codemode.testing",
    }
)


def module_names() -> dict[str, Path]:
    """Every module under src/codemode by its dotted name."""
    names = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def member(module: str) -> tuple[int, Layer, str] | None:
    """The position of a module's layer in `LAYERS`, the layer, and the member it is."""
    for rank, layer in enumerate(LAYERS):
        for one in layer.members:
            if module == one or (one != PACKAGE and within(module, one)):
                return rank, layer, one
    return None


@dataclass(frozen=True)
class Import:
    line: int
    function: str
    """Dotted name of the enclosing function ("CodeMode.add_source"), or "" at module
    level."""
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
        modules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in self.known]
        if len(modules) < len(node.names):  # a name defined by `base` itself, not a module
            self._add(node, base)
        for target in modules:
            self._add(node, target)


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
    own = member(module)
    assert own is not None, f"{module} belongs to no layer"
    rank, layer, unit = own
    problems = []
    for found in imports(module, source, known, is_package):
        target, where = found.target, f"{module}:{found.line}"
        if not within(target, PACKAGE):
            continue
        if module in FREESTANDING:
            problems.append(f"{where}: {module} imports nothing of codemode, not {target}")
            continue
        if unit != PACKAGE and within(target, unit):
            continue
        theirs = member(target)
        if theirs is None:
            problems.append(f"{where}: {target} belongs to no layer")
        elif within(module, DEMO) and not (target in PUBLIC or within(target, DEMO)):
            problems.append(f"{where}: the demo imports the non-public {target}")
        elif theirs[0] > rank:
            problems.append(
                f"{where}: the {layer.name} layer imports {target}, of the {theirs[1].name} "
                "layer above it"
            )
        elif theirs[1] is layer and layer.peers and theirs[2] != unit:
            problems.append(f"{where}: {unit} and {theirs[2]} are peers; they share lower layers")
    return problems


KNOWN = frozenset(module_names())


def test_every_module_belongs_to_a_layer() -> None:
    assert [name for name in module_names() if member(name) is None] == []


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
            "codemode.runtime.engine:3: the runtime layer imports codemode.mcp, of the "
            "adapters layer above it"
        ]

    def test_flags_relative_and_submodule_spellings(self) -> None:
        source = "from ..web import routes\nfrom codemode import cli\nimport codemode.mcp.tools\n"
        assert wrong_way("codemode.runtime.engine", source, KNOWN) == [
            "codemode.runtime.engine:1: the runtime layer imports codemode.web.routes, of the "
            "adapters layer above it",
            "codemode.runtime.engine:2: the runtime layer imports codemode.cli, of the cli "
            "layer above it",
            "codemode.runtime.engine:3: the runtime layer imports codemode.mcp.tools, of the "
            "adapters layer above it",
        ]

    def test_a_submodule_taken_from_the_package_is_that_module(self) -> None:
        """`from codemode import syntax` imports the base module; `from codemode import
        CodeMode` imports the package, which stands with the app."""
        source = "from codemode import syntax\nfrom codemode import CodeMode, syntax\n"
        assert wrong_way("codemode.capabilities.registry", source, KNOWN) == [
            "codemode.capabilities.registry:2: the capabilities layer imports codemode, of "
            "the app layer above it"
        ]

    def test_flags_each_step_up_the_order(self) -> None:
        """A layer may not use one after it: the binding the authorizers, a source the
        HTTP layer, an adapter the serving module, serving the command line."""
        cases = {
            "codemode.binding": "from codemode.authz import Authorizer\n",
            "codemode.sources.mcp.tools": "from codemode.http import is_loopback\n",
            "codemode.mcp.server": "from codemode.serving import ServeConfig\n",
            "codemode.serving": "from codemode.cli import load_app\n",
        }
        assert [wrong_way(module, source, KNOWN) for module, source in cases.items()] == [
            ["codemode.binding:1: the binding layer imports codemode.authz, of the authz "
             "layer above it"],
            ["codemode.sources.mcp.tools:1: the sources layer imports codemode.http, of the "
             "http layer above it"],
            ["codemode.mcp.server:1: the adapters layer imports codemode.serving, of the "
             "serving layer above it"],
            ["codemode.serving:1: the serving layer imports codemode.cli, of the cli layer "
             "above it"],
        ]  # fmt: skip

    def test_flags_serving_imported_by_the_core_even_inside_a_function(self) -> None:
        """Serving imports the app, never the reverse: `serving.run` and
        `serving.http_app` are how Python serves an app, not methods of `CodeMode`."""
        source = (
            "class CodeMode:\n"
            "    def run(self):\n"
            "        from codemode.serving import run\n"
            "    def http_app(self):\n"
            "        from codemode.serving import http_app\n"
            "from codemode.serving import http_app\n"
        )
        above = ", of the serving layer above it"
        assert wrong_way("codemode.app", source, KNOWN) == [
            f"codemode.app:{line}: the app layer imports codemode.serving{above}"
            for line in (3, 5, 6)
        ]

    def test_a_source_may_not_use_the_adapters_compatibility_module(self) -> None:
        """The upstream client has gaps of its own (`codemode.sources.mcp.compat`); the
        adapter's module stays above it, and both import nothing of codemode."""
        source = "from codemode.mcp.compat import patch\nfrom codemode.mcp import server\n"
        assert wrong_way("codemode.sources.mcp.upstream", source, KNOWN) == [
            "codemode.sources.mcp.upstream:1: the sources layer imports codemode.mcp.compat, "
            "of the adapters layer above it",
            "codemode.sources.mcp.upstream:2: the sources layer imports codemode.mcp.server, "
            "of the adapters layer above it",
        ]
        assert wrong_way("codemode.mcp.compat", "from codemode.errors import X\n", KNOWN) == [
            "codemode.mcp.compat:1: codemode.mcp.compat imports nothing of codemode, not "
            "codemode.errors"
        ]
        assert wrong_way(
            "codemode.sources.mcp.compat", "from codemode.errors import X\n", KNOWN
        ) == [
            "codemode.sources.mcp.compat:1: codemode.sources.mcp.compat imports nothing of "
            "codemode, not codemode.errors"
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
            "codemode.web.routes:1: codemode.web and codemode.mcp are peers; they share lower "
            "layers"
        ]
