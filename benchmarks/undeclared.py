"""A relay that serves an npm MCP server's tools without their `outputSchema`.

The npm filesystem and memory servers declare an `outputSchema` on every tool, so behind
code mode their results already have a shape a model reads in describe. Most MCP servers in
use declare none: their tools answer text, often JSON text. To measure what a model gains
when code mode learns the shape of such results, the `shapes` suite puts this relay between
code mode and the npm server: it lists the same tools with the same input schemas and
annotations but no `outputSchema`, and answers each call with the upstream's `content` only
(no `structuredContent`), adding the JSON text of the structured result when the upstream
sent no text of it.

`python -m benchmarks.undeclared memory|filesystem [args ...]` serves over stdio; the args go
to the npm server (the filesystem server's allowed folders), and so does the environment
(the memory server's `MEMORY_FILE_PATH`), so a servers.json can name the relay where it
would name the server.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ContentBlock,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from benchmarks.gateway import BIN

UPSTREAMS = {"memory": "mcp-server-memory", "filesystem": "mcp-server-filesystem"}
"""The npm servers the relay can stand in front of, by the name the command line uses."""


def undeclared(tool: Tool) -> Tool:
    """The tool as a server that declares no result shape lists it."""
    return tool.model_copy(update={"output_schema": None})


def content_only(result: CallToolResult) -> CallToolResult:
    """What a server without `outputSchema` answers: the content items alone. A structured
    result the upstream sent without any text item is added as its JSON text, as MCP asks
    such servers to do."""
    content: list[ContentBlock] = list(result.content)
    texts = [item for item in content if isinstance(item, TextContent)]
    if result.structured_content is not None and not texts:
        content.append(TextContent(type="text", text=json.dumps(result.structured_content)))
    return CallToolResult(content=content, is_error=result.is_error)


def relay(upstream: ClientSession, tools: list[Tool]) -> Server[Any]:
    """A server listing `tools` without result shapes and passing each call to `upstream`."""
    listed = [undeclared(tool) for tool in tools]

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        # The upstream checks the arguments against its own input schema.
        answered = await upstream.call_tool(params.name, params.arguments or {})
        return content_only(answered)

    schemas = {tool.name: tool.input_schema for tool in listed}
    return Server(
        "undeclared",
        get_tool_input_schema=schemas.get,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def serve(name: str, args: list[str]) -> None:
    """Start the npm server `name` as a client and relay it over this process's stdio."""
    params = StdioServerParameters(
        command=str(BIN / UPSTREAMS[name]), args=args, env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as upstream:
        await upstream.initialize()
        tools = (await upstream.list_tools()).tools
        server = relay(upstream, tools)
        async with stdio_server() as (inbound, outbound):
            await server.run(inbound, outbound, server.create_initialization_options())


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in UPSTREAMS:
        print(
            f"usage: python -m benchmarks.undeclared {'|'.join(UPSTREAMS)} [args ...]",
            file=sys.stderr,
        )
        return 2
    if not (BIN / UPSTREAMS[argv[0]]).exists():
        print(
            f"{BIN / UPSTREAMS[argv[0]]} is missing: run scripts/install-test-tools",
            file=sys.stderr,
        )
        return 2
    anyio.run(serve, argv[0], argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
