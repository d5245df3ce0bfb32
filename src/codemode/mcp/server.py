"""The MCP server over a CodeMode: stdio, and streamable HTTP (stateless) behind the one
HTTP security layer of `codemode.http`.

Built on the SDK's lowlevel Server so that schemas and error texts reach the wire exactly
as written. Every tool call ends in a reply built from a result or a CodeModeError; the
last-resort net turns anything else into `internal failure`, and a middleware does the
same for every other method, so no exception text ever reaches a client.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
)
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount

import codemode
from codemode.app import CodeMode
from codemode.errors import (
    CodeModeError,
    ExecutionCanceledError,
    InternalError,
    UnauthenticatedError,
)
from codemode.http import (
    MAX_BODY_BYTES,
    SecurityMiddleware,
    StaticTokens,
    host_names,
    subject_of,
)
from codemode.mcp.inflight import InFlight, OnDisconnect, disconnected
from codemode.mcp.intake import Intake
from codemode.mcp.stdio import serve_lines
from codemode.mcp.tools import Handlers, check_arguments, failed, tools

log = logging.getLogger("codemode")

# Host and Origin are checked for every route by SecurityMiddleware; the SDK's own check
# would be a second, narrower list that only /mcp obeys. Its POST Content-Type check stays
# (ours is the same rule, applied first).
_SDK_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def build_server(
    cm: CodeMode, *, subject: str | None = None, calls: InFlight | None = None
) -> Server[Any]:
    """An MCP server exposing search_api, describe_api and execute over `cm`.

    `subject` is the fixed subject for stdio; over HTTP the security layer decides it,
    and `calls` files each call so that a cancel notification on another request can end
    it (over stdio the SDK's session does that).
    """
    handlers = Handlers(cm)
    listed = tools(cm.limits if cm.disclose_limits else None)
    by_name = {tool.name: tool for tool in listed}

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        handler = handlers.lookup(params.name)
        if handler is None:
            raise MCPError(code=INVALID_PARAMS, message="unknown tool")
        started = time.monotonic()
        who = _subject(ctx, subject)

        async def call() -> CallToolResult:
            try:
                arguments = check_arguments(by_name[params.name], params.arguments or {})
                if who is None:
                    raise UnauthenticatedError()
                return await handler(arguments, who)
            except CodeModeError as error:
                return failed(error)
            except Exception:
                log.exception("tool %s failed", params.name)
                return failed(InternalError())

        cause = ""
        if calls is None or who is None:
            result = await call()
        else:
            result = failed(ExecutionCanceledError())  # unless it ends before a cancel
            request = getattr(ctx.request, "scope", None)
            with calls.running(who, ctx.request_id, request) as scope:
                if not scope.cancel_called:  # the server is stopping: do not start
                    result = await call()
            if scope.cancel_called and request is not None and disconnected(request):
                cause = DROPPED  # its client dropped the connection (on_disconnect="cancel")
        _log_call(params.name, who, started, result, cause)
        return result

    server: Server[Any] = Server(
        cm.name,
        version=codemode.__version__,
        instructions=(
            "Find capabilities with search_api, read their exact shape with describe_api, "
            "then run one program with execute that calls several of them."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    server.middleware.append(_no_leak)
    return server


DROPPED = "(client disconnected)"
"""What the log line of a call cancelled by its client's dropped connection ends with."""


def _log_call(
    tool: str, who: str | None, started: float, result: CallToolResult, cause: str = ""
) -> None:
    """One line per tool call: `execute subject=alice 12.3 ms ok` (or the error code, and
    for a call its dropped connection cancelled, `canceled (client disconnected)`)."""
    outcome = "ok"
    if result.is_error and isinstance(result.structured_content, dict):
        outcome = str(result.structured_content["error"]["code"])
    elapsed = (time.monotonic() - started) * 1000
    log.info(
        "%s subject=%s %.1f ms %s%s", tool, who or "-", elapsed, outcome, cause and f" {cause}"
    )


def _subject(ctx: ServerRequestContext[Any], fixed: str | None) -> str | None:
    scope = getattr(ctx.request, "scope", None)
    if scope is not None:
        return subject_of(scope)
    return fixed


async def _no_leak(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Any unexpected exception in any method becomes a fixed-text JSON-RPC error."""
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError):
        raise
    except Exception:
        log.exception("unhandled error in %s", getattr(ctx, "method", "?"))
        raise MCPError(code=INTERNAL_ERROR, message="internal failure") from None


async def serve_stdio(cm: CodeMode, *, subject: str = "local") -> None:
    """Serve over stdin/stdout until the client closes the stream."""
    await serve_lines(build_server(cm, subject=subject))


def check_path(path: object) -> None:
    """ValueError for a path MCP cannot be served at: it looks like `/mcp`, and is not
    under `/api` or `/static` (the playground's)."""
    if (
        not isinstance(path, str)
        or not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", path)
        or path.split("/")[1] in ("api", "static")
    ):
        raise ValueError(
            f"the MCP path must look like /mcp and not be under /api or /static: {path!r}"
        )


def http_app(
    cm: CodeMode,
    *,
    tokens: Mapping[str, str] | None = None,
    subject: str = "local",
    host: str = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
    routes: list[BaseRoute] | None = None,
    public_paths: Iterable[str] = (),
    path: str = "/mcp",
    on_disconnect: OnDisconnect = "cancel",
) -> Starlette:
    """A Starlette app serving MCP at `path` (stateless streamable HTTP).

    Every route, `/mcp` and the extra `routes` (the web page) alike, sits behind one
    `SecurityMiddleware`: Host and Origin must name `host`, a loopback name or one of
    `allowed_hosts`; with `tokens` (token -> subject) a request to a path outside
    `public_paths` without a valid bearer token gets 401 before anything runs, and
    without them every request runs as `subject`. A call whose client drops the
    connection is cancelled, or with `on_disconnect="finish"` runs to its end; a
    `notifications/cancelled` from its subject cancels it either way.
    """
    check_path(path)
    calls = InFlight(on_disconnect)
    server = build_server(cm, calls=calls)
    # Room for the JSON escaping of a program at the source limit, so that a long program
    # gets the model-facing `source size` error rather than an HTTP 413.
    max_body_bytes = max(MAX_BODY_BYTES, 8 * cm.limits.max_source_bytes)
    mcp_app = server.streamable_http_app(
        streamable_http_path=path,
        stateless_http=True,
        # One JSON body a reply rather than an event stream of one event: a stateless
        # server sends nothing else, and the stream costs about a millisecond a request.
        # Cancels and dropped connections are this adapter's own (`InFlight`), in both
        # eras, so they do not depend on the stream.
        json_response=True,
        transport_security=_SDK_SECURITY,
        max_request_body_size=max_body_bytes,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            try:
                yield
            finally:
                calls.cancel_all()  # shielded calls too, before the SDK waits on them
                await anyio.to_thread.run_sync(cm.close)

    security = Middleware(
        SecurityMiddleware,
        host=host,
        allowed_hosts=host_names(allowed_hosts),  # refuses a bad entry now, not at a request
        tokens=StaticTokens(tokens) if tokens is not None else None,  # {} is refused
        subject=subject,
        public_paths=public_paths,
        max_body_bytes=max_body_bytes,
    )
    return Starlette(
        routes=[*(routes or []), Mount("/", app=Intake(mcp_app, path=path, calls=calls))],
        middleware=[security],
        lifespan=lifespan,
    )


__all__ = ["build_server", "check_path", "http_app", "serve_stdio"]
