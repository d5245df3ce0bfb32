"""What a capability's type hints hold: scalar kinds, fields, and every type they reach.

Named types (TypedDict, dataclass, pydantic model, enum) are read the way pydantic reads
them, so what codemode says of a type is what validation does with it. Beside this module,
`constraints` reads what `Annotated` adds to a type, `rendering` writes a type as text and
`support` says which types can cross the sandbox boundary.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import functools
import sys
import types
import typing
import uuid
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Required, TypeVar, Union, get_args, get_origin

import pydantic
from pydantic.fields import FieldInfo
from typing_extensions import TypedDict, is_typeddict

NoneType = type(None)
_SCALARS: tuple[tuple[type, str, type | tuple[type, ...]], ...] = (
    (str, "str", str),
    (int, "int", int),
    (float, "float", (int, float)),
    (bool, "bool", bool),
    (NoneType, "None", NoneType),
)
"""Each scalar type, its name, and the Python types of JSON data it takes (an int is a
float's too). Looked up by identity: a type holding unhashable metadata
(`list[Annotated[int, {...}]]`) must never be hashed."""


_R = TypeVar("_R")
_REMEMBERED = 16384
"""How many hints each reading below remembers (then it starts again)."""


def by_identity(reading: Callable[[Any], _R]) -> Callable[[Any], _R]:
    """`reading` of a hint, remembered by the hint's identity: the operations of a REST
    API share their hints, and read each once. Not by equality, which would mix up hints
    that read differently (`int | str` equals `str | int`) and would hash them."""
    memo: dict[int, tuple[Any, _R]] = {}

    @functools.wraps(reading)
    def remembered(tp: Any) -> _R:
        found = memo.get(id(tp))
        if found is not None and found[0] is tp:  # the hint itself, held: not a new one
            return found[1]
        value = reading(tp)
        if len(memo) >= _REMEMBERED:
            memo.clear()
        memo[id(tp)] = (tp, value)
        return value

    return remembered


_SCALAR_IDS = frozenset(id(scalar) for scalar, _, _ in _SCALARS)


TEXT_FORMATS: dict[type, str] = {
    datetime.date: "date",
    datetime.datetime: "date-time",
    datetime.time: "time",
    decimal.Decimal: "decimal",
    uuid.UUID: "uuid",
}
"""The types that cross as text, each with the `format` its JSON Schema gives it (pydantic
gives a Decimal none: it takes a number or a string, and writes a string). The program
passes ISO text, or its own `date`, `datetime`, `time` or `Decimal`; validation makes the
declared type for the handler, and canonical arguments hold the text."""


def text_format(tp: Any) -> str | None:
    """ "date" for `date`, and so on (see `TEXT_FORMATS`); None for any other type."""
    for kind, name in TEXT_FORMATS.items():
        if tp is kind:
            return name
    return None


def scalar_name(tp: Any) -> str | None:
    """ "int" for int, and so on; None for any type that is not a scalar."""
    for scalar, name, _ in _SCALARS:
        if tp is scalar:
            return name
    return None


def json_kind(tp: Any) -> type | tuple[type, ...] | None:
    """The JSON data types a scalar type takes, or None for any other type."""
    for scalar, _, kinds in _SCALARS:
        if tp is scalar:
            return kinds
    return None


def fits_kind(tp: Any, value: object) -> bool:
    """Whether JSON data `value` is of scalar type `tp` (True and False are not numbers)."""
    kinds = json_kind(tp)
    return (
        kinds is not None
        and isinstance(value, kinds)
        and (tp is bool or not isinstance(value, bool))
    )


def field_hints(tp: Any) -> dict[str, Any]:
    """A TypedDict's (or class's) field hints, without `Required`/`NotRequired` wrappers
    (`__required_keys__` says which keys are required)."""
    given = getattr(tp, "__annotations__", None)
    if is_typeddict(tp) and isinstance(given, dict) and all(map(_evaluated, given.values())):
        hints = dict(given)  # what get_type_hints would rebuild, object for object
    else:
        hints = typing.get_type_hints(tp, include_extras=True)
    for name, hint in hints.items():
        while get_origin(hint) in (Required, NotRequired):
            hint = get_args(hint)[0]
        hints[name] = hint
    return hints


def _evaluated(hint: Any) -> bool:
    """Whether a hint holds nothing `get_type_hints` would evaluate: no text, no forward
    reference, no bare None (a TypedDict a schema was read as, whose hints are objects)."""
    stack = [hint]
    while stack:
        current = stack.pop()
        if current is None or isinstance(current, str | typing.ForwardRef):
            return False
        if get_origin(current) is not Literal:  # a Literal's values are not hints
            stack.extend(get_args(current))
    return True


def portable(tp: Any, memo: dict[int, Any] | None = None) -> Any:
    """`tp` with every `typing.TypedDict` rebuilt as a `typing_extensions` one.

    pydantic reads only the latter on Python 3.11, and hosts naturally write the former.
    """
    if sys.version_info >= (3, 12):
        return tp
    memo = {} if memo is None else memo
    if id(tp) in memo:
        return memo[id(tp)]
    origin = get_origin(tp)
    if is_typeddict(tp) and type(tp).__module__ == "typing":
        hints = field_hints(tp)
        fields = {
            name: (Required if name in tp.__required_keys__ else NotRequired)[portable(hint, memo)]
            for name, hint in hints.items()
        }
        rebuilt = TypedDict(tp.__name__, fields)  # type: ignore[misc]
        rebuilt.__qualname__ = tp.__qualname__
        memo[id(tp)] = rebuilt
        return rebuilt
    if origin is None or origin is Literal:
        return tp
    args = tuple(portable(arg, memo) if arg is not Ellipsis else arg for arg in get_args(tp))
    if origin is typing.Annotated:
        return typing.Annotated[(args[0], *tp.__metadata__)]
    if is_union(tp):
        return Union[args]  # noqa: UP007 - built from a runtime tuple
    return origin[args]


def strip_annotated(tp: Any) -> Any:
    while get_origin(tp) is typing.Annotated:
        tp = get_args(tp)[0]
    return tp


def is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def is_record(tp: Any) -> bool:
    """A dataclass or pydantic model: read by attribute in the program."""
    return isinstance(tp, type) and (
        dataclasses.is_dataclass(tp) or issubclass(tp, pydantic.BaseModel)
    )


def is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def is_named(tp: Any) -> bool:
    return is_record(tp) or is_typeddict(tp) or is_enum(tp)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a named type."""

    name: str
    annotation: Any
    required: bool
    description: str | None = None
    """What the type says of it (`Field(description=...)`)."""


@functools.lru_cache(maxsize=16384)
def _typeddict_fields(tp: Any, result: bool) -> tuple[Field, ...]:
    """A TypedDict's fields, read once (a REST API's thousand operations share them)."""
    hints = field_hints(tp)
    required = tp.__required_keys__
    return tuple(
        Field(name, hint, name in required)
        for name, hint in hints.items()
        if not (result and _may_exclude(hint) and FieldInfo.from_annotation(hint).exclude)
    )


def _may_exclude(hint: Any) -> bool:
    """Whether a `Field` anywhere in `hint` says `exclude`: only then can pydantic's reading
    of it (which makes a FieldInfo, for each of a REST API's thousands of fields) leave the
    field out."""
    stack = [hint]
    while stack:
        current = stack.pop()
        for metadata in getattr(current, "__metadata__", ()):
            if isinstance(metadata, FieldInfo) and metadata.exclude:
                return True
        stack.extend(get_args(current))
    return False


def fields_of(tp: Any, *, result: bool = False) -> list[Field]:
    """The fields of a TypedDict, dataclass or pydantic model, in declaration order.

    As an argument, a model's fields go by their alias (what validation takes). As a
    `result`, a named type has what crosses into the program: fields by name, those
    pydantic's serialization leaves out (`Field(exclude=True)`, as a default or inside
    `Annotated`) left out, a model's computed fields added, and a record's every field
    always present.
    """
    if is_typeddict(tp):
        return list(_typeddict_fields(tp, result))
    if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        if result:
            declared = [
                Field(name, info.annotation, True, info.description)
                for name, info in tp.model_fields.items()
                if not info.exclude
            ]
            computed = [Field(n, c.return_type, True) for n, c in tp.model_computed_fields.items()]
            return declared + computed
        return [
            Field(info.alias or name, info.annotation, info.is_required(), info.description)
            for name, info in tp.model_fields.items()
        ]
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        infos = getattr(tp, "__pydantic_fields__", {})
        if result:
            kept = [
                f
                for f in dataclasses.fields(tp)
                if not _dataclass_field_info(f, hints[f.name], infos).exclude
            ]
        else:
            kept = [f for f in dataclasses.fields(tp) if f.init]
        return [
            Field(
                f.name,
                hints[f.name],
                result
                or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING),
            )
            for f in kept
        ]
    raise TypeError(f"{tp!r} has no fields")


def _dataclass_field_info(
    field: dataclasses.Field[Any], hint: Any, infos: dict[str, FieldInfo]
) -> FieldInfo:
    """The field as pydantic reads it: a pydantic dataclass's own record, else what the
    hint's `Annotated[..., Field(...)]` says with a `= Field(...)` default or the field's
    `metadata`."""
    if field.name in infos:
        return infos[field.name]
    default = field.default if isinstance(field.default, FieldInfo) else field
    return FieldInfo.from_annotated_attribute(hint, default)


def members(tp: Any, *, result: bool = False) -> tuple[Any, ...]:
    """The types directly inside `tp` (union members, item and value types); of a record
    as a `result`, only the fields that cross (see `fields_of`)."""
    tp = strip_annotated(tp)
    if is_union(tp):
        return get_args(tp)
    origin = get_origin(tp)
    if origin in (list, tuple):
        return tuple(arg for arg in get_args(tp) if arg is not Ellipsis)
    if origin is dict:
        return get_args(tp)[1:]
    if is_typeddict(tp) or is_record(tp):
        return tuple(field.annotation for field in fields_of(tp, result=result))
    return ()


def walk(tp: Any, *, result: bool = False, past: Container[Any] = ()) -> Iterator[Any]:
    """Every type reachable from `tp`, each named type once (recursion-safe); as a
    `result`, only through the fields that cross. The named types in `past` are neither
    yielded nor walked through."""
    seen: set[int] = set()
    stack = [tp]
    while stack:
        current = strip_annotated(stack.pop())
        if id(current) in _SCALAR_IDS:  # most of what a walk meets: nothing inside
            yield current
            continue
        if is_named(current):
            if id(current) in seen or current in past:
                continue
            seen.add(id(current))
        yield current
        stack.extend(reversed(members(current, result=result)))


def named_walk(tp: Any, *, result: bool = False) -> list[Any]:
    """The named types `walk(tp, result=result)` yields, in its order.

    Found by a walk over named types alone: each named type's own list of the named
    types right below it (`_below`) is read once and kept, so the thousand operations of
    a REST API that each reach the same large shared types walk their fields once, not
    once per operation. The order is walk's: both go depth first, in field order, and
    take each named type at its first meeting."""
    root = strip_annotated(tp)
    stack = [root] if is_named(root) else list(reversed(_below(root, result)))
    below = _BELOW_RESULT if result else _BELOW
    order: list[Any] = []
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        order.append(current)
        stack.extend(reversed(below(current)))
    return order


def _below(tp: Any, result: bool) -> tuple[Any, ...]:
    """The named types reached from `tp`'s members without passing another named type,
    in walk order, each once."""
    found: dict[int, Any] = {}
    stack = list(reversed(members(tp, result=result)))
    while stack:
        current = strip_annotated(stack.pop())
        if is_named(current):
            found.setdefault(id(current), current)
        else:
            stack.extend(reversed(members(current, result=result)))
    return tuple(found.values())


_BELOW = by_identity(lambda tp: _below(tp, False))
_BELOW_RESULT = by_identity(lambda tp: _below(tp, True))


def reaches_named(tp: Any) -> bool:
    """Whether a TypedDict, dataclass or pydantic model is reachable from `tp`: only such
    a type carries a pydantic config (a scalar, list or dict one has none to check)."""
    return any(is_typeddict(current) or is_record(current) for current in walk(tp))


def is_scalar(tp: Any) -> bool:
    """str, int, float, bool, None, a Literal of those, or a union of them."""
    tp = strip_annotated(tp)
    if is_union(tp):
        return all(is_scalar(arg) for arg in get_args(tp))
    return scalar_name(tp) is not None or get_origin(tp) is Literal


def access(tp: Any) -> Literal["attributes", "keys"] | None:
    """How the program reads the fields of a result of this type, if it has fields."""
    tp = strip_annotated(tp)
    if is_record(tp):
        return "attributes"
    if is_typeddict(tp) or get_origin(tp) is dict:
        return "keys"
    return None


__all__ = [
    "TEXT_FORMATS",
    "Field",
    "NoneType",
    "access",
    "by_identity",
    "field_hints",
    "fields_of",
    "fits_kind",
    "is_enum",
    "is_named",
    "is_record",
    "is_scalar",
    "is_union",
    "json_kind",
    "members",
    "named_walk",
    "portable",
    "reaches_named",
    "scalar_name",
    "strip_annotated",
    "text_format",
    "walk",
]
