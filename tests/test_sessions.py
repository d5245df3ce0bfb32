"""Sessions: a program starts from what the session's last successful program left, and a
handle that is not the caller's reads as one that never was."""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from codemode import (
    CodeMode,
    CodeModeError,
    ExecutionResult,
    InvalidProgramError,
    InvalidRequestError,
    KeptState,
    Limits,
    ResumeRefusedError,
    SessionBusyError,
    SessionNotFoundError,
)
from codemode.approvals import ApprovalRequest, Paused
from codemode.authz import AllowAll
from codemode.continuations import MemoryStore
from codemode.payloads import error_payload
from codemode.sessions import LEASE_GRACE_SECONDS
from codemode.testing import ManualClock, ScriptedProgram, ScriptedSandbox
from tests.approvals.host import build
from tests.conftest import CANARY, assert_no_canary

KEY = "k" * 32
SOURCE = "def main():\n    return 1\n"
FAILING = "def main():\n    raise ValueError('no')\n"
WAITS = "def main():\n    return jobs.wait()\n"


def counts(program: ScriptedProgram) -> Generator[Any, Any, Any]:
    """Plays a program that adds one to a counter the session keeps (and fails when its
    text says so, after changing the counter, as a failed run in a real worker would)."""
    count = int(program.session or b"0") + 1
    program.kept = str(count).encode()
    program.names = {"count": "int"}
    if "raise" in program.code:
        raise program.raised("ValueError", "no", 2)
    if "jobs.wait" in program.code:
        yield program.call("jobs.wait", line=2)
    return count


def make(
    clock: ManualClock | None = None,
    store: MemoryStore | None = None,
    limits: Limits | None = None,
    sessions: bool = True,
) -> CodeMode:
    return CodeMode(
        authorizer=AllowAll(),
        sandbox=ScriptedSandbox(counts),
        clock=clock,
        store=store,
        limits=limits,
        sessions=sessions,
        request_state_key=KEY,
    )


def blocking(cm: CodeMode) -> tuple[threading.Event, threading.Event]:
    """Adds `jobs.wait`, which waits for the test: set `go` to let it return; `entered` is
    set once a program called it."""
    entered, go = threading.Event(), threading.Event()

    @cm.capability("jobs.wait", summary="Wait for the test.")
    def wait() -> int:
        entered.set()
        go.wait(10)
        return 0

    return entered, go


def test_a_new_session_gives_a_handle_and_the_next_program_goes_on_from_it() -> None:
    cm = make()
    first = cm.execute(SOURCE, subject="alice", session="new")
    assert first.value == 1
    assert first.session is not None and first.session.startswith("s-")
    second = cm.execute(SOURCE, subject="alice", session=first.session)
    assert (second.value, second.session) == (2, first.session)
    third = asyncio.run(cm.execute_async(SOURCE, subject="alice", session=first.session))
    assert (third.value, third.session) == (3, first.session)


def test_a_result_in_a_session_says_what_the_session_holds_now() -> None:
    cm = make()
    first = cm.execute(SOURCE, subject="alice", session="new")
    assert first.kept == KeptState({"count": "int"}, len(b"1"))
    tenth = first
    for _ in range(9):
        tenth = cm.execute(SOURCE, subject="alice", session=first.session)
    assert tenth.kept == KeptState({"count": "int"}, len(b"10"))
    assert cm.execute(SOURCE, subject="alice").kept is None


def test_a_program_outside_a_session_has_no_handle_and_starts_from_nothing() -> None:
    cm = make()
    kept = cm.execute(SOURCE, subject="alice", session="new").session
    assert cm.execute(SOURCE, subject="alice").session is None
    assert cm.execute(SOURCE, subject="alice").value == 1
    assert cm.execute(SOURCE, subject="alice", session=kept).value == 2


def test_each_new_session_is_its_own() -> None:
    cm = make()
    one = cm.execute(SOURCE, subject="alice", session="new").session
    two = cm.execute(SOURCE, subject="alice", session="new").session
    assert one != two
    assert cm.execute(SOURCE, subject="alice", session=one).value == 2
    assert cm.execute(SOURCE, subject="alice", session=two).value == 2


def test_a_failed_program_leaves_the_session_as_it_was() -> None:
    cm = make()
    handle = cm.execute(SOURCE, subject="alice", session="new").session
    with pytest.raises(Exception, match="ValueError: no"):
        cm.execute(FAILING, subject="alice", session=handle)
    assert cm.execute(SOURCE, subject="alice", session=handle).value == 2


def test_a_failed_first_program_keeps_no_session() -> None:
    cm = make(limits=Limits(max_sessions_per_subject=1))
    kept = cm.execute(SOURCE, subject="alice", session="new").session
    with pytest.raises(Exception, match="ValueError: no"):
        cm.execute(FAILING, subject="alice", session="new")
    assert cm.execute(SOURCE, subject="alice", session=kept).value == 2  # nothing evicted it


def not_found(cm: CodeMode, handle: str, subject: str = "alice") -> SessionNotFoundError:
    with pytest.raises(SessionNotFoundError) as raised:
        cm.execute(SOURCE, subject=subject, session=handle)
    return raised.value


def test_another_subjects_a_made_up_an_expired_and_an_evicted_handle_read_the_same() -> None:
    clock = ManualClock()
    cm = make(clock, limits=Limits(max_sessions_per_subject=2))
    mallory = cm.execute(SOURCE, subject="mallory", session="new").session
    assert mallory is not None
    expiring = cm.execute(SOURCE, subject="alice", session="new").session
    assert expiring is not None
    clock.advance(Limits().session_idle_seconds + 1)
    evicted = cm.execute(SOURCE, subject="alice", session="new").session
    assert evicted is not None
    cm.execute(SOURCE, subject="alice", session="new")
    cm.execute(SOURCE, subject="alice", session="new")  # the third past 2: the oldest goes
    errors = [
        not_found(cm, mallory),
        not_found(cm, "s-" + "A" * 22),
        not_found(cm, CANARY),
        not_found(cm, expiring),
        not_found(cm, evicted),
    ]
    expected = error_payload(SessionNotFoundError())
    assert [error_payload(e) for e in errors] == [expected] * len(errors)
    assert str(errors[0]) == (
        "session not found: no session of yours has this handle (it may have expired); "
        'start one with session "new"'
    )
    assert_no_canary(*errors)


def test_a_session_in_use_is_busy_for_another_program_until_the_first_ends() -> None:
    cm = make()
    entered, go = blocking(cm)
    handle = cm.execute(SOURCE, subject="alice", session="new").session
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(cm.execute, WAITS, subject="alice", session=handle)
        assert entered.wait(10)
        with pytest.raises(SessionBusyError) as raised:
            cm.execute(SOURCE, subject="alice", session=handle)
        assert cm.execute(SOURCE, subject="bob", session="new").value == 1  # others go on
        go.set()
        assert first.result(10).value == 2
    assert str(raised.value) == (
        "session busy: another program is running (or waiting for an approval) in this "
        "session; send this one when it has ended"
    )
    assert cm.execute(SOURCE, subject="alice", session=handle).value == 3


def test_sessions_off_refuse_a_session_and_run_the_rest() -> None:
    cm = make(sessions=False)
    with pytest.raises(InvalidRequestError, match="sessions are off"):
        cm.execute(SOURCE, subject="alice", session="new")
    assert cm.execute(SOURCE, subject="alice").value == 1


def test_a_session_kept_under_other_limits_is_refused_by_name() -> None:
    clock = ManualClock()
    store = MemoryStore(clock.now)
    handle = make(clock, store).execute(SOURCE, subject="alice", session="new").session
    assert handle is not None
    same = make(clock, store)
    assert same.execute(SOURCE, subject="alice", session=handle).value == 2
    other = make(clock, store, Limits(max_memory_bytes=64 * 1024 * 1024))
    with pytest.raises(ResumeRefusedError, match="kept under other limits; start a new one"):
        other.execute(SOURCE, subject="alice", session=handle)
    assert same.execute(SOURCE, subject="alice", session=handle).value == 3  # lease let go


def test_a_session_sealed_under_another_key_is_not_found() -> None:
    clock = ManualClock()
    store = MemoryStore(clock.now)
    handle = make(clock, store).execute(SOURCE, subject="alice", session="new").session
    assert handle is not None
    other = CodeMode(
        authorizer=AllowAll(),
        sandbox=ScriptedSandbox(counts),
        clock=clock,
        store=store,
        request_state_key="x" * 32,
    )
    not_found(other, handle)


def test_the_codemode_class_stays_within_400_lines() -> None:
    source = inspect.getsource(CodeMode)
    node = ast.parse(source).body[0]
    assert node.end_lineno is not None and node.end_lineno - node.lineno + 1 <= 400


KEEPS = "done = []\ndef main():\n    return len(done)\n"
DELETES = (
    "def main():\n    global done\n    done = done + [tickets.delete(id=1)]\n    return len(done)\n"
)


def test_a_program_waiting_for_a_person_holds_its_session_and_keeps_what_it_left() -> None:
    asked, answer = asyncio.Event(), asyncio.Event()

    async def approve(request: ApprovalRequest) -> bool:
        asked.set()
        await answer.wait()
        return True

    async def scenario(cm: CodeMode) -> tuple[Any, ...]:
        handle = (await cm.execute_async(KEEPS, subject="alice", session="new")).session
        waiting = asyncio.create_task(
            cm.execute_async(DELETES, subject="alice", session=handle, approve=approve)
        )
        await asyncio.wait_for(asked.wait(), 30)
        with pytest.raises(SessionBusyError):
            await cm.execute_async(KEEPS.split("\n", 1)[1], subject="alice", session=handle)
        answer.set()
        deleted = await asyncio.wait_for(waiting, 30)
        after = await cm.execute_async(
            "def main():\n    return done\n", subject="alice", session=handle
        )
        return deleted.value, deleted.session == handle, after.value

    with build() as cm:
        assert asyncio.run(scenario(cm)) == (1, True, [True])


def test_a_paused_program_holds_its_session_until_it_resumes_and_then_writes_it() -> None:
    async def scenario(cm: CodeMode) -> tuple[Any, ...]:
        handle = (await cm.execute_async(KEEPS, subject="alice", session="new")).session
        paused = await cm.start_async(DELETES, subject="alice", session=handle)
        assert isinstance(paused, Paused)
        with pytest.raises(SessionBusyError):
            await cm.execute_async(KEEPS, subject="alice", session=handle)
        answers = {request.key: True for request in paused.requests}
        resumed = await cm.resume_async(paused.state, subject="alice", answers=answers)
        assert isinstance(resumed, ExecutionResult)
        after = await cm.execute_async(
            "def main():\n    return done\n", subject="alice", session=handle
        )
        held = None if resumed.kept is None else resumed.kept.names
        return resumed.value, resumed.session == handle, held, after.value

    with build() as cm:  # tickets, the namespace the trailer imports, is not state
        assert asyncio.run(scenario(cm)) == (1, True, {"done": "list of 1"}, [True])


def test_a_paused_new_session_is_kept_once_it_resumes() -> None:
    async def scenario(cm: CodeMode) -> tuple[Any, ...]:
        source = "done = []\n" + DELETES
        paused = await cm.start_async(source, subject="alice", session="new")
        assert isinstance(paused, Paused)
        answers = {request.key: True for request in paused.requests}
        resumed = await cm.resume_async(paused.state, subject="alice", answers=answers)
        assert isinstance(resumed, ExecutionResult) and resumed.session is not None
        after = await cm.execute_async(
            "def main():\n    return done\n", subject="alice", session=resumed.session
        )
        return resumed.value, after.value

    with build() as cm:
        assert asyncio.run(scenario(cm)) == (1, [True])


def test_a_store_that_fails_as_a_program_ends_answers_its_result_without_the_session(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis refuses writes (full, under noeviction) while the second program runs: its
    result is answered, with no handle, and the session goes on from the first program's
    state once Redis takes writes again."""
    import redis

    from codemode.continuations import RedisStore

    admin = redis.Redis.from_url(redis_url)
    cm = CodeMode(authorizer=AllowAll(), store=RedisStore(redis_url), request_state_key=KEY)

    @cm.capability("store.fill", summary="Make Redis refuse writes.")
    def fill() -> int:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", 1)
        return 2

    with cm:
        first = cm.execute("n = 1\ndef main():\n    return n\n", subject="a", session="new")
        try:
            with caplog.at_level("WARNING", logger="codemode"):
                second = cm.execute(
                    "def main():\n    global n\n    n = store.fill()\n    return n\n",
                    subject="a",
                    session=first.session,
                )
        finally:
            admin.config_set("maxmemory", 0)
        third = cm.execute("def main():\n    return n\n", subject="a", session=first.session)
    assert (second.value, second.session, second.kept) == (2, None, None)
    assert "a session's state was not kept" in caplog.text
    assert (third.value, third.session) == (1, first.session)


def test_a_program_keeping_a_global_named_as_a_namespace_is_refused_before_it_runs() -> None:
    """The next program would find the namespace under that name, not the value: the
    preflight refuses it, no call is made, and the session stays as it was."""
    calls: list[str] = []
    with CodeMode(authorizer=AllowAll(), request_state_key=KEY) as cm:

        @cm.capability("rows.fetch", summary="Rows.")
        def fetch() -> list[int]:
            calls.append("rows.fetch")
            return [1, 2, 3]

        keeps = "def main():\n    global data\n    data = rows.fetch()\n    return len(data)\n"
        handle = cm.execute(keeps, subject="alice", session="new").session
        shadows = keeps.replace("data", "rows")
        for session in (handle, "new"):
            with pytest.raises(InvalidProgramError) as raised:
                cm.execute(shadows, subject="alice", session=session)
            assert str(raised.value) == (
                'invalid program: <codemode>:3:5: "rows" is a capability namespace, which '
                "replaces any global of that name before main() runs, so neither this program "
                "nor a session could keep it: use another name"
            )
        assert calls == ["rows.fetch"]
        after = cm.execute(
            "def main():\n    return [data, rows.fetch()]\n", subject="alice", session=handle
        )
        assert (after.value, after.session) == ([[1, 2, 3], [1, 2, 3]], handle)


def test_a_program_whose_caller_gives_up_lets_its_session_go_at_once(redis_url: str) -> None:
    """An MCP client cancels its call (or goes away) while the program waits on a call: the
    caller's cancel scope ends the execute, and the session's lease, held in Redis, is let
    go all the same. Else the session stays busy for as long as its lease would have
    lasted: with a person to ask, every approval's wait (100 minutes by default), past the
    hour an idle session is kept."""
    import anyio

    from codemode.continuations import RedisStore

    started, release = threading.Event(), threading.Event()
    cm = CodeMode(authorizer=AllowAll(), store=RedisStore(redis_url), request_state_key=KEY)

    @cm.capability("gate.wait", summary="Wait until the test lets go.")
    def wait() -> int:
        started.set()
        release.wait(10)
        return 2

    async def approve(request: ApprovalRequest) -> bool:
        return True

    async def scenario() -> list[Any]:
        first = await cm.execute_async(
            "n = 1\ndef main():\n    return n\n", subject="a", session="new"
        )
        handle = first.session
        waiting = "def main():\n    global n\n    n = gate.wait()\n    return n\n"
        async with anyio.create_task_group() as group:

            async def given_up() -> None:
                await cm.execute_async(waiting, subject="a", session=handle, approve=approve)

            group.start_soon(given_up)
            await anyio.to_thread.run_sync(started.wait, 10)
            group.cancel_scope.cancel()
        release.set()
        after = await cm.execute_async("def main():\n    return n\n", subject="a", session=handle)
        return [after.value, after.session == handle]

    with cm:
        assert asyncio.run(scenario()) == [1, True]


def test_a_notebook_cell_runs_a_session_with_the_synchronous_api() -> None:
    """A notebook runs its cells inside its own event loop: `execute` in a session works
    there as it does outside one (the store is asked on a thread of its own then)."""
    cm = make()

    async def cell() -> list[Any]:
        first = cm.execute(SOURCE, subject="alice", session="new")
        second = cm.execute(SOURCE, subject="alice", session=first.session)
        return [first.value, second.value, second.session == first.session]

    assert asyncio.run(cell()) == [1, 2, True]


@pytest.fixture
def admin(redis_url: str) -> Iterator[Any]:
    """A client of the test's Redis, to look into it or make it refuse writes."""
    import redis

    with redis.Redis.from_url(redis_url) as client:
        yield client


def test_a_store_that_fails_as_a_program_pauses_lets_its_session_go(
    redis_url: str, admin: Any
) -> None:
    """Redis refuses writes from the moment a person is asked (the audit sink fills it):
    the pause cannot hand the session's lease on to the paused state, so the program is
    answered with an error, and the session is free again once Redis takes writes, rather
    than busy for every approval's wait its lease was taken for."""
    from codemode.continuations import RedisStore
    from codemode.events import ApprovalAsked, Event
    from tests.approvals.host import ask_before_deleting

    def sink(event: Event) -> None:
        if isinstance(event, ApprovalAsked):
            admin.config_set("maxmemory-policy", "noeviction")
            admin.config_set("maxmemory", 1)

    cm = CodeMode(
        authorizer=ask_before_deleting,
        store=RedisStore(redis_url),
        request_state_key=KEY,
        on_event=sink,
    )

    @cm.capability("tickets.delete", summary="Delete a ticket.")
    def delete(*, id: int) -> bool:
        return True

    async def scenario() -> list[Any]:
        handle = (await cm.execute_async(KEEPS, subject="a", session="new")).session
        try:
            with pytest.raises(CodeModeError):
                await cm.start_async(DELETES, subject="a", session=handle)
        finally:
            admin.config_set("maxmemory", 0)
        after = await cm.execute_async(KEEPS, subject="a", session=handle)
        return [after.value, after.session == handle]

    with cm:
        assert asyncio.run(scenario()) == [0, True]


def leases_left(admin: Any) -> list[int]:
    """The milliseconds each session lease in Redis has left (`admin`: a Redis client)."""
    return [admin.pttl(key) for key in admin.scan_iter("codemode:session:*:lease")]


def test_a_program_that_would_pause_rather_than_wait_holds_its_session_for_its_run_only(
    redis_url: str, admin: Any
) -> None:
    """`start_async` (the 2026 era's execute) never waits for a person: a call that needs
    one pauses the program, and the pause holds the session from then on. So while it
    runs, its lease lasts the run's time and the grace, not every approval's wait (a
    replica that stops meanwhile would leave the session busy that long)."""
    from codemode.continuations import RedisStore
    from codemode.sessions import LEASE_GRACE_SECONDS

    leases: list[int] = []
    cm = CodeMode(authorizer=AllowAll(), store=RedisStore(redis_url), request_state_key=KEY)

    @cm.capability("lease.left", summary="How long the session's lease has left, in ms.")
    def left() -> int:
        leases.extend(leases_left(admin))
        return len(leases)

    async def scenario() -> list[Any]:
        handle = (await cm.execute_async(KEEPS, subject="a", session="new")).session
        ran = await cm.start_async(
            "def main():\n    return lease.left()\n", subject="a", session=handle
        )
        assert isinstance(ran, ExecutionResult)
        return [ran.value, ran.session == handle]

    with cm:
        assert asyncio.run(scenario()) == [1, True]
    bound = (cm.limits.max_execution_seconds + LEASE_GRACE_SECONDS) * 1000
    assert 0 < leases[0] <= bound


def test_a_program_asking_a_person_holds_its_session_for_each_wait_as_it_comes(
    redis_url: str, admin: Any
) -> None:
    """`execute_async` with a person to ask: the lease lasts the run while it runs, and is
    held on for the wait (and the run after it) when a person is asked; not for every
    approval's wait from the start, which a replica that stopped would leave behind."""
    from codemode.continuations import RedisStore
    from codemode.sessions import LEASE_GRACE_SECONDS
    from tests.approvals.host import ask_before_deleting

    leases: list[int] = []

    def lease_left() -> int:
        leases.extend(leases_left(admin))
        return len(leases)

    cm = CodeMode(
        authorizer=ask_before_deleting, store=RedisStore(redis_url), request_state_key=KEY
    )
    cm.capability("lease.left", summary="How long the session's lease has left, in ms.")(lease_left)

    @cm.capability("tickets.delete", summary="Delete a ticket.")
    def delete(*, id: int) -> bool:
        return True

    async def approve(request: ApprovalRequest) -> bool:
        lease_left()
        return True

    async def scenario() -> list[Any]:
        handle = (await cm.execute_async(KEEPS, subject="a", session="new")).session
        source = "def main():\n    lease.left()\n    return tickets.delete(id=1)\n"
        ran = await cm.execute_async(source, subject="a", session=handle, approve=approve)
        after = await cm.execute_async(KEEPS, subject="a", session=handle)
        return [ran.value, ran.session == handle, after.value]

    with cm:
        assert asyncio.run(scenario()) == [True, True, 0]
    run = (cm.limits.max_execution_seconds + LEASE_GRACE_SECONDS) * 1000
    wait = cm.limits.max_approval_wait_seconds * 1000
    assert len(leases) == 2
    assert 0 < leases[0] <= run < leases[1] <= run + wait


def test_a_program_that_may_pause_holds_its_session_no_longer_than_it_may_run() -> None:
    """A pause hands the session to the paused state, so a program that may pause never
    waits for a person while it holds it: a replica that hangs (or dies) mid-program frees
    the session once the longest a program may run has passed, not after every approval
    it could have waited for."""
    store_clock, clock = ManualClock(), ManualClock()
    store = MemoryStore(store_clock.now)
    hung, other = make(clock, store), make(clock, store)
    entered, go = blocking(hung)
    handle = hung.execute(SOURCE, subject="alice", session="new").session
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        stuck = pool.submit(
            asyncio.run, hung.start_async(WAITS, subject="alice", session=handle, pausable=True)
        )
        assert entered.wait(10)
        with pytest.raises(SessionBusyError):
            other.execute(SOURCE, subject="alice", session=handle)
        store_clock.skip(Limits().max_execution_seconds + LEASE_GRACE_SECONDS)
        taken = other.execute(SOURCE, subject="alice", session=handle)
        go.set()
        late = stuck.result(10)
    assert (taken.value, taken.session) == (2, handle)
    assert isinstance(late, ExecutionResult) and late.session is None  # its lease was gone
    assert other.execute(SOURCE, subject="alice", session=handle).value == 3
