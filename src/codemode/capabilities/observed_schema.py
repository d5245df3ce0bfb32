"""A learned shape written as JSON Schema (to keep it, print it, read it back) and as notation.

The JSON Schema is Draft 2020-12 and says only what was observed: `properties` and
`required` of named levels, `additionalProperties` of a map, `items` of an array, and no
`additionalProperties: false` (an observation is not a promise). With `stats`, keywords
JSON Schema ignores carry the counts (`x-codemode-seen`, ...): that is the file format
`from_schema` reads back, checking every name again (a hand-edited file cannot put a
non-identifier name in front of the model). The notation is what `describe` shows the
model: `dict {name: str, size?: int}`, a map as `dict[str, int]`.

Every renderer takes `shown`: a name it hides is left out, and the level it was at is
written as not closed (`...` in the notation), so whoever reads it learns no name seen
only in another subject's results. None shows every name (the operator's view).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codemode.capabilities.observed import (
    KINDS,
    MAX_DEPTH,
    MAX_SUBJECTS,
    Field,
    Kind,
    Node,
    Shown,
    bounded,
    is_field_name,
    ordered,
    settle,
)
from codemode.errors import printable
from codemode.types import JSONObject, JSONValue

NOTATION_CHARS = 600
"""The longest notation `describe` shows; longer is cut with `...`."""

SEEN = "x-codemode-seen"
OBJECTS = "x-codemode-objects"
KEYED = "x-codemode-keyed"
COMPLETE = "x-codemode-complete"
PRESENT = "x-codemode-present"
SUBJECTS = "x-codemode-subjects"
POSITION = "x-codemode-position"

_NODE_KEYS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", SEEN, OBJECTS}
    | {KEYED, COMPLETE}
)
_MOST = 2**53
"""The largest count read (any JSON reader keeps it exact)."""
_FIELD_KEYS = frozenset({PRESENT, SUBJECTS, POSITION})
_BELOW = frozenset({"properties", "additionalProperties", "items"})
_NAMES: dict[Kind, str] = {
    "null": "None",
    "boolean": "bool",
    "integer": "int",
    "number": "float",
    "string": "str",
}


def _visible(node: Node, shown: Shown | None) -> tuple[list[tuple[str, Field]], bool]:
    """The fields `shown` lets through, and whether any was hidden."""
    fields = list(node.fields or ())
    if shown is None or node.declared:
        return fields, False
    kept = [(name, field) for name, field in fields if shown(field)]
    return kept, len(kept) < len(fields)


# JSON Schema --------------------------------------------------------------------------


def to_schema(node: Node, *, stats: bool, shown: Shown | None = None) -> JSONObject:
    """The Draft 2020-12 JSON Schema of what was observed; with `stats`, its counts too."""
    schema: JSONObject = {}
    kinds = [kind for kind in KINDS if kind in node.kinds]
    if len(kinds) == 1:
        schema["type"] = kinds[0]
    elif kinds:
        listed: list[JSONValue] = [*kinds]
        schema["type"] = listed
    if node.fields is not None:
        fields, _ = _visible(node, shown)
        properties: JSONObject = {}
        for index, (name, field) in enumerate(fields):
            properties[name] = _field_schema(field, index, stats=stats, shown=shown)
        schema["properties"] = properties
        schema["required"] = [name for name, field in fields if node.required(field)]
    if node.values is not None:
        schema["additionalProperties"] = to_schema(node.values, stats=stats, shown=shown)
    if node.items is not None:
        schema["items"] = to_schema(node.items, stats=stats, shown=shown)
    if stats:
        schema[SEEN] = node.seen
        if node.objects:
            schema[OBJECTS] = node.objects
        if node.keyed:
            schema[KEYED] = node.keyed
        if not node.complete:
            schema[COMPLETE] = False
    return schema


def _field_schema(field: Field, index: int, *, stats: bool, shown: Shown | None) -> JSONObject:
    schema = to_schema(field.node, stats=stats, shown=shown)
    if stats:
        schema[PRESENT] = field.present
        subjects: list[JSONValue] = [*sorted(field.subjects)]
        schema[SUBJECTS] = subjects
        if field.position != index:
            schema[POSITION] = field.position
    return schema


def from_schema(schema: Mapping[str, Any]) -> Node:
    """The shape `to_schema(stats=True)` wrote, bounded and with its names checked again.

    Raises:
        ValueError: anything `to_schema(stats=True)` would not have written, a name that
            is not a short identifier among them.
    """
    return bounded(_read(schema, 0))


def _read(schema: Any, depth: int, *, field: bool = False) -> Node:
    if not isinstance(schema, Mapping):
        raise ValueError("a shape's schema is an object")
    unknown = schema.keys() - _NODE_KEYS - (_FIELD_KEYS if field else frozenset())
    if unknown:
        raise ValueError(f"a shape's schema has keywords it never writes: {sorted(unknown)}")
    if depth >= MAX_DEPTH and not _BELOW.isdisjoint(schema.keys()):
        raise ValueError(f"a shape is learned {MAX_DEPTH} levels deep at most")
    kinds = _kinds(schema.get("type"))
    properties = schema.get("properties")
    values = schema.get("additionalProperties")
    items = schema.get("items")
    if (properties is not None or values is not None) and "object" not in kinds:
        raise ValueError("only an object has properties")
    if properties is not None and values is not None:
        raise ValueError("a level is either named or a map")
    if items is not None and "array" not in kinds:
        raise ValueError("only an array has items")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ValueError("required is a list of names")
    node = Node(
        kinds=kinds,
        seen=_count(schema, SEEN, None),
        objects=_count(schema, OBJECTS, 0),
        keyed=_count(schema, KEYED, 0),
        fields=None if properties is None else _fields(properties, depth),
        values=None if values is None else _read(values, depth + 1),
        items=None if items is None else _read(items, depth + 1),
        complete=_complete(schema),
    )
    return settle(node)


def _kinds(given: Any) -> frozenset[Kind]:
    listed = [given] if isinstance(given, str) else given
    if listed is None:
        return frozenset()
    if not isinstance(listed, list) or not all(kind in KINDS for kind in listed):
        raise ValueError("a shape's type is a JSON kind or a list of them")
    return frozenset(kind for kind in KINDS if kind in listed)


def _count(schema: Mapping[str, Any], key: str, default: int | None) -> int:
    value = schema.get(key, default)
    if type(value) is not int or not 0 <= value <= _MOST:
        raise ValueError(f"{key} is a count")
    return value


def _complete(schema: Mapping[str, Any]) -> bool:
    value = schema.get(COMPLETE, True)
    if type(value) is not bool:
        raise ValueError(f"{COMPLETE} is true or false")
    return value


def _fields(properties: Any, depth: int) -> tuple[tuple[str, Field], ...]:
    if not isinstance(properties, Mapping):
        raise ValueError("properties is an object")
    fields = []
    for index, (name, schema) in enumerate(properties.items()):
        if not is_field_name(name):
            raise ValueError(f"a shape's names are identifiers of 32 characters at most: {name!r}")
        node = _read(schema, depth + 1, field=True)
        subjects = schema.get(SUBJECTS, [])
        if (
            not isinstance(subjects, list)
            or len(subjects) > MAX_SUBJECTS
            or not all(_is_digest(subject) for subject in subjects)
        ):
            raise ValueError(f"{SUBJECTS} lists at most two subject digests")
        field = Field(
            _count(schema, PRESENT, None),
            node,
            frozenset(subjects),
            _count(schema, POSITION, index),
        )
        fields.append((name, field))
    return ordered(fields)


def _is_digest(value: Any) -> bool:
    return (
        isinstance(value, str) and len(value) == 12 and all(c in "0123456789abcdef" for c in value)
    )


# Notation -----------------------------------------------------------------------------


def observed_notation(node: Node, shown: Shown | None = None) -> str:
    """How `describe` writes a learned shape, at most `NOTATION_CHARS` characters long:
    `dict {entities: list[dict {name: str}], total?: int}`, a map `dict[str, int]`,
    kinds `str | None`, nothing known `Any`; a field missing from some results has `?`."""
    text = printable(_notation(node, shown))
    if len(text) > NOTATION_CHARS:
        return text[: NOTATION_CHARS - 3] + "..."
    return text


def _notation(node: Node, shown: Shown | None) -> str:
    parts = []
    for kind in KINDS:
        if kind not in node.kinds:
            continue
        if kind == "object":
            parts.append(_object_notation(node, shown))
        elif kind == "array":
            items = "Any" if node.items is None else _notation(node.items, shown)
            parts.append(f"list[{items}]")
        else:
            parts.append(_NAMES[kind])
    return " | ".join(parts) or "Any"


def _object_notation(node: Node, shown: Shown | None) -> str:
    head = node.record or "dict"
    if node.values is not None:
        return f"dict[str, {_notation(node.values, shown)}]"
    if node.fields is None:
        return head
    fields, hidden = _visible(node, shown)
    listed = [
        f"{name}{'' if node.required(field) else '?'}: {_notation(field.node, shown)}"
        for name, field in fields
    ]
    if hidden:
        listed.append("...")
    return f"{head} {{{', '.join(listed)}}}"


__all__ = ["NOTATION_CHARS", "from_schema", "observed_notation", "to_schema"]
