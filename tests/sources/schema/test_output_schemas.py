"""Output schemas that branch (`if`/`then`/`else`, `anyOf`, `oneOf`, `allOf`) read as one
shape of every declared key, so that only declared keys of `structuredContent` reach the
program, and `describe` says `dict[str, Any]` only when no key is declared anywhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, get_args

import mcp_types as mt
import pytest

from codemode import CodeMode
from codemode import capabilities as t
from codemode.authz import AllowAll
from codemode.capabilities.results import UNKNOWN, Projection, keeper
from codemode.capabilities.typehints import field_hints
from codemode.payloads import describe_payload, execute_payload
from codemode.sources.mcp.tools import tool_capability
from codemode.sources.schema import Hints
from tests.sources.mcp import branching_server as branching
from tests.sources.mcp.conftest import PYTHON

SERVER = branching.__file__


def hint(schema: dict[str, Any]) -> Any:
    return Hints(schema, "T").of(schema, "T")


def shapes(schema: dict[str, Any]) -> list[str]:
    return [shape.render() for shape in t.shapes(hint(schema))]


def kept(schema: dict[str, Any], data: dict[str, Any]) -> Any:
    """What of `data` crosses by the schema's hint, by both projections (they agree)."""
    annotation = hint(schema)
    full = keeper(annotation, {})(data, UNKNOWN)
    assert Projection(annotation, serialize=False).project(data, 10_000).value == full
    return full


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param(
            branching.IF_THEN_ELSE,
            [
                "T: dict {kind: Literal['file', 'dir'], size?: int, entries?: list[Any]}, read as r[\"kind\"]"
            ],
            id="if-then-else-beside-type-object",
        ),
        pytest.param(
            {
                "type": "object",
                "if": {"required": ["a"]},
                "then": {"properties": {"a": {"type": "string"}}, "required": ["a"]},
            },
            ['T: dict {a?: str}, read as r["a"]'],
            id="then-without-else-is-optional",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "if": {"required": ["id"]},
                "then": {"properties": {"score": {"type": "number"}}},
                "anyOf": [{"required": ["id"]}, {"not": {"required": ["x"]}}],
            },
            ['T: dict {id: str, score?: float}, read as r["id"]'],
            id="beside-top-level-properties",
        ),
        pytest.param(
            {
                "type": "object",
                "anyOf": [
                    {"required": ["a"]},
                    {"minProperties": 1},
                    {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                ],
            },
            ['T: dict {a?: int}, read as r["a"]'],
            id="any-of-with-constraint-only-members",
        ),
        pytest.param(
            {
                "type": "object",
                "oneOf": [
                    {
                        "properties": {"kind": {"const": "user"}, "name": {"type": "string"}},
                        "required": ["kind", "name"],
                    },
                    {
                        "properties": {"kind": {"const": "team"}, "size": {"type": "integer"}},
                        "required": ["kind"],
                    },
                ],
            },
            [
                "T: dict {kind: Literal['user', 'team'], name?: str, size?: int}, read as r[\"kind\"]"
            ],
            id="one-of-discriminated",
        ),
        pytest.param(
            {
                "type": "object",
                "allOf": [
                    {"minProperties": 1},
                    {"not": {"required": ["forbidden"]}},
                    {"properties": {"n": {"type": "integer"}}, "required": ["n"]},
                    {"anyOf": [{"properties": {"x": {"type": "boolean"}}}, {"required": ["n"]}]},
                ],
            },
            ['T: dict {n: int, x?: bool}, read as r["n"]'],
            id="all-of-with-constraint-only-members",
        ),
        pytest.param(
            {
                "anyOf": [
                    {"type": "object", "properties": {"a": {"type": "integer"}}},
                    {"type": "object", "properties": {"b": {"type": "integer"}}},
                ]
            },
            ['T: dict {a?: int, b?: int}, read as r["a"]'],
            id="object-alternatives-are-one-shape",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "required": ["a"],
                "oneOf": [{"required": ["a"]}, {"required": ["a", "b"]}],
            },
            ['T: dict {a: int}, read as r["a"]'],
            id="required-on-every-path-stays-required",
        ),
        pytest.param(
            {
                "type": "object",
                "required": ["a"],
                "anyOf": [{"properties": {"a": {"type": "integer"}}}, {"required": ["b"]}],
            },
            ['T: dict {a?: int}, read as r["a"]'],
            id="a-key-only-some-branches-declare-is-optional",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"inner": {"type": "object", "then": {"properties": {"q": {}}}}},
            },
            [
                'T: dict {inner?: TInner}, read as r["inner"]',
                'TInner: dict {q?: Any}, read as r["q"]',
            ],
            id="nested-then-without-if",
        ),
    ],
)
def test_every_key_a_branch_declares_is_one_shape(
    schema: dict[str, Any], expected: list[str]
) -> None:
    assert shapes(schema) == expected


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "object", "anyOf": [{"required": ["a"]}, {"minProperties": 1}]},
            "dict[str, Any]",
        ),
        ({"type": "object", "if": {"required": ["a"]}, "then": {"not": {}}}, "dict[str, Any]"),
        (
            {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "allOf": [{"minProperties": 1}],
            },
            "dict[str, int]",
        ),
        (
            {"anyOf": [{"type": "object", "properties": {"a": {}}}, {"required": ["b"]}]},
            "T",
        ),
        (
            {"anyOf": [{"type": "object", "properties": {"a": {}}}, {"type": "string"}]},
            "T | str",
        ),
        ({"type": ["object", "null"], "properties": {"a": {"type": "integer"}}}, "T | None"),
    ],
)
def test_any_only_where_no_key_is_declared_anywhere(schema: dict[str, Any], expected: str) -> None:
    assert t.notation(hint(schema)) == expected


def test_a_key_declared_differently_has_the_union_of_its_types() -> None:
    schema = {
        "type": "object",
        "oneOf": [
            {"properties": {"v": {"type": "string"}, "w": {"type": "integer"}}},
            {"properties": {"v": {"type": "integer"}, "w": {}}},
        ],
    }
    fields = field_hints(hint(schema))
    assert set(get_args(fields["v"])) == {str, int}
    assert fields["w"] is Any  # one branch leaves it unconstrained: a union cannot say less


def test_a_key_declared_as_objects_in_two_branches_is_one_nested_shape() -> None:
    schema = {
        "type": "object",
        "anyOf": [
            {"properties": {"v": {"type": "object", "properties": {"p": {"type": "string"}}}}},
            {"properties": {"v": {"type": "object", "properties": {"q": {"type": "integer"}}}}},
        ],
    }
    assert shapes(schema) == [
        'T: dict {v?: TV}, read as r["v"]',
        'TV: dict {p?: str, q?: int}, read as r["p"]',
    ]
    data = {"v": {"p": "x", "q": 1, "secret": 2}, "secret": 3}
    assert kept(schema, data) == {"v": {"p": "x", "q": 1}}


def test_a_referenced_object_with_alternatives_keeps_its_name_and_recursion() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"value": {"type": "integer"}},
                "oneOf": [
                    {"properties": {"next": {"$ref": "#/$defs/Node"}}},
                    {"properties": {"last": {"const": True}}},
                ],
            }
        },
    }
    assert shapes(schema) == [
        'T: dict {root?: Node}, read as r["root"]',
        'Node: dict {value?: int, next?: Node, last?: Literal[True]}, read as r["value"]',
    ]
    data = {"root": {"value": 1, "next": {"value": 2, "last": True, "x": 0}, "x": 0}}
    assert kept(schema, data) == {"root": {"value": 1, "next": {"value": 2, "last": True}}}


@pytest.mark.parametrize(("name", "answer"), list(branching.ANSWERS.items()))
def test_undeclared_keys_never_cross_the_projection(
    name: str, answer: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    schema, data = answer
    assert branching.CANARY not in json.dumps(kept(schema, data))


def send(*_: object) -> Any:
    raise AssertionError("not called")


def test_a_tool_with_branching_output_is_described_by_its_shape() -> None:
    capability = tool_capability(
        "fs",
        mt.Tool(name="stat", input_schema={"type": "object"}, output_schema=branching.IF_THEN_ELSE),
        send,
        expose_errors="none",
        timeout=None,
    )
    described: Any = describe_payload(capability.info)
    assert described["signature"] == "fs.stat() -> StatResult"
    assert described["shapes"] == [
        "StatResult: dict {kind: Literal['file', 'dir'], size?: int, entries?: list[Any]}, read as r[\"kind\"]"
    ]


# -- end to end, through a real upstream server ------------------------------------------


@pytest.fixture(scope="module")
def cm() -> Iterator[CodeMode]:
    with CodeMode(authorizer=AllowAll()) as codemode:
        codemode.add_mcp_server("br", command=PYTHON, args=[SERVER])
        yield codemode


EXPECTED: dict[str, dict[str, Any]] = {
    "if_then_else": {"kind": "file", "size": 3},
    "beside_properties": {"id": "i1", "score": 0.5},
    "any_of": {"a": 1, "b": "x"},
    "one_of": {"kind": "team", "members": 4},
    "all_of": {"n": 1, "x": True},
    "nested": {"inner": {"q": True}},
}


@pytest.mark.parametrize("tool", list(EXPECTED))
def test_a_canary_under_an_undeclared_key_never_reaches_the_program(
    cm: CodeMode, tool: str
) -> None:
    program = (
        "def main():\n"
        f"    r = br.{tool}()\n"
        "    inner = r.get('inner', {})\n"
        "    return {'r': r, 'keys': sorted(r) + sorted(inner), 'secret': 'secret' in r}\n"
    )
    result = cm.execute(program, subject="alice")
    assert result.value == {
        "r": EXPECTED[tool],
        "keys": sorted(EXPECTED[tool]) + sorted(EXPECTED[tool].get("inner", {})),
        "secret": False,
    }
    assert branching.CANARY not in json.dumps(execute_payload(result))
    described: Any = describe_payload(cm.describe(f"br.{tool}"))
    assert "dict[str, Any]" not in described["signature"] + "".join(described["shapes"])
    assert described["result"]["read_as"] == "keys"


def test_reading_an_undeclared_key_is_a_key_error_without_the_canary(cm: CodeMode) -> None:
    result = cm.execute(
        "def main():\n"
        "    try:\n"
        "        return br.if_then_else()['secret']\n"
        "    except KeyError as e:\n"
        "        return 'KeyError'\n",
        subject="alice",
    )
    assert result.value == "KeyError"
    assert branching.CANARY not in json.dumps(execute_payload(result))
