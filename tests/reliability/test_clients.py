"""Hostile MCP clients: huge sources, many requests, and a client that vanishes mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolRequest, CallToolRequestParams, CallToolResult

from tests.conftest import eventually
from tests.e2e.conftest import ROOT, free_port, start_codemode

pytestmark = pytest.mark.anyio
HUGE = "def main():\n    return 1\n" + "#" * (10 * 1024 * 1024)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def stdio_params() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "serve", "tests.conftest:build_host", "--subject", "alice"],
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
async def test_a_10mb_source_and_10000_requests_on_one_session() -> None:
    async with stdio_client(stdio_params()) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        huge = await session.call_tool("execute", {"source": HUGE})
        assert huge.is_error
        assert huge.structured_content == {
            "error": {
                "code": "resource_limit",
                "message": "resource limit exceeded: source size (limit 64 KiB, reached 10 MiB)",
                "where": None,
            }
        }

        async def search(i: int) -> None:
            # a plain request: call_tool would check each reply against the tool's listed
            # output schema, most of this test's time (tests/e2e/test_reply_schemas.py
            # checks every reply shape)
            params = CallToolRequestParams(name="search_api", arguments={"query": f"records {i}"})
            found = await session.send_request(CallToolRequest(params=params), CallToolResult)
            assert not found.is_error

        for batch in range(0, 10_000, 50):  # fifty in flight at a time, on the one session
            async with anyio.create_task_group() as requests:
                for i in range(batch, batch + 50):
                    requests.start_soon(search, i)
        final = await session.call_tool("execute", {"source": "def main():\n    return 'alive'"})
        assert (
            final.structured_content is not None and final.structured_content["result"] == "alive"
        )


@pytest.fixture
def audited_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    audit = tmp_path / "audit.jsonl"
    args = ("serve", "tests.conftest:build_host", "--transport", "http", "--audit-log", str(audit))
    process = start_codemode(*args, port=port)
    try:
        yield f"http://127.0.0.1:{port}/mcp", audit
    finally:
        process.terminate()
        process.wait(10)


def test_a_10mb_body_over_http_is_refused_and_the_server_survives(
    audited_server: tuple[str, Path],
) -> None:
    url, _ = audited_server
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "execute", "arguments": {"source": HUGE}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    response = httpx.post(url, json=body, headers=headers, timeout=30)
    assert 400 <= response.status_code < 500 or '"isError":true' in response.text.replace(" ", "")
    listing = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        headers={**headers, "MCP-Protocol-Version": "2026-07-28"},
        timeout=30,
    )
    assert listing.status_code < 500


CLIENT = textwrap.dedent(
    """
    import asyncio, sys, httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with httpx2.AsyncClient() as http, Client(streamable_http_client(sys.argv[1], http_client=http)) as client:
            print("calling", flush=True)
            await client.call_tool("execute", {"source": "def main():\\n    return clock.wait(ms=8000)"})

    asyncio.run(main())
    """
)


def test_a_client_that_disconnects_mid_execution_cancels_it(
    audited_server: tuple[str, Path], tmp_path: Path
) -> None:
    url, audit = audited_server
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    client = subprocess.Popen([sys.executable, str(script), url], stdout=subprocess.PIPE, cwd=ROOT)
    assert client.stdout is not None and client.stdout.readline().strip() == b"calling"
    assert eventually(lambda: "call_authorized" in (audit.read_text() if audit.exists() else ""))
    client.send_signal(signal.SIGKILL)
    client.wait(5)
    client.stdout.close()

    def finished() -> list[dict[str, object]]:
        events = [json.loads(line) for line in audit.read_text().splitlines()]
        return [e for e in events if e["event"] == "execution_finished"]

    ended = eventually(finished)
    # canceled, its 8 s call never completed: ended by the disconnect, not by the call
    assert isinstance(ended, list) and ended[0]["outcome"] == "canceled"
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    assert not [e for e in events if e["event"] == "call_completed"]
