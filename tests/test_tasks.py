"""Tasks: a program started as a task runs to its end beyond its request, reads the same
from any replica, is cancelled from any replica, and reads as lost once its owner is gone."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import anyio
import pytest

from codemode import (
    CodeMode,
    CodeModeError,
    ExecutionResult,
    Limits,
    ResourceLimitError,
    SessionBusyError,
)
from codemode.authz import AllowAll
from codemode.continuations import TASK_LOST, MemoryStore, RedisStore, Store
from codemode.errors import TaskNotFoundError
from codemode.tasks import COMPLETED, Tasks, TaskView
from codemode.testing import ManualClock
from tests.approvals.host import DELETE_TWO, build

KEY = "k" * 32
SOURCE = "def main():\n    return 1\n"
WAITS = "def main():\n    jobs.step()\n    return jobs.wait()\n"
pytestmark = pytest.mark.anyio
MADE: list[CodeMode] = []


@pytest.fixture(autouse=True)
def closed() -> Iterator[None]:
    """Every CodeMode a test made is closed after it (its workers stop)."""
    yield
    while MADE:
        MADE.pop().close()


def render(outcome: ExecutionResult | CodeModeError) -> bytes:
    """A reply as an adapter would render it (opaque to `Tasks`)."""
    if isinstance(outcome, ExecutionResult):
        return json.dumps({"value": outcome.value}).encode()
    return json.dumps({"error": outcome.sentinel}).encode()


def make(
    store: Store | None = None, clock: ManualClock | None = None, limits: Limits | None = None
) -> tuple[CodeMode, threading.Event, threading.Event]:
    """A CodeMode on the real sandbox whose `jobs.wait` waits for the test (`go`) once
    a program called it (`entered`)."""
    clock = clock or ManualClock()
    cm = CodeMode(
        authorizer=AllowAll(),
        clock=clock,
        store=store or MemoryStore(clock.now),
        limits=limits,
        request_state_key=KEY,
    )
    MADE.append(cm)
    entered, go = threading.Event(), threading.Event()

    @cm.capability("jobs.step", summary="Do nothing.")
    def step() -> int:
        return 0

    @cm.capability("jobs.wait", summary="Wait for the test.")
    def wait() -> int:
        entered.set()
        go.wait(20)
        return 2

    return cm, entered, go


@asynccontextmanager
async def serving(cm: CodeMode, heartbeat: float = 0.02) -> AsyncIterator[Tasks]:
    tasks = Tasks(cm, heartbeat_seconds=heartbeat)
    async with tasks.running():
        yield tasks


async def settled(tasks: Tasks, task_id: str, subject: str = "alice") -> TaskView:
    """The task once it left `working`."""
    with anyio.fail_after(20):
        while True:
            view = await tasks.get(task_id, subject=subject)
            if view.status != "working":
                return view
            await anyio.sleep(0.01)


async def until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(20):
        while not check():
            await anyio.sleep(0.01)


async def start(tasks: Tasks, source: str = WAITS, subject: str = "alice") -> TaskView:
    return await tasks.start(source, subject=subject, session=None, render=render, pausable=False)


async def test_a_task_runs_to_its_end_and_its_record_holds_the_reply() -> None:
    cm, _, _ = make()
    async with serving(cm) as tasks:
        view = await start(tasks, SOURCE)
        assert view.status == "working"
        assert view.reply is None
        done = await settled(tasks, view.task_id)
    assert (done.status, done.message, done.reply) == ("completed", COMPLETED, b'{"value": 1}')


async def test_another_subjects_task_and_a_made_up_id_read_the_same() -> None:
    cm, _, _ = make()
    async with serving(cm) as tasks:
        view = await start(tasks, SOURCE)
        await settled(tasks, view.task_id)
        for task_id, subject in ((view.task_id, "bob"), ("t-" + "A" * 22, "alice"), ("x", "alice")):
            with pytest.raises(TaskNotFoundError) as caught:
                await tasks.get(task_id, subject=subject)
            assert str(caught.value) == "task not found"
            with pytest.raises(TaskNotFoundError):
                await tasks.cancel(task_id, subject=subject)


async def test_a_subject_runs_at_most_its_bound_of_tasks() -> None:
    cm, _, go = make(limits=Limits(max_tasks_per_subject=1))
    async with serving(cm) as tasks:
        first = await start(tasks)
        with pytest.raises(ResourceLimitError) as caught:
            await start(tasks)
        assert str(caught.value) == "resource limit exceeded: running tasks (limit 1)"
        other = await start(tasks, SOURCE, subject="bob")
        assert (await settled(tasks, other.task_id, "bob")).status == "completed"
        go.set()
        assert (await settled(tasks, first.task_id)).status == "completed"
        again = await start(tasks, SOURCE)
        assert (await settled(tasks, again.task_id)).status == "completed"


async def test_a_cancel_on_the_owner_ends_the_task_cancelled() -> None:
    cm, entered, go = make()
    async with serving(cm) as tasks:
        view = await start(tasks)
        await until(entered.is_set)
        await tasks.cancel(view.task_id, subject="alice")
        done = await settled(tasks, view.task_id)
        go.set()
        await tasks.cancel(view.task_id, subject="alice")  # ended: left as it is
        assert (await tasks.get(view.task_id, subject="alice")).status == "cancelled"
    assert (done.status, done.message) == ("cancelled", "execution canceled")
    assert done.reply == b'{"error": "execution canceled"}'


async def cancelled_from_another_replica(store: Store) -> None:
    clock = ManualClock()
    owner, entered, go = make(store, clock)
    reader, _, _ = make(store, clock)
    async with serving(owner) as running, serving(reader) as other:
        view = await start(running)
        await until(entered.is_set)
        assert (await other.get(view.task_id, subject="alice")).status == "working"
        await other.cancel(view.task_id, subject="alice")
        done = await settled(other, view.task_id)
        go.set()
    assert done.status == "cancelled"


async def test_a_cancel_from_another_replica_reaches_the_owner() -> None:
    await cancelled_from_another_replica(MemoryStore())


async def test_a_cancel_from_another_replica_reaches_the_owner_over_redis(redis_url: str) -> None:
    await cancelled_from_another_replica(RedisStore(redis_url))


async def test_a_task_whose_owner_stopped_beating_reads_lost_and_its_owner_cannot_overwrite() -> (
    None
):
    clock = ManualClock()
    store = MemoryStore(clock.now)
    owner, entered, go = make(store, clock)
    reader, _, _ = make(store, clock)
    async with serving(owner, heartbeat=3600) as running, serving(reader) as other:
        view = await start(running)
        await until(entered.is_set)
        assert (await other.get(view.task_id, subject="alice")).status == "working"
        clock.skip(6)  # past the 5 s lease: the owner never renewed it
        lost = await other.get(view.task_id, subject="alice")
        assert (lost.status, lost.message) == ("failed", TASK_LOST)
        go.set()
        await anyio.sleep(0.3)
        after = await other.get(view.task_id, subject="alice")
    assert (after.status, after.message, after.reply) == ("failed", TASK_LOST, None)


async def test_a_replica_that_stops_marks_its_runs_lost() -> None:
    cm, entered, go = make()
    async with serving(cm) as tasks:
        view = await start(tasks)
        await until(entered.is_set)
    go.set()
    reader = Tasks(cm)
    lost = await reader.get(view.task_id, subject="alice")
    assert (lost.status, lost.message) == ("failed", TASK_LOST)


async def test_a_task_over_redis_completes(redis_url: str) -> None:
    cm, _, _ = make(RedisStore(redis_url))
    async with serving(cm) as tasks:
        view = await start(tasks, SOURCE)
        done = await settled(tasks, view.task_id)
    assert (done.status, done.reply) == ("completed", b'{"value": 1}')


async def test_a_task_holds_its_session_as_long_as_its_longer_bound() -> None:
    clock = ManualClock()
    cm, entered, go = make(clock=clock, limits=Limits(max_execution_seconds=1))
    handle = cm.execute(SOURCE, subject="alice", session="new").session
    async with serving(cm) as tasks:
        view = await tasks.start(
            WAITS, subject="alice", session=handle, render=render, pausable=False
        )
        await until(entered.is_set)
        for _ in range(4):  # past an ordinary run's lease (1 s + grace), within a call's 10 s
            clock.skip(2)
            await anyio.sleep(0.1)  # the owner renews the task's own lease meanwhile
        with pytest.raises(SessionBusyError):
            await cm.execute_async(SOURCE, subject="alice", session=handle)
        go.set()
        done = await settled(tasks, view.task_id)
        assert (done.status, done.reply) == ("completed", b'{"value": 2}')


async def test_a_task_waits_for_a_person_and_goes_on_with_their_answers() -> None:
    cm = build()
    MADE.append(cm)
    async with serving(cm) as tasks:
        view = await tasks.start(
            DELETE_TWO, subject="alice", session=None, render=render, pausable=True
        )
        waits = await settled(tasks, view.task_id)
        assert (waits.status, waits.message) == (
            "input_required",
            "waiting for a person to approve 1 call",
        )
        with pytest.raises(TaskNotFoundError):
            await tasks.update(view.task_id, subject="bob", answers={}, render=render)
        first = waits.requests[0]
        await tasks.update(
            view.task_id, subject="alice", answers={first.key: True, "made-up": True}, render=render
        )
        again = await settled(tasks, view.task_id)
        assert again.status == "input_required"
        assert again.requests[0].key != first.key
        await tasks.update(view.task_id, subject="alice", answers={}, render=render)
        done = await settled(tasks, view.task_id)
    assert done.status == "completed"
    assert (
        done.reply
        == json.dumps(
            {"value": [True, "approval declined: a person declined this call; do not retry it"]}
        ).encode()
    )
