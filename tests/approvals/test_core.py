"""A person approves a call in the middle of a program: the library's side, in the real
sandbox (a paused program is the interpreter's own dump, resumed in another worker)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import redis.asyncio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import AfterValidator

from codemode import CodeMode, Limits
from codemode.approvals import (
    CLOCK_SKEW_SECONDS,
    ApprovalRequest,
    InProcessReplayGuard,
    Paused,
    RedisReplayGuard,
    claim_seconds,
)
from codemode.authz import AuthorizationRequest, RequireApproval
from codemode.errors import (
    ApprovalDeclinedError,
    ApprovalTimedOutError,
    ApprovalUnavailableError,
    CodeModeError,
    ErrorCode,
    InternalError,
    ResourceLimitError,
    ResumeRefusedError,
)
from codemode.events import (
    ApprovalAsked,
    ApprovalDeclined,
    ApprovalGranted,
    ApprovalTimedOut,
    CallDenied,
    CallEvent,
    Event,
    ExecutionFinished,
    ExecutionStarted,
)
from codemode.questions import arguments_text
from codemode.runtime import ExecutionResult
from codemode.runtime.paused import PausedState
from codemode.testing import running_engine
from tests.approvals.host import CANARY, DELETE_TWO, build

DECLINED = "approval declined: a person declined this call; do not retry it"
UNAVAILABLE = (
    "approval unavailable: this call needs a person's approval, and no one can be asked for it here"
)

GATHERED = """\
import asyncio

async def main():
    first = await tickets.list()
    deleted, again = await asyncio.gather(tickets.delete(id=1), tickets.list())
    return [deleted, len(first), len(again)]
"""

UNCAUGHT = """\
def main():
    tickets.list()
    return tickets.delete(id=2)
"""


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls"
    path.write_text("")
    monkeypatch.setenv("CODEMODE_TEST_CALLS", str(path))
    return path


def ran(calls: Path) -> list[str]:
    return [line.split(" ", 1)[1] for line in calls.read_text().splitlines()]


@pytest.fixture
def cm() -> Iterator[CodeMode]:
    with build() as cm:
        yield cm


def answering(*approved: int) -> Any:
    """An approver that approves the deletes of these ids, and records each request."""
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.arguments["id"] in approved

    approve.asked = asked  # type: ignore[attr-defined]
    return approve


def test_an_approved_call_runs_once_and_a_declined_one_is_caught(cm: CodeMode, calls: Path) -> None:
    approve = answering(1)
    result = asyncio.run(cm.execute_async(DELETE_TWO, subject="alice", approve=approve))
    assert result.value == [True, DECLINED]
    assert result.printed == "open: 3\n"
    assert result.usage.capability_calls == ("tickets.list", "tickets.delete", "tickets.delete")
    assert ran(calls) == ["list", "delete 1"]  # the list before the pauses never ran again
    assert [(r.key, r.capability_name, r.arguments) for r in approve.asked] == [
        ("approval-2", "tickets.delete", {"id": 1}),
        ("approval-3", "tickets.delete", {"id": 2}),
    ]
    assert approve.asked[0].message == f"Delete ticket 1? ({CANARY})"
    assert CANARY not in json.dumps(result.value) + result.printed


def test_a_declined_call_the_program_does_not_catch_fails_at_its_line(
    cm: CodeMode, calls: Path
) -> None:
    with pytest.raises(ApprovalDeclinedError) as raised:
        asyncio.run(cm.execute_async(UNCAUGHT, subject="alice", approve=answering()))
    error = raised.value
    assert str(error) == DECLINED
    assert error.code is ErrorCode.APPROVAL_DECLINED
    assert error.where is not None and (error.where.line, error.where.column) == (3, 12)
    assert [(c.capability, c.outcome) for c in error.calls] == [
        ("tickets.list", "ok"),
        ("tickets.delete", "approval_declined"),
    ]
    assert CANARY not in error.report()
    assert ran(calls) == ["list"]


def test_an_async_program_pauses_after_its_other_calls_settle(cm: CodeMode, calls: Path) -> None:
    result = asyncio.run(cm.execute_async(GATHERED, subject="alice", approve=answering(1)))
    assert result.value == [True, 3, 3]
    assert ran(calls) == ["list", "list", "delete 1"]


def test_without_a_person_to_ask_the_call_fails_closed(cm: CodeMode, calls: Path) -> None:
    result = asyncio.run(cm.execute_async(DELETE_TWO, subject="alice"))
    assert result.value == [UNAVAILABLE, UNAVAILABLE]
    with pytest.raises(ApprovalUnavailableError) as raised:
        cm.execute(UNCAUGHT, subject="alice")
    assert str(raised.value) == UNAVAILABLE
    assert ran(calls) == ["list", "list"]


def paused(cm: CodeMode, source: str = UNCAUGHT) -> Paused:
    outcome = asyncio.run(cm.start_async(source, subject="alice"))
    assert isinstance(outcome, Paused)
    return outcome


def test_a_paused_state_resumes_at_most_once(cm: CodeMode, calls: Path) -> None:
    first = paused(cm)
    (request,) = first.requests
    done = asyncio.run(cm.resume_async(first.state, subject="alice", answers={request.key: True}))
    assert isinstance(done, ExecutionResult) and done.value is True
    with pytest.raises(ResumeRefusedError) as raised:
        asyncio.run(cm.resume_async(first.state, subject="alice", answers={request.key: True}))
    assert str(raised.value) == "resume refused: this paused program was resumed already"
    assert ran(calls) == ["list", "delete 2"]


def test_a_state_is_refused_to_another_subject_version_or_catalog(
    cm: CodeMode, calls: Path
) -> None:
    state = paused(cm).state
    yes = {"approval-2": True}

    def refused(state: bytes, subject: str = "alice") -> str:
        with pytest.raises(ResumeRefusedError) as raised:
            asyncio.run(cm.resume_async(state, subject=subject, answers=yes))
        return str(raised.value)

    assert refused(state, "bob") == "resume refused: the paused program belongs to another caller"
    scope, body = state.split(b"\n", 1)
    data = json.loads(body)
    data["versions"]["codemode"] = "0.0.1"
    assert refused(scope + b"\n" + json.dumps(data).encode()) == (
        "resume refused: the program was paused by another version of codemode; run it again"
    )
    assert refused(b"not a state") == "resume refused: the paused program cannot be read"

    @cm.capability("tickets.close", summary="Close a ticket.")
    def close(*, id: int) -> bool:
        return True

    assert refused(state) == (
        "resume refused: the capabilities changed while the program was paused; run it again"
    )
    assert ran(calls) == ["list"]


def test_an_answer_past_the_wait_times_out(calls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMODE_TEST_WAIT", "0.05")
    events: list[Event] = []
    with build() as cm:
        cm.configure(on_event=events.append)
        never = asyncio.Event()

        async def no_one_answers(request: ApprovalRequest) -> bool:
            await never.wait()
            return True

        result = asyncio.run(cm.execute_async(DELETE_TWO, subject="alice", approve=no_one_answers))
    timed_out = "approval timed out: no one answered within 0.05 s"
    assert result.value == [timed_out, timed_out]
    assert [type(e) for e in events if isinstance(e, ApprovalTimedOut)] == [ApprovalTimedOut] * 2
    assert ran(calls) == ["list"]


def test_the_audit_trail_asks_and_answers(calls: Path) -> None:
    events: list[Event] = []
    with build() as cm:  # closed: every execution's last event is delivered
        cm.configure(on_event=events.append)
        asyncio.run(cm.execute_async(DELETE_TWO, subject="alice", approve=answering(1)))
    kinds = [
        (type(e).__name__, getattr(e, "arguments", None))
        for e in events
        if isinstance(e, ApprovalAsked | ApprovalGranted | ApprovalDeclined)
    ]
    assert kinds == [
        ("ApprovalAsked", {"id": 1}),
        ("ApprovalGranted", {"id": 1}),
        ("ApprovalAsked", {"id": 2}),
        ("ApprovalDeclined", {"id": 2}),
    ]
    asked = next(e for e in events if isinstance(e, ApprovalAsked))
    assert asked.subject == "alice" and asked.capability == "tickets.delete"
    assert asked.message == f"Delete ticket 1? ({CANARY})"
    # One execution from start to end, whatever it waited for.
    assert [type(e) for e in events if isinstance(e, ExecutionStarted | ExecutionFinished)] == [
        ExecutionStarted,
        ExecutionFinished,
    ]
    assert len({e.execution_id for e in events}) == 1


def test_approvals_per_execution_are_bounded() -> None:
    with build() as cm:
        cm.limits = Limits(max_approvals=1)
        with pytest.raises(ResourceLimitError) as raised:
            asyncio.run(cm.execute_async(DELETE_TWO, subject="alice", approve=answering(1, 2)))
    assert str(raised.value) == "resource limit exceeded: approvals (limit 1) at <codemode>:7:25"


def too_much_to_pause(cm: CodeMode, rows: str) -> str:
    """The error of a program that holds `rows` when it reaches a call to approve, under
    a pause bound of 64 KiB."""
    holds = f"import hashlib\ndef main():\n    rows = {rows}\n    return tickets.delete(id=1)\n"
    cm.limits = Limits(max_paused_bytes=64 * 1024)
    with pytest.raises(ResourceLimitError) as raised:
        asyncio.run(cm.execute_async(holds, subject="alice", approve=answering(1)))
    message = str(raised.value)
    assert message.startswith(
        "resource limit exceeded: paused program size (limit 64 KiB, reached "
    )
    return message


def test_a_program_that_holds_too_much_cannot_pause() -> None:
    with build() as cm:
        rows = "[hashlib.sha256(str(i).encode()).hexdigest() for i in range(5000)]"
        message = too_much_to_pause(cm, rows)
    assert message.endswith(" at <codemode>:4:12")


def test_a_capability_that_asks_is_visible() -> None:
    class AskingPolicy:
        def __call__(self, request: AuthorizationRequest) -> RequireApproval:
            return RequireApproval("Go ahead?")

        def can_see(self, subject: str, capability_id: str, capability_name: str) -> object:
            return RequireApproval("Go ahead?")

    with CodeMode(authorizer=AskingPolicy(), hide_forbidden=True) as cm:

        @cm.capability("tickets.delete", summary="Delete a ticket.")
        def delete(*, id: int) -> bool:
            return True

        assert [hit.name for hit in cm.search("", subject="alice").results] == ["tickets.delete"]


def test_a_replay_guard_remembers_a_state_until_it_expires() -> None:
    now = [0.0]
    guard = InProcessReplayGuard(clock=lambda: now[0])
    scope = asyncio.run(guard.scope())
    assert asyncio.run(guard.claim("a", scope, 10)) is True
    assert asyncio.run(guard.claim("a", scope, 10)) is False
    now[0] = 10.0
    assert asyncio.run(guard.claim("a", scope, 10)) is True
    asyncio.run(guard.release("a"))
    assert asyncio.run(guard.claim("a", scope, 10)) is True
    assert asyncio.run(guard.claim("b", "process:other:1", 10)) is None


def test_a_worker_forked_after_the_guard_is_another_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fork copies the guard's memory, not its claims from then on: the worker's scope
    is its own process id, so it never vouches for the parent's states."""
    guard = InProcessReplayGuard()
    scope = asyncio.run(guard.scope())
    monkeypatch.setattr(os, "getpid", lambda: os.getppid())  # as in the forked child
    assert asyncio.run(guard.scope()) != scope
    assert asyncio.run(guard.claim("s", scope, 10)) is None


def test_spans_say_how_each_approval_ended(
    cm: CodeMode, calls: Path, spans: InMemorySpanExporter
) -> None:
    asyncio.run(cm.execute_async(DELETE_TWO, subject="alice", approve=answering(1)))
    finished = spans.get_finished_spans()
    approvals = [
        (s.name, (s.attributes or {}).get("codemode.approval"))
        for s in finished
        if s.name == "codemode.call tickets.delete"
    ]
    assert approvals == [
        ("codemode.call tickets.delete", "asked"),
        ("codemode.call tickets.delete", "approved"),
        ("codemode.call tickets.delete", "asked"),
        ("codemode.call tickets.delete", "declined"),
    ]
    outcomes = [
        (s.attributes or {}).get("codemode.outcome")
        for s in finished
        if s.name == "codemode.execute"
    ]
    assert outcomes == ["paused", "paused", "ok"]
    assert all(CANARY not in json.dumps(dict(s.attributes or {})) for s in finished)


def test_the_approved_call_runs_with_the_arguments_the_person_saw(calls: Path) -> None:
    """A validator that changes a value runs once, as for any call: the person is shown
    its result, and that is what the handler gets."""
    seen: list[dict[str, Any]] = []
    ran_with: list[str] = []

    def ask(request: AuthorizationRequest) -> RequireApproval:
        return RequireApproval("Delete it?")

    with CodeMode(authorizer=ask) as cm:

        @cm.capability("files.delete", summary="Delete a file.")
        def delete(*, path: Annotated[str, AfterValidator(lambda p: "/srv/" + p)]) -> str:
            ran_with.append(path)
            return path

        async def approve(request: ApprovalRequest) -> bool:
            seen.append(request.arguments)
            return True

        source = "def main():\n    return files.delete(path='report.txt')\n"
        result = asyncio.run(cm.execute_async(source, subject="alice", approve=approve))
    assert seen == [{"path": "/srv/report.txt"}]
    assert ran_with == ["/srv/report.txt"] and result.value == "/srv/report.txt"


def test_a_state_paused_by_another_process_is_refused_without_a_shared_guard(
    calls: Path,
) -> None:
    with build() as first, build() as second:  # two processes' own guards
        state = paused(first).state
        with pytest.raises(ResumeRefusedError) as raised:
            asyncio.run(second.resume_async(state, subject="alice", answers={"approval-2": True}))
    assert str(raised.value) == (
        "resume refused: the program was paused where this server cannot tell whether it "
        "resumed already (another server process, or before its replay guard was reset); "
        "run it again"
    )
    shared = InProcessReplayGuard()  # as replicas share one in Redis
    with build() as first, build() as second:
        first.replay_guard = second.replay_guard = shared
        state = paused(first).state
        done = asyncio.run(
            second.resume_async(state, subject="alice", answers={"approval-2": True})
        )
        assert isinstance(done, ExecutionResult) and done.value is True
        with pytest.raises(ResumeRefusedError):
            asyncio.run(first.resume_async(state, subject="alice", answers={"approval-2": True}))
    assert ran(calls) == ["list", "list", "delete 2"]


def test_a_call_never_awaited_is_never_asked_about(cm: CodeMode, calls: Path) -> None:
    source = "async def main():\n    pending = tickets.delete(id=1)\n    return 1\n"
    approve = answering(1)
    for _ in range(3):  # whichever comes first, the program's end or the question
        result = asyncio.run(cm.execute_async(source, subject="alice", approve=approve))
        assert result.value == 1
    assert approve.asked == [] and ran(calls) == []


def test_a_program_whose_interpreter_cannot_be_dumped_cannot_pause(cm: CodeMode) -> None:
    source = (
        "def main():\n    big = 'a' * 90_000_000\n    return [tickets.delete(id=1), len(big)]\n"
    )
    with pytest.raises(ResourceLimitError) as raised:
        asyncio.run(cm.execute_async(source, subject="alice", approve=answering(1)))
    assert str(raised.value) == (
        "resource limit exceeded: paused program size (limit 1 MiB) at <codemode>:3:13"
    )


def test_a_state_holding_more_than_this_server_takes_is_refused(calls: Path) -> None:
    holds = (
        "import hashlib\n"
        "def main():\n"
        "    rows = [hashlib.sha256(str(i).encode()).digest() for i in range(3000)]\n"
        "    return tickets.delete(id=1)\n"
    )
    with build() as cm:
        state = paused(cm, holds).state
        cm.limits = Limits(max_paused_bytes=64 * 1024)
        with pytest.raises(ResumeRefusedError) as raised:
            asyncio.run(cm.resume_async(state, subject="alice", answers={"approval-2": True}))
    assert str(raised.value) == "resume refused: the paused program cannot be read"
    assert ran(calls) == []


def test_a_sync_approver_is_asked_on_a_thread(cm: CodeMode, calls: Path) -> None:
    def yes(request: ApprovalRequest) -> bool:
        return True

    result = asyncio.run(cm.execute_async(UNCAUGHT, subject="alice", approve=yes))
    assert result.value is True


def test_a_resumed_program_that_may_not_pause_again_fails_closed(cm: CodeMode, calls: Path) -> None:
    first = paused(cm, DELETE_TWO)
    again = asyncio.run(
        cm.resume_async(first.state, subject="alice", answers={"approval-2": True}, pausable=False)
    )
    assert isinstance(again, ExecutionResult)
    assert again.value == [True, UNAVAILABLE]


def test_the_redis_guard_lets_one_replica_alone_claim_a_state(redis_url: str) -> None:
    async def claims() -> list[bool | None]:
        first, second = RedisReplayGuard.from_url(redis_url), RedisReplayGuard.from_url(redis_url)
        other_db = RedisReplayGuard.from_url(redis_url.replace("/0", "/1"))
        scope = await first.scope()
        assert await second.scope() == scope != await other_db.scope()
        won = [await first.claim("s-1", scope, 5), await second.claim("s-1", scope, 5)]
        await second.release("s-1")
        again = await second.claim("s-1", scope, 5)
        async with redis.asyncio.Redis.from_url(redis_url) as client:
            await client.flushdb()  # Redis forgot: what was paused before is refused
        forgot = await first.claim("s-2", scope, 5)
        return [*won, again, forgot, await other_db.claim("s-3", scope, 5)]

    assert asyncio.run(claims()) == [True, False, True, None, None]
    assert RedisReplayGuard.unreachable(redis_url) is None
    assert RedisReplayGuard.unreachable("redis://127.0.0.1:1/0") == "ConnectionError"
    with pytest.raises(ValueError, match="must be a Redis URL"):
        RedisReplayGuard.check_url("localhost:6379")


async def yes(request: ApprovalRequest) -> bool:
    return True


def test_a_program_built_dataclass_can_be_approved() -> None:
    with CodeMode(authorizer=lambda request: RequireApproval("Store it?")) as asking:

        @asking.capability("rows.store", summary="Store a row.")
        def store(*, row: dict[str, Any]) -> dict[str, Any]:
            return row

        source = (
            "from dataclasses import dataclass\n"
            "@dataclass\nclass Row:\n    id: int\n    name: str\n"
            "def main():\n    return rows.store(row=Row(1, 'z'))\n"
        )
        result = asyncio.run(asking.execute_async(source, subject="alice", approve=yes))
    assert result.value == {"id": 1, "name": "z"}


_STAMPS = itertools.count()


def _stamped(path: str) -> str:
    """A validator whose value changes every time (a timestamp, a counter)."""
    return f"{path}.{next(_STAMPS)}"


def test_a_validator_that_changes_its_mind_never_runs_the_call(calls: Path) -> None:
    events: list[Event] = []
    ran_with: list[str] = []
    with CodeMode(authorizer=lambda request: RequireApproval("Go?")) as cm:
        cm.configure(on_event=events.append)

        @cm.capability("files.stamp", summary="Stamp a file.")
        def stamp(*, path: Annotated[str, AfterValidator(_stamped)]) -> str:
            ran_with.append(path)
            return path

        source = "def main():\n    return files.stamp(path='a')\n"
        with pytest.raises(InternalError):
            asyncio.run(cm.execute_async(source, subject="alice", approve=lambda r: True))
    assert ran_with == []
    kinds = [type(e).__name__ for e in events if isinstance(e, CallEvent)]
    assert kinds == ["CallAttempted", "ApprovalAsked", "ApprovalGranted", "CallFailed"]


def test_a_state_refused_a_slot_can_be_resumed_again(cm: CodeMode, calls: Path) -> None:
    first = paused(cm)
    with build() as full:  # a replica with no slot for anyone (as when its queue is full)
        full.replay_guard = cm.replay_guard
        running_engine(full).admission.close()
        with pytest.raises(CodeModeError):
            answers = {"approval-2": True}
            asyncio.run(full.resume_async(first.state, subject="alice", answers=answers))
    done = asyncio.run(cm.resume_async(first.state, subject="alice", answers={"approval-2": True}))
    assert isinstance(done, ExecutionResult) and done.value is True
    assert ran(calls) == ["list", "delete 2"]


def test_a_redis_that_never_answers_refuses_the_state(
    calls: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    monkeypatch.setattr(RedisReplayGuard, "TIMEOUT_SECONDS", 0.2)
    url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
    try:
        with build() as cm:
            cm.replay_guard = RedisReplayGuard.from_url(redis_url)
            state = paused(cm).state  # paused under the shared guard's epoch
            cm.replay_guard = RedisReplayGuard.from_url(url)  # which now never answers
            with pytest.raises(ResumeRefusedError) as raised:
                asyncio.run(cm.resume_async(state, subject="alice", answers={"approval-2": True}))
    finally:
        silent.close()
    assert str(raised.value) == (
        "resume refused: the server cannot tell whether this paused program resumed already; "
        "run it again"
    )
    assert ran(calls) == ["list"]


def test_a_list_or_object_is_never_cut_so_no_entry_hides_past_the_cut() -> None:
    """A long memo and a payee placed as the 41st key of a dict: the strings are cut, every
    key is shown; entries too many to show whole are not asked about at all."""
    payees = {f"payee_{i:02}": 1 for i in range(40)} | {"mallory": 99999900}
    text = arguments_text({"memo": "x" * 5000, "payees": payees})
    assert text is not None and '"mallory": 99999900' in text
    assert '"memo": "' + "x" * 256 + '"… (4744 more characters)' in text
    nested: Any = 0
    for _ in range(60):
        nested = [nested]
    assert arguments_text({"v": [nested] * 5000}) is None


def _many_parameters(cm: CodeMode, count: int) -> str:
    """A capability of `count` keyword parameters, and a program that calls it with all."""
    names = [f"parameter_number_{i}" for i in range(count)]
    namespace: dict[str, Any] = {}
    exec(
        f"def store(*, {', '.join(f'{n}: int' for n in names)}) -> bool:\n    return True",
        namespace,
    )
    cm.capability("rows.store", summary="Store a row.")(namespace["store"])
    call = f"rows.store({', '.join(f'{n}=1' for n in names)})"
    return (
        f"def main():\n    try:\n        return {call}\n"
        "    except PermissionError as error:\n        return str(error)\n"
    )


def test_a_call_too_large_to_show_is_not_asked_about(calls: Path) -> None:
    """Arguments that do not fit the question even cut cannot be shown faithfully: no one
    is asked about them, and the call fails closed."""
    events: list[Event] = []
    approve = answering()
    with CodeMode(authorizer=lambda request: RequireApproval("Store it?")) as cm:
        cm.configure(on_event=events.append)
        source = _many_parameters(cm, 250)
        assert arguments_text({f"parameter_number_{i}": 1 for i in range(250)}) is None
        result = asyncio.run(cm.execute_async(source, subject="alice", approve=approve))
    assert result.value == UNAVAILABLE
    assert approve.asked == []
    assert not any(isinstance(e, ApprovalAsked) for e in events)


async def _flush(url: str) -> None:
    async with redis.asyncio.Redis.from_url(url) as client:
        await client.flushdb()


def test_after_redis_forgets_the_states_paused_since_resume(calls: Path, redis_url: str) -> None:
    with build() as first, build() as second:
        first.replay_guard = RedisReplayGuard.from_url(redis_url)
        second.replay_guard = RedisReplayGuard.from_url(redis_url)
        before = paused(first).state
        asyncio.run(_flush(redis_url))
        yes = {"approval-2": True}
        with pytest.raises(ResumeRefusedError):  # what was paused before the loss: refused
            asyncio.run(second.resume_async(before, subject="alice", answers=yes))
        after = paused(first).state  # the pausing replica reads the new epoch at once
        done = asyncio.run(second.resume_async(after, subject="alice", answers=yes))
        assert isinstance(done, ExecutionResult) and done.value is True
    assert ran(calls) == ["list", "list", "delete 2"]


def test_with_no_replay_guard_to_vouch_no_one_is_asked(calls: Path) -> None:
    with build() as cm:
        cm.replay_guard = RedisReplayGuard.from_url("redis://127.0.0.1:1/0")  # refused at once
        outcome = asyncio.run(cm.start_async(DELETE_TWO, subject="alice"))
    assert isinstance(outcome, ExecutionResult)
    assert outcome.value == [UNAVAILABLE, UNAVAILABLE]
    assert ran(calls) == ["list"]


def test_approval_asked_is_recorded_only_when_a_person_is_asked(calls: Path) -> None:
    events: list[Event] = []
    with build() as cm:
        cm.configure(on_event=events.append)
        cm.replay_guard = RedisReplayGuard.from_url("redis://127.0.0.1:1/0")  # refused at once
        outcome = asyncio.run(cm.start_async(DELETE_TWO, subject="alice"))
    assert isinstance(outcome, ExecutionResult)
    assert outcome.value == [UNAVAILABLE, UNAVAILABLE]  # no one was asked
    assert not any(isinstance(e, ApprovalAsked) for e in events)
    assert [e.capability for e in events if isinstance(e, CallDenied)] == ["tickets.delete"] * 2


def test_a_question_that_cannot_be_audited_is_not_asked(calls: Path) -> None:
    def sink(event: Event) -> None:
        if isinstance(event, ApprovalAsked):
            raise OSError("the audit log is full")

    approve = answering(1, 2)
    with build() as cm:
        cm.configure(on_event=sink)
        result = asyncio.run(cm.execute_async(DELETE_TWO, subject="alice", approve=approve))
    assert result.value == [UNAVAILABLE, UNAVAILABLE]
    assert approve.asked == [] and ran(calls) == ["list"]


def test_a_program_past_its_pause_bound_is_let_go_before_its_state_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its dump is measured as it arrives: nothing more is made of it (compressed,
    encoded), so a program holding much costs the server no more than its dump."""
    encoded: list[PausedState] = []
    encode = PausedState.encode

    def recorded(state: PausedState) -> bytes:
        encoded.append(state)
        return encode(state)

    monkeypatch.setattr(PausedState, "encode", recorded)
    with build() as cm:
        too_much_to_pause(cm, "[str(i) * 20 for i in range(20000)]")
        assert encoded == []
        asyncio.run(cm.execute_async(UNCAUGHT, subject="alice", approve=answering(2)))
    assert len(encoded) == 1  # one that fits is made as before


def test_a_claim_lasts_as_long_as_the_state_can_be_taken_anywhere(calls: Path) -> None:
    """Two replicas of different approval waits: the state paused by the one of the
    longer wait, resumed by the other, stays claimed for the whole life the pausing one
    gave it (and the clock skew margin), not for the resuming one's own wait."""
    now = [0.0]
    shared = InProcessReplayGuard(clock=lambda: now[0])
    with build() as long_wait, build() as short_wait:
        long_wait.replay_guard = short_wait.replay_guard = shared
        short_wait.limits = Limits(max_approval_wait_seconds=5)
        state = paused(long_wait).state
        yes = {"approval-2": True}
        done = asyncio.run(short_wait.resume_async(state, subject="alice", answers=yes))
        assert isinstance(done, ExecutionResult) and done.value is True
        now[0] += 11  # past the short wait's whole state life, within the long one's
        with pytest.raises(ResumeRefusedError) as raised:
            asyncio.run(long_wait.resume_async(state, subject="alice", answers=yes))
        assert str(raised.value) == "resume refused: this paused program was resumed already"
        now[0] += 660 + CLOCK_SKEW_SECONDS - 11 - 1  # and even a skewed clock's
        with pytest.raises(ResumeRefusedError):
            asyncio.run(long_wait.resume_async(state, subject="alice", answers=yes))
    assert ran(calls) == ["list", "delete 2"]
    assert claim_seconds(1000.0, 400.0) == 600 + CLOCK_SKEW_SECONDS
    assert claim_seconds(1000.0, 2000.0) == CLOCK_SKEW_SECONDS


def test_a_state_past_its_own_expiry_is_refused_whatever_the_wait(calls: Path) -> None:
    with build() as short_wait, build() as long_wait:
        long_wait.replay_guard = short_wait.replay_guard = InProcessReplayGuard()
        short_wait.limits = Limits(max_approval_wait_seconds=0.01)
        state = paused(short_wait).state
        time.sleep(0.05)  # past its life of 0.02 s
        with pytest.raises(ResumeRefusedError) as raised:
            asyncio.run(
                long_wait.resume_async(state, subject="alice", answers={"approval-2": True})
            )
    assert str(raised.value) == "resume refused: the paused program expired; run it again"
    assert ran(calls) == ["list"]


def test_the_wait_is_the_pausing_replicas_whatever_the_resuming_ones(calls: Path) -> None:
    """An answer within the wait of the replica that paused the program is in time on a
    replica whose own wait is shorter, and one past it is late on a replica whose own wait
    is longer: the state says when the person had to answer by."""
    with build() as long_wait, build() as short_wait:
        long_wait.replay_guard = short_wait.replay_guard = InProcessReplayGuard()
        long_wait.limits = Limits(max_approval_wait_seconds=600)
        short_wait.limits = Limits(max_approval_wait_seconds=0.01)
        state = paused(long_wait).state
        time.sleep(0.05)  # past the short wait, well within the long one
        done = asyncio.run(
            short_wait.resume_async(state, subject="alice", answers={"approval-2": True})
        )
        assert isinstance(done, ExecutionResult) and done.value is True
        # A state whose person had to answer a second ago, though it is still valid.
        late = PausedState.decode(paused(short_wait).state, 1 << 20)
        late = dataclasses.replace(
            late, asks=tuple(dataclasses.replace(a, asked_at=time.time() - 1) for a in late.asks)
        )
        with pytest.raises(ApprovalTimedOutError) as raised:
            asyncio.run(
                long_wait.resume_async(late.encode(), subject="alice", answers={"approval-2": True})
            )
    assert str(raised.value) == "approval timed out: no one answered within 0.01 s"
    assert ran(calls) == ["list", "delete 2", "list"]
