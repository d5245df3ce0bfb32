"""Each gap `codemode.mcp.compat` fills in the SDK, checked against the SDK installed: a
test here fails when the SDK changes what codemode relies on, or offers it publicly."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx2
import mcp
import pytest
import uvicorn
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Mount

from codemode import serving
from codemode.demo import create
from codemode.mcp import compat
from codemode.mcp.server import build_server
from tests.gateway.conftest import FIXTURE


def test_request_ids_correlate_as_the_dispatcher_does() -> None:
    assert compat.request_key("7") == compat.request_key(7) == 7
    assert compat.request_key("seven") == "seven"
    assert "coerce_request_id" not in mcp.__all__, "the SDK's front door has it now: use that"


def test_the_protocol_eras_are_the_ones_codemode_serves() -> None:
    assert {"2025-03-26", "2025-11-25"} <= set(compat.HANDSHAKE_VERSIONS)
    assert "2026-07-28" in compat.MODERN_VERSIONS
    assert compat.LATEST_HANDSHAKE in compat.HANDSHAKE_VERSIONS
    assert set(compat.KNOWN_VERSIONS) == {*compat.HANDSHAKE_VERSIONS, *compat.MODERN_VERSIONS}


def test_a_session_says_when_its_connection_ended() -> None:
    """Over a real stdio server that exits mid-call."""
    assert not hasattr(ClientSession, "closed"), "the SDK says it publicly now: use that"

    async def scenario() -> tuple[bool, bool]:
        params = StdioServerParameters(command=sys.executable, args=[FIXTURE])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            before = compat.session_ended(session)
            with contextlib.suppress(Exception):  # it dies before it answers
                await session.call_tool("die", {})
            with anyio.fail_after(10):
                while not compat.session_ended(session):
                    await anyio.sleep(0.01)
            return before, compat.session_ended(session)

    assert anyio.run(scenario) == (False, True)


def test_the_compatibility_module_loads_nothing_of_the_adapter() -> None:
    """The gateway imports it: in a fresh interpreter, it loads nothing of the adapter
    but the package it sits in (`codemode` itself is the public API, loaded first)."""
    probe = (
        "import sys, codemode.mcp.compat\n"
        "print(sorted(m for m in sys.modules if m.startswith('codemode.mcp')))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.split() == ["['codemode.mcp',", "'codemode.mcp.compat']"]


# -- what the SDK's own streamable HTTP app does, which `codemode.mcp.intake` answers ----
#
# Each test below pins a gap of the SDK's stateless app (served bare, as codemode would
# without `Intake`): when one fails, the SDK changed, and the patch for it may go.


@pytest.fixture(scope="module")
def bare_sdk() -> Iterator[str]:
    """The SDK's own app for a demo host's server, with nothing of codemode's in front."""
    cm = create()
    server = build_server(cm, subject="local")
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    ready = threading.Event()

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            ready.set()
            yield

    listening = serving.listen("127.0.0.1", 0)  # listening now: requests wait for it
    port = listening.getsockname()[1]
    uvicorn_server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Mount("/", app=app)], lifespan=lifespan), log_level="warning"
        )
    )
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


def post(url: str, body: object) -> httpx2.Response:
    text = body if isinstance(body, str) else json.dumps(body)
    return httpx2.post(url, content=text, headers=POST, timeout=10)


def test_the_sdk_holds_a_get_open_as_an_event_stream(bare_sdk: str) -> None:
    """Intake answers 405 (`POST_ONLY`): a stateless server has no stream to offer."""
    with httpx2.stream("GET", bare_sdk, headers={"accept": "text/event-stream"}, timeout=10) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")


def test_the_sdk_answers_a_parse_error_in_its_parsers_words(bare_sdk: str) -> None:
    """Intake answers -32700 with a fixed text: no parser's words reach a client."""
    error = post(bare_sdk, "not json").json()["error"]
    assert error["code"] == -32700
    assert error["message"].startswith("Parse error: ") and len(error["message"]) > 13


@pytest.mark.parametrize("request_id", [None, 1.5])
def test_the_sdk_takes_a_request_with_a_bad_id_for_a_notification(
    bare_sdk: str, request_id: object
) -> None:
    """Intake answers -32600: a request whose id is null or a float is no request."""
    answer = post(bare_sdk, {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
    assert (answer.status_code, answer.text) == (202, "")


def test_the_sdk_refuses_a_batch_in_pydantics_words(bare_sdk: str) -> None:
    """Intake serves a batch for 2025-03-26 (the version a client without a header
    speaks) and refuses one with a fixed text for later versions."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    answer = post(bare_sdk, [ping])
    assert answer.status_code == 400
    assert "validation error" in answer.json()["error"]["message"].lower()
