"""A real MCP server (the SDK's lowlevel `Server`, over stdio) whose output schemas cost
a naive validator without end, each answer small:

- `backtracking`: a string declared with the pattern `^(a+)+$`, answered `"a" * length
  + "!"` (Python's backtracking `re` takes twice as long for each further `a`);
- `unique`: `count` distinct objects declared `uniqueItems` (pairwise, n² comparisons);
- `branching`: an object nested `depth` levels under a schema whose two `anyOf` members
  both descend into it (each level doubles the work of one that tries both);
- `ok`: a trivial structured answer;
- `patterns`: a word its input schema checks by 1,100 distinct patterns of forty Unicode
  word characters, each compiled in about 13 ms with the GIL held (more than a shared
  cache of 1,024 holds: a naive check compiles each again at every call);
- `rows`: rows its input schema reads 10,000 times over (`uniqueItems` under a fan-out of
  `$ref`s), each reading hashing every value of them.

Run as `python hostile_schema_server.py`. `HOSTILE_EVENTS` names a file it appends
`answered <tool>` to as it answers.
"""

from __future__ import annotations

import os
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

CATASTROPHIC = "^(a+)+$"


def takes(name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "integer"}}, "required": [name]}


BRANCHING: dict[str, Any] = {
    "$defs": {
        "node": {
            "anyOf": [
                {"properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["never"]},
                {"properties": {"next": {"$ref": "#/$defs/node"}}},
            ]
        }
    },
    "type": "object",
    "properties": {"next": {"$ref": "#/$defs/node"}},
}


def fanout(leaf: dict[str, Any], levels: int) -> dict[str, Any]:
    """`leaf` read `10 ** levels` times over one value, through `allOf` of `$ref`s."""
    defs: dict[str, Any] = {"l0": leaf}
    for level in range(1, levels + 1):
        defs[f"l{level}"] = {"allOf": [{"$ref": f"#/$defs/l{level - 1}"}] * 10}
    return defs


TOOLS = [
    Tool(
        name="backtracking",
        description="A word its pattern backtracks on.",
        input_schema=takes("length"),
        output_schema={
            "type": "object",
            "properties": {"word": {"type": "string", "pattern": CATASTROPHIC}},
            "required": ["word"],
        },
    ),
    Tool(
        name="unique",
        description="Distinct objects, declared unique.",
        input_schema=takes("count"),
        output_schema={
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"type": "object", "properties": {"id": {"type": "integer"}}},
                }
            },
            "required": ["items"],
        },
    ),
    Tool(
        name="branching",
        description="An object nested deep under alternatives.",
        input_schema=takes("depth"),
        output_schema=BRANCHING,
    ),
    Tool(
        name="ok",
        description="A trivial answer.",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
    ),
    Tool(
        name="patterns",
        description="A word, checked by many patterns.",
        input_schema={
            "type": "object",
            "properties": {
                "word": {
                    "type": "string",
                    "allOf": [{"pattern": f"\\w{{40}}x{i}"} for i in range(1100)],
                }
            },
        },
    ),
    Tool(
        name="rows",
        description="Rows, read again and again.",
        input_schema={
            "type": "object",
            "$defs": fanout({"uniqueItems": True}, 4),
            "properties": {"rows": {"type": "array", "$ref": "#/$defs/l4"}},
        },
    ),
]


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"next": node}
    return node


def note(text: str) -> None:
    path = os.environ.get("HOSTILE_EVENTS")
    if path:
        with open(path, "a") as events:
            events.write(text + "\n")


def structured(value: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(text="-")], structured_content=value)


async def on_list_tools(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListToolsResult:
    return ListToolsResult(tools=TOOLS)


async def on_call_tool(
    ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> CallToolResult:
    args = params.arguments or {}
    note(f"answered {params.name}")
    if params.name == "backtracking":
        return structured({"word": "a" * int(args["length"]) + "!"})
    if params.name == "unique":
        return structured({"items": [{"id": i} for i in range(int(args["count"]))]})
    if params.name == "branching":
        return structured(nested(int(args["depth"])))
    if params.name in ("ok", "patterns", "rows"):
        return structured({"ok": True})
    raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {params.name}")


server = Server("hostile", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def main() -> None:
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
