"""The engine's threads: a subject holds at most its share of them, in use or left
running in host code past its deadline, so a subject whose handlers hang cannot take the
threads another subject needs."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll
from codemode.errors import InternalError, ResourceLimitError
from codemode.events import Event, HostCodeAbandoned
from codemode.limits import LimitKind
from codemode.runtime.pool import WorkPool
from codemode.testing import ManualClock, ScriptedProgram, running_engine, started_engine
from tests.conftest import GUARD, eventually, run_error
from tests.runtime.scripted import Host, Program, calls_work, error_of

P = "def main():\n"


def test_a_subject_past_its_share_waits_for_its_own_threads_while_another_runs() -> None:
    """Two threads, a share of one: a's second job waits behind its first while b's runs
    at once, and runs when a's first returns."""
    pool = WorkPool(2)
    order: list[str] = []
    release, a2_ran, b_ran = threading.Event(), threading.Event(), threading.Event()

    def a2() -> None:
        order.append("a2")
        a2_ran.set()

    def b() -> None:
        order.append("b")
        b_ran.set()

    try:
        pool.submit("a", lambda: release.wait(GUARD))
        second = pool.submit("a", a2)
        pool.submit("b", b)
        assert b_ran.wait(GUARD)
        assert not second.future.done()  # a holds its one thread
        order.append("a1 returns")
        release.set()
        assert a2_ran.wait(GUARD)
        assert order == ["b", "a1 returns", "a2"]
    finally:
        release.set()
        pool.close()


def test_an_exempt_job_runs_past_its_subjects_share() -> None:
    """Cleanup never waits behind the subject's own stuck host code."""
    pool = WorkPool(2)
    release, ran = threading.Event(), threading.Event()
    try:
        pool.submit("a", lambda: release.wait(GUARD))
        pool.submit("a", ran.set, exempt=True)
        assert ran.wait(GUARD)
    finally:
        release.set()
        pool.close()


def test_an_abandoned_job_counts_against_its_subject_until_it_returns() -> None:
    pool = WorkPool(4)
    release = threading.Event()
    try:
        job = pool.submit("a", lambda: release.wait(GUARD))
        assert eventually(lambda: job.thread is not None)
        pool.abandon(job)
        pool.abandon(job)  # once is enough
        assert (pool.abandoned("a"), pool.abandoned("b"), pool.abandoned()) == (1, 0, 1)
        release.set()
        assert job.future.result(GUARD) is True
        assert eventually(lambda: pool.abandoned() == 0)
    finally:
        release.set()
        pool.close()


def test_a_job_not_started_yet_is_never_counted_as_abandoned() -> None:
    pool = WorkPool(2)
    release = threading.Event()
    try:
        pool.submit("a", lambda: release.wait(GUARD))
        waiting = pool.submit("a", lambda: None)  # behind a's share
        pool.abandon(waiting)
        assert pool.abandoned() == 0
    finally:
        release.set()
        pool.close()


def test_close_cancels_the_jobs_not_started_and_refuses_new_ones() -> None:
    """Threads end when their job returns: close never waits for host code."""
    pool = WorkPool(2)
    release = threading.Event()
    try:
        running = pool.submit("a", lambda: release.wait(GUARD))
        waiting = pool.submit("a", lambda: None)
        assert eventually(lambda: running.thread is not None)
        pool.close()
        assert waiting.future.cancelled()
        assert pool.submit("b", lambda: None).future.cancelled()
        assert not running.future.done()
        release.set()
        assert running.future.result(GUARD) is True
    finally:
        release.set()
        pool.close()


def test_two_jobs_submitted_at_once_both_find_a_thread() -> None:
    pool = WorkPool(4)
    blocker, both = threading.Event(), threading.Semaphore(0)
    try:
        pool.submit("a", lambda: blocker.wait(10))
        for _ in range(2):
            pool.submit("b", both.release)
        assert both.acquire(timeout=10) and both.acquire(timeout=10)
    finally:
        blocker.set()
        pool.close()


def test_a_subject_whose_calls_were_left_running_is_refused_and_others_are_answered(
    make_host: Callable[..., Host],
) -> None:
    """The noisy neighbour: mallory's handler outlives its budget every time. Her stuck
    threads count against her share of the pool; past it her programs are refused with
    the documented limit, while alice is answered."""
    host = make_host()
    release = threading.Event()
    entered = threading.Semaphore(0)

    @host.cm.capability("h.work", summary="Answers at once.")
    def work() -> int:
        return 1

    @host.cm.capability("h.hang", summary="Hangs.", timeout=1)
    def hang() -> int:
        entered.release()
        release.wait(20)
        return 1

    def hangs(program: ScriptedProgram) -> Program:
        return (yield program.call("h.hang", line=2))

    engine = running_engine(host.cm)
    share = engine.pool.share
    hang_source = "def main():\n    return h.hang()\n"
    host.cm.sandbox.script = hangs  # type: ignore[union-attr]
    try:
        for _ in range(share // 4):  # four at a time, each past its budget
            answers = [host.start(hang_source, subject="mallory") for _ in range(4)]
            for _ in answers:
                assert entered.acquire(timeout=10)
            host.clock.advance(1)
            for answer in answers:
                assert error_of(answer).startswith("resource limit exceeded: capability time")
        assert engine.pool.abandoned("mallory") == share
        refused = host.start(hang_source, subject="mallory")
        assert error_of(refused) == (
            f"resource limit exceeded: calls left running past their deadline (limit {share})"
        )
        error = refused.exception()
        assert isinstance(error, ResourceLimitError)
        assert error.kind == LimitKind.CALLS_LEFT_RUNNING
        host.cm.sandbox.script = calls_work  # type: ignore[union-attr]
        assert host.start(subject="alice").result(10).value == 1
    finally:
        release.set()


def test_a_refusal_when_every_thread_is_stuck_is_internal(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    pool = running_engine(host.cm).pool
    release = threading.Event()
    subjects = [f"x{n // pool.share}" for n in range(pool.size)]  # each within its share
    jobs = [pool.submit(subject, lambda: release.wait(20)) for subject in subjects]
    try:
        assert eventually(lambda: all(job.thread is not None for job in jobs), 10)
        for job in jobs:  # each left running in host code past its answer
            pool.abandon(job)
        assert pool.abandoned() == pool.size
        assert isinstance(host.start().exception(10), InternalError)
    finally:
        release.set()


def test_gathered_calls_never_wait_on_a_pool_they_occupy() -> None:
    with CodeMode(authorizer=AllowAll(), limits=Limits(max_capability_seconds=1)) as app:

        @app.capability("h.wait", summary="Waits 50 ms on this thread.")
        def wait() -> int:
            time.sleep(0.05)
            return 1

        source = (
            "import asyncio\nasync def main():\n"
            "    return sum(await asyncio.gather(*[h.wait() for _ in range(40)]))"
        )
        assert app.execute(source, subject="a").value == 40


def test_stuck_handlers_never_use_up_the_workers() -> None:
    """Three programs each leave a handler stuck past its budget; the next one runs while
    all three still hang."""
    release, entered = threading.Event(), threading.Semaphore(0)
    returned: list[int] = []
    clock = ManualClock()
    limits = Limits(
        max_concurrent_executions=1, max_execution_seconds=3, max_capability_seconds=0.3
    )
    with (
        ThreadPoolExecutor(1) as callers,
        CodeMode(authorizer=AllowAll(), limits=limits, clock=clock) as app,
    ):

        @app.capability("t.hang", summary="s")
        def hang() -> int:
            entered.release()
            release.wait(GUARD)
            returned.append(1)
            return 1

        try:
            for _ in range(3):  # more than the concurrency allows, each left stuck
                stuck = callers.submit(app.execute, P + "    return t.hang()", subject="a")
                assert entered.acquire(timeout=GUARD)
                clock.advance(0.3)
                assert str(stuck.exception(GUARD)) == (
                    "resource limit exceeded: capability time (limit 0.3 s) at <codemode>:2:12"
                )
            next_one = callers.submit(app.execute, P + "    return 1", subject="a")
            assert next_one.result(GUARD).value == 1
            assert returned == []
        finally:
            release.set()


def test_one_program_cannot_use_up_the_engine_for_others() -> None:
    release = threading.Event()
    with CodeMode(authorizer=AllowAll(), limits=Limits(max_capability_seconds=0.3)) as app:

        @app.capability("net.fetch", summary="Fetches.")
        def fetch(*, url: str) -> str:
            release.wait(20)
            return ""

        source = (
            "import asyncio\nasync def main():\n"
            "    return await asyncio.gather(*[net.fetch(url=str(i)) for i in range(64)])"
        )
        assert str(run_error(app, source)) == (
            "resource limit exceeded: capability time (limit 0.3 s) at <codemode>:3:35"
        )
        time.sleep(0.3)
        assert app.execute(P + "    return 1", subject="victim").value == 1
        release.set()


@pytest.mark.anyio
async def test_a_cancelled_caller_leaves_a_stuck_driver_counted() -> None:
    release = threading.Event()
    events: list[Event] = []
    with CodeMode(authorizer=AllowAll(), on_event=events.append) as app:

        @app.capability("net.fetch", summary="Hangs.")
        def fetch() -> int:
            release.wait(20)
            return 1

        task = asyncio.ensure_future(app.execute_async(P + "    return net.fetch()", subject="a"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        engine = started_engine(app)
        assert engine is not None and engine.pool.abandoned() == 1
        for _ in range(50):
            if any(type(e).__name__ == "HostCodeAbandoned" for e in events):
                break
            await asyncio.sleep(0.02)
        assert [(e.what, e.reason) for e in events if isinstance(e, HostCodeAbandoned)] == [
            ("the driver", "cancelled")
        ]
        release.set()
