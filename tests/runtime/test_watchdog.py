"""The watchdog: a beat the loop has not run one block period after it was sent means
something holds the loop, put down to the subject and capability whose code ran then
(tasks host code makes carry their maker's mark). Driven by hand, on a manual clock."""

from __future__ import annotations

import asyncio
import inspect
import threading

import anyio
import pytest

from codemode.events import Event, EventLoopBlocked
from codemode.runtime.loop import EngineLoop
from codemode.runtime.watchdog import Marked
from codemode.testing import ManualClock
from tests.conftest import GUARD, eventually
from tests.runtime.hostcode import delivered, owner


@pytest.mark.parametrize("made", [False, True], ids=["its own step", "a task it made"])
def test_the_watchdog_moves_waiting_work_off_a_blocked_loop_in_order(made: bool) -> None:
    """The order of events, on a hand-driven watchdog: A blocks its loop, and A's next
    call, spawned behind it, cannot start; B's call runs at once on B's own loop. A beat
    goes out and is not run; one block period later the loop is blocked, put down to A,
    and A's waiting call starts on a fresh loop of A's; A's first loop is free once A
    returns, and ends."""
    clock = ManualClock()
    events: list[Event] = []
    loops = EngineLoop(clock=clock)
    entered, release = threading.Event(), threading.Event()
    a2_ran, b_ran = threading.Event(), threading.Event()

    async def blocks() -> None:
        entered.set()
        release.wait(GUARD)

    async def maker() -> None:  # the blocking step runs in a task of its own
        await asyncio.gather(blocks())

    async def a() -> None:
        await loops.host(maker() if made else blocks())

    async def a2() -> None:
        await loops.host(asyncio.sleep(0))
        a2_ran.set()

    async def b() -> None:
        await loops.host(asyncio.sleep(0))
        b_ran.set()

    try:
        loops.spawn(a, owner("A", "h.block", events))
        assert entered.wait(GUARD)
        first = loops.current()["A"]
        loops.spawn(a2, owner("A", "h.now", events))
        loops.spawn(b, owner("B", "h.now", events))
        assert b_ran.wait(GUARD)  # B's loop is not A's
        clock.advance(0.25)  # a beat goes out to each loop
        assert first.beat_at is not None
        # B's loop answers its beat before time moves on (on a loaded machine its thread
        # may run late; the period is judged by the hand-moved clock, not by that thread)
        assert eventually(lambda: loops.current()["B"].beat_at is None)
        clock.advance(0.75)  # out for less than the period: not judged yet
        assert not a2_ran.is_set() and loops.blocked() == 0
        clock.advance(0.25)
        assert loops.blocked("A") == 1 and loops.blocked("B") == 0
        assert loops.current()["A"] is not first
        assert a2_ran.wait(GUARD)
        blocked = delivered(EventLoopBlocked, events)
        assert [(e.subject, e.capability) for e in blocked] == [("A", "h.block")]
        release.set()
        assert eventually(lambda: loops.blocked() == 0 and first not in loops.live())
        first.thread.join(GUARD)
        assert not first.thread.is_alive() and first.loop.is_closed()
    finally:
        release.set()
        loops.close()


def test_tasks_host_code_makes_look_as_they_would_unmarked() -> None:
    """A task host code makes runs marked with its maker, yet what inspects its coroutine
    (anyio's cancel scopes ask for its state) sees the host's own."""
    loops = EngineLoop(clock=ManualClock())
    seen: list[object] = []
    done = threading.Event()

    async def inner() -> int:
        with anyio.move_on_after(0.01):
            await anyio.sleep(GUARD)
        coro = asyncio.current_task().get_coro()  # type: ignore[union-attr]
        assert isinstance(coro, Marked)
        seen.append((inspect.getcoroutinestate(coro), getattr(coro, "__qualname__", None)))
        return 1

    async def both() -> object:  # host code: the tasks it makes are marked
        return await asyncio.gather(inner(), inner())

    async def work() -> None:
        seen.append(await loops.host(both()))
        done.set()

    try:
        loops.spawn(work, owner("A", "h.gather", []))
        assert done.wait(GUARD)
        state = ("CORO_RUNNING", f"{inner.__qualname__}")
        assert seen == [state, state, [1, 1]]
    finally:
        loops.close()


def test_the_watchdog_finds_no_block_on_a_loop_that_runs_its_beats() -> None:
    clock = ManualClock()
    loops = EngineLoop(clock=clock)
    go = threading.Event()

    async def waits() -> None:
        await loops.host(asyncio.to_thread(go.wait, GUARD))

    try:
        loops.spawn(waits, owner("A", "h.wait", []))
        for _ in range(8):
            clock.advance(0.25)
            runner = loops.current()["A"]
            assert eventually(lambda: runner.beat_at is None)  # noqa: B023
        assert loops.blocked() == 0 and len(loops.live()) == 1
    finally:
        go.set()
        loops.close()
