"""Each gap `codemode.sources.mcp.compat` (the upstream client's) fills in the SDK, checked
against the SDK installed: a test here fails when the SDK changes what the upstream client
relies on, or offers it publicly."""

from __future__ import annotations

import contextlib
import inspect
import sys
import threading
from typing import Any

import anyio
import uvicorn
from mcp import ClientSession, StdioServerParameters, stdio_client
from starlette.applications import Starlette

from codemode import serving
from codemode.sources.mcp import compat as client_compat
from tests.sources.mcp.conftest import FIXTURE


def test_a_session_says_when_its_connection_ended() -> None:
    """Over a real stdio server that exits mid-call."""
    assert not hasattr(ClientSession, "closed"), "the SDK says it publicly now: use that"

    async def scenario() -> tuple[bool, bool]:
        params = StdioServerParameters(command=sys.executable, args=[FIXTURE])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            before = client_compat.session_ended(session)
            with contextlib.suppress(Exception):  # it dies before it answers
                await session.call_tool("die", {})
            with anyio.fail_after(10):
                while not client_compat.session_ended(session):
                    await anyio.sleep(0.01)
            return before, client_compat.session_ended(session)

    assert anyio.run(scenario) == (False, True)


def test_the_sdk_makes_up_json_rpc_errors_for_http_failures() -> None:
    """`made_by_sdk` tells them from a server's own answer: an HTTP 500 from an upstream
    reaches the client as a JSON-RPC error that no server wrote."""
    import mcp.client.streamable_http
    import mcp.shared.jsonrpc_dispatcher
    from mcp.client.streamable_http import streamable_http_client
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    sources = inspect.getsource(mcp.client.streamable_http) + inspect.getsource(
        mcp.shared.jsonrpc_dispatcher
    )
    for start in client_compat.SDK_MADE:  # each text is still the SDK's own
        assert start.rstrip(": ") in sources, start

    async def failing(request: Any) -> PlainTextResponse:
        return PlainTextResponse("down for maintenance", status_code=500)

    app = Starlette(routes=[Route("/mcp", failing, methods=["POST", "GET", "DELETE"])])
    listening = serving.listen("127.0.0.1", 0)
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()

    async def scenario() -> BaseException:
        with anyio.fail_after(20):
            try:
                async with (
                    streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
            except BaseException as error:  # an exception group around it, perhaps
                while isinstance(error, BaseExceptionGroup):
                    error = error.exceptions[0]
                return error
        raise AssertionError("initialize answered")

    try:
        error = anyio.run(scenario)
    finally:
        server.should_exit = True
        thread.join(10)
    assert isinstance(error, mcp.MCPError)
    assert error.error.message == "Server returned an error response"
    assert client_compat.made_by_sdk(error)
    assert not client_compat.made_by_sdk(mcp.MCPError(code=-32000, message="no note named x"))
