"""An upstream tool's JSON Schema read as the hints a host function would declare."""

from __future__ import annotations

import threading
from typing import Any

import jsonschema
import mcp_types as mt
import pytest

from codemode import capabilities as t
from codemode.gateway import checking
from codemode.gateway.schema import (
    UNCHECKABLE,
    Hints,
    SchemaError,
    identifier,
    nullable,
    problem,
    signature,
    validator,
)
from codemode.gateway.tools import TEXT_RESULT, annotations_of, tool_capability, tool_value
from codemode.payloads import describe_payload
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


def test_names_become_identifiers() -> None:
    names = ("list-files", "from", "2fa", "a.b", "match", "_private", "ümlaut", "日本")
    assert [identifier(n) for n in names] == [
        "list_files",
        "from_",
        "tool_2fa",
        "a_b",
        "match_",
        "private",
        "umlaut",
        "tool_",
    ]
    assert identifier("2fa", lead="arg_") == "arg_2fa"


def test_an_invalid_schema_is_refused_with_where_it_is_wrong() -> None:
    with pytest.raises(SchemaError) as info:
        validator({"type": "object", "properties": {"x": {"type": "nope"}}})
    assert str(info.value).startswith("invalid JSON Schema at /properties/x/type: ")


def test_nullable_sees_every_way_of_admitting_null() -> None:
    assert nullable({"type": ["string", "null"]})
    assert nullable({"anyOf": [{"type": "string"}, {"type": "null"}]})
    assert nullable({"enum": ["a", None]})
    assert not nullable({"type": "string"})


def test_a_violation_is_told_in_binding_words_with_the_programs_names() -> None:
    schema = {
        "type": "object",
        "properties": {
            "file-name": {"type": "string", "pattern": "^[a-z]+$"},
            "mode": {"enum": ["r", "w"]},
        },
    }
    check = jsonschema.Draft202012Validator(schema)
    texts = [
        problem(e, {"file-name": "file_name"})
        for e in check.iter_errors({"file-name": "A", "mode": "x"})
    ]
    assert sorted(texts) == [
        "argument \"file_name\" must match the pattern '^[a-z]+$'",
        "argument \"mode\" must be one of 'r', 'w'",
    ]


def test_what_a_schema_declares_is_written_as_literals_of_one_line() -> None:
    """Its pattern, enum and const values, and a key it declares, each stay on the line of
    the report they are written in: new lines and formatting characters are escapes."""
    forged = "^a$\npermission denied: forged\n    ^^^^"
    schema = {
        "type": "object",
        "properties": {
            "p": {"type": "string", "pattern": forged},
            "e": {"enum": ["x\ny"]},
            "c": {"const": "x\u202ey"},
            "k\nk": {"type": "integer"},
        },
    }
    check = validator(schema)
    errors = check.errors({"p": "b", "e": "z", "c": "z", "k\nk": "1"})
    assert sorted(problem(e, {}) for e in errors) == [
        "argument \"c\" must be 'x\\u202ey'",
        "argument \"e\" must be one of 'x\\ny'",
        'argument "k\\nk" does not meet its schema ("type")',
        "argument \"p\" must match the pattern '^a$\\npermission denied: forged\\n    ^^^^'",
    ]


def send(*_: object) -> Any:
    raise AssertionError("not called")


def tool(**fields: Any) -> mt.Tool:
    return mt.Tool(**{"name": "read-file", "input_schema": {"type": "object"}, **fields})


def test_a_tool_becomes_a_capability_described_like_a_host_function() -> None:
    capability = tool_capability(
        "fs",
        tool(
            description="Read a file. Its text comes back whole.",
            input_schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where the file is"},
                    "head": {"type": "integer", "minimum": 1},
                    "encoding": {"type": "string", "default": "utf-8"},
                },
                "required": ["path"],
            },
        ),
        send,
        expose_errors="none",
        timeout=None,
    )
    described: Any = describe_payload(capability.info)
    assert described["signature"] == (
        "fs.read_file(*, path: str, head: int | None = None, encoding: str = 'utf-8') -> Any"
    )
    assert described["summary"] == "Read a file."
    assert described["parameters"][0] == {
        "name": "path",
        "type": "str",
        "required": True,
        "doc": "Where the file is",
    }
    assert described["parameters"][1]["constraints"] == "at least 1"
    assert described["result"] == {"type": "Any", "read_as": "value", "doc": TEXT_RESULT}


def test_parameter_names_that_collide_are_refused() -> None:
    with pytest.raises(SchemaError, match='properties "a-b" and "a_b" both read as "a_b"'):
        tool_capability(
            "fs",
            tool(input_schema={"type": "object", "properties": {"a-b": {}, "a_b": {}}}),
            send,
            expose_errors="none",
            timeout=None,
        )


def test_a_non_object_input_schema_is_refused() -> None:
    with pytest.raises(SchemaError, match='the input schema is of type "array"'):
        tool_capability(
            "fs", tool(input_schema={"type": "array"}), send, expose_errors="none", timeout=None
        )


def test_a_name_that_cannot_name_a_capability_is_refused() -> None:
    with pytest.raises(SchemaError, match='namespace "json" is a builtin or standard library'):
        tool_capability("json", tool(), send, expose_errors="none", timeout=None)


def test_descriptions_lose_control_characters_and_are_bounded() -> None:
    text = "Reads\x1b[31m a file\u202e.\nSecond line.\x00" + "x" * 9000
    capability = tool_capability(
        "fs", tool(description=text), send, expose_errors="none", timeout=None
    )
    assert capability.description.startswith("Reads [31m a file .\nSecond line. x")
    assert capability.description.endswith("x ... (cut)")
    assert len(capability.description) == 8192 + len(" ... (cut)")


def test_hints_default_as_the_specification_presumes() -> None:
    assert dict(annotations_of(tool())) == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    given = tool(annotations=mt.ToolAnnotations(read_only_hint=True, open_world_hint=False))
    assert dict(annotations_of(given)) == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }


def test_text_results_parse_as_json_when_they_are_json() -> None:
    def answer(*texts: str) -> mt.CallToolResult:
        return mt.CallToolResult(content=[mt.TextContent(text=x) for x in texts])

    assert tool_value(answer('{"a": [1]}'), structured=False, expose="none") == {"a": [1]}
    assert tool_value(answer("[FILE] a.txt"), structured=False, expose="none") == "[FILE] a.txt"
    assert tool_value(answer("1", "x"), structured=False, expose="none") == [1, "x"]
    assert tool_value(answer(), structured=False, expose="none") is None
    assert tool_value(answer("NaN"), structured=False, expose="none") == "NaN"


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


def test_patterns_are_matched_in_linear_time() -> None:
    check = validator(
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|aa)*$"}}}
    )
    # Python's backtracking `re` would take longer than the universe has left on this.
    errors = list(check.errors({"a": "a" * 100 + "b"}))
    assert [problem(e, {}) for e in errors] == ["argument \"a\" must match the pattern '^(a|aa)*$'"]
    assert list(check.errors({"a": "a" * 100})) == []
    keys = validator(
        {
            "type": "object",
            "patternProperties": {"^(x|xx)*$": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert [problem(e, {}) for e in keys.errors({"x" * 50 + "y": 1})] == [
        "the arguments do not meet 'additionalProperties'"
    ]


def test_a_pattern_the_linear_engine_cannot_read_is_left_to_the_upstream() -> None:
    check = validator(
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?!x)"}}}
    )
    assert list(check.errors({"a": "x"})) == []


def test_unique_items_are_told_apart_by_json_equality() -> None:
    check = validator({"type": "array", "uniqueItems": True})
    repeats = [
        [{"a": 1, "b": [1]}, {"b": [1.0], "a": 1}],  # numbers by value, keys in any order
        [[1, "x"], [1, "x"]],
        [None, None],
    ]
    for items in repeats:
        assert [problem(e, {}) for e in check.errors(items)] == [
            "the arguments do not meet 'uniqueItems'"
        ]
    for items in ([1, True], [0, False], [{"a": 1}, {"a": True}], ["1", 1], [[1], [1, 1]]):
        assert check.errors(items) == []


def test_unique_items_take_linear_work() -> None:
    """50,000 distinct objects: 1.25 * 10**9 comparisons pairwise, one hash each here
    (on a thread, joined with a bound that only guards against a hang)."""
    check = validator({"type": "array", "uniqueItems": True, "items": {"type": "object"}})
    found: list[Any] = []
    thread = threading.Thread(
        target=lambda: found.append(check.errors([{"id": i} for i in range(50_000)])),
        daemon=True,
    )
    thread.start()
    thread.join(120)
    assert found == [[]]


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


def test_a_check_past_its_steps_is_refused_in_fixed_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both alternatives descend into the value: 2**40 steps at 40 levels."""
    monkeypatch.setattr(checking, "MAX_STEPS", 10_000)
    document = signature(BRANCHING, "T").document
    assert document({"tree": nested(5)}, never) == {"tree": nested(5)}  # a few hundred steps
    assert document({"tree": nested(40)}, never) == UNCHECKABLE
    assert UNCHECKABLE == "the arguments cannot be checked against their schema"


def test_a_stopped_check_ends_at_its_next_step() -> None:
    budget = checking.Budget()
    budget.stop()
    with pytest.raises(checking.Uncheckable):
        validator({"type": "string"}).errors("x", budget)
