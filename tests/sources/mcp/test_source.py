"""An MCP server as a source, on the sources' loop: calls made from any other loop hand
over without waiting on it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from codemode.capabilities import Capability, Catalog
from codemode.errors import AgentError, RegistrationError
from codemode.sources.mcp import McpServer, UpstreamError
from codemode.sourcing import Sources
from tests.conftest import GUARD
from tests.sources.mcp.conftest import FIXTURE, PYTHON


def _pid_tool(sources: Sources) -> Capability:
    (pid,) = sources.add(McpServer("up", command=PYTHON, args=[FIXTURE], include=["pid"]))
    return pid


@pytest.fixture(scope="module")
def sources() -> Iterator[Sources]:
    sources = Sources(Catalog())
    yield sources
    sources.close()


@pytest.fixture(scope="module")
def pid(sources: Sources) -> Capability:
    return _pid_tool(sources)


def test_a_call_from_another_loop_does_not_wait_for_the_sources_loop(
    sources: Sources, pid: Capability
) -> None:
    """Starting a call only hands it over, so the calling loop goes on (and starts the
    calls gathered with it) while the sources' loop is busy: the sources' loop is held
    until the calling loop, past the call's start, lets it go."""
    busy, release = threading.Event(), threading.Event()
    held: list[bool] = []

    def hold() -> None:
        busy.set()
        held.append(release.wait(GUARD))  # True: let go by the calling loop

    sources.loop.call_soon_threadsafe(hold)
    assert busy.wait(GUARD)

    async def call() -> object:
        answer = asyncio.ensure_future(pid.handler())
        await asyncio.sleep(0.05)  # the call starts meanwhile, the sources' loop still held
        release.set()
        return await answer

    answered = asyncio.run(call())
    assert held == [True]
    assert isinstance(answered, int)


def test_a_call_on_the_sources_own_loop_runs_there(sources: Sources, pid: Capability) -> None:
    """A host whose coroutines run on the sources' loop calls without a hop."""
    answered = asyncio.run_coroutine_threadsafe(pid.handler(), sources.loop).result(10)
    assert isinstance(answered, int)


def test_a_call_after_close_is_an_upstream_error() -> None:
    """The call is refused (and never left unawaited) once the sources' loop is gone."""
    sources = Sources(Catalog())
    pid = _pid_tool(sources)
    sources.close()
    with pytest.raises(AgentError) as caught:
        asyncio.run(pid.handler())
    assert str(caught.value) == "the connection to the upstream failed"
    cause = caught.value.__cause__
    assert isinstance(cause, UpstreamError)  # what the host log says
    assert str(cause) == 'MCP server "up": the gateway is closed'


def test_a_server_closed_by_a_failed_add_is_refused_and_a_new_one_calls_its_upstream(
    tmp_path: object,
) -> None:
    """A failed add closes the source; adding the same object again is refused, never
    added as a server whose every call would fail, and a new one works."""
    import os
    import sys
    from pathlib import Path

    folder = Path(str(tmp_path))
    flag = folder / "up"
    script = folder / "upstream.sh"
    script.write_text(
        f'#!/bin/sh\n[ -f "{flag}" ] || exit 3\nexec "{sys.executable}" "{FIXTURE}"\n'
    )
    os.chmod(script, 0o755)
    sources = Sources(Catalog())
    try:
        server = McpServer("again", command=str(script), include=["pid"])
        with pytest.raises(RegistrationError):
            sources.add(server)  # the upstream is not up yet
        flag.touch()
        with pytest.raises(RegistrationError) as again:
            sources.add(server)
        assert str(again.value) == (
            'MCP server "again": it was closed; add a new McpServer instead'
        )
        (pid,) = sources.add(McpServer("again", command=str(script), include=["pid"]))
        assert str(asyncio.run(pid.handler())).isdigit()
    finally:
        sources.close()
