"""Capability calls through the dispatch loop, with a scripted sandbox (no interpreter).

The program is played by a generator (`codemode.testing`); binding, authorization,
handlers, projection, limits, classification and audit all run for real.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Generator
from typing import Any

import pydantic
import pytest

from codemode import CodeMode, Limits
from codemode.authz import AllowAll, AuthorizationRequest, Denied
from codemode.errors import ExpectedError
from codemode.events import CallCompleted, CallDenied, CallFailed, Event
from codemode.runtime.sandbox import FailureKind, SandboxFailure
from codemode.testing import ProgramRaised, ScriptedProgram, ScriptedSandbox, record_fields
from codemode.values import RecordValue
from tests.conftest import CANARY, eventually, run_error
from tests.runtime.scripted import Host, error_of, wait_for

SOURCE = "def main():\n    return users.get(id='u-1')\n"
"""What the scripts below play (the preflight reads it; the script acts it out)."""

Program = Generator[Any, Any, Any]


class Profile(pydantic.BaseModel):
    email: str


@dataclasses.dataclass
class User:
    id: str
    profile: Profile


class SecretUser(User):
    token: str = CANARY


def host(script: Any, **options: Any) -> CodeMode:
    cm = CodeMode(
        authorizer=options.pop("authorizer", AllowAll()), sandbox=ScriptedSandbox(script), **options
    )

    @cm.capability("users.get", summary="One user.")
    def get(*, id: str) -> User:
        if id == "exit":
            raise SystemExit(CANARY)
        user = SecretUser(id, Profile(email="a@example.com"))
        return user

    return cm


def test_a_record_crosses_with_its_declared_fields_only() -> None:
    seen: list[Any] = []

    def script(program: ScriptedProgram) -> Program:
        user = yield program.call("users.get", line=2, id="u-1")
        seen.append(user)
        return user

    with host(script) as cm:
        result = cm.execute(SOURCE, subject="a")
    user = seen[0]
    assert isinstance(user, RecordValue) and type(user).__name__ == "User"
    assert record_fields(user).keys() == {"id", "profile"}
    assert type(user.profile).__name__ == "Profile"  # type: ignore[attr-defined]
    assert result.value == {"id": "u-1", "profile": {"email": "a@example.com"}}
    assert result.usage.result_bytes == len('{"id":"u-1","profile":{"email":"a@example.com"}}')


def test_a_handler_exit_is_raised_in_the_program_as_a_fixed_text() -> None:
    caught: list[ProgramRaised] = []

    def script(program: ScriptedProgram) -> Program:
        try:
            yield program.call("users.get", line=2, id="exit")
        except ProgramRaised as raised:
            caught.append(raised)
        return "survived"

    with host(script) as cm:
        assert cm.execute(SOURCE, subject="a").value == "survived"
    assert [(c.exc_type, c.message) for c in caught] == [("RuntimeError", "capability failed")]


def test_an_uncaught_failure_points_at_its_call() -> None:
    def script(program: ScriptedProgram) -> Program:
        yield program.call("users.get", line=2, id="exit")

    with host(script) as cm:
        error = run_error(cm, SOURCE)
    assert str(error) == "capability failed"
    assert error.where is not None and error.where.line == 2


def test_a_denial_records_the_reason_for_the_host_only() -> None:
    events: list[Event] = []

    def deny(request: AuthorizationRequest) -> None:
        raise Denied(CANARY)

    def script(program: ScriptedProgram) -> Program:
        yield program.call("users.get", line=2, id="u-1")

    with host(script, authorizer=deny, on_event=events.append) as cm:
        error = run_error(cm, SOURCE)
    assert str(error) == "permission denied"
    denied = next(e for e in events if isinstance(e, CallDenied))
    assert str(denied.reason) == CANARY
    assert CANARY not in json.dumps(error.to_payload())


def test_gathered_calls_settle_together() -> None:
    def script(program: ScriptedProgram) -> Program:
        users = yield program.gather(
            program.call("users.get", line=2, id="a"), program.call("users.get", line=2, id="b")
        )
        return [u.id for u in users]

    source = "async def main():\n    return users.get(id='a')\n"
    with host(script) as cm:
        assert cm.execute(source, subject="a").value == ["a", "b"]


def test_a_result_over_the_limit_stops_and_is_audited_as_run() -> None:
    events: list[Event] = []

    def script(program: ScriptedProgram) -> Program:
        yield program.call("users.get", line=2, id="u-1")

    with host(script, limits=Limits(max_result_bytes=10), on_event=events.append) as cm:
        error = run_error(cm, SOURCE)
    assert (
        str(error)
        == "resource limit exceeded: result size (limit 10 bytes, reached 48 bytes) at <codemode>:2:5"
    )
    assert error.where is not None and error.where.line == 2
    assert any(isinstance(e, CallCompleted) for e in events)


def test_arguments_that_do_not_bind_stop_before_anything_runs() -> None:
    events: list[Event] = []

    def script(program: ScriptedProgram) -> Program:
        yield program.call("users.get", line=2, id=5)

    with host(script, on_event=events.append) as cm:
        error = run_error(cm, SOURCE)
    assert str(error) == 'invalid capability arguments: argument "id" must be a string'
    assert [type(e).__name__ for e in events if isinstance(e, CallFailed)] == ["CallFailed"]


@pytest.mark.parametrize(
    ("failure", "text"),
    [
        (SandboxFailure(FailureKind.CRASHED), "internal failure"),
        (
            SandboxFailure(FailureKind.TIMED_OUT),
            "resource limit exceeded: interpreter time (limit 5 s)",
        ),
        (SandboxFailure(FailureKind.HOST, "TypeError", CANARY), "internal failure"),
    ],
)
def test_sandbox_failures_are_classified(failure: SandboxFailure, text: str) -> None:
    def script(program: ScriptedProgram) -> Program:
        yield program.call("users.get", line=2, id="u-1")
        raise failure

    with host(script) as cm:
        error = run_error(cm, SOURCE)
    assert str(error) == text
    assert CANARY not in json.dumps(error.to_payload())


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


def test_an_expected_failure_is_one_line_of_the_host_log(caplog: pytest.LogCaptureFixture) -> None:
    """Its message may quote an upstream, whose line breaks must not forge log lines."""
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("svc.call", summary="Fails as an unreachable service does.")
    def call() -> int:
        raise ExpectedError("refused\n2026-12-01 INFO codemode: forged line")

    with cm, caplog.at_level(logging.WARNING, logger="codemode"):
        assert str(run_error(cm, "def main():\n    return svc.call()\n")).startswith(
            "capability failed"
        )
    [record] = [r for r in caplog.records if "svc.call failed" in r.getMessage()]
    assert record.getMessage().endswith("refused\\n2026-12-01 INFO codemode: forged line")
