"""Coroutines of host code that go on after they were cancelled: counted against their
subject and reported, judged only for time their loop ran freely, until they end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.events import CancellationIgnored, Event, ExecutionFinished
from codemode.runtime.loop import EngineLoop
from codemode.testing import ManualClock, running_engine
from tests.conftest import GUARD, eventually
from tests.runtime.hostcode import delivered, freely, of, owner


def test_a_coroutine_that_swallows_its_cancellation_is_counted_and_audited() -> None:
    """A's handler swallows every cancellation. A is answered on time; the coroutine
    that goes on is counted against A (as a thread left running is) and reported, naming
    the subject and the capability, until it ends."""
    clock = ManualClock()
    events: list[Event] = []
    entered, release = threading.Event(), threading.Event()
    swallowed: list[int] = []
    cm = CodeMode(authorizer=AllowAll(), clock=clock, on_event=events.append)

    @cm.capability("h.stubborn", summary="Will not stop.", timeout=1)
    async def stubborn() -> int:
        entered.set()
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                swallowed.append(1)
        return 1

    with cm:
        outcome: list[str] = []

        def run() -> None:
            try:
                cm.execute("async def main():\n    return await h.stubborn()\n", subject="A")
            except Exception as exc:
                outcome.append(str(exc))

        thread = threading.Thread(target=run)
        thread.start()
        assert entered.wait(GUARD)
        clock.advance(1)
        thread.join(GUARD)
        assert outcome == [
            "resource limit exceeded: capability time (limit 1 s) at <codemode>:2:18"
        ]
        engine = running_engine(cm)
        try:
            ignored = delivered(CancellationIgnored, events)
            assert swallowed
            assert [(e.subject, e.capability, e.unstopped) for e in ignored] == [
                ("A", "h.stubborn", 1)
            ]
            assert engine.left_running("A") == 1 and engine.left_running("B") == 0
            assert [e.outcome for e in of(ExecutionFinished, events)] == ["resource_limit"]
        finally:
            release.set()
        assert eventually(lambda: engine.left_running("A") == 0)


def test_a_cancelled_coroutine_is_judged_once_its_loop_runs_again() -> None:
    """A coroutine cannot stop while its loop is blocked by another's code: it is not
    counted then, but once the loop is free and it still runs."""
    clock = ManualClock()
    events: list[Event] = []
    loops = EngineLoop(clock=clock)
    started, swallowed, stop = threading.Event(), threading.Event(), threading.Event()
    tasks: list[asyncio.Task[Any]] = []

    async def stubborn() -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        started.set()
        while not stop.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                swallowed.set()

    async def run() -> None:
        await loops.host(stubborn())

    try:
        loops.spawn(run, owner("A", "h.stubborn", events))
        assert started.wait(GUARD)
        loops.cancel(tasks)
        assert swallowed.wait(GUARD)
        assert loops.unstopped.count() == 0
        clock.advance(1)  # a second after its cancellation, on a loop that runs
        assert loops.unstopped.count("A") == 1 and loops.left_running("A") == 1
        assert delivered(CancellationIgnored, events)
        stop.set()
        assert eventually(lambda: loops.unstopped.count() == 0)
    finally:
        stop.set()
        loops.close()


def test_a_cancelled_coroutine_is_not_blamed_for_time_its_loop_was_blocked() -> None:
    """A cancelled coroutine whose loop was found blocked while it was given time to
    stop is judged again after a period its loop ran freely."""
    clock = ManualClock()
    events: list[Event] = []
    loops = EngineLoop(clock=clock)
    loops.unstopped.seconds = 2
    started, swallowed, stop = threading.Event(), threading.Event(), threading.Event()
    entered, release = threading.Event(), threading.Event()
    tasks: list[asyncio.Task[Any]] = []

    async def stubborn() -> None:
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        started.set()
        while not stop.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                swallowed.set()

    async def blocks() -> None:
        entered.set()
        release.wait(GUARD)

    async def run(work: Callable[[], Any]) -> None:
        await loops.host(work())

    try:
        loops.spawn(lambda: run(stubborn), owner("A", "h.stubborn", events))
        assert started.wait(GUARD)
        loops.cancel(tasks)
        assert swallowed.wait(GUARD)
        loops.spawn(lambda: run(blocks), owner("A", "h.block", events))
        assert entered.wait(GUARD)
        clock.advance(0.25)
        clock.advance(1)  # found blocked
        assert loops.blocked("A") == 1
        release.set()
        assert eventually(lambda: loops.blocked() == 0)
        freely(clock, loops, 0.75)  # two seconds since its cancellation: it was blocked
        assert loops.unstopped.count("A") == 0
        freely(clock, loops, 2)
        assert loops.unstopped.count("A") == 1
    finally:
        stop.set()
        release.set()
        loops.close()


@pytest.mark.parametrize("detached", [False, True], ids=["shielded", "detached"])
def test_tasks_a_call_made_are_cancelled_with_it_and_counted(detached: bool) -> None:
    """A handler's child task that swallows its cancellation (awaited through
    `asyncio.shield`, or left detached) is cancelled when its call ends, and counted
    against the call's subject while it goes on."""
    clock = ManualClock()
    events: list[Event] = []
    loops = EngineLoop(clock=clock)
    started, stop = threading.Event(), threading.Event()
    tasks: list[asyncio.Task[Any]] = []
    cancelled = threading.Event()

    async def child() -> None:
        started.set()
        while not stop.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                cancelled.set()

    async def handler() -> None:
        made = asyncio.ensure_future(child())
        if not detached:
            await asyncio.shield(made)

    async def run() -> None:
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        await loops.host(handler())

    try:
        loops.spawn(run, owner("A", "h.work", events))
        assert started.wait(GUARD)
        if not detached:
            loops.cancel(tasks)  # its execution is answered: the call is cancelled
        assert cancelled.wait(GUARD)  # the call ended: its child is cancelled
        clock.advance(1)
        assert eventually(lambda: loops.unstopped.count("A") == 1)
        ignored = delivered(CancellationIgnored, events)
        assert [(e.subject, e.capability) for e in ignored] == [("A", "h.work")]
        stop.set()
        assert eventually(lambda: loops.unstopped.count() == 0)
    finally:
        stop.set()
        loops.close()
