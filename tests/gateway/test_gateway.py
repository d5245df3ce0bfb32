"""The gateway's own loop: calls made from any other loop hand over without waiting on it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from codemode.capabilities import Capability, Catalog
from codemode.errors import AgentError
from codemode.gateway import Gateway, ServerOptions, Target, UpstreamError
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
    calls gathered with it) while the gateway's loop is busy."""
    busy = threading.Event()

    def hold() -> None:
        busy.set()
        time.sleep(0.5)

    gateway.loop.call_soon_threadsafe(hold)
    assert busy.wait(5)

    async def call() -> tuple[float, object]:
        answer = asyncio.ensure_future(pid.handler())
        started = time.monotonic()
        await asyncio.sleep(0.05)  # the call starts meanwhile, the gateway's loop still held
        return time.monotonic() - started, await answer

    waited, answered = asyncio.run(call())
    assert waited < 0.3
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
