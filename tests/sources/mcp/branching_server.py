"""A real MCP server (the SDK's lowlevel `Server`, over stdio) whose tools declare output
schemas that branch: `if`/`then`/`else`, `anyOf`, `oneOf` and `allOf` beside
`"type": "object"`, with constraint-only members. Each answer meets its schema and plants
`CANARY` under keys no part of the schema declares, at the top and one level down, so a
test can see that only declared keys reach the program.

Run as `python branching_server.py`.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

CANARY = "CANARY-branching-secret-8812"
NO_INPUT: dict[str, Any] = {"type": "object", "properties": {}}

IF_THEN_ELSE: dict[str, Any] = {
    "type": "object",
    "if": {"properties": {"kind": {"const": "file"}}, "required": ["kind"]},
    "then": {
        "properties": {"kind": {"const": "file"}, "size": {"type": "integer"}},
        "required": ["kind", "size"],
    },
    "else": {
        "properties": {"kind": {"const": "dir"}, "entries": {"type": "array"}},
        "required": ["kind"],
    },
}
BESIDE_PROPERTIES: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "string"}},
    "required": ["id"],
    "anyOf": [{"required": ["id"]}, {"not": {"required": ["nothing"]}}],
    "if": {"required": ["id"]},
    "then": {"properties": {"score": {"type": "number"}}},
}
ANY_OF: dict[str, Any] = {
    "type": "object",
    "anyOf": [
        {"required": ["a"]},
        {"minProperties": 1},
        {"properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
    ],
}
ONE_OF: dict[str, Any] = {
    "type": "object",
    "oneOf": [
        {
            "properties": {"kind": {"const": "user"}, "name": {"type": "string"}},
            "required": ["kind", "name"],
        },
        {
            "properties": {"kind": {"const": "team"}, "members": {"type": "integer"}},
            "required": ["kind", "members"],
        },
    ],
}
ALL_OF: dict[str, Any] = {
    "type": "object",
    "allOf": [
        {"minProperties": 1},
        {"not": {"required": ["forbidden"]}},
        {"properties": {"n": {"type": "integer"}}, "required": ["n"]},
        {"anyOf": [{"properties": {"x": {"type": "boolean"}}}, {"required": ["n"]}]},
    ],
}
NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "inner": {
            "type": "object",
            "oneOf": [
                {"properties": {"q": {"type": "boolean"}}, "required": ["q"]},
                {"required": ["z"], "not": {"required": ["q"]}},
            ],
        }
    },
    "required": ["inner"],
}

ANSWERS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "if_then_else": (IF_THEN_ELSE, {"kind": "file", "size": 3, "secret": CANARY}),
    "beside_properties": (BESIDE_PROPERTIES, {"id": "i1", "score": 0.5, "secret": CANARY}),
    "any_of": (ANY_OF, {"a": 1, "b": "x", "secret": CANARY}),
    "one_of": (ONE_OF, {"kind": "team", "members": 4, "secret": CANARY}),
    "all_of": (ALL_OF, {"n": 1, "x": True, "secret": CANARY}),
    "nested": (NESTED, {"inner": {"q": True, "secret": CANARY}, "secret": CANARY}),
}
"""Each tool's output schema, and the structured content it answers with."""

TOOLS = [
    Tool(name=name, description=f"Answers {name}.", input_schema=NO_INPUT, output_schema=out)
    for name, (out, _) in ANSWERS.items()
]


async def on_list_tools(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListToolsResult:
    return ListToolsResult(tools=TOOLS)


async def on_call_tool(
    ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> CallToolResult:
    if params.name not in ANSWERS:
        raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {params.name}")
    return CallToolResult(
        content=[TextContent(text=CANARY)], structured_content=ANSWERS[params.name][1]
    )


server = Server("branching", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def main() -> None:
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
