"""The runtime core on a scripted sandbox and a hand-driven clock: the order of events,
never elapsed time, so none of these can flake on a loaded machine."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.clock import COMPACT_AFTER, SystemClock
from codemode.errors import ExecutionCanceledError, InternalError, ResourceLimitError, Where
from codemode.events import Event, ExecutionStarted, HostCodeAbandoned
from codemode.limits import LimitKind
from codemode.runtime.deadline import Deadline
from codemode.runtime.pool import WorkPool
from codemode.testing import ManualClock, ScriptedProgram, ScriptedSandbox, running_engine
from tests.conftest import eventually

SOURCE = "def main():\n    return h.work()\n"
ASYNC_SOURCE = "import asyncio\nasync def main():\n    return await h.work()\n"
Program = Generator[Any, Any, Any]


def calls_work(program: ScriptedProgram) -> Program:
    return (yield program.call("h.work", line=2))


def calls_work_async(program: ScriptedProgram) -> Program:
    return (yield program.gather(program.call("h.work", line=3)))[0]


class Host:
    """A CodeMode on a scripted sandbox and a manual clock, with callers on threads."""

    def __init__(self, script: Any = calls_work, **options: Any) -> None:
        self.clock = ManualClock()
        self.events: list[Event] = []
        self.cm = CodeMode(
            authorizer=options.pop("authorizer", AllowAll()),
            sandbox=ScriptedSandbox(script),
            clock=self.clock,
            on_event=self.events.append,
            **options,
        )
        self.callers = concurrent.futures.ThreadPoolExecutor(80)

    def start(self, source: str = SOURCE, subject: str = "a") -> concurrent.futures.Future[Any]:
        return self.callers.submit(self.cm.execute, source, subject=subject)

    def close(self) -> None:
        self.cm.close()
        self.callers.shutdown(wait=True)


@pytest.fixture
def make_host() -> Iterator[Callable[..., Host]]:
    made: list[Host] = []

    def make(*args: Any, **options: Any) -> Host:
        made.append(Host(*args, **options))
        return made[-1]

    yield make
    for host in made:
        host.close()


def error_of(future: concurrent.futures.Future[Any]) -> str:
    error = future.exception(timeout=10)
    assert isinstance(error, CodeModeError), error
    return str(error)


def one() -> int:
    return 1


def wait_for(event: threading.Event) -> None:
    assert event.wait(10), "the step the test waits for never came"


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


# -- the deadline alone ------------------------------------------------------------------

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


def test_cancelled_timers_do_not_pile_up_in_the_clock() -> None:
    clock = SystemClock()
    try:
        later = clock.now() + 3600
        for n in range(5000):
            clock.call_at(later + n, lambda: None).cancel()
        assert len(clock.timers()) <= COMPACT_AFTER + 1
        kept = clock.call_at(later, lambda: None)
        assert not kept.cancelled and any(timer is kept for timer in clock.timers())
    finally:
        clock.close()


def test_a_handler_never_runs_once_its_authorization_outlived_the_execution(
    make_host: Callable[..., Host],
) -> None:
    entered, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def slow(request: AuthorizationRequest) -> None:
        entered.set()
        release.wait(10)

    host = make_host(authorizer=slow)

    @host.cm.capability("h.work", summary="Has an effect.")
    def work() -> int:
        ran.append("effect")
        return 1

    answer = host.start()
    wait_for(entered)
    host.clock.advance(host.cm.limits.max_execution_seconds)
    assert error_of(answer) == "resource limit exceeded: execution time (limit 10 s)"
    release.set()
    assert eventually(lambda: any(type(e).__name__ == "CallFailed" for e in host.events), 10)
    assert ran == []


@pytest.mark.parametrize("exc", [GeneratorExit, asyncio.CancelledError])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_handler_raising_an_exit_of_its_own_is_a_failed_call(
    make_host: Callable[..., Host], kind: str, exc: type[BaseException]
) -> None:
    host = make_host()

    def sync_work() -> int:
        raise exc()

    async def async_work() -> int:
        raise exc()

    host.cm.capability("h.work", summary="Raises.")(sync_work if kind == "sync" else async_work)
    assert error_of(host.start()) == "capability failed"


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


def test_an_execution_admitted_after_close_is_answered_canceled(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    host.cm.capability("h.work", summary="x")(one)
    running_engine(host.cm).admission.close()
    with pytest.raises(ExecutionCanceledError):
        host.cm.execute(SOURCE, subject="a")
