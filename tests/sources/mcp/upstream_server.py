"""A real MCP server (the official SDK's lowlevel `Server`) with a tool for each fault the
gateway must survive: a hang, a huge result, a crash mid-call, an error with host text,
undeclared structured fields, media content, a tool list that changes, a bad schema.

Run as `python upstream_server.py` (stdio) or `python upstream_server.py --http PORT
[--token TOKEN]`. `UPSTREAM_EVENTS` names a file it appends `start`, `cancelled` and
`finished` lines to; `UPSTREAM_MODE=exit` makes it exit before it answers anything.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from typing import Any

import anyio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    AudioContent,
    CallToolRequestParams,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

CANARY = "CANARY-upstream-secret-4471"


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


STRUCTURED_OUT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "size": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "size"],
}
TOOLS = [
    Tool(
        name="echo-text",
        description="Echo the text back. Plain text result.",
        input_schema={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "What to echo", "maxLength": 100},
                "times": {"type": "integer", "minimum": 1, "maximum": 3, "default": 1},
                "code": {"type": "string", "pattern": "^[a-z]+$"},
            },
            "required": ["text"],
        },
        annotations=ToolAnnotations(read_only_hint=True),
    ),
    Tool(name="json_text", description="A JSON document as text.", input_schema=schema()),
    Tool(
        name="slow",
        description="Sleep, then answer.",
        input_schema=schema(seconds={"type": "number"}),
    ),
    Tool(
        name="big", description="A huge text.", input_schema=schema(megabytes={"type": "integer"})
    ),
    Tool(name="die", description="Exit mid-call.", input_schema=schema()),
    Tool(name="fail", description="Answer with an error.", input_schema=schema()),
    Tool(name="rpc_error", description="Answer with a JSON-RPC error.", input_schema=schema()),
    Tool(
        name="structured",
        description="A declared structured result, with extra fields.",
        input_schema=schema(),
        output_schema=STRUCTURED_OUT,
        annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False),
    ),
    Tool(name="media", description="An image, audio and a resource.", input_schema=schema()),
    Tool(name="pid", description="The server's process id.", input_schema=schema()),
    Tool(name="grow", description="Add a tool and say the list changed.", input_schema=schema()),
    Tool(
        name="bad_structured",
        description="A structured result that breaks its own output schema.",
        input_schema=schema(),
        output_schema=STRUCTURED_OUT,
    ),
    Tool(name="2fa", description="A name that starts with a digit.", input_schema=schema()),
    Tool(
        name="broken",
        description="A tool with an invalid schema.",
        input_schema={"type": "object", "properties": {"x": {"type": "no-such-type"}}},
    ),
]
GROWN = Tool(name="added", description="Added by grow.", input_schema=schema())
grown = False


def note(text: str) -> None:
    path = os.environ.get("UPSTREAM_EVENTS")
    if path:
        with open(path, "a") as events:
            events.write(text + "\n")


def text(value: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=value)])


async def on_list_tools(
    ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
) -> ListToolsResult:
    mode = os.environ.get("UPSTREAM_MODE")
    if mode == "listfail":
        raise MCPError(code=INTERNAL_ERROR, message=f"cannot list {CANARY}")
    if mode == "early-change":  # says its tools changed while they are first listed
        await ctx.session.send_tool_list_changed()
    return ListToolsResult(tools=[*TOOLS, GROWN] if grown else TOOLS)


async def on_call_tool(
    ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
) -> CallToolResult:
    global grown
    args = params.arguments or {}
    name = params.name
    if name == "echo-text":
        return text(" ".join([args["text"]] * args.get("times", 1)))
    if name == "json_text":
        return text(json.dumps({"items": [1, 2, 3], "next": None}))
    if name == "slow":
        note("start")
        try:
            await anyio.sleep(float(args["seconds"]))
        except anyio.get_cancelled_exc_class():
            note("cancelled")
            raise
        note("finished")
        return text("slept")
    if name == "big":
        return text("x" * (int(args["megabytes"]) * 1024 * 1024))
    if name == "die":
        os._exit(3)
    if name == "fail":
        return CallToolResult(content=[TextContent(text=f"ENOENT: {CANARY}")], is_error=True)
    if name == "rpc_error":  # -32000: servers use it for their own errors too
        raise MCPError(code=-32000, message=f"bad things {CANARY}")
    if name == "bad_structured":
        return CallToolResult(content=[], structured_content={"name": 3})
    if name == "2fa":
        return text("second factor")
    if name == "structured":
        return CallToolResult(
            content=[TextContent(text=CANARY)],
            structured_content={"name": "a", "size": 2, "secret": CANARY},
        )
    if name == "media":
        return CallToolResult(
            content=[
                ImageContent(data=base64.b64encode(b"\x89PNG....").decode(), mime_type="image/png"),
                AudioContent(data=base64.b64encode(b"RIFF").decode(), mime_type="audio/wav"),
                EmbeddedResource(
                    resource=TextResourceContents(
                        uri="file:///a.txt", mime_type="text/plain", text="hi"
                    )
                ),
            ]
        )
    if name == "pid":
        return text(str(os.getpid()))
    if name == "grow":
        grown = True
        await ctx.session.send_tool_list_changed()
        return text("grown")
    if name == "added":
        return text("added")
    raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {name}")


server = Server("fixture", version="1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def main() -> None:
    if os.environ.get("UPSTREAM_MODE") == "exit":
        print("fixture: refusing to start", file=sys.stderr)
        sys.exit(4)
    print("fixture: started", file=sys.stderr, flush=True)
    if "--http" in sys.argv:
        serve_http(int(sys.argv[sys.argv.index("--http") + 1]))
        return
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def serve_http(port: int) -> None:
    import contextlib

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Mount

    token = sys.argv[sys.argv.index("--token") + 1] if "--token" in sys.argv else None
    inner = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True)

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        if (
            token
            and scope["type"] == "http"
            and headers.get(b"authorization") != f"Bearer {token}".encode()
        ):
            await JSONResponse({"error": "invalid_token"}, status_code=401)(scope, receive, send)
            return
        await inner(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with server.session_manager.run():
            yield

    app = Starlette(routes=[Mount("/", app=guarded)], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    time.sleep(float(os.environ.get("UPSTREAM_DELAY", "0")))
    main()
