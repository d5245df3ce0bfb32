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

A result that is already plain data of exactly the declared types (the common case) is
projected in one walk instead (`plain`), which keeps and measures exactly what the steps
above would; anything it is not sure of goes through them.

The projection runs in the host, inside the call's own failure handling: anything raised
while reading, converting or checking a result is `capability failed`, never
interpreter text.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import functools
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, get_args, get_origin

import pydantic
from typing_extensions import is_typeddict

from codemode.capabilities import typehints as t
from codemode.capabilities.plain import NotPlain, plain_walk
from codemode.values import RecordValue, json_size

Keep = Callable[[Any, Any], Any]
"""Keeps what a declared type declares of serialized data, or raises Undeclared.

Called as `keep(data, value)`: the serialized data and the host value it came from
(`UNKNOWN` where the two cannot be lined up), so a union is resolved by what the value
is, never by what its data looks like."""

UNKNOWN: Any = object()
"""The host value behind some data, when it cannot be lined up with it."""

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

    def __init__(self, annotation: Any, *, serialize: bool = True) -> None:
        self.annotation = annotation
        self.serialize = serialize
        """False for JSON data (an upstream tool's), which is only kept: its source's
        schema is the one validator it meets."""
        keeps = _Keeps()
        self.keep = keeper(annotation, keeps)
        self.has_records = any(t.is_record(inner) for inner in t.walk(annotation, result=True))
        self.scalar = next((p for p in _PLAIN if annotation is p), None)
        """A plain scalar type, whose exact instances are their own projection."""
        self.plain = plain_walk(annotation, keeps.carriers)
        """The one walk that projects plain data of the declared type (see `plain`)."""

    @functools.cached_property
    def adapter(self) -> pydantic.TypeAdapter[Any]:
        """The declared type's serializer, and its JSON Schema for describe (built when
        first needed: JSON data crosses without it)."""
        return pydantic.TypeAdapter(t.portable(self.annotation))

    def project(self, value: Any, max_items: int) -> Projected:
        """What of `value` crosses. `max_items` bounds the items serialization may read,
        so a lazy or endless iterable is refused before it is consumed."""
        if type(value) is self.scalar:
            return Projected(value, json_size(value), False)
        if self.plain is not None:
            try:
                kept, size = self.plain(value, max_items)
            except NotPlain:
                pass  # the full projection below decides, and refuses alike
            else:
                return Projected(kept, size, self.has_records)
        _check_bounded(value, max_items)
        data = (
            self.adapter.dump_python(value, mode="json", by_alias=False, warnings="error")
            if self.serialize
            else value
        )
        kept = self.keep(data, value)
        return Projected(kept, json_size(kept), self.has_records)


def _check_bounded(value: Any, max_items: int) -> None:
    """Refuse an iterator, or more containers' items than `max_items`, anywhere in `value`.

    Only containers are walked (and records by their declared fields): a result is read as
    far as serialization would read it, never further.
    """
    budget = max_items
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)  # the exact types first: the isinstance checks below are slower
        if kind is str or kind is int or kind is bool or kind is float or item is None:
            continue
        members: Iterable[Any]
        if kind is list or kind is tuple:
            members, size = item, len(item)
        elif isinstance(item, str | bytes | int | float | bool):
            continue
        elif isinstance(item, dict):
            members = item.values()
            size = len(item)
        elif isinstance(item, list | tuple | set | frozenset):
            members, size = item, len(item)
        elif isinstance(item, Iterator):
            raise Undeclared("a result holds an iterator, which may never end")
        elif isinstance(item, pydantic.BaseModel):
            members = [getattr(item, name) for name in type(item).model_fields]
            size = len(members)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            members = [getattr(item, f.name) for f in dataclasses.fields(item)]
            size = len(members)
        else:
            continue
        budget -= size
        if budget < 0:
            raise Undeclared("a result holds more items than the result size allows")
        stack.extend(members)


class _Keeps(dict[int, Keep]):
    """`keeper`'s memo for one declared type, which also keeps the class each of its records
    is carried as (by `id` of the record type), for the plain walk to make the same."""

    def __init__(self) -> None:
        super().__init__()
        self.carriers: dict[int, Callable[..., RecordValue]] = {}


def keeper(tp: Any, memo: dict[int, Keep]) -> Keep:
    """How to keep, of data serialized as `tp`, exactly what `tp` declares."""
    tp = t.strip_annotated(tp)
    key = id(tp)
    if key in memo:
        return memo[key]
    cell: list[Keep] = []
    memo[key] = lambda data, value: cell[0](data, value)  # a recursive type refers to itself
    kept = _keeper(tp, memo)
    cell.append(kept)
    return kept


def _keeper(tp: Any, memo: dict[int, Keep]) -> Keep:
    if tp is Any:
        return _whole
    if t.is_union(tp):
        return _union(get_args(tp), memo)
    origin = get_origin(tp)
    if origin is Literal:
        return _one_of(get_args(tp))
    if t.is_enum(tp):
        return _one_of(tuple(member.value for member in tp))
    if t.json_kind(tp) is not None:
        return _kind(tp)
    if t.text_format(tp) is not None:
        return _text(tp)
    if origin is list or (origin is tuple and get_args(tp)[-1:] == (Ellipsis,)):
        item = keeper(get_args(tp)[0], memo)
        return lambda data, value: [
            item(d, v) for d, v in zip(_expect(data, list), _items(value, data), strict=True)
        ]
    if origin is tuple:
        items = [keeper(arg, memo) for arg in get_args(tp)]

        def fixed(data: Any, value: Any) -> list[Any]:
            data = _expect(data, list)
            if len(data) != len(items):
                raise Undeclared("wrong tuple length")
            return [keep(d, v) for keep, d, v in zip(items, data, _items(value, data), strict=True)]

        return fixed
    if origin is dict:
        item = keeper(get_args(tp)[1], memo)
        return lambda data, value: {
            k: item(d, _entry(value, k)) for k, d in _expect(data, dict).items()
        }
    if is_typeddict(tp):
        return _typed_dict(tp, memo)
    if t.is_record(tp):
        return _record(tp, memo)
    raise TypeError(f"no projection for {tp!r}")  # check_supported admits nothing else


def _items(value: Any, data: list[Any]) -> Sequence[Any]:
    """The host items behind serialized items, when they line up one to one."""
    if isinstance(value, list | tuple) and len(value) == len(data):
        return value
    return [UNKNOWN] * len(data)


def _entry(value: Any, key: str) -> Any:
    return value.get(key, UNKNOWN) if isinstance(value, dict) else UNKNOWN


def _typed_dict(tp: Any, memo: dict[int, Keep]) -> Keep:
    crossing = t.fields_of(tp, result=True)
    fields = {f.name: keeper(f.annotation, memo) for f in crossing}
    required = frozenset(f.name for f in crossing if f.required)

    def keep(data: Any, value: Any) -> dict[str, Any]:
        data = _expect(data, dict)
        if not required <= data.keys():
            raise Undeclared("a required key is missing")
        return {
            name: fields[name](data[name], _entry(value, name)) for name in fields if name in data
        }

    return keep


class _RecordKeep:
    """Keeps a record's declared fields as a `RecordValue` of the declared class's name."""

    def __init__(self, tp: type[Any], memo: dict[int, Keep]) -> None:
        self.tp = tp
        crossing = t.fields_of(tp, result=True)
        self.names = frozenset(f.name for f in crossing)
        computed = set(tp.model_computed_fields) if issubclass(tp, pydantic.BaseModel) else set()
        self.fields = [(f.name, f.name in computed) for f in crossing]
        self.parts = {f.name: keeper(f.annotation, memo) for f in crossing}
        self.carrier = dataclasses.make_dataclass(
            tp.__name__, [(f.name, Any) for f in crossing], bases=(RecordValue,), slots=True
        )
        self.carrier.__qualname__ = tp.__qualname__

    def __call__(self, data: Any, value: Any) -> RecordValue:
        data = _expect(data, dict)
        kept = {}
        for name, computed in self.fields:
            if name not in data:
                raise Undeclared("a declared field is missing")
            # A computed field is host code: it is never run again to line values up.
            behind = UNKNOWN if computed or value is UNKNOWN else getattr(value, name, UNKNOWN)
            kept[name] = self.parts[name](data[name], behind)
        record: RecordValue = self.carrier(**kept)
        return record


def _record(tp: type[Any], memo: dict[int, Keep]) -> Keep:
    kept = _RecordKeep(tp, memo)
    if isinstance(memo, _Keeps):
        memo.carriers[id(tp)] = kept.carrier
    return kept


def _union(members: tuple[Any, ...], memo: dict[int, Keep]) -> Keep:
    """The member the host value is: records by their class, the rest by their data.

    Where the value cannot be seen (it was not lined up with its data), a record member is
    taken only when it is the one record the data could be; else the result is refused.
    """
    records = [
        (t.strip_annotated(m), keeper(m, memo))
        for m in members
        if t.is_record(t.strip_annotated(m))
    ]
    others = [keeper(m, memo) for m in members if not t.is_record(t.strip_annotated(m))]

    def keep(data: Any, value: Any) -> Any:
        if value is not UNKNOWN:
            for cls, member in records:
                if isinstance(value, cls):
                    return member(data, value)
            return _first(others, data, value)
        if isinstance(data, dict):
            fitting = [m for _, m in records if m.names <= data.keys()]  # type: ignore[attr-defined]
            if len(fitting) > 1:
                raise Undeclared("the data could be more than one record")
            if fitting:
                return fitting[0](data, value)
        return _first(others, data, value)

    return keep


def _first(members: list[Keep], data: Any, value: Any) -> Any:
    for member in members:
        try:
            return member(data, value)
        except Undeclared:
            continue
    raise Undeclared("no member of the union fits")


def _kind(tp: Any) -> Keep:
    def keep(data: Any, value: Any) -> Any:
        if not t.fits_kind(tp, data):
            raise Undeclared("wrong kind")
        return data

    return keep


_READERS: dict[Any, Callable[[str], Any]] = {
    datetime.date: datetime.date.fromisoformat,
    datetime.datetime: datetime.datetime.fromisoformat,
    datetime.time: datetime.time.fromisoformat,
    decimal.Decimal: decimal.Decimal,
    uuid.UUID: lambda text: str(uuid.UUID(text)),
}
"""How serialized text becomes what the program gets: its own `date`, `datetime`, `time`
or `Decimal` (the interpreter has these types), a UUID's text (it has no UUID type)."""


def _text(tp: Any) -> Keep:
    read = _READERS[tp]

    def keep(data: Any, value: Any) -> Any:
        if type(data) is not str or (value is not UNKNOWN and not _is_kind(value, tp)):
            raise Undeclared("wrong kind")  # in a union, the member the value is
        try:
            return read(data)
        except (ValueError, decimal.InvalidOperation):
            raise Undeclared("not the declared text") from None

    return keep


def _is_kind(value: Any, tp: Any) -> bool:
    """Whether a host value is of a type that crosses as text (a datetime is no date)."""
    if tp is datetime.date:
        return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
    return isinstance(value, tp)


def _one_of(allowed: tuple[Any, ...]) -> Keep:
    def keep(data: Any, value: Any) -> Any:
        if not any(type(data) is type(a) and data == a for a in allowed):
            raise Undeclared("not one of the declared values")
        return data

    return keep


def _expect(data: Any, kind: type) -> Any:
    if not isinstance(data, kind):
        raise Undeclared("wrong kind")
    return data


def _whole(data: Any, value: Any) -> Any:
    return data


__all__ = ["UNKNOWN", "Projected", "Projection", "Undeclared", "keeper"]
