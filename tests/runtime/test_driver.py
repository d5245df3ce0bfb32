"""The driver: the step loop of one program, from its start to its end, in order."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Generator
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.errors import CodeModeError, ErrorCode
from codemode.events import Event, ExecutionFinished
from codemode.limits import Limits
from codemode.runtime import Execution
from codemode.runtime.state import State
from codemode.testing import ManualClock, ProgramRaised, ScriptedProgram, ScriptedSandbox, run
from tests.conftest import GUARD
from tests.runtime.running import capability, engine, execution, finished, kinds

Script = Generator[Any, Any, Any]
TWO_CALLS = "def main():\n    a = users.get(id='u-1')\n    return [a, users.get(id='u-2')]\n"


def get(*, id: str) -> str:
    return id.upper()


def two_calls(program: ScriptedProgram) -> Script:
    first = yield program.call("users.get", line=2, id="u-1")
    second = yield program.call("users.get", line=3, id="u-2")
    return [first, second]


def test_a_sync_main_runs_its_calls_in_order_and_records_its_end_after_the_answer() -> None:
    events: list[Event] = []
    answered_first: list[bool] = []
    runs: list[Execution] = []

    def emit(event: Event) -> None:
        events.append(event)
        if isinstance(event, ExecutionFinished):
            answered_first.append(runs[0].answer.done())

    with engine(ScriptedSandbox(two_calls), clock=ManualClock()) as on:
        run = execution(on, TWO_CALLS, [capability("users.get", get)], emit=emit)
        runs.append(run)
        result = finished(on, run)
        assert run.ended.wait(GUARD)

    assert result.value == ["U-1", "U-2"]
    assert result.usage.capability_calls == ("users.get", "users.get")
    assert kinds(events) == [
        "ExecutionStarted",
        *["CallAttempted", "CallAuthorized", "CallCompleted"] * 2,
        "ExecutionFinished",
    ]
    assert answered_first == [True]  # the caller is answered before the last event
    assert run.state is State.SETTLED


def test_a_call_past_its_capabilitys_bound_stops_the_program_at_that_call() -> None:
    events: list[Event] = []
    with engine(ScriptedSandbox(two_calls), clock=ManualClock()) as on:
        run = execution(
            on, TWO_CALLS, [capability("users.get", get, max_calls_per_execution=1)], events=events
        )
        with pytest.raises(CodeModeError) as caught:
            on.execute(run)
        assert run.ended.wait(GUARD)

    error = caught.value
    assert str(error) == "resource limit exceeded: calls to users.get (limit 1) at <codemode>:3:5"
    assert [call.to_dict() for call in error.calls] == [
        {"capability": "users.get", "line": 2, "outcome": "ok"}
    ]
    assert kinds(events) == [
        "ExecutionStarted",
        "CallAttempted",
        "CallAuthorized",
        "CallCompleted",
        "ExecutionFinished",
    ]
    assert events[-1].outcome == "resource_limit"  # type: ignore[attr-defined]


def test_a_name_the_program_never_defined_fails_inside_it_and_runs_nothing() -> None:
    events: list[Event] = []

    def script(program: ScriptedProgram) -> Script:
        try:
            yield program.call("users.gone", line=2)
        except ProgramRaised as raised:
            return f"{raised.exc_type}: {raised.message}"
        return "no error"

    with engine(ScriptedSandbox(script), clock=ManualClock()) as on:
        run = execution(on, "def main():\n    return 1\n", [], events=events)
        assert finished(on, run).value == "AttributeError: module 'users' has no attribute 'gone'"
        assert run.ended.wait(GUARD)
    assert kinds(events) == ["ExecutionStarted", "ExecutionFinished"]
    assert run.calls.names == []


def test_gathered_calls_of_an_async_main_run_at_once_each_in_a_job_of_its_own() -> None:
    both_in = threading.Barrier(2, timeout=GUARD)

    def meet(*, id: str) -> str:
        both_in.wait()  # each waits for the other: only calls that run at once get past
        return id

    def script(program: ScriptedProgram) -> Script:
        values = yield program.gather(
            program.call("users.meet", line=3, id="a"), program.call("users.meet", line=3, id="b")
        )
        return values

    source = (
        "import asyncio\nasync def main():\n"
        "    return await asyncio.gather(users.meet(id='a'), users.meet(id='b'))\n"
    )
    with engine(ScriptedSandbox(script), clock=ManualClock()) as on:
        run = execution(on, source, [capability("users.meet", meet)])
        assert finished(on, run).value == ["a", "b"]


def test_a_call_past_its_budget_answers_the_caller_before_the_handler_returns() -> None:
    clock = ManualClock()
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow(*, id: str) -> str:
        entered.set()
        release.wait(GUARD)
        order.append("handler returned")
        return id

    def script(program: ScriptedProgram) -> Script:
        return (yield program.call("users.slow", line=2, id="a"))

    source = "def main():\n    return users.slow(id='a')\n"
    with engine(ScriptedSandbox(script), clock=clock) as on:
        run = execution(on, source, [capability("users.slow", slow, timeout=1)])
        with concurrent.futures.ThreadPoolExecutor(1) as caller:
            answer = caller.submit(on.execute, run)
            assert entered.wait(GUARD)
            assert run.state is State.IN_HOST
            clock.advance(1)
            error = answer.exception(GUARD)
            order.append("answered")
            release.set()
        assert run.ended.wait(GUARD) or run.stuck

    assert isinstance(error, CodeModeError) and error.code is ErrorCode.RESOURCE_LIMIT
    assert str(error) == "resource limit exceeded: capability time (limit 1 s) at <codemode>:2:5"
    assert order[0] == "answered"


def test_a_program_past_its_deadline_before_it_starts_never_runs() -> None:
    clock = ManualClock()
    ran: list[str] = []

    def script(program: ScriptedProgram) -> Script:
        ran.append("script")
        return (yield program.call("users.get", line=2, id="a"))

    limits = Limits(max_concurrent_executions=1, max_execution_seconds=1)
    with engine(ScriptedSandbox(script), clock=clock, limits=limits) as on:
        run = execution(on, "def main():\n    return users.get(id='a')\n", [])
        clock.advance(2)  # its time ran out before it was admitted
        with pytest.raises(CodeModeError) as caught:
            on.execute(run)
    assert str(caught.value) == "resource limit exceeded: execution time (limit 1 s)"
    assert ran == []


def test_arguments_that_do_not_bind_in_a_try_body_say_no_except_catches_them() -> None:
    """Binding's verdict stops the program, `try` or not: the report says so there, and
    only there (a call outside any `try` body is reported as before)."""
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("t.get", summary="Get one.")
        def get(id: int) -> int:
            return id

        inside = (
            "def main():\n    try:\n        return t.get(id=str(1))\n"
            "    except Exception:\n        return 0\n"
        )
        assert run(cm, inside).text == (
            'invalid capability arguments: argument "id" must be an integer\n'
            "    return t.get(id=str(1))\n"
            "           ^^^^^^^^^^^^^^^^\n"
            "A program cannot catch this error: except catches a call that failed, was denied "
            "or was not approved, not one whose arguments do not bind. Fix the call."
        )
        outside = "def main():\n    return t.get(id=str(1))\n"
        assert "cannot catch" not in run(cm, outside).text
