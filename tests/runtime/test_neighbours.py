"""One subject's host code cannot hold up another's: a `can_see` that hangs, an async
handler that blocks the engine's loop, a coroutine that swallows its cancellation. On the
real sandbox; time is a hand-driven clock where the runtime keeps it, and assertions are
on outcomes and the order of events, never on elapsed time."""

from __future__ import annotations

import asyncio
import contextlib
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
from codemode.testing import ManualClock, running_engine
from tests.conftest import eventually

GUARD = 30.0
"""How long a test waits for what must come (it comes at once, or after a second)."""


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
        engine = running_engine(cm)
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
    """A's async handler blocks its loop (as `time.sleep` would). B's async call runs on
    a loop of B's own and is answered meanwhile; the watchdog puts the block down to A and
    h.block, and A's loop ends once it is free."""
    events: list[Event] = []
    release, entered = threading.Event(), threading.Event()
    cm = CodeMode(authorizer=AllowAll(), on_event=events.append)

    @cm.capability("h.block", summary="Blocks its loop.")
    async def block() -> int:
        entered.set()
        release.wait(GUARD)  # a blocking call in a coroutine: the loop does nothing else
        return 1

    @cm.capability("h.now", summary="Answers at once.")
    async def now() -> int:
        return 2

    source = "async def main():\n    return await h.{}()\n"
    with cm:
        a_outcome: list[object] = []
        a = threading.Thread(
            target=lambda: a_outcome.append(cm.execute(source.format("block"), subject="A").value)
        )
        a.start()
        assert entered.wait(GUARD)
        loop = running_engine(cm).loop
        first = loop.current()["A"]
        try:
            assert cm.execute(source.format("now"), subject="B").value == 2
            blocked = delivered(EventLoopBlocked, events)
        finally:
            release.set()
        a.join(GUARD)
        assert a_outcome == [1]

        started = {e.subject: e.execution_id for e in events if e.kind == "execution_started"}
        assert [(e.subject, e.capability, e.execution_id, e.blocked) for e in blocked] == [
            ("A", "h.block", started["A"], 1)
        ]
        assert eventually(lambda: loop.blocked() == 0 and first not in loop.live())


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


# -- the watchdog, driven by hand ---------------------------------------------------------


def owner(subject: str, capability: str, events: list[Event]) -> Owner:
    return Owner(subject, capability, f"run-{subject}", events.append)


def freely(clock: ManualClock, loops: EngineLoop, seconds: float) -> None:
    """Advance the clock a beat at a time, each beat run before the next goes out (as
    loops that run freely do)."""
    for _ in range(int(seconds / 0.25)):
        clock.advance(0.25)
        assert eventually(lambda: all(r.beat_at is None for r in loops.live()))


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


@pytest.mark.parametrize("hide_forbidden", [False, True], ids=["call", "can_see"])
def test_a_call_already_awaiting_finishes_while_another_subject_blocks(
    hide_forbidden: bool,
) -> None:
    """B's async call is already awaiting when A's handler blocks its loop: B's call,
    and B's `can_see` checks, run on B's own loop and are answered meanwhile."""
    entered, release, b_waits = threading.Event(), threading.Event(), threading.Event()
    go: list[asyncio.Event] = []

    class Sees(AllowAll):
        async def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
            return True

    cm = CodeMode(authorizer=Sees(), hide_forbidden=hide_forbidden)

    @cm.capability("h.block", summary="Blocks its loop.")
    async def block() -> int:
        entered.set()
        release.wait(GUARD)
        return 1

    @cm.capability("h.wait", summary="Waits for the test.")
    async def wait() -> int:
        go.append(asyncio.Event())
        b_waits.set()
        await go[0].wait()
        return 2

    source = "async def main():\n    return await h.{}()\n"
    with cm:
        b_outcome: list[object] = []
        b = threading.Thread(
            target=lambda: b_outcome.append(cm.execute(source.format("wait"), subject="B").value)
        )
        b.start()
        assert b_waits.wait(GUARD)
        a = threading.Thread(target=lambda: cm.execute(source.format("block"), subject="A"))
        a.start()
        try:
            assert entered.wait(GUARD)
            go[0]._loop.call_soon_threadsafe(go[0].set)  # type: ignore[attr-defined]
            b.join(GUARD)
            assert b_outcome == [2]
            found = cm.search("", subject="B")
            assert [hit.name for hit in found.results] == ["h.block", "h.wait"]
            assert not release.is_set()  # all of it while A still blocks its loop
        finally:
            release.set()
            a.join(GUARD)


def test_a_subject_past_its_share_of_blocked_loops_has_its_calls_refused() -> None:
    """Each block of A's takes a fresh loop of A's own, counted against A; once the
    blocks hold A's share, A's new calls fail with the limit (none of their code runs),
    and B's run as ever."""
    clock = ManualClock()
    events: list[Event] = []
    loops = EngineLoop(clock=clock, share=2)
    release = threading.Event()
    entered = threading.Semaphore(0)
    outcomes: list[str] = []
    ran: list[str] = []

    async def blocks() -> None:
        entered.release()
        release.wait(GUARD)

    async def a() -> None:
        await loops.host(blocks())

    async def a3() -> None:
        async def never() -> None:
            ran.append("a3")

        try:
            await loops.host(never())
        except Exception as exc:
            outcomes.append(str(exc.error))  # type: ignore[attr-defined]

    async def b() -> None:
        await loops.host(asyncio.sleep(0))
        outcomes.append("b")

    try:
        loops.spawn(a, owner("A", "h.block", events))
        assert entered.acquire(timeout=GUARD)
        loops.spawn(a, owner("A", "h.block", events))  # waits behind the first
        clock.advance(1.25)
        assert entered.acquire(timeout=GUARD)  # moved to a fresh loop of A's: blocks it
        clock.advance(1.25)
        assert loops.blocked("A") == 2 and loops.left_running("A") == 2
        loops.spawn(a3, owner("A", "h.now", events))
        loops.spawn(b, owner("B", "h.now", events))
        assert eventually(lambda: len(outcomes) == 2)
        assert sorted(outcomes) == [
            "b",
            "resource limit exceeded: calls left running past their deadline (limit 2)",
        ]
        assert ran == []
    finally:
        release.set()
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


def test_a_retired_loop_cancels_what_host_code_left_on_it_and_ends() -> None:
    """A's code leaves a background task on its loop (made outside any call, as a
    library's refresher is), then blocks the loop. Once the loop is free and the call has
    ended, the task is cancelled and the loop ends; one that will not stop is counted."""
    clock = ManualClock()
    events: list[Event] = []
    loops = EngineLoop(clock=clock)
    entered, release, stop = threading.Event(), threading.Event(), threading.Event()

    async def refresher() -> None:
        while not stop.is_set():
            with contextlib.suppress(asyncio.CancelledError):  # stops when the test says so
                await asyncio.sleep(0.01)

    async def work() -> None:
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: loop.create_task(refresher()))
        await asyncio.sleep(0)
        entered.set()
        release.wait(GUARD)

    async def run() -> None:
        await loops.host(work())

    try:
        loops.spawn(run, owner("A", "h.lookup", events))
        assert entered.wait(GUARD)
        first = loops.current()["A"]
        clock.advance(0.25)
        clock.advance(1)
        assert loops.blocked("A") == 1
        release.set()
        assert eventually(lambda: loops.blocked() == 0)
        freely(clock, loops, 1)  # a second after the leftover was cancelled: it goes on
        assert eventually(lambda: loops.unstopped.count("A") == 1)
        assert first.thread.is_alive()
        stop.set()
        first.thread.join(GUARD)
        assert not first.thread.is_alive() and first not in loops.live()
        assert loops.unstopped.count() == 0
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


def test_a_program_whose_subject_holds_its_share_of_loops_has_its_next_call_refused() -> None:
    """A's first call blocks its loop; with A's share one loop, A's next async call fails
    where it is made with the documented limit (its handler never runs), and B's calls
    run meanwhile."""
    entered, release = threading.Event(), threading.Event()
    ran: list[str] = []
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("h.block", summary="Blocks its loop.")
    async def block() -> int:
        entered.set()
        release.wait(GUARD)
        return 1

    @cm.capability("h.now", summary="Answers at once.")
    async def now() -> int:
        ran.append("now")
        return 2

    source = (
        "import asyncio\n"
        "async def later():\n"
        "    await asyncio.sleep(0.01)\n"
        "    return await h.now()\n"
        "async def main():\n"
        "    return await asyncio.gather(h.block(), later())\n"
    )
    with cm:
        loop = running_engine(cm).loop
        loop.share = 1
        try:
            with pytest.raises(Exception) as caught:
                cm.execute(source, subject="A")
            assert str(caught.value) == (
                "resource limit exceeded: calls left running past their deadline (limit 1) "
                "at <codemode>:4:18"
            )
            assert ran == [] and not release.is_set()
            assert (
                cm.execute("async def main():\n    return await h.now()\n", subject="B").value == 2
            )
        finally:
            release.set()
            assert eventually(lambda: loop.in_flight == 0)  # h.block's call has ended


class _Hostile:
    """A `can_see` answer whose every question is host code that raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("CANARY-can-see-class")

    def __bool__(self) -> bool:
        raise RuntimeError("CANARY-can-see-bool")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_can_see_answer_that_raises_when_asked_hides_its_capability_alone(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An answer is read by its type (asking it is host code: a failure there is a
    failure of `can_see`, logged as one): it hides its capability at once, the others
    show, and no task is left with an exception no one retrieved."""

    class Policy(AllowAll):
        def can_see(self, subject: str, capability_id: str, capability_name: str) -> object:
            answer = _Hostile() if capability_name == "h.odd" else True
            if kind == "sync":
                return answer

            async def later() -> object:
                return answer

            return later()

    cm = CodeMode(authorizer=Policy(), hide_forbidden=True)

    def one() -> int:
        return 1

    for name in ("h.odd", "h.ok"):
        cm.capability(name, summary="A capability.")(one)
    with cm, caplog.at_level("DEBUG"):
        found = cm.search("", subject="W")
        assert [r.name for r in found.results] == ["h.ok"]
    assert "CANARY" not in repr(found)
    assert "never retrieved" not in caplog.text
