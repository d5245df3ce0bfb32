"""Pausing: a call that waits for a person pauses the program, and a pause goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from codemode import AgentError, CodeMode
from codemode.authz import AuthorizationRequest, RequireApproval
from codemode.continuations import Paused, PausedState, Verdict
from codemode.errors import CodeModeError
from codemode.events import Event
from codemode.limits import Limits
from codemode.runtime.outcome import ExecutionResult
from codemode.runtime.sandbox import MontySandbox
from codemode.testing import ManualClock, ProgramRaised, ScriptedProgram, ScriptedSandbox
from tests.conftest import GUARD
from tests.runtime.running import capability, engine, execution, kinds

SOURCE = """\
def main():
    rows = tickets.list()
    try:
        return [len(rows), tickets.delete(id=1)]
    except PermissionError as error:
        return [len(rows), str(error)]
"""


def ask_before_deleting(request: AuthorizationRequest) -> RequireApproval | None:
    if request.capability_name == "tickets.delete":
        return RequireApproval("Delete ticket 1?")
    return None


def list_tickets() -> list[int]:
    return [1, 2, 3]


def delete(*, id: int) -> bool:
    return True


TICKETS = [capability("tickets.list", list_tickets), capability("tickets.delete", delete)]


def script(program: ScriptedProgram) -> Generator[Any, Any, Any]:
    rows = yield program.call("tickets.list", line=2)
    try:
        return [len(rows), (yield program.call("tickets.delete", line=4, id=1))]
    except ProgramRaised as raised:
        return [len(rows), f"{raised.exc_type}: {raised.message}"]


def test_where_no_one_can_be_asked_the_call_fails_closed_inside_the_program() -> None:
    events: list[Event] = []
    with engine(ScriptedSandbox(script), clock=ManualClock()) as on:
        run = execution(on, SOURCE, TICKETS, events=events, authorizer=ask_before_deleting)
        result = on.execute(run)
        assert run.ended.wait(GUARD)
    assert isinstance(result, ExecutionResult)
    assert result.value == [
        3,
        "PermissionError: approval unavailable: this call needs a person's approval, and no "
        "one can be asked for it here",
    ]
    assert list(run.pausing.asked()) == []
    assert kinds(events) == [
        "ExecutionStarted",
        *["CallAttempted", "CallAuthorized", "CallCompleted"],
        *["CallAttempted", "CallDenied"],
        "ExecutionFinished",
    ]


def test_a_program_that_cannot_be_dumped_cannot_pause() -> None:
    events: list[Event] = []
    with engine(ScriptedSandbox(script), clock=ManualClock()) as on:
        run = execution(
            on, SOURCE, TICKETS, events=events, authorizer=ask_before_deleting, pausable=True
        )
        with pytest.raises(CodeModeError) as caught:
            on.execute(run)
        assert run.ended.wait(GUARD)
    assert str(caught.value) == (
        "resource limit exceeded: paused program size (limit 1 MiB) at <codemode>:4:9"
    )
    assert list(run.pausing.asked()) == [2]  # the call waited for a person
    assert kinds(events) == [
        "ExecutionStarted",
        *["CallAttempted", "CallAuthorized", "CallCompleted"],
        "CallAttempted",
        "ExecutionFinished",
    ]


def test_a_paused_program_goes_on_with_the_persons_verdict_as_one_execution() -> None:
    limits = Limits()
    events: list[Event] = []
    with engine(MontySandbox(limits), limits=limits) as on:
        first = execution(
            on, SOURCE, TICKETS, events=events, authorizer=ask_before_deleting, pausable=True
        )
        paused = on.execute(first)
        assert first.ended.wait(GUARD)
        assert isinstance(paused, Paused)
        assert [(r.key, r.capability_name, r.arguments) for r in paused.requests] == [
            ("approval-2", "tickets.delete", {"id": 1})
        ]
        before = len(events)
        state = PausedState.decode(paused.state, limits.max_paused_bytes)
        resumed = execution(
            on,
            SOURCE,
            TICKETS,
            events=events,
            authorizer=ask_before_deleting,
            restored=state,
            verdicts={"approval-2": Verdict.APPROVED},
        )
        result = on.execute(resumed)
        assert resumed.ended.wait(GUARD)

    assert isinstance(result, ExecutionResult)
    assert result.value == [3, True]
    assert result.usage.capability_calls == ("tickets.list", "tickets.delete")
    assert resumed.execution_id == first.execution_id
    assert kinds(events[:before]) == [  # paused: it has not ended
        "ExecutionStarted",
        *["CallAttempted", "CallAuthorized", "CallCompleted"],
        "CallAttempted",
    ]
    assert kinds(events[before:]) == [  # resumed: it did not start again
        "ApprovalGranted",
        "CallAuthorized",
        "CallCompleted",
        "ExecutionFinished",
    ]


def test_a_resumed_execution_given_no_verdict_declines_the_call() -> None:
    """Review of `Pausing.restore`: its docstring (and 9db4eb5's `Execution._restore`,
    `verdicts.get(ask.key, Verdict.DECLINED)`) says a call with no verdict is declined;
    it now indexes `verdicts[ask.key]`, so an Execution built with `restored` and no (or
    partial) `verdicts` raises KeyError as it is constructed."""
    limits = Limits()
    with engine(MontySandbox(limits), limits=limits) as on:
        first = execution(on, SOURCE, TICKETS, authorizer=ask_before_deleting, pausable=True)
        paused = on.execute(first)
        assert first.ended.wait(GUARD)
        assert isinstance(paused, Paused)
        state = PausedState.decode(paused.state, limits.max_paused_bytes)
        resumed = execution(on, SOURCE, TICKETS, authorizer=ask_before_deleting, restored=state)
        result = on.execute(resumed)
        assert resumed.ended.wait(GUARD)
    assert isinstance(result, ExecutionResult)
    assert result.value == [3, "approval declined: a person declined this call; do not retry it"]


def test_a_failure_caught_before_a_pause_reads_as_the_same_data_after_it() -> None:
    """What `error_data` knows of the program's own failures goes into its sealed state."""
    cm = CodeMode(authorizer=ask_before_deleting)

    @cm.capability("tickets.list", summary="List the tickets.")
    def failing_list() -> list[int]:
        raise AgentError("the index is rebuilding", kind="unavailable")

    cm.capability("tickets.delete", summary="Delete a ticket.")(delete)
    source = (
        "def main():\n"
        "    try:\n"
        "        tickets.list()\n"
        "    except RuntimeError as e:\n"
        "        caught = e\n"
        "    tickets.delete(id=1)\n"
        "    return error_data(caught)\n"
    )
    with cm:
        outcome = asyncio.run(cm.start_async(source, subject="alice"))
        assert isinstance(outcome, Paused)
        (request,) = outcome.requests
        done = asyncio.run(
            cm.resume_async(outcome.state, subject="alice", answers={request.key: True})
        )
    assert isinstance(done, ExecutionResult)
    assert done.value == {"code": "unavailable", "status": None, "fields": {}}
