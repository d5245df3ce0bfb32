"""Static checks of a program before anything runs, reporting every problem at once.

Python's own parser reads the program; the checks look for what would certainly fail:
calls to names under a capability namespace that are not capabilities, keyword arguments
that do not match a signature, literal arguments of the wrong type, capability calls while
the module loads, a key or field a result's shape lacks (`results`), constructs the
sandbox does not support, and what Python's own compiler refuses (`await` outside
`async def`, `return` outside a function, ...), and nesting past the interpreter's own
bound (`too_deep`). Where a check cannot be sure (a namespace name the program
rebinds, `**kwargs`, values only known at run time) it stays silent and the runtime decides:
the preflight never rejects a program that would have run correctly, but for one rule, the
same in every program: a global named as a capability namespace is refused wherever it is
bound. The namespace replaces it before main() runs, so it is lost at module level, and a
function's `global` of that name, which works within one program, would be lost to the next
program of a session.
"""

from __future__ import annotations

import ast
import json
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

from codemode import capabilities as t
from codemode import syntax
from codemode.binding import closest_name, literal_problem, unknown_argument
from codemode.capabilities import Capability, Parameter, Shown, capability_hint
from codemode.language import MISSING_MODULES, MODULES
from codemode.preflight.entry import MAIN_PARAMETERS, entry_point
from codemode.preflight.problem import Problem
from codemode.preflight.results import Outline, check_results, children
from codemode.scopes import global_bindings

SANDBOX_MODULES = frozenset(MODULES) | {"os", "sys", "pathlib"}


def load_message(name: str) -> str:
    """The error for a capability called while the module loads (`name` as written)."""
    return (
        f"{name} can only be called while main() runs, not when the module loads: "
        "move the call into main()"
    )


def global_namespace(name: str) -> str:
    """The error for a global the program binds under a namespace's name: the namespaces
    take their names before main() runs, so the value is lost, in this program and in the
    next ones of a session."""
    return (
        f'"{name}" is a capability namespace, which replaces any global of that name before '
        "main() runs, so neither this program nor a session could keep it: use another name"
    )


CALLS_MAIN = "remove this call of main(): codemode calls main() itself and returns its value"

AWAIT_OUTSIDE_ASYNC = (
    "'await' outside async function: define async def main(): (and async def for any "
    "helper that awaits), or call without await"
)


_UNSUPPORTED: dict[type[ast.AST], str] = {
    ast.Yield: "yield is not supported: build a list and return or loop over it",
    ast.YieldFrom: "yield is not supported: build a list and return or loop over it",
    ast.Delete: "del is not supported: use dict.pop(key) or rebuild the list",
    ast.AsyncWith: "async with is not supported: await the calls directly",
    ast.AsyncFor: "async for is not supported: gather the calls, then loop with for",
    ast.TryStar: "except* is not supported: use except",
}
_INHERITANCE = (
    "class inheritance is not supported (class {name}): use a plain class, a dict, or raise "
    "a built-in exception"
)
_STAR_IMPORT = "from module import * is not supported: import the names you need"


@dataclass
class Scan:
    """What one pass over the syntax tree found."""

    functions: list[tuple[int, int, str]] = field(default_factory=list)
    """(first line, last line, name) of every function."""
    calls: list[ast.Call] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)
    """Every name the program binds anywhere (assignments, parameters, imports, defs)."""
    keys: set[str] = field(default_factory=set)
    """String keys the program writes: `x["key"]` and `{"key": ...}`."""
    declared: set[str] = field(default_factory=set)
    """The names `global` statements declare."""
    unsupported: list[tuple[ast.AST, str]] = field(default_factory=list)


def scan(tree: ast.Module) -> Scan:
    """Walk the tree once, collecting everything the checks need."""
    found = Scan()
    bound = found.bound
    for node in _nodes(tree):
        if isinstance(node, ast.Call):
            found.calls.append(node)
        elif isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".", 1)[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            bound.add(node.name)
            found.functions.append((node.lineno, node.end_lineno or node.lineno, node.name))
        elif isinstance(node, ast.ClassDef):
            bound.add(node.name)
            if node.bases or node.keywords:
                message = _INHERITANCE.format(name=f"{node.name}({_bases(node)})")
                found.unsupported.append((node, message))
        elif isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                found.keys.add(node.slice.value)
        elif isinstance(node, ast.Dict):
            found.keys.update(
                k.value
                for k in node.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
            if isinstance(node, ast.Global):
                found.declared.update(node.names)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
            if node.name:
                bound.add(node.name)
        elif isinstance(node, ast.MatchMapping):
            if node.rest:
                bound.add(node.rest)
        elif isinstance(node, ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                found.unsupported.append((node, _STAR_IMPORT))
        elif type(node) in _UNSUPPORTED:
            found.unsupported.append((node, _UNSUPPORTED[type(node)]))
    return found


def check(
    tree: ast.Module,
    lines: tuple[str, ...],
    capabilities: Mapping[str, Capability],
    found: Scan | None = None,
    outlines: Mapping[str, Outline] | None = None,
    shown: Shown | None = None,
) -> list[Problem]:
    """Every problem the preflight is sure of, in source order: with `outlines`, the
    reads of a result its shape says fail too (`results.check_results`), beside the
    argument mistakes, so one reply names them all."""
    found = found or scan(tree)
    roots = {name.split(".", 1)[0] for name in capabilities}
    namespaces = {n.rsplit(".", i)[0] for n in capabilities for i in range(1, n.count(".") + 1)}
    checker = _Checker(lines, capabilities, namespaces, roots - found.bound, roots)
    for statement in tree.body:
        checker.top_level(statement)
    if roots & found.bound:  # a name bound nowhere is bound in no scope
        checker.globals_named_as_namespaces(tree, functions=bool(roots & found.declared))
    for node, message in found.unsupported:
        checker.report(node, message)
    for call in found.calls:
        checker.check_call(call)
    if outlines and found.calls:
        for read in check_results(tree, lines, outlines, checker.roots, shown, found.calls):
            checker.report(read.node, read.message)
    if not checker.problems:  # a compiler message beside the checks' own would be noise
        checker.compiles(tree)
    unique = list(dict.fromkeys(checker.problems))
    return sorted(unique, key=lambda p: (p.line, p.column))


class _Checker:
    def __init__(
        self,
        lines: tuple[str, ...],
        capabilities: Mapping[str, Capability],
        namespaces: set[str],
        roots: set[str],
        all_roots: set[str],
    ) -> None:
        self.lines = lines
        self.capabilities = capabilities
        self.namespaces = namespaces
        self.roots = roots
        """The namespaces the program does not rebind (so a call through one is certain)."""
        self.all_roots = all_roots
        self.problems: list[Problem] = []
        self._declared: dict[str, dict[str, Parameter]] = {}
        self._fitting: set[tuple[int, type]] = set()
        """(parameter, literal type) pairs known to fit by kind."""

    def report(
        self,
        node: ast.AST,
        message: str,
        kind: Literal["arguments", "program"] = "program",
        *,
        first_line: bool = False,
    ) -> None:
        line = getattr(node, "lineno", 1)
        end_line = line if first_line else getattr(node, "end_lineno", None) or line
        column = self._column(line, getattr(node, "col_offset", 0))
        if first_line:
            end_column = len(self.lines[line - 1]) + 1 if line <= len(self.lines) else column
        else:
            end_column = self._column(end_line, getattr(node, "end_col_offset", None) or 0)
        self.problems.append(Problem(line, column, end_line, end_column, message, kind))

    def _column(self, line: int, byte_offset: int) -> int:
        """ast columns count UTF-8 bytes; positions shown to the model count characters."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return byte_offset + 1
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1

    def compiles(self, tree: ast.Module) -> None:
        """What Python's compiler refuses in a tree that parsed: the first such mistake."""
        try:
            syntax.compile_tree(tree, "<codemode>", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as error:
            line = error.lineno or 1
            end_line = error.end_lineno or line
            message = error.msg
            if message == "'await' outside async function":
                message = AWAIT_OUTSIDE_ASYNC
            column = self._column(line, (error.offset or 1) - 1)
            end_column = self._column(end_line, (error.end_offset or error.offset or 1) - 1)
            self.problems.append(Problem(line, column, end_line, end_column, message))
        except (ValueError, RecursionError, MemoryError):
            pass  # the interpreter decides

    # -- statements that always run while the module loads -----------------------------

    def top_level(self, statement: ast.stmt) -> None:
        if _calls_main(statement):
            self.report(statement, CALLS_MAIN)
            return
        if isinstance(statement, ast.Expr | ast.Assign | ast.AugAssign | ast.AnnAssign):
            for node in _walk_outside_functions(statement):
                name = isinstance(node, ast.Call) and self._capability_name(node.func)
                if name:
                    self.report(node, load_message(name))
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                self._check_module(statement, alias.name)
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
            self._check_module(statement, statement.module)

    def _check_module(self, node: ast.AST, module: str) -> None:
        root = module.split(".", 1)[0]
        if root in self.all_roots:
            self.report(node, f"{root} is a capability namespace, ready to use: remove the import")
            return
        if root in SANDBOX_MODULES:
            return
        if root in MISSING_MODULES or root not in sys.stdlib_module_names:
            self.report(node, f'module "{root}" is not available in the sandbox')

    def globals_named_as_namespaces(self, tree: ast.Module, functions: bool) -> None:
        """The first binding of each global named as a namespace the program sees (looked
        for in the functions only when one declares such a name `global`)."""
        first: dict[str, ast.AST] = {}
        found = global_bindings(tree, functions)
        for name, node in sorted(found, key=_position, reverse=True):
            if name in self.all_roots:
                first[name] = node  # the earliest, as it comes last
        for name, node in first.items():
            # a def, a class or an except clause: its first line, not its body
            header = isinstance(node, ast.stmt | ast.excepthandler)
            self.report(node, global_namespace(name), first_line=header)

    # -- capability calls ------------------------------------------------------------------

    def check_call(self, node: ast.Call) -> None:
        name = self._capability_name(node.func)
        if name is None:
            return
        capability = self.capabilities.get(name)
        if capability is not None:
            self._check_arguments(node, capability)
        elif name in self.namespaces:
            self.report(node, f'"{name}" is a namespace, not a capability')
        else:
            hint = capability_hint(name, self.capabilities)
            suffix = f"; {hint}" if hint else ""
            self.report(node, f'unknown capability "{name}"{suffix}')

    def _capability_name(self, func: ast.expr) -> str | None:
        """`records.lookup` for a call to an attribute chain on a namespace root."""
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not parts or not isinstance(func, ast.Name) or func.id not in self.roots:
            return None
        return ".".join([func.id, *reversed(parts)])

    def _check_arguments(self, node: ast.Call, capability: Capability) -> None:
        declared = self._declared.get(capability.name)
        if declared is None:
            declared = self._declared[capability.name] = {p.name: p for p in capability.parameters}
        given = {k.arg for k in node.keywords if k.arg is not None}
        if node.args:
            message, named = _by_name(node, capability, given)
            given |= named  # the fix names them: no second error says they are missing
            self.report(node, message, "arguments")
        for keyword in node.keywords:
            if keyword.arg is None:
                continue
            if keyword.arg not in declared:
                hint = closest_name(keyword.arg, declared)
                given.add(hint or "")  # the fix for the typo also fixes the missing argument
                message = unknown_argument(keyword.arg, hint, capability)
                self.report(node, message, "arguments")
                continue
            problem = self._literal_problem(declared[keyword.arg], keyword.value)
            if problem:
                self.report(node, problem, "arguments")
        if all(k.arg is not None for k in node.keywords):
            for parameter in capability.parameters:
                if parameter.required and parameter.name not in given:
                    self.report(node, f'missing required argument "{parameter.name}"', "arguments")

    def _literal_problem(self, parameter: Parameter, value: ast.expr) -> str | None:
        """As `_literal_problem`, remembering which scalar kinds a parameter takes."""
        if not isinstance(value, ast.Constant):
            return _literal_problem(parameter, value)
        key = (id(parameter), type(value.value))
        if key in self._fitting:
            return None
        problem = _literal_problem(parameter, value)
        if problem is None and _kind_only(parameter.annotation):
            self._fitting.add(key)
        return problem


def _by_name(node: ast.Call, capability: Capability, given: set[str]) -> tuple[str, set[str]]:
    """`positional arguments are not accepted`, with the call written by name when each
    positional argument can be the next parameter not passed by keyword:
    `; pass it by name: owners.get(id="u-ada")`. Also the names that fix gives."""
    message = "positional arguments are not accepted"
    free = [p.name for p in capability.parameters if p.name not in given]
    if len(node.args) > len(free) or any(isinstance(a, ast.Starred) for a in node.args):
        return message, set()
    pairs = [f"{name}={_written(arg)}" for name, arg in zip(free, node.args, strict=False)]
    pairs += [f"{k.arg}={_written(k.value)}" for k in node.keywords if k.arg is not None]
    pronoun = "it" if len(node.args) == 1 else "them"
    fixed = f"{capability.name}({', '.join(pairs)})"
    return f"{message}; pass {pronoun} by name: {fixed}", set(free[: len(node.args)])


def _written(value: ast.expr) -> str:
    """An argument as the program wrote it, cut short."""
    text = ast.unparse(value)
    return text if len(text) <= 40 else "..."


def _bases(node: ast.ClassDef) -> str:
    """What a class statement derives from, as written (cut short, never failing)."""
    try:
        written = ", ".join(ast.unparse(b) for b in [*node.bases, *node.keywords])
    except (RecursionError, ValueError, MemoryError):
        return "..."
    return written if len(written) <= 80 else written[:80] + "..."


def _calls_main(statement: ast.stmt) -> bool:
    """`main()`, `asyncio.run(main())` or `if __name__ == "__main__":` at top level."""
    if isinstance(statement, ast.If):
        test = statement.test
        return (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
        )
    if not isinstance(statement, ast.Expr | ast.Assign):
        return False
    value = statement.value
    if isinstance(value, ast.Await):
        value = value.value
    if not isinstance(value, ast.Call):
        return False
    if isinstance(value.func, ast.Name) and value.func.id == "main":
        return True
    return any(
        isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "main"
        for arg in value.args
    )


def _kind_only(annotation: Any) -> bool:
    """Whether a scalar literal fits this type by its kind alone: no Literal, no enum, and
    no `Annotated` part, which may declare a bound that one literal meets and another not."""
    if t.is_union(annotation):
        return all(_kind_only(member) for member in get_args(annotation))
    return annotation is t.strip_annotated(annotation) and t.json_kind(annotation) is not None


def _literal_problem(parameter: Parameter, value: ast.expr) -> str | None:
    """The binding message for a literal argument of the wrong kind, else None."""
    if isinstance(value, ast.Constant):
        if not isinstance(value.value, str | int | float | bool | None):
            return None  # bytes, Ellipsis: the runtime says what is wrong
        if isinstance(value.value, float) and not math.isfinite(value.value):
            return None
        return literal_problem(parameter.annotation, value.value, parameter.name)
    if not isinstance(value, ast.List | ast.Tuple | ast.Dict | ast.UnaryOp):
        return None
    literal = _literal(value)
    if literal is not _UNKNOWN:
        return literal_problem(parameter.annotation, literal, parameter.name)
    item_type = _item_type(parameter.annotation)
    if isinstance(value, ast.List | ast.Tuple) and item_type is not None:
        for index, element in enumerate(value.elts):  # some items known: each checked alone
            if isinstance(element, ast.Starred):
                break  # the items after a *spread have unknown positions
            item = _literal(element)
            path = f"{parameter.name}[{index}]"
            if item is not _UNKNOWN and (problem := literal_problem(item_type, item, path)):
                return problem
    return None


_UNKNOWN: Any = object()
"""A value the program only knows when it runs."""


def _literal(node: ast.expr) -> Any:
    """The JSON value of a literal expression, or _UNKNOWN."""
    try:
        return json.loads(json.dumps(ast.literal_eval(node), allow_nan=False))
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return _UNKNOWN


def _item_type(annotation: Any) -> Any:
    """The item type of a `list[T]` (or `tuple[T, ...]`, either or None) parameter, else
    None."""
    tp = t.strip_annotated(annotation)
    if t.is_union(tp):
        present = [member for member in get_args(tp) if member is not type(None)]
        return _item_type(present[0]) if len(present) == 1 else None
    args = get_args(tp)
    if get_origin(tp) is list or (get_origin(tp) is tuple and args[-1:] == (Ellipsis,)):
        return args[0]
    return None


MAX_NESTING = 200
"""Levels of statements and expressions a program may nest: the interpreter's own bound
(it refuses a deeper program as it parses it), checked here first so that `check` and
`execute` refuse the same programs, in the same words."""
NESTED_TOO_DEEPLY = "the program is too deeply nested: use variables or helper functions"
PARSER_NESTING = frozenset(
    {
        "too many nested parentheses",
        "too many levels of indentation",
        "f-string: expressions nested too deeply",
    }
)
"""Python's parser's own nesting bounds, refused in the same words (none runs)."""
_LEVELS = (ast.stmt, ast.expr, ast.pattern, ast.excepthandler, ast.match_case)


def too_deep(tree: ast.Module, lines: tuple[str, ...]) -> Problem | None:
    """The first node, in source order, nested past `MAX_NESTING` levels, as a problem.

    Each statement, expression, pattern and handler is a level inside the one holding it;
    as the interpreter counts them, a method call (`s.strip()`) is one level, an operand
    of `and`/`or` is one level inside the operand before it, and an `elif` two inside the
    `if` before it (the interpreter allows a few more of those). Walked without
    recursion: the tree may be far deeper than Python's own stack.
    """
    stack: list[tuple[ast.AST, int, ast.AST | None]] = [
        (node, 1, None) for node in reversed(tree.body)
    ]
    while stack:
        node, depth, placed = stack.pop()
        placed = node if hasattr(node, "lineno") else placed
        if depth > MAX_NESTING and placed is not None:
            at: Any = placed
            line, end_line = at.lineno, at.end_lineno or at.lineno
            column = _character(lines, line, at.col_offset)
            end_column = _character(lines, end_line, at.end_col_offset or 0)
            return Problem(line, column, end_line, end_column, NESTED_TOO_DEEPLY)
        children = [
            (child, depth + 1 if isinstance(child, _LEVELS) else depth, placed)
            for child in ast.iter_child_nodes(node)
        ]
        if isinstance(node, ast.BoolOp):
            children = [(value, depth + 1 + i, placed) for i, value in enumerate(node.values)]
        elif isinstance(node, ast.If) and [type(s) for s in node.orelse] == [ast.If]:
            elif_ = node.orelse[0]
            children = [(c, d + 1 if c is elif_ else d, p) for c, d, p in children]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func
            children = [(c, depth if c is method else d, p) for c, d, p in children]
        stack.extend(reversed(children))
    return None


def _character(lines: tuple[str, ...], line: int, byte_offset: int) -> int:
    """The 1-based character column of an ast byte offset."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    if text.isascii():
        return byte_offset + 1
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1


def _nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of the tree (as ast.walk, with less overhead per node)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def _position(binding: tuple[str, ast.AST]) -> tuple[int, int]:
    return getattr(binding[1], "lineno", 0), getattr(binding[1], "col_offset", 0)


def _walk_outside_functions(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes under `node` that run right away (not inside a def or lambda body)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                stack.append(child)


__all__ = [
    "AWAIT_OUTSIDE_ASYNC",
    "MAIN_PARAMETERS",
    "MAX_NESTING",
    "NESTED_TOO_DEEPLY",
    "PARSER_NESTING",
    "Outline",
    "Problem",
    "Scan",
    "check",
    "entry_point",
    "global_namespace",
    "load_message",
    "scan",
    "too_deep",
]
