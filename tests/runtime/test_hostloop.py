"""Host code awaited on the host's own loop (`CodeMode(host_loop=...)`): it runs there, its
outcome comes back, and cancelled, it is cancelled there and waited for until it ends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from codemode.runtime.hostloop import on_host_loop
from tests.conftest import GUARD


@pytest.fixture
def host_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The host's loop, on a thread of its own (as a web app's is)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(GUARD)
    loop.close()


def test_host_code_runs_on_the_hosts_loop_and_its_value_comes_back(
    host_loop: asyncio.AbstractEventLoop,
) -> None:
    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    assert asyncio.run(on_host_loop(host_loop, where())) is host_loop


def test_what_host_code_raises_is_raised_to_the_caller(
    host_loop: asyncio.AbstractEventLoop,
) -> None:
    async def fails() -> None:
        raise LookupError("no such record")

    with pytest.raises(LookupError, match="no such record"):
        asyncio.run(on_host_loop(host_loop, fails()))


def test_cancelled_it_cancels_the_coroutine_there_and_waits_until_it_ends(
    host_loop: asyncio.AbstractEventLoop,
) -> None:
    order: list[str] = []
    entered = threading.Event()

    async def hangs() -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            order.append("cancelled there")
            await asyncio.sleep(0)  # it takes a step more to end
            order.append("ended there")
            raise

    async def caller() -> None:
        task = asyncio.ensure_future(on_host_loop(host_loop, hangs()))
        assert await asyncio.to_thread(entered.wait, GUARD)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        order.append("the caller's call ended")

    asyncio.run(caller())
    assert order == ["cancelled there", "ended there", "the caller's call ended"]


def test_a_call_cancelled_before_it_starts_there_never_runs(
    host_loop: asyncio.AbstractEventLoop,
) -> None:
    """The host's loop is busy when the call is handed over; the caller is cancelled before
    the call starts there: not one line of the host code runs, even once the loop is free
    (its first step was queued before the cancel)."""
    busy, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def hold() -> None:
        busy.set()
        release.wait(GUARD)

    async def deletes() -> None:
        ran.append("deleted")  # a side effect before the first await

    host_loop.call_soon_threadsafe(hold)
    assert busy.wait(GUARD)

    async def caller() -> None:
        call = asyncio.ensure_future(on_host_loop(host_loop, deletes()))
        await asyncio.sleep(0)  # handed over; the host's loop has not started it
        call.cancel()
        await asyncio.sleep(0)
        release.set()  # the loop is free now
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(caller())
    done = asyncio.run_coroutine_threadsafe(asyncio.sleep(0), host_loop)
    done.result(GUARD)  # everything queued on the host's loop before this has run
    assert ran == []
