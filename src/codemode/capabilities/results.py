"""A capability's declared return type -> the one projection its results cross by.

pydantic serializes the handler's value as the declared type: declared TypedDict keys and
dataclass or model fields only (a subclass's extra fields, `exclude=True` fields and
undeclared dict keys stay behind), enums as their values. Records are then rebuilt as
`RecordValue`s named after the declared class, so the program reads `r.field` and sees
the declared name, never the runtime one. A result declared `Any` or `dict[str, Any]`
crosses whole, as pydantic serializes it.

The projection runs in the host, inside the call's own failure handling: anything raised
while reading or converting a result is `capability failed`, never interpreter text.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, get_args, get_origin

import pydantic
from typing_extensions import is_typeddict

from codemode.capabilities import types as t
from codemode.values import RecordValue, json_size

Build = Callable[[Any], Any]
_PLAIN = (str, int, bool, type(None))
"""Types whose exact instances serialize as themselves (a float may be NaN or inf)."""
"""Rebuilds the records inside a serialized value."""


@dataclasses.dataclass(frozen=True, slots=True)
class Projected:
    """What crosses into the program for one result."""

    value: Any
    """JSON data, with `RecordValue`s where the declared type has records."""
    size: int
    """Bytes of its JSON form: what every result-size limit counts."""
    has_records: bool


class Projection:
    """Serialize by the declared type, measure, and rebuild records (one per capability)."""

    def __init__(self, annotation: Any) -> None:
        self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(t.portable(annotation))
        self.build = builder(annotation, {})
        self.scalar = annotation if annotation in _PLAIN else None
        """A plain scalar type, whose exact instances are their own projection."""

    def project(self, value: Any) -> Projected:
        if type(value) is self.scalar:
            return Projected(value, json_size(value), False)
        data = self.adapter.dump_python(value, mode="json", by_alias=False, warnings="error")
        size = json_size(data)
        if self.build is None:
            return Projected(data, size, False)
        return Projected(self.build(data), size, True)


def record_fields(tp: type[Any]) -> tuple[str, ...]:
    """The names a record crosses with: what pydantic serializes of the declared class."""
    if issubclass(tp, pydantic.BaseModel):
        declared = [name for name, info in tp.model_fields.items() if not info.exclude]
        return (*declared, *tp.model_computed_fields)
    return tuple(f.name for f in dataclasses.fields(tp))


def builder(tp: Any, memo: dict[int, Build | None]) -> Build | None:
    """How to rebuild the records of a value serialized as `tp`; None when it has none."""
    tp = t.strip_annotated(tp)
    key = id(tp)
    if key in memo:
        return memo[key]
    if not any(t.is_record(inner) for inner in t.walk(tp)):
        memo[key] = None
        return None
    cell: list[Build] = []
    memo[key] = lambda value: cell[0](value)  # a recursive type refers to itself
    built = _build(tp, memo)
    cell.append(built)
    return built


def _build(tp: Any, memo: dict[int, Build | None]) -> Build:
    if t.is_union(tp):
        return _union(tp, memo)
    origin = get_origin(tp)
    if origin is list or (origin is tuple and get_args(tp)[-1:] == (Ellipsis,)):
        item = builder(get_args(tp)[0], memo) or _same
        return lambda value: [item(v) for v in value]
    if origin is tuple:
        items = [builder(arg, memo) or _same for arg in get_args(tp)]
        return lambda value: [b(v) for b, v in zip(items, value, strict=False)]
    if origin is dict:
        item = builder(get_args(tp)[1], memo) or _same
        return lambda value: {k: item(v) for k, v in value.items()}
    if is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        parts = {name: builder(hint, memo) for name, hint in hints.items()}
        return lambda value: {k: (parts.get(k) or _same)(v) for k, v in value.items()}
    return _record(tp, memo)


def _record(tp: type[Any], memo: dict[int, Build | None]) -> Build:
    names = record_fields(tp)
    hints = _field_hints(tp)
    parts = [(name, builder(hints.get(name, Any), memo) or _same) for name in names]
    carrier = dataclasses.make_dataclass(
        tp.__name__, [(name, Any) for name in names], bases=(RecordValue,), slots=True
    )
    carrier.__qualname__ = tp.__qualname__

    def build(value: dict[str, Any]) -> RecordValue:
        record: RecordValue = carrier(**{name: part(value[name]) for name, part in parts})
        return record

    return build


def _field_hints(tp: type[Any]) -> dict[str, Any]:
    if issubclass(tp, pydantic.BaseModel):
        hints = {name: info.annotation for name, info in tp.model_fields.items()}
        hints.update({n: c.return_type for n, c in tp.model_computed_fields.items()})
        return hints
    return typing.get_type_hints(tp, include_extras=True)


def _union(tp: Any, memo: dict[int, Build | None]) -> Build:
    """Pick the member a serialized value came from: records by their exact field names."""
    records: list[tuple[frozenset[str], Build]] = []
    mappings: list[Build] = []
    sequences: list[Build] = []
    for member in get_args(tp):
        member = t.strip_annotated(member)
        built = builder(member, memo) or _same
        if t.is_record(member):
            records.append((frozenset(record_fields(member)), built))
        elif is_typeddict(member) or get_origin(member) is dict:
            mappings.append(built)
        elif get_origin(member) in (list, tuple):
            sequences.append(built)

    def build(value: Any) -> Any:
        if isinstance(value, dict):
            keys = value.keys()
            for names, built in records:
                if keys == names:
                    return built(value)
            return mappings[0](value) if mappings else value
        if isinstance(value, list) and sequences:
            return sequences[0](value)
        return value

    return build


def _same(value: Any) -> Any:
    return value


__all__ = ["Projected", "Projection", "builder", "record_fields"]
