"""The gateway's own loop: calls made from any other loop hand over without waiting on it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from codemode.capabilities import Capability, Catalog
from codemode.errors import AgentError
from codemode.gateway import Gateway, ServerOptions, Target, UpstreamError
from tests.conftest import GUARD
from tests.gateway.conftest import FIXTURE, PYTHON


def _pid_tool(gateway: Gateway) -> Capability:
    (pid,) = gateway.add("up", Target(command=PYTHON, args=(FIXTURE,)), ServerOptions(["pid"]))
    return pid


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    gateway = Gateway(Catalog())
    yield gateway
    gateway.close()


@pytest.fixture(scope="module")
def pid(gateway: Gateway) -> Capability:
    return _pid_tool(gateway)


def test_a_call_from_another_loop_does_not_wait_for_the_gateways_loop(
    gateway: Gateway, pid: Capability
) -> None:
    """Starting a call only hands it over, so the calling loop goes on (and starts the
    calls gathered with it) while the gateway's loop is busy: the gateway's loop is held
    until the calling loop, past the call's start, lets it go."""
    busy, release = threading.Event(), threading.Event()
    held: list[bool] = []

    def hold() -> None:
        busy.set()
        held.append(release.wait(GUARD))  # True: let go by the calling loop

    gateway.loop.call_soon_threadsafe(hold)
    assert busy.wait(GUARD)

    async def call() -> object:
        answer = asyncio.ensure_future(pid.handler())
        await asyncio.sleep(0.05)  # the call starts meanwhile, the gateway's loop still held
        release.set()
        return await answer

    answered = asyncio.run(call())
    assert held == [True]
    assert isinstance(answered, int)


def test_a_call_on_the_gateways_own_loop_runs_there(gateway: Gateway, pid: Capability) -> None:
    """A host whose coroutines run on the gateway's loop calls without a hop."""
    answered = asyncio.run_coroutine_threadsafe(pid.handler(), gateway.loop).result(10)
    assert isinstance(answered, int)


def test_a_call_after_close_is_an_upstream_error() -> None:
    """The call is refused (and never left unawaited) once the gateway's loop is gone."""
    gateway = Gateway(Catalog())
    pid = _pid_tool(gateway)
    gateway.close()
    with pytest.raises(AgentError) as caught:
        asyncio.run(pid.handler())
    assert str(caught.value) == "the connection to the upstream failed"
    cause = caught.value.__cause__
    assert isinstance(cause, UpstreamError)  # what the host log says
    assert str(cause) == 'MCP server "up": the gateway is closed'
