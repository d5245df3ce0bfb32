"""The security layer on a real uvicorn server, with the real MCP SDK client of both eras."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from starlette.types import ASGIApp

from codemode.http import MAX_BODY_BYTES
from codemode.http.server import server_config
from codemode.serving import http_app
from tests.conftest import eventually
from tests.http.conftest import ADD, TOKENS, noting_host


@contextmanager
def serving(
    app: ASGIApp, host: str, listener: socket.socket | None = None
) -> Iterator[uvicorn.Server]:
    """Serve `app` with the settings `codemode serve` uses, in a thread (on `listener`,
    when given); yield the server, started."""
    if listener is None:
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
    else:
        port = listener.getsockname()[1]
    server = uvicorn.Server(server_config(app, host=host, port=port))
    sockets = None if listener is None else [listener]
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    started = eventually(lambda: server.started or not thread.is_alive())
    assert started and server.started, "the server did not start"
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(20)


@dataclass
class Served:
    base: str
    port: int
    effects: list[str]


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    effects: list[str] = []
    app = http_app(noting_host(effects), tokens=TOKENS, web=True)
    with serving(app, "127.0.0.1") as server:
        port = server.config.port
        yield Served(f"http://127.0.0.1:{port}", port, effects)


@pytest.fixture
def server(served: Served) -> Served:
    served.effects.clear()
    return served


def raw(port: int, head: str, host: str = "127.0.0.1") -> bytes:
    """One request without a body over a plain socket, so nothing rewrites its headers."""
    with socket.create_connection((host, port), timeout=10) as connection:
        connection.sendall(f"{head}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_the_sdk_client_of_both_eras_runs_with_its_token(server: Served, era: str) -> None:
    headers = {"Authorization": "Bearer tok-alice"}
    answered: list[tuple[str, int]] = []

    async def note(response: httpx2.Response) -> None:
        answered.append((response.request.method, response.status_code))

    hooks = {"response": [note]}
    async with httpx2.AsyncClient(headers=headers, event_hooks=hooks) as http:
        transport = streamable_http_client(f"{server.base}/mcp", http_client=http)
        result: CallToolResult
        if era == "2025":
            async with transport as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("execute", {"source": ADD})
        else:
            async with Client(transport) as client:
                result = await client.call_tool("execute", {"source": ADD})
    assert result.structured_content is not None
    assert result.structured_content["result"] == 1
    assert server.effects == ["alice:hi"]
    # Without a session id the 2025-era client opens no GET stream and sends no DELETE
    # (a client that does gets 405, below); every request it sends is served.
    assert {method for method, _ in answered} == {"POST"}
    assert all(status in (200, 202) for _, status in answered), answered


POST_ONLY_BODY = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
    b'"message":"Method Not Allowed: this stateless server takes each message by POST"}}'
)


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"])
@pytest.mark.parametrize("era", [None, "2025-11-25", "2026-07-28"])
def test_the_mcp_endpoint_answers_any_method_but_post_with_405(
    server: Served, method: str, era: str | None
) -> None:
    """A stateless server has no stream for a GET to open and no session for a DELETE to
    end: 405 at once, in every era, and the connection closes as asked. Before, a GET
    without a 2026-07-28 header got 200 and an event stream that never ended."""
    version = f"\r\nMCP-Protocol-Version: {era}" if era else ""
    answer = raw(
        server.port,
        f"{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-alice"
        f"\r\nAccept: text/event-stream{version}",
    )
    head, _, content = answer.partition(b"\r\n\r\n")
    status, *fields = head.split(b"\r\n")
    assert status == b"HTTP/1.1 405 Method Not Allowed"
    assert {b"allow: POST", b"content-type: application/json"} <= set(fields)
    assert f"content-length: {len(POST_ONLY_BODY)}".encode() in fields
    assert content == (b"" if method == "HEAD" else POST_ONLY_BODY)
    assert server.effects == []


def test_a_get_without_a_token_is_refused_before_the_method_is(server: Served) -> None:
    answer = raw(server.port, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream")
    assert answer.startswith(b"HTTP/1.1 401 ")
    assert answer.endswith(b'\r\n\r\n{"error":"invalid_token"}')


@pytest.mark.anyio
async def test_many_gets_at_once_are_each_answered_and_closed(server: Served) -> None:
    """What 500 clients opening a stream each used to hold open (39 MB), answered now."""
    auth = {"Authorization": "Bearer tok-alice", "Accept": "text/event-stream"}
    statuses: list[int] = []
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(headers=auth, limits=limits, timeout=10) as http:

        async def get() -> None:
            statuses.append((await http.get(f"{server.base}/mcp")).status_code)

        async with anyio.create_task_group() as group:
            for _ in range(200):
                group.start_soon(get)
    assert statuses == [405] * 200


def test_one_token_serves_mcp_and_the_api_and_no_token_gets_the_same_401(
    server: Served,
) -> None:
    api = (f"{server.base}/api/execute", {"source": ADD})
    mcp = (
        f"{server.base}/mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "execute", "arguments": {"source": ADD}},
        },
    )
    accept = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    refused = [httpx.post(url, json=data, headers=accept) for url, data in (api, mcp)]
    assert [(r.status_code, r.headers["www-authenticate"], r.json()) for r in refused] == [
        (401, "Bearer", {"error": "invalid_token"})
    ] * 2
    assert server.effects == []

    token = {**accept, "Authorization": "Bearer tok-alice"}
    assert httpx.post(api[0], json=api[1], headers=token).json()["result"] == 1
    called = httpx.post(mcp[0], json=mcp[1], headers=token)
    assert called.status_code == 200
    assert server.effects == ["alice:hi", "alice:hi"]


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/mcp"])
def test_the_real_server_refuses_a_foreign_host(server: Served, path: str) -> None:
    answer = raw(server.port, f"GET {path} HTTP/1.1\r\nHost: evil.example")
    assert answer.startswith(b"HTTP/1.1 421 ")
    assert answer.endswith(b'\r\n\r\n{"error":"host_not_allowed"}')


def test_a_chunked_body_past_the_limit_gets_413_before_it_is_all_sent(server: Served) -> None:
    """The server answers as soon as the running total passes 1 MiB of a 50 MB upload."""
    chunk = b" " * (64 * 1024)
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        connection.sendall(
            b"POST /api/execute HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer tok-alice\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        while sent < 50 * 1024 * 1024 and not select.select([connection], [], [], 0)[0]:
            connection.sendall(framed)
            sent += len(chunk)
        answer = b""
        while not answer.endswith(b"}"):
            answer += connection.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.endswith(b'{"error":"body_too_large"}')
    assert MAX_BODY_BYTES < sent < 25 * 1024 * 1024
    assert server.effects == []


def test_a_server_bound_to_another_loopback_address_is_protected() -> None:
    """127.0.0.2 is loopback too: its own name passes, a rebinding name does not."""
    with serving(http_app(noting_host([]), host="127.0.0.2"), "127.0.0.2") as server:
        port = server.config.port
        own = raw(port, f"GET / HTTP/1.1\r\nHost: 127.0.0.2:{port}", "127.0.0.2")
        foreign = raw(port, "GET / HTTP/1.1\r\nHost: evil.example", "127.0.0.2")
    assert own.startswith(b"HTTP/1.1 404 ")  # past the checks, and no route at /
    assert foreign.startswith(b"HTTP/1.1 421 ")


def test_headers_still_incomplete_after_16_kib_are_refused(server: Served) -> None:
    """A client trickling headers cannot make the server buffer more than 16 KiB of them."""
    padding = "x" * (20 * 1024)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        connection.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: {padding}".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 ")


def test_every_connection_sends_small_segments_at_once_whatever_made_the_listener() -> None:
    """uvicorn's --reload, --workers and --fd listeners are made without IPPROTO_TCP, so
    asyncio leaves Nagle's algorithm on their connections; the server's own protocol
    turns it off on each connection (read here from the accepted socket, in process)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:  # as uvicorn's
        listener.bind(("127.0.0.1", 0))
        with (
            serving(http_app(noting_host([])), "127.0.0.1", listener) as server,
            socket.create_connection(listener.getsockname()),
        ):
            for _ in range(2000):  # until the server has taken the connection in
                if server.server_state.connections:
                    break
                time.sleep(0.01)
            (connection,) = server.server_state.connections
            accepted = connection.transport.get_extra_info("socket")
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
