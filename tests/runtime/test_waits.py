"""Waits: a program parked on what it waits for, holding no thread, and what ends it."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from codemode.runtime import Engine
from codemode.runtime.dispatch import Awaiting
from codemode.runtime.sandbox import Returned, Step
from codemode.runtime.state import Answered, State, Status
from codemode.runtime.waits import BLOCKING, SLEPT, Waits
from codemode.testing import ManualClock, ScriptedSandbox
from codemode.tracing import Span
from tests.conftest import GUARD, eventually
from tests.runtime.running import engine

DONE: Step = Returned(None)  # type: ignore[assignment]


def nothing(program: Any) -> Generator[Any, Any, Any]:
    return (yield)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def on(clock: ManualClock) -> Iterator[Engine]:
    with engine(ScriptedSandbox(nothing), clock=clock) as built:
        yield built


def waits_of(on: Engine, status: Status) -> Waits:
    status.state = State.RUNNING
    return Waits(
        status,
        subject="alice",
        execution_id="e-1",
        emit=None,
        clock=on.clock,
        pool=on.pool,
        loop=on.loop,
    )


def state_of(status: Status) -> State:
    return status.state


def resume() -> Step:
    return DONE


def test_a_program_ready_at_once_goes_on_without_waiting(on: Engine) -> None:
    status = Status()
    waits = waits_of(on, status)
    assert waits.hold(lambda: True, resume) is False
    assert status.state is State.RUNNING


def test_the_completion_it_waits_for_hands_on_its_step_and_others_do_not(on: Engine) -> None:
    status = Status()
    waits = waits_of(on, status)
    assert waits.hold(lambda: waits.has(2), resume) is True
    assert status.state is State.AWAITING
    assert waits.complete(1, Returned("one")) is None  # not what it waits for
    assert status.state is State.AWAITING
    assert waits.complete(2, Returned("two")) is resume
    assert state_of(status) is State.RUNNING
    assert waits.take_ready((1, 2, 3)) == {1: Returned("one"), 2: Returned("two")}


def test_a_call_that_failed_raises_where_the_program_takes_it(on: Engine) -> None:
    waits = waits_of(on, Status())
    failure = RuntimeError("boom")
    waits.complete(1, failure)
    with pytest.raises(RuntimeError) as caught:
        waits.take(1)
    assert caught.value is failure


def test_a_settled_execution_never_parks_again(on: Engine) -> None:
    status = Status()
    waits = waits_of(on, status)
    status.state = State.SETTLED
    with pytest.raises(Answered):
        waits.hold(lambda: False, resume)


def test_a_sleep_is_a_timer_that_ends_when_the_clock_reaches_it(
    on: Engine, clock: ManualClock
) -> None:
    status = Status()
    waits = waits_of(on, status)
    rang: list[str] = []
    waits.sleep(BLOCKING, 2, lambda: rang.append("rang"))
    assert waits.hold(lambda: waits.has(BLOCKING), resume) is True
    assert clock.pending == 1
    clock.advance(1)
    assert rang == []
    clock.advance(1)
    assert rang == ["rang"]
    assert waits.complete(BLOCKING, SLEPT) is resume
    assert waits.take(BLOCKING) == SLEPT


def test_cancelling_leaves_no_timer_to_ring(on: Engine, clock: ManualClock) -> None:
    waits = waits_of(on, Status())
    rang: list[str] = []
    waits.sleep(7, 5, lambda: rang.append("rang"))
    waits.cancel()
    assert clock.pending == 0
    clock.advance(10)
    assert rang == []


def test_it_waits_only_for_a_person_once_every_other_call_and_sleep_has_ended(
    on: Engine,
) -> None:
    status = Status()
    waits = waits_of(on, status)
    waits.start(1, lambda: None)  # a call that now waits for a person
    waits.start(2, lambda: None)  # a call that still runs
    waits.block_on((1, 2))
    assert waits.hold(lambda: waits.has_any((1, 2)), resume) is True
    with status.lock:
        assert waits.only_for({1}) is False  # call 2 has not ended
    assert waits.complete(2, Returned(2)) is resume  # the program takes it and goes on
    waits.take(2)
    waits.block_on((1,))
    assert waits.hold(lambda: waits.has(1), resume) is True
    with status.lock:
        assert waits.only_for({1}) is True
    assert state_of(status) is State.RUNNING
    assert waits.calls_ended({1}) and not waits.calls_ended(set())


def test_a_driver_job_in_host_code_is_left_running_and_named_when_answered(
    on: Engine,
) -> None:
    status = Status()
    waits = waits_of(on, status)
    entered, release = threading.Event(), threading.Event()

    def host_code() -> None:
        entered.set()
        release.wait(GUARD)

    job = on.pool.submit("alice", host_code)
    waits.stepping(job)
    assert entered.wait(GUARD)
    with status.lock:
        stuck, unstarted = waits.let_go(State.IN_HOST, threading.get_ident())
    release.set()
    assert stuck == [(job, "the driver")]
    assert unstarted is False


def test_host_code_is_awaited_on_the_engines_loop_and_goes_on_in_a_job(on: Engine) -> None:
    waits = waits_of(on, Status())
    outcome: list[Any] = []
    went_on = threading.Event()

    async def host() -> int:
        await asyncio.sleep(0)
        return 7

    def then(value: Any, failure: BaseException | None) -> None:
        outcome.append((value, failure, threading.current_thread().name))
        went_on.set()

    waits.hand_off(1, "users.get", Awaiting(host(), Span()), plan(), then)
    assert went_on.wait(GUARD)
    assert outcome[0][:2] == (7, None)
    assert outcome[0][2].startswith("codemode-work")  # a thread of the pool, not the loop


def test_host_code_of_an_answered_execution_never_starts(on: Engine) -> None:
    status = Status()
    waits = waits_of(on, status)
    status.state = State.SETTLED
    started: list[str] = []

    async def host() -> None:
        started.append("started")

    coroutine = host()
    waits.hand_off(1, "users.get", Awaiting(coroutine, Span()), plan(), lambda *_: None)
    closed = "CORO_CLOSED"  # closed on the engine's loop, never started
    assert eventually(lambda: inspect.getcoroutinestate(coroutine) == closed)
    assert started == []


def plan() -> Generator[Any, Any, Any]:
    """A call's plan that awaits once (what `hand_off` goes on with)."""
    value = yield None
    return value
