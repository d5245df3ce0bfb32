"""What the type hints of a capability mean: support checks, notation and shapes.

A type is described the way a Python programmer reads it (`list[str] | None`), and named
types (TypedDict, dataclass, pydantic model, enum) are listed once as shapes, with how the
program reads their fields: `r["key"]` for dicts, `r.key` for objects.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import sys
import types
import typing
import weakref
from collections.abc import Callable, Container, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Required, TypeVar, Union, get_args, get_origin

import pydantic
import pydantic_core
from pydantic.fields import FieldInfo
from pydantic_core import core_schema
from typing_extensions import TypedDict, is_typeddict

from codemode.errors import printable

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


def _by_identity(reading: Callable[[Any], _R]) -> Callable[[Any], _R]:
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


class UnsupportedTypeError(Exception):
    """A type hint codemode cannot carry across the sandbox boundary."""


def field_hints(tp: Any) -> dict[str, Any]:
    """A TypedDict's (or class's) field hints, without `Required`/`NotRequired` wrappers
    (`__required_keys__` says which keys are required)."""
    hints = typing.get_type_hints(tp, include_extras=True)
    for name, hint in hints.items():
        while get_origin(hint) in (Required, NotRequired):
            hint = get_args(hint)[0]
        hints[name] = hint
    return hints


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
        if not (result and FieldInfo.from_annotation(hint).exclude)
    )


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
        if is_named(current):
            if id(current) in seen or current in past:
                continue
            seen.add(id(current))
        yield current
        stack.extend(reversed(members(current, result=result)))


_CHECKED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Named types found supported, with every type they reach: not walked through again,
so operations that each return their own object around one large shared type cost the
shared type once, not once each."""


@_by_identity
def check_supported(tp: Any) -> None:
    """Raise UnsupportedTypeError naming the first type that cannot cross the boundary
    (a hint found supported is not walked again)."""
    named: list[Any] = []
    for current in walk(tp, past=_CHECKED):
        origin = get_origin(current)
        if is_named(current):
            named.append(current)
            continue
        if scalar_name(current) is not None or current is Any or is_union(current):
            continue
        if origin is Literal:
            if not all(isinstance(v, str | int | bool) or v is None for v in get_args(current)):
                raise UnsupportedTypeError(f"{current!r}: Literal values must be str, int or bool")
            continue
        if origin is list or origin is tuple:
            if not get_args(current):
                raise UnsupportedTypeError(f"{notation(current)} needs an item type")
            continue
        if origin is dict:
            args = get_args(current)
            if not args or strip_annotated(args[0]) is not str:
                raise UnsupportedTypeError(f"{notation(current)}: dict keys must be str")
            continue
        raise UnsupportedTypeError(f"{notation(current)} is not supported")
    _CHECKED.update(named)


def reaches_named(tp: Any) -> bool:
    """Whether a TypedDict, dataclass or pydantic model is reachable from `tp`: only such
    a type carries a pydantic config (a scalar, list or dict one has none to check)."""
    return any(is_typeddict(current) or is_record(current) for current in walk(tp))


def check_closed(arguments: core_schema.CoreSchema) -> None:
    """Raise UnsupportedTypeError naming the first parameter, and the type in it, that
    validation would let keep undeclared fields (`extra="allow"`). Binding hands the
    handler what validation made, while the authorizer, an approver and the audit read
    the declared fields only (what `describe` shows): an argument that may hold more than
    its type declares cannot be bound faithfully.

    `arguments` is pydantic's own core schema of the keyword-argument map, what binding
    runs: where a type's config comes from (its bases in pydantic's order, a metaclass,
    the type that encloses a plain dataclass) is pydantic's to decide, so it is read
    from what pydantic built rather than worked out again."""
    refs: dict[str, Mapping[str, Any]] = {}
    for node in _nodes(arguments, {}):
        if isinstance(node.get("ref"), str):
            refs[node["ref"]] = node
    root: Mapping[str, Any] = arguments
    while root.get("type") in ("definitions", "definition-ref"):
        root = root["schema"] if root["type"] == "definitions" else refs[root["schema_ref"]]
    for name, field in root["fields"].items():
        for node in _nodes(field["schema"], refs):
            config = node.get("config")
            if node.get("extra_behavior") == "allow" or (
                isinstance(config, Mapping) and config.get("extra_fields_behavior") == "allow"
            ):
                cls = node.get("cls")
                raise UnsupportedTypeError(
                    f'parameter "{name}": '
                    f"{cls.__name__ if isinstance(cls, type) else 'a type in it'} keeps "
                    'undeclared fields (extra="allow"), which no policy, approver or audit '
                    'would see; use extra="forbid" or "ignore"'
                )


_NOT_SCHEMAS = frozenset(
    {
        "cls",
        "config",
        "default",
        "expected",
        "members",
        "metadata",
        "ref",
        "schema_ref",
        "serialization",
    }
)
"""Keys of a core schema node whose values are not schemas validation runs (a default
value is the host's own, not what validation makes of the program's data)."""


def _nodes(
    schema: Mapping[str, Any], refs: Mapping[str, Mapping[str, Any]]
) -> Iterator[Mapping[str, Any]]:
    """Every schema node of a core schema, depth first in its own order, each once; a
    `definition-ref` is followed to the definition it names (so a recursive type ends).
    A map of fields by name is gone through whole (a field may be called `ref`)."""
    seen: set[int] = set()
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping | list | tuple) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, list | tuple):
            stack.extend(reversed(node))
            continue
        if not isinstance(node.get("type"), str):  # fields by name
            stack.extend(reversed(list(node.values())))
            continue
        yield node
        children = [v for k, v in node.items() if k not in _NOT_SCHEMAS]
        if node["type"] == "definition-ref" and node.get("schema_ref") in refs:
            children.append(refs[node["schema_ref"]])
        stack.extend(reversed(children))


@_by_identity
def notation(tp: Any) -> str:
    """How a Python programmer writes the type: `list[str] | None`, `Record`."""
    tp = strip_annotated(tp)
    name = scalar_name(tp)
    if name is not None:
        return name
    if tp is Any:
        return "Any"
    if is_union(tp):
        args = get_args(tp)
        ordered = [a for a in args if a is not NoneType] + [a for a in args if a is NoneType]
        return " | ".join(notation(arg) for arg in ordered)
    origin = get_origin(tp)
    if origin is Literal:
        return "Literal[" + ", ".join(shown(v) for v in get_args(tp)) + "]"
    if origin in (list, tuple, dict):
        inner = ", ".join("..." if a is Ellipsis else notation(a) for a in get_args(tp))
        return f"{origin.__name__}[{inner}]"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp)


def expected(tp: Any) -> str:
    """The type in words, for binding errors: `an integer or None`."""
    tp = strip_annotated(tp)
    if is_union(tp):
        words: list[str] = []
        for arg in get_args(tp):
            word = expected(arg)
            if word not in words:
                words.append(word)
        return " or ".join(words)
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(shown(v) for v in get_args(tp))
    if is_enum(tp):
        return "one of " + ", ".join(shown(m.value) for m in tp)
    if origin in (list, tuple):
        return "a list"
    if origin is dict or is_typeddict(tp) or is_record(tp):
        return "a dict"
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a bool",
        NoneType: "None",
    }.get(tp, "a JSON value")


SHOWN_MAX_CHARS = 200
"""Characters of a declared value (an enum member, a pattern) codemode's own text shows."""


def shown(value: object, *, pattern: bool = False) -> str:
    """A value a type or schema declares (a Literal or enum value, a pattern) as codemode's
    own text writes it: a Python literal, so a control or formatting character in it is an
    escape and it can never add a line or pass for codemode's words; cut past
    `SHOWN_MAX_CHARS` (marked `...`). A `pattern` with a backslash is a raw string when
    one can spell it (`r'^\\d+$'`), as a Python programmer writes a regex."""
    if not isinstance(value, str):
        return repr(value)
    text = value[:SHOWN_MAX_CHARS]
    cut = "..." if len(value) > SHOWN_MAX_CHARS else ""
    raw = pattern and "\\" in text and "'" not in text and not text.endswith("\\")
    return (f"r'{text}'" if raw and text.isprintable() else repr(text)) + cut


@dataclass(frozen=True, slots=True)
class Declared:
    """What an `Annotated[..., Field(...)]` hint declares beside its type."""

    description: str | None = None
    examples: tuple[Any, ...] = ()
    ge: Any = None
    gt: Any = None
    le: Any = None
    lt: Any = None
    multiple_of: Any = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None

    def phrase(self, tp: Any) -> str | None:
        """The constraints in words: `from 1 to 100`, `1 to 40 characters`."""
        parts: list[str] = []
        low = self.ge if self.ge is not None else self.gt
        high = self.le if self.le is not None else self.lt
        if self.ge is not None and self.le is not None:
            parts.append(f"from {self.ge} to {self.le}")
        else:
            if low is not None:
                parts.append(f"at least {low}" if self.ge is not None else f"greater than {low}")
            if high is not None:
                parts.append(f"at most {high}" if self.le is not None else f"less than {high}")
        if self.multiple_of is not None:
            parts.append(f"a multiple of {self.multiple_of}")
        base = strip_annotated(tp)
        if is_union(base):
            base = next((strip_annotated(m) for m in get_args(base) if m is not NoneType), base)
        unit = "character" if base is str else "item"
        if self.min_length is not None and self.max_length is not None:
            parts.append(f"{self.min_length} to {self.max_length} {unit}s")
        elif self.min_length is not None:
            plural = "" if self.min_length == 1 else "s"
            parts.append(f"at least {self.min_length} {unit}{plural}")
        elif self.max_length is not None:
            plural = "" if self.max_length == 1 else "s"
            parts.append(f"at most {self.max_length} {unit}{plural}")
        if self.pattern is not None:
            parts.append(f"matching the pattern {shown(self.pattern, pattern=True)}")
        return ", ".join(parts) or None

    def allows(self, value: object) -> bool:
        """Whether a JSON value meets the declared bounds, as validation would judge it."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return not (
                (self.ge is not None and value < self.ge)
                or (self.gt is not None and value <= self.gt)
                or (self.le is not None and value > self.le)
                or (self.lt is not None and value >= self.lt)
                or (_exact(value, self.multiple_of) and value % self.multiple_of != 0)
            )
        if isinstance(value, str | list):
            return not (
                (self.min_length is not None and len(value) < self.min_length)
                or (self.max_length is not None and len(value) > self.max_length)
                or (
                    isinstance(value, str)
                    and self.pattern is not None
                    and not matches(self.pattern, value)
                )
            )
        return True


def _exact(value: object, multiple_of: object) -> bool:
    """Whether `multiple_of` can be judged without float rounding (ints only)."""
    return isinstance(value, int) and type(multiple_of) is int and multiple_of > 0


@functools.lru_cache(maxsize=1024)
def _matcher(pattern: str) -> pydantic_core.SchemaValidator | None:
    """A linear-time matcher of `pattern` (the Rust regex crate, pydantic's own engine), or
    None when that engine cannot read it (lookaround, backreferences)."""
    try:
        return pydantic_core.SchemaValidator(
            core_schema.str_schema(pattern=pattern, regex_engine="rust-regex")
        )
    except pydantic_core.SchemaError:
        return None


def matches(pattern: str, text: str) -> bool:
    """Whether `text` contains a match of `pattern`, in time linear in the text (so no
    declared pattern can stall the host); True when the engine cannot read the pattern,
    which is then left to whoever validates the value."""
    matcher = _matcher(pattern)
    if matcher is None:
        return True
    try:
        matcher.validate_python(text)
    except pydantic_core.ValidationError:
        return False
    return True


_BOUNDS = ("ge", "gt", "le", "lt", "multiple_of", "min_length", "max_length", "pattern")


@_by_identity
def declared(tp: Any) -> Declared:
    """What `tp`'s `Annotated` metadata declares (pydantic `Field`, `annotated_types`);
    for `Annotated[...] | None`, what its annotated member declares."""
    if is_union(tp):
        members = (declared(member) for member in get_args(tp) if member is not NoneType)
        return next((d for d in members if d != Declared()), Declared())
    if get_origin(tp) is not typing.Annotated:
        return Declared()
    info = FieldInfo.from_annotation(tp)
    found: dict[str, Any] = {}
    for item in info.metadata:
        for name in _BOUNDS:
            value = getattr(item, name, None)
            if isinstance(value, re.Pattern):  # described, and matched, by its text
                value = value.pattern
            if value is not None:
                found[name] = value
    return Declared(
        description=info.description,
        examples=tuple(info.examples or ()),
        **found,
    )


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


@dataclass(frozen=True, slots=True)
class Shape:
    """A named type as `describe` shows it."""

    name: str
    kind: Literal["dict", "object", "enum"]
    fields: tuple[tuple[str, str, bool, str | None], ...]
    """(name, notation, required, description) of each field; the values of an enum."""

    def render(self) -> str:
        """One line of codemode's own text: a name taken from a schema (a key may hold
        any character) is written with its unprintable characters as escapes, and the
        key in `r["..."]` as the Python string literal a program would write."""
        if self.kind == "enum":
            return printable(f"{self.name}: one of " + ", ".join(f[0] for f in self.fields))
        parts = [
            (f"{name}: {type_}" if required else f"{name}?: {type_}")
            + (f" ({_one_line(doc)})" if doc else "")
            for name, type_, required, doc in self.fields
        ]
        listed = ", ".join(parts)
        if self.kind == "dict":
            key = self.fields[0][0] if self.fields else "key"
            literal = key.replace("\\", "\\\\").replace('"', '\\"')
            return printable(f'{self.name}: dict {{{listed}}}, read as r["{literal}"]')
        sample = f"r.{self.fields[0][0]}" if self.fields else "r.field"
        return printable(f"{self.name}: object ({listed}), read as {sample}")


def _one_line(text: str) -> str:
    """A field's description as a shape shows it: one line, at most 80 characters."""
    line = " ".join(text.split())
    return line if len(line) <= 80 else line[:77] + "..."


def shapes(tp: Any, *, result: bool = False) -> list[Shape]:
    """Every named type reachable from `tp`, outermost first (as a result: see fields_of)."""
    return list(_result_shapes(tp) if result else _argument_shapes(tp))


@_by_identity
def _argument_shapes(tp: Any) -> tuple[Shape, ...]:
    return tuple(_shapes(tp, result=False))


@_by_identity
def _result_shapes(tp: Any) -> tuple[Shape, ...]:
    return tuple(_shapes(tp, result=True))


def _shapes(tp: Any, *, result: bool) -> list[Shape]:
    found: list[Shape] = []
    for current in walk(tp, result=result):
        if is_enum(current):
            found.append(
                Shape(
                    current.__name__,
                    "enum",
                    tuple((shown(m.value), "", True, None) for m in current),
                )
            )
        elif is_typeddict(current):
            found.append(_typeddict_shape(current, result))
        elif is_record(current):
            found.append(_shape(current, result))
    return found


@functools.lru_cache(maxsize=16384)
def _typeddict_shape(tp: Any, result: bool) -> Shape:
    """A TypedDict's shape, made once (a REST API's thousand operations share it)."""
    return _shape(tp, result)


def _shape(tp: Any, result: bool) -> Shape:
    kind: Literal["dict", "object"] = "object" if is_record(tp) else "dict"
    fields = tuple(
        (
            f.name,
            notation(f.annotation),
            f.required,
            f.description or declared(f.annotation).description,
        )
        for f in fields_of(tp, result=result)
    )
    return Shape(tp.__name__, kind, fields)


__all__ = [
    "Declared",
    "Field",
    "Shape",
    "UnsupportedTypeError",
    "access",
    "check_closed",
    "check_supported",
    "declared",
    "expected",
    "field_hints",
    "fields_of",
    "fits_kind",
    "is_enum",
    "is_record",
    "is_scalar",
    "is_union",
    "json_kind",
    "matches",
    "notation",
    "portable",
    "reaches_named",
    "scalar_name",
    "shapes",
    "strip_annotated",
    "walk",
]
