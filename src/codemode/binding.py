"""Keyword arguments from a program -> the handler's typed arguments, or a precise error.

Every message names only the program's own argument paths and the capability's declared
types, so it is safe to show the model.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple, get_args, get_origin

import pydantic
from pydantic_core import ErrorDetails
from typing_extensions import is_typeddict

from codemode import capabilities as t
from codemode.capabilities import Capability
from codemode.errors import InvalidArgumentsError, printable
from codemode.limits import LimitKind, Limits, exceeded
from codemode.types import JSONObject, JSONValue
from codemode.values import (
    TEXT_TYPES,
    CrossingError,
    TooBigError,
    TooDeepError,
    as_text,
    to_json,
)


class BoundCall(NamedTuple):
    """A call whose arguments bound: what the authorizer sees and what the handler gets.

    A named tuple, not a frozen dataclass: every call makes one, and this is built at a
    fraction of the cost."""

    arguments: JSONObject
    """The canonical document of the arguments the program passed (see `canonical`)."""
    handler_kwargs: dict[str, Any]
    """Typed values, as the handler's hints declare them."""


def closest_name(name: str, declared: Iterable[str]) -> str | None:
    """Return the declared name the program most likely meant, or None.

    Only the capability's own declared names are candidates: a hint never reveals host text.
    """
    if len(name) > 200:
        return None
    matches = difflib.get_close_matches(name, sorted(declared), n=1, cutoff=0.6)
    return matches[0] if matches else None


def close_key(name: str, candidates: Iterable[str]) -> str | None:
    """`did you mean "total"?` for the candidate `name` most likely meant, else None.

    One function for every key, field and attribute hint, so the preflight and the
    runtime word a mistake alike; the caller passes only names the reader may see.
    """
    found = difflib.get_close_matches(name, sorted(set(candidates) - {name}), n=1, cutoff=0.7)
    return f'did you mean "{printable(found[0])}"?' if found else None


def unknown_argument(name: str, hint: str | None, capability: Capability) -> str:
    """`unknown argument "nam"; did you mean "name"?`, else what the capability takes."""
    message = f"unknown argument {_quote(name)}"
    if hint:
        return f"{message}; did you mean {_quote(hint)}?"
    names = [p.name for p in capability.parameters]
    takes = ", ".join(names) if names else "no arguments"
    return f"{message}; {capability.name} takes {takes}"


def bind(
    capability: Capability,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    limits: Limits,
    ended: Callable[[], bool] = lambda: False,
) -> BoundCall:
    """Bind one call, raising InvalidArgumentsError or ResourceLimitError. `ended` says
    whether the call's execution was answered meanwhile, which stops a schema's check of
    the arguments (`Capability.document`)."""
    if args:
        raise InvalidArgumentsError("positional arguments are not accepted")
    if not kwargs and not capability.parameters:
        return _NO_ARGUMENTS
    try:
        plain = capability.plain_arguments
    except BaseException:  # its validator cannot be built: validation raises that, as ever
        plain = None
    accepted = (
        None
        if plain is None
        else plain(kwargs, limits.max_value_depth, limits.max_argument_bytes // 4)
    )
    if accepted is not None:  # plain data of the declared types: what validation gives
        arguments, handler_kwargs = accepted
    else:
        arguments, handler_kwargs = validate(capability, kwargs, limits)
    document = capability.document
    if document is not None:
        sent = _host(lambda: document(arguments, ended))
        if isinstance(sent, str):
            raise InvalidArgumentsError(sent)
        arguments, handler_kwargs = sent, dict(sent)
    return BoundCall(arguments, handler_kwargs)


def validate(
    capability: Capability, kwargs: dict[str, Any], limits: Limits
) -> tuple[JSONObject, dict[str, Any]]:
    """Bind keyword arguments by strict validation, as `bind` does whatever they are: the
    canonical arguments and the handler's, or the binding error (InvalidArgumentsError,
    ResourceLimitError; ValidatorError for a host validator's own failure)."""
    try:
        text = _flat_text(kwargs) if capability.flat else None
        if text is not None:
            # Flat scalars: nothing to walk or convert, and only strings can be large.
            if text > limits.max_argument_bytes // 4 and (
                len(_ENCODE(kwargs).encode("utf-8")) > limits.max_argument_bytes
            ):
                raise exceeded(LimitKind.ARGUMENT_SIZE, limits)
            validated = _host(
                lambda: capability.arguments_adapter.validate_python(kwargs, strict=True)
            )
        else:
            encoded = _ENCODE(_plain(kwargs, limits))
            if len(encoded) > limits.max_argument_bytes // 4 and (
                len(encoded.encode("utf-8")) > limits.max_argument_bytes
            ):
                raise exceeded(LimitKind.ARGUMENT_SIZE, limits)
            validated = _host(
                lambda: capability.arguments_adapter.validate_json(encoded, strict=True)
            )
    except pydantic.ValidationError as exc:
        raise InvalidArgumentsError(explain(capability, exc.errors(), kwargs)) from None
    handler_kwargs = {p.name: validated.get(p.name, p.default) for p in capability.parameters}
    if capability.flat:
        arguments: JSONObject = dict(validated)  # scalars: already JSON
    else:
        arguments = _host(lambda: {k: canonical(v) for k, v in validated.items()})
    return arguments, handler_kwargs


def canonical(value: Any) -> JSONValue:
    """A validated argument value as the one JSON document every reader sees.

    The authorizer, Cedar's context, audit events and traced arguments all read it: model
    fields under the names `describe` shows (their aliases), `exclude=True` fields
    included, enums as their values. Absent optional arguments are simply not there.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return canonical(value.value)
    if isinstance(value, pydantic.BaseModel):
        model = type(value).model_fields
        return {info.alias or name: canonical(getattr(value, name)) for name, info in model.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        declared = [f for f in dataclasses.fields(value) if f.init]  # as describe shows them
        return {f.name: canonical(getattr(value, f.name)) for f in declared}
    if isinstance(value, dict):
        return {str(key): canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    if isinstance(value, TEXT_TYPES):
        return as_text(value)
    raise TypeError(f"{type(value).__name__} is not an argument value")  # validated: never


class ValidatorError(Exception):
    """A host validator or serializer of an argument's type failed in a way of its own.

    Its exception (the `__cause__`) is host code's: never a binding message, even when it
    is a `CodeModeError`.
    """


def _host(run: Callable[[], Any]) -> Any:
    """Run pydantic on argument values, where the declared types' own code may run."""
    try:
        return run()
    except pydantic.ValidationError:
        raise
    except BaseException as exc:
        raise ValidatorError() from exc


_SCALARS = frozenset({str, int, bool, type(None)})
_NARROW_INT_BITS = 1024
"""Wider ints take the long way, where they are counted and checked for JSON."""
"""Argument types that are their own JSON form (floats go the long way: NaN is refused there)."""
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _plain(kwargs: dict[str, Any], limits: Limits) -> JSONValue:
    """Nested guest values as JSON data, within the depth and size limits."""
    try:
        return to_json(
            kwargs,
            max_depth=limits.max_value_depth + 1,
            root="",
            max_bytes=limits.max_argument_bytes,
        )
    except TooDeepError:
        raise exceeded(LimitKind.VALUE_DEPTH, limits) from None
    except TooBigError:
        raise exceeded(LimitKind.ARGUMENT_SIZE, limits) from None
    except CrossingError as problem:
        raise InvalidArgumentsError(
            f"argument {_quote(_render_root_path(problem.path))} {problem.reason}"
        ) from None


_NO_ARGUMENTS = BoundCall({}, {})


def _flat_text(kwargs: dict[str, Any]) -> int | None:
    """Characters of string arguments when every argument is a narrow scalar, else None."""
    text = 0
    for value in kwargs.values():
        kind = type(value)
        if kind is str:
            text += len(value)
        elif kind not in _SCALARS or (kind is int and value.bit_length() > _NARROW_INT_BITS):
            return None
    return text


def _render_root_path(path: str) -> str:
    """`['key'][0]` (from to_json) -> `key[0]`."""
    if path.startswith("['"):
        end = path.index("']")
        return path[2:end] + path[end + 2 :]
    return path


def _quote(path: str) -> str:
    """A path or name in double quotes; a key a schema declares may hold any character, and
    one that is not printable is written as its escape, so it never adds a line."""
    return '"' + printable(path).replace('"', '\\"') + '"'


_UNKNOWN_KEY = frozenset({"extra_forbidden", "unexpected_keyword_argument"})
"""A key the type does not declare, refused (`extra="forbid"`): a dataclass says so in
words of its own."""
_PRIORITY = dict.fromkeys(_UNKNOWN_KEY, 0) | {"missing": 1}


def literal_problem(annotation: Any, value: JSONValue, path: str) -> str | None:
    """The binding message for a literal argument of the wrong JSON kind or outside its
    declared bounds, or None.

    Kinds and the declared numbers of `Field` bounds are compared (the static preflight's
    check): no validator or other host code runs for a call that has not executed.
    """
    tp = t.strip_annotated(annotation)
    bounds = t.declared(annotation) if tp is not annotation else None
    if bounds is not None and not bounds.allows(value) and _fits(tp, value):
        return f"argument {_quote(path)} {_must(bounds.phrase(tp) or '')}"
    if t.json_kind(tp) is not None:
        return None if t.fits_kind(tp, value) else _must_be(tp, path)
    if t.text_format(tp) is not None:
        return None if _reads_as(tp, value) else _must_be(tp, path)
    if tp is Any:
        return None
    if t.is_union(tp):
        problems = [(member, literal_problem(member, value, path)) for member in get_args(tp)]
        if any(problem is None for _, problem in problems):
            return None
        fitting = [p for m, p in problems if _fits(t.strip_annotated(m), value)]
        return fitting[0] if fitting else _must_be(tp, path)  # the bound it breaks, if one
    origin = get_origin(tp)
    if origin is Literal:
        return None if any(_same(value, v) for v in get_args(tp)) else _must_be(tp, path)
    if t.is_enum(tp):
        return None if any(_same(value, m.value) for m in tp) else _must_be(tp, path)
    if origin in (list, tuple):
        if not isinstance(value, list):
            return _must_be(tp, path)
        args = [a for a in get_args(tp) if a is not Ellipsis]
        fixed = origin is tuple and Ellipsis not in get_args(tp)
        if fixed and len(value) != len(args):
            return f"argument {_quote(path)} must have {len(args)} items"
        for index, item in enumerate(value):
            problem = literal_problem(args[index] if fixed else args[0], item, f"{path}[{index}]")
            if problem:
                return problem
        return None
    if not isinstance(value, dict):
        return _must_be(tp, path)
    if origin is dict:
        for key, item in value.items():
            problem = literal_problem(get_args(tp)[1], item, f"{path}[{key!r}]")
            if problem:
                return problem
        return None
    if is_typeddict(tp) or t.is_record(tp):
        declared = {f.name: f.annotation for f in t.fields_of(tp)}
        for key, item in value.items():
            if key in declared:
                problem = literal_problem(declared[key], item, f"{path}.{key}")
                if problem:
                    return problem
    return None


def _reads_as(tp: Any, value: JSONValue) -> bool:
    """Whether JSON data is a valid text (or number) of a type that crosses as text, as
    strict validation reads it: pydantic's own parsers, no host code."""
    try:
        _text_adapter(tp).validate_json(_ENCODE(value), strict=True)
    except pydantic.ValidationError:
        return False
    return True


@functools.cache
def _text_adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(tp)


def _fits(tp: Any, value: JSONValue) -> bool:
    """Whether a value is of the kind bounds apply to (a number, a string, a list)."""
    if t.json_kind(tp) is not None:
        return t.fits_kind(tp, value)
    return isinstance(value, list) and get_origin(tp) in (list, tuple)


def _must_be(tp: Any, path: str) -> str:
    return f"argument {_quote(path)} must be {t.expected(tp)}"


def _same(value: JSONValue, allowed: Any) -> bool:
    return type(value) is type(allowed) and value == allowed


def explain(capability: Capability, errors: list[ErrorDetails], given: dict[str, Any]) -> str:
    """The most useful single message for the first binding problem.

    The path is shown only when every step of it is the program's own (a key it passed, a
    name the capability declares, an index into its list): a host validator can raise a
    ValidationError of its own, whose location is host text.
    """
    error = sorted(errors, key=lambda e: _PRIORITY.get(e["type"], 2))[0]
    path, annotation, owner, own = _walk(capability, error["loc"], given)
    if not own:
        top = error["loc"][0] if error["loc"] else None
        if isinstance(top, str) and top in given:
            return f"argument {_quote(top)} is not valid"
        return "the arguments are not valid"
    if error["type"] in _UNKNOWN_KEY:
        hint = closest_name(path.rsplit(".", 1)[-1], owner)
        if "." not in path:
            return unknown_argument(path, hint, capability)
        message = f"unknown argument {_quote(path)}"
        return f"{message}; did you mean {_quote(hint)}?" if hint else message
    if error["type"] == "missing":
        return f"missing required argument {_quote(path)}"
    if error["type"] in ("too_short", "too_long") and get_origin(annotation) is tuple:
        return f"argument {_quote(path)} must have {len(get_args(annotation))} items"
    if error["type"] in _BOUND_ERRORS:
        phrase = t.declared(annotation).phrase(t.strip_annotated(annotation))
        if phrase is None:  # a bound the declared type does not show: a validator's own
            return f"argument {_quote(path)} is not valid"
        return f"argument {_quote(path)} {_must(phrase)}"
    return f"argument {_quote(path)} must be {t.expected(annotation)}"


def _must(phrase: str) -> str:
    """`must be from 1 to 3`; `must have at least 1 item` for a length; `must match the
    pattern ...` when that is the one bound."""
    if phrase.startswith("matching "):
        return "must match " + phrase.removeprefix("matching ")
    if _LENGTH.match(phrase):
        return f"must have {phrase}"
    return f"must be {phrase}"


_LENGTH = re.compile(r"(at least |at most )?\d+( to \d+)? (item|character)s?\b")


_BOUND_ERRORS = frozenset(
    {
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "multiple_of",
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "too_short",
        "too_long",
    }
)
"""Errors of a declared bound: named by the bound `describe` shows, never by pydantic's text."""


def _walk(
    capability: Capability, loc: tuple[int | str, ...], given: dict[str, Any]
) -> tuple[str, Any, list[str], bool]:
    """Follow a pydantic error location through the declared types and the given values.

    Returns the program-facing path (`filter.owner`, `tags[1]`, `labels['env']`), the
    declared type at the end of it, the names declared where the path ends, and whether
    every step of the path is the program's own. Dict keys are written as Python would
    print them: `labels['env']`.
    """
    params = {p.name: p.annotation for p in capability.parameters}
    path = ""
    annotation: Any = None
    declared: list[str] = list(params)
    value: Any = given
    for index, item in enumerate(loc):
        if index == 0:
            if item not in params and item not in given:
                return "", None, declared, False
            path = str(item)
            annotation = params.get(str(item))
            value = given.get(str(item), _ABSENT)
            continue
        annotation = t.strip_annotated(annotation)
        if t.is_union(annotation):
            members = [m for m in get_args(annotation) if m is not type(None)]
            chosen = next((m for m in members if t.notation(m) == item), None)
            if chosen is not None or len(members) != 1:
                annotation = chosen if chosen is not None else annotation
                if chosen is not None:
                    continue
            else:
                annotation = members[0]
        origin = get_origin(annotation)
        if isinstance(item, int) and origin in (list, tuple):
            if not isinstance(value, list | tuple) or not 0 <= item < len(value):
                return path, None, declared, False
            args = [a for a in get_args(annotation) if a is not Ellipsis]
            annotation = args[min(item, len(args) - 1)] if origin is tuple else args[0]
            path += f"[{item}]"
            value = value[item]
        elif origin is dict:
            if not isinstance(value, dict) or item not in value:
                return path, None, declared, False
            annotation = get_args(annotation)[1]
            path += f"[{str(item)!r}]"
            value = value[item]
        elif is_typeddict(annotation) or t.is_record(annotation):
            fields = {f.name: f.annotation for f in t.fields_of(annotation)}
            passed = isinstance(value, dict) and item in value
            if str(item) not in fields and not passed:
                return path, None, declared, False
            declared = list(fields)
            annotation = fields.get(str(item))
            path += f".{item}"
            value = value[item] if passed else _ABSENT
        # anything else is a pydantic-internal step (a validator tag): not part of the path
    return path, annotation, declared, True


_ABSENT = object()
"""Where the program passed nothing (a required argument it left out)."""


__all__ = [
    "BoundCall",
    "ValidatorError",
    "bind",
    "canonical",
    "close_key",
    "closest_name",
    "explain",
    "literal_problem",
    "unknown_argument",
    "validate",
]
