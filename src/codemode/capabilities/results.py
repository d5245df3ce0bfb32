"""A capability's declared return type -> the one projection its results cross by.

pydantic first serializes the handler's value as the declared type (models, dataclasses
and enums become JSON data, and it runs the type's own serializers). Then the data is
walked against the declared type, and only what the type declares is kept: TypedDict
keys, dataclass and model fields (an `exclude=True` field never), each checked against
its declared JSON kind. So neither a subclass's extra attributes, nor a model's
`extra="allow"` fields, nor a custom serializer's additions cross. Records are rebuilt as
`RecordValue`s named after the declared class, so the program reads `r.field` and sees
the declared name, never the runtime one. Only a part declared `Any` (or
`dict[str, Any]`) crosses whole, as pydantic serializes it.

The projection runs in the host, inside the call's own failure handling: anything raised
while reading, converting or checking a result is `capability failed`, never
interpreter text.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

import pydantic
from typing_extensions import is_typeddict

from codemode.capabilities import types as t
from codemode.values import RecordValue, json_size

Keep = Callable[[Any], Any]
"""Keeps what a declared type declares of serialized data, or raises Undeclared."""

_PLAIN = (str, int, bool, type(None))
"""Types whose exact instances serialize as themselves (a float may be NaN or inf)."""


class Undeclared(ValueError):
    """Serialized data that does not have the declared shape (a host-side mistake)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Projected:
    """What crosses into the program for one result."""

    value: Any
    """JSON data, with `RecordValue`s where the declared type has records."""
    size: int
    """Bytes of its JSON form: what every result-size limit counts."""
    has_records: bool


class Projection:
    """Serialize by the declared type, keep what it declares, measure (one per capability)."""

    def __init__(self, annotation: Any) -> None:
        self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(t.portable(annotation))
        self.keep = keeper(annotation, {})
        self.has_records = any(t.is_record(inner) for inner in t.walk(annotation))
        self.scalar = next((p for p in _PLAIN if annotation is p), None)
        """A plain scalar type, whose exact instances are their own projection."""

    def project(self, value: Any) -> Projected:
        if type(value) is self.scalar:
            return Projected(value, json_size(value), False)
        data = self.adapter.dump_python(value, mode="json", by_alias=False, warnings="error")
        kept = self.keep(data)
        return Projected(kept, json_size(kept), self.has_records)


def keeper(tp: Any, memo: dict[int, Keep]) -> Keep:
    """How to keep, of data serialized as `tp`, exactly what `tp` declares."""
    tp = t.strip_annotated(tp)
    key = id(tp)
    if key in memo:
        return memo[key]
    cell: list[Keep] = []
    memo[key] = lambda value: cell[0](value)  # a recursive type refers to itself
    kept = _keeper(tp, memo)
    cell.append(kept)
    return kept


def _keeper(tp: Any, memo: dict[int, Keep]) -> Keep:
    if tp is Any:
        return _whole
    if t.is_union(tp):
        return _union([keeper(member, memo) for member in get_args(tp)])
    origin = get_origin(tp)
    if origin is Literal:
        return _one_of(get_args(tp))
    if t.is_enum(tp):
        return _one_of(tuple(member.value for member in tp))
    if t.json_kind(tp) is not None:
        return _kind(tp)
    if origin is list or (origin is tuple and get_args(tp)[-1:] == (Ellipsis,)):
        item = keeper(get_args(tp)[0], memo)
        return lambda value: [item(v) for v in _expect(value, list)]
    if origin is tuple:
        items = [keeper(arg, memo) for arg in get_args(tp)]

        def fixed(value: Any) -> list[Any]:
            value = _expect(value, list)
            if len(value) != len(items):
                raise Undeclared("wrong tuple length")
            return [keep(v) for keep, v in zip(items, value, strict=True)]

        return fixed
    if origin is dict:
        item = keeper(get_args(tp)[1], memo)
        return lambda value: {k: item(v) for k, v in _expect(value, dict).items()}
    if is_typeddict(tp):
        return _typed_dict(tp, memo)
    if t.is_record(tp):
        return _record(tp, memo)
    raise TypeError(f"no projection for {tp!r}")  # check_supported admits nothing else


def _typed_dict(tp: Any, memo: dict[int, Keep]) -> Keep:
    hints = typing.get_type_hints(tp, include_extras=True)
    fields = {name: keeper(hint, memo) for name, hint in hints.items()}
    required = frozenset(tp.__required_keys__)

    def keep(value: Any) -> dict[str, Any]:
        value = _expect(value, dict)
        if not required <= value.keys():
            raise Undeclared("a required key is missing")
        return {name: fields[name](value[name]) for name in fields if name in value}

    return keep


def _record(tp: type[Any], memo: dict[int, Keep]) -> Keep:
    crossing = t.fields_of(tp, result=True)
    names = tuple(f.name for f in crossing)
    fields = [(f.name, keeper(f.annotation, memo)) for f in crossing]
    carrier = dataclasses.make_dataclass(
        tp.__name__, [(name, Any) for name in names], bases=(RecordValue,), slots=True
    )
    carrier.__qualname__ = tp.__qualname__

    def keep(value: Any) -> RecordValue:
        value = _expect(value, dict)
        try:
            record: RecordValue = carrier(**{name: part(value[name]) for name, part in fields})
        except KeyError:
            raise Undeclared("a declared field is missing") from None
        return record

    keep.names = frozenset(names)  # type: ignore[attr-defined]
    return keep


def _union(members: list[Keep]) -> Keep:
    """The first member whose declared shape the data has (records, then the rest)."""
    records = [m for m in members if hasattr(m, "names")]
    others = [m for m in members if not hasattr(m, "names")]

    def keep(value: Any) -> Any:
        candidates = others
        if isinstance(value, dict):
            fitting = [m for m in records if m.names <= value.keys()]
            fitting.sort(key=lambda m: -len(m.names))
            candidates = fitting + others
        for member in candidates:
            try:
                return member(value)
            except Undeclared:
                continue
        raise Undeclared("no member of the union fits")

    return keep


def _kind(tp: Any) -> Keep:
    def keep(value: Any) -> Any:
        if not t.fits_kind(tp, value):
            raise Undeclared("wrong kind")
        return value

    return keep


def _one_of(allowed: tuple[Any, ...]) -> Keep:
    def keep(value: Any) -> Any:
        if not any(type(value) is type(a) and value == a for a in allowed):
            raise Undeclared("not one of the declared values")
        return value

    return keep


def _expect(value: Any, kind: type) -> Any:
    if not isinstance(value, kind):
        raise Undeclared("wrong kind")
    return value


def _whole(value: Any) -> Any:
    return value


__all__ = ["Projected", "Projection", "Undeclared", "keeper"]
