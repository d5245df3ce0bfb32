"""One upstream MCP tool as a capability: its name, description, schemas, hints and results."""

from __future__ import annotations

from typing import Any

import mcp_types as mt
import pytest

from codemode.payloads import describe_payload
from codemode.sources.mcp.tools import TEXT_RESULT, annotations_of, tool_capability, tool_value
from codemode.sources.schema import (
    SchemaError,
)


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
