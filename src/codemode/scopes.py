"""Which names a program binds in its global scope, and the nodes that bind them.

Python decides scopes as it compiles: a name is global when a module-level statement binds
it, or when a function (or class body) declares it `global` and binds it; a comprehension's
targets and a function's own locals are not, but a walrus inside a comprehension binds in
the scope around it. The preflight needs this to find the globals a capability namespace
would replace, before anything runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def global_bindings(tree: ast.Module, functions: bool = True) -> Iterator[tuple[str, ast.AST]]:
    """Each name the program binds in its global scope, with the node that binds it: every
    binding at module level, and in a function (or class body) those it declares `global`
    (unless `functions` is false: then only the module level, a much shorter walk).
    An `import` without `as` is left out: it binds a module to the module's own name."""
    scopes: list[tuple[list[ast.AST], bool]] = [(list(tree.body), True)]
    while scopes:
        body, module = scopes.pop()
        own = list(_in_scope(body))
        if functions:
            scopes.extend((_body(node), False) for node in own if isinstance(node, _SCOPES))
        declared = {n for node in own if isinstance(node, ast.Global) for n in node.names}
        for node in own:
            name = _bound_name(node)
            if name is not None and (module or name in declared):
                yield name, node


def _in_scope(body: list[ast.AST]) -> Iterator[ast.AST]:
    """The nodes of one scope: not the bodies of the functions and classes it defines, nor
    the targets of its comprehensions (a walrus inside one does bind here)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(node.args.defaults)
            stack.extend(d for d in node.args.kw_defaults if d is not None)
            if not isinstance(node, ast.Lambda):
                stack.extend(node.decorator_list)
        elif isinstance(node, ast.ClassDef):
            stack.extend([*node.decorator_list, *node.bases, *node.keywords])
        elif isinstance(node, ast.Import):  # without `as`, a name binds only its own module
            stack.extend(alias for alias in node.names if alias.asname)
        elif isinstance(node, ast.AnnAssign) and node.value is None:
            stack.append(node.annotation)  # `x: int` alone binds nothing
        elif isinstance(node, ast.comprehension):
            stack.extend([node.iter, *node.ifs])
        else:
            stack.extend(ast.iter_child_nodes(node))


def _body(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda,
) -> list[ast.AST]:
    """The statements (or expression) a function, lambda or class runs in its own scope."""
    return [node.body] if isinstance(node, ast.Lambda) else list(node.body)


def _bound_name(node: ast.AST) -> str | None:
    """The name this node binds in its scope, if it binds one."""
    if isinstance(node, ast.Name):
        return node.id if isinstance(node.ctx, ast.Store) else None
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.alias):
        return node.asname or (None if node.name == "*" else node.name)
    if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
        return node.name
    if isinstance(node, ast.MatchMapping):
        return node.rest
    return None


__all__ = ["global_bindings"]
