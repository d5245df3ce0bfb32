"""A JSON Schema read as the hints a host function would declare: each construct, named
shapes, bounds, references and combinators."""

from __future__ import annotations

from typing import Any

import pytest

from codemode import capabilities as t
from codemode.sources.schema import (
    Hints,
    SchemaError,
)
from codemode.types import JSONObject


def notation(schema: dict[str, Any]) -> str:
    return t.notation(Hints(schema, "T").of(schema, "T"))


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "number"}, "float"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({}, "Any"),
        ({"type": ["string", "null"]}, "str | None"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "int | None"),
        ({"enum": ["a", "b"]}, "Literal['a', 'b']"),
        ({"enum": ["a", None]}, "Literal['a'] | None"),
        ({"const": 3}, "Literal[3]"),
        ({"enum": [{"x": 1}]}, "Any"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"type": "array"}, "list[Any]"),
        ({"type": "object"}, "dict[str, Any]"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "dict[str, int]"),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, "T"),
        ({"allOf": [{"type": "string"}]}, "str"),
        ({"allOf": [{"minLength": 1}]}, "Any"),
        ({"not": {"type": "string"}}, "Any"),
        (
            {"if": {"type": "string"}, "then": {"type": "integer"}, "else": {"type": "null"}},
            "int | None",
        ),
        (
            {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
            "list[str | int]",
        ),
    ],
)
def test_each_construct_reads_as_the_hint_a_python_programmer_writes(
    schema: dict[str, Any], expected: str
) -> None:
    assert notation(schema) == expected


def test_objects_become_named_shapes_with_required_and_optional_keys() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who"},
            "from": {"type": "string"},
            "tags": {
                "type": "array",
                "items": {"type": "object", "properties": {"k": {"type": "string"}}},
            },
        },
        "required": ["name"],
    }
    hint = Hints(schema, "Entity").of(schema, "Entity")
    assert [s.render() for s in t.shapes(hint)] == [
        'Entity: dict {name: str (Who), from?: str, tags?: list[EntityTagsItem]}, read as r["name"]',
        'EntityTagsItem: dict {k?: str}, read as r["k"]',
    ]


def test_bounds_become_constraints_in_words() -> None:
    hint = Hints({}, "T").of({"type": "integer", "minimum": 1, "maximum": 100}, "T")
    assert t.declared(hint).phrase(hint) == "from 1 to 100"
    text = Hints({}, "T").of({"type": "string", "maxLength": 40, "pattern": "^[a-z]+$"}, "T")
    assert t.declared(text).phrase(text) == "at most 40 characters, matching the pattern '^[a-z]+$'"
    items = Hints({}, "T").of({"type": "array", "items": {"type": "string"}, "minItems": 1}, "T")
    assert t.declared(items).phrase(items) == "at least 1 item"


def test_local_references_resolve_and_an_object_may_contain_itself() -> None:
    schema = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"value": {"type": "integer"}, "next": {"$ref": "#/$defs/Node"}},
            }
        },
    }
    hint = Hints(schema, "T").of(schema, "T")
    assert [s.render() for s in t.shapes(hint)] == [
        'T: dict {node?: Node}, read as r["node"]',
        'Node: dict {value?: int, next?: Node}, read as r["value"]',
    ]
    with pytest.raises(SchemaError, match="unresolvable reference #/\\$defs/Gone"):
        Hints(schema, "T").of({"$ref": "#/$defs/Gone"}, "T")


@pytest.mark.parametrize("combinator", ["anyOf", "oneOf", "allOf"])
def test_declared_keys_win_over_combinators_beside_them(combinator: str) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        combinator: [{"required": ["name"]}],
    }
    assert [s.render() for s in t.shapes(Hints(schema, "T").of(schema, "T"))] == [
        'T: dict {name: str}, read as r["name"]'
    ]


def test_all_of_objects_is_one_shape_with_every_key() -> None:
    schema = {
        "allOf": [
            {"$ref": "#/$defs/Base"},
            {"type": "object", "properties": {"extra": {"type": "integer"}}},
        ],
        "$defs": {
            "Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
        },
    }
    assert [s.render() for s in t.shapes(Hints(schema, "T").of(schema, "T"))] == [
        'T: dict {id: str, extra?: int}, read as r["id"]'
    ]


BRANCHING: JSONObject = {
    "$defs": {
        "node": {
            "anyOf": [
                {"properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["never"]},
                {"properties": {"next": {"$ref": "#/$defs/node"}}},
            ]
        }
    },
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/node"}},
}


def never() -> bool:
    return False


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"next": node}
    return node
