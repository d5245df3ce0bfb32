"""A program's text turned into a capability: `programs.<name>`, typed by its main's parameters.

A saved program is called like any capability, so its signature must be one binding can
check: the keyword-only parameters of its `main`, each annotated and with a literal
default. The annotations are read from the tree, never evaluated (a program saved by the
model is text from the model), and only types that cross the sandbox as JSON are taken.
The capability's handler only hands the bound arguments back: the program's own body
runs in the caller's interpreter (`codemode.programs`), so binding, authorization and
audit of the entry are the ones every call has, and nothing more runs on the host.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import inspect
import io
import json
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Union

import pydantic

from codemode import syntax
from codemode.capabilities.registry import Capability, build_capability
from codemode.capabilities.rendering import notation
from codemode.capabilities.results import Projection
from codemode.context import CallContext
from codemode.types import JSONObject

NAMESPACE = "programs"
"""The capability namespace of saved programs (reserved while saved programs are on)."""
SAVE = f"{NAMESPACE}.save"
"""The action a `save_as` is authorized as (never searched, described or written by a
program: only the host's trailer calls it)."""
HOST_NOTE = "Saved program (host)."
OWN_NOTE = "Saved program (yours)."
TYPES = "int, float, str, bool, None, Any, list[...], dict[str, ...] and |"
"""What a saved program's annotations may be written with."""
ASYNC_MAIN = "a saved program's main must be def main(), not async def main()"
RESERVED = (
    '"{name}" is a name codemode keeps for calling saved programs '
    "(names starting with _cm_, and _p with six digits): rename it"
)
"""A name the code that runs saved programs binds, in a text that would be fed beside it."""
CONTROL = (
    "a saved program cannot hold a form feed or vertical tab outside a string "
    "(line {line}): remove it"
)
"""A character that resets Python's indentation column, in a text indented into its
caller's: it would move the text's lines out of the place they are fed in."""
SHARED_NAMES = (
    "a saved program cannot declare global or nonlocal names (line {line}): "
    "pass values to its functions and return them"
)
"""A `global` in a text fed inside its caller's would name the caller's globals, not the
text's own top-level names: the text would do other than what was reviewed alone."""
RESPELLED = (
    '"programs" is written with letters Python reads as others (line {line}): '
    "write it in plain ASCII"
)
"""`programs` spelled with letters NFKC folds into its own (a fullwidth s): Python reads the
name, but the code that calls saved programs finds it by its ASCII bytes."""
NOT_FINITE = 'main() parameter "{name}": its default must not hold inf or nan'
"""A default the save's argument document could not write as a literal."""
GENERATED = re.compile(r"_cm_.*|_p[0-9]{6}", re.DOTALL)
"""The names the code that runs saved programs binds (`codemode.composition`)."""
_CONTROLS = ("\x0c", "\x0b")

_NAMED: dict[str, Any] = {
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "None": type(None),
    "Any": Any,
    "list": list[Any],
    "dict": dict[str, Any],
}


class SignatureError(ValueError):
    """A program whose main cannot be a saved program's signature (the text says why)."""


@dataclass(frozen=True, slots=True)
class Signature:
    """What a program's text says of it as a capability."""

    parameters: tuple[inspect.Parameter, ...]
    returns: Any
    calls: frozenset[str]
    """The saved programs it calls, by bare name (`programs.<name>` in its text)."""


def program_signature(source: str) -> Signature:
    """The signature of a program's main (its keyword-only parameters and return
    annotation, `Any` without one) and the saved programs it calls; SignatureError for a
    main that cannot be one. The program is assumed to pass the preflight already."""
    line = stray_control(source)
    if line is not None:
        raise SignatureError(CONTROL.format(line=line))
    try:
        tree = syntax.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise SignatureError("the program must parse as Python") from None
    main: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main":
            main = node
    if main is None:
        raise SignatureError("the program must define main(): add def main(): at top level")
    reserved = reserved_name(tree)
    if reserved is not None:
        raise SignatureError(RESERVED.format(name=reserved[0]))
    respelt = respelled(tree, source)
    if respelt is not None:
        raise SignatureError(RESPELLED.format(line=respelt.lineno))
    if isinstance(main, ast.AsyncFunctionDef):
        raise SignatureError(ASYNC_MAIN)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global | ast.Nonlocal):
            raise SignatureError(SHARED_NAMES.format(line=node.lineno))
    parameters = []
    for arg, default in zip(main.args.kwonlyargs, main.args.kw_defaults, strict=True):
        name = arg.arg
        if name.startswith("_"):
            raise SignatureError(f'main() parameter "{name}": its name must not start with "_"')
        if arg.annotation is None or default is None:
            raise SignatureError("main() parameters must be keyword-only, each with a default")
        annotation = _type(arg.annotation, f'main() parameter "{name}"')
        try:
            value = ast.literal_eval(default)
            pydantic.TypeAdapter(annotation).validate_python(value, strict=True)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise SignatureError(
                f'main() parameter "{name}": its default must be a literal of its type'
            ) from None
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise SignatureError(NOT_FINITE.format(name=name)) from None
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=value, annotation=annotation
            )
        )
    returns = Any if main.returns is None else _type(main.returns, "main() result")
    return Signature(tuple(parameters), returns, calls_of(tree))


def calls_of(tree: ast.AST) -> frozenset[str]:
    """The saved programs a tree names (`programs.<name>`), by bare name."""
    return frozenset(
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == NAMESPACE
    )


def reserved_name(tree: ast.AST) -> tuple[str, ast.AST] | None:
    """The first name a text writes that the code running saved programs binds (`_cm_...`,
    `_p000001`), with where it is written: such a text could rebind what that code holds."""
    for name, node in sorted(_names(tree), key=_place):
        if GENERATED.fullmatch(name):
            return name, node
    return None


def _names(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """Every identifier a tree writes (read, bound, imported, declared or an attribute;
    not a keyword argument's name, which binds nothing)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword):
            continue  # an argument's name binds nothing the program reads
        for field in ("id", "attr", "arg", "name", "asname", "rest"):
            value = getattr(node, field, None)
            if isinstance(value, str):
                yield value, node
        if isinstance(node, ast.Global | ast.Nonlocal):
            yield from ((name, node) for name in node.names)
        if isinstance(node, ast.MatchClass):
            yield from ((name, node) for name in node.kwd_attrs)


def respelled(tree: ast.AST, source: str) -> ast.Name | None:
    """The first `programs` a text writes in other letters than its ASCII ones (Python
    folds a fullwidth s into an s), if any."""
    lines = source.split("\n")
    for node in sorted(ast.walk(tree), key=lambda n: _place(("", n))):
        if isinstance(node, ast.Name) and node.id == NAMESPACE:
            data = lines[node.lineno - 1].encode("utf-8") if node.lineno <= len(lines) else b""
            if data[node.col_offset : node.end_col_offset] != NAMESPACE.encode():
                return node
    return None


def _place(found: tuple[str, ast.AST]) -> tuple[int, int]:
    return getattr(found[1], "lineno", 0), getattr(found[1], "col_offset", 0)


def stray_control(source: str) -> int | None:
    """The first line holding a form feed or vertical tab outside a string, if any: either
    resets the indentation column Python counts, so a line indented into another text
    could land outside the place it was put (None: there is none)."""
    if not any(c in source for c in _CONTROLS):
        return None
    strings: list[tuple[tuple[int, int], tuple[int, int]]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING:
                strings.append((token.start, token.end))
    except (tokenize.TokenError, SyntaxError):
        pass  # what was read is what is known: a character past it counts as outside
    for number, text in enumerate(source.split("\n"), 1):
        for column, character in enumerate(text):
            if character in _CONTROLS and not any(
                start <= (number, column) < end for start, end in strings
            ):
                return number
    return None


def _type(node: ast.expr, what: str) -> Any:
    """The type an annotation writes, from the few names a saved program may use."""
    if isinstance(node, ast.Constant) and node.value is None:
        return type(None)
    if isinstance(node, ast.Name) and node.id in _NAMED:
        return _NAMED[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return Union[_type(node.left, what), _type(node.right, what)]  # noqa: UP007
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        inner = node.slice
        if node.value.id == "list":
            return list[_type(inner, what)]  # type: ignore[misc]
        if (
            node.value.id == "dict"
            and isinstance(inner, ast.Tuple)
            and len(inner.elts) == 2
            and isinstance(inner.elts[0], ast.Name)
            and inner.elts[0].id == "str"
        ):
            return dict[str, _type(inner.elts[1], what)]  # type: ignore[misc]
    raise SignatureError(f"{what}: its type must be written with {TYPES}")


@dataclass(frozen=True, eq=False)
class SavedCapability(Capability):
    """A saved program as a capability: its entry hands back the bound arguments, and
    `describe` shows the program's own result type."""

    source: str = ""
    owner: str | None = None
    """None for the host's (every subject sees it); else the subject that saved it."""
    calls: frozenset[str] = frozenset()
    digest: str = ""
    """A digest of its text (a replaced program is another capability)."""

    @functools.cached_property
    def projection(self) -> Projection:
        """The entry's value is the bound arguments, whatever the program returns."""
        return Projection(Any)

    @property
    def input_schema(self) -> JSONObject:
        """Its parameters as JSON Schema, each with its `default`: a caller that leaves
        one out runs with it, and a client that shows a form (a direct tool) needs it."""
        schema = super().input_schema
        properties = schema.get("properties")
        for parameter in self.parameters:
            if isinstance(properties, dict) and isinstance(properties.get(parameter.name), dict):
                properties[parameter.name] = {
                    **properties[parameter.name],  # type: ignore[dict-item]
                    "default": parameter.default,
                }
        return schema

    @property
    def output_schema(self) -> JSONObject:
        schema: JSONObject = Projection(self.result_annotation).adapter.json_schema(
            mode="serialization"
        )
        return schema


def program_capability(
    name: str, source: str, *, summary: str, owner: str | None = None
) -> SavedCapability:
    """`programs.<name>` for a program's text; SignatureError for a main that cannot be
    a signature, RegistrationError for a name or summary a capability cannot have."""
    signature = program_signature(source)

    def enter(**arguments: Any) -> dict[str, Any]:
        return arguments

    enter.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        signature.parameters, return_annotation=dict[str, Any]
    )
    enter.__annotations__ = {p.name: p.annotation for p in signature.parameters}
    enter.__annotations__["return"] = dict[str, Any]
    full = f"{NAMESPACE}.{name}"
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    note = HOST_NOTE if owner is None else OWN_NOTE
    built = build_capability(
        enter,
        full,
        id=full if owner is None else f"{full}~{_owner_digest(owner)}~{digest}",
        summary=summary,
        description=f"{summary.strip()}\n\n{note}",
        search_terms=(),
    )
    fields = {f.name: getattr(built, f.name) for f in dataclasses.fields(Capability)}
    fields["result_annotation"] = signature.returns
    return SavedCapability(
        **fields, source=source, owner=owner, calls=signature.calls, digest=digest
    )


def _owner_digest(owner: str) -> str:
    """An owner as a capability id names it: a digest, never the subject itself."""
    return hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def save_capability(stage: Callable[..., object]) -> Capability:
    """`programs.save`, the action a `save_as` is authorized as: its arguments are what a
    policy reads (name, summary, parameters, source, whether it replaces one), and its
    handler `stage(**arguments, context=...)` keeps them for after the program succeeded."""

    def save(
        *,
        name: str,
        summary: str,
        parameters: list[dict[str, Any]],
        source: str,
        replaces: bool,
        context: CallContext,
    ) -> bool:
        return bool(
            stage(
                name=name,
                summary=summary,
                parameters=parameters,
                source=source,
                replaces=replaces,
                context=context,
            )
        )

    return build_capability(
        save,
        SAVE,
        id=SAVE,
        summary="Keep the program that just succeeded as a saved program.",
        description=None,
        search_terms=(),
    )


def described_parameters(capability: Capability) -> list[dict[str, Any]]:
    """A saved program's parameters as the `programs.save` document lists them."""
    return [
        {"name": p.name, "type": notation(p.annotation), "default": p.default}
        for p in capability.parameters
    ]


__all__ = [
    "ASYNC_MAIN",
    "CONTROL",
    "GENERATED",
    "HOST_NOTE",
    "NAMESPACE",
    "OWN_NOTE",
    "RESERVED",
    "SAVE",
    "TYPES",
    "SavedCapability",
    "Signature",
    "SignatureError",
    "calls_of",
    "described_parameters",
    "program_capability",
    "program_signature",
    "reserved_name",
    "save_capability",
    "stray_control",
]
