"""Each gap `codemode.mcp.compat` (the adapter's) fills in the SDK, checked against the SDK
installed: a test here fails when the SDK changes what codemode relies on, or offers it
publicly (the upstream client's gaps are tests/sources/mcp/test_compat.py)."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import mcp
import pytest
import uvicorn
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Message, Receive

import codemode
from codemode import CodeMode, serving
from codemode.authz import AllowAll
from codemode.demo import create
from codemode.http import SUBJECT_KEY
from codemode.mcp import compat
from codemode.mcp.server import build_server


def test_request_ids_correlate_as_the_dispatcher_does() -> None:
    assert compat.request_key("7") == compat.request_key(7) == 7
    assert compat.request_key("seven") == "seven"
    assert "coerce_request_id" not in mcp.__all__, "the SDK's front door has it now: use that"


def test_the_protocol_eras_are_the_ones_codemode_serves() -> None:
    assert {"2025-03-26", "2025-11-25"} <= set(compat.HANDSHAKE_VERSIONS)
    assert "2026-07-28" in compat.MODERN_VERSIONS
    assert compat.LATEST_HANDSHAKE in compat.HANDSHAKE_VERSIONS
    assert set(compat.KNOWN_VERSIONS) == {*compat.HANDSHAKE_VERSIONS, *compat.MODERN_VERSIONS}


def test_the_compatibility_module_loads_nothing_of_the_adapter() -> None:
    """In a fresh interpreter, it loads nothing of the adapter but the package it sits in (`codemode` itself is the public API, loaded first)."""
    probe = (
        "import sys, codemode.mcp.compat\n"
        "print(sorted(m for m in sys.modules if m.startswith('codemode.mcp')))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.split() == ["['codemode.mcp',", "'codemode.mcp.compat']"]


PUBLIC_SDK = frozenset(
    {
        "mcp",
        "mcp.client.streamable_http",
        "mcp.server",
        "mcp.server.request_state",
        "mcp.server.stdio",
        "mcp.server.transport_security",
        "mcp.shared.message",
        "mcp.types",
        "mcp_types",
    }
)
"""The SDK modules codemode imports outside `compat`: its front doors, the transports
and their message type, and the request-state boundary a lowlevel server appends itself,
as its documentation uses them."""


def test_nothing_outside_the_compatibility_module_reaches_into_the_sdk() -> None:
    """No other module imports an SDK module beyond PUBLIC_SDK, takes an underscored
    attribute of a name it imported from the SDK (`mt._x`), or reads an underscored
    attribute by name (`getattr(session, "_dispatcher")`)."""
    src = Path(codemode.__file__).parent
    found: list[str] = []
    for path in sorted(src.rglob("*.py")):
        if path in (src / "mcp" / "compat.py", src / "sources" / "mcp" / "compat.py"):
            continue
        where = path.relative_to(src)
        sdk_names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            line = getattr(node, "lineno", 0)
            for module, bound in _imports(node):
                if module.split(".")[0] in ("mcp", "mcp_types"):
                    sdk_names.add(bound)
                    if module not in PUBLIC_SDK:
                        found.append(f"{where}:{line}: imports {module}")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in sdk_names
                and _private(node.attr)
            ):
                found.append(f"{where}:{line}: {node.value.id}.{node.attr}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and _private(str(node.args[1].value))
            ):
                found.append(f"{where}:{line}: {node.func.id}(..., {node.args[1].value!r})")
    assert found == []


def _imports(node: ast.AST) -> list[tuple[str, str]]:
    """(module, the name it binds here) for each SDK-or-other import `node` makes."""
    if isinstance(node, ast.Import):
        return [(a.name, (a.asname or a.name).split(".")[0]) for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [(node.module, a.asname or a.name) for a in node.names]
    return []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


# -- what the SDK's own streamable HTTP app does, which `codemode.mcp.server.Intake` answers
#
# Each test below pins a gap of the SDK's stateless app with JSON replies (served bare, as
# codemode would without `Intake`): when one fails, the SDK changed, and the patch for it
# may go.


def _bare_app(cm: CodeMode) -> tuple[Server[Any], Starlette]:
    server = build_server(cm, subject="local")
    server.middleware.remove(compat.object_arguments)  # the SDK's own checks only
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return server, Starlette(routes=[Mount("/", app=app)])


@pytest.fixture(scope="module")
def bare_sdk() -> Iterator[str]:
    """The SDK's own app for a demo host's server, with nothing of codemode's in front."""
    cm = create()
    server, app = _bare_app(cm)
    ready = threading.Event()

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            ready.set()
            yield

    app.router.lifespan_context = lifespan
    listening = serving.listen("127.0.0.1", 0)  # listening now: requests wait for it
    port = listening.getsockname()[1]
    uvicorn_server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(
        target=uvicorn_server.run, kwargs={"sockets": [listening]}, daemon=True
    )
    thread.start()
    assert ready.wait(20), "the server never started"
    yield f"http://127.0.0.1:{port}/mcp"
    uvicorn_server.should_exit = True
    thread.join(10)
    cm.close()


POST = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def post(url: str, body: object, **headers: str) -> httpx2.Response:
    text = body if isinstance(body, str) else json.dumps(body)
    return httpx2.post(url, content=text, headers={**POST, **headers}, timeout=10)


def test_the_sdk_holds_a_get_open_as_an_event_stream(bare_sdk: str) -> None:
    """`refuse_method` answers 405 (`POST_ONLY`): a stateless server has no stream."""
    with httpx2.stream("GET", bare_sdk, headers={"accept": "text/event-stream"}, timeout=10) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")


def test_the_sdk_answers_a_parse_error_in_its_parsers_words(bare_sdk: str) -> None:
    """`read_message` answers -32700 with a fixed text: no parser's words reach a client."""
    error = post(bare_sdk, "not json").json()["error"]
    assert error["code"] == -32700
    assert error["message"].startswith("Parse error: ") and len(error["message"]) > 13


@pytest.mark.parametrize(
    "message",
    [{"id": 3, "method": "ping"}, {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": [1]}, 7],
)
def test_the_sdk_answers_a_malformed_message_in_pydantics_words(
    bare_sdk: str, message: object
) -> None:
    """`check_message` answers -32600 (`NOT_A_MESSAGE`) instead."""
    answer = post(bare_sdk, message)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["message"].split(":")[0]) == (-32602, "Validation error")


@pytest.mark.parametrize("request_id", [None, 1.5, True, {"a": 1}])
def test_the_sdk_takes_a_request_with_a_bad_id_for_a_notification(
    bare_sdk: str, request_id: object
) -> None:
    """`check_message` answers -32600 (`BAD_ID`): such a request is no request."""
    answer = post(bare_sdk, {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
    assert (answer.status_code, answer.text) == (202, "")


def test_the_sdk_refuses_a_batch_in_pydantics_words(bare_sdk: str) -> None:
    """Intake serves a batch for 2025-03-26 (the version a client without a header
    speaks, `check_batch` and `answer_alone`) and refuses one with a fixed text for later
    versions."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    answer = post(bare_sdk, [ping])
    assert answer.status_code == 400
    assert "validation error" in answer.json()["error"]["message"].lower()


def test_the_sdk_says_an_empty_202_holds_json(bare_sdk: str) -> None:
    """`no_body_type` leaves the content-type out: an accepted notification has no body."""
    answer = post(bare_sdk, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (answer.status_code, answer.text) == (202, "")
    assert answer.headers["content-type"] == "application/json"


def test_the_sdk_answers_arguments_that_are_no_object_with_empty_data(bare_sdk: str) -> None:
    """`object_arguments` answers -32602 with `NOT_AN_OBJECT` and the field in `data`."""
    call = {"name": "execute", "arguments": [1]}
    answer = post(bare_sdk, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    error = answer.json()["error"]
    assert error == {"code": -32602, "message": "Invalid request parameters", "data": ""}


def test_the_sdk_answers_an_unknown_version_as_a_missing_envelope(bare_sdk: str) -> None:
    """`check_version` answers -32022 with the versions this server speaks."""
    answer = post(
        bare_sdk,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        **{"mcp-protocol-version": "1999-01-01"},
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32602 and "envelope" in error["message"]


def _scope(accept: str) -> dict[str, Any]:
    return {"type": "http", "headers": [(b"accept", accept.encode())]}


def test_a_request_asking_for_progress_is_streamed_when_its_client_takes_a_stream() -> None:
    both = _scope("application/json, text/event-stream")

    def call(meta: object, **message: object) -> dict[str, Any]:
        params = {"name": "execute", "_meta": meta}
        return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params, **message}

    assert compat.progress_stream(call({"progressToken": "p"}), both)
    assert compat.progress_stream(call({"progressToken": 7}), _scope("*/*"))
    assert not compat.progress_stream(call({"progressToken": "p"}), _scope("application/json"))
    assert not compat.progress_stream(call({}), both)
    assert not compat.progress_stream(call({"progressToken": True}), both)
    assert not compat.progress_stream(call({"progressToken": 1.5}), both)
    assert not compat.progress_stream(call("p"), both)
    notification = call({"progressToken": "p"})
    del notification["id"]
    assert not compat.progress_stream(notification, both)


# -- a call held on a capability, in process: what the SDK does with its cancel and its end


class _Held:
    """A CodeMode whose `held.wait()` blocks until released, served bare."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.cm = CodeMode(authorizer=AllowAll(), name="held")

        @self.cm.capability("held.wait", summary="Wait until the test releases it.")
        def wait() -> str:
            self.started.set()
            return "released" if self.release.wait(20) else "never released"

        self.server, self.app = _bare_app(self.cm)
        self.content_type = ""
        """The content type of the last reply."""

    async def post(
        self,
        message: dict[str, Any],
        receive: Receive | None = None,
        more: dict[str, str] | None = None,
    ) -> bytes:
        """`message` posted to the bare app, with the `more` headers; `receive` after the
        body (default: nothing)."""
        body = json.dumps(message).encode()
        headers = [(k.encode(), v.encode()) for k, v in {**POST, **(more or {})}.items()]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            SUBJECT_KEY: "local",  # as codemode's security layer files it
        }
        sent = False
        chunks: list[bytes] = []

        async def incoming() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            if receive is not None:
                return await receive()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def outgoing(event: Message) -> None:
            if event["type"] == "http.response.start":
                self.content_type = dict(event["headers"]).get(b"content-type", b"").decode()
            if event["type"] == "http.response.body":
                chunks.append(event.get("body", b""))

        await self.app(scope, incoming, outgoing)
        return b"".join(chunks)


EXECUTE_HELD = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "execute", "arguments": {"source": "def main():\n    return held.wait()\n"}},
}


def _held_scenario(
    during: Callable[[_Held], Awaitable[None]], receive: Receive | None = None
) -> dict[str, Any]:
    """The reply to EXECUTE_HELD when `during` runs once the call has started (and the
    call is released after it)."""
    held = _Held()
    reply: dict[str, Any] = {}

    async def scenario() -> None:
        with anyio.fail_after(30):
            await served()

    async def served() -> None:
        async with held.server.session_manager.run(), anyio.create_task_group() as group:

            async def call() -> None:
                reply.update(json.loads(await held.post(EXECUTE_HELD, receive)))
                held.started.set()  # it failed before it started: the reply says why

            group.start_soon(call)
            await anyio.to_thread.run_sync(held.started.wait, 20)
            await during(held)
            held.release.set()

    try:
        anyio.run(scenario)
    finally:
        held.release.set()
        held.cm.close()
    return reply


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_with_json_replies_the_sdk_drops_the_notes_of_a_request_asking_for_progress(
    era: str,
) -> None:
    """`progress_stream` sends such a request to a second app of the same server, with
    event-stream replies: the SDK takes `json_response` for every request of an app, so a
    request asking for progress gets one JSON body, and the note its program sent is lost."""
    source = "def main():\n    progress('half', done=1, total=2)\n    return 1"
    params: dict[str, Any] = {
        "name": "execute",
        "arguments": {"source": source},
        "_meta": {"progressToken": "p-1"},
    }
    headers = {"mcp-protocol-version": era}
    if era == "2026-07-28":
        params["_meta"] |= {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers |= {"mcp-method": "tools/call", "mcp-name": "execute"}
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}
    held = _Held()

    async def served() -> bytes:
        async with held.server.session_manager.run():
            return await held.post(call, more=headers)

    try:
        reply = json.loads(anyio.run(served))
    finally:
        held.cm.close()
    assert held.content_type == "application/json"
    assert reply["id"] == 5 and reply["result"]["structuredContent"]["result"] == 1


def test_a_stateless_sdk_drops_a_cancel_sent_on_another_request() -> None:
    """Intake cancels the named call itself (`cancelled_request`, through `InFlight`)."""

    async def cancel(held: _Held) -> None:
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        assert await held.post(notice) == b""  # answered 202 and dropped

    reply = _held_scenario(cancel)
    assert reply["result"]["structuredContent"]["result"] == "released"


def test_with_json_replies_the_sdk_never_sees_a_dropped_connection() -> None:
    """Intake watches the connection itself (`disconnected`) and ends the call."""
    gone = anyio.Event()

    async def dropped() -> Message:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def leave(held: _Held) -> None:
        gone.set()
        await anyio.wait_all_tasks_blocked()

    reply = _held_scenario(leave, dropped)
    assert reply["result"]["structuredContent"]["result"] == "released"


# -- what the SDK's stdio transport does with a line, which `checked_lines` answers


def _stdio_lines(*lines: str) -> tuple[list[str], int]:
    """What the SDK's own stdio server (no codemode in front) writes back for `lines`,
    and how many of them its server saw as messages."""
    seen: list[object] = []
    out = io.StringIO()

    async def scenario() -> None:
        source = anyio.wrap_file(io.StringIO("".join(f"{line}\n" for line in lines)))
        target = anyio.wrap_file(out)
        transport = stdio_server(stdin=cast(Any, source), stdout=cast(Any, target))
        async with transport as (read, write), read, write:
            async for message in read:  # until the reader reaches the end of its input
                seen.append(message)

    anyio.run(scenario)
    return out.getvalue().splitlines(), len(seen)


def test_the_sdk_stdio_transport_drops_a_line_it_cannot_read() -> None:
    """`checked_lines` answers each with its JSON-RPC error (-32700 or -32600)."""
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    written, seen = _stdio_lines("not json", json.dumps([json.loads(ping)]), ping)
    assert written == []  # no word for either
    assert seen == 3  # the broken lines reach the server as exceptions, unanswered


def test_the_sdk_stdio_transport_takes_a_null_id_for_a_notification() -> None:
    """`check_message` answers it -32600 (`BAD_ID`)."""
    written, seen = _stdio_lines(json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}))
    assert written == [] and seen == 1


def test_checked_lines_serves_a_batch_only_on_a_2025_03_26_connection() -> None:
    """A connection that named 2026-07-28 first keeps it, even after an `initialize` the
    SDK then refuses."""
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    modern = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}},
    }

    def served(*messages: object) -> tuple[list[object], list[object]]:
        answered: list[object] = []

        async def answer(reply: dict[str, Any]) -> None:
            answered.append(reply["error"]["message"])

        async def lines() -> AsyncIterator[str]:
            for message in messages:
                yield json.dumps(message)

        async def scenario() -> list[object]:
            return [json.loads(line) async for line in compat.checked_lines(lines(), answer)]

        return anyio.run(scenario), answered

    assert served(initialize, [ping]) == ([initialize, ping], [])
    assert served(modern, initialize, [ping]) == ([modern, initialize], [compat.NO_BATCHES])
