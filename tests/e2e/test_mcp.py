"""The MCP server end to end: the official SDK client over stdio and streamable HTTP,
in both protocol eras (2025-11-25 handshake and 2026-07-28 sessionless)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from codemode import ErrorCode
from codemode.language import surface
from tests.conftest import CANARY
from tests.e2e.conftest import ROOT, HttpServer, without_usage

pytestmark = pytest.mark.anyio
P = "def main():\n"


class Caller:
    """One connected client, whichever transport and era."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        result: CallToolResult = await self.session.call_tool(tool, arguments)
        return result

    async def execute(self, source: str) -> CallToolResult:
        return await self.call("execute", {"source": source})


@asynccontextmanager
async def stdio_caller(era: str) -> AsyncIterator[Caller]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "serve", "tests.conftest:build_host", "--subject", "alice"],
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if era == "2025":
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield Caller(session)
    else:
        async with Client(params) as client:
            yield Caller(client)


@asynccontextmanager
async def http_caller(
    server: HttpServer, era: str, token: str = "tok-alice"
) -> AsyncIterator[Caller]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        if era == "2025":
            async with (
                streamable_http_client(server.url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield Caller(session)
        else:
            async with Client(streamable_http_client(server.url, http_client=http)) as client:
                yield Caller(client)


@pytest.fixture(scope="module", params=["stdio-2025", "stdio-2026", "http-2025", "http-2026"])
async def caller(request: pytest.FixtureRequest, http_server: HttpServer) -> AsyncIterator[Caller]:
    """One connected client per transport and era, shared by the module's tests."""
    transport, era = request.param.split("-")
    context = stdio_caller(era) if transport == "stdio" else http_caller(http_server, era)
    async with context as connected:
        yield connected


def error_of(result: CallToolResult) -> dict[str, Any]:
    """The structured error, after checking the reply is exactly one text item."""
    assert result.is_error
    assert len(result.content) == 1
    item = result.content[0]
    assert isinstance(item, TextContent)
    assert result.structured_content is not None
    error: dict[str, Any] = result.structured_content["error"]
    assert item.text.startswith(error["message"])
    return error


def texts(result: CallToolResult) -> str:
    return json.dumps([c.model_dump() for c in result.content]) + json.dumps(
        result.structured_content
    )


async def test_tools_and_schemas(caller: Caller) -> None:
    listed = await caller.session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert list(tools) == ["search_api", "describe_api", "execute"]
    assert tools["describe_api"].input_schema["properties"]["names"]["maxItems"] == 20
    for name, prop in (("search_api", "query"), ("describe_api", "name"), ("execute", "source")):
        schema = tools[name].input_schema
        assert schema.get("required", [prop]) == [prop]
        assert schema["additionalProperties"] is False
        assert schema["properties"][prop]["type"] == "string"
        assert tools[name].output_schema is not None
    assert (
        tools["search_api"].annotations is not None
        and tools["search_api"].annotations.read_only_hint
    )
    assert (
        tools["describe_api"].annotations is not None
        and tools["describe_api"].annotations.read_only_hint
    )
    assert surface() in (tools["execute"].description or "")


async def test_discovery_and_a_multi_call_program(caller: Caller) -> None:
    found = await caller.call("search_api", {"query": "records.lookup"})
    assert found.structured_content is not None
    assert found.structured_content["results"][0] == {
        "name": "records.lookup",
        "signature": "records.lookup(*, key: str, limit: int | None = None) -> Record",
        "summary": "Look up one record by key.",
    }
    described = await caller.call("describe_api", {"name": "instance.get"})
    assert described.structured_content is not None
    assert described.structured_content["shapes"] == [
        "Instance: object (name: str, nics: list[str]), read as r.name"
    ]
    result = await caller.execute(
        P + '    a = records.lookup(key="x", limit=3)\n'
        '    g = instance.get(sandbox="s", name=a["key"])\n'
        '    print("got", g.name)\n'
        '    return {"count": a["count"], "nics": g.nics}'
    )
    assert not result.is_error
    expected = {"result": {"count": 3, "nics": ["eth0", "eth1"]}, "printed": "got x\n"}
    assert without_usage(result.structured_content) == expected
    assert len(result.content) == 1
    assert isinstance(result.content[0], TextContent)
    assert json.loads(result.content[0].text) == result.structured_content


ERROR_CASES: list[tuple[str, str, str, tuple[int, int] | None]] = [
    (
        P + "    return [1][5]",
        "invalid_program",
        "invalid program: <codemode>:2:12: IndexError: list index out of range",
        (2, 12),
    ),
    (
        P + '    return records.lookup(keu="a")',
        "invalid_arguments",
        'invalid capability arguments: <codemode>:2:12: unknown argument "keu"; did you mean "key"?',
        (2, 12),
    ),
    (
        P + '    kw = {"keu": "a"}\n    return records.lookup(**kw)',
        "invalid_arguments",
        'invalid capability arguments: unknown argument "keu"; did you mean "key"?',
        (3, 12),
    ),
    (P + "    return records.secret()", "permission_denied", "permission denied", (2, 12)),
    (P + "    return records.flaky()", "policy_failure", "authorization policy failure", (2, 12)),
    (P + "    return records.fail()", "capability_failed", "capability failed", (2, 12)),
    (
        P + '    return records.missing(key="k")',
        "capability_failed",
        'capability failed: record "k" does not exist',
        (2, 12),
    ),
    (
        P + "    return 'x' * 2000000",
        "resource_limit",
        "resource limit exceeded: return value size (limit 1 MiB) at <codemode>:2:12",
        (2, 12),
    ),
    (P + "    host.crash()\n    return 1", "internal", "internal failure", None),
]


@pytest.mark.parametrize(("source", "code", "text", "position"), ERROR_CASES)
async def test_execute_errors_are_exact_and_structured(
    caller: Caller, source: str, code: str, text: str, position: tuple[int, int] | None
) -> None:
    result = await caller.execute(source)
    error = error_of(result)
    assert error["code"] == code
    assert error["message"] == text
    if position is None:
        assert error["where"] is None
    else:
        where = error["where"]
        assert (where["line"], where["column"]) == position
        assert where["file"] == "<codemode>"
        assert where["source"] == source.splitlines()[position[0] - 1]
        assert set(where) == {"file", "line", "column", "end_line", "end_column", "func", "source"}
    assert CANARY not in texts(result)


async def test_the_error_text_is_complete_for_clients_that_show_only_text(
    caller: Caller,
) -> None:
    """The one text item carries the message, the line and caret, the program's frames,
    the calls that completed and what it printed; the structured form keeps the data."""
    source = (  # a key the preflight cannot know (a parameter's): the run finds it
        'def total(key, field="total"):\n'
        "    return records.lookup(key=key)[field]\n"
        "def main():\n"
        '    record = records.lookup(key="x", limit=2)\n'
        '    print("looked up", record["key"])\n'
        '    return total("y")\n'
    )
    result = await caller.execute(source)
    error = error_of(result)
    item = result.content[0]
    assert isinstance(item, TextContent)
    assert item.text == (
        "invalid program: <codemode>:2:12: KeyError: 'total'; Record has: key, count\n"
        "    return records.lookup(key=key)[field]\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "Traceback (innermost last):\n"
        '  <codemode>:6:12 in main: return total("y")\n'
        "  <codemode>:2:12 in total: return records.lookup(key=key)[field]\n"
        "After 2 completed capability calls: records.lookup x2 (lines 2, 4).\n"
        "Printed before the failure:\n"
        "looked up x"
    )
    assert error["calls"] == [
        {"capability": "records.lookup", "line": 4, "outcome": "ok"},
        {"capability": "records.lookup", "line": 2, "outcome": "ok"},
    ]
    assert result.structured_content is not None
    assert result.structured_content["printed"] == "looked up x\n"


async def test_describe_of_unknown_or_disabled_is_not_found(caller: Caller) -> None:
    for name, message in (
        ("billing.charge", "capability not found"),
        (" records.lookup", 'capability not found: did you mean "records.lookup"?'),
    ):
        error = error_of(await caller.call("describe_api", {"name": name}))
        assert error == {"code": "not_found", "message": message, "where": None}
    hidden = error_of(await caller.call("describe_api", {"name": "records.hidden"}))
    never = error_of(await caller.call("describe_api", {"name": "records.hiddex"}))
    assert hidden == never


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("execute", {}, 'invalid request: missing required property "source"'),
        ("execute", {"source": 5}, 'invalid request: property "source" must be a string'),
        (
            "search_api",
            {"query": "x", "extra": 1},
            'invalid request: unknown property "extra"; this tool takes "query", "offset"',
        ),
        (
            "execute",
            {"code": "def main():\n    return 1"},
            'invalid request: unknown property "code"; the program goes in "source"',
        ),
        (
            "execute",
            {"program": "def main():\n    return 1"},
            'invalid request: unknown property "program"; the program goes in "source"',
        ),
        (
            "execute",
            {"script": "def main():\n    return 1"},
            'invalid request: unknown property "script"; the program goes in "source"',
        ),
        (
            "search_api",
            {"querry": "x"},
            'invalid request: unknown property "querry"; did you mean "query"?',
        ),
        ("describe_api", {"name": None}, 'invalid request: property "name" must be a string'),
    ],
)
async def test_malformed_tool_arguments_are_rejected_before_anything_runs(
    caller: Caller, tool: str, arguments: dict[str, Any], message: str
) -> None:
    error = error_of(await caller.call(tool, arguments))
    assert error == {"code": ErrorCode.INVALID_REQUEST.value, "message": message, "where": None}


async def test_unknown_tool_is_a_protocol_error(caller: Caller) -> None:
    with pytest.raises(MCPError):
        await caller.call("nope", {})


async def test_caught_failures_leak_nothing_into_results(caller: Caller) -> None:
    source = (
        P + "    out = []\n"
        "    for call in (records.fail, records.secret, records.flaky):\n"
        "        try:\n            call()\n        except Exception as e:\n"
        "            out.append(repr(e))\n            print(e)\n"
        "    return out"
    )
    result = await caller.execute(source)
    assert without_usage(result.structured_content) == {
        "result": [
            "RuntimeError('capability failed')",
            "PermissionError('permission denied')",
            "RuntimeError('authorization policy failure')",
        ],
        "printed": "capability failed\npermission denied\nauthorization policy failure\n",
    }
    assert CANARY not in texts(result)


@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_bearer_token_decides_the_subject(http_server: HttpServer, era: str) -> None:
    for token, subject in (("tok-alice", "alice"), ("tok-bob", "bob")):
        async with http_caller(http_server, era, token) as caller:
            result = await caller.execute(P + "    return records.whoami()[0]")
            assert without_usage(result.structured_content) == {"result": subject}


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "tok-alice"}]
)
def test_requests_without_a_valid_token_get_401(
    http_server: HttpServer, headers: dict[str, str]
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "execute", "arguments": {"source": P + "    return host.crash()"}},
    }
    response = httpx.post(
        http_server.url,
        json=body,
        headers={
            **headers,
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        },
    )
    assert response.status_code == 401
    assert CANARY not in response.text


async def test_malformed_json_rpc_is_rejected_and_the_server_survives(
    http_server: HttpServer,
) -> None:
    headers = {
        "Authorization": "Bearer tok-alice",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    for payload in (b"{not json", b'{"jsonrpc": "2.0", "id": 1, "method": "no/such"}', b"[]"):
        async with httpx.AsyncClient() as http:
            response = await http.post(http_server.url, content=payload, headers=headers)
        assert response.status_code in (200, 400, 404, 406)
        assert CANARY not in response.text
    async with http_caller(http_server, "2025") as caller:
        assert without_usage((await caller.execute(P + "    return 1")).structured_content) == {
            "result": 1
        }
