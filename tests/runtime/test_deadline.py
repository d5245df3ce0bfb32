"""The deadline of one execution: the first budget to pass decides the error, once, at its
call site, whoever notices it; a caller is answered when it passes, whatever the host code
it waits on does. On a hand-driven clock: the order of events, never elapsed time."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.errors import ResourceLimitError, Where
from codemode.limits import LimitKind
from codemode.runtime.deadline import Deadline
from codemode.testing import ManualClock
from tests.conftest import GUARD, hanging
from tests.runtime.scripted import Host, error_of, one, wait_for

P = "def main():\n"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_hanging_authorizer_gives_one_text_every_time(
    make_host: Callable[..., Host], kind: str
) -> None:
    entered = threading.Event()
    release = threading.Event()

    def hang_sync(request: AuthorizationRequest) -> None:
        entered.set()
        release.wait(10)

    async def hang_async(request: AuthorizationRequest) -> None:
        entered.set()
        await asyncio.Event().wait()

    host = make_host(authorizer=hang_sync if kind == "sync" else hang_async)
    host.cm.capability("h.work", summary="x")(one)
    texts = set()
    for _ in range(8):
        entered.clear()
        answer = host.start()
        wait_for(entered)
        host.clock.advance(host.cm.limits.max_execution_seconds)
        texts.add(error_of(answer))
    release.set()
    assert texts == {"resource limit exceeded: execution time (limit 10 s)"}


OVERDUE = ResourceLimitError(LimitKind.EXECUTION_TIME, bound="10 s")

BUDGET = ResourceLimitError(LimitKind.CAPABILITY_TIME, bound="1 s")


def deadline(clock: ManualClock) -> tuple[Deadline, list[str]]:
    told: list[str] = []
    return Deadline(clock, 10, OVERDUE, lambda error: told.append(str(error))), told


def test_a_deadline_built_unarmed_rings_only_once_armed() -> None:
    """An execution arms its deadline once it is built, so a deadline already passed
    answers a caller whose execution can be answered."""
    clock = ManualClock()
    told: list[str] = []
    late = Deadline(clock, -1, OVERDUE, lambda error: told.append(str(error)), armed=False)
    assert clock.pending == 0
    clock.advance(0)
    assert told == []
    late.arm()
    late.arm()  # once is enough
    assert clock.pending == 1
    clock.advance(0)
    assert told == ["resource limit exceeded: execution time (limit 10 s)"]


def test_the_first_budget_to_pass_decides_the_error_once() -> None:
    clock = ManualClock()
    late, told = deadline(clock)
    token = late.enter(1, BUDGET)
    clock.advance(1)
    assert told == ["resource limit exceeded: capability time (limit 1 s)"]
    assert late.leave(token) is late.expired
    clock.advance(20)
    assert len(told) == 1  # the execution's own deadline never decides again


def test_host_code_that_returns_late_fails_even_before_the_timer_rings() -> None:
    clock = ManualClock()
    late, told = deadline(clock)
    token = late.enter(1, BUDGET)
    clock.skip(2)  # time passed, and no timer has rung yet
    error = late.leave(token)
    assert str(error) == "resource limit exceeded: capability time (limit 1 s)"
    assert told == [str(error)]


def test_a_budget_longer_than_the_execution_ends_with_the_executions_error() -> None:
    clock = ManualClock()
    late, told = deadline(clock)
    late.enter(60, BUDGET)
    clock.advance(10)
    assert told == ["resource limit exceeded: execution time (limit 10 s)"]


def test_a_call_that_left_in_time_arms_nothing_earlier() -> None:
    clock = ManualClock()
    late, told = deadline(clock)
    for _ in range(100):
        late.leave(late.enter(1, BUDGET))
        clock.advance(0.01)
    assert clock.pending <= 2  # one timer at the execution's end, one for the first call
    clock.advance(9.5)
    assert told == ["resource limit exceeded: execution time (limit 10 s)"]


def test_calls_that_run_out_at_one_moment_are_named_by_the_first_in_the_source() -> None:
    clock = ManualClock()
    late, told = deadline(clock)
    second = Where("<codemode>", 5, 9, 5, 20, "main", "h.b()")
    first = Where("<codemode>", 4, 9, 4, 20, "main", "h.a()")
    late.enter(60, BUDGET, lambda: second)  # both capped at the execution's own end
    late.enter(60, BUDGET, lambda: first)
    clock.advance(10)
    assert told == ["resource limit exceeded: execution time (limit 10 s) at <codemode>:4:9"]


@pytest.mark.parametrize("noticed_by", ["the timer", "the second call returning late"])
def test_whoever_notices_the_same_moment_names_the_first_call_in_the_source(
    noticed_by: str,
) -> None:
    clock = ManualClock()
    late, told = deadline(clock)
    second = Where("<codemode>", 5, 9, 5, 20, "main", "h.b()")
    first = Where("<codemode>", 4, 9, 4, 20, "main", "h.a()")
    token = late.enter(60, BUDGET, lambda: second)  # both capped at the execution's own end
    late.enter(60, BUDGET, lambda: first)
    if noticed_by == "the timer":
        clock.advance(10)
    else:
        clock.skip(10)  # time passed, and no timer has rung yet
        late.leave(token)
    assert told == ["resource limit exceeded: execution time (limit 10 s) at <codemode>:4:9"]


@pytest.mark.parametrize("noticed_by", ["the timer", "the later call returning late"])
def test_whoever_notices_names_the_budget_that_passed_first(noticed_by: str) -> None:
    clock = ManualClock()
    late, told = deadline(clock)
    short = Where("<codemode>", 5, 9, 5, 20, "main", "h.b()")
    long = Where("<codemode>", 4, 9, 4, 20, "main", "h.a()")
    token = late.enter(2, BUDGET.replace(bound="2 s"), lambda: long)
    late.enter(1, BUDGET, lambda: short)
    if noticed_by == "the timer":
        clock.advance(3)
    else:
        clock.skip(3)  # both passed, and no timer has rung yet
        late.leave(token)
    assert told == ["resource limit exceeded: capability time (limit 1 s) at <codemode>:5:9"]


def test_a_hung_sync_authorizer_is_bounded_by_the_deadline() -> None:
    """Answered when the deadline passes, while the authorizer still hangs."""
    release, entered, returned = threading.Event(), threading.Event(), threading.Event()

    def slow(request: AuthorizationRequest) -> None:
        entered.set()
        release.wait(GUARD)
        returned.set()

    clock = ManualClock()
    limits = Limits(max_execution_seconds=0.5)
    with (
        ThreadPoolExecutor(1) as callers,
        CodeMode(authorizer=slow, limits=limits, clock=clock) as app,
    ):

        @app.capability("a.b", summary="x")
        def b() -> int:
            return 1

        try:
            answer = callers.submit(app.execute, P + "    return a.b()", subject="a")
            assert entered.wait(GUARD)
            clock.advance(0.499)
            assert not answer.done()
            clock.advance(0.001)
            error = answer.exception(GUARD)
            assert str(error) == "resource limit exceeded: execution time (limit 0.5 s)"
            assert not returned.is_set()
        finally:
            release.set()


def test_capability_time_past_the_budget_is_reported_at_the_call() -> None:
    """Answered when the capability's own budget passes, before its handler returns."""
    clock = ManualClock()
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()
    with ThreadPoolExecutor(1) as callers, CodeMode(authorizer=AllowAll(), clock=clock) as app:

        @app.capability("h.slow", summary="Sleeps.", timeout=0.2)
        def slow() -> int:
            entered.set()
            release.wait(GUARD)
            returned.set()
            return 1

        try:
            answer = callers.submit(app.execute, P + "    return h.slow()", subject="a")
            assert entered.wait(GUARD)
            clock.advance(0.2)
            error = answer.exception(GUARD)
            assert not returned.is_set()
        finally:
            release.set()
        assert isinstance(error, ResourceLimitError)
        assert str(error) == (
            "resource limit exceeded: capability time (limit 0.2 s) at <codemode>:2:12"
        )


@pytest.mark.anyio
async def test_an_async_caller_is_answered_on_time_by_a_hung_handler() -> None:
    """Answered when the deadline passes, while the handler still hangs."""
    clock = ManualClock()
    with hanging(limits=Limits(max_execution_seconds=0.5), clock=clock) as host:
        running = asyncio.ensure_future(
            host.cm.execute_async(P + "    return h.hang()", subject="a")
        )
        assert await asyncio.to_thread(host.entered.wait, GUARD)
        clock.advance(0.5)
        with pytest.raises(ResourceLimitError):
            await asyncio.wait_for(running, GUARD)
        assert not host.returned.is_set()
