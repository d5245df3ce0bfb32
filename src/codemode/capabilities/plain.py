"""The one-walk projection of a result that is already plain data of its declared type.

Most results are plain data: dicts with str keys, lists, str, int, bool, None, finite
floats and records (a dataclass or model instance of exactly the declared class), each of
exactly the type the declaration names. For those, pydantic's serialization hands back an
equal copy, the keep walk drops what the type does not declare, and the size is that of the
JSON text. A `Plain` walk does the three at once: it checks each value's exact type against
the declared type, copies what is declared, counts the items the bound allows and measures
the JSON text as it goes.

It only ever answers for data it is sure of. Anything else (a subclass, a bool where an int
is declared, a missing required key, a tuple, NaN, an int too wide to write, text that is
not UTF-8, more items than the bound, nesting past `MAX_DEPTH`) raises `NotPlain`, and the
full projection runs from the start: so every refusal, and every value that needs a
serializer, is exactly what the full projection makes of it. A declared type is walked this
way only when nothing in it can change what serialization writes (no enums or tuples, no
serializers or computed fields, no pydantic config, no metadata but constraints and
descriptions); `tests/capabilities/test_plain.py` holds the two projections side by side.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Callable, Mapping, Sized
from typing import Any, Literal, get_args, get_origin

import annotated_types
import pydantic
from pydantic.fields import FieldInfo
from typing_extensions import is_typeddict

from codemode.capabilities import typehints as t
from codemode.capabilities.columns import (
    BATCH_ROWS,
    Batch,
    column_size,
    record_names,
    rows_batch,
)
from codemode.capabilities.tally import (
    ABSENT,
    MAX_DEPTH,
    WIDE_BITS,
    Fields,
    Leaf,
    NotPlain,
    Plain,
    Tally,
)
from codemode.values import RecordValue, json_size

_ENCODE = json.encoder.encode_basestring
_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain_walk(
    annotation: Any, carriers: Mapping[int, Callable[..., RecordValue]]
) -> Callable[[Any, int], tuple[Any, int]] | None:
    """The walk for results of `annotation`, as `(value, max_items) -> (kept, size)`, or None
    when a part of it may serialize in a way of its own (then every result takes the full
    projection). `carriers` has the class each declared record is kept as, by `id` of the
    record type, so that both projections make the same class of it."""
    compiled = _Compiler(carriers).compile(annotation)
    if compiled is None or isinstance(compiled, dict):
        return None  # a scalar result is measured as it is, by `json_size`
    walk = compiled

    def project(value: Any, max_items: int) -> tuple[Any, int]:
        tally = Tally(max_items)
        kept = walk(value, tally, 0)
        if not isinstance(kept, dict | list | RecordValue):
            return kept, json_size(kept)  # a scalar alone is measured as `json_size` has it
        return kept, tally.size - 1

    return project


def scalar_size(value: Any) -> int:
    """Bytes of an exact JSON scalar inside a JSON text, as `json.dumps` writes it."""
    kind = type(value)
    if kind is str:
        text = _ENCODE(value)
        if value.isascii():
            return len(text)
        try:
            return len(text.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: the full projection fails on it
            raise NotPlain from None
    if kind is int:
        if value.bit_length() >= WIDE_BITS:
            raise NotPlain  # measured by its digits, not by the text it cannot have
        return len(str(value))
    if kind is bool:
        return 4 if value else 5
    if value is None:
        return 4
    if kind is float and math.isfinite(value):
        return len(repr(value))
    raise NotPlain


_NARROW = 1 << 59


# -- compiling a declared type ---------------------------------------------------------


class _Compiler:
    """Turns a declared type into its walk, each named type once (recursion-safe)."""

    def __init__(self, carriers: Mapping[int, Callable[..., RecordValue]]) -> None:
        self.carriers = carriers
        self.walks: dict[int, Plain] = {}
        self.batches: dict[int, Batch] = {}
        """The walk of many rows at once, by `id` of the walk of one (`columns`)."""
        self.compiled: list[Any] = []
        """Every type in `walks`, held so that no other type can take its `id` meanwhile
        (a hint read from a string is a new object each time)."""

    def compile(self, tp: Any) -> Leaf | Plain | None:
        """A scalar type as a Leaf, any other type as its walk, None when it is not walked."""
        if get_origin(tp) is typing.Annotated:
            if not all(_harmless(meta) for meta in tp.__metadata__):
                return None
            tp = get_args(tp)[0]
        if t.scalar_name(tp) is not None:  # by identity: a type may hold unhashable metadata
            return {tp: None}
        if get_origin(tp) is Literal:
            leaf: Leaf = {}
            for value in get_args(tp):
                if type(value) not in _SCALARS:
                    return None
                leaf[type(value)] = (*(leaf.get(type(value)) or ()), value)
            return leaf
        if t.is_union(tp):
            return self.union(get_args(tp))
        key = id(tp)
        if key in self.walks:
            return self.walks[key]
        cell: list[Plain] = []
        self.walks[key] = lambda value, tally, depth: cell[0](value, tally, depth)
        self.compiled.append(tp)
        walk = self.container(tp)
        if walk is None:
            return None
        cell.append(walk)
        return walk

    def container(self, tp: Any) -> Plain | None:
        if tp is Any:
            return _any
        origin = get_origin(tp)
        if origin is list:
            item = self.compile(get_args(tp)[0])
            return _list(item, self.batches.get(id(item)))
        if origin is dict:
            key, value = get_args(tp)
            return _dict(self.compile(value)) if key is str else None
        if is_typeddict(tp):
            if hasattr(tp, "__pydantic_config__"):
                return None
            return self.named(tp, None)
        if t.is_record(tp) and id(tp) in self.carriers and _plain_record(tp):
            return self.named(tp, tp)
        return None

    def named(self, tp: Any, record: type[Any] | None) -> Plain | None:
        """The walk of a TypedDict (`record` None) or a record, and its walk of rows."""
        fields = self.fields(t.fields_of(tp, result=True))
        if fields is None:
            return None
        carrier = None if record is None else self.carriers[id(record)]
        walk = _named(fields, record, carrier)
        self.batches[id(walk)] = rows_batch(fields, record, carrier, walk, _unseen)
        return walk

    def fields(self, crossing: list[t.Field]) -> Fields | None:
        """The fields that cross, each with its compiled type."""
        fields: Fields = []
        for field in crossing:
            compiled = self.compile(field.annotation)
            if compiled is None:
                return None
            try:  # a field's bytes: its key and colon (the value counts its own comma)
                key_size = len(_ENCODE(field.name).encode("utf-8")) + 1
            except UnicodeEncodeError:
                return None
            if isinstance(compiled, dict):
                single = next(iter(compiled)) if list(compiled.values()) == [None] else None
                fields.append((field.name, key_size, field.required, single, compiled, None))
            else:
                fields.append((field.name, key_size, field.required, None, None, compiled))
        return fields

    def union(self, members: tuple[Any, ...]) -> Leaf | Plain | None:
        """Scalar members merge into one Leaf; any other value may go to one member only,
        so the member it is for is known from its type alone (as keeping finds it)."""
        leaf: Leaf = {}
        walks: dict[type, Plain] = {}
        for member in members:
            compiled = self.compile(member)
            if compiled is None:
                return None
            if isinstance(compiled, dict):
                for kind, allowed in compiled.items():
                    known = leaf.get(kind, ())
                    leaf[kind] = None if known is None or allowed is None else known + allowed
                continue
            takes = _takes(member)
            if takes is None or takes in walks:
                return None
            walks[takes] = compiled
        if not walks:
            return leaf
        records = [kind for kind in walks if kind not in (list, dict)]
        if any(a is not b and issubclass(a, b) for a in records for b in records):
            return None  # keeping takes the first record the value is an instance of
        scalars = leaf

        def walk(value: Any, tally: Tally, depth: int) -> Any:
            member = walks.get(type(value))
            if member is not None:
                return member(value, tally, depth)
            _check_leaf(scalars, value)
            tally.size += scalar_size(value) + 1
            return value

        return walk


def _harmless(meta: Any) -> bool:
    """Metadata that only constrains or describes, so serialization writes the same."""
    if isinstance(meta, FieldInfo):
        return (
            not meta.exclude
            and getattr(meta, "exclude_if", None) is None
            and all(_harmless(inner) for inner in meta.metadata)
        )
    return isinstance(meta, annotated_types.BaseMetadata) and not hasattr(
        meta, "__get_pydantic_core_schema__"
    )


def _plain_record(tp: type[Any]) -> bool:
    """A record whose serialization is its fields' values, as they are: a stdlib dataclass
    or a model without serializers, computed fields, kept extras or a root."""
    if issubclass(tp, pydantic.RootModel):
        return False
    if issubclass(tp, pydantic.BaseModel):
        decorators = tp.__pydantic_decorators__
        config = tp.model_config
        return (
            not decorators.field_serializers
            and not decorators.model_serializers
            and not decorators.computed_fields
            and config.get("extra") != "allow"
            and not config.get("json_encoders")
            and all(
                getattr(info, "exclude_if", None) is None
                and all(_harmless(meta) for meta in info.metadata)
                for info in tp.model_fields.values()
            )
        )
    return not (
        hasattr(tp, "__pydantic_fields__")
        or hasattr(tp, "__pydantic_config__")
        or any(isinstance(f.default, FieldInfo) or f.metadata for f in dataclasses.fields(tp))
    )


def _takes(member: Any) -> type | None:
    """The type of value a non-scalar union member takes (None: it may take any)."""
    member = t.strip_annotated(member)
    if get_origin(member) is list:
        return list
    if get_origin(member) is dict or is_typeddict(member):
        return dict
    if t.is_record(member):
        return member  # type: ignore[no-any-return]
    return None


# -- walking ---------------------------------------------------------------------------


def _check_leaf(leaf: Leaf, value: Any) -> None:
    allowed = leaf.get(type(value), ABSENT)
    if allowed is not None and (allowed is ABSENT or value not in allowed):
        raise NotPlain


def _count(value: Any, kind: type[Sized], tally: Tally, depth: int) -> int:
    """The number of items of a list or entries of a dict, once counted against the bound."""
    if type(value) is not kind or depth > MAX_DEPTH:
        raise NotPlain
    count = len(value)
    tally.items -= count
    if tally.items < 0:
        raise NotPlain  # the full projection says the result is too long
    return count


def _enter(value: Any, kind: type[Sized], tally: Tally, depth: int) -> None:
    """Count a list or dict that is kept whole, and its brackets and the comma after it,
    less the comma after its last item."""
    tally.size += 2 if _count(value, kind, tally, depth) else 3


def _list(item: Leaf | Plain | None, batch: Batch | None = None) -> Plain | None:
    if item is None:
        return None
    if isinstance(item, dict):
        leaf = item

        def scalars(value: Any, tally: Tally, depth: int) -> list[Any]:
            _enter(value, list, tally, depth)
            kept = list(value)
            if len(kept) >= BATCH_ROWS:
                tally.size += column_size(leaf, kept)
                return kept
            size = 0
            for v in kept:
                _check_leaf(leaf, v)
                size += scalar_size(v) + 1
            tally.size += size
            return kept

        return scalars
    walk = item

    def items(value: Any, tally: Tally, depth: int) -> list[Any]:
        _enter(value, list, tally, depth)
        depth += 1
        if batch is not None and len(value) >= BATCH_ROWS:
            return batch(list(value), tally, depth)
        return [walk(v, tally, depth) for v in value]

    return items


def _dict(item: Leaf | Plain | None) -> Plain | None:
    if item is None:
        return None
    walk = _leaf_walk(item) if isinstance(item, dict) else item

    def entries(value: Any, tally: Tally, depth: int) -> dict[str, Any]:
        return _entries(value, tally, depth, walk)

    return entries


def _entries(value: Any, tally: Tally, depth: int, walk: Plain) -> dict[str, Any]:
    """A dict of string keys, each value taken by `walk` (else NotPlain)."""
    _enter(value, dict, tally, depth)
    depth += 1
    kept = {}
    for key, v in value.items():
        if type(key) is not str:
            raise NotPlain
        tally.size += scalar_size(key) + 1
        kept[key] = walk(v, tally, depth)
    return kept


def _leaf_walk(leaf: Leaf) -> Plain:
    def walk(value: Any, tally: Tally, depth: int) -> Any:
        _check_leaf(leaf, value)
        tally.size += scalar_size(value) + 1
        return value

    return walk


def _named(fields: Fields, record: type[Any] | None, carrier: Any = None) -> Plain:
    """The walk of a TypedDict (`record` None) or of a record kept as `carrier`."""
    names = record_names(record)
    # `names`: every field of the record, as the bound counts them, those that do not cross
    # as well. One function serves both kinds, as a call per value is much of the cost.

    def keep(value: Any, tally: Tally, depth: int) -> Any:
        # A subclass of a record may add what its declared class does not have.
        if type(value) is not (dict if record is None else record) or depth > MAX_DEPTH:
            raise NotPlain
        count = len(value if record is None else names)
        tally.items -= count
        if tally.items < 0:
            raise NotPlain  # the full projection says the result is too long
        if record is not None:  # read once, as the fields of a dict
            value = {name: getattr(value, name, ABSENT) for name in names}
        kept = {}
        size = 0
        for name, key_size, required, single, leaf, walk in fields:
            v = value.get(name, ABSENT)
            if v is ABSENT:
                if required:
                    raise NotPlain
                continue
            if walk is not None:
                tally.size += size + key_size
                size = 0
                kept[name] = walk(v, tally, depth + 1)
                continue
            # A scalar, checked and measured here: most of a big result is these.
            kind = type(v)
            if kind is not single:
                assert leaf is not None
                _check_leaf(leaf, v)
            if kind is str and v.isascii():
                size += key_size + len(_ENCODE(v)) + 1
            elif kind is int and -_NARROW < v < _NARROW:
                size += key_size + len(str(v)) + 1
            elif kind is bool or v is None:
                size += key_size + (6 if v is False else 5)
            else:
                size += key_size + scalar_size(v) + 1
            kept[name] = v
        # Its braces and the comma after it, less the comma after its last field.
        tally.size += size + (2 if kept else 3)
        if len(kept) < count:  # what it does not declare: never kept, but read and counted
            unseen = []
            for key, v in value.items():
                if key not in kept:
                    if type(key) is not str or v is ABSENT:
                        raise NotPlain
                    unseen.append(v)
            _unseen(unseen, tally, depth)
        return kept if record is None else carrier(**kept)

    return keep


def _unseen(values: list[Any], tally: Tally, depth: int) -> None:
    """Values that do not cross, read as the bound reads them: they must be plain too."""
    scratch = Tally(tally.items)
    for v in values:
        _any(v, scratch, depth + 1)
    tally.items = scratch.items


def _any(value: Any, tally: Tally, depth: int) -> Any:
    """Data declared `Any` (or not declared at all), taken whole if it is all plain."""
    kind = type(value)
    if kind is list:
        _enter(value, list, tally, depth)
        depth += 1
        return [_any(v, tally, depth) for v in value]
    if kind is dict:
        return _entries(value, tally, depth, _any)
    tally.size += scalar_size(value) + 1
    return value


__all__ = ["MAX_DEPTH", "NotPlain", "Plain", "Tally", "plain_walk", "scalar_size"]
