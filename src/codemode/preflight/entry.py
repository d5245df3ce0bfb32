"""The rule for a program's `main`: the one entry point, and the parameters it may take.

One rule for every path that takes a program (`execute`, `check`, and a program kept to
be called again), so a program that runs is one that could be kept. `main` may take
keyword-only parameters, each annotated and with a default: run as a program, it runs
with its defaults, and kept, its parameters are its signature. Anything else would need
arguments no run supplies.
"""

from __future__ import annotations

import ast

from codemode.preflight.problem import Problem

MAIN_PARAMETERS = (
    "main() parameters must be keyword-only, each with an annotation and a default: "
    "def main(*, week: int = 48)"
)

Main = ast.FunctionDef | ast.AsyncFunctionDef


def entry_point(tree: ast.Module, lines: tuple[str, ...]) -> tuple[Main | None, list[Problem]]:
    """The program's main (the last top-level `def main`, unless rebound after it), and
    the problems with its parameters, at its `def` line."""
    main: Main | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main":
            main = node
        elif _binds_main(node):
            main = None
    if main is None or takes_defaults(main.args):
        return main, []
    line = main.lineno
    problem = Problem(line, main.col_offset + 1, line, len(lines[line - 1]) + 1, MAIN_PARAMETERS)
    return main, [problem]


def takes_defaults(a: ast.arguments) -> bool:
    """Whether a call without arguments binds every parameter: keyword-only ones alone,
    each with an annotation (a kept program's signature) and a default."""
    if a.posonlyargs or a.args or a.vararg or a.kwarg:
        return False
    return all(
        arg.annotation is not None and default is not None
        for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True)
    )


def _binds_main(node: ast.stmt) -> bool:
    """A top-level statement that rebinds `main` to something other than a function."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    elif isinstance(node, ast.ClassDef):
        return node.name == "main"
    return any(isinstance(target, ast.Name) and target.id == "main" for target in targets)


__all__ = ["MAIN_PARAMETERS", "Main", "entry_point", "takes_defaults"]
