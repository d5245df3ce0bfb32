"""A real MCP server (the SDK's lowlevel `Server`, stdio) whose tools the test rewrites.

`CATALOG_FILE` names a JSON file `{"version": N, "tools": [Tool, ...], "list_delay": s,
"fail_list": bool, "endless_pages": bool}` (`fail_list`: every `tools/list` answers an
error; `endless_pages`: every page names a next one),
read at the start of every `tools/list` (which then waits `list_delay` seconds, so a
listing can be slower than a later one). With `LIST_EVENTS`, it appends `start N` and
`end N` to that file around each listing of version N. The tool `notify` (always listed) sends
`notifications/tools/list_changed` and then answers. Every other tool answers JSON text:
`{"tool", "arguments" (as received), "version" (of the file when it ran)}`.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.types import (
    INTERNAL_ERROR,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

NOTIFY = Tool(
    name="notify",
    description="Say the tool list changed.",
    input_schema={"type": "object", "properties": {}},
    annotations=ToolAnnotations(read_only_hint=True),
)


def catalog() -> dict[str, Any]:
    with open(os.environ["CATALOG_FILE"]) as file:
        found: dict[str, Any] = json.load(file)
    return found


async def on_list_tools(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListToolsResult:
    now = catalog()
    note(f"start {now['version']}")
    if now.get("fail_list"):
        raise MCPError(code=INTERNAL_ERROR, message="cannot list now")
    tools = [Tool.model_validate(tool) for tool in now["tools"]]
    await anyio.sleep(float(now.get("list_delay", 0)))
    note(f"end {now['version']}")
    if now.get("endless_pages"):
        return ListToolsResult(tools=[NOTIFY], next_cursor=f"{params.cursor if params else ''}+")
    return ListToolsResult(tools=[NOTIFY, *tools])


def note(line: str) -> None:
    path = os.environ.get("LIST_EVENTS")
    if path:
        with open(path, "a") as events:
            events.write(line + "\n")


async def on_call_tool(
    ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> CallToolResult:
    if params.name == "notify":
        await ctx.session.send_tool_list_changed()
        return CallToolResult(content=[TextContent(text="ok")])
    answer = {
        "tool": params.name,
        "arguments": params.arguments or {},
        "version": catalog()["version"],
    }
    return CallToolResult(content=[TextContent(text=json.dumps(answer))])


def main() -> None:
    from mcp.server.stdio import stdio_server

    server = Server("changing", on_list_tools=on_list_tools, on_call_tool=on_call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
