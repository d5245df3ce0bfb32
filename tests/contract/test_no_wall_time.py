"""No test asserts elapsed wall time, and none waits on a wall clock.

A test that reads `time.monotonic()`, `time.time()` or `time.perf_counter()` in an
assertion measures the machine, not the code: it passes on a quiet machine and fails on a
loaded one. The runtime keeps time on an injected clock, so a test moves
`codemode.testing.ManualClock` by hand and asserts what happened at each moment, or asserts
the order of events that proves the same thing; a test that waits for another thread or
process polls with `tests.conftest.eventually`, which counts polls rather than reading a
clock; a test that needs a real upstream's timeout asserts the outcome, not the seconds.

This walks the syntax tree of every Python file under tests/ (the benchmarks, which
measure time on purpose, live outside it) and fails on a clock read in an `assert`, in a
loop's condition or in an `if` inside a loop (a wait loop): directly, or through a name
bound to a value computed from one, or through a helper that returns such a value (of
the same module, or imported from another test module). Reading a clock to stamp a
moment, or to print how long a load test took, is not caught.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).parents[1]
CLOCK_READS = frozenset(
    {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
)

Function = ast.FunctionDef | ast.AsyncFunctionDef

ALLOWED: dict[tuple[str, str], str] = {}
"""(file under tests/, function) -> why a wall clock is the thing that function tests.
Empty: every assertion on time is on the injected clock or on the order of events."""


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    function: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.function}(): {self.what}"


class Clocks:
    """What reads a wall clock in one module: `time.<read>()` (under any name `time` was
    imported as), a read imported by name, and the functions that return such a value
    (this module's, and `elsewhere`: those of the other test modules, by name)."""

    def __init__(self, tree: ast.Module, elsewhere: Mapping[str, set[str]] | None = None) -> None:
        self.modules = {"time"}
        self.names: set[str] = set()
        self.functions: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self.modules |= {a.asname or a.name for a in node.names if a.name == "time"}
            elif isinstance(node, ast.ImportFrom) and node.module == "time":
                self.names |= {a.asname or a.name for a in node.names if a.name in CLOCK_READS}
            elif isinstance(node, ast.ImportFrom) and elsewhere and node.module in elsewhere:
                clocked = elsewhere[node.module or ""]
                self.functions |= {a.asname or a.name for a in node.names if a.name in clocked}
        functions = [n for n in ast.walk(tree) if isinstance(n, Function)]
        changed = True
        while changed:  # a function returning what another clock function returned is one too
            changed = False
            for function in functions:
                if function.name in self.functions:
                    continue
                tainted = self.tainted(function)
                returns = [n.value for n in _own_nodes(function) if isinstance(n, ast.Return)]
                if any(r is not None and self.reads(r, tainted) for r in returns):
                    self.functions.add(function.name)
                    changed = True

    def is_read(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            return func.value.id in self.modules and func.attr in CLOCK_READS
        if isinstance(func, ast.Name):
            return func.id in self.names or func.id in self.functions
        return False

    def reads(self, node: ast.AST, tainted: set[str]) -> bool:
        """Whether `node` reads a clock, or a name whose value came from one."""
        return any(
            self.is_read(n) or (isinstance(n, ast.Name) and n.id in tainted) for n in ast.walk(node)
        )

    def tainted(self, function: Function | ast.Module) -> set[str]:
        """The names `function` (or a module's own code) binds to a value computed from a
        clock read."""
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            for node in _own_nodes(function):
                value: ast.expr | None
                targets: Sequence[ast.expr]
                if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                    value = node.value
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                elif isinstance(node, ast.NamedExpr):
                    value, targets = node.value, [node.target]
                else:
                    continue
                if value is None or not self.reads(value, found):
                    continue
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in found:
                            found.add(name.id)
                            changed = True
        return found


def findings(
    source: str, where: str, elsewhere: Mapping[str, set[str]] | None = None
) -> Iterator[Finding]:
    """Every clock read in an assertion or a wait loop of one module's `source`."""
    tree = ast.parse(source, where)
    clocks = Clocks(tree, elsewhere)
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, Function))]
    for function in scopes:
        tainted = clocks.tainted(function)
        for node in _own_nodes(function):
            if isinstance(node, ast.Assert) and clocks.reads(node.test, tainted):
                what = "an assertion on a wall clock"
            elif isinstance(node, ast.While) and clocks.reads(node.test, tainted):
                what = "a loop that waits on a wall clock"
            elif isinstance(node, ast.While | ast.For | ast.AsyncFor) and any(
                isinstance(inner, ast.If) and clocks.reads(inner.test, tainted)
                for inner in _own_nodes(node)
            ):
                what = "a loop that stops on a wall clock"
            else:
                continue
            name = "<module>" if isinstance(function, ast.Module) else function.name
            yield Finding(where, node.lineno, name, what)


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes under `node`, leaving out the bodies of functions defined inside it (each
    is read on its own, with the names it binds)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, Function | ast.Lambda):
            continue
        yield child
        yield from _own_nodes(child)


@functools.cache
def suite() -> tuple[Finding, ...]:
    """The findings of every module under tests/, a helper of one module (conftest's, say)
    that returns a time counting wherever it is called (read once for the tests below)."""
    sources = {p.relative_to(TESTS).as_posix(): p.read_text() for p in sorted(TESTS.rglob("*.py"))}
    elsewhere = {_dotted(where): Clocks(ast.parse(s)).functions for where, s in sources.items()}
    return tuple(f for where, source in sources.items() for f in findings(source, where, elsewhere))


def _dotted(where: str) -> str:
    """`tests.e2e.conftest` for `e2e/conftest.py`: the name the other modules import."""
    return ".".join(["tests", *where.removesuffix(".py").split("/")]).removesuffix(".__init__")


def test_no_test_asserts_or_waits_on_a_wall_clock() -> None:
    found = [str(f) for f in suite() if (f.path, f.function) not in ALLOWED]
    assert found == [], "\n".join(found)


def test_each_allowed_place_still_reads_a_wall_clock() -> None:
    """An entry of ALLOWED whose function no longer reads a clock is removed, not kept."""
    assert set(ALLOWED) <= {(f.path, f.function) for f in suite()}


def test_the_walk_finds_each_shape_of_a_wall_clock_read() -> None:
    """The shapes this test once found in the suite, each caught; reading a clock to name
    a moment (an event's timestamp, a file's age) is not caught."""
    source = """
import time
from time import perf_counter as pc

def direct():
    started = time.monotonic()
    run()
    assert time.monotonic() - started < 1

def through_names():
    started = pc()
    run()
    elapsed = pc() - started
    assert elapsed < 1

def poll():
    deadline = time.monotonic() + 10
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.05)

def poll_inside():
    deadline = time.monotonic() + 10
    for _ in range(1000):
        if time.monotonic() > deadline:
            break

def measured():
    started = time.monotonic()
    run()
    return time.monotonic() - started, 1

def through_a_function():
    seconds, _ = measured()
    assert seconds < 2

def a_moment_is_fine():
    stamp = {"asked_at": time.time() - 1}
    return stamp

deadline = time.monotonic() + 60
while not ready() and time.monotonic() < deadline:
    time.sleep(0.01)
"""
    caught = {finding.function for finding in findings(source, "example.py")}
    assert caught == {
        "direct",
        "through_names",
        "poll",
        "poll_inside",
        "through_a_function",
        "<module>",
    }
