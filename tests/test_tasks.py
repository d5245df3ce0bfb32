"""Tasks: a program started as a task runs to its end beyond its request, reads the same
from any replica, is cancelled from any replica (its reply listing the calls it made),
reads as lost once its owner is gone, beats on the CodeMode's clock, and shows nothing of
the host's in any state."""

from __future__ import annotations

import contextvars
import json
import logging
import re
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
from codemode.authz import AllowAll, AuthorizationRequest, Authorizer, RequireApproval
from codemode.continuations import (
    KEY_VARIABLE,
    TASK_LOST,
    MemoryStore,
    RedisStore,
    Sealer,
    Store,
    StoreReplayGuard,
    TaskBook,
    TaskRecord,
    record_bound,
)
from codemode.errors import TaskNotFoundError
from codemode.mcp import tools
from codemode.payloads import execute_payload
from codemode.tasks import COMPLETED, Tasks, TaskView
from codemode.testing import ManualClock
from tests.approvals.host import DELETE_TWO, build
from tests.conftest import assert_no_canary, build_host, policy

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
    store: Store | None = None,
    clock: ManualClock | None = None,
    limits: Limits | None = None,
    authorizer: Authorizer | None = None,
) -> tuple[CodeMode, threading.Event, threading.Event]:
    """A CodeMode on the real sandbox whose `jobs.wait` waits for the test (`go`) once
    a program called it (`entered`); replicas on one store share its replay guard too."""
    clock = clock or ManualClock()
    store = store or MemoryStore(clock.now)
    cm = CodeMode(
        authorizer=authorizer or AllowAll(),
        clock=clock,
        store=store,
        limits=limits,
        request_state_key=KEY,
        replay_guard=StoreReplayGuard(store),
    )
    MADE.append(cm)
    entered, go = threading.Event(), threading.Event()

    @cm.capability("jobs.step", summary="Do nothing.")
    def step(i: int = 0) -> int:
        return i

    @cm.capability("jobs.wait", summary="Wait for the test.")
    def wait() -> int:
        entered.set()
        go.wait(20)
        return 2

    return cm, entered, go


@asynccontextmanager
async def serving(cm: CodeMode, heartbeat: float = 1.0, lease: float = 5.0) -> AsyncIterator[Tasks]:
    """`cm`'s tasks, beating every `heartbeat` seconds of its clock (a ManualClock: only
    when the test moves it)."""
    tasks = Tasks(cm, heartbeat_seconds=heartbeat, lease_seconds=lease)
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
                await tasks.cancel(task_id, subject=subject, render=render)


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


async def test_a_subjects_tasks_by_default_leave_it_slots_for_ordinary_programs() -> None:
    """As many tasks as a subject may run, all waiting, hold fewer than its share of the
    execution slots: its ordinary program still runs at once."""
    cm, entered, go = make()
    assert cm.limits.max_tasks_per_subject < cm.limits.max_concurrent_executions // 2
    async with serving(cm) as tasks:
        started = [await start(tasks) for _ in range(cm.limits.max_tasks_per_subject)]
        await until(entered.is_set)
        with pytest.raises(ResourceLimitError) as caught:
            await start(tasks)
        assert str(caught.value) == "resource limit exceeded: running tasks (limit 2)"
        with anyio.fail_after(10):
            ordinary = await cm.execute_async(SOURCE, subject="alice")
        assert ordinary.value == 1
        go.set()
        for view in started:
            assert (await settled(tasks, view.task_id)).status == "completed"


async def test_a_cancel_on_the_owner_ends_the_task_cancelled() -> None:
    cm, entered, go = make()
    async with serving(cm) as tasks:
        view = await start(tasks)
        await until(entered.is_set)
        await tasks.cancel(view.task_id, subject="alice", render=render)
        done = await settled(tasks, view.task_id)
        go.set()
        await tasks.cancel(view.task_id, subject="alice", render=render)  # ended: left as it is
        assert (await tasks.get(view.task_id, subject="alice")).status == "cancelled"
    assert (done.status, done.message) == ("cancelled", "execution canceled")
    assert done.reply == b'{"error": "execution canceled"}'


async def cancelled_from_another_replica(store: Store, clock: ManualClock) -> None:
    owner, entered, go = make(store, clock)
    reader, _, _ = make(store, clock)
    async with serving(owner) as running, serving(reader) as other:
        view = await start(running)
        await until(entered.is_set)
        assert (await other.get(view.task_id, subject="alice")).status == "working"
        await other.cancel(view.task_id, subject="alice", render=render)
        clock.advance(1.0)  # one beat of the owner: it reads the cancel asked for
        done = await settled(other, view.task_id)
        go.set()
    assert done.status == "cancelled"


async def test_a_cancel_from_another_replica_reaches_the_owner() -> None:
    clock = ManualClock()
    await cancelled_from_another_replica(MemoryStore(clock.now), clock)


async def test_a_cancel_from_another_replica_reaches_the_owner_over_redis(redis_url: str) -> None:
    await cancelled_from_another_replica(RedisStore(redis_url), ManualClock())


async def test_a_task_whose_owner_stopped_beating_reads_lost_and_its_owner_cannot_overwrite(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    store = MemoryStore(clock.now)
    owner, entered, go = make(store, clock)
    reader, _, _ = make(store, clock)
    caplog.set_level(logging.INFO, logger="codemode")
    async with serving(owner, heartbeat=3600) as running, serving(reader) as other:
        view = await start(running)
        await until(entered.is_set)
        assert (await other.get(view.task_id, subject="alice")).status == "working"
        clock.skip(6)  # past the 5 s lease: the owner never renewed it
        lost = await other.get(view.task_id, subject="alice")
        assert (lost.status, lost.message) == ("failed", TASK_LOST)
        go.set()
        # The owner's run ended and tried to write its end: its one line is logged after.
        await until(lambda: any(r.getMessage().startswith("task ") for r in caplog.records))
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


async def test_a_tasks_end_is_one_info_line_with_its_subject_time_and_outcome(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As a tool call's line: `task subject=alice 0.0 ms completed` (`cancelled`, `lost`
    for one its server stopped running); never the program or anything it said."""
    cm, entered, go = make()
    with caplog.at_level(logging.INFO, logger="codemode"):
        async with serving(cm) as tasks:
            done = await start(tasks, "def main():\n    return 'canary-in-the-reply'\n")
            await settled(tasks, done.task_id)
            cancelled = await start(tasks)
            await until(entered.is_set)
            await tasks.cancel(cancelled.task_id, subject="alice", render=render)
            await settled(tasks, cancelled.task_id)
            entered.clear()
            await start(tasks, subject="bob")
            await until(entered.is_set)
        go.set()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("task ")]
    assert [re.sub(r"[\d.]+ ms", "N ms", line) for line in lines] == [
        "task subject=alice N ms completed",
        "task subject=alice N ms cancelled",
        "task subject=bob N ms lost",
    ]
    assert "canary" not in caplog.text


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
            clock.advance(2)  # the owner's beat renews the task's own lease meanwhile
            await anyio.sleep(0.1)
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


THREE = """def main():
    for i in range(3):
        jobs.step(i=i)
    return jobs.wait()
"""
"""A program that makes 3 calls, then waits in a fourth for the test."""


def replied(outcome: ExecutionResult | CodeModeError) -> bytes:
    """The reply exactly as the MCP adapter renders it (`CallToolResult`, dumped)."""
    if isinstance(outcome, ExecutionResult):
        return json.dumps(tools.ok(execute_payload(outcome))).encode()
    return json.dumps(tools.failed(outcome)).encode()


def text_of(reply: bytes | None) -> str:
    """The one text item of a rendered reply (what a client that shows text shows)."""
    assert reply is not None
    content = json.loads(reply)["content"]
    assert len(content) == 1
    return str(content[0]["text"])


async def cancelled_after_three_calls(store: Store | None, remotely: bool) -> TaskView:
    clock = ManualClock()
    store = store or MemoryStore(clock.now)
    owner, entered, go = make(store, clock)
    reader, _, _ = make(store, clock)
    async with serving(owner) as running, serving(reader) as other:
        view = await running.start(
            THREE, subject="alice", session=None, render=replied, pausable=False
        )
        await until(entered.is_set)
        if remotely:
            await other.cancel(view.task_id, subject="alice", render=replied)  # the cancel key
            clock.advance(1.0)  # the owner's next beat reads it
        else:
            await running.cancel(view.task_id, subject="alice", render=replied)
        done = await settled(other, view.task_id)
        go.set()
    return done


CANCELLED_AFTER_THREE = (
    "execution canceled\n"
    "After 3 completed capability calls: jobs.step(i=0) (line 3), jobs.step(i=1) (line 3), "
    "jobs.step(i=2) (line 3); jobs.step may have had effects: the host declares none."
)


@pytest.mark.parametrize("remotely", [False, True], ids=["on-the-owner", "by-the-cancel-key"])
async def test_a_cancelled_tasks_reply_lists_the_calls_it_made(remotely: bool) -> None:
    done = await cancelled_after_three_calls(None, remotely)
    assert (done.status, done.message) == ("cancelled", "execution canceled")
    assert json.loads(done.reply or b"")["isError"] is True
    assert text_of(done.reply) == CANCELLED_AFTER_THREE


async def test_a_task_cancelled_over_redis_lists_the_calls_it_made(redis_url: str) -> None:
    done = await cancelled_after_three_calls(RedisStore(redis_url), remotely=True)
    assert (done.status, text_of(done.reply)) == ("cancelled", CANCELLED_AFTER_THREE)


class Recorded(MemoryStore):
    """A memory store on a ManualClock that notes, in order, what a task's owner and its
    readers do to its lease and its cancel key (the record itself is sealed)."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock.now)
        self.events: list[str] = []

    async def put(
        self,
        key: str,
        value: bytes,
        seconds: float,
        *,
        holder: tuple[str, str] | None = None,
        pinned: bool = False,
    ) -> bool:
        record = holder is not None and holder[0] == key + ":lease"  # a task's record
        if record:
            await self.writing_record()
        written = await super().put(key, value, seconds, holder=holder, pinned=pinned)
        if key.endswith(":lease"):
            self.events.append("renewed" if written else "renewal refused")
        elif key.endswith(":cancel"):
            self.events.append("cancel asked")
        if record and written:
            self.wrote_record(key, value)
        return written

    async def writing_record(self) -> None:
        """Before a task's record is written (a subclass may hold the writer here)."""

    def wrote_record(self, key: str, value: bytes) -> None:
        """After a task's record was written under `key` (a subclass may open it)."""

    async def get(self, key: str) -> bytes | None:
        value = await super().get(key)
        if key.endswith(":cancel") and value is not None:
            self.events.append("cancel noticed")
        return value


BEAT, LEASE = 30.0, 60.0
"""The owner's beat and lease in the tests of its beat, on the ManualClock: a beat run
on any other clock would not come within the test's guard."""


def beating() -> tuple[ManualClock, Recorded, CodeMode, CodeMode, threading.Event, threading.Event]:
    """An owner and a reader on one recorded store and one ManualClock; a call may wait
    longer than the beats the tests make."""
    clock = ManualClock()
    store = Recorded(clock)
    limits = Limits(max_capability_seconds=600)
    owner, entered, go = make(store, clock, limits)
    reader, _, _ = make(store, clock, limits)
    return clock, store, owner, reader, entered, go


async def test_the_owner_beats_on_the_codemodes_clock_and_cancels_on_the_next_beat() -> None:
    clock, store, owner, reader, entered, go = beating()
    async with (
        serving(owner, BEAT, LEASE) as running,
        serving(reader, BEAT, LEASE) as other,
    ):
        view = await start(running)
        await until(entered.is_set)
        assert (await other.get(view.task_id, subject="alice")).message == ""
        for beat in range(1, 4):  # 90 s on: past the first lease, renewed on each beat
            clock.advance(BEAT)
            await until(lambda: store.events.count("renewed") == beat)  # noqa: B023
        working = await other.get(view.task_id, subject="alice")
        assert (working.status, working.message) == ("working", "1 call · 0.0 s · jobs.step")
        await other.cancel(view.task_id, subject="alice", render=render)
        assert (await other.get(view.task_id, subject="alice")).status == "working"
        clock.advance(BEAT)
        done = await settled(other, view.task_id)
        go.set()
    assert done.status == "cancelled"
    assert store.events == [
        "renewed",
        "renewed",
        "renewed",
        "cancel asked",
        "renewed",
        "cancel noticed",
    ]


class Held(Recorded):
    """A recorded store whose record writes, once the test sets `gate`, wait for it: the
    test holds a beat mid-work (a slow store)."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.gate: anyio.Event | None = None
        self.waiting = anyio.Event()

    async def writing_record(self) -> None:
        if self.gate is not None:
            self.waiting.set()
            await self.gate.wait()


async def test_the_next_beat_is_set_before_a_beats_work() -> None:
    """The clock moved on while a beat writes (its store slow) rings the next beat: a
    beat's work delays none after it, and a test that moves the clock as soon as it saw
    a renewal never moves it past a beat not yet set."""
    clock = ManualClock()
    store = Held(clock)
    owner, entered, go = make(store, clock, Limits(max_capability_seconds=600))
    async with serving(owner, BEAT, LEASE) as running:
        view = await start(running)
        await until(entered.is_set)
        store.gate = anyio.Event()
        clock.advance(BEAT)  # the first beat renews, then writes the note: held
        with anyio.fail_after(20):
            await store.waiting.wait()
        clock.advance(BEAT)  # while it writes
        store.gate.set()
        await until(lambda: store.events.count("renewed") == 2)
        go.set()
        assert (await settled(running, view.task_id)).status == "completed"
    assert store.events == ["renewed", "renewed"]


async def test_a_tasks_status_message_shows_the_programs_own_numbers() -> None:
    """A rising `done` drives a notification's `progress`, but `statusMessage` is text
    alone: it carries the numbers, as a falling one's message does."""
    clock, store, owner, _, entered, go = beating()
    reports = "def main():\n    progress('half', done=10, total=40)\n    return jobs.wait()\n"
    async with serving(owner, BEAT, LEASE) as running:
        view = await start(running, reports)
        await until(entered.is_set)
        clock.advance(BEAT)
        await until(lambda: store.events.count("renewed") == 1)
        working = await running.get(view.task_id, subject="alice")
        go.set()
        assert (await settled(running, view.task_id)).status == "completed"
    assert (working.status, working.message) == ("working", "half (10/40)")


async def test_a_lost_task_is_marked_by_a_reader_and_its_owner_finds_out_on_its_next_beat() -> None:
    clock, store, owner, reader, entered, go = beating()
    async with (
        serving(owner, BEAT, LEASE) as running,
        serving(reader, BEAT, LEASE) as other,
    ):
        view = await start(running)
        await until(entered.is_set)
        clock.advance(BEAT)
        await until(lambda: store.events == ["renewed"])
        clock.skip(LEASE + 1)  # the owner's beat does not ring: as if its replica hung
        lost = await other.get(view.task_id, subject="alice")
        store.events.append("lost marked")
        clock.advance(BEAT)  # the beat it missed: its lease is gone, its run stops
        await until(lambda: "renewal refused" in store.events)
        go.set()
        after = await other.get(view.task_id, subject="alice")
    assert (lost.status, lost.message) == ("failed", TASK_LOST)
    assert store.events == ["renewed", "lost marked", "renewal refused"]
    assert (after.status, after.message, after.reply) == ("failed", TASK_LOST, None)


TRIES = """def main():
    seen = []
    for attempt in [records.fail, records.secret, records.flaky, records.badresult]:
        try:
            attempt()
        except Exception as e:
            seen.append(str(e))
            progress(str(e))
    print(seen)
    records.lookup(key="k")
    progress("saw " + str(seen))
    return {tail}
"""
"""A program that meets every canary of the host (a handler's error, an authorizer's
denial and failure, a result of the wrong type), reports what it saw, then ends as
`tail` makes it."""


def asking(request: AuthorizationRequest) -> RequireApproval | None:
    """The canary host's policy, and a person asked about `jobs.approve` (that message is
    for the person: it carries no canary)."""
    if request.capability_name == "jobs.approve":
        return RequireApproval("Approve the job?")
    policy(request)
    return None


def shows_nothing_of_the_hosts(view: TaskView) -> None:
    assert_no_canary(view.message, (view.reply or b"").decode(), repr(view.requests), repr(view))


async def test_no_task_shows_anything_of_the_hosts_in_any_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, KEY)  # one secret: a second replica reads the lost task
    cm = build_host()
    MADE.append(cm)
    holding: list[int] = []
    go = threading.Event()

    @cm.capability("jobs.hold", summary="Wait for the test.")
    def hold() -> int:
        holding.append(1)
        go.wait(20)
        return 1

    @cm.capability("jobs.approve", summary="Needs a person.")
    def approve() -> int:
        return 1

    cm.configure(authorizer=asking)

    async def begin(tasks: Tasks, tail: str, pausable: bool = False) -> str:
        source = TRIES.format(tail=tail)
        view = await tasks.start(
            source, subject="alice", session=None, render=replied, pausable=pausable
        )
        shows_nothing_of_the_hosts(view)
        return view.task_id

    seen: dict[str, TaskView] = {}
    try:
        async with serving(cm, heartbeat=0.02) as tasks:
            working = await begin(tasks, "jobs.hold()")
            with anyio.fail_after(20):  # the beat writes the program's last note
                while not (view := await tasks.get(working, subject="alice")).message.startswith(
                    "saw "
                ):
                    await anyio.sleep(0.01)
            seen["working"] = view
            await tasks.cancel(working, subject="alice", render=replied)
            seen["cancelled"] = await settled(tasks, working)
            asks = await begin(tasks, "jobs.approve()", pausable=True)
            seen["input_required"] = await settled(tasks, asks)
            fails = await begin(tasks, "records.fail()")
            seen["failed"] = await settled(tasks, fails)
            async with serving(cm, heartbeat=0.02) as stopping:
                doomed = await begin(stopping, "jobs.hold()")
                await until(lambda: len(holding) == 2)
            seen["lost"] = await tasks.get(doomed, subject="alice")
            with pytest.raises(CodeModeError) as short:
                await cm.execute_async(TRIES.format(tail="records.fail()"), subject="alice")
    finally:
        go.set()
    assert {name: view.status for name, view in seen.items()} == {
        "working": "working",
        "cancelled": "cancelled",
        "input_required": "input_required",
        "failed": "failed",
        "lost": "failed",
    }
    assert seen["lost"].message == TASK_LOST
    assert seen["input_required"].requests[0].message == "Approve the job?"
    assert text_of(seen["failed"].reply) == text_of(replied(short.value))
    for view in seen.values():
        shows_nothing_of_the_hosts(view)


def test_an_adapter_takes_what_it_needs_from_one_module_and_hosts_take_nothing() -> None:
    """What the MCP adapter builds on, pinned; serving wires tasks in, so the public API
    (`codemode`) names none of it."""
    import codemode
    import codemode.tasks

    assert codemode.tasks.__all__ == [
        "COMPLETED",
        "TASK_LOST",
        "Render",
        "TaskStatus",
        "TaskView",
        "Tasks",
    ]
    assert all(hasattr(codemode.tasks, name) for name in codemode.tasks.__all__)
    assert not {"Tasks", "TaskView", "TaskNotFoundError"} & set(codemode.__all__)


# -- a task that waits for a person: cancelled, or raced by an approval --------------------

REMOVES = """def main():
    jobs.step(i=1)
    jobs.wait()
    return jobs.remove(i=2)
"""
"""A program that makes 2 calls, then one a person must approve."""
CANCELLED_PAUSED = (
    "execution canceled\n"
    "After 2 completed capability calls: jobs.step(i=1) (line 2), jobs.wait() (line 3); "
    "jobs.step, jobs.wait may have had effects: the host declares none."
)


def ask_to_remove(request: AuthorizationRequest) -> RequireApproval | None:
    if request.capability_name == "jobs.remove":
        return RequireApproval("Remove it?")
    return None


def removing(
    store: Store, clock: ManualClock, removed: list[int], limits: Limits | None = None
) -> tuple[CodeMode, threading.Event, threading.Event]:
    """A replica whose `jobs.remove` needs a person's approval, noting each it ran."""
    cm, entered, go = make(store, clock, limits, authorizer=ask_to_remove)

    @cm.capability("jobs.remove", summary="Remove one.")
    def remove(i: int) -> int:
        removed.append(i)
        return i

    return cm, entered, go


async def paused(tasks: Tasks, go: threading.Event) -> TaskView:
    """REMOVES started as alice, waiting for a person to approve its remove."""
    go.set()
    view = await tasks.start(REMOVES, subject="alice", session=None, render=replied, pausable=True)
    waits = await settled(tasks, view.task_id)
    assert waits.status == "input_required"
    return waits


async def test_a_task_waiting_for_a_person_counts_against_its_subjects_bound() -> None:
    """A pause keeps its slot: a subject parks no more tasks than it may run, and one
    that ends (an approval's run, a cancel) frees its slot."""
    clock, removed = ManualClock(), list[int]()
    limits = Limits(max_tasks_per_subject=2)
    cm, _, go = removing(MemoryStore(clock.now), clock, removed, limits)
    async with serving(cm) as tasks:
        first, second = await paused(tasks, go), await paused(tasks, go)
        with pytest.raises(ResourceLimitError) as caught:
            await start(tasks, SOURCE)
        assert str(caught.value) == "resource limit exceeded: running tasks (limit 2)"
        bobs = await start(tasks, SOURCE, subject="bob")
        assert (await settled(tasks, bobs.task_id, "bob")).status == "completed"
        answers = {second.requests[0].key: True}
        await tasks.update(second.task_id, subject="alice", answers=answers, render=replied)
        assert (await settled(tasks, second.task_id)).status == "completed"
        again = await start(tasks, SOURCE)
        assert (await settled(tasks, again.task_id)).status == "completed"
        await tasks.cancel(first.task_id, subject="alice", render=replied)
        assert (await tasks.get(first.task_id, subject="alice")).status == "cancelled"
        both = [await start(tasks, SOURCE), await start(tasks, SOURCE)]
        assert [(await settled(tasks, v.task_id)).status for v in both] == ["completed"] * 2
    assert removed == [2]


BIG = "def main():\n    return 'x' * 200_000\n"
"""A program whose reply a MemoryStore of 1 MiB holds only a few of."""


async def test_one_subjects_ended_tasks_never_push_out_anothers_paused_one() -> None:
    """Alice's large ended records fill the store: the least recently used of them go,
    never bob's task that waits for a person (pinned while it is not ended)."""
    clock, removed = ManualClock(), list[int]()
    store = MemoryStore(clock.now, max_bytes=2**20)
    cm, _, go = removing(store, clock, removed)
    async with serving(cm) as tasks:
        go.set()
        view = await tasks.start(
            REMOVES, subject="bob", session=None, render=replied, pausable=True
        )
        bobs = await settled(tasks, view.task_id, "bob")
        assert bobs.status == "input_required"
        for _ in range(8):
            big = await start(tasks, BIG)
            assert (await settled(tasks, big.task_id)).status == "completed"
        assert (await tasks.get(bobs.task_id, subject="bob")).status == "input_required"
        answers = {bobs.requests[0].key: True}
        await tasks.update(bobs.task_id, subject="bob", answers=answers, render=replied)
        assert (await settled(tasks, bobs.task_id, "bob")).status == "completed"
    assert removed == [2]


async def test_a_subject_keeps_at_most_its_bound_of_ended_tasks() -> None:
    """Alice's third ended task drops her first; bob's is no part of her count."""
    cm, _, _ = make(limits=Limits(max_ended_tasks_per_subject=2))
    async with serving(cm) as tasks:
        bobs = await start(tasks, SOURCE, subject="bob")
        await settled(tasks, bobs.task_id, "bob")
        alices = []
        for _ in range(3):
            view = await start(tasks, SOURCE)
            await settled(tasks, view.task_id)
            alices.append(view.task_id)
        with pytest.raises(TaskNotFoundError):
            await tasks.get(alices[0], subject="alice")
        kept = [await tasks.get(task_id, subject="alice") for task_id in alices[1:]]
        assert [view.status for view in kept] == ["completed", "completed"]
        assert (await tasks.get(bobs.task_id, subject="bob")).status == "completed"


@pytest.mark.parametrize("remotely", [False, True], ids=["on-its-replica", "on-another"])
async def test_a_task_waiting_for_a_person_is_cancelled_with_the_calls_it_made(
    remotely: bool,
) -> None:
    clock, removed = ManualClock(), list[int]()
    store = MemoryStore(clock.now)
    owner, _, go = removing(store, clock, removed)
    reader, _, _ = removing(store, clock, removed)
    async with serving(owner) as running, serving(reader) as other:
        waits = await paused(running, go)
        cancelling = other if remotely else running
        await cancelling.cancel(waits.task_id, subject="alice", render=replied)
        done = await running.get(waits.task_id, subject="alice")  # ended before the ack
        await running.update(
            waits.task_id, subject="alice", answers={waits.requests[0].key: True}, render=replied
        )
        after = await other.get(waits.task_id, subject="alice")
    assert (done.status, done.message, text_of(done.reply)) == (
        "cancelled",
        "execution canceled",
        CANCELLED_PAUSED,
    )
    assert (after.status, after.reply) == ("cancelled", done.reply)
    assert removed == []


class Written(Recorded):
    """A recorded store that opens each task record written to it and notes its status, in
    order: every state a reader could have read, however often it polled."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.statuses: list[str] = []
        self.sealer = Sealer(KEY, purpose="tasks")

    def wrote_record(self, key: str, value: bytes) -> None:
        opened = self.sealer.open(value, key)
        self.statuses.append(TaskRecord.decode(opened, record_bound(Limits())).status)


async def test_a_cancel_asked_while_it_ran_ends_the_task_its_pause_would_keep() -> None:
    """The owner had not beaten since the cancel was asked, and its program then paused:
    the cancel, acknowledged first, wins. The pause is never written, so no reader is
    shown a request to approve (however it polls), and the task ends cancelled."""
    clock, removed = ManualClock(), list[int]()
    store = Written(clock)
    owner, entered, go = removing(store, clock, removed)
    reader, _, _ = removing(store, clock, removed)
    async with serving(owner) as running, serving(reader) as other:
        view = await running.start(
            REMOVES, subject="alice", session=None, render=replied, pausable=True
        )
        await until(entered.is_set)
        await other.cancel(view.task_id, subject="alice", render=replied)  # no beat yet
        go.set()
        done = await settled(other, view.task_id)
    assert (done.status, text_of(done.reply)) == ("cancelled", CANCELLED_PAUSED)
    assert store.statuses == ["working", "cancelled"]
    assert removed == []


class Gated(MemoryStore):
    """A memory store where a caller the test names (`CALLER`) waits, before it claims a
    lease, until the test lets it go: the test orders who takes a paused task."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock.now)
        self.arrived: dict[str, anyio.Event] = {}
        self.gates: dict[str, anyio.Event] = {}

    async def claim(
        self, key: str, token: str, seconds: float, *, epoch: str | None = None
    ) -> bool | None:
        caller = CALLER.get()
        if key.endswith(":lease") and caller in self.gates:
            self.arrived[caller].set()
            await self.gates[caller].wait()
        return await super().claim(key, token, seconds, epoch=epoch)


CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")


@pytest.mark.parametrize("first", ["cancel", "approval"])
async def test_a_cancel_and_an_approval_at_once_resume_a_paused_task_once(first: str) -> None:
    """Both read the task waiting for a person, then race for its lease: the first to take
    it goes on with it, and the other finds it taken. The cancel was asked through the
    store before it raced, and an approval reads that ask right before its run begins, so
    either way the cancel acknowledged first wins: the state resumes once, stopped, and
    the approved call never runs."""
    clock, removed = ManualClock(), list[int]()
    store = Gated(clock)
    owner, _, go = removing(store, clock, removed)
    reader, _, _ = removing(store, clock, removed)
    async with serving(owner) as running, serving(reader) as other:
        waits = await paused(running, go)
        for caller in ("cancel", "approval"):
            store.arrived[caller], store.gates[caller] = anyio.Event(), anyio.Event()
        ended = {"cancel": anyio.Event(), "approval": anyio.Event()}

        async def cancel() -> None:
            CALLER.set("cancel")
            await other.cancel(waits.task_id, subject="alice", render=replied)
            ended["cancel"].set()

        async def approve() -> None:
            CALLER.set("approval")
            answers = {waits.requests[0].key: True}
            await running.update(waits.task_id, subject="alice", answers=answers, render=replied)
            ended["approval"].set()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(cancel)
                group.start_soon(approve)
                await store.arrived["cancel"].wait()
                await store.arrived["approval"].wait()
                second = "approval" if first == "cancel" else "cancel"
                for caller in (first, second):
                    store.gates[caller].set()
                    await ended[caller].wait()
        done = await settled(other, waits.task_id)
    assert (done.status, text_of(done.reply)) == ("cancelled", CANCELLED_PAUSED)
    assert removed == []


# -- sealing -----------------------------------------------------------------------------


async def test_the_tasks_of_one_codemode_read_each_others_records_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a key, one CodeMode seals its tasks under the one it made up, as it does its
    sessions, so a second `Tasks` on it (another adapter) reads them."""
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    cm = CodeMode(authorizer=AllowAll())
    MADE.append(cm)
    async with serving(cm) as first, serving(cm) as second:
        view = await start(first, SOURCE)
        done = await settled(second, view.task_id)
    assert (done.status, done.reply) == ("completed", b'{"value": 1}')


async def test_a_tasks_record_is_sealed_apart_from_sessions() -> None:
    """Task records have labels of their own: the session's sealer (same secret) neither
    finds nor opens one."""
    clock = ManualClock()
    store = MemoryStore(clock.now)
    cm, _, _ = make(store, clock)
    async with serving(cm) as tasks:
        view = await start(tasks, SOURCE)
        await settled(tasks, view.task_id)
    bound = record_bound(cm.limits)
    kept = await TaskBook(store, Sealer(KEY, purpose="tasks"), bound).read("alice", view.task_id)
    assert kept.status == "completed"
    with pytest.raises(TaskNotFoundError):
        await TaskBook(store, Sealer(KEY), bound).read("alice", view.task_id)
