"""A person approves a call in the middle of a program: the library's side, in the real
sandbox (a paused program is the interpreter's own dump, resumed in another worker)."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import AfterValidator

from codemode import CodeMode, Limits
from codemode.approvals import ApprovalRequest
from codemode.authz import AuthorizationRequest, RequireApproval
from codemode.errors import (
    ApprovalDeclinedError,
    ApprovalUnavailableError,
    ErrorCode,
    InternalError,
    ResourceLimitError,
)
from codemode.events import (
    ApprovalAsked,
    ApprovalDeclined,
    ApprovalGranted,
    CallEvent,
    Event,
    ExecutionFinished,
    ExecutionStarted,
)
from codemode.questions import arguments_text
from tests.approvals.host import CANARY, DELETE_TWO, UNCAUGHT, answering, build, ran

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


def test_the_caller_that_cannot_ask_may_say_why(cm: CodeMode, calls: Path) -> None:
    """`unavailable` is the error's text, caught or not (an adapter knows why its channel
    cannot ask, the runtime does not)."""
    why = "no one can be asked over this channel: use another"
    result = asyncio.run(cm.execute_async(DELETE_TWO, subject="alice", unavailable=why))
    assert result.value == [f"approval unavailable: {why}"] * 2
    with pytest.raises(ApprovalUnavailableError) as raised:
        asyncio.run(cm.execute_async(UNCAUGHT, subject="alice", unavailable=why))
    assert str(raised.value) == f"approval unavailable: {why}"
    assert raised.value.where is not None and raised.value.where.line == 3
    assert ran(calls) == ["list", "list"]


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


def test_a_call_never_awaited_is_never_asked_about(cm: CodeMode, calls: Path) -> None:
    source = "async def main():\n    pending = tickets.delete(id=1)\n    return 1\n"
    approve = answering(1)
    for _ in range(3):  # whichever comes first, the program's end or the question
        result = asyncio.run(cm.execute_async(source, subject="alice", approve=approve))
        assert result.value == 1
    assert approve.asked == [] and ran(calls) == []


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
