"""A person approves a call over MCP, with the official SDK client's elicitation callback:
over stdio (2025 protocol: `elicitation/create` on the live session; 2026: the client
drives `input_required` itself) and over HTTP (2026: `input_required` with a sealed
`requestState`, resumed on another replica; 2025 stateless: no one can be asked, and the
error says why)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ElicitResult, InputRequiredResult
from redis.asyncio import Redis

from codemode.approvals import CLOCK_SKEW_SECONDS, RedisReplayGuard
from codemode.cli import main
from tests.approvals.conftest import Person, served
from tests.approvals.host import CANARY
from tests.conftest import system_tool
from tests.e2e.conftest import ROOT, free_port, wait_for_port
from tests.reliability.test_load import NGINX, NGINX_CONF

pytestmark = pytest.mark.anyio

PROGRAM = """\
def main():
    rows = tickets.list()
    try:
        deleted = tickets.delete(id=rows[0]["id"])
    except PermissionError as error:
        deleted = str(error)
    return {"open": len(rows), "deleted": deleted}
"""
DECLINED = "approval declined: a person declined this call; do not retry it"
UNAVAILABLE = (
    "approval unavailable: this call needs a person's approval, and no one can be asked for it here"
)
REFUSED_STATE = "Invalid or expired requestState"
TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    path = tmp_path / "calls"
    path.write_text("")
    return path


def ran(calls: Path) -> list[str]:
    return [line.split(" ", 1)[1] for line in calls.read_text().splitlines()]


def stdio_params(calls: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "serve", "tests.approvals.host:build", "--subject", "alice"],
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT), "CODEMODE_TEST_CALLS": str(calls)},
    )


async def call(session: Any) -> CallToolResult:
    result: CallToolResult = await session.call_tool("execute", {"source": PROGRAM})
    return result


def value(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert CANARY not in str(result.model_dump())  # the person's message never reaches it
    return result.structured_content["result"]


@pytest.mark.parametrize(("action", "deleted"), [("accept", True), ("decline", DECLINED)])
async def test_over_stdio_in_the_2025_protocol_the_session_asks(
    calls: Path, action: str, deleted: object
) -> None:
    person = Person(action)
    async with (
        stdio_client(stdio_params(calls)) as (read, write),
        ClientSession(read, write, elicitation_callback=person) as session,
    ):
        assert (await session.initialize()).protocol_version == "2025-11-25"
        assert value(await call(session)) == {"open": 3, "deleted": deleted}
    (asked,) = person.asked
    assert asked.message == (
        f"Delete ticket 1? ({CANARY})\n\n"
        'The program calls `tickets.delete` with:\n```json\n{\n  "id": 1\n}\n```'
    )
    assert asked.requested_schema == {"type": "object", "properties": {}}
    assert ran(calls) == (["list", "delete 1"] if action == "accept" else ["list"])


async def test_over_stdio_in_the_2026_protocol_the_client_drives_the_rounds(calls: Path) -> None:
    person = Person("accept")
    async with Client(stdio_params(calls), elicitation_callback=person) as client:
        assert client.session.protocol_version == "2026-07-28"
        assert value(await call(client)) == {"open": 3, "deleted": True}
    assert len(person.asked) == 1
    assert ran(calls) == ["list", "delete 1"]


async def test_a_client_that_declared_no_elicitation_is_refused(calls: Path) -> None:
    async with Client(stdio_params(calls)) as client:
        assert value(await call(client)) == {"open": 3, "deleted": UNAVAILABLE}
    async with (
        stdio_client(stdio_params(calls)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        assert value(await call(session)) == {"open": 3, "deleted": UNAVAILABLE}
    assert ran(calls) == ["list", "list"]


# -- over HTTP ------------------------------------------------------------------------------


@dataclass
class Replica:
    url: str
    process: subprocess.Popen[bytes]


@pytest.fixture
def replicas(
    tmp_path: Path, calls: Path, redis_url: str, request: pytest.FixtureRequest
) -> Iterator[list[Replica]]:
    """Two `codemode serve` processes with one sealing key and one Redis guard, as the
    deployment guide runs them."""
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{subject}:{token}\n" for token, subject in TOKENS.items()))
    options = ("--token-file", str(tokens), "--replay-guard", redis_url)
    wait, key = str(getattr(request, "param", "600")), secrets.token_hex(32)
    with (
        served(*options, calls=calls, wait=wait, key=key) as (first, one),
        served(*options, calls=calls, wait=wait, key=key) as (second, other),
    ):
        yield [Replica(f"{first}/mcp", one), Replica(f"{second}/mcp", other)]


class Balancer(httpx2.AsyncBaseTransport):
    """The test's load balancer: a call that carries a `requestState` (a retry) goes to
    the second replica, every other request to the first."""

    def __init__(self, first: str, second: str) -> None:
        self.ports = (httpx2.URL(first).port, httpx2.URL(second).port)
        self.inner = httpx2.AsyncHTTPTransport()
        self.retries = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        retry = b'"requestState"' in body
        self.retries += retry
        request.url = request.url.copy_with(port=self.ports[retry])
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def http_client(
    url: str, token: str = "tok-alice", transport: Any = None, **options: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, transport=transport) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,
    ):
        yield client


async def test_two_replicas_resume_on_the_other_without_repeating_a_call(
    replicas: list[Replica], calls: Path
) -> None:
    first, second = replicas
    balancer = Balancer(first.url, second.url)
    person = Person("accept")
    async with http_client(first.url, transport=balancer, elicitation_callback=person) as client:
        assert client.session.protocol_version == "2026-07-28"
        assert value(await call(client)) == {"open": 3, "deleted": True}
    assert balancer.retries == 1 and len(person.asked) == 1
    lines = [line.split(" ", 1) for line in calls.read_text().splitlines()]
    assert lines == [[str(first.process.pid), "list"], [str(second.process.pid), "delete 1"]]


async def test_behind_nginx_the_retry_resumes_on_the_other_replica(
    replicas: list[Replica], calls: Path, tmp_path: Path
) -> None:
    """nginx as the deployment guide configures it, round robin: the round that pauses
    and its retry come one after the other, so they land on different replicas."""
    nginx_binary = system_tool(NGINX, "apt-get install nginx (or run scripts/install-test-tools)")
    port = free_port()
    a, b = (httpx2.URL(replica.url).port for replica in replicas)
    (tmp_path / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp_path, a=a, b=b, port=port))
    config = str(tmp_path / "nginx.conf")
    nginx = subprocess.Popen(
        [str(nginx_binary), "-c", config, "-p", str(tmp_path), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, nginx)
        url = f"http://127.0.0.1:{port}/mcp"
        async with http_client(url, elicitation_callback=Person("accept")) as client:
            assert value(await call(client)) == {"open": 3, "deleted": True}
    finally:
        nginx.terminate()
        nginx.wait(10)
    (lister, listed), (deleter, deleted) = (
        line.split(" ", 1) for line in calls.read_text().splitlines()
    )
    assert (listed, deleted) == ("list", "delete 1")
    assert {lister, deleter} == {str(r.process.pid) for r in replicas}


async def test_a_program_holding_near_its_pause_bound_resumes_over_http(
    replicas: list[Replica], calls: Path
) -> None:
    """The retry carries the sealed state back: the server takes a body that large."""
    source = (
        "import hashlib\n"
        "def main():\n"
        "    held = [hashlib.sha256(str(i).encode()).digest() for i in range(19000)]\n"
        "    deleted = tickets.delete(id=1)\n"
        "    return [deleted, len(held), held[-1][:2].hex()]\n"
    )
    first, second = replicas
    balancer = Balancer(first.url, second.url)
    person = Person("accept")
    async with http_client(first.url, transport=balancer, elicitation_callback=person) as client:
        paused = await client.session.call_tool(
            "execute", {"source": source}, allow_input_required=True
        )
        assert isinstance(paused, InputRequiredResult) and paused.request_state is not None
        assert len(paused.request_state) > 1_100_000  # sealed, from a state near 1 MiB
        done = await retry(client, paused.request_state, source, key="approval-1")
    assert isinstance(done, CallToolResult)
    assert value(done) == [True, 19000, "451b"]
    assert ran(calls) == ["delete 1"]


async def test_a_declined_call_over_http_fails_at_its_line(replicas: list[Replica]) -> None:
    source = "def main():\n    tickets.list()\n    return tickets.delete(id=1)\n"
    async with http_client(replicas[0].url, elicitation_callback=Person("decline")) as client:
        result = await client.call_tool("execute", {"source": source})
    assert result.is_error and result.structured_content is not None
    error = result.structured_content["error"]
    assert (error["code"], error["message"], error["where"]["line"]) == (
        "approval_declined",
        DECLINED,
        3,
    )
    assert CANARY not in str(result.model_dump())


NO_SESSION = (
    "approval unavailable: this call needs a person's approval, and no one can be asked for "
    "it here: a 2025-era client over HTTP has no session with this stateless server, to "
    "declare elicitation on or be asked through; a client that declares elicitation is "
    "asked over HTTP in protocol 2026-07-28, or over stdio"
)


async def test_a_2025_client_over_stateless_http_is_told_why_it_cannot_be_asked(
    replicas: list[Replica], calls: Path
) -> None:
    """The same client, able to answer, is asked in the 2026 era over the same server; in
    the 2025 era, with or without elicitation (declared at `initialize`, which a stateless
    server keeps nothing of), the error says why not, and what would work."""
    headers = {"Authorization": "Bearer tok-alice"}
    person = Person("accept")
    for elicitation in (person, None):
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            streamable_http_client(replicas[0].url, http_client=http) as (read, write),
            ClientSession(read, write, elicitation_callback=elicitation) as session,
        ):
            assert (await session.initialize()).protocol_version == "2025-11-25"
            assert value(await call(session)) == {"open": 3, "deleted": NO_SESSION}
    assert person.asked == []
    async with http_client(replicas[0].url, elicitation_callback=person) as client:
        assert client.session.protocol_version == "2026-07-28"
        assert value(await call(client)) == {"open": 3, "deleted": True}
    assert len(person.asked) == 1
    assert ran(calls) == ["list", "list", "list", "delete 1"]


async def paused_round(client: Client) -> InputRequiredResult:
    """The first round of an `execute` whose program pauses, driven by hand."""
    first = await client.session.call_tool(
        "execute", {"source": PROGRAM}, allow_input_required=True
    )
    assert isinstance(first, InputRequiredResult)
    assert first.request_state is not None and first.input_requests is not None
    assert list(first.input_requests) == ["approval-2"]
    return first


async def retry(
    client: Client, state: str, source: str = PROGRAM, key: str = "approval-2"
) -> CallToolResult | InputRequiredResult:
    accept = {key: ElicitResult(action="accept")}
    return await client.session.call_tool(
        "execute",
        {"source": source},
        input_responses=accept,  # type: ignore[arg-type]
        request_state=state,
        allow_input_required=True,
    )


async def test_a_replayed_altered_or_other_callers_state_runs_nothing(
    replicas: list[Replica], calls: Path
) -> None:
    first, second = replicas
    async with http_client(first.url, elicitation_callback=Person("accept")) as client:
        paused = await paused_round(client)
        state = paused.request_state
        assert state is not None and CANARY not in state  # sealed: the client reads nothing
        altered = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
        for bad in (altered, "v1.AAAA", state + "x"):
            with pytest.raises(MCPError) as raised:
                await retry(client, bad)
            assert (raised.value.error.code, raised.value.error.message) == (-32602, REFUSED_STATE)
        with pytest.raises(MCPError) as raised:  # the state belongs to one program
            await retry(client, state, PROGRAM + "\n")
        assert raised.value.error.message == REFUSED_STATE
    async with http_client(second.url, token="tok-bob") as bob:
        with pytest.raises(MCPError) as raised:
            await retry(bob, state)
        assert raised.value.error.message == REFUSED_STATE
    assert ran(calls) == ["list"]
    async with http_client(second.url) as client:
        done = await retry(client, state)
        assert isinstance(done, CallToolResult)
        assert value(done) == {"open": 3, "deleted": True}
    async with http_client(first.url) as client:  # the other replica knows it resumed
        again = await retry(client, state)
    assert isinstance(again, CallToolResult) and again.is_error
    assert again.structured_content is not None
    assert again.structured_content["error"]["message"] == (
        "resume refused: this paused program was resumed already"
    )
    assert ran(calls) == ["list", "delete 1"]


async def test_replicas_of_different_waits_resume_a_state_once(
    tmp_path: Path, calls: Path, redis_url: str
) -> None:
    """The state of a replica whose wait is long, resumed on one whose wait is short:
    the claim lasts as long as the state (sealed by the first) is valid and the clocks'
    margin, not as long as the second's own wait would have it, so the first refuses
    the state while it could still accept it, and the approved delete ran once."""
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:tok-alice\n")
    options = ("--token-file", str(tokens), "--replay-guard", redis_url)
    key = secrets.token_hex(32)
    with (
        served(*options, calls=calls, wait="600", key=key) as (long_wait, _),
        served(*options, calls=calls, wait="30", key=key) as (short_wait, _),
    ):
        first, second = f"{long_wait}/mcp", f"{short_wait}/mcp"
        balancer = Balancer(first, second)
        store = Redis.from_url(redis_url)
        claims = RedisReplayGuard.PREFIX + "*"
        try:
            before = set(await store.keys(claims))  # other tests' claims, if any
            async with http_client(
                first, transport=balancer, elicitation_callback=Person("accept")
            ) as client:
                state = (await paused_round(client)).request_state
                assert state is not None
                done = await retry(client, state)  # on the second, within its wait
            (claim,) = set(await store.keys(claims)) - before
            held_ms = await store.pttl(claim)
        finally:
            await store.aclose()
        assert isinstance(done, CallToolResult)
        assert value(done) == {"open": 3, "deleted": True}
        # The first's state lives 600 s and a grace of 60 s; the claim outlives both.
        assert held_ms > (660 + CLOCK_SKEW_SECONDS - 60) * 1000
        async with http_client(first) as client:
            again = await retry(client, state)
    assert isinstance(again, CallToolResult) and again.structured_content is not None
    assert again.structured_content["error"]["message"] == (
        "resume refused: this paused program was resumed already"
    )
    assert ran(calls) == ["list", "delete 1"]


@pytest.mark.parametrize("replicas", ["0.5"], indirect=True)
async def test_an_approval_never_answered_expires_within_its_bound(
    replicas: list[Replica], calls: Path
) -> None:
    async with http_client(replicas[0].url, elicitation_callback=Person("accept")) as client:
        state = (await paused_round(client)).request_state
        assert state is not None
        await anyio.sleep(0.7)  # past the wait, within its grace: the program learns it
        late = await retry(client, state)
        assert isinstance(late, CallToolResult)
        assert value(late)["deleted"] == "approval timed out: no one answered within 0.5 s"
        state = (await paused_round(client)).request_state
        assert state is not None
        await anyio.sleep(1.2)  # past the state's life: the boundary refuses it
        with pytest.raises(MCPError) as raised:
            await retry(client, state)
        assert raised.value.error.message == REFUSED_STATE
    assert ran(calls) == ["list", "list"]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--replay-guard", "localhost:6379", "the replay guard must be a Redis URL"),
        ("CODEMODE_REQUEST_STATE_KEY", "short", "must be a secret of at least 32 bytes"),
    ],
)
def test_a_replay_guard_or_key_that_cannot_work_is_a_usage_error(
    option: str, value: str, message: str
) -> None:
    args = ["serve", "tests.approvals.host:build", "--transport", "http"]
    env = {}
    if option.startswith("--"):
        args += [option, value]
    else:
        env[option] = value
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
