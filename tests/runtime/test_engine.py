"""The engine of one CodeMode: admission through its bounded slots, shared fairly among
subjects; a caller is answered when its time is up, whatever the host code it waits on
does, and when the engine closes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll
from codemode.errors import ExecutionCanceledError
from codemode.events import ExecutionStarted, HostCodeAbandoned
from codemode.testing import ManualClock, ScriptedProgram, running_engine
from tests.conftest import GUARD, close_while_running, eventually, hanging
from tests.runtime.scripted import (
    ASYNC_SOURCE,
    SOURCE,
    Host,
    Program,
    calls_work_async,
    error_of,
    one,
    wait_for,
)

P = "def main():\n"


@pytest.mark.anyio
async def test_callers_that_give_up_while_waiting_for_a_slot_leave_nothing_stuck() -> None:
    """Ten callers wait for the one slot a sleeping program holds, and give up: none is
    left behind as host code, and the slot serves the next caller once the sleep ends."""
    clock = ManualClock()
    limits = Limits(max_concurrent_executions=1, max_execution_seconds=5)
    with CodeMode(authorizer=AllowAll(), limits=limits, clock=clock) as cm:
        busy = threading.Thread(
            target=lambda: cm.execute("import time\n" + P + "    time.sleep(2)\n", subject="a")
        )
        busy.start()
        assert eventually(
            lambda: clock.pending == 2
        )  # its deadline and its sleep: it holds the slot
        waiting = [
            asyncio.create_task(cm.execute_async(P + "    return 1\n", subject="b"))
            for _ in range(10)
        ]
        await asyncio.sleep(0.3)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await asyncio.sleep(0.3)
        engine = running_engine(cm)
        assert engine.pool.abandoned() == 0
        clock.advance(2)
        busy.join()
        assert cm.execute(P + "    return 'next'\n", subject="c").value == "next"


def test_a_sync_handler_past_its_budget_is_answered_before_it_returns(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []

    @host.cm.capability("h.work", summary="Blocks.", timeout=1)
    def work() -> int:
        entered.set()
        release.wait(10)
        order.append("handler returned")
        returned.set()
        return 1

    answer = host.start()
    wait_for(entered)
    host.clock.advance(0.999)
    assert not answer.done()
    host.clock.advance(0.001)
    assert (
        error_of(answer) == "resource limit exceeded: capability time (limit 1 s) at <codemode>:2:5"
    )
    order.append("answered")
    engine = running_engine(host.cm)
    assert engine.pool.abandoned("a") == 1
    release.set()
    wait_for(returned)
    assert order == ["answered", "handler returned"]
    assert eventually(lambda: [e.what for e in host.events if isinstance(e, HostCodeAbandoned)], 10)
    assert [(e.what, e.reason) for e in host.events if isinstance(e, HostCodeAbandoned)] == [
        ("the driver", "deadline")
    ]


def test_an_async_handler_past_its_budget_is_cancelled_not_abandoned(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(calls_work_async)
    entered, cancelled = threading.Event(), threading.Event()

    @host.cm.capability("h.work", summary="Waits forever.", timeout=1)
    async def work() -> int:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 1

    answer = host.start(ASYNC_SOURCE)
    wait_for(entered)
    host.clock.advance(1)
    assert (
        error_of(answer) == "resource limit exceeded: capability time (limit 1 s) at <codemode>:3:5"
    )
    wait_for(cancelled)
    assert running_engine(host.cm).pool.abandoned() == 0
    assert not any(isinstance(e, HostCodeAbandoned) for e in host.events)


def test_a_subject_runs_at_most_half_the_slots_and_a_free_one_goes_to_the_fewest(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(limits=Limits(max_concurrent_executions=4))
    releases = {n: threading.Event() for n in range(7)}
    entered = threading.Semaphore(0)

    @host.cm.capability("h.work", summary="Waits for the test.")
    def work(n: int) -> int:
        entered.release()
        releases[n].wait(10)
        return n

    def script(program: ScriptedProgram) -> Program:
        line = program.code.split("\n")[1]
        n = int(line.split("n=")[1].rstrip(")"))
        return (yield program.call("h.work", line=2, n=n))

    host.cm.sandbox.script = script  # type: ignore[union-attr]
    admission = running_engine(host.cm).admission
    source = "def main():\n    return h.work(n={})\n".format

    def start(n: int, subject: str, waiting: int) -> concurrent.futures.Future[Any]:
        """Start program `n`; `waiting`: how many wait for a slot after it."""
        runs = waiting == admission.waiting()
        answer = host.start(source(n), subject=subject)
        if runs:
            assert entered.acquire(timeout=10)
        while admission.waiting() < waiting:
            threading.Event().wait(0.001)
        return answer

    answers = [
        start(0, "mallory", 0),
        start(1, "mallory", 0),
        start(2, "mallory", 1),  # two slots are free, but mallory runs her half
        start(3, "mallory", 2),
        start(4, "bob", 2),
        start(5, "carol", 2),
        start(6, "carol", 3),  # the slots are full
    ]
    releases[4].set()  # bob's slot: carol runs one, mallory her half
    assert answers[4].result(10).value == 4
    assert entered.acquire(timeout=10)
    started = [e.subject for e in host.events if isinstance(e, ExecutionStarted)]
    assert started == ["mallory", "mallory", "bob", "carol", "carol"]
    for event in releases.values():
        event.set()
    assert sorted(a.result(10).value for a in answers) == list(range(7))


def test_a_subject_past_its_share_of_the_queue_is_refused(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(limits=Limits(max_concurrent_executions=2))
    release = threading.Event()
    entered = threading.Semaphore(0)

    @host.cm.capability("h.work", summary="Waits for the test.")
    def work() -> int:
        entered.release()
        release.wait(10)
        return 1

    admission = running_engine(host.cm).admission
    running = host.start(subject="mallory")
    assert entered.acquire(timeout=10)
    queued = [host.start(subject="mallory") for _ in range(admission.queue_share)]
    while admission.waiting() < admission.queue_share:
        threading.Event().wait(0.001)
    refused = host.start(subject="mallory")
    assert error_of(refused) == "resource limit exceeded: programs waiting to run (limit 32)"
    alice = host.start(subject="alice")
    assert entered.acquire(timeout=10)
    release.set()
    assert alice.result(10).value == 1
    assert [a.result(10).value for a in [running, *queued]] == [1] * (1 + len(queued))


def test_a_queued_execution_answered_while_it_waited_never_starts(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(limits=Limits(max_concurrent_executions=1))
    entered, release = threading.Event(), threading.Event()

    @host.cm.capability("h.work", summary="Waits for the test.")
    def work() -> int:
        entered.set()
        release.wait(10)
        return 1

    first = host.start()
    wait_for(entered)
    queued = host.start()
    while not running_engine(host.cm).admission.waiting():
        threading.Event().wait(0.001)
    host.clock.advance(host.cm.limits.max_execution_seconds)
    assert error_of(queued) == "resource limit exceeded: execution time (limit 10 s)"
    release.set()
    first.exception(10)
    starts = [e for e in host.events if isinstance(e, ExecutionStarted)]
    assert len(starts) == 1  # the queued one never began


def test_an_execution_admitted_after_close_is_answered_canceled(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    host.cm.capability("h.work", summary="x")(one)
    running_engine(host.cm).admission.close()
    with pytest.raises(ExecutionCanceledError):
        host.cm.execute(SOURCE, subject="a")


def test_a_hung_handler_holds_no_slot() -> None:
    """The one slot is free again once the hung program is answered: the next program
    runs while the handler still hangs."""
    clock = ManualClock()
    limits = Limits(max_concurrent_executions=1, max_execution_seconds=1)
    with ThreadPoolExecutor(2) as callers, hanging(limits=limits, clock=clock) as host:
        hung = callers.submit(host.cm.execute, P + "    return h.hang()", subject="a")
        assert host.entered.wait(GUARD)
        clock.advance(1)
        assert (
            str(hung.exception(GUARD))
            == "resource limit exceeded: execution time (limit 1 s) at <codemode>:2:12"
        )
        next_one = callers.submit(host.cm.execute, P + "    return 1", subject="a")
        assert next_one.result(GUARD).value == 1
        assert not host.returned.is_set()


def test_close_does_not_wait_on_host_code() -> None:
    """close() returns, and the caller is answered, while the handler still hangs (the
    clock never moves: no deadline ends it)."""
    with hanging(limits=Limits(max_execution_seconds=5), clock=ManualClock()) as host:
        outcome = close_while_running(host.cm, P + "    return h.hang()", host.entered)
        assert not host.returned.is_set()
    assert outcome == ["execution canceled"]
