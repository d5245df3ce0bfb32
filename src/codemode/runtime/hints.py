"""What to change, added to the interpreter's messages about the program's own code.

Did-you-mean for names, attributes and keys, and what-instead for a feature the sandbox
lacks. Every hint is built from the capabilities the program may see (the names, fields
and keys `describe` shows), the program's own names, and the language surface: never from
a value a host produced.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, get_args, get_origin

from typing_extensions import is_typeddict

from codemode import capabilities as t
from codemode import syntax
from codemode.binding import close_key
from codemode.capabilities import NONE_AVAILABLE, Capability, namespace_hint
from codemode.errors import Where, printable
from codemode.language import INSTEAD, MODULES


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What the capabilities of one view name: their names, and the fields of the objects
    and the keys of the dicts their results hold."""

    capabilities: frozenset[str]
    objects: Mapping[str, tuple[str, ...]]
    """Declared fields of each result object type, by class name."""
    keys: frozenset[str]
    """Every key of every dict type (TypedDict) in a result."""

    @classmethod
    def of(cls, capabilities: Iterable[Capability]) -> Vocabulary:
        names: set[str] = set()
        objects: dict[str, list[str]] = {}
        keys: set[str] = set()
        for capability in capabilities:
            names.add(capability.name)
            for tp in t.walk(capability.result_annotation, result=True):
                if t.is_record(tp):
                    fields = objects.setdefault(tp.__name__, [])
                    for field in t.fields_of(tp, result=True):
                        if field.name not in fields:
                            fields.append(field.name)
                elif is_typeddict(tp):
                    keys.update(field.name for field in t.fields_of(tp, result=True))
        return cls(frozenset(names), {k: tuple(v) for k, v in objects.items()}, frozenset(keys))


@dataclass(frozen=True, slots=True)
class Known:
    """What one program may be naming: the catalog's words and the program's own."""

    vocabulary: Vocabulary
    names: frozenset[str]
    """Every name the program binds (variables, functions, parameters, imports)."""
    keys: frozenset[str]
    """String keys the program writes in subscripts and dict displays."""
    roots: frozenset[str]
    """The capability namespaces the program may use."""
    capabilities: Mapping[str, Capability]
    source: str
    results: Mapping[str, Any] = field(default_factory=dict)
    """The value each capability's last completed call gave this execution, by name: the
    program's own data, whose keys a KeyError on an undeclared dict may name."""


_NAME = re.compile(r"^name '([A-Za-z_][A-Za-z0-9_]*)' is not defined$")
_ATTRIBUTE = re.compile(
    r"^'([A-Za-z_][A-Za-z0-9_]*)' object has no attribute '([A-Za-z_][A-Za-z0-9_]*)'$"
)
_MODULE_ATTRIBUTE = re.compile(
    r"^module '([A-Za-z_][A-Za-z0-9_.]*)' has no attribute '([A-Za-z_][A-Za-z0-9_]*)'$"
)
_KEY = re.compile(r"^'([^'\\]{1,200})'$")
_TYPE_ATTRIBUTE = re.compile(
    r"^type object '([A-Za-z_][A-Za-z0-9_]*)' has no attribute '([A-Za-z_][A-Za-z0-9_]*)'$"
)
_JSON_KEYWORD = re.compile(
    r"^JSONEncoder\.__init__\(\) got an unexpected keyword argument '(\w+)'$"
)
_FIXED: dict[tuple[str, str], str] = {
    ("TypeError", "callable replacement is not yet supported in re.sub()"): (
        r"pass a string replacement (\1 is a group), or join the pieces of re.finditer"
    ),
}
"""Interpreter messages about what it lacks, and what to write instead."""
_NOT_SUBSCRIPTABLE = re.compile(r"^'([A-Za-z_][A-Za-z0-9_]*)' object is not subscriptable$")
_NOT_JSON = re.compile(r"^Object of type ([A-Za-z_][A-Za-z0-9_]*) is not JSON serializable$")
_OS_CALL = re.compile(r"^'([a-z_.A-Z]+)' is not supported in this environment$")
_BUILTIN_TYPES = {
    "str": str,
    "list": list,
    "dict": dict,
    "int": int,
    "float": float,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "bytes": bytes,
}
_OS_CALLS = {
    "Path": "files are not available in the sandbox: use the capabilities",
    "open": "files are not available in the sandbox: use the capabilities",
    "os": "the environment is not available in the sandbox: use the capabilities",
}
_UNBOUND = re.compile(r"^cannot access local variable '([A-Za-z_][A-Za-z0-9_]*)'")
_NOT_ITERABLE = re.compile(r"^'([A-Za-z_][A-Za-z0-9_]*)' object is not iterable$")
_COROUTINE = re.compile(r"^'coroutine' object ")
_AWAIT = (
    "in async def main() a capability call must be awaited: await it, as in "
    "x = await ns.name(...), or gather several with await asyncio.gather(...)"
)
_NOT_AWAITABLE = "An asyncio.Future, a coroutine or an awaitable is required"


def explain(exc_type: str, message: str, known: Known, where: Where | None) -> str:
    """The interpreter's `exc_type: message`, with what to change when it is known."""
    text = f"{exc_type}: {message}" if message else exc_type
    hint = _hint(exc_type, message, known, where)
    return text if hint is None else f"{text}; {hint}"


def _hint(exc_type: str, message: str, known: Known, where: Where | None) -> str | None:
    if exc_type == "NameError" and (found := _NAME.match(message)):
        return _name(found[1], known, where)
    if exc_type == "UnboundLocalError" and (found := _UNBOUND.match(message)):
        if found[1] in known.roots:
            return f'"{found[1]}" is a capability namespace: give the variable another name'
        return None
    if exc_type == "AttributeError" and (found := _MODULE_ATTRIBUTE.match(message)):
        return _module_attribute(found[1], found[2], known)
    if exc_type in ("AttributeError", "TypeError") and _COROUTINE.match(message):
        return _AWAIT
    if exc_type == "AttributeError" and (found := _ATTRIBUTE.match(message)):
        return _shadowed(found[2], known, where) or _attribute(found[1], found[2], known, where)
    if exc_type == "AttributeError" and (found := _TYPE_ATTRIBUTE.match(message)):
        return _type_attribute(found[1], found[2])
    if (exc_type, message) in _FIXED:
        return _FIXED[exc_type, message]
    if exc_type == "TypeError" and (found := _JSON_KEYWORD.match(message)):
        instead = ": convert the value first, e.g. vars(obj) or list(s)"
        return f"json.dumps takes no {found[1]}=" + (instead if found[1] == "default" else "")
    if exc_type == "LookupError" and message.startswith("unknown encoding: "):
        return "the sandbox has utf-8 and ascii only: use .decode('utf-8')"
    if exc_type == "NotImplementedError" and "method decorators" in message:
        return "use a plain method and call it: obj.name()"
    if exc_type == "KeyError" and (found := _KEY.match(message)):
        failing = _failing_subscript(known, where)
        declared: Any = None
        if failing is not None:
            declared = _type_of(failing[0].value, failing[1], known.capabilities, 0)
        if is_typeddict(declared):
            keys = [f.name for f in t.fields_of(declared, result=True)]
            close = close_key(found[1], keys)
            return close or f"{declared.__name__} has: {printable(', '.join(keys))}"
        held = None if failing is None else _held_keys(known, failing, found[1])
        if held is not None:
            close = close_key(found[1], held)  # and the keys: a near name may not be meant
            listed = "the result has: " + printable(", ".join(held))
            return f"{close} {listed}" if close else listed
        return close_key(found[1], known.vocabulary.keys | known.keys)
    if exc_type == "TypeError" and (found := _NOT_SUBSCRIPTABLE.match(message)):
        fields = known.vocabulary.objects.get(found[1])
        if fields:
            owner, key = _subscript(where)
            field = key if key in fields else fields[0]
            example = f"{owner}.{field}" if key in fields else f"e.g. {owner}.{field}"
            return f"{found[1]} is an object: read its fields as attributes, {example}"
        return None
    if exc_type == "TypeError" and (
        (found := _NOT_JSON.match(message)) or (found := _NOT_ITERABLE.match(message))
    ):
        if found[1] in known.vocabulary.objects:
            return "turn a result object into a dict with vars(x) first"
        return None
    if exc_type == "TypeError" and message == _NOT_AWAITABLE:
        return (
            "in def main() capability calls return their results directly; to run them "
            "together, define async def main() and await asyncio.gather(...)"
        )
    if exc_type == "RuntimeError" and (found := _OS_CALL.match(message)):
        return _OS_CALLS.get(found[1].split(".", 1)[0], "use the capabilities")
    if exc_type == "PermissionError" and where is not None and "open(" in where.source:
        return _OS_CALLS["open"]
    return None


def _name(name: str, known: Known, where: Where | None) -> str | None:
    if name in MODULES:
        return f'add "import {name}" at the top of the program'
    if hasattr(builtins, name) and not name.startswith("_"):
        return _unsupported(name if name[0].isupper() else f"{name}()", name)
    used_as_namespace = where is not None and where.source[where.column - 1 :].startswith(
        f"{name}."
    )
    if used_as_namespace and not known.capabilities:
        return NONE_AVAILABLE  # a builtin's spelling would only mislead
    candidates = known.names | known.roots | frozenset(MODULES)
    if not used_as_namespace:  # `x.attr` is a namespace, a module or a value, not a builtin
        candidates |= _builtin_names()
    close = close_key(name, candidates)
    if close is None and used_as_namespace and known.roots:
        return "the capability namespaces are " + ", ".join(sorted(known.roots))
    return close


def _shadowed(attribute: str, known: Known, where: Where | None) -> str | None:
    """For `tickets.get(...)` failing on a value: the program bound the name of a capability
    namespace it may use, and the line that did (only namespaces it sees are named)."""
    if where is None:
        return None
    found = _NAMESPACE_ATTRIBUTE.match(where.source, where.column - 1)
    if found is None or found[2] != attribute or found[1] not in known.roots:
        return None
    bound = _bound_at(found[1], known.source, where.line)
    if bound is None:
        return None
    line, parameter = bound
    how = "takes as a parameter" if parameter else "assigned"
    return (
        f'"{found[1]}" is a capability namespace, which line {line} {how}: give the variable '
        "another name"
    )


_NAMESPACE_ATTRIBUTE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _bound_at(name: str, source: str, line: int) -> tuple[int, bool] | None:
    """Where the function holding `line` (or one enclosing it) binds `name`: the last line
    at or before `line` that assigns it, else the first after it (a loop's), else its
    parameter (True); None when none binds it (a global of that name is the namespace)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    holding = [
        node
        for node in ast.walk(tree)
        if isinstance(node, _SCOPES) and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    for scope in sorted(holding, key=lambda node: -node.lineno):
        stores: list[int] = []
        pending: list[ast.AST] = list(ast.iter_child_nodes(scope))
        while pending:
            node = pending.pop()
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
                stores.append(node.lineno)
            elif not isinstance(node, (*_SCOPES, ast.ClassDef, ast.comprehension)):
                pending.extend(ast.iter_child_nodes(node))
        if stores:
            before = [at for at in stores if at <= line]
            return (max(before) if before else min(stores)), False
        arguments = scope.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
        parameter = next((a for a in every if a.arg == name), None)
        if parameter is not None:
            return parameter.lineno, True
    return None


def _module_attribute(module: str, attribute: str, known: Known) -> str | None:
    if module in known.roots or module.split(".", 1)[0] in known.roots:
        return namespace_hint(module, attribute, known.vocabulary.capabilities)
    real = _module_names(module)
    if not real:
        return None
    if attribute in real:
        return _unsupported(f"{module}.{attribute}", f"{module}.{attribute}")
    return close_key(attribute, real)


def _attribute(owner: str, attribute: str, known: Known, where: Where | None) -> str | None:
    fields = known.vocabulary.objects.get(owner)
    if fields is not None:
        if attribute == "__dict__":
            return "turn a result object into a dict with vars(x)"
        close = close_key(attribute, fields)
        return close or f"{owner} has: {printable(', '.join(fields))}"
    kind = _BUILTIN_TYPES.get(owner)
    if kind is None:
        return None
    span = (
        ""
        if where is None or where.end_line != where.line
        else where.source[where.column - 1 : where.end_column - 1]
    )
    called = f".{attribute}(" in span
    value = _written(span.split(f".{attribute}", 1)[0]) if f".{attribute}" in span else "x"
    if kind is dict and not called:
        return f'to read its key "{attribute}", write {value}["{attribute}"]'
    if hasattr(kind, attribute) and not attribute.startswith("_"):
        if not called:  # the sandbox calls methods; it does not hand them out as values
            return f"{owner}.{attribute} is a method: call it, {value}.{attribute}(...)"
        return _unsupported(f"{owner}.{attribute}()", f"{owner}.{attribute}")
    return close_key(attribute, [a for a in dir(kind) if not a.startswith("_")])


def _written(text: str) -> str:
    """An expression of the program as it wrote it, when it is a short name or a chain of
    names and subscripts (`changed`, `page["items"][0]`), else `x`."""
    text = text.strip()
    return text if len(text) <= 40 and _CHAIN.fullmatch(text) else "x"


_CHAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*|\[[^\[\]]{1,30}\])*")


def _subscript(where: Where | None) -> tuple[str, str | None]:
    """For a failing `value["key"]`: `value` as the program wrote it, and the key."""
    if where is None or where.end_line != where.line:
        return "x", None
    span = where.source[where.column - 1 : where.end_column - 1]
    try:
        node = ast.parse(span, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "x", None
    if not isinstance(node, ast.Subscript):
        return "x", None
    key = node.slice.value if isinstance(node.slice, ast.Constant) else None
    return _written(ast.unparse(node.value)), key if isinstance(key, str) else None


def _type_attribute(owner: str, attribute: str) -> str | None:
    """`str.maketrans`, or `str.lower` taken as a value (`key=str.lower`), on a built-in type."""
    kind = _BUILTIN_TYPES.get(owner)
    if kind is None or not hasattr(kind, attribute) or attribute.startswith("_"):
        return None
    key = f"{owner}.{attribute}"
    if key in INSTEAD or not callable(getattr(kind, attribute)):
        return _unsupported(key, key)
    return f"{key} cannot be taken as a value: use a lambda, e.g. lambda x: x.{attribute}()"


def _unsupported(what: str, key: str) -> str:
    instead = INSTEAD.get(key)
    text = f"{what} is not supported in the sandbox"
    return f"{text}: {instead}" if instead else text


def _held_keys(known: Known, failing: tuple[ast.Subscript, ast.AST], key: str) -> list[str] | None:
    """For a failing `x["key"]` on a dict whose type declares no keys (an upstream tool's
    parsed text, a `dict[str, Any]`): the keys that dict has, when the program's code says
    it is a capability's result (or a key or an index of one, as written) and that value,
    as the call gave it, lacks the key. The value is the program's own data."""
    node, scope = failing
    path = _value_path(node.value, scope, known.capabilities, 0)
    if path is None or path[0] not in known.results:
        return None
    value = known.results[path[0]]
    for step in path[1]:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    if not isinstance(value, dict) or key in value:
        return None  # not the value the program holds now
    keys = [k for k in value if isinstance(k, str)]
    shown = [k if len(k) <= 40 else k[:37] + "..." for k in keys[:40]]
    return shown + (["..."] if len(keys) > 40 else [])


def _failing_subscript(known: Known, where: Where | None) -> tuple[ast.Subscript, ast.AST] | None:
    """The failing `x["key"]` and the function it is in; its declared type is what
    `_type_of` makes of `x`, as far as the program's own code says it."""
    if where is None:
        return None
    try:
        tree = syntax.parse(known.source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == where.func:
            scope = node
    for node in ast.walk(scope):
        if isinstance(node, ast.Subscript) and _at(node, where):
            return node, scope
    return None


def _value_path(
    expr: ast.expr, scope: ast.AST, capabilities: Mapping[str, Capability], depth: int
) -> tuple[str, list[Any]] | None:
    """`("fs.get_file_info", ["meta"])` for an expression that is a capability call's result
    followed by the constant keys and indexes the program wrote; None otherwise (a loop's
    item is not one value)."""
    if depth > 16:
        return None
    if isinstance(expr, ast.Await):
        return _value_path(expr.value, scope, capabilities, depth + 1)
    if isinstance(expr, ast.Call):
        name = _dotted(expr.func)
        return (name, []) if name in capabilities else None
    if isinstance(expr, ast.Name):
        sources = _bindings(expr.id, scope)
        if len(sources) != 1 or not hasattr(sources[0], "lineno"):  # a loop's item
            return None
        return _value_path(sources[0], scope, capabilities, depth + 1)
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        base = _value_path(expr.value, scope, capabilities, depth + 1)
        return None if base is None else (base[0], [*base[1], expr.slice.value])
    return None


def _at(node: ast.expr, where: Where) -> bool:
    """Whether a node starts where the interpreter says the failing expression does."""
    if node.lineno != where.line:
        return False
    prefix = where.source.encode("utf-8")[: node.col_offset].decode("utf-8", errors="ignore")
    return len(prefix) + 1 == where.column


def _type_of(
    expr: ast.expr, scope: ast.AST, capabilities: Mapping[str, Capability], depth: int
) -> Any:
    """The declared type of an expression, as far as capability signatures say."""
    if depth > 16:
        return None
    if isinstance(expr, ast.Await):
        return _type_of(expr.value, scope, capabilities, depth + 1)
    if isinstance(expr, ast.Call):
        found = capabilities.get(_dotted(expr.func))
        return None if found is None else found.result_annotation
    if isinstance(expr, ast.Name):
        sources = _bindings(expr.id, scope)
        return _type_of(sources[0], scope, capabilities, depth + 1) if len(sources) == 1 else None
    if not isinstance(expr, ast.Subscript | ast.Attribute):
        return None
    base = _optional(_type_of(expr.value, scope, capabilities, depth + 1))
    if isinstance(expr, ast.Attribute):
        return _field(base, expr.attr) if t.is_record(base) else None
    key = expr.slice
    if is_typeddict(base) and isinstance(key, ast.Constant):
        return _field(base, key.value)
    if get_origin(base) in (list, tuple) and get_args(base):
        return get_args(base)[0]
    if get_origin(base) is dict:
        return get_args(base)[1]
    return None


def _field(tp: Any, name: object) -> Any:
    """The declared type of field `name` of a record or dict type, if it has one."""
    return next((f.annotation for f in t.fields_of(tp, result=True) if f.name == name), None)


def _bindings(name: str, scope: ast.AST) -> list[ast.expr]:
    """What the program assigns to `name` in a scope: `name = value`, and for a loop
    `for name in items`, an item of `items` (as a subscript of it)."""
    found: list[ast.expr] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, ast.For | ast.comprehension):
            targets = [node.target]
            value = ast.Subscript(value=node.iter, slice=ast.Constant(0), ctx=ast.Load())
        else:
            continue
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            found.append(value)
    return found


def _optional(tp: Any) -> Any:
    """`X` for `X | None`; other types as they are."""
    tp = t.strip_annotated(tp)
    if t.is_union(tp):
        members = [m for m in get_args(tp) if m is not type(None)]
        return t.strip_annotated(members[0]) if len(members) == 1 else None
    return tp


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


@cache
def _builtin_names() -> frozenset[str]:
    return frozenset(n for n in dir(builtins) if not n.startswith("_"))


@cache
def _module_names(module: str) -> frozenset[str]:
    """Public names of the real standard module of that name (the one the sandbox mimics)."""
    if module not in MODULES:
        return frozenset()
    real = importlib.import_module(module)
    return frozenset(n for n in dir(real) if not n.startswith("_"))


__all__ = ["Known", "Vocabulary", "explain"]
