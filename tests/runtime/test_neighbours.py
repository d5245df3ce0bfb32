"""One subject's host code cannot hold up another's: a `can_see` that hangs, an async
handler that blocks the engine's loop, a coroutine that swallows its cancellation. On the
real sandbox; time is a hand-driven clock where the runtime keeps it, and assertions are
on outcomes and the order of events, never on elapsed time."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll
from codemode.events import (
    CancellationIgnored,
    Event,
    EventLoopBlocked,
    ExecutionFinished,
    HostCodeAbandoned,
    VisibilityUnanswered,
)
from codemode.runtime.loop import EngineLoop
from codemode.runtime.watchdog import Marked, Owner
from codemode.testing import ManualClock

GUARD = 30.0
"""How long a test waits for what must come (it comes at once, or after a second)."""


def eventually(found: Callable[[], object]) -> object:
    """What `found` gives once it gives something (delivered off the test's thread)."""
    stop = threading.Event()
    for _ in range(int(GUARD * 100)):
        if value := found():
            return value
        stop.wait(0.01)
    return None


def of(kind: type[Event], events: list[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def delivered(kind: type[Event], events: list[Event]) -> list[Any]:
    """The events of a kind, once one came (the engine's own are sent off its threads)."""
    eventually(lambda: of(kind, events))
    return of(kind, events)


def capabilities(cm: CodeMode) -> None:
    for index in range(3):

        def handler(index: int = index) -> int:
            return index

        cm.capability(f"h.c{index}", summary="A capability.")(handler)


class HangsForA(AllowAll):
    """Shows everything, but never answers about h.c2 for subject A."""

    def __init__(self, is_async: bool) -> None:
        self.is_async = is_async
        self.release = threading.Event()
        self.asked = threading.Semaphore(0)

    def can_see(self, subject: str, capability_id: str, capability_name: str) -> Any:
        hangs = subject == "A" and capability_name == "h.c2"
        if not self.is_async:
            if hangs:
                self.asked.release()
                self.release.wait(GUARD)
            return True

        async def later() -> bool:
            if hangs:
                self.asked.release()
                await asyncio.Event().wait()
            return True

        return later()


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_can_see_that_hangs_for_one_subject_delays_no_other(is_async: bool) -> None:
    """Fifty requests of A wait on a `can_see` that never answers about h.c2 (they once
    took every thread that requests share, and each capability its own full timeout):
    B's search and execute are answered meanwhile. A's requests are answered when the one
    deadline their checks share passes, h.c2 hidden, and that time counts against A's
    execution: with a second to run and a second of checks, it is out of time."""
    clock = ManualClock()
    events: list[Event] = []
    policy = HangsForA(is_async)
    limits = Limits(max_capability_seconds=1, max_execution_seconds=1)
    cm = CodeMode(
        authorizer=policy, hide_forbidden=True, limits=limits, clock=clock, on_event=events.append
    )
    capabilities(cm)
    with cm:
        searches = [asyncio.ensure_future(cm.search_async("", subject="A")) for _ in range(50)]
        run_a = asyncio.ensure_future(cm.execute_async("def main():\n    return 1", subject="A"))
        await asyncio.to_thread(policy.asked.acquire, timeout=GUARD)

        found = await asyncio.wait_for(cm.search_async("", subject="B"), GUARD)
        assert [hit.name for hit in found.results] == ["h.c0", "h.c1", "h.c2"]
        ran = await asyncio.wait_for(
            cm.execute_async("def main():\n    return h.c2()", subject="B"), GUARD
        )
        assert ran.value == 2
        assert not any(s.done() for s in searches) and not run_a.done()

        clock.advance(1)
        for search in searches:
            result = await asyncio.wait_for(search, GUARD)
            assert [hit.name for hit in result.results] == ["h.c0", "h.c1"]
        with pytest.raises(Exception) as caught:
            await asyncio.wait_for(run_a, GUARD)
        assert str(caught.value) == "resource limit exceeded: execution time (limit 1 s)"

        unanswered = delivered(VisibilityUnanswered, events)
        assert [(e.subject, e.capabilities, e.seconds) for e in unanswered] == [
            ("A", ("h.c2",), 1.0)
        ]
        engine = cm._running_engine()
        if not is_async:  # its thread is left running, counted against A alone
            assert engine.pool.abandoned("A") == 1 and engine.pool.abandoned("B") == 0
            abandoned = delivered(HostCodeAbandoned, events)
            assert [(e.subject, e.what) for e in abandoned] == [("A", "a visibility check")]
            policy.release.set()
            assert eventually(lambda: engine.pool.abandoned() == 0)
        assert delivered(ExecutionFinished, events)
        assert [e.subject for e in of(ExecutionFinished, events)] == ["B"]


def test_a_view_some_check_did_not_answer_for_is_asked_again() -> None:
    """A view with a capability hidden for want of an answer is not remembered: the next
    request asks again (and, answered this time, sees it)."""
    clock = ManualClock()
    answers = {"late": True}
    arrived = threading.Event()
    answered: list[str] = []

    class Slow(AllowAll):
        async def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
            if capability_name == "h.c1" and answers["late"]:
                arrived.set()
                await asyncio.Event().wait()
            answered.append(capability_name)
            return True

    cm = CodeMode(authorizer=Slow(), hide_forbidden=True, clock=clock)
    capabilities(cm)
    with cm:
        seen: list[list[str]] = []
        thread = threading.Thread(target=lambda: seen.append(list(cm.visible("A"))))
        thread.start()
        assert arrived.wait(GUARD)
        assert eventually(lambda: len(answered) == 2)
        clock.advance(cm.limits.max_capability_seconds)
        thread.join(GUARD)
        answers["late"] = False
        assert seen == [["h.c0", "h.c2"]]
        assert list(cm.visible("A")) == ["h.c0", "h.c1", "h.c2"]


def test_an_async_handler_that_blocks_the_loop_holds_up_no_other_subject() -> None:
    """A's async handler blocks the engine's loop (as `time.sleep` would). B's async call,
    spawned on that loop, is moved to a fresh one once the watchdog sees the block, which
    it puts down to A and h.block before B's handler runs; the blocked loop is retired
    once it is free."""
    events: list[Event] = []
    release, entered = threading.Event(), threading.Event()
    cm = CodeMode(authorizer=AllowAll(), on_event=events.append)

    @cm.capability("h.block", summary="Blocks its loop.")
    async def block() -> int:
        entered.set()
        release.wait(GUARD)  # a blocking call in a coroutine: the loop does nothing else
        return 1

    @cm.capability("h.now", summary="Answers at once: how many loops A holds.")
    async def now() -> int:
        return cm._running_engine().loop.blocked("A")

    source = "async def main():\n    return await h.{}()\n"
    with cm:
        a_outcome: list[object] = []
        a = threading.Thread(
            target=lambda: a_outcome.append(cm.execute(source.format("block"), subject="A").value)
        )
        a.start()
        assert entered.wait(GUARD)
        try:
            assert cm.execute(source.format("now"), subject="B").value == 1
        finally:
            release.set()
        a.join(GUARD)
        assert a_outcome == [1]

        blocked = delivered(EventLoopBlocked, events)
        started = {e.subject: e.execution_id for e in events if e.kind == "execution_started"}
        assert [(e.subject, e.capability, e.execution_id, e.blocked) for e in blocked] == [
            ("A", "h.block", started["A"], 1)
        ]
        loop = cm._running_engine().loop
        assert eventually(lambda: loop.blocked() == 0 and len(loop._live()) == 1)


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
        engine = cm._running_engine()
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


# -- the watchdog, driven by hand ---------------------------------------------------------


def owner(subject: str, capability: str, events: list[Event]) -> Owner:
    return Owner(subject, capability, f"run-{subject}", events.append)


@pytest.mark.parametrize("made", [False, True], ids=["its own step", "a task it made"])
def test_the_watchdog_moves_waiting_work_off_a_blocked_loop_in_order(made: bool) -> None:
    """The order of events, on a hand-driven watchdog: A blocks the loop; B is spawned and
    cannot start; a beat goes out and is not run; one block period later the loop is
    blocked, put down to A, and B starts on a fresh loop; A's loop is free once A
    returns, and ends."""
    clock = ManualClock()
    events: list[Event] = []
    loops = EngineLoop(clock=clock)
    entered, release, b_ran = threading.Event(), threading.Event(), threading.Event()

    async def blocks() -> None:
        entered.set()
        release.wait(GUARD)

    async def maker() -> None:  # the blocking step runs in a task of its own
        await asyncio.gather(blocks())

    async def a() -> None:
        await loops.host(maker() if made else blocks())

    async def b() -> None:
        await loops.host(asyncio.sleep(0))
        b_ran.set()

    try:
        loops.spawn(a, owner("A", "h.block", events))
        assert entered.wait(GUARD)
        first = loops._current
        loops.spawn(b, owner("B", "h.now", events))
        clock.advance(0.25)  # a beat goes out
        assert first is not None and first.beat_at is not None
        clock.advance(0.75)  # out for less than the period: not judged yet
        assert not b_ran.is_set() and loops.blocked() == 0
        clock.advance(0.25)
        assert loops.blocked("A") == 1 and loops._current is not first
        assert b_ran.wait(GUARD)
        blocked = delivered(EventLoopBlocked, events)
        assert [(e.subject, e.capability) for e in blocked] == [("A", "h.block")]
        release.set()
        assert eventually(lambda: loops.blocked() == 0 and first not in loops._live())
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
            runner = loops._current
            assert runner is not None
            assert eventually(lambda: runner.beat_at is None)  # noqa: B023
        assert loops.blocked() == 0 and len(loops._live()) == 1
    finally:
        go.set()
        loops.close()


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
