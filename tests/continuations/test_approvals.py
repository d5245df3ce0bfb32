"""Approvals, the first user of continuations: the one place a verdict is decided, the
requests a pause asks, their audit, and an approver's wait on the engine's clock."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode
from codemode.approvals import ApprovalRequest, Verdict, ask_each, record_asked
from codemode.continuations import decide, paused_as, unavailable, verdicts
from codemode.events import ApprovalAsked, ApprovalTimedOut, Event
from codemode.limits import Limits
from codemode.testing import ManualClock
from tests.approvals.host import DELETE_TWO, UNCAUGHT, answering, build, ran
from tests.continuations.conftest import a_state, an_ask

UNAVAILABLE = (
    "approval unavailable: this call needs a person's approval, and no one can be asked for it here"
)
HANG_GUARD = 30.0
"""Seconds a test waits for another thread before it fails rather than hang."""


@pytest.mark.parametrize(
    ("answer", "asked", "late", "verdict"),
    [
        (True, True, False, Verdict.APPROVED),
        (False, True, False, Verdict.DECLINED),
        (None, True, False, Verdict.DECLINED),
        ("yes", True, False, Verdict.DECLINED),
        (1, True, False, Verdict.DECLINED),
        (True, True, True, Verdict.TIMED_OUT),
        (None, True, True, Verdict.TIMED_OUT),
        (True, False, False, Verdict.UNAVAILABLE),
        (True, False, True, Verdict.UNAVAILABLE),
    ],
)
def test_a_verdict_is_decided_by_one_rule(
    answer: object, asked: bool, late: bool, verdict: Verdict
) -> None:
    """Approved only by an answer that is exactly True, in time, from a person asked."""
    assert decide(answer, asked=asked, late=late) is verdict


def test_the_verdicts_of_a_pause_answered_at_a_moment() -> None:
    state = a_state(asks=(an_ask("approval-2"), an_ask("approval-3", asked_at=900.0)))
    answers = {"approval-2": True, "approval-3": True, "approval-9": True}
    assert verdicts(state, answers, 1550.0) == {"approval-2": "approved", "approval-3": "timed_out"}
    assert verdicts(state, {}, 1500.0) == {"approval-2": "declined", "approval-3": "declined"}
    assert unavailable(state) == {"approval-2": "unavailable", "approval-3": "unavailable"}


def test_a_pause_asks_about_each_of_its_calls() -> None:
    state = a_state(asks=(an_ask("approval-2"), an_ask("approval-3")))
    paused = paused_as(state, b"\nencoded")
    assert paused.state == b"\nencoded"
    assert paused.requests == (
        ApprovalRequest(
            "approval-2",
            "alice",
            "execution-1",
            "tickets.delete",
            "tickets.delete",
            {"id": 2},
            "Delete ticket 2?",
        ),
        ApprovalRequest(
            "approval-3",
            "alice",
            "execution-1",
            "tickets.delete",
            "tickets.delete",
            {"id": 2},
            "Delete ticket 2?",
        ),
    )


def test_each_question_is_audited_before_it_is_asked() -> None:
    paused = paused_as(a_state(asks=(an_ask("approval-2"), an_ask("approval-3"))), b"\n")
    events: list[Event] = []
    assert record_asked(paused, events.append) is True
    asked = [e for e in events if isinstance(e, ApprovalAsked)]
    assert len(events) == len(asked) == 2
    assert [(e.execution_id, e.capability, e.arguments) for e in asked] == [
        ("execution-1", "tickets.delete", {"id": 2})
    ] * 2
    assert record_asked(paused, None) is True

    def full(event: Event) -> None:
        raise OSError("the audit log is full")

    assert record_asked(paused, full) is False


def _asked_on_a_thread(
    approve: Any, clock: ManualClock, limits: Limits | None = None
) -> concurrent.futures.Future[dict[str, Verdict]]:
    """`ask_each` about one delete, on a loop of a thread of its own."""
    paused = paused_as(a_state(), b"\n")
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(asyncio.run, ask_each(paused, approve, limits or Limits(), clock))
    pool.shutdown(wait=False)
    return future


def test_an_approver_who_never_answers_times_out_when_the_clock_says() -> None:
    """The wait is the engine's clock's: nothing ends it until that clock reaches it."""
    clock, entered = ManualClock(), threading.Event()

    async def never(request: ApprovalRequest) -> bool:
        entered.set()
        await asyncio.Event().wait()
        return True

    asking = _asked_on_a_thread(never, clock, Limits(max_approval_wait_seconds=600))
    assert entered.wait(HANG_GUARD)
    clock.advance(599.5)
    assert not asking.done() and clock.pending == 1
    clock.advance(0.5)
    assert asking.result(HANG_GUARD) == {"approval-2": Verdict.TIMED_OUT}
    assert clock.pending == 0


def test_an_answer_in_time_lets_go_of_the_wait() -> None:
    clock = ManualClock()

    def yes(request: ApprovalRequest) -> bool:  # a sync approver: on a thread of its own
        return True

    assert _asked_on_a_thread(yes, clock).result(HANG_GUARD) == {"approval-2": Verdict.APPROVED}
    assert clock.pending == 0  # its timer was cancelled


def test_an_approver_that_fails_declines() -> None:
    async def broken(request: ApprovalRequest) -> bool:
        raise RuntimeError("the approvals service is down")

    verdict = _asked_on_a_thread(broken, ManualClock()).result(HANG_GUARD)
    assert verdict == {"approval-2": Verdict.DECLINED}


def test_the_caller_cancelled_is_not_a_time_out() -> None:
    """Cancelling the request cancels the question; the clock's timer goes with it."""
    clock = ManualClock()
    paused = paused_as(a_state(), b"\n")

    async def cancelled() -> None:
        entered = asyncio.Event()

        async def never(request: ApprovalRequest) -> bool:
            entered.set()
            await asyncio.Event().wait()
            return True

        task = asyncio.ensure_future(ask_each(paused, never, Limits(), clock))
        await entered.wait()
        assert clock.pending == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert clock.pending == 0


def test_a_sync_approver_is_asked_on_a_thread(cm: CodeMode, calls: Path) -> None:
    def yes(request: ApprovalRequest) -> bool:
        return True

    result = asyncio.run(cm.execute_async(UNCAUGHT, subject="alice", approve=yes))
    assert result.value is True


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
