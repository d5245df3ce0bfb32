"""Every request to the MCP endpoint, checked before the SDK sees it.

- Only POST is served: a stateless server has no stream to offer a GET and no session
  for a DELETE to end, so any other method gets 405 with `Allow: POST` and a fixed
  JSON-RPC error (-32600, `POST_ONLY`), in both protocol eras.
- A body that is not JSON gets -32700, one that is not a message (or whose id is null,
  a bool, a float or an object) gets -32600, each with a fixed text and HTTP 400.
- An `MCP-Protocol-Version` header naming no version this server speaks gets 400 with
  the versions it does speak (-32022, with `data.supported` as server/discover gives it).
- A batch is served for the protocol version that has them (2025-03-26, which a client
  sending no version header speaks): each message is answered as if posted alone, and
  the answers come back as one JSON array. Later versions get -32600.
- `notifications/cancelled` cancels the call it names (see `InFlight`), and a dropped
  connection is noted on the request (`watch_disconnect`) so that the call it cancels
  can say so in the log.
"""

from __future__ import annotations

import json

import anyio
from mcp.types import INTERNAL_ERROR, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codemode.http import route_path, subject_of
from codemode.mcp.compat import HANDSHAKE_VERSIONS, KNOWN_VERSIONS, MODERN_VERSIONS
from codemode.mcp.inflight import InFlight, watch_disconnect
from codemode.mcp.messages import JSON, Rejected, check, check_batch, decode

BATCH_CONCURRENCY = 4
"""How many messages of one batch are served at once."""
UNSUPPORTED_VERSION = (
    f"Unsupported protocol version; this server speaks {', '.join(MODERN_VERSIONS)}, "
    f"and {', '.join(HANDSHAKE_VERSIONS)} after initialize"
)
POST_ONLY = "Method Not Allowed: this stateless server takes each message by POST"
"""The error of a request to the MCP endpoint by any other method (HTTP 405)."""


class Intake:
    """The ASGI layer in front of the SDK's streamable HTTP app, for requests to `path`."""

    def __init__(self, app: ASGIApp, *, path: str, calls: InFlight) -> None:
        self.app = app
        self.path = path
        self.calls = calls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) != self.path:
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            # The SDK would hold a GET open as an event stream that never carries a
            # message (2025 era); 405 is how a server says it offers none.
            await _not_allowed(scope, receive, send)
            return
        body = await _body(receive)
        version = Headers(scope=scope).get("mcp-protocol-version")
        try:
            message = decode(body)
            if isinstance(message, list):
                _check_version(version, None)
                await self._batch(message, version, scope, receive, send)
                return
            checked = check(message)
            _check_version(version, checked.get("id"))
        except Rejected as rejected:
            await _refuse(rejected, scope, receive, send)
            return
        self._notice(checked, scope)
        receive = watch_disconnect(scope, receive)
        async with anyio.create_task_group() as watching:
            watching.start_soon(self._watch, receive, scope)
            await self.app(scope, _replay(body, receive), send)
            watching.cancel_scope.cancel()

    async def _watch(self, receive: Receive, scope: Scope) -> None:
        """Wait for the client to drop the connection, and drop its calls (the body is
        read: nothing else reads `receive` now)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.calls.drop(scope)

    def _notice(self, message: dict[str, JSON], scope: Scope) -> None:
        """Act on a cancel notification (the SDK then acknowledges it)."""
        params = message.get("params")
        subject = subject_of(scope)
        cancels = message.get("method") == "notifications/cancelled"
        if cancels and subject is not None and isinstance(params, dict):
            self.calls.cancel(subject, params.get("requestId"))

    async def _batch(
        self, batch: list[JSON], version: str | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        check_batch(batch, version or "2025-03-26")  # no header: the spec's default
        receive = watch_disconnect(scope, receive)  # before `_alone` copies the scope
        replies: list[bytes | None] = [None] * len(batch)
        limiter = anyio.CapacityLimiter(BATCH_CONCURRENCY)

        async def serve(index: int, message: JSON) -> None:
            try:
                checked = check(message)
            except Rejected as rejected:
                replies[index] = _json(rejected.reply())
                return
            self._notice(checked, scope)
            async with limiter:
                replies[index] = await _alone(self.app, scope, checked)

        async with anyio.create_task_group() as watching:
            watching.start_soon(self._watch, receive, scope)
            async with anyio.create_task_group() as group:
                for index, message in enumerate(batch):
                    group.start_soon(serve, index, message)
            watching.cancel_scope.cancel()
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


def _check_version(version: str | None, request_id: JSON) -> None:
    if version is not None and version not in KNOWN_VERSIONS:
        # `supported` lists the versions a request may name without a handshake, as
        # server/discover does; the message names the handshake ones too.
        data = {"supported": list(MODERN_VERSIONS), "requested": version[:100]}
        raise Rejected(UNSUPPORTED_PROTOCOL_VERSION, UNSUPPORTED_VERSION, request_id, data)


async def _alone(app: ASGIApp, scope: Scope, message: dict[str, JSON]) -> bytes | None:
    """The SDK's answer to `message` posted on its own: the JSON text of its reply, or
    None for a notification or a response (202)."""
    body = _json(message)
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    status = 0
    streamed = False
    chunks: list[bytes] = []

    async def receive() -> Message:
        await anyio.sleep_forever()  # the body came with the scope; no disconnect is seen
        raise AssertionError("unreachable")

    async def send(event: Message) -> None:
        nonlocal status, streamed
        if event["type"] == "http.response.start":
            status = event["status"]
            streamed = any(
                k == b"content-type" and v.startswith(b"text/event-stream")
                for k, v in event.get("headers", [])
            )
        elif event["type"] == "http.response.body":
            chunks.append(event.get("body", b""))

    await app({**scope, "headers": headers}, _replay(body, receive), send)
    if status == 202:
        return None
    raw = b"".join(chunks)
    chunks.clear()
    if streamed:
        raw = _last_event(raw)
    if not raw.startswith(b"{"):
        return _json(Rejected(INTERNAL_ERROR, "internal failure", message.get("id")).reply())
    return raw


def _last_event(stream: bytes) -> bytes:
    """The data of an event stream's last event: the reply (the SDK sends us no other
    events). A JSON text holds no raw line break, so a line break starts each field."""
    start = stream.rfind(b"\ndata:")
    if start < 0:
        return b""
    start += len(b"\ndata:")
    end = stream.find(b"\n", start)
    return stream[start : end if end >= 0 else len(stream)].strip()


def _json(value: JSON) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


async def _body(receive: Receive) -> bytes:
    """The whole body (SecurityMiddleware has already bounded and read it)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` with the body given back first; later calls (a disconnect) pass through."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _refuse(rejected: Rejected, scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse(rejected.reply(), status_code=400)(scope, receive, send)


async def _not_allowed(scope: Scope, receive: Receive, send: Send) -> None:
    reply = Rejected(INVALID_REQUEST, POST_ONLY).reply()
    await JSONResponse(reply, status_code=405, headers={"Allow": "POST"})(scope, receive, send)


__all__ = ["BATCH_CONCURRENCY", "POST_ONLY", "UNSUPPORTED_VERSION", "Intake"]
