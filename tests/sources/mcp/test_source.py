"""An MCP server as a source, on the sources' loop: calls made from any other loop hand
over without waiting on it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from codemode.capabilities import Capability, Catalog
from codemode.errors import AgentError
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
