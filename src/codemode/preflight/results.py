"""Reads of a capability's result that its shape says will fail, found before the program runs.

A declared result type is closed (the projection keeps only the names it declares), so a
key or field it lacks fails every time; a learned shape may be checked too, at a level
every observed result had the same names at. The checker follows a result through simple
code only: a name bound once in its function to a call, to a key or item of a followed
value, or to each item of a call or of such a key or item read in place in a `for` or a
comprehension (`for x in r["items"]`; a loop over a name holding one is not followed). Any
other use of such a value (stored into, mutated, passed on, assigned to another name, looped
over by its name) untracks everything rooted at
that call, and a read inside a `try` with a handler, or under `"k" in e` / `"k" in e.keys()`
/ `e.get("k")` / `hasattr(e, "k")`, is never reported, nor a `.get` with a default, nor a
learned read in a branch a test of the same result chose (results of one kind say nothing
of another kind's keys): a program that could run correctly is never refused.
The texts are the runtime's own (`wording`), so a mistake reads alike either way; a
learned shape's texts add that its names were learned from the capability's results.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from codemode.capabilities import Node, Shown
from codemode.preflight import wording
from codemode.preflight.guards import choosers
from codemode.preflight.guards import constant as _constant
from codemode.preflight.guards import guarded as _guarded
from codemode.preflight.guards import text as _text

_OBJECT_ONLY = (frozenset({"object"}), frozenset({"object", "null"}))
_ARRAY_ONLY = (frozenset({"array"}), frozenset({"array", "null"}))
_MUTATING = frozenset(
    {"update", "setdefault", "pop", "popitem", "append", "extend", "insert", "remove"}
    | {"clear", "sort", "reverse", "add", "discard"}
)
_SAFE_METHODS = frozenset({"keys", "count", "index"})
"""Methods whose answer holds no value of the result a program could change."""
_SAFE_CALLS = frozenset(
    {"len", "print", "str", "repr", "sorted", "list", "isinstance", "hasattr", "bool"}
)
"""Functions a followed value may be passed to without being passed on."""
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_UNKNOWN = Node()
"""A value whose shape says nothing more: no read of it, or in it, is ever checked."""
_LOST = Node(complete=False)
"""A value the chain lost track of (`r[k]`, `r.items()`) that may hold checked levels:
compared by identity."""


@dataclass(frozen=True, slots=True)
class Outline:
    """The shape a capability's result is checked by.

    `results` is None for a declared result type (every level closed: a name outside it
    is a certain failure), else the number of results a learned shape was learned from
    (its messages then say the names were learned); a learned level is checked only
    where `Node.checkable()`.
    """

    node: Node
    results: int | None = None


@dataclass(frozen=True, slots=True)
class Read:
    """A read of a name a shape lacks: where, and the message."""

    node: ast.expr
    message: str


def check_results(
    tree: ast.Module,
    lines: tuple[str, ...],
    outlines: Mapping[str, Outline],
    roots: set[str] | frozenset[str],
    shown: Shown | None = None,
    calls: Iterable[ast.Call] | None = None,
) -> list[Read]:
    """Every read of a followed result that its shape says fails, in no particular order.

    `roots` are the namespaces the program does not rebind; `shown` says which learned
    names the reader may see (None: all): a level holding a hidden name is open to it, so
    no report names, offers or confirms a guess of a name it may not see."""
    if not outlines:
        return []
    if calls is not None and not any(_dotted(c.func, roots) in outlines for c in calls):
        return []  # `calls`, every call of the program (if known), names none with a shape
    parents: dict[ast.AST, ast.AST] = {}
    shaped: list[ast.Call] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call) and _dotted(node.func, roots) in outlines:
            shaped.append(node)
        for child in children(node):
            parents[child] = node
            stack.append(child)
    functions: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for call in shaped:  # only a function that calls a capability with a shape is read
        scope = _function_of(call, parents)
        if scope is not None:
            functions.setdefault(id(scope), scope)
    found: list[Read] = []
    for function in functions.values():
        found += _Function(function, parents, lines, outlines, roots, shown).reads()
    return found


def children(node: ast.AST) -> list[ast.AST]:
    """A node's children (as ast.iter_child_nodes, with less overhead per node)."""
    found: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, ast.AST))
    return found


def _function_of(
    node: ast.AST, parents: Mapping[ast.AST, ast.AST]
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function whose own body holds `node` (None inside a lambda or at top level)."""
    while (node := parents.get(node)) is not None:  # type: ignore[assignment]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node
        if isinstance(node, ast.Lambda | ast.ClassDef):
            return None
    return None


@dataclass
class _Group:
    """Everything rooted at one capability call."""

    name: str
    outline: Outline
    untracked: bool = False
    reads: list[Read] = field(default_factory=list)


@dataclass
class _Binding:
    count: int = 0
    value: ast.expr | None = None
    """What the one binding assigns: an expression, or a loop's iterable (`item`)."""
    item: bool = False


class _Function:
    """One function body: its bindings, followed names, and the reads they make."""

    def __init__(
        self,
        function: ast.FunctionDef | ast.AsyncFunctionDef,
        parents: Mapping[ast.AST, ast.AST],
        lines: tuple[str, ...],
        outlines: Mapping[str, Outline],
        roots: set[str] | frozenset[str],
        shown: Shown | None,
    ) -> None:
        self.parents = parents
        self.lines = lines
        self.outlines = outlines
        self.roots = roots
        self.shown = shown
        self.nodes: list[ast.AST] = []
        self.inner: set[str] = set()
        """Names used in a nested function or class: followed there, so never here."""
        self.bindings: dict[tuple[int, str], _Binding] = {}
        self.groups: dict[int, _Group] = {}
        self.guards: set[tuple[str, str]] = set()
        """(expression, key) pairs the function tests with `in` or `hasattr`."""
        self.tested: set[tuple[str, str]] = set()
        """(expression, key) pairs the function tests with `.get`: reads other than a
        `.get` are excused (the `.get` itself still reads a key the shape lacks)."""
        self.memo: dict[tuple[int, str], tuple[_Group, Node] | None] = {}
        self.below: dict[int, bool] = {}
        self._collect(function)

    # -- what the body binds -------------------------------------------------------------

    def _collect(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        arguments = function.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
        for argument in every:
            self._bind(function, argument.arg, None)
        stack: list[ast.AST] = list(function.body)
        while stack:
            node = stack.pop()
            if isinstance(node, _NESTED):
                if not isinstance(node, ast.Lambda):
                    self._bind(function, node.name, None)
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Name):
                        self.inner.add(inner.id)
                    elif isinstance(inner, ast.Global | ast.Nonlocal):
                        self.inner.update(inner.names)
                for decorator in getattr(node, "decorator_list", []):
                    stack.append(decorator)
                continue
            self.nodes.append(node)
            self._note(function, node)
            stack.extend(children(node))

    def _note(self, function: ast.AST, node: ast.AST) -> None:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            scope = self._scope_of_target(node) or function
            self._bind(scope, node.id, self._bound_value(node))
        elif isinstance(node, ast.alias):
            self._bind(function, (node.asname or node.name).split(".", 1)[0], None)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                self._bind(function, name, None)
                self._bind(function, name, None)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            self._bind(function, node.name, None)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self._bind(function, node.rest, None)
        elif isinstance(node, ast.Compare):
            self.guards.update(_guarded(node))
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "hasattr" and len(node.args) == 2:
                key = _constant(node.args[1])
                if key is not None:
                    self.guards.add((_text(node.args[0]), key))
            elif _is_get(node) and self._tested(node):
                key = _constant(node.args[0])
                if key is not None and isinstance(func, ast.Attribute):
                    self.tested.add((_text(func.value), key))

    def _tested(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert):
            return parent.test is node
        return isinstance(parent, ast.BoolOp | ast.Compare) or (
            isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)
        )

    def _bind(self, scope: ast.AST, name: str, value: tuple[ast.expr, bool] | None) -> None:
        binding = self.bindings.setdefault((id(scope), name), _Binding())
        binding.count += 1
        binding.value, binding.item = value if value is not None else (None, False)

    def _scope_of_target(self, name: ast.Name) -> ast.AST | None:
        """The comprehension whose target binds `name`, if one does (its own scope)."""
        node: ast.AST = name
        while (parent := self.parents.get(node)) is not None:
            if isinstance(parent, ast.comprehension):
                return self.parents.get(parent) if node is parent.target else None
            if not isinstance(parent, ast.Tuple | ast.List | ast.Starred):
                return None
            node = parent
        return None

    def _bound_value(self, name: ast.Name) -> tuple[ast.expr, bool] | None:
        """The value a Name target gets when it is the whole target of a plain binding."""
        parent = self.parents.get(name)
        if isinstance(parent, ast.Assign) and parent.targets == [name]:
            return parent.value, False
        if isinstance(parent, ast.AnnAssign) and parent.value is not None:
            return parent.value, False
        if isinstance(parent, ast.For | ast.comprehension) and parent.target is name:
            return parent.iter, True
        return None

    def _resolve(self, name: ast.Name) -> tuple[int, str] | None:
        """The binding a loaded name refers to (a comprehension's own, or the function's);
        a comprehension's first iterable is read in the scope around it."""
        node: ast.AST = name
        outside: ast.AST | None = None
        while (parent := self.parents.get(node)) is not None:
            if isinstance(parent, ast.comprehension) and node is parent.iter:
                outside = parent
            elif isinstance(parent, _COMPREHENSIONS):
                first = outside is parent.generators[0]
                if not first and (id(parent), name.id) in self.bindings:
                    return id(parent), name.id
            elif isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
                key = (id(parent), name.id)
                return key if key in self.bindings else None
            node = parent
        return None

    # -- following ---------------------------------------------------------------------

    def _follow_name(self, name: ast.Name) -> tuple[_Group, Node] | None:
        key = self._resolve(name)
        if key is None or name.id in self.inner:
            return None
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None  # a binding that refers to itself follows nothing
        binding = self.bindings[key]
        if binding.count != 1 or binding.value is None:
            return None
        value = self._follow(binding.value)
        if value is not None and binding.item:
            node = value[1]
            if _kinds(node, _ARRAY_ONLY):
                value = (value[0], node.items or _UNKNOWN)
            else:  # a dict's keys are strings; anything else is not known
                value = (value[0], _UNKNOWN if _kinds(node, _OBJECT_ONLY) else self._lost(node))
        self.memo[key] = value
        return value

    def _follow(self, expr: ast.expr) -> tuple[_Group, Node] | None:
        """The group and shape of an expression, as the chain from its root says."""
        if isinstance(expr, ast.Await):
            expr = expr.value
        if isinstance(expr, ast.Call) and (group := self._group(expr)) is not None:
            return group, group.outline.node
        if isinstance(expr, ast.Name) and isinstance(expr.ctx, ast.Load):
            return self._follow_name(expr)
        if isinstance(expr, ast.Subscript):
            base = self._follow(expr.value)
            return None if base is None else (base[0], self._step(base[0], base[1], expr, False))
        if isinstance(expr, ast.Attribute):
            base = self._follow(expr.value)
            return None if base is None else (base[0], self._step(base[0], base[1], expr, False))
        if isinstance(expr, ast.Call) and _is_get(expr) and isinstance(expr.func, ast.Attribute):
            base = self._follow(expr.func.value)
            return None if base is None else (base[0], self._step(base[0], base[1], expr, False))
        return None

    def _group(self, call: ast.Call) -> _Group | None:
        name = _dotted(call.func, self.roots)
        outline = None if name is None else self.outlines.get(name)
        if name is None or outline is None:
            return None
        group = self.groups.get(id(call))
        if group is None:
            group = self.groups[id(call)] = _Group(name, outline)
        return group

    def reads(self) -> list[Read]:
        for node in self.nodes:
            if isinstance(node, ast.Call) and (group := self._group(node)) is not None:
                self._climb(node, group, group.outline.node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                followed = self._follow_name(node)
                if followed is not None:
                    self._climb(node, *followed)
        return [
            read for group in self.groups.values() if not group.untracked for read in group.reads
        ]

    def _climb(self, start: ast.expr, group: _Group, node: Node) -> None:
        """Each read along the chain above `start`, then whether the value is passed on."""
        current: ast.expr = start
        parent = self.parents.get(current)
        if isinstance(parent, ast.Await) and isinstance(start, ast.Call):
            current, parent = parent, self.parents.get(parent)
        while True:
            if isinstance(parent, ast.Subscript) and parent.value is current:
                if not isinstance(parent.ctx, ast.Load):
                    group.untracked = True
                    return
                node = self._step(group, node, parent, True)
                current = parent
            elif isinstance(parent, ast.Attribute) and parent.value is current:
                if not isinstance(parent.ctx, ast.Load):
                    group.untracked = True
                    return
                call = self.parents.get(parent)
                called = isinstance(call, ast.Call) and call.func is parent
                if node.record is None and called and isinstance(call, ast.Call):
                    if parent.attr in _MUTATING:
                        group.untracked = True
                        return
                    if parent.attr in _SAFE_METHODS:
                        return
                    node = self._step(group, node, call, True) if _is_get(call) else _LOST
                    current = call
                else:
                    node = self._step(group, node, parent, True)
                    current = parent
            else:
                break
            parent = self.parents.get(current)
        if not self._kept(current, parent, node):
            group.untracked = True

    def _kept(self, current: ast.expr, parent: ast.AST | None, node: Node) -> bool:
        """Whether the value at `current` stays where the checker sees every use of it."""
        if node is not _LOST and not self._below(node):
            return True  # nothing in it is checked, so nothing changed through it counts
        if isinstance(parent, ast.Expr | ast.Return | ast.FormattedValue | ast.Compare):
            return True
        if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert):
            return parent.test is current
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            return True
        if isinstance(parent, ast.BoolOp):
            return self._kept(parent, self.parents.get(parent), self._lost(node))
        if isinstance(parent, ast.Call) and current in parent.args:
            func = parent.func
            if isinstance(func, ast.Name):
                return func.id in _SAFE_CALLS
            return _text(func) == "json.dumps"
        if isinstance(current, ast.Name):
            return False  # another name for the same value
        target: ast.expr | None = None
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            target = parent.targets[0]
        elif isinstance(parent, ast.AnnAssign | ast.For | ast.comprehension):
            target = parent.target
            if isinstance(parent, ast.For | ast.comprehension) and parent.iter is not current:
                return False
        if isinstance(target, ast.Name) and self._follow(current) is not None:
            key = self._scope_key(target)
            binding = None if key is None else self.bindings.get(key)
            return binding is not None and binding.count == 1 and target.id not in self.inner
        return False

    def _lost(self, node: Node) -> Node:
        """What a read the chain cannot place gives: lost, if `node` holds a checked level."""
        return _LOST if self._below(node) else _UNKNOWN

    def _below(self, root: Node) -> bool:
        """Whether a level at or below `root` may be checked (`_LOST`: perhaps)."""
        if root is _LOST:
            return True
        found = self.below.get(id(root))
        if found is not None:
            return found
        stack, met, found = [root], set(), False
        while stack and not found:
            node = stack.pop()
            if id(node) in met:
                continue
            met.add(id(node))
            found = node.checkable()
            stack.extend(field.node for _, field in node.fields or ())
            stack.extend(n for n in (node.values, node.items) if n is not None)
        self.below[id(root)] = found
        return found

    def _scope_key(self, target: ast.Name) -> tuple[int, str] | None:
        scope = self._scope_of_target(target)
        if scope is None:
            node: ast.AST = target
            while (parent := self.parents.get(node)) is not None:
                if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
                    scope = parent
                    break
                node = parent
        return None if scope is None else (id(scope), target.id)

    # -- one step of a chain -------------------------------------------------------------

    def _step(self, group: _Group, node: Node, read: ast.expr, report: bool) -> Node:
        """The shape below one read, reporting a name the level lacks."""
        if isinstance(read, ast.Subscript):
            if _kinds(node, _ARRAY_ONLY) and not isinstance(read.slice, ast.Constant | ast.Slice):
                return node.items or _UNKNOWN
            if _kinds(node, _ARRAY_ONLY):
                if isinstance(read.slice, ast.Slice):
                    return node
                index = read.slice.value if isinstance(read.slice, ast.Constant) else None
                is_int = isinstance(index, int) and not isinstance(index, bool)
                return (node.items or _UNKNOWN) if is_int else _UNKNOWN
            key = _constant(read.slice)
            if key is None or not _kinds(node, _OBJECT_ONLY):
                return self._lost(node)
            if node.values is not None:
                return node.values
            if node.record is not None and node.declared:
                if report:
                    message = wording.not_subscriptable(node, _text(read.value), key)
                    self._report(group, read, key, message)
                return _UNKNOWN
            return self._named(group, node, read, key, "key", report)
        if isinstance(read, ast.Attribute):
            if read.attr.startswith("_") or not _kinds(node, _OBJECT_ONLY):
                return self._lost(node)
            if node.record is not None and node.declared:
                return self._named(group, node, read, read.attr, "attribute", report)
            if node.fields is None or not node.checkable() or hasattr(dict, read.attr):
                return self._lost(node)
            if report:
                observed = self._observed(group, node)
                message = wording.dict_attribute(read.attr, self._source(read.value), observed)
                self._report(group, read, read.attr, message)
            return _UNKNOWN
        if isinstance(read, ast.Call):  # e.get("k") or e.get("k", d)
            key = _constant(read.args[0]) if read.args else None
            if key is None or not _kinds(node, _OBJECT_ONLY) or node.record is not None:
                return self._lost(node)
            if node.values is not None:
                return node.values
            defaulted = len(read.args) == 2  # it gives the program's own default: no mistake
            return self._named(group, node, read, key, "get", report and not defaulted)
        return self._lost(node)

    def _named(
        self, group: _Group, node: Node, read: ast.expr, name: str, how: str, report: bool
    ) -> Node:
        found = node.field(name)
        if found is not None:
            return found.node
        hidden = node.fields is not None and len(node.key_names(self.shown)) < len(node.fields)
        if node.fields is None or not node.checkable() or hidden:  # hidden: open to the reader
            return _UNKNOWN  # a name no result showed: nothing is known below it
        if report:
            message = wording.missing(node, name, how, self.shown, self._observed(group, node))
            self._report(group, read, name, message)
        return _UNKNOWN

    def _excused(self, read: ast.expr, name: str) -> bool:
        """A read inside a `try` with a handler, or of a key the function tests for."""
        is_get = isinstance(read, ast.Call)
        base = read.func if isinstance(read, ast.Call) else read
        if isinstance(base, ast.Subscript | ast.Attribute):
            text = _text(base.value)
            if (text, name) in self.guards or (not is_get and (text, name) in self.tested):
                return True
        node: ast.AST = read
        while (parent := self.parents.get(node)) is not None:
            tried = isinstance(parent, ast.Try | ast.TryStar) and bool(parent.handlers)
            if tried and any(node is statement for statement in getattr(parent, "body", ())):
                return True
            node = parent
        return False

    def _observed(self, group: _Group, node: Node) -> str:
        results = group.outline.results
        return "" if results is None or node.declared else wording.observed(group.name)

    def _report(self, group: _Group, read: ast.expr, name: str, message: str) -> None:
        learned = group.outline.results is not None
        if not self._excused(read, name) and not (learned and self._chosen(group, read)):
            group.reads.append(Read(read, message))

    def _chosen(self, group: _Group, read: ast.expr) -> bool:
        """Whether a test of the same result chose that `read` runs (`if r["kind"] == ...`)."""
        followed = (self._follow_name(name) for name in choosers(read, self.parents))
        return any(found is not None and found[0] is group for found in followed)

    def _source(self, expr: ast.expr) -> str:
        """An expression as the program wrote it, when it is on one line."""
        line = expr.lineno
        if expr.end_lineno != line or not 0 < line <= len(self.lines):
            return ""
        data = self.lines[line - 1].encode("utf-8")
        return data[expr.col_offset : expr.end_col_offset].decode("utf-8", errors="ignore")


def _kinds(node: Node, allowed: tuple[frozenset[str], ...]) -> bool:
    return node.kinds in allowed


def _is_get(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "get"
        and 1 <= len(call.args) <= 2
        and not call.keywords
        and not any(isinstance(arg, ast.Starred) for arg in call.args)
    )


def _dotted(func: ast.expr, roots: set[str] | frozenset[str]) -> str | None:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not parts or not isinstance(func, ast.Name) or func.id not in roots:
        return None
    return ".".join([func.id, *reversed(parts)])


__all__ = ["Outline", "Read", "check_results", "children"]
