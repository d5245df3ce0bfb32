"""A real MCP server (the SDK's lowlevel `Server`, over stdio) whose tools declare no
output schema, so the gateway learns their result shapes from what they answer:

- `stat`: a JSON object as text (`{"kind", "size", "owner": {"name"}}`), as most servers
  answer;
- `info`: `structuredContent` (`{"title", "tags", "pages"}`), with the same JSON as text,
  as MCP says a server should;
- `owners`: a map whose keys differ each call (key names are data, never shown);
- `note`: `{"text"}`, answering for whichever subject called (the tests compare which
  names each subject may read).

Every value holds `CANARY`, and so does every key of `owners`. `SHAPES_CALLS` names a
file it appends one line per call to (`call <tool>`), so a test can tell a program that
was refused before it ran from one that reached the upstream.

Run as `python shapes_server.py`; `create()` is a CodeMode over it, for
`codemode serve tests.sources.mcp.shapes_server:create` (the playground's test).
"""

from __future__ import annotations

import json
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

CANARY = "CANARY-shapes-secret-5093"
NO_INPUT: dict[str, Any] = {"type": "object", "properties": {}}
WITH_FIELD: dict[str, Any] = {
    "type": "object",
    "properties": {"field": {"type": "string"}},
}

TOOLS = [
    Tool(name="stat", description="A file's facts.", input_schema=NO_INPUT),
    Tool(name="info", description="A book's facts.", input_schema=NO_INPUT),
    Tool(name="owners", description="Who owns what.", input_schema=NO_INPUT),
    Tool(name="note", description="A note with one extra field.", input_schema=WITH_FIELD),
]
_calls = 0


def _count(name: str) -> None:
    path = os.environ.get("SHAPES_CALLS")
    if path:
        with open(path, "a") as calls:
            calls.write(f"call {name}\n")


def answer(name: str, arguments: dict[str, Any]) -> CallToolResult:
    global _calls
    _calls += 1
    if name == "stat":
        value = {"kind": f"file {CANARY}", "size": 1000 + _calls, "owner": {"name": CANARY}}
        return CallToolResult(content=[TextContent(text=json.dumps(value))])
    if name == "info":
        value = {"title": CANARY, "tags": [CANARY], "pages": _calls}
        return CallToolResult(
            content=[TextContent(text=json.dumps(value))], structured_content=value
        )
    if name == "owners":
        value = {f"{CANARY}{_calls}x{i}": {"share": i, "who": CANARY} for i in range(3)}
        return CallToolResult(content=[TextContent(text=json.dumps(value))])
    if name == "note":
        value = {"text": CANARY, arguments.get("field") or "plain": CANARY}
        return CallToolResult(content=[TextContent(text=json.dumps(value))])
    raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {name}")


async def on_list_tools(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListToolsResult:
    return ListToolsResult(tools=TOOLS)


async def on_call_tool(
    ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> CallToolResult:
    _count(params.name)
    return answer(params.name, dict(params.arguments or {}))


server = Server("shapes", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def create() -> Any:
    """A CodeMode whose namespace `up` is this server."""
    import sys

    from codemode import CodeMode
    from codemode.authz import AllowAll

    cm = CodeMode(authorizer=AllowAll())
    cm.add_mcp_server("up", command=sys.executable, args=[__file__])
    return cm


def main() -> None:
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
