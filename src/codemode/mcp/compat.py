"""What codemode needs of the `mcp` SDK that its public API does not give, one function
per gap.

Nothing else in codemode names a private SDK attribute or works around SDK behaviour.
Each function says what upstream would need for it to go, and has a test
(tests/mcp/test_compat.py) against the SDK installed that fails when the SDK
changes the behaviour it answers, or starts to offer it publicly. It imports nothing from
codemode.

The gaps, by where they show:

- The SDK's internals: which protocol versions it speaks, and request ids as its
  dispatcher compares them. (What the upstream client needs, whether a session's
  connection has ended and which errors the SDK made up, is `codemode.sources.mcp.compat`.)
- JSON-RPC messages: the SDK answers a body that is not JSON, or not a message, in its
  parser's or validator's words (HTTP) or not at all (stdio), and takes a request whose
  id is null, a bool, a float or an object for a notification (`read_message`,
  `check_message`). It has no batches, which 2025-03-26 clients may send
  (`check_batch`, `answer_alone`).
- Tool calls: arguments that are not an object get -32602 with empty `data`
  (`object_arguments`).
- Stateless streamable HTTP: a GET is held open as an event stream that never carries a
  message (`refuse_method`); an unknown `MCP-Protocol-Version` header is answered as a
  2026 request without its envelope (`check_version`); a cancel notification is answered
  and dropped, since it reaches a request of its own (`cancelled_request`); and with JSON
  replies a dropped connection is never noticed (`disconnected`); an accepted
  notification's empty 202 claims a JSON body (`no_body_type`); and the reply is JSON or
  an event stream for every request of an app, never by what the request asks
  (`progress_stream`).
- stdio: the lines above reach the SDK only through `checked_lines`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, TypeGuard

import anyio
import pydantic_core
from mcp import MCPError
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.dispatcher import coerce_request_id
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import (  # not exported by `mcp_types` itself
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

JSON = Any
"""A decoded JSON value."""

# -- the SDK's internals -------------------------------------------------------------------

HANDSHAKE_VERSIONS: tuple[str, ...] = tuple(HANDSHAKE_PROTOCOL_VERSIONS)
"""The protocol versions a client reaches with `initialize` (the 2025 era)."""
MODERN_VERSIONS: tuple[str, ...] = tuple(MODERN_PROTOCOL_VERSIONS)
"""The versions a request may name without a handshake (2026-07-28 and later)."""
KNOWN_VERSIONS: tuple[str, ...] = tuple(KNOWN_PROTOCOL_VERSIONS)
"""Every version the SDK speaks, either way. Upstream: `mcp_types` would export the
version lists (today only its `version` module has them)."""
LATEST_HANDSHAKE = LATEST_HANDSHAKE_VERSION
"""What `initialize` settles on when the client asks for a version the SDK does not know."""


def request_key(request_id: str | int) -> str | int:
    """A request id as the SDK's dispatcher correlates it (`"7"` and `7` are one id), so
    a cancel notification finds the call it names. Upstream: the SDK's `mcp` package
    would export it (it is `mcp.shared.dispatcher.coerce_request_id`, a module of the
    SDK's internals)."""
    return coerce_request_id(request_id)


# -- JSON-RPC messages -----------------------------------------------------------------------

PARSE_ERROR_MESSAGE = "Parse error: the message is not valid JSON"
NOT_A_MESSAGE = (
    "Invalid Request: send one JSON-RPC 2.0 object with jsonrpc, method, and an id for a request"
)
BAD_ID = "Invalid Request: id must be a string or an integer"
EMPTY_BATCH = "Invalid Request: a batch must hold at least one message"
MAX_BATCH = 20
"""The most messages one batch may hold: each is a request of its own, answered at once."""
LONG_BATCH = f"Invalid Request: a batch may hold at most {MAX_BATCH} messages"
BATCH_VERSIONS = ("2025-03-26",)
"""Protocol versions whose clients may send a batch."""
NO_BATCHES = "Invalid Request: batches belong to protocol 2025-03-26; send one message at a time"


class Rejected(Exception):
    """A message that gets a JSON-RPC error, with a fixed text, instead of reaching the SDK."""

    def __init__(
        self,
        code: int,
        message: str,
        request_id: str | int | None = None,
        data: dict[str, JSON] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id
        self.data = data

    def reply(self) -> dict[str, JSON]:
        """The JSON-RPC error response."""
        error: dict[str, JSON] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": self.request_id, "error": error}


def read_message(raw: bytes | str) -> JSON:
    """The decoded body or line (a message, or a batch to check one by one), or Rejected
    with -32700. The SDK's own parser decides, so what passes here (no BOM, no lone
    surrogate, nesting within its limit) is what the SDK reads after. Upstream: the
    transports would answer a parse error with a fixed text (HTTP says the parser's
    words; stdio drops the line)."""
    try:
        data = raw.encode("utf-8") if isinstance(raw, str) else raw  # stdio: bytes not UTF-8
        return pydantic_core.from_json(data, allow_inf_nan=False)  # NaN is no JSON
    except (UnicodeEncodeError, ValueError):
        raise Rejected(PARSE_ERROR, PARSE_ERROR_MESSAGE) from None


def check_message(message: JSON) -> dict[str, JSON]:
    """`message` when it is one well-formed request, notification or response, else
    Rejected with -32600 (echoing its id when that id is a valid one). Upstream: the SDK
    would refuse an id that is null, a bool, a float or an object (today such a request
    is taken for a notification and never answered) and answer a malformed message with a
    fixed text (today pydantic's findings, under -32602)."""
    if not isinstance(message, dict):
        raise Rejected(INVALID_REQUEST, NOT_A_MESSAGE)
    has_id = "id" in message
    request_id = message.get("id")
    if has_id and not is_request_id(request_id):
        raise Rejected(INVALID_REQUEST, BAD_ID)
    params = message.get("params")
    is_call = isinstance(message.get("method"), str) and (
        params is None or isinstance(params, dict)
    )
    is_reply = has_id and (_is_result(message) or _is_error(message))
    if message.get("jsonrpc") != "2.0" or not (is_call or is_reply):
        raise Rejected(INVALID_REQUEST, NOT_A_MESSAGE, request_id)
    return message


def is_request_id(value: JSON) -> TypeGuard[str | int]:
    """A JSON-RPC id MCP accepts: a string or an integer (never null, a bool or a float)."""
    return isinstance(value, str) or _is_int(value)


def check_batch(batch: list[JSON], version: str | None) -> list[JSON]:
    """`batch` when `version` has batches and it holds 1 to MAX_BATCH messages, else
    Rejected with -32600 (its messages are checked one by one after). Upstream: the SDK
    would serve batches for 2025-03-26 (HTTP refuses one in pydantic's words; stdio
    drops it) or refuse them with a fixed text."""
    if version not in BATCH_VERSIONS:
        raise Rejected(INVALID_REQUEST, NO_BATCHES)
    if not batch:
        raise Rejected(INVALID_REQUEST, EMPTY_BATCH)
    if len(batch) > MAX_BATCH:
        raise Rejected(INVALID_REQUEST, LONG_BATCH)
    return batch


def cancelled_request(message: dict[str, JSON]) -> str | int | None:
    """The id a `notifications/cancelled` names, for the caller to cancel the call itself.
    Upstream: a stateless server would route a cancel to the call it names (today it
    reaches a request of its own, which the SDK answers and drops)."""
    params = message.get("params")
    if message.get("method") != "notifications/cancelled" or not isinstance(params, dict):
        return None
    request_id = params.get("requestId")
    return request_id if is_request_id(request_id) else None


def _is_result(message: dict[str, JSON]) -> bool:
    return isinstance(message.get("result"), dict) and "error" not in message


def _is_error(message: dict[str, JSON]) -> bool:
    error = message.get("error")
    return (
        "result" not in message
        and isinstance(error, dict)
        and _is_int(error.get("code"))
        and isinstance(error.get("message"), str)
    )


def _is_int(value: JSON) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- tool calls ------------------------------------------------------------------------------

NOT_AN_OBJECT = "Invalid params: arguments must be an object of the tool's parameters"
"""The error of a `tools/call` whose `arguments` is not a JSON object (-32602)."""


async def object_arguments(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """A server middleware: a `tools/call` whose `arguments` is present and not an object
    gets -32602 with `NOT_AN_OBJECT` and `data` naming the field and what it was, in
    every transport and era. Upstream: the SDK would say which parameter failed (today
    `Invalid request parameters` with empty `data`)."""
    params = ctx.params
    if ctx.method == "tools/call" and isinstance(params, dict):
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            data = {"field": "arguments", "expected": "object", "got": _json_type(arguments)}
            raise MCPError(code=INVALID_PARAMS, message=NOT_AN_OBJECT, data=data)
    return await call_next(ctx)


def _json_type(value: JSON) -> str:
    """The JSON type of a decoded value, as JSON Schema names it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    names = {float: "number", str: "string", list: "array", dict: "object"}
    return names.get(type(value), "null")


# -- stateless streamable HTTP ---------------------------------------------------------------

POST_ONLY = "Method Not Allowed: this stateless server takes each message by POST"
"""The error of a request to the MCP endpoint by any other method (HTTP 405)."""
UNSUPPORTED_VERSION = (
    f"Unsupported protocol version; this server speaks {', '.join(MODERN_VERSIONS)}, "
    f"and {', '.join(HANDSHAKE_VERSIONS)} after initialize"
)


async def refuse_method(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer a request to the MCP endpoint by a method other than POST: 405, `Allow:
    POST`, and -32600 with `POST_ONLY`. Upstream: a stateless server would refuse a GET
    (today it holds one open as an event stream that never carries a message)."""
    reply = Rejected(INVALID_REQUEST, POST_ONLY).reply()
    await JSONResponse(reply, status_code=405, headers={"Allow": "POST"})(scope, receive, send)


def check_version(version: str | None, request_id: JSON) -> None:
    """Rejected with -32022 when an `MCP-Protocol-Version` header names no version the SDK
    speaks. Its message names both eras; `data.supported` lists the versions a request may
    name without `initialize`, as `server/discover` does: the protocol's conformance suite
    holds one to the other, and a 2025-era client negotiates at `initialize`, never here.
    Upstream: the SDK would answer an unknown version as one (today it asks for the 2026
    envelope, -32602)."""
    if version is not None and version not in KNOWN_VERSIONS:
        data = {"supported": list(MODERN_VERSIONS), "requested": version[:100]}
        raise Rejected(UNSUPPORTED_PROTOCOL_VERSION, UNSUPPORTED_VERSION, request_id, data)


async def answer_alone(app: ASGIApp, scope: Scope, message: dict[str, JSON]) -> bytes | None:
    """The reply of the SDK's app `app` (JSON replies) to `message` posted on its own with
    the headers of `scope`: the JSON text of its reply, or None for a notification or a
    response (202). This serves a batch one message at a time. Upstream: the SDK would
    serve batches."""
    body = json.dumps(message, separators=(",", ":")).encode()
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    status = 0
    chunks: list[bytes] = []

    async def send(event: Message) -> None:
        nonlocal status
        if event["type"] == "http.response.start":
            status = event["status"]
        elif event["type"] == "http.response.body":
            chunks.append(event.get("body", b""))

    await app({**scope, "headers": headers}, replay(body), send)
    return None if status == 202 else b"".join(chunks)


async def disconnected(receive: Receive) -> None:
    """Return once the client of this request drops its connection (`receive` after the
    body has been read; nothing else may read it). Upstream: with JSON replies the SDK
    would end a call whose client left (today it never looks, and the call runs on)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def no_body_type(send: Send) -> Send:
    """`send`, with the `content-type` of a 202 (an accepted notification or response:
    no body) left out. Upstream: the SDK's JSON-reply mode would send an empty 202 without
    one (today it says `application/json` over an empty body)."""

    async def sending(event: Message) -> None:
        if event["type"] == "http.response.start" and event["status"] == 202:
            headers = [(k, v) for k, v in event.get("headers", []) if k.lower() != b"content-type"]
            event = {**event, "headers": headers}
        await send(event)

    return sending


def progress_stream(message: dict[str, JSON], scope: Scope) -> bool:
    """Whether a request gets its reply as an event stream rather than one JSON body: it
    asks for progress (`_meta.progressToken`, a string or an integer) and its client
    accepts `text/event-stream`, so its notes can travel before the reply. The caller
    serves it with a second app of the same server, built with `json_response=False`.
    Upstream: the SDK would choose per request (today `json_response` holds for every
    request of an app, and a JSON reply drops the notes sent before it)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if not is_request_id(token) or "id" not in message:
        return False
    return check_accept_headers(Request(scope))[1]


async def whole_body(receive: Receive) -> bytes:
    """A request's whole body."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes) -> Receive:
    """A `receive` that gives `body`, then waits: the SDK's app reads a body read already,
    and the connection is watched by `disconnected`."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            await anyio.sleep_forever()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


# -- stdio -------------------------------------------------------------------------------------


async def checked_lines(
    lines: AsyncIterable[str], answer: Callable[[dict[str, JSON]], Awaitable[None]]
) -> AsyncIterator[str]:
    """The client's lines for the SDK's `stdio_server(stdin=...)`, each one checked
    message; a line that is not one is answered through `answer` (its JSON-RPC error) and
    not passed on, and a batch from a client that negotiated 2025-03-26 is passed on one
    message at a time (the replies come one per line, as every stdio client reads them).
    Upstream: the SDK's stdio transport would answer an unreadable line (today it drops
    it without a word) and refuse or serve batches."""
    version: str | None = None
    async for line in lines:
        if not line.strip():
            continue
        try:
            decoded = read_message(line)
            items = check_batch(decoded, version) if isinstance(decoded, list) else [decoded]
        except Rejected as rejected:
            await answer(rejected.reply())
            continue
        for item in items:
            try:
                message = check_message(item)
            except Rejected as rejected:
                await answer(rejected.reply())
                continue
            version = _negotiated(message, version)
            yield json.dumps(message)


def _negotiated(message: dict[str, JSON], version: str | None) -> str | None:
    """The version the connection speaks, for batches: the one an `initialize` settles
    on by the SDK's rule, unless a request has named a 2026-era version first (after
    which the SDK refuses a handshake)."""
    params = message.get("params")
    if version in MODERN_VERSIONS or not isinstance(params, dict):
        return version
    meta = params.get("_meta")
    named = meta.get(_VERSION_KEY) if isinstance(meta, dict) else None
    if named in MODERN_VERSIONS:
        return str(named)
    if message.get("method") != "initialize":
        return version
    asked = params.get("protocolVersion")
    return asked if isinstance(asked, str) and asked in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE


_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
"""Where a 2026-era request names its version."""


__all__ = [
    "BAD_ID",
    "BATCH_VERSIONS",
    "EMPTY_BATCH",
    "HANDSHAKE_VERSIONS",
    "JSON",
    "KNOWN_VERSIONS",
    "LATEST_HANDSHAKE",
    "LONG_BATCH",
    "MAX_BATCH",
    "MODERN_VERSIONS",
    "NOT_AN_OBJECT",
    "NOT_A_MESSAGE",
    "NO_BATCHES",
    "PARSE_ERROR_MESSAGE",
    "POST_ONLY",
    "UNSUPPORTED_VERSION",
    "Rejected",
    "answer_alone",
    "cancelled_request",
    "check_batch",
    "check_message",
    "check_version",
    "checked_lines",
    "disconnected",
    "is_request_id",
    "no_body_type",
    "object_arguments",
    "progress_stream",
    "read_message",
    "refuse_method",
    "replay",
    "request_key",
    "whole_body",
]
