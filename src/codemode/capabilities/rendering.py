"""How codemode's own text writes a type: its notation, its words, and its named shapes.

A type is written the way a Python programmer reads it (`list[str] | None`), and named
types (TypedDict, dataclass, pydantic model, enum) are listed once as shapes, with how the
program reads their fields: `r["key"]` for dicts, `r.key` for objects.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import uuid
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from typing_extensions import is_typeddict

from codemode.capabilities.constraints import declared, shown
from codemode.capabilities.typehints import (
    NoneType,
    by_identity,
    fields_of,
    is_enum,
    is_record,
    is_union,
    named_walk,
    scalar_name,
    strip_annotated,
    text_format,
    walk,
)
from codemode.errors import printable


@by_identity
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
    return _WORDS.get(tp, "a JSON value")


_WORDS: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a bool",
    NoneType: "None",
    datetime.date: 'a date ("2026-01-31" or a datetime.date)',
    datetime.datetime: 'a datetime ("2026-01-31T09:30:00+00:00" or a datetime.datetime)',
    datetime.time: 'a time ("09:30:00" or a datetime.time)',
    decimal.Decimal: 'a decimal (a number, "12.50" or a decimal.Decimal)',
    uuid.UUID: 'a UUID ("123e4567-e89b-42d3-a456-426614174000")',
}
"""Each scalar's words; a type that crosses as text shows the text it takes."""


_PASSED: dict[Any, str] = {
    datetime.date: '"2026-01-31" or a datetime.date',
    datetime.datetime: '"2026-01-31T09:30:00+00:00" or a datetime.datetime',
    datetime.time: '"09:30:00" or a datetime.time',
    decimal.Decimal: 'a number, "12.50" or a decimal.Decimal',
    uuid.UUID: '"123e4567-e89b-42d3-a456-426614174000"',
}
_RETURNED: dict[Any, str] = {
    datetime.date: "a datetime.date",
    datetime.datetime: "a datetime.datetime",
    datetime.time: "a datetime.time",
    decimal.Decimal: "a decimal.Decimal",
    uuid.UUID: "a str",
}
"""What `describe` says, after its JSON Schema format, of each type that crosses as text:
as an argument, what a program may pass; in a result, what the program gets."""


@by_identity
def passed_formats(tp: Any) -> str | None:
    """`date: "2026-01-31" or a datetime.date` for each type in an argument's type that
    crosses as text, in walk order; None when it has none."""
    return _formats(tp, _PASSED, result=False)


@by_identity
def returned_formats(tp: Any) -> str | None:
    """`date: a datetime.date` for each type in a result's type that crosses as text."""
    return _formats(tp, _RETURNED, result=True)


def _formats(tp: Any, words: dict[Any, str], *, result: bool) -> str | None:
    found = [
        f"{name}: {words[kind]}"
        for kind in walk(tp, result=result)
        if (name := text_format(kind)) is not None
    ]
    return "; ".join(dict.fromkeys(found)) or None


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


@by_identity
def _argument_shapes(tp: Any) -> tuple[Shape, ...]:
    return tuple(_shapes(tp, result=False))


@by_identity
def _result_shapes(tp: Any) -> tuple[Shape, ...]:
    return tuple(_shapes(tp, result=True))


def _shapes(tp: Any, *, result: bool) -> list[Shape]:
    found: list[Shape] = []
    for current in named_walk(tp, result=result):
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


__all__ = ["Shape", "expected", "notation", "shapes"]
