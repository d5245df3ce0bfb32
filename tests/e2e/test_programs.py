"""Saving a program over MCP end to end: a real `codemode serve`, over stdio and streamable
HTTP in both protocol eras. A program run with `save_as` is kept only once it succeeded; a
policy that answers `RequireApproval` for `programs.save` asks the person (elicitation in
2025-11-25, `input_required` in 2026-07-28) and a declined save keeps nothing; what alice
saved, bob cannot find; and saved programs are plain direct tools with `--tools`."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from codemode import CodeMode
from codemode.authz import AuthorizationRequest, RequireApproval
from tests.approvals.conftest import Person
from tests.conftest import CANARY, build_host
from tests.e2e.test_sessions import Caller, connected, serve_http

pytestmark = pytest.mark.anyio

SPEC = "tests.e2e.test_programs:build"
WEEKLY = """\
def main(*, key: str = "a", limit: int = 2):
    found = records.lookup(key=key, limit=limit)
    return {"key": found["key"], "twice": found["count"] * 2}
"""
FAILING = "def main():\n    return records.missing(key='x')\n"


def ask_before_saving(request: AuthorizationRequest) -> RequireApproval | None:
    """Asks a person before any program is kept; allows every other call."""
    if request.capability_name == "programs.save":
        return RequireApproval(f"Keep {request.arguments['name']}? ({CANARY})")
    return None


TWICE = """\
def main(*, key: str = "a", limit: int = 2) -> dict[str, int]:
    \"\"\"Twice the count of a record.\"\"\"
    return {"twice": records.lookup(key=key, limit=limit)["count"] * 2}
"""


def build() -> CodeMode:
    """The test host, whose saves a person approves, with one program of its own."""
    cm = build_host()
    cm.configure(authorizer=ask_before_saving)
    cm.add_program("twice", TWICE, summary="Twice the count of a record.")
    return cm


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_http(tmp_path_factory.mktemp("programs"), SPEC)


WAYS = ["stdio-2025", "stdio-2026", "http-2026"]
"""Every way a person can be asked (a 2025-era client over stateless HTTP cannot be)."""


def structured(result: CallToolResult) -> dict[str, Any]:
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def fresh() -> str:
    """A name no earlier test saved under (the HTTP server lives for the module)."""
    return f"weekly_{uuid.uuid4().hex[:8]}"


async def save(caller: Caller, source: str, name: str) -> CallToolResult:
    arguments = {"source": source, "save_as": {"name": name, "summary": "Twice the count."}}
    result: CallToolResult = await caller.session.call_tool("execute", arguments)
    return result


async def describe(caller: Caller, name: str) -> dict[str, Any]:
    return structured(await caller.session.call_tool("describe_api", {"name": name}))


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_save_is_asked_about_and_kept_only_when_approved(
    url: str, way: str, action: str
) -> None:
    transport, era = way.split("-")
    stdio = [SPEC, "--subject", "alice"] if transport == "stdio" else None
    person = Person(action)
    name = fresh()
    async with connected(era, stdio=stdio, url=url, person=person) as caller:
        reply = structured(await save(caller, WEEKLY, name))
        assert reply["result"] == {"key": "a", "twice": 4}
        status = "saved" if action == "accept" else "declined"
        assert reply["saved"] == {"name": f"programs.{name}", "status": status}
        assert len(person.asked) == 1
        assert person.asked[0].message.startswith(f"Keep {name}? ({CANARY})\n\nThe program calls ")
        assert CANARY not in str(reply)
        described = await describe(caller, f"programs.{name}")
        if action == "decline":
            assert described["error"]["code"] == "not_found"
            return
        assert described["signature"] == (
            f"programs.{name}(*, key: str = 'a', limit: int = 2) -> Any"
        )
        called = await caller.session.call_tool(
            "execute", {"source": f"def main():\n    return programs.{name}(limit=5)\n"}
        )
        assert structured(called)["result"] == {"key": "a", "twice": 10}


@pytest.mark.parametrize("way", WAYS)
async def test_a_program_that_fails_is_not_kept_and_nobody_is_asked(url: str, way: str) -> None:
    transport, era = way.split("-")
    stdio = [SPEC, "--subject", "alice"] if transport == "stdio" else None
    person = Person("accept")
    name = fresh()
    async with connected(era, stdio=stdio, url=url, person=person) as caller:
        failed = await save(caller, FAILING, name)
        assert failed.is_error and "saved" not in structured(failed)
        assert structured(failed)["error"]["code"] == "capability_failed"
        assert person.asked == []
        assert (await describe(caller, f"programs.{name}"))["error"]["code"] == "not_found"


async def test_a_2025_client_over_http_cannot_be_asked_and_nothing_is_kept(url: str) -> None:
    name = fresh()
    async with connected("2025", url=url, person=Person("accept")) as caller:
        reply = structured(await save(caller, WEEKLY, name))
        assert reply["saved"] == {"name": f"programs.{name}", "status": "unavailable"}
        assert (await describe(caller, f"programs.{name}"))["error"]["code"] == "not_found"


async def test_what_alice_saved_bob_cannot_find(url: str) -> None:
    name = fresh()
    async with connected("2026", url=url, person=Person("accept")) as alice:
        assert structured(await save(alice, WEEKLY, name))["saved"]["status"] == "saved"
    async with connected("2026", url=url, token="tok-bob") as bob:
        described = await describe(bob, f"programs.{name}")
        never = await describe(bob, "programs.never_saved_anywhere")
        assert described["error"]["code"] == "not_found"
        assert described["error"]["message"] == never["error"]["message"].replace(
            "never_saved_anywhere", name
        )
        found = structured(await bob.session.call_tool("search_api", {"query": name}))
        assert name not in str(found)
        ran = await bob.session.call_tool(
            "execute", {"source": f"def main():\n    return programs.{name}()\n"}
        )
        assert ran.is_error and "records.lookup" not in str(structured(ran))


@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_bad_save_as_is_refused_before_anything_runs(url: str, era: str) -> None:
    async with connected(era, url=url) as caller:
        for save_as, text in [
            ({"name": "Weekly Report", "summary": "S."}, 'save_as "name" must be a lowercase'),
            ({"name": "x"}, 'save_as needs "name" and "summary"'),
        ]:
            result = await caller.session.call_tool(
                "execute", {"source": WEEKLY, "save_as": save_as}
            )
            assert structured(result)["error"]["code"] == "invalid_request"
            assert structured(result)["error"]["message"].startswith(f"invalid request: {text}")


@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_a_host_program_is_a_direct_tool_and_a_subjects_own_is_not(era: str) -> None:
    stdio = [SPEC, "--subject", "alice", "--tools", "programs.*"]
    async with connected(era, stdio=stdio, person=Person("accept")) as caller:
        assert structured(await save(caller, WEEKLY, "mine"))["saved"]["status"] == "saved"
        listed = (await caller.session.list_tools()).tools
        assert [tool.name for tool in listed][3:] == ["programs.twice"]
        assert listed[3].output_schema == {
            "type": "object",
            "properties": {
                "result": {"additionalProperties": {"type": "integer"}, "type": "object"}
            },
            "required": ["result"],
        }
        called = await caller.session.call_tool("programs.twice", {"limit": 5})
        assert structured(called) == {"result": {"twice": 10}}
        wrong = await caller.session.call_tool("programs.twice", {"limit": "5"})
        assert structured(wrong)["error"] == {
            "code": "invalid_arguments",
            "message": 'invalid capability arguments: argument "limit" must be an integer',
            "where": None,
            "calls": [
                {"capability": "programs.twice", "line": None, "outcome": "invalid_arguments"}
            ],
        }


async def test_a_server_restarted_on_a_saved_folder_still_has_alices_program(
    tmp_path: Path,
) -> None:
    folder, key = tmp_path / "saved", {"CODEMODE_REQUEST_STATE_KEY": "k" * 32}
    name = fresh()
    server = serve_http(tmp_path, SPEC, "--saved", str(folder), **key)
    url = next(server)
    async with connected("2026", url=url, person=Person("accept")) as alice:
        assert structured(await save(alice, WEEKLY, name))["saved"]["status"] == "saved"
    server.close()  # stops the server
    again = serve_http(tmp_path, SPEC, "--saved", str(folder), **key)
    url = next(again)
    try:
        async with connected("2026", url=url) as alice:
            called = await alice.session.call_tool(
                "execute", {"source": f"def main():\n    return programs.{name}(limit=5)\n"}
            )
            assert structured(called)["result"] == {"key": "a", "twice": 10}
        async with connected("2026", url=url, token="tok-bob") as bob:
            described = await describe(bob, f"programs.{name}")
            assert described["error"]["code"] == "not_found"
    finally:
        again.close()


@pytest.fixture
def replicas(tmp_path: Path, redis_url: str) -> Iterator[tuple[str, str]]:
    """Two `codemode serve --store <redis>` replicas of this module's host with one
    sealing key, as the deployment guide runs them: their URLs."""
    store, env = ("--store", redis_url), {"CODEMODE_REQUEST_STATE_KEY": secrets.token_hex(32)}
    first = serve_http(tmp_path, SPEC, *store, **env)
    second = serve_http(tmp_path, SPEC, *store, **env)
    try:
        yield next(first), next(second)
    finally:
        first.close()
        second.close()


class Elsewhere(httpx2.AsyncBaseTransport):
    """Sends every request to where it was addressed, but a retry that answers a person's
    question (it carries `requestState`) to another replica, at `port`."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.moved = 0
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if b'"requestState"' in request.content:
            request.url = request.url.copy_with(port=self.port)
            request.headers["Host"] = f"127.0.0.1:{self.port}"
            self.moved += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_replicas_keep_a_save_made_on_one_and_approved_on_the_other(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    saved_on_a, paused_on_a = fresh(), fresh()
    async with connected("2026", url=a, person=Person("accept")) as on_a:
        assert structured(await save(on_a, WEEKLY, saved_on_a))["saved"]["status"] == "saved"
    call = "def main():\n    return programs.{}(limit=5)\n"
    async with connected("2026", url=b) as on_b:
        called = await on_b.session.call_tool("execute", {"source": call.format(saved_on_a)})
        assert structured(called).get("result") == {"key": "a", "twice": 10}, structured(called)
    # the question is asked by A, the answer goes to B: B keeps the program A paused
    person, elsewhere = Person("accept"), Elsewhere(httpx2.URL(b).port or 0)
    headers = {"Authorization": "Bearer tok-alice"}
    async with (
        httpx2.AsyncClient(headers=headers, transport=elsewhere) as http,
        Client(streamable_http_client(a, http_client=http), elicitation_callback=person) as client,
    ):
        reply = structured(await save(Caller(client), WEEKLY, paused_on_a))
    assert len(person.asked) == 1 and elsewhere.moved == 1
    assert reply["saved"] == {"name": f"programs.{paused_on_a}", "status": "saved"}
    for url in (b, a):  # A reads alice's programs again within a second (`CHECK_SECONDS`)
        async with connected("2026", url=url) as caller:
            for _ in range(40):
                called = await caller.session.call_tool(
                    "execute", {"source": call.format(paused_on_a)}
                )
                if not called.is_error:
                    break
                await anyio.sleep(0.1)
            assert structured(called).get("result") == {"key": "a", "twice": 10}, called
