"""Progress end to end: `codemode serve` in a subprocess, over stdio and streamable HTTP,
driven by the official SDK client in both protocol eras. A program of 20 slow calls sends
notes whose count rises to 20, the last before the reply; a program's own `progress()`
arrives; no note carries what a handler, the authorizer or an upstream server said. Over
HTTP, a request that asks for progress is answered as an event stream, its notes before
its reply, and one that does not with one JSON body, as before."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from codemode import CodeMode
from tests.conftest import CANARY, build_host
from tests.e2e.conftest import ROOT, free_port, start_codemode
from tests.sources.mcp.conftest import FIXTURE
from tests.sources.mcp.upstream_server import CANARY as UPSTREAM_CANARY

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
P = "def main():\n"
HOST = "tests.e2e.test_progress:build"
MODERN = "2026-07-28"


def build() -> CodeMode:
    """The tests' host, with the fixture upstream MCP server as `up`."""
    cm = build_host()
    try:
        cm.add_mcp_server("up", command=sys.executable, args=[FIXTURE])
    except BaseException:
        cm.close()
        raise
    return cm


ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("progress") / "server.log"
    process = start_codemode("serve", HOST, "--transport", "http", port=port, log=log)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


class Caller:
    """One connected client, whichever transport and era: runs a program, and keeps what
    it saw in order, each note as (progress, total, message), `"reply"` at the reply."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.seen: list[Any] = []

    async def run(self, source: str) -> dict[str, Any]:
        self.seen = []

        async def note(progress: float, total: float | None, message: str | None) -> None:
            self.seen.append((progress, total, message))

        result = await self.session.call_tool("execute", {"source": source}, progress_callback=note)
        self.seen.append("reply")
        assert result.structured_content is not None
        structured: dict[str, Any] = result.structured_content
        return structured

    @property
    def notes(self) -> list[tuple[float, float | None, str | None]]:
        return [entry for entry in self.seen if entry != "reply"]


@asynccontextmanager
async def connected(transport: str, era: str, url: str) -> AsyncIterator[Caller]:
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "codemode", "serve", HOST, "--subject", "alice"],
            cwd=str(ROOT),
            env=ENV,
        )
        if era == "2025":
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                yield Caller(s)
        else:
            async with Client(params) as client:
                yield Caller(client)
        return
    async with httpx2.AsyncClient(timeout=30) as http:
        if era == "2025":
            async with (
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                yield Caller(s)
        else:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                yield Caller(client)


@pytest.fixture(scope="module", params=["stdio-2025", "stdio-2026", "http-2025", "http-2026"])
async def caller(request: pytest.FixtureRequest, http_url: str) -> AsyncIterator[Caller]:
    transport, era = request.param.split("-")
    async with connected(transport, era, http_url) as client:
        yield client


async def test_twenty_slow_calls_send_counts_rising_to_20_the_last_before_the_reply(
    caller: Caller,
) -> None:
    """0.1 s a call: more calls than notes (at most 4 a second), each count higher than
    the one before, the last 20. (The SDK's client drops a note that comes after the
    reply: the last count arriving at all means it came first.)"""
    reply = await caller.run(
        P + "    for i in range(20):\n        clock.wait(ms=100)\n    return 20"
    )
    assert reply["result"] == 20
    assert caller.seen[-1] == "reply"
    counts = [progress for progress, _, _ in caller.notes]
    assert 1 <= counts[0] < 20 and counts[-1] == 20 and counts == sorted(set(counts))
    assert 4 <= len(counts) < 20
    last = caller.notes[-1][2]
    assert last is not None and last.startswith("20 calls · ") and last.endswith(" · clock.wait")


async def test_the_programs_own_progress_arrives(caller: Caller) -> None:
    source = P + (
        '    progress("half", done=10, total=20)\n'
        "    clock.wait(ms=600)\n"
        '    progress("all of it", done=20, total=20)\n'
        "    return 1"
    )
    await caller.run(source)
    assert caller.seen == [(10, 20, "half"), (20, 20, "all of it"), "reply"]


async def test_no_note_tells_what_a_handler_the_authorizer_or_an_upstream_said(
    caller: Caller,
) -> None:
    """Each call fails with a canary in what its handler raised, the authorizer's reason,
    the upstream's error result or its JSON-RPC error; the notes name the calls only."""
    source = P + (
        "    failed = []\n"
        "    for call in (records.fail, records.secret, up.fail, up.rpc_error):\n"
        "        try:\n"
        "            call()\n"
        "        except Exception as e:\n"
        "            failed.append(type(e).__name__)\n"
        "        clock.wait(ms=300)\n"
        "    return failed"
    )
    reply = await caller.run(source)
    assert reply["result"] == ["RuntimeError", "PermissionError", "RuntimeError", "RuntimeError"]
    seen = json.dumps(caller.seen)
    assert CANARY not in seen and UPSTREAM_CANARY not in seen
    names = {message.rsplit(" · ", 1)[1] for _, _, message in caller.notes if message}
    assert names <= {"records.fail", "records.secret", "up.fail", "up.rpc_error", "clock.wait"}
    assert caller.notes[-1][0] == 8


# -- the HTTP reply, as a client without the SDK sees it ---------------------------------


def _call(request_id: int, source: str, era: str, token: str | None) -> tuple[Any, Any]:
    """A raw `tools/call` of execute, with a progress token or none, and its headers."""
    meta: dict[str, Any] = {} if token is None else {"progressToken": token}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": era,
    }
    if era == MODERN:
        meta |= {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "execute"}
    params = {"name": "execute", "arguments": {"source": source}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}, headers


@pytest.mark.parametrize("era", ["2025-11-25", MODERN])
def test_over_http_a_request_with_a_token_is_an_event_stream_its_notes_before_its_reply(
    http_url: str, era: str
) -> None:
    source = P + "    for i in range(6):\n        clock.wait(ms=100)\n    return 6"
    body, headers = _call(3, source, era, "tok-3")
    answer = httpx2.post(http_url, json=body, headers=headers, timeout=30)
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    *notes, reply = events
    assert reply["id"] == 3 and reply["result"]["structuredContent"]["result"] == 6
    assert {note["method"] for note in notes} == {"notifications/progress"}
    assert {note["params"]["progressToken"] for note in notes} == {"tok-3"}
    counts = [note["params"]["progress"] for note in notes]
    assert 1 <= counts[0] < 6 and counts[-1] == 6 and counts == sorted(set(counts))
    assert notes[-1]["params"]["message"].startswith("6 calls · ")


@pytest.mark.parametrize("era", ["2025-11-25", MODERN])
def test_over_http_a_request_without_a_token_or_a_stream_gets_one_json_body(
    http_url: str, era: str
) -> None:
    source = P + "    clock.wait(ms=10)\n    return 1"
    body, headers = _call(4, source, era, None)
    answer = httpx2.post(http_url, json=body, headers=headers, timeout=30)
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["result"]["structuredContent"]["result"] == 1
    body, headers = _call(5, source, era, "tok-5")  # a client that takes no stream
    answer = httpx2.post(http_url, json=body, headers={**headers, "Accept": "application/json"})
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["result"]["structuredContent"]["result"] == 1
