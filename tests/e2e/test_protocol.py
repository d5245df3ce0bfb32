"""MCP protocol edges against a real `codemode serve`: JSON-RPC errors, batches, protocol
versions, and cancellation (explicit, and by a dropped connection) in both eras."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from codemode.mcp.compat import (
    BAD_ID,
    EMPTY_BATCH,
    LONG_BATCH,
    NO_BATCHES,
    NOT_A_MESSAGE,
    NOT_AN_OBJECT,
    PARSE_ERROR_MESSAGE,
    POST_ONLY,
    UNSUPPORTED_VERSION,
)
from codemode.mcp.server import BATCH_CONCURRENCY
from tests.conftest import GUARD, eventually
from tests.e2e.conftest import ROOT, TOKENS, codemode_command, free_port, start_codemode

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
WAIT = "def main():\n    return clock.wait(ms={ms})\n"


@dataclass
class Served:
    url: str
    audit: Path
    log: Path

    def events(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines()]

    def wait_for(self, event: str, count: int = 1, timeout: float = GUARD) -> list[dict[str, Any]]:
        def found() -> list[dict[str, Any]]:
            events = [e for e in self.events() if e["event"] == event]
            return events if len(events) >= count else []

        events = eventually(found, timeout)
        assert isinstance(events, list), f"no {event} after {timeout} s of polls: {self.events()}"
        return events

    def outcomes(self) -> list[str]:
        return [e["outcome"] for e in self.wait_for("execution_finished")]

    def tool_lines(self, count: int, timeout: float = GUARD) -> list[str]:
        """The first `count` per-call lines of the server's log, each after its time
        (its milliseconds as `N`); the lines there are once `timeout` seconds of polls
        went by without `count` of them."""

        def lines() -> list[str]:
            return [
                re.sub(r"\d+\.\d ms", "N ms", line.split(" ", 2)[2])
                for line in self.log.read_text().splitlines()
                if " codemode: execute " in line
            ]

        eventually(lambda: len(lines()) >= count, timeout)
        return lines()


@contextmanager
def serve(tmp_path: Path, *options: str) -> Iterator[Served]:
    port = free_port()
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{subject}:{token}\n" for token, subject in TOKENS.items()))
    audit = tmp_path / "audit.jsonl"
    log = tmp_path / "server.log"
    args = ["serve", "tests.conftest:build_host", "--transport", "http", "--token-file"]
    process = start_codemode(
        *args, str(tokens), "--audit-log", str(audit), *options, port=port, log=log
    )
    try:
        yield Served(f"http://127.0.0.1:{port}/mcp", audit, log)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(params=["cancel", "finish"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    with serve(tmp_path, "--on-disconnect", request.param) as served:
        yield served


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[Served]:
    with serve(tmp_path) as served:
        yield served


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the tests that read no audit log."""
    with serve(tmp_path_factory.mktemp("shared")) as served:
        yield served


def headers(era: str, token: str = "tok-alice", **more: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": era,
        **more,
    }


def call(request_id: str | int, source: str, era: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A raw tools/call of execute, and the headers its era needs."""
    params: dict[str, Any] = {"name": "execute", "arguments": {"source": source}}
    extra = {}
    if era == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        extra = {"Mcp-Method": "tools/call", "Mcp-Name": "execute"}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return body, extra


def cancel(request_id: str | int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id},
    }


def reply_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC reply in a JSON body or an event stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))
    return dict(response.json())


class Background:
    """A POST running on a thread, so the test can act while it is in flight."""

    def __init__(self, url: str, body: dict[str, Any], sent: dict[str, str]) -> None:
        self.response: httpx.Response | None = None
        self.error: Exception | None = None

        def post() -> None:
            try:
                self.response = httpx.post(url, json=body, headers=sent, timeout=30)
            except Exception as error:
                self.error = error

        self.thread = threading.Thread(target=post)
        self.thread.start()

    def result(self) -> httpx.Response:
        self.thread.join(30)
        assert self.response is not None, self.error
        return self.response


# Cancellation


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_a_cancel_notification_cancels_the_call_it_names(server: Served, era: str) -> None:
    body, extra = call("run-1", WAIT.format(ms=8000), era)
    running = Background(server.url, body, headers(era, **extra))
    server.wait_for("call_authorized")
    acknowledged = httpx.post(server.url, json=cancel("run-1"), headers=headers(era))
    assert acknowledged.status_code == 202
    reply = reply_of(running.result())
    # canceled, and its 8 s call never completed: ended by the notification
    assert reply["result"]["structuredContent"]["error"]["code"] == "canceled"
    assert server.outcomes() == ["canceled"]
    assert not [e for e in server.events() if e["event"] == "call_completed"]


def test_another_subjects_cancel_and_an_unknown_id_change_nothing(plain: Served) -> None:
    body, extra = call(7, WAIT.format(ms=1500), LEGACY)
    running = Background(plain.url, body, headers(LEGACY, **extra))
    plain.wait_for("call_authorized")
    for token, request_id in (
        ("tok-bob", 7),
        ("tok-bob", "7"),
        ("tok-alice", 8),
        ("tok-alice", "x"),
    ):
        sent = httpx.post(plain.url, json=cancel(request_id), headers=headers(LEGACY, token))
        assert sent.status_code == 202
    reply = reply_of(running.result())
    assert reply["result"]["structuredContent"]["result"] == 1500
    assert plain.outcomes() == ["ok"]


def test_two_calls_of_one_subject_under_one_id_are_not_guessed_between(plain: Served) -> None:
    body, extra = call(5, WAIT.format(ms=1500), LEGACY)
    first = Background(plain.url, body, headers(LEGACY, **extra))
    second = Background(plain.url, body, headers(LEGACY, **extra))
    plain.wait_for("call_authorized", count=2)
    httpx.post(plain.url, json=cancel(5), headers=headers(LEGACY))
    for running in (first, second):
        assert reply_of(running.result())["result"]["structuredContent"]["result"] == 1500
    assert plain.outcomes() == ["ok", "ok"]


@pytest.mark.anyio
async def test_the_sdk_clients_cancel_reaches_a_stateless_server(server: Served) -> None:
    """The 2025-era SDK client cancels by notification; before, a stateless server never
    saw it and the call ran to its end."""
    auth = {"Authorization": "Bearer tok-alice"}
    async with (
        httpx2.AsyncClient(headers=auth) as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        with anyio.move_on_after(1):
            await session.call_tool("execute", {"source": WAIT.format(ms=8000)})
        assert (await anyio.to_thread.run_sync(server.outcomes)) == ["canceled"]
        again = await session.call_tool("execute", {"source": "def main():\n    return 2"})
        assert again.structured_content is not None and again.structured_content["result"] == 2


@pytest.mark.parametrize("mode", ["cancel", "finish"])
@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_a_dropped_connection_cancels_or_finishes_as_configured(
    tmp_path: Path, mode: str, era: str
) -> None:
    with serve(tmp_path, "--on-disconnect", mode) as served:
        body, extra = call(1, WAIT.format(ms=2000), era)
        with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes the connection
            httpx.post(served.url, json=body, headers=headers(era, **extra), timeout=1)
        finished = served.outcomes()
        completed = [e for e in served.events() if e["event"] == "call_completed"]
        if mode == "cancel":
            assert finished == ["canceled"] and not completed
        else:
            assert finished == ["ok"] and len(completed) == 1


def test_a_call_cancelled_by_notification_or_by_a_dropped_connection_is_logged(
    plain: Served,
) -> None:
    """One INFO line each, in the same shape; the disconnect's says so (a 2025-03-26
    batch's too). Before, a call whose connection dropped left no line at all."""
    for calls, era in ((0, LEGACY), (2, MODERN)):
        body, extra = call("run-1", WAIT.format(ms=8000), era)
        running = Background(plain.url, body, headers(era, **extra))
        plain.wait_for("call_authorized", count=calls + 1)
        assert httpx.post(plain.url, json=cancel("run-1"), headers=headers(era)).status_code == 202
        running.result()
        plain.wait_for("execution_finished", count=calls + 1)
        body, extra = call(2, WAIT.format(ms=8000), era)
        with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes the connection
            httpx.post(plain.url, json=body, headers=headers(era, **extra), timeout=1)
        plain.wait_for("execution_finished", count=calls + 2)
    sent = headers(LEGACY)
    del sent["MCP-Protocol-Version"]  # a 2025-03-26 batch
    batch = [{"jsonrpc": "2.0", "id": 3, "method": "tools/call", **_args("clock.wait(ms=8000)")}]
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(plain.url, json=batch, headers=sent, timeout=1)
    assert plain.wait_for("execution_finished", count=5) and plain.outcomes() == ["canceled"] * 5
    notified = "INFO codemode: execute subject=alice N ms canceled"
    dropped = f"{notified} (client disconnected)"
    assert plain.tool_lines(5) == [notified, dropped, notified, dropped, dropped]
    assert "clock.wait" not in plain.log.read_text()  # never the program


def test_stopping_the_server_ends_a_call_that_outlives_its_connection(tmp_path: Path) -> None:
    port = free_port()
    audit = tmp_path / "audit.jsonl"
    args = ("serve", "tests.conftest:build_host", "--transport", "http", "--audit-log")
    process = start_codemode(*args, str(audit), "--on-disconnect", "finish", port=port)
    served = Served(f"http://127.0.0.1:{port}/mcp", audit, tmp_path / "no.log")
    body, extra = call(1, WAIT.format(ms=20000), LEGACY)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(served.url, json=body, headers=headers(LEGACY, **extra), timeout=1)
    process.terminate()
    assert process.wait(10) == -signal.SIGTERM  # uvicorn ends by the signal it handled
    assert served.outcomes() == ["canceled"]  # not the 20 s call finished


# JSON-RPC errors, batches and versions over HTTP


def error(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


BAD_BODIES = [
    (b"{not json", error(-32700, PARSE_ERROR_MESSAGE)),
    (b"\xff\xfe", error(-32700, PARSE_ERROR_MESSAGE)),
    (b"[" * 100_000, error(-32700, PARSE_ERROR_MESSAGE)),
    (b"42", error(-32600, NOT_A_MESSAGE)),
    (b'{"foo": 1}', error(-32600, NOT_A_MESSAGE)),
    (b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}', error(-32600, NOT_A_MESSAGE, 3)),
    (b'{"jsonrpc": "2.0", "id": 3, "method": 5}', error(-32600, NOT_A_MESSAGE, 3)),
    (
        b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": []}',
        error(-32600, NOT_A_MESSAGE, 3),
    ),
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', error(-32600, BAD_ID)),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', error(-32600, BAD_ID)),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', error(-32600, BAD_ID)),
    (b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', error(-32600, BAD_ID)),
    (b"[]", error(-32600, EMPTY_BATCH)),
    (
        b"[" + b'{"jsonrpc": "2.0", "method": "ping", "id": 1},' * 20 + b"1]",
        error(-32600, LONG_BATCH),
    ),
    # What the SDK's own parser and models refuse is refused first, in our words.
    (
        b'\xef\xbb\xbf{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
        error(-32700, PARSE_ERROR_MESSAGE),
    ),
    (b'{"jsonrpc": "2.0", "id": "\\udc00", "method": "ping"}', error(-32700, PARSE_ERROR_MESSAGE)),
    (
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": '
        + b"[" * 250
        + b"]" * 250
        + b"}}",
        error(-32700, PARSE_ERROR_MESSAGE),
    ),
    (b'{"jsonrpc": "2.0", "id": 5, "error": "x"}', error(-32600, NOT_A_MESSAGE, 5)),
    (b'{"jsonrpc": "2.0", "id": 5, "result": "x"}', error(-32600, NOT_A_MESSAGE, 5)),
    (
        b'{"jsonrpc": "2.0", "id": 5, "error": {"code": true, "message": "m"}}',
        error(-32600, NOT_A_MESSAGE, 5),
    ),
]


@pytest.mark.parametrize(("body", "expected"), BAD_BODIES, ids=[str(b[:20]) for b, _ in BAD_BODIES])
@pytest.mark.parametrize("era", [None, LEGACY, MODERN])
def test_a_malformed_message_gets_a_fixed_json_rpc_error(
    shared: Served, body: bytes, expected: dict[str, Any], era: str | None
) -> None:
    sent = headers(era or LEGACY)
    if era is None:
        del sent["MCP-Protocol-Version"]
    if era is not None and expected["error"]["message"] in (EMPTY_BATCH, LONG_BATCH):
        expected = error(-32600, NO_BATCHES)  # a batch is refused for its version first
    response = httpx.post(shared.url, content=body, headers=sent)
    assert response.status_code == 400
    assert response.json() == expected
    assert "pydantic" not in response.text


ERAS = ["2025-03-26", LEGACY, MODERN]


def test_messages_and_methods_are_checked_under_a_proxy_prefix_too(tmp_path: Path) -> None:
    with serve(tmp_path, "--root-path", "/codemode") as served:
        response = httpx.post(served.url, content=b"nope", headers=headers(LEGACY))
        streams = [httpx.get(served.url, headers=headers(era), timeout=5) for era in ERAS]
    assert response.json() == error(-32700, PARSE_ERROR_MESSAGE)
    for stream in streams:
        assert (stream.status_code, stream.headers["allow"]) == (405, "POST")
        assert stream.json() == error(-32600, POST_ONLY)


@pytest.mark.parametrize("era", ERAS)
def test_a_stateless_server_offers_no_stream_and_no_session_to_end(
    shared: Served, era: str
) -> None:
    """GET (the stream a 2025-era client may ask for) and DELETE (the end of a session)
    get the same 405: `Allow: POST`, a fixed JSON-RPC error, no event stream."""
    sent = headers(era)
    if era == "2025-03-26":
        del sent["MCP-Protocol-Version"]  # that version's clients send none
    for method in ("GET", "DELETE"):
        response = httpx.request(method, shared.url, headers=sent, timeout=5)
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"
        assert response.headers["content-type"] == "application/json"
        assert response.json() == error(-32600, POST_ONLY)
    assert POST_ONLY == "Method Not Allowed: this stateless server takes each message by POST"


def test_an_unknown_protocol_version_is_told_the_supported_ones(shared: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}
    response = httpx.post(shared.url, json=body, headers=headers("1999-01-01"))
    assert response.status_code == 400
    expected = error(-32022, UNSUPPORTED_VERSION, 4)
    expected["error"]["data"] = {"supported": [MODERN], "requested": "1999-01-01"}
    assert response.json() == expected
    assert UNSUPPORTED_VERSION == (
        "Unsupported protocol version; this server speaks 2026-07-28, "
        "and 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25 after initialize"
    )


@pytest.mark.parametrize("era", ERAS)
def test_an_accepted_notification_is_an_empty_202_with_no_content_type(
    shared: Served, era: str
) -> None:
    sent = headers(era)
    if era == "2025-03-26":
        del sent["MCP-Protocol-Version"]
    notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    for body in (notice, [notice]):
        if isinstance(body, list) and era != "2025-03-26":
            continue  # batches belong to 2025-03-26
        response = httpx.post(shared.url, json=body, headers=sent)
        assert (response.status_code, response.content) == (202, b"")
        assert "content-type" not in response.headers


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize(("arguments", "got"), [([1], "array"), ("x", "string"), (3, "integer")])
def test_arguments_that_are_no_object_are_refused_saying_so(
    shared: Served, era: str, arguments: object, got: str
) -> None:
    body, extra = call(9, "", era)
    body["params"]["arguments"] = arguments
    response = httpx.post(shared.url, json=body, headers=headers(era, **extra))
    assert response.status_code == (400 if era == MODERN else 200)
    message = "Invalid params: arguments must be an object of the tool's parameters"
    expected = error(-32602, message, 9)
    expected["error"]["data"] = {"field": "arguments", "expected": "object", "got": got}
    assert response.json() == expected


def test_a_2025_03_26_batch_is_answered_as_one_array(shared: Served) -> None:
    sent = headers(LEGACY)
    del sent["MCP-Protocol-Version"]  # a 2025-03-26 client sends none
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "two", "method": "tools/call", **_args("return 2")},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "no/such"},
    ]
    response = httpx.post(shared.url, json=batch, headers=sent)
    assert response.status_code == 200
    replies = response.json()
    assert [r["id"] for r in replies] == [1, "two", None, 3]
    assert replies[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert replies[1]["result"]["structuredContent"]["result"] == 2
    assert replies[2] == error(-32600, BAD_ID)
    assert replies[3]["error"]["code"] == -32601
    only_notifications = httpx.post(shared.url, json=batch[1:2], headers=sent)
    assert only_notifications.status_code == 202 and only_notifications.content == b""


def test_a_batch_runs_four_of_its_messages_at_a_time(plain: Served) -> None:
    sent = headers(LEGACY)
    del sent["MCP-Protocol-Version"]
    wait = _args("return clock.wait(ms=1000)")
    batch = [{"jsonrpc": "2.0", "id": i, "method": "tools/call", **wait} for i in range(10)]
    replies = httpx.post(plain.url, json=batch, headers=sent, timeout=30).json()
    assert [r["result"]["structuredContent"]["result"] for r in replies] == [1000] * 10
    plain.wait_for("execution_finished", count=10)
    events = plain.events()
    started = {e["execution_id"]: e["time"] for e in events if e["event"] == "execution_started"}
    edges = sorted(
        edge
        for e in events
        if e["event"] == "execution_finished"
        for edge in (
            (started[e["execution_id"]], 1),
            (started[e["execution_id"]] + e["duration_seconds"], -1),
        )
    )
    running = most = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        running += step
        most = max(most, running)
    assert most == BATCH_CONCURRENCY


def test_a_cancel_ends_a_batch_call_still_waiting_for_its_turn(plain: Served) -> None:
    """The fifth call of a batch waits for one of the four turns, filed already: a
    cancel that names it ends it there."""
    sent = headers(LEGACY)
    del sent["MCP-Protocol-Version"]
    wait = _args("return clock.wait(ms=3000)")
    batch = [{"jsonrpc": "2.0", "id": i, "method": "tools/call", **wait} for i in range(1, 6)]
    running = Background(plain.url, batch, sent)  # type: ignore[arg-type]
    plain.wait_for("call_authorized", count=BATCH_CONCURRENCY)
    assert httpx.post(plain.url, json=cancel(5), headers=headers(LEGACY)).status_code == 202
    replies = {
        reply["id"]: reply["result"]["structuredContent"] for reply in running.result().json()
    }
    assert [replies[i]["result"] for i in range(1, 5)] == [3000] * 4
    assert replies[5]["error"]["code"] == "canceled"


def test_a_batch_for_a_later_version_is_refused(shared: Served) -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    for era in ("2025-06-18", LEGACY, MODERN):
        response = httpx.post(shared.url, json=batch, headers=headers(era))
        assert response.status_code == 400
        assert response.json() == error(-32600, NO_BATCHES)


def _args(body: str) -> dict[str, Any]:
    return {"params": {"name": "execute", "arguments": {"source": f"def main():\n    {body}"}}}


# stdio


@pytest.mark.parametrize("redirect", ["<&-", "0>/dev/null"], ids=["closed", "write-only"])
def test_stdio_needs_a_readable_stdin(redirect: str) -> None:
    command = " ".join(codemode_command("serve", "tests.conftest:build_host"))
    result = subprocess.run(
        ["sh", "-c", f"{command} {redirect}"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr == "Error: stdin cannot be read: over stdio, requests arrive on it\n"


def test_stdio_answers_every_line_that_is_not_one_message(tmp_path: Path) -> None:
    host = tmp_path / "stdin_host.py"
    host.write_text(
        "import sys\n"
        "from codemode import CodeMode\n"
        "from codemode.authz import AllowAll\n"
        "cm = CodeMode(authorizer=AllowAll())\n"
        "@cm.capability('host.stdin', summary='Read a line of stdin.')\n"
        "def stdin() -> str:\n"
        "    return sys.stdin.readline()\n"
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    lines: list[str | bytes] = [
        "not json",
        '{"jsonrpc": "2.0", "id": null, "method": "ping"}',
        '[{"jsonrpc": "2.0", "id": 0, "method": "ping"}]',  # before initialize: no batches
        json.dumps(initialize),
        '[{"jsonrpc": "2.0", "id": 2, "method": "ping"}, {"jsonrpc": "2.0", "id": 2.5}]',
        "[]",
        "",
        json.dumps(
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", **_args("return host.stdin()")}
        ),
        '{"jsonrpc": "2.0", "id": "\\udc00", "method": "ping"}',  # the SDK's parser refuses it
        b'{"jsonrpc": "2.0", "id": "\xff", "method": "ping"}',  # not UTF-8, as over HTTP
        '{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": NaN}}',  # no JSON
        '{"jsonrpc": "2.0", "id": 6, "method": "tools/call", '
        '"params": {"name": "execute", "arguments": [1]}}',
        '{"jsonrpc": "2.0", "id": 4, "method": "ping"}',
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "codemode", "serve", "stdin_host:cm"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
    )
    assert process.stdin is not None and process.stdout is not None
    replies: list[dict[str, Any]] = []
    for line in lines:
        process.stdin.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
        process.stdin.flush()
    while len(replies) < 13:
        replies.append(json.loads(process.stdout.readline()))
    process.stdin.close()
    process.stdout.close()
    assert process.wait(10) == 0
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for reply in replies:
        by_id.setdefault(reply["id"], []).append(reply)
    assert by_id[None] == [
        error(-32700, PARSE_ERROR_MESSAGE),
        error(-32600, BAD_ID),
        error(-32600, NO_BATCHES),
        error(-32600, BAD_ID),
        error(-32600, EMPTY_BATCH),
        error(-32700, PARSE_ERROR_MESSAGE),
        error(-32700, PARSE_ERROR_MESSAGE),
        error(-32700, PARSE_ERROR_MESSAGE),
    ]
    assert by_id[1][0]["result"]["protocolVersion"] == "2025-03-26"
    assert by_id[2] == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    # Host code reading stdin reads nothing: the protocol's lines are not its to take.
    assert by_id[3][0]["result"]["structuredContent"]["result"] == ""
    assert by_id[4] == [{"jsonrpc": "2.0", "id": 4, "result": {}}]
    not_an_object = error(-32602, NOT_AN_OBJECT, 6)
    not_an_object["error"]["data"] = {"field": "arguments", "expected": "object", "got": "array"}
    assert by_id[6] == [not_an_object]
