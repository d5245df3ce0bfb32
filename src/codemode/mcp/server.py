"""The MCP server over a CodeMode: stdio, and streamable HTTP (stateless) behind the one
HTTP security layer of `codemode.http`.

Built on the SDK's lowlevel Server so that schemas and error texts reach the wire exactly
as written. Every tool call ends in a reply built from a result or a CodeModeError; the
last-resort net turns anything else into `internal failure`, and a middleware does the
same for every other method, so no exception text ever reaches a client.

What the SDK does not do for a client is filled in by `codemode.mcp.compat`, one function
per gap; this module decides what codemode does with them:

- Over HTTP, only POST is served (405 for any other method). A body that is not JSON gets
  -32700, one that is not a message -32600, each with a fixed text and HTTP 400; an
  unknown `MCP-Protocol-Version` header gets -32022. A batch is served for 2025-03-26 (the
  version of a client that sends no header), each message as if posted alone.
- A call runs in a cancel scope filed under its subject and request id (`InFlight`), so a
  `notifications/cancelled` from the same subject ends it in either era, whichever request
  carries it; a dropped connection ends its calls, or with `on_disconnect="finish"` lets
  them run to their end.
- Over stdio (`codemode.mcp.stdio`), every line is checked first, and the SDK's
  transport reads the client's stdin on a private descriptor while fd 0 reads the null
  device.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
)
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
)
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

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
    OnDisconnect,
    SecurityMiddleware,
    StaticTokens,
    check_on_disconnect,
    host_names,
    route_path,
    subject_of,
)
from codemode.limits import Limits
from codemode.mcp import approvals, compat
from codemode.mcp import tasks as task_calls
from codemode.mcp.compat import JSON, Rejected
from codemode.mcp.direct import DirectTools
from codemode.mcp.tools import Handlers, ToolResult, check_arguments, failed, tools
from codemode.tasks import Tasks

log = logging.getLogger("codemode")

# Host and Origin are checked for every route by SecurityMiddleware; the SDK's own check
# would be a second, narrower list that only /mcp obeys. Its POST Content-Type check stays
# (ours is the same rule, applied first).
_SDK_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def build_server(
    cm: CodeMode,
    *,
    subject: str | None = None,
    calls: InFlight | None = None,
    tasks: Tasks | None = None,
) -> Server[Any]:
    """An MCP server exposing search_api, describe_api and execute over `cm` (and its
    direct tools, `codemode.mcp.direct`; RegistrationError for those it cannot list).

    `subject` is the fixed subject for stdio; over HTTP the security layer decides it,
    and `calls` files each call so that a cancel notification on another request can end
    it (over stdio the SDK's session does that). With `tasks` (run by its owner), a
    client that declares the tasks extension gets execute as a task.
    """
    handlers, direct = Handlers(cm), DirectTools(cm)  # the three, then the host's direct tools
    disclosed = cm.limits if cm.disclose_limits else None
    listed = [*tools(disclosed, sessions=cm.sessions, tasks=tasks is not None), *direct.listed]
    by_name = {tool.name: tool for tool in listed}
    # Every caller is listed the same tools: the SDK checks a 2026-era call's
    # `Mcp-Param-*` headers against these, not a tools/list run again for each call.
    input_schemas = {tool.name: tool.input_schema for tool in listed}

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> ToolResult | InputRequiredResult | dict[str, Any]:
        handler = handlers.lookup(params.name)
        if handler is None and params.name != "execute" and params.name not in direct:
            raise MCPError(code=INVALID_PARAMS, message="unknown tool")
        started = time.monotonic()
        who = _subject(ctx, subject)

        async def call() -> ToolResult | InputRequiredResult | dict[str, Any]:
            try:
                if params.name in direct:
                    return await direct.call(ctx, params, who)
                arguments = check_arguments(by_name[params.name], params.arguments or {})
                if who is None:
                    raise UnauthenticatedError()
                if handler is None:
                    return await task_calls.execute(cm, tasks, ctx, params, arguments, who)
                return await handler(arguments, who)
            except CodeModeError as error:
                return failed(error)
            except Exception:
                log.exception("tool %s failed", params.name)
                return failed(InternalError())

        cause = ""
        result: ToolResult | InputRequiredResult | dict[str, Any] | None = None
        if calls is None or who is None:
            try:
                result = await call()
            except anyio.get_cancelled_exc_class():  # over stdio, the SDK's own cancel
                _log_call(params.name, who, started, failed(ExecutionCanceledError()))
                raise
        else:
            request = getattr(ctx.request, "scope", None)
            with calls.running(who, ctx.request_id, request) as scope:
                if not scope.cancel_called:  # the server is stopping: do not start
                    async with calls.turn(request):  # a batch's calls take turns
                        result = await call()
            if scope.cancel_called and request is not None and calls.cut(request):
                cause = DROPPED  # its client dropped the connection (on_disconnect="cancel")
        if result is None:  # cancelled before it ended
            result = failed(ExecutionCanceledError())
        _log_call(params.name, who, started, result, cause)
        return result

    server: Server[Any] = Server(
        cm.name,
        version=codemode.__version__,
        instructions=(
            "Find capabilities with search_api, read their exact shape with describe_api, "
            "then run one program with execute that calls several of them."
        ),
        get_tool_input_schema=input_schemas.get,
        on_list_tools=on_list_tools,
    )
    server.add_request_handler("tools/call", CallToolRequestParams, on_call_tool)  # a ToolResult
    server.middleware.extend([_no_leak, compat.object_arguments])
    server.middleware.append(
        approvals.boundary(cm, lambda ctx: _subject(ctx, subject), shared=calls is not None)
    )
    if tasks is not None:
        task_calls.register(server, cm, tasks, lambda ctx: _subject(ctx, subject))
    return server


DROPPED = "(client disconnected)"
"""What the log line of a call cancelled by its client's dropped connection ends with."""


def _log_call(
    tool: str,
    who: str | None,
    started: float,
    result: ToolResult | InputRequiredResult | dict[str, Any],
    cause: str = "",
) -> None:
    """One line per tool call: `execute subject=alice 12.3 ms ok` (or the error code,
    `input_required` for a program paused for a person, `task` for one started as a
    task, and for a call its dropped connection cancelled, `canceled (client
    disconnected)`)."""
    outcome = "ok"
    if isinstance(result, InputRequiredResult):
        outcome = "input_required"
    elif result.get("resultType") == "task":
        outcome = "task"
    elif result["isError"]:
        outcome = str(result["structuredContent"]["error"]["code"])
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


# -- calls in flight ---------------------------------------------------------------------

BATCH_CONCURRENCY = 4
"""How many tool calls of one batch run at once."""

_CONNECTION = "codemode.connection"
"""Where a request's ASGI scope holds its `_Connection` (copies of the scope share it)."""


@dataclass(slots=True)
class _Connection:
    dropped: bool = False
    calls: list[anyio.CancelScope] = field(default_factory=list)
    """The calls its requests run now."""
    turns: anyio.CapacityLimiter | None = None
    """For a batch: how many of its calls run at once (the others wait, cancellable)."""


class InFlight:
    """The calls running now over HTTP, by subject and request id, and by the connection
    of the request that carries each. Ids compare as the SDK's dispatcher compares them:
    `"7"` and `7` are one id."""

    def __init__(self, on_disconnect: OnDisconnect = "cancel") -> None:
        check_on_disconnect(on_disconnect)
        self.on_disconnect = on_disconnect
        self._calls: dict[tuple[str, str | int], list[anyio.CancelScope]] = {}
        self._closed = False

    def connect(self, request: MutableMapping[str, Any], *, batch: bool = False) -> None:
        """File the connection of this request (its ASGI scope) before the scope is copied,
        so `drop` reaches the calls of every copy; the calls of a `batch` take turns,
        BATCH_CONCURRENCY at a time."""
        turns = anyio.CapacityLimiter(BATCH_CONCURRENCY) if batch else None
        request.setdefault(_CONNECTION, _Connection(turns=turns))

    def turn(
        self, request: Mapping[str, Any] | None
    ) -> contextlib.AbstractAsyncContextManager[Any]:
        """Wait for the call's turn within its batch (at once for a lone request). The
        call is filed already, so a cancel ends it while it waits."""
        connection = _connection(request)
        if connection is None or connection.turns is None:
            return contextlib.nullcontext()
        return connection.turns

    @contextlib.contextmanager
    def running(
        self,
        subject: str,
        request_id: str | int | None,
        request: Mapping[str, Any] | None = None,
    ) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one call, filed while it runs, by subject and id and by the
        connection of its `request`. With `cancel`, the connection's drop cancels it; a
        cancel notification does either way. Once the server stops, or once its client
        has left (with `cancel`), it comes cancelled: the call must not start."""
        scope = anyio.CancelScope(shield=self.on_disconnect == "finish")
        connection = _connection(request)
        held = connection.calls if connection is not None else []
        if self._closed or (connection is not None and self._ends(connection)):
            scope.cancel()
        key = None if request_id is None else (subject, compat.request_key(request_id))
        if key is not None:
            self._calls.setdefault(key, []).append(scope)
        held.append(scope)
        try:
            with scope:
                yield scope
        finally:
            held.remove(scope)
            if key is not None:
                scopes = self._calls[key]
                scopes.remove(scope)
                if not scopes:
                    del self._calls[key]

    def drop(self, request: Mapping[str, Any]) -> None:
        """The client of this request dropped its connection: with `cancel`, its calls end
        (`canceled`); with `finish`, they run on and their answers are lost."""
        connection = _connection(request)
        if connection is not None:
            connection.dropped = True
            if self._ends(connection):
                for scope in list(connection.calls):
                    scope.cancel()

    def dropped(self, request: Mapping[str, Any]) -> bool:
        """Whether the client of this request has dropped its connection."""
        connection = _connection(request)
        return connection is not None and connection.dropped

    def cut(self, request: Mapping[str, Any]) -> bool:
        """Whether the drop of this request's connection ended its calls (with `cancel`)."""
        return self.on_disconnect == "cancel" and self.dropped(request)

    def _ends(self, connection: _Connection) -> bool:
        return connection.dropped and self.on_disconnect == "cancel"

    def cancel(self, subject: str, request_id: object) -> bool:
        """Cancel `subject`'s call with this id; True when exactly one matched. Two calls
        under one id (two clients of one subject) are both left alone: neither is known
        to be the one meant."""
        if not compat.is_request_id(request_id):
            return False
        scopes = self._calls.get((subject, compat.request_key(request_id)), [])
        if len(scopes) != 1:
            if scopes:
                log.info(
                    "cancel for request %.40r of %s is ambiguous; ignored", request_id, subject
                )
            return False
        scopes[0].cancel()
        return True

    def cancel_all(self) -> None:
        """Cancel every call, and any that would start after (the server is stopping;
        shielded calls too)."""
        self._closed = True
        for scopes in self._calls.values():
            for scope in scopes:
                scope.cancel()


def _connection(request: Mapping[str, Any] | None) -> _Connection | None:
    connection = request.get(_CONNECTION) if request is not None else None
    return connection if isinstance(connection, _Connection) else None


# -- the HTTP endpoint --------------------------------------------------------------------


class Intake:
    """The ASGI layer in front of the SDK's streamable HTTP app, for requests to `path`:
    the checks and the batches of the module docstring, and the cancels and dropped
    connections that `calls` acts on. A request asking for progress goes to `streaming`."""

    def __init__(self, app: ASGIApp, streaming: ASGIApp, *, path: str, calls: InFlight) -> None:
        self.app, self.streaming = app, streaming
        self.path = path
        self.calls = calls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) != self.path:
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            await compat.refuse_method(scope, receive, send)
            return
        body = await compat.whole_body(receive)  # SecurityMiddleware has bounded it
        version = Headers(scope=scope).get("mcp-protocol-version")
        try:
            message = compat.read_message(body)
            if isinstance(message, list):
                compat.check_version(version, None)
                batch = compat.check_batch(message, version or "2025-03-26")  # the default
            else:
                message = compat.check_message(message)
                compat.check_version(version, message.get("id"))
        except Rejected as rejected:
            await JSONResponse(rejected.reply(), status_code=400)(scope, receive, send)
            return
        self.calls.connect(scope, batch=isinstance(message, list))
        # A plain task, not a task group (whose start and cancel cost a request more than
        # the rest of this layer): the watcher only awaits `receive`, and serving runs on
        # asyncio already (the engine awaits executions with it).
        watching = asyncio.create_task(self._watch(receive, scope))
        try:
            if isinstance(message, list):
                await self._batch(batch, scope, receive, send)
            else:
                self._notice(message, scope)
                app = self.streaming if compat.progress_stream(message, scope) else self.app
                await app(scope, compat.replay(body), compat.no_body_type(send))
        finally:
            watching.cancel()

    async def _watch(self, receive: Receive, scope: Scope) -> None:
        await compat.disconnected(receive)
        self.calls.drop(scope)

    def _notice(self, message: dict[str, JSON], scope: Scope) -> None:
        """Act on a cancel notification (the SDK then acknowledges it)."""
        request_id = compat.cancelled_request(message)
        subject = subject_of(scope)
        if request_id is not None and subject is not None:
            self.calls.cancel(subject, request_id)

    async def _batch(self, batch: list[JSON], scope: Scope, receive: Receive, send: Send) -> None:
        replies: list[bytes | None] = [None] * len(batch)

        async def serve(index: int, message: JSON) -> None:
            try:
                checked = compat.check_message(message)
            except Rejected as rejected:
                replies[index] = _json(rejected.reply())
                return
            self._notice(checked, scope)
            replies[index] = await compat.answer_alone(self.app, scope, checked)

        async with anyio.create_task_group() as group:
            for index, message in enumerate(batch):
                group.start_soon(serve, index, message)
        answered = [reply for reply in replies if reply is not None]
        replies.clear()
        if not answered:
            await Response(status_code=202)(scope, receive, send)
            return
        # The replies stay the bytes the SDK wrote, and go out one by one: a batch holds
        # no more than their text, once.
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for index in range(len(answered)):
            reply, answered[index] = answered[index], b""
            chunk = (b"," if index else b"[") + reply
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"]", "more_body": False})


def _json(value: JSON) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


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


def body_limit(limits: Limits) -> int:
    """The largest request body served: room for the JSON escaping of a program at the
    source limit, so that a long program gets the model-facing `source size` error rather
    than an HTTP 413, and for the sealed state of a paused program at its limit (escaped
    into the SDK's claims, encrypted, base64-encoded) that a retry carries back."""
    return max(MAX_BODY_BYTES, 8 * limits.max_source_bytes) + 2 * limits.max_paused_bytes


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
    tasks: bool = True,
) -> Starlette:
    """A Starlette app serving MCP at `path` (stateless streamable HTTP).

    Every route, `/mcp` and the extra `routes` (the web page) alike, sits behind one
    `SecurityMiddleware`: Host and Origin must name `host`, a loopback name or one of
    `allowed_hosts`; with `tokens` (token -> subject) a request to a path outside
    `public_paths` without a valid bearer token gets 401 before anything runs, and
    without them every request runs as `subject`. A call whose client drops the
    connection is cancelled, or with `on_disconnect="finish"` runs to its end; a
    `notifications/cancelled` from its subject cancels it either way. With `tasks=False`
    no client gets execute as a task: each runs within the execution time.
    """
    check_path(path)
    calls, running = InFlight(on_disconnect), Tasks(cm) if tasks else None
    server = build_server(cm, calls=calls, tasks=running)
    max_body_bytes = body_limit(cm.limits)
    endpoint = functools.partial(
        server.streamable_http_app,
        streamable_http_path=path,
        stateless_http=True,
        transport_security=_SDK_SECURITY,
        max_request_body_size=max_body_bytes,
    )
    # One JSON body a reply rather than an event stream (a millisecond a request), but for
    # a request asking for progress: its notes go before its reply. Cancels and dropped
    # connections are this adapter's own (`InFlight`), so they do not depend on the stream.
    mcp_app, json_manager = endpoint(json_response=True), server.session_manager
    streaming = endpoint(json_response=False)  # now server.session_manager is its manager

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with (
            json_manager.run(),
            server.session_manager.run(),
            running.running() if running is not None else contextlib.nullcontext(),
        ):
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
    intake = Intake(mcp_app, streaming, path=path, calls=calls)
    return Starlette(
        routes=[*(routes or []), Mount("/", app=intake)],
        middleware=[security],
        lifespan=lifespan,
    )


__all__ = [
    "BATCH_CONCURRENCY",
    "InFlight",
    "Intake",
    "body_limit",
    "build_server",
    "check_path",
    "http_app",
]
