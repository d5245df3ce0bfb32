"""Sessions end to end: a real `codemode serve` over stdio and streamable HTTP, in both
protocol eras, keeps what a program left at top level for the next program that names
its handle, and answers every handle it cannot use alike; a program paused there for a
person's approval holds the session until it ends."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from cryptography.exceptions import InvalidTag
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ElicitResult, InputRequiredResult, TextContent
from redis.asyncio import Redis

from codemode import CodeMode, Limits
from codemode.continuations import Sealer
from tests.conftest import build_host, system_tool
from tests.e2e.conftest import ROOT, TOKENS, free_port, start_codemode, wait_for_port
from tests.reliability.test_load import NGINX, NGINX_CONF

pytestmark = pytest.mark.anyio
ROWS = "rows = [1, 2]\ndef main():\n    return len(rows)\n"
READ = "def main():\n    return rows\n"
NOT_FOUND = {
    "code": "session_not_found",
    "message": (
        "session not found: no session of yours has this handle (it may have expired); "
        'start one with session "new"'
    ),
    "where": None,
}
IDLE = 1.0


def brief_host() -> CodeMode:
    """The test host, whose sessions end after a second unused."""
    return build_host(Limits(session_idle_seconds=IDLE))


class Caller:
    """One connected client, whichever transport and era."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def execute(self, source: str, session: str | None = None) -> CallToolResult:
        arguments = (
            {"source": source} if session is None else {"source": source, "session": session}
        )
        result: CallToolResult = await self.session.call_tool("execute", arguments)
        return result


@asynccontextmanager
async def connected(
    era: str,
    *,
    stdio: list[str] | None = None,
    url: str = "",
    token: str = "tok-alice",
    person: Any = None,
) -> AsyncIterator[Caller]:
    """A client of a stdio server started with `stdio`'s arguments, or of the HTTP server
    at `url` as `token`'s subject; a 2025-era handshake or a 2026-era client; `person`
    answers what the server asks, if anyone does."""
    if stdio is not None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "codemode", "serve", *stdio],
            cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        if era == "2025":
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write, elicitation_callback=person) as s,
            ):
                await s.initialize()
                yield Caller(s)
        else:
            async with Client(params, elicitation_callback=person) as client:
                yield Caller(client)
        return
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        if era == "2025":
            async with (
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write, elicitation_callback=person) as s,
            ):
                await s.initialize()
                yield Caller(s)
        else:
            async with Client(
                streamable_http_client(url, http_client=http), elicitation_callback=person
            ) as client:
                yield Caller(client)


def serve_http(folder: Path, spec: str, *options: str, **env: str) -> Generator[str, None, None]:
    tokens = folder / "tokens"
    tokens.write_text("".join(f"{subject}:{token}\n" for token, subject in TOKENS.items()))
    port = free_port()
    process: subprocess.Popen[bytes] = start_codemode(
        "serve",
        spec,
        "--transport",
        "http",
        "--token-file",
        str(tokens),
        *options,
        port=port,
        log=folder / f"server-{port}.log",
        **env,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_http(tmp_path_factory.mktemp("sessions"), "tests.conftest:build_host")


@pytest.fixture(scope="module")
def brief_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_http(tmp_path_factory.mktemp("brief"), "tests.e2e.test_sessions:brief_host")


WAYS = ["stdio-2025", "stdio-2026", "http-2025", "http-2026"]


@pytest.fixture(scope="module", params=WAYS)
async def caller(request: pytest.FixtureRequest, url: str) -> AsyncIterator[Caller]:
    transport, era = request.param.split("-")
    stdio = ["tests.conftest:build_host", "--subject", "alice"] if transport == "stdio" else None
    async with connected(era, stdio=stdio, url=url) as client:
        yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def error_of(result: CallToolResult) -> dict[str, Any]:
    """The error payload of a reply that is one, which names no session."""
    assert result.is_error and "session" not in structured(result)
    item = result.content[0]
    assert isinstance(item, TextContent) and item.text.startswith(
        structured(result)["error"]["message"]
    )
    error: dict[str, Any] = structured(result)["error"]
    return error


async def start(caller: Caller) -> str:
    """A new session holding `rows = [1, 2]`, and its handle."""
    reply = structured(await caller.execute(ROWS, "new"))
    assert reply["result"] == 2
    handle: str = reply["session"]
    assert handle.startswith("s-")
    return handle


async def test_new_gives_a_handle_and_the_next_program_reads_the_list(caller: Caller) -> None:
    handle = await start(caller)
    result = await caller.execute(READ, handle)
    assert not result.is_error
    assert (structured(result)["result"], structured(result)["session"]) == ([1, 2], handle)
    item = result.content[0]
    assert isinstance(item, TextContent) and f'"session": "{handle}"' in item.text
    appended = await caller.execute("rows.append(3)\ndef main():\n    return rows\n", handle)
    assert structured(appended)["result"] == [1, 2, 3]
    assert structured(await caller.execute(READ, handle))["result"] == [1, 2, 3]


async def test_a_program_that_appends_then_raises_leaves_the_list(caller: Caller) -> None:
    handle = await start(caller)
    failing = "rows.append(3)\ndef main():\n    rows.append(4)\n    raise ValueError('no')\n"
    assert error_of(await caller.execute(failing, handle))["code"] == "invalid_program"
    assert structured(await caller.execute(READ, handle))["result"] == [1, 2]


async def test_a_made_up_handle_gets_the_documented_error(caller: Caller) -> None:
    await start(caller)
    for handle in ("s-" + "A" * 22, "nonsense"):
        assert error_of(await caller.execute(READ, handle)) == NOT_FOUND


async def test_over_the_bound_fails_and_the_session_is_unchanged(caller: Caller) -> None:
    handle = await start(caller)
    big = "rows.append(3)\nbig = 'x' * 2_000_000\ndef main():\n    return 1\n"
    error = error_of(await caller.execute(big, handle))
    assert error["code"] == "resource_limit"
    assert "session size (limit 1 MiB" in error["message"]
    assert structured(await caller.execute(READ, handle))["result"] == [1, 2]


@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_another_subjects_handle_gets_the_same_error(url: str, era: str) -> None:
    async with connected(era, url=url) as alice:
        handle = await start(alice)
    async with connected(era, url=url, token="tok-bob") as bob:
        assert error_of(await bob.execute(READ, handle)) == NOT_FOUND
        assert error_of(await bob.execute(READ, "s-" + "B" * 22)) == NOT_FOUND
    async with connected(era, url=url) as alice:
        assert structured(await alice.execute(READ, handle))["result"] == [1, 2]


@pytest.mark.parametrize("way", WAYS)
async def test_an_expired_handle_gets_the_same_error(brief_url: str, way: str) -> None:
    transport, era = way.split("-")
    stdio = ["tests.e2e.test_sessions:brief_host", "--subject", "alice"]
    async with connected(era, stdio=stdio if transport == "stdio" else None, url=brief_url) as c:
        handle = await start(c)
        await anyio.sleep(IDLE * 1.5)  # the idle bound is the server's wall clock
        assert error_of(await c.execute(READ, handle)) == NOT_FOUND


APPROVALS = "tests.approvals.host:build"
"""The host whose `tickets.delete` needs a person's approval."""
SEEN = "seen = ['a']\ndef main():\n    return len(seen)\n"
ADD = (
    "def main():\n    global seen\n    seen = seen + ['b']\n"
    "    tickets.delete(id=1)\n    return seen\n"
)
LOOK = "def main():\n    return seen\n"
BUSY = {
    "code": "session_busy",
    "message": (
        "session busy: another program is running (or waiting for an approval) in this "
        "session; send this one when it has ended"
    ),
    "where": None,
}


@pytest.fixture(scope="module")
def approvals_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_http(tmp_path_factory.mktemp("approvals"), APPROVALS)


class Person:
    """Answers each approval with `action`, after sending `LOOK` to the session the
    paused program holds (the client's own requests go on while it is asked)."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.caller: Caller | None = None
        self.handle = ""
        self.meanwhile: list[CallToolResult] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        assert self.caller is not None
        self.meanwhile.append(await self.caller.execute(LOOK, self.handle))
        return ElicitResult(action=self.action)  # type: ignore[arg-type]


@pytest.mark.parametrize("action", ["accept", "decline"])
@pytest.mark.parametrize("way", ["stdio-2025", "stdio-2026", "http-2026"])
async def test_a_program_paused_for_approval_holds_its_session_until_answered(
    approvals_url: str, way: str, action: str
) -> None:
    """Everywhere a person can be asked (a 2025-era client over stateless HTTP cannot
    be): while they decide, the session is busy; approved, what the program assigned is
    kept; declined, the program fails and the session is as it was."""
    transport, era = way.split("-")
    stdio = [APPROVALS, "--subject", "alice"] if transport == "stdio" else None
    person = Person(action)
    async with connected(era, stdio=stdio, url=approvals_url, person=person) as caller:
        person.caller = caller
        handle = person.handle = structured(await caller.execute(SEEN, "new"))["session"]
        result = await caller.execute(ADD, handle)
        if action == "accept":
            assert (structured(result)["result"], structured(result)["session"]) == (
                ["a", "b"],
                handle,
            )
        else:
            assert error_of(result)["code"] == "approval_declined"
        after = structured(await caller.execute(LOOK, handle))
    assert (after["result"], after["session"]) == (
        ["a", "b"] if action == "accept" else ["a"],
        handle,
    )
    assert [error_of(meanwhile) for meanwhile in person.meanwhile] == [BUSY]


async def test_a_2026_client_that_sends_another_program_before_its_retry_is_told_busy(
    approvals_url: str,
) -> None:
    """Between the input-required result and the retry that answers it, driven by hand:
    another program sent to the session is refused, the retry then completes it."""
    async with connected("2026", url=approvals_url, person=Person("accept")) as caller:
        client = caller.session  # declares elicitation; its rounds are driven here
        handle = structured(await caller.execute(SEEN, "new"))["session"]
        arguments = {"source": ADD, "session": handle}
        paused = await client.session.call_tool("execute", arguments, allow_input_required=True)
        assert isinstance(paused, InputRequiredResult) and paused.request_state is not None
        assert paused.input_requests is not None
        assert error_of(await caller.execute(LOOK, handle)) == BUSY
        answers = {key: ElicitResult(action="accept") for key in paused.input_requests}
        done = await client.session.call_tool(
            "execute",
            arguments,
            input_responses=answers,
            request_state=paused.request_state,
            allow_input_required=True,
        )
        assert isinstance(done, CallToolResult)
        assert (structured(done)["result"], structured(done)["session"]) == (["a", "b"], handle)
        assert structured(await caller.execute(LOOK, handle))["result"] == ["a", "b"]


ROW = "row-text-5c1e"


@pytest.fixture
def replicas(tmp_path: Path, redis_url: str) -> Iterator[tuple[str, str, str]]:
    """Two `codemode serve --store <redis>` replicas with one sealing key, as the
    deployment guide runs them: their URLs and the key."""
    key = secrets.token_hex(32)
    spec, store = "tests.conftest:build_host", ("--store", redis_url)
    env = {"CODEMODE_REQUEST_STATE_KEY": key}
    first = serve_http(tmp_path, spec, *store, **env)
    second = serve_http(tmp_path, spec, *store, **env)
    try:
        yield next(first), next(second), key
    finally:
        first.close()
        second.close()


async def test_a_session_started_on_one_replica_continues_on_the_other(
    replicas: tuple[str, str, str], redis_url: str, tmp_path: Path
) -> None:
    a, b, key = replicas
    keep = f"rows = [{{'name': '{ROW}'}}]\ndef main():\n    return len(rows)\n"
    append = f"rows.append({{'name': '{ROW}'}})\ndef main():\n    return len(rows)\n"
    async with connected("2026", url=a) as on_a:
        handle = structured(await on_a.execute(keep, "new"))["session"]
    async with connected("2026", url=b) as on_b:
        continued = structured(await on_b.execute(append, handle))
        assert continued.get("result") == 2, continued
    async with connected("2025", url=a) as on_a:
        assert structured(await on_a.execute(append, handle))["result"] == 3
    # behind nginx, round robin: whichever replica takes each call, the list grows by one
    nginx_binary = system_tool(NGINX, "apt-get install nginx (or run scripts/install-test-tools)")
    port = free_port()
    ports = (httpx2.URL(a).port, httpx2.URL(b).port)
    config = tmp_path / "nginx.conf"
    config.write_text(NGINX_CONF.format(tmp=tmp_path, a=ports[0], b=ports[1], port=port))
    nginx = subprocess.Popen(
        [str(nginx_binary), "-c", str(config), "-p", str(tmp_path), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, nginx)
        async with connected("2026", url=f"http://127.0.0.1:{port}/mcp") as balanced:
            for count in (4, 5, 6, 7):
                assert structured(await balanced.execute(append, handle))["result"] == count
    finally:
        nginx.terminate()
        nginx.wait(10)
    # the store holds neither the subject, nor the handle, nor a row in the clear
    redis = Redis.from_url(redis_url)
    try:
        stored = b""
        async for name in redis.scan_iter(match="codemode:session*"):
            stored += name
            kind = await redis.type(name)
            if kind == b"string":
                stored += await redis.get(name) or b""
            elif kind == b"zset":
                stored += b"".join(await redis.zrange(name, 0, -1))
        blob = await redis.get("codemode:session:" + Sealer(key).index("alice", handle))
    finally:
        await redis.aclose()
    assert stored and blob is not None
    for clear in ("alice", handle, ROW, ROW.encode().hex()):
        assert clear.encode() not in stored
    store_key = "codemode:session:" + Sealer(key).index("alice", handle)
    assert Sealer(key).open(blob, store_key)
    with pytest.raises(InvalidTag):
        Sealer(secrets.token_hex(32)).open(blob, store_key)
    with pytest.raises(InvalidTag):
        Sealer(key).open(blob, "codemode:session:" + Sealer(key).index("bob", handle))


@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_serve_no_sessions_lists_execute_without_a_session_and_refuses_one(era: str) -> None:
    stdio = ["tests.conftest:build_host", "--subject", "alice", "--no-sessions"]
    async with connected(era, stdio=stdio) as caller:
        tools = await caller.session.list_tools()
        refused = await caller.execute(ROWS, "new")
        plain = await caller.execute(ROWS)
    (execute,) = [tool for tool in tools.tools if tool.name == "execute"]
    assert "session" not in execute.input_schema["properties"]
    assert "session" not in (execute.description or "")
    assert error_of(refused)["code"] == "invalid_request"
    assert structured(plain)["result"] == 2 and "session" not in structured(plain)
