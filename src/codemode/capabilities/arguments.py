"""Keyword arguments that are already plain data of their declared types, bound in one check.

Most calls pass str, int, float, bool and None, and lists and dicts of those, each of
exactly the type its parameter declares. For those, strict validation hands back equal
values, in the declared order, so binding them needs no validator: a `PlainArguments`
checks each value's exact type and declared bounds, and measures its nesting and size,
as it copies it.

It only ever answers for arguments it is sure of. Anything else (an unknown or missing
argument, a bool where an int is declared, an int where a float is, a subclass, a tuple,
NaN, an int too wide, text that is not UTF-8, a value past its bounds, nesting or size
near a limit) gives None, and strict validation runs from the start: every error, and
every value it converts, is exactly its own. It is compiled from the validator's own core
schema, and only when each parameter's schema is a kind it knows with no setting it does
not (no alias, pattern, strictness switch or validator of the host's): so it can never
judge a call that schema would judge otherwise. `tests/capabilities/test_arguments.py`
holds the two side by side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from codemode.types import JSONObject, JSONValue

Bounds = tuple[Any, Any, Any, Any, int | None, int | None]
"""(ge, gt, le, lt, min_length, max_length) of one schema, each None when not declared."""
Leaf = dict[type, tuple[tuple[Any, ...] | None, Bounds | None]]
"""A scalar schema as the exact Python types it takes, each with the values it may have
(a Literal's, or None for any) and its bounds."""
Walk = Callable[[Any, list[int], int], Any]
"""Checks and copies a container `(value, [chars left], depth)`, else raises `NotPlain`."""

_Parameter = tuple[str, Any, bool, int, type | None, Leaf | None, Walk | None]
"""(name, default, whether it is required, the JSON text of its key and of a scalar at most,
the one exact type it takes with no other check, its leaf, its walk) of one parameter."""

_NARROW = 1 << 53
"""Ints narrower than this bind as they are (wider ones, and bounds, take the long way)."""
_SCALAR_CHARS = 25
"""An upper bound of the JSON text of a narrow int, a finite float, a bool or None, with
the comma after it."""
_MAX_DEPTH = 32
"""Nesting this check follows at most (deeper arguments, and cycles, take the long way)."""
_ABSENT: Any = object()


class NotPlain(Exception):
    """The arguments are not plain data of their declared types: validation decides."""


class PlainArguments:
    """Binds the arguments of one capability when they are plain data of its declared
    types: `(kwargs, max_depth, max_chars)` -> `(arguments, handler_kwargs)`, or None.

    `arguments` is the canonical document (the declared order, passed arguments only);
    `handler_kwargs` has every parameter, its default where none was passed. Neither
    shares a container with the other or with `kwargs`. `max_depth` is the deepest a
    container may nest (the arguments' own dict not counted); `max_chars` bounds the JSON
    text of the whole document."""

    __slots__ = ("_parameters",)

    def __init__(self, parameters: list[_Parameter]) -> None:
        self._parameters = parameters

    def __call__(
        self, kwargs: Mapping[str, Any], max_depth: int, max_chars: int
    ) -> tuple[JSONObject, dict[str, Any]] | None:
        arguments: JSONObject = {}
        handler: dict[str, Any] = {}
        left = max_chars - 2  # the braces
        found = 0
        try:
            for name, default, required, cost, single, leaf, walk in self._parameters:
                value = kwargs.get(name, _ABSENT)
                if value is _ABSENT:
                    if required:
                        return None
                    handler[name] = default
                    continue
                found += 1
                kind = type(value)
                if kind is single:  # most arguments: checked here, without a call
                    if kind is int:
                        if not -_NARROW < value < _NARROW:
                            return None
                    elif kind is str:
                        if not value.isascii():
                            value.encode("utf-8")  # a lone surrogate: validation's words
                        left -= 6 * len(value)
                    elif kind is float and not math.isfinite(value):
                        return None
                    left -= cost
                    arguments[name] = handler[name] = value
                elif leaf is not None:
                    left -= cost + _scalar(leaf, value)
                    arguments[name] = handler[name] = value
                else:
                    assert walk is not None
                    budget = [left - cost]
                    handler[name] = walk(value, budget, min(max_depth, _MAX_DEPTH) - 1)
                    left = budget[0]
                    arguments[name] = _copy(handler[name])
        except (NotPlain, UnicodeEncodeError):
            return None
        if found != len(kwargs) or left < 0:
            return None  # an argument it does not declare, or text near the size bound
        return arguments, handler


def plain_arguments(
    schema: Mapping[str, Any], defaults: Mapping[str, Any]
) -> PlainArguments | None:
    """The plain check of a capability's arguments, from its arguments validator's core
    schema (a closed typed dict of its parameters, in order) and each parameter's default,
    or None when some parameter's schema is not one it knows all of."""
    if (
        schema.get("type") != "typed-dict"
        or schema.get("extra_behavior") != "forbid"
        or schema.get("computed_fields")
        or not _only(schema, _TYPED_DICT)
        or not _only(schema.get("config", {}), _CONFIG)
    ):
        return None
    fields = schema.get("fields", {})
    if list(fields) != list(defaults):
        return None
    parameters: list[_Parameter] = []
    for name, field in fields.items():
        if field.get("type") != "typed-dict-field" or not _only(field, _FIELD):
            return None
        compiled = _compile(field["schema"])
        if compiled is None:
            return None
        leaf = compiled if isinstance(compiled, dict) else None
        walk = None if isinstance(compiled, dict) else compiled
        single = None
        if leaf is not None and len(leaf) == 1 and next(iter(leaf.values())) == (None, None):
            single = next(iter(leaf))  # one exact type, no Literal values, no bounds
        cost = len(name) + 4 + _SCALAR_CHARS  # its key quoted, a colon; a comma
        required = field.get("required", True)
        parameters.append((name, defaults[name], required, cost, single, leaf, walk))
    return PlainArguments(parameters)


# -- compiling a schema ----------------------------------------------------------------

_TYPED_DICT = frozenset(
    {"type", "cls", "fields", "computed_fields", "config", "extra_behavior", "ref", "metadata"}
)
_CONFIG = frozenset({"extra_fields_behavior", "title"})
_FIELD = frozenset({"type", "schema", "required", "metadata"})
_NUMBER = frozenset({"type", "ge", "gt", "le", "lt", "metadata"})
_SIZED = frozenset({"type", "min_length", "max_length", "metadata"})
_KINDS: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool, "none": type(None)}


def _only(schema: Mapping[str, Any], allowed: frozenset[str]) -> bool:
    return all(key in allowed for key in schema)


def _compile(schema: Mapping[str, Any]) -> Leaf | Walk | None:
    """A leaf for a scalar schema, a walk for a container's, None for any other."""
    kind = schema.get("type")
    if kind in _KINDS:
        return _scalar_leaf(schema, _KINDS[kind])
    if kind == "literal":
        expected = schema.get("expected")
        if not _only(schema, frozenset({"type", "expected", "metadata"})) or not expected:
            return None
        leaf: Leaf = {}
        for value in expected:
            if type(value) not in (str, int, bool, type(None)):
                return None  # a float, an enum member: the long way
            if type(value) is int and not -_NARROW < value < _NARROW:
                return None
            allowed, _ = leaf.get(type(value), ((), None))
            leaf[type(value)] = ((*(allowed or ()), value), None)
        return None if _mixed(leaf) else leaf
    if kind == "nullable":
        if not _only(schema, frozenset({"type", "schema", "metadata"})):
            return None
        return _union([{"type": "none"}, schema["schema"]])
    if kind == "union":
        choices = schema.get("choices", ())
        if not _only(schema, frozenset({"type", "choices", "metadata"})) or any(
            not isinstance(choice, Mapping) for choice in choices
        ):
            return None  # a tagged choice, a mode or error of its own
        return _union(list(choices))
    if kind == "list":
        if not _only(schema, _SIZED | {"items_schema"}) or "items_schema" not in schema:
            return None
        bounds = _bounds(schema, sized=True)
        item = _compile(schema["items_schema"])
        return None if item is None or bounds is None else _list(item, bounds)
    if kind == "dict":
        keys = schema.get("keys_schema", {})
        if (
            not _only(schema, _SIZED | {"keys_schema", "values_schema"})
            or "values_schema" not in schema
            or keys.get("type") != "str"
            or not _only(keys, frozenset({"type", "metadata"}))
        ):
            return None
        bounds = _bounds(schema, sized=True)
        value = _compile(schema["values_schema"])
        return None if value is None or bounds is None else _dict(value, bounds)
    return None


def _mixed(leaf: Leaf) -> bool:
    """Whether a leaf takes both ints and bools, one of them only as Literal values: a
    literal may take one for the other (`True` for `1`), so the long way decides."""
    return int in leaf and bool in leaf and (leaf[int][0] is not None or leaf[bool][0] is not None)


def _scalar_leaf(schema: Mapping[str, Any], kind: type) -> Leaf | None:
    allowed = _NUMBER if kind in (int, float) else _SIZED if kind is str else frozenset({"type"})
    if not _only(schema, allowed | {"metadata"}):
        return None
    bounds = _bounds(schema, sized=kind is str, number=kind)
    if bounds is None:
        return None
    return {kind: (None, bounds if any(b is not None for b in bounds) else None)}


def _bounds(
    schema: Mapping[str, Any], *, sized: bool = False, number: type | None = None
) -> Bounds | None:
    """The schema's bounds, when each compares in Python exactly as validation compares."""
    ge, gt, le, lt = (schema.get(key) for key in ("ge", "gt", "le", "lt"))
    for bound in (ge, gt, le, lt):
        if bound is None:
            continue
        if number is None or type(bound) not in (int, float):
            return None
        if type(bound) is float and (number is int or not math.isfinite(bound)):
            return None
        if type(bound) is int and not -_NARROW < bound < _NARROW:
            return None
    low, high = schema.get("min_length"), schema.get("max_length")
    for length in (low, high):
        if length is not None and (not sized or type(length) is not int or length < 0):
            return None
    return (ge, gt, le, lt, low, high)


def _union(choices: list[Mapping[str, Any]]) -> Leaf | Walk | None:
    """Scalar choices merge into one leaf, each exact type once; at most one list and one
    dict choice besides, so which choice a value is for is known from its type alone."""
    leaf: Leaf = {}
    walks: dict[type, Walk] = {}
    for choice in choices:
        compiled = _compile(choice)
        if compiled is None:
            return None
        if isinstance(compiled, dict):
            for kind, (allowed, bounds) in compiled.items():
                if kind in leaf:
                    known, known_bounds = leaf[kind]
                    if bounds is not None or known_bounds is not None:
                        return None  # one type under two sets of bounds: the long way
                    merged = None if known is None or allowed is None else known + allowed
                    leaf[kind] = (merged, None)
                else:
                    leaf[kind] = (allowed, bounds)
            continue
        takes = list if choice.get("type") == "list" else dict
        if takes in walks:
            return None
        walks[takes] = compiled
    if _mixed(leaf):
        return None
    if not walks:
        return leaf
    scalars = leaf

    def walk(value: Any, budget: list[int], depth: int) -> Any:
        member = walks.get(type(value))
        if member is not None:
            return member(value, budget, depth)
        budget[0] -= _scalar(scalars, value)
        return value

    return walk


# -- checking a value ------------------------------------------------------------------


def _scalar(leaf: Leaf, value: Any) -> int:
    """An upper bound of the JSON text of a scalar the leaf takes, else NotPlain."""
    kind = type(value)
    found = leaf.get(kind)
    if found is None:
        raise NotPlain
    allowed, bounds = found
    if allowed is not None and value not in allowed:
        raise NotPlain
    if kind is str:
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: validation has its own words
                raise NotPlain from None
        if bounds is not None and _outside(bounds, value, len(value)):
            raise NotPlain
        return 6 * len(value) + 3  # every character escaped at worst, quotes, a comma
    if kind is int:
        if not -_NARROW < value < _NARROW:
            raise NotPlain
    elif kind is float:
        if not math.isfinite(value):
            raise NotPlain
    else:
        return _SCALAR_CHARS  # bool or None
    if bounds is not None and _outside(bounds, value, None):
        raise NotPlain
    return _SCALAR_CHARS


def _outside(bounds: Bounds, value: Any, length: int | None) -> bool:
    ge, gt, le, lt, low, high = bounds
    if length is not None:
        return (low is not None and length < low) or (high is not None and length > high)
    return (
        (ge is not None and value < ge)
        or (gt is not None and value <= gt)
        or (le is not None and value > le)
        or (lt is not None and value >= lt)
    )


def _list(item: Leaf | Walk, bounds: Bounds) -> Walk:
    sized = bounds[4] is not None or bounds[5] is not None
    if isinstance(item, dict):
        leaf = item

        def scalars(value: Any, budget: list[int], depth: int) -> list[Any]:
            if type(value) is not list or depth < 0:
                raise NotPlain
            if sized and _outside(bounds, value, len(value)):
                raise NotPlain
            left = budget[0] - 3
            for v in value:
                left -= _scalar(leaf, v)
            budget[0] = left
            return list(value)

        return scalars
    walk = item

    def items(value: Any, budget: list[int], depth: int) -> list[Any]:
        if type(value) is not list or depth < 0:
            raise NotPlain
        if sized and _outside(bounds, value, len(value)):
            raise NotPlain
        budget[0] -= 3
        return [walk(v, budget, depth - 1) for v in value]

    return items


def _dict(item: Leaf | Walk, bounds: Bounds) -> Walk:
    sized = bounds[4] is not None or bounds[5] is not None
    leaf = item if isinstance(item, dict) else None
    walk = None if isinstance(item, dict) else item

    def entries(value: Any, budget: list[int], depth: int) -> dict[str, Any]:
        if type(value) is not dict or depth < 0:
            raise NotPlain
        if sized and _outside(bounds, value, len(value)):
            raise NotPlain
        budget[0] -= 3
        kept = {}
        for key, v in value.items():
            if type(key) is not str:
                raise NotPlain
            budget[0] -= _scalar(_TEXT, key)
            if leaf is not None:
                budget[0] -= _scalar(leaf, v)
                kept[key] = v
            else:
                assert walk is not None
                kept[key] = walk(v, budget, depth - 1)
        return kept

    return entries


_TEXT: Leaf = {str: (None, None)}


def _copy(value: Any) -> JSONValue:
    """A copy of plain data that shares no container with it."""
    kind = type(value)
    if kind is list:
        return [_copy(item) for item in value]
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    return value  # type: ignore[no-any-return]


__all__ = ["NotPlain", "PlainArguments", "plain_arguments"]
