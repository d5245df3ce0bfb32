"""The resume protocol: the order in which a paused state is read, checked, claimed and
run on (on an engine that records what it is asked, and a clock moved by hand), and the
same protocol through a CodeMode with the real sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode, Limits
from codemode.approvals import InProcessReplayGuard, RedisReplayGuard
from codemode.clock import wall
from codemode.continuations import (
    Paused,
    PausedState,
    Resumer,
    Verdict,
    paused_as,
    stamped,
)
from codemode.errors import (
    ApprovalTimedOutError,
    CodeModeError,
    ResourceLimitError,
    ResumeRefusedError,
    UnauthenticatedError,
)
from codemode.events import ApprovalAsked, CallDenied, Event
from codemode.runtime import ExecutionResult
from codemode.testing import ManualClock, running_engine
from tests.approvals.host import DELETE_TWO, build, paused, ran
from tests.continuations.conftest import a_state, an_ask

UNAVAILABLE = (
    "approval unavailable: this call needs a person's approval, and no one can be asked for it here"
)


class RecordingGuard(InProcessReplayGuard):
    """This process's guard, writing down what it is asked in the engine's log."""

    def __init__(self, log: list[str], clock: ManualClock) -> None:
        super().__init__(clock=clock.now)
        self.log = log
        self.fails = False
        self.claiming = False

    async def scope(self) -> str:
        if not self.claiming:  # a claim reads it too
            self.log.append("scope")
            if self.fails:
                raise ConnectionError("Redis is gone")
        return await super().scope()

    async def claim(self, state_id: str, scope: str, seconds: float) -> bool | None:
        self.claiming = True
        try:
            claimed = await super().claim(state_id, scope, seconds)
        finally:
            self.claiming = False
        self.log.append(f"claim {state_id}: {claimed}")
        return claimed

    async def release(self, state_id: str) -> None:
        self.log.append(f"release {state_id}")
        await super().release(state_id)


class RecordingEngine:
    """An engine that runs nothing: each run answers the next of `outcomes`, and every
    step the protocol asks of it is written down in `log`, in order."""

    def __init__(self, clock: ManualClock, *outcomes: object) -> None:
        self.clock = clock
        self.log: list[str] = []
        self.limits = Limits()
        self.replay_guard = RecordingGuard(self.log, clock)
        self.on_event = self.asked
        self.catalog = "digest-1"
        self.outcomes = list(outcomes)
        self.slots = True

    def asked(self, event: Event) -> None:
        assert isinstance(event, ApprovalAsked)
        self.log.append(f"asked {event.capability}")

    def admit(self, subject: str) -> ManualClock:
        self.log.append(f"admit {subject}")
        if not subject:
            raise UnauthenticatedError()
        return self.clock

    async def start(
        self, source: str, subject: str, pausable: bool, unavailable: str | None = None
    ) -> object:
        self.log.append(f"start pausable={pausable}")
        return self.outcomes.pop(0)

    async def open(self, subject: str, execution_id: str) -> RecordingRun:
        self.log.append(f"open {execution_id}")
        return RecordingRun(self)

    def last_resort(self, what: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


class RecordingRun:
    def __init__(self, engine: RecordingEngine) -> None:
        self.engine = engine
        self.began = False

    async def digest(self) -> str:
        self.engine.log.append("digest")
        return self.engine.catalog

    async def run(
        self, state: PausedState, verdicts: Mapping[str, Verdict], pausable: bool
    ) -> object:
        answered = ", ".join(f"{key}={verdict.value}" for key, verdict in verdicts.items())
        self.engine.log.append(f"run {state.id} {answered} pausable={pausable}")
        if not self.engine.slots:
            raise ResourceLimitError("programs waiting to run (limit 128)")
        self.began = True
        return self.engine.outcomes.pop(0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engine(clock: ManualClock) -> RecordingEngine:
    return RecordingEngine(clock)


def sealed(engine: RecordingEngine, **changes: Any) -> bytes:
    """A state paused now on `engine`'s clock (asked now, valid 660 s), stamped with its
    guard's scope."""
    now = wall(engine.clock)
    state = a_state(asks=(an_ask(asked_at=now),), expires_at=now + 660, **changes)
    scope = asyncio.run(engine.replay_guard.scope())
    engine.log.clear()
    return stamped(state.encode(), scope)


def resume(engine: RecordingEngine, state: bytes, subject: str = "alice", **answers: bool) -> Any:
    resumer = Resumer[object](engine)
    answered = {key.replace("_", "-"): value for key, value in answers.items()}
    return asyncio.run(resumer.resume(state, subject, answered, True))


def refused(engine: RecordingEngine, state: bytes, subject: str = "alice") -> str:
    with pytest.raises(ResumeRefusedError) as raised:
        resume(engine, state, subject, approval_2=True)
    return str(raised.value).removeprefix("resume refused: ")


def test_a_state_is_read_admitted_decided_checked_claimed_then_run(
    engine: RecordingEngine,
) -> None:
    state = sealed(engine)
    engine.outcomes.append("done")
    assert resume(engine, state, approval_2=True) == "done"
    assert engine.log == [
        "admit alice",
        "open execution-1",
        "digest",
        "claim state-1: True",
        "run state-1 approval-2=approved pausable=True",
    ]


def test_a_request_left_out_of_the_answers_is_declined(engine: RecordingEngine) -> None:
    state = sealed(engine)
    engine.outcomes.append("done")
    resume(engine, state, approval_9=True)
    assert engine.log[-1] == "run state-1 approval-2=declined pausable=True"


def test_an_answer_is_late_once_the_pausing_replicas_wait_has_passed_on_the_clock(
    engine: RecordingEngine, clock: ManualClock
) -> None:
    """The wait the state names (600 s), whatever this replica's own: an answer at its
    last moment is in time, one half a second past it is late."""
    engine.limits = Limits(max_approval_wait_seconds=5)
    first, second = sealed(engine, id="state-1"), sealed(engine, id="state-2")
    engine.outcomes += ["first", "second"]
    clock.advance(599.5)
    resume(engine, first, approval_2=True)
    clock.advance(1)
    resume(engine, second, approval_2=True)
    runs = [line for line in engine.log if line.startswith("run")]
    assert runs == [
        "run state-1 approval-2=approved pausable=True",
        "run state-2 approval-2=timed_out pausable=True",
    ]


def test_a_state_expires_on_the_clock_whatever_this_replicas_wait(
    engine: RecordingEngine, clock: ManualClock
) -> None:
    engine.limits = Limits(max_approval_wait_seconds=5)
    first, second = sealed(engine, id="state-1"), sealed(engine, id="state-2")
    engine.outcomes.append("in time")
    clock.advance(659.5)
    assert resume(engine, first, approval_2=True) == "in time"
    clock.advance(1)
    engine.log.clear()
    assert refused(engine, second) == "the paused program expired; run it again"
    assert engine.log == ["admit alice", "open execution-1", "digest"]  # nothing claimed


def test_a_claim_is_kept_as_long_as_the_state_is_valid_anywhere(
    engine: RecordingEngine, clock: ManualClock
) -> None:
    """Claimed now, the state stays claimed until its own expiry and the clock skew after
    it, though this replica's wait is 5 s."""
    engine.limits = Limits(max_approval_wait_seconds=5)
    state = sealed(engine)
    engine.outcomes.append("done")
    resume(engine, state, approval_2=True)
    scope = asyncio.run(engine.replay_guard.scope())
    clock.advance(660 + 299)
    assert asyncio.run(engine.replay_guard.claim("state-1", scope, 1)) is False
    clock.advance(2)
    assert asyncio.run(engine.replay_guard.claim("state-1", scope, 1)) is True


def test_each_refusal_comes_before_anything_runs(engine: RecordingEngine) -> None:
    state = sealed(engine)
    assert refused(engine, state, "bob") == "the paused program belongs to another caller"
    assert engine.log == ["admit bob"]
    engine.log.clear()
    with pytest.raises(UnauthenticatedError):
        resume(engine, state, "", approval_2=True)
    assert engine.log == ["admit "]
    engine.log.clear()
    engine.catalog = "digest-2"
    assert refused(engine, state) == (
        "the capabilities changed while the program was paused; run it again"
    )
    assert engine.log == ["admit alice", "open execution-1", "digest"]
    engine.catalog = "digest-1"
    engine.outcomes.append("done")
    resume(engine, state, approval_2=True)
    engine.log.clear()
    assert refused(engine, state) == "this paused program was resumed already"
    assert engine.log == ["admit alice", "open execution-1", "digest", "claim state-1: False"]
    other = b"process:another:1" + state[state.index(b"\n") :]
    assert refused(engine, other) == (
        "the program was paused where this server cannot tell whether it resumed already "
        "(another server process, or before its replay guard was reset); run it again"
    )
    assert refused(engine, b"garbage") == "the paused program cannot be read"


def test_a_state_refused_a_slot_is_let_go_to_be_sent_again(engine: RecordingEngine) -> None:
    state = sealed(engine)
    engine.slots = False
    with pytest.raises(ResourceLimitError):
        resume(engine, state, approval_2=True)
    assert engine.log[-2:] == [
        "run state-1 approval-2=approved pausable=True",
        "release state-1",
    ]
    engine.slots = True
    engine.outcomes.append("done")
    assert resume(engine, state, approval_2=True) == "done"


def test_a_pause_is_stamped_with_the_scope_then_the_person_is_asked(
    engine: RecordingEngine,
) -> None:
    state = a_state()
    engine.outcomes.append(paused_as(state, state.encode()))
    outcome = asyncio.run(Resumer[object](engine).start("source", "alice", True))
    assert isinstance(outcome, Paused)
    scope = asyncio.run(engine.replay_guard.scope())
    assert outcome.state == stamped(state.encode(), scope)
    assert engine.log[:3] == ["start pausable=True", "scope", "asked tickets.delete"]


def test_without_a_scope_no_one_is_asked_and_the_calls_fail_closed(
    engine: RecordingEngine,
) -> None:
    state = a_state()
    engine.replay_guard.fails = True
    engine.outcomes += [paused_as(state, state.encode()), "went on"]
    outcome = asyncio.run(Resumer[object](engine).start("source", "alice", True))
    assert outcome == "went on"
    assert engine.log == [
        "start pausable=True",
        "scope",
        "admit alice",
        "open execution-1",
        "digest",
        "run state-1 approval-2=unavailable pausable=True",
    ]


def test_execute_asks_in_this_process_and_claims_nothing(engine: RecordingEngine) -> None:
    """The state never left the process: no guard is asked, no scope stamped."""
    state = a_state()
    engine.outcomes += [paused_as(state, state.encode()), "done"]

    async def approve(request: Any) -> bool:
        engine.log.append(f"approve {request.key}")
        return True

    assert asyncio.run(Resumer[object](engine).execute("source", "alice", approve)) == "done"
    assert engine.log == [
        "start pausable=True",
        "admit alice",
        "asked tickets.delete",
        "approve approval-2",
        "open execution-1",
        "digest",
        "run state-1 approval-2=approved pausable=True",
    ]


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


def test_a_resumed_program_that_may_not_pause_again_fails_closed(cm: CodeMode, calls: Path) -> None:
    first = paused(cm, DELETE_TWO)
    again = asyncio.run(
        cm.resume_async(first.state, subject="alice", answers={"approval-2": True}, pausable=False)
    )
    assert isinstance(again, ExecutionResult)
    assert again.value == [True, UNAVAILABLE]


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


def test_a_state_past_its_own_expiry_is_refused_whatever_the_wait(calls: Path) -> None:
    clock = ManualClock()  # the replicas' clocks, moved by hand
    with build(clock) as short_wait, build(clock) as long_wait:
        long_wait.replay_guard = short_wait.replay_guard = InProcessReplayGuard()
        short_wait.limits = Limits(max_approval_wait_seconds=0.01)
        state = paused(short_wait).state
        clock.advance(0.05)  # past its life of 0.02 s
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
    clock = ManualClock()  # the replicas' clocks, moved by hand
    with build(clock) as long_wait, build(clock) as short_wait:
        long_wait.replay_guard = short_wait.replay_guard = InProcessReplayGuard()
        long_wait.limits = Limits(max_approval_wait_seconds=600)
        short_wait.limits = Limits(max_approval_wait_seconds=0.01)
        state = paused(long_wait).state
        clock.advance(0.05)  # past the short wait, well within the long one
        done = asyncio.run(
            short_wait.resume_async(state, subject="alice", answers={"approval-2": True})
        )
        assert isinstance(done, ExecutionResult) and done.value is True
        # A state whose person had to answer a second ago, though it is still valid.
        late = PausedState.decode(paused(short_wait).state, 1 << 20)
        late = dataclasses.replace(
            late, asks=tuple(dataclasses.replace(a, asked_at=a.asked_at - 1) for a in late.asks)
        )
        with pytest.raises(ApprovalTimedOutError) as raised:
            asyncio.run(
                long_wait.resume_async(late.encode(), subject="alice", answers={"approval-2": True})
            )
    assert str(raised.value) == "approval timed out: no one answered within 0.01 s"
    assert ran(calls) == ["list", "delete 2", "list"]


class EpochClock:
    """A host's clock that goes by the calendar (`time.time`): monotonic enough for the
    `Clock` protocol ("seconds that only ever grow"), whose origin is not
    `time.monotonic`'s. Its timers ring on a system clock, moved into its frame."""

    def __init__(self) -> None:
        import time

        from codemode.clock import SystemClock

        self._inner = SystemClock()
        self._offset = time.time() - time.monotonic()

    def now(self) -> float:
        return self._inner.now() + self._offset

    def call_at(self, when: float, callback: Any) -> Any:
        return self._inner.call_at(when - self._offset, callback)


def test_a_state_paused_on_one_replica_is_valid_on_a_replica_with_another_clock(
    calls: Path,
) -> None:
    """Review of `clock.wall`: a paused program's moments cross processes as seconds since
    the epoch, but `wall(clock)` is `clock.now()` plus time.monotonic's distance to the
    calendar, right only for a clock whose origin is time.monotonic's. A replica whose
    host gave another clock reads a state paused a moment ago by a system-clock replica
    as long expired (and one it pauses, as valid for decades); 9db4eb5 used time.time()."""
    with build() as system, build(EpochClock()) as epoch:  # type: ignore[arg-type]
        epoch.replay_guard = system.replay_guard = InProcessReplayGuard()
        state = paused(system).state
        done = asyncio.run(epoch.resume_async(state, subject="alice", answers={"approval-2": True}))
    assert isinstance(done, ExecutionResult) and done.value is True
    assert ran(calls) == ["list", "delete 2"]
