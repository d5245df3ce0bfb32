"""The tests a program makes of a result's keys (`"k" in e`), which excuse the reads they guard.

Kept apart from the checker that follows results (`results`): a comparison is read here
into the (expression, key) pairs it tests, each expression as its source text, so a read
of `e["k"]` anywhere under a test of `"k"` in `e` is known to be guarded; and the tests
that choose whether a read runs are found (`choosers`).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Iterator, Mapping

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def guarded(compare: ast.Compare) -> Iterable[tuple[str, str]]:
    """The (expression, key) pairs a comparison tests: `"k" in e`, `"k" in e.keys()`, and
    keys compared with `e.keys()` (`{"a", "b"} <= e.keys()`)."""
    sides = [compare.left, *compare.comparators]
    for op, left, right in zip(compare.ops, sides, sides[1:], strict=False):
        if isinstance(op, ast.In | ast.NotIn) and (key := constant(left)) is not None:
            yield text(owner(right) or right), key
        for one, other in ((left, right), (right, left)):
            keyed = owner(one)
            if keyed is not None and isinstance(other, ast.Set | ast.List | ast.Tuple):
                yield from ((text(keyed), k) for k in map(constant, other.elts) if k is not None)


def choosers(read: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> Iterator[ast.Name]:
    """The names loaded by each test that chooses whether `read` runs: of an `if`, a
    `while` or a conditional expression it is in the body of, of the operands before it
    in an `and`/`or`, of a comprehension's `if`s."""
    node = read
    while (parent := parents.get(node)) is not None:
        tests: list[ast.expr] = []
        if isinstance(parent, ast.If | ast.IfExp | ast.While) and node is not parent.test:
            tests = [parent.test]
        elif isinstance(parent, ast.BoolOp) and isinstance(node, ast.expr):
            tests = parent.values[: parent.values.index(node)]
        elif isinstance(parent, _COMPREHENSIONS) and not isinstance(node, ast.comprehension):
            tests = [test for loop in parent.generators for test in loop.ifs]
        for test in tests:
            loaded = (n for n in ast.walk(test) if isinstance(n, ast.Name))
            yield from (n for n in loaded if isinstance(n.ctx, ast.Load))
        node = parent


def owner(expr: ast.expr) -> ast.expr | None:
    """`e` of `e.keys()`, else None."""
    if isinstance(expr, ast.Call) and not expr.args and not expr.keywords:
        func = expr.func
        return func.value if isinstance(func, ast.Attribute) and func.attr == "keys" else None
    return None


def constant(expr: ast.expr) -> str | None:
    """A string constant's value, else None."""
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def text(expr: ast.expr) -> str:
    """An expression as source text: what tells two mentions of one value apart."""
    try:
        return ast.unparse(expr)
    except (ValueError, RecursionError):
        return json.dumps(id(expr))


__all__ = ["choosers", "constant", "guarded", "owner", "text"]
