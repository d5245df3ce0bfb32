"""The yardsticks of the `mcp` suite: servers on the SDK's lowlevel `Server` that do nothing.

`python -m benchmarks.bare_mcp http PORT` serves one tool with a small result over stateless
streamable HTTP, with JSON replies and the uvicorn settings `codemode serve` uses: what the
SDK and the transport cost per `tools/call`, with nothing of codemode's. With `http-execute`,
the tool runs its `source` with `CodeMode.execute_async` and answers the value as JSON text:
the SDK and an execution in one process, without codemode's MCP layer. `python -m
benchmarks.bare_mcp stdio` serves three tools over stdio and imports nothing of codemode:
the cold start `codemode serve` is compared with.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

_ARGUMENT = {
    "type": "object",
    "properties": {"source": {"type": "string"}},
    "required": ["source"],
}
TOOLS = [
    Tool(name=name, description=f"The {name} tool.", input_schema=_ARGUMENT)
    for name in ("search_api", "describe_api", "execute")
]


def server(tools: list[Tool], run: Callable[[str], Awaitable[str]] | None = None) -> Server[Any]:
    """A server listing `tools`, each answering the same small text, or what `run` makes
    of the call's `source`."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        text = "[1, 2, 3, 4]"
        if run is not None:
            text = await run(str((params.arguments or {})["source"]))
        return CallToolResult(content=[TextContent(type="text", text=text)])

    schemas = {tool.name: tool.input_schema for tool in tools}
    return Server(
        "bare",
        get_tool_input_schema=schemas.get,  # no tools/list run again a call
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def serve_http(port: int, *, executing: bool = False) -> None:
    import uvicorn

    from benchmarks.hosts import bench_host
    from codemode.http.server import server_config  # the settings `codemode serve` uses

    run = None
    if executing:
        cm = bench_host()
        cm.prepare()

        async def run(source: str) -> str:
            return json.dumps((await cm.execute_async(source, subject="bench")).value)

    app = server(TOOLS[2:], run).streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    uvicorn.Server(server_config(app, host="127.0.0.1", port=port)).run()


async def serve_stdio() -> None:
    bare = server(TOOLS)
    async with stdio_server() as (read, write):
        await bare.run(read, write, bare.create_initialization_options())


if __name__ == "__main__":
    if sys.argv[1] in ("http", "http-execute"):
        serve_http(int(sys.argv[2]), executing=sys.argv[1] == "http-execute")
    else:
        anyio.run(serve_stdio)
