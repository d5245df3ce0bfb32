"""The engine's event loops: host coroutines run there, never on the caller's loop, and
each subject's on loops of its own, so one subject's code that blocks its loop holds up
no other's; a blocked loop is retired, and its subject's share of them is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll
from codemode.errors import ResourceLimitError
from codemode.events import Event, EventLoopBlocked, HostCodeAbandoned
from codemode.runtime.loop import EngineLoop
from codemode.testing import ManualClock, ScriptedProgram, running_engine
from tests.conftest import GUARD, eventually
from tests.runtime.hostcode import delivered, freely, owner
from tests.runtime.scripted import Host, Program

P = "def main():\n"


def test_gathered_calls_wait_on_the_loop_and_end_together(
    make_host: Callable[..., Host],
) -> None:
    def gather(program: ScriptedProgram) -> Program:
        calls = [program.call("h.work", line=3) for _ in range(20)]
        return sum((yield program.gather(*calls)))

    host = make_host(gather)
    started = threading.Semaphore(0)
    go = asyncio.Event()
    loops: set[int] = set()

    @host.cm.capability("h.work", summary="Waits for the test.")
    async def work() -> int:
        loops.add(id(asyncio.get_running_loop()))
        started.release()
        await go.wait()
        return 1

    source = "import asyncio\nasync def main():\n    return sum(await asyncio.gather(*[h.work() for _ in range(20)]))\n"
    answer = host.start(source)
    for _ in range(20):
        assert started.acquire(timeout=10)
    assert not answer.done()  # all twenty wait at once, none holds a thread
    loop = next(iter(loops))
    assert len(loops) == 1
    (runner,) = running_engine(host.cm).loop.current().values()  # the subject's own
    assert id(runner.loop) == loop
    runner.loop.call_soon_threadsafe(go.set)
    assert answer.result(10).value == 20


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


@pytest.mark.parametrize("hide_forbidden", [False, True], ids=["call", "can_see"])
def test_a_call_already_awaiting_finishes_while_another_subject_blocks(
    hide_forbidden: bool,
) -> None:
    """B's async call is already awaiting when A's handler blocks its loop: B's call,
    and B's `can_see` checks, run on B's own loop and are answered meanwhile."""
    entered, release, b_waits = threading.Event(), threading.Event(), threading.Event()
    go: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

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
        go.append((asyncio.get_running_loop(), asyncio.Event()))
        b_waits.set()
        await go[0][1].wait()
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
            loop, event = go[0]
            loop.call_soon_threadsafe(event.set)
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


@pytest.mark.anyio
async def test_host_code_never_blocks_the_callers_event_loop() -> None:
    """A slow sink (reporting an abandoned thread), a slow can_see and a hung handler run
    off the loop: each blocks until this loop releases it, so each is released (rather
    than giving up waiting) only if the loop went on running while it blocked."""
    release = threading.Event()
    seeing, entered, abandoned = threading.Event(), threading.Event(), threading.Event()
    released: list[tuple[str, bool]] = []

    class SlowSee(AllowAll):
        def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
            if subject == "slow":
                seeing.set()
                released.append(("can_see", release.wait(GUARD)))
            return True

    def sink(event: Event) -> None:
        if isinstance(event, HostCodeAbandoned):
            abandoned.set()
            released.append(("sink", release.wait(GUARD)))

    clock = ManualClock()
    limits = Limits(max_capability_seconds=0.3)
    with CodeMode(
        authorizer=SlowSee(), hide_forbidden=True, on_event=sink, limits=limits, clock=clock
    ) as app:

        @app.capability("t.hang", summary="s")
        def hang() -> int:
            entered.set()
            released.append(("handler", release.wait(GUARD)))
            return 1

        try:
            pending = asyncio.ensure_future(app.search_async("hang", subject="slow"))
            running = asyncio.ensure_future(
                app.execute_async(P + "    return t.hang()", subject="a")
            )
            assert await asyncio.to_thread(seeing.wait, GUARD)
            assert await asyncio.to_thread(entered.wait, GUARD)
            clock.advance(0.3)
            with pytest.raises(ResourceLimitError):
                await asyncio.wait_for(running, GUARD)
            assert await asyncio.to_thread(abandoned.wait, GUARD)
            assert released == []
        finally:
            release.set()  # by this loop, while all three block
        await asyncio.wait_for(pending, GUARD)
    assert eventually(lambda: {name for name, _ in released} == {"can_see", "handler", "sink"})
    assert all(by_the_loop for _, by_the_loop in released), released
