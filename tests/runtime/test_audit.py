"""The audit of an execution: its events, built only when heard, in the order they happen."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Generator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemode import CodeMode
from codemode.authz import AuthorizationRequest
from codemode.errors import ExecutionCanceledError, InvalidProgramError, ResourceLimitError
from codemode.events import Event, ExecutionFinished, ExecutionStarted, HostCodeAbandoned
from codemode.limits import LimitKind, Limits
from codemode.runtime import Engine
from codemode.runtime.audit import Audit, abandoned_because
from codemode.testing import ManualClock, ScriptedSandbox
from tests.conftest import CANARY, assert_no_canary, build_host, eventually, run_error

SOURCE = "def main():\n    return 1\n"


def nothing(program: Any) -> Generator[Any, Any, Any]:
    return (yield)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=50.0)


@pytest.fixture
def on(clock: ManualClock) -> Iterator[Engine]:
    built = Engine(Limits(), ScriptedSandbox(nothing), clock=clock)
    try:
        yield built
    finally:
        built.close()


def audit_of(on: Engine, emit: Any) -> Audit:
    return Audit(
        execution_id="e-1",
        subject="alice",
        emit=emit,
        clock=on.clock,
        pool=on.pool,
        notices=on.services.notices,
    )


def test_a_start_is_recorded_with_the_programs_digest_and_size(on: Engine) -> None:
    events: list[Event] = []
    audit = audit_of(on, events.append)
    assert audit.start(SOURCE) is True
    assert audit.began == 50.0
    (started,) = events
    assert isinstance(started, ExecutionStarted)
    assert (started.execution_id, started.subject) == ("e-1", "alice")
    assert started.source_sha256 == hashlib.sha256(SOURCE.encode()).hexdigest()
    assert started.source_bytes == len(SOURCE)


def test_a_program_that_goes_on_from_a_pause_is_not_started_again(on: Engine) -> None:
    events: list[Event] = []
    audit = audit_of(on, events.append)
    assert audit.start(SOURCE, announce=False) is True
    assert events == []
    assert audit.began == 50.0  # its end still counts from here


def test_a_sink_that_fails_is_logged_and_refuses_the_start(
    on: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: Event) -> None:
        raise OSError("disk full")

    audit = audit_of(on, broken)
    with caplog.at_level(logging.ERROR, "codemode"):
        assert audit.start(SOURCE) is False
    assert caplog.messages == ["execution e-1: the audit sink failed on ExecutionStarted"]


def test_the_end_is_recorded_with_what_the_execution_did(on: Engine) -> None:
    events: list[Event] = []
    audit = audit_of(on, events.append)
    audit.finished("ok", 1.5, ("users.get",), 12)
    (finished,) = events
    assert isinstance(finished, ExecutionFinished)
    assert (finished.outcome, finished.duration_seconds) == ("ok", 1.5)
    assert (finished.capability_calls, finished.result_bytes) == (("users.get",), 12)


def test_without_a_sink_nothing_is_recorded_and_nothing_fails(on: Engine) -> None:
    audit = audit_of(on, None)
    assert audit.start(SOURCE) is True
    audit.finished("ok", 1.0, (), 0)
    ended = ExecutionFinished(
        execution_id="e-1", subject="alice", time=0.0, outcome="ok", duration_seconds=1.0
    )
    assert audit.deliver(ended) is True


def test_host_code_left_running_is_reported_from_another_thread(on: Engine) -> None:
    delivered: list[tuple[Event, str]] = []

    def emit(event: Event) -> None:
        delivered.append((event, threading.current_thread().name))

    audit = audit_of(on, emit)
    audit.abandoned("a capability call", "deadline")
    assert eventually(lambda: delivered)
    event, thread = delivered[0]
    assert isinstance(event, HostCodeAbandoned)
    assert (event.what, event.reason, event.abandoned) == ("a capability call", "deadline", 0)
    assert thread != threading.current_thread().name  # never on the thread that answers


def test_why_host_code_was_left_running() -> None:
    assert abandoned_because(ResourceLimitError(LimitKind.EXECUTION_TIME)) == "deadline"
    assert abandoned_because(ResourceLimitError(LimitKind.CAPABILITY_TIME)) == "deadline"
    assert abandoned_because(ExecutionCanceledError()) == "cancelled"
    assert abandoned_because(ResourceLimitError(LimitKind.PRINTED_OUTPUT)) == "program_ended"
    assert abandoned_because(InvalidProgramError("x")) == "program_ended"


def test_a_call_left_in_the_authorizer_when_the_program_fails_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No deadline passed: the audit and the log say the program ended without the call
    (which never reaches its handler once its authorizer returns)."""
    entered, release, reported = threading.Event(), threading.Event(), threading.Event()
    events: list[Event] = []

    def authorizer(request: AuthorizationRequest) -> None:
        if request.capability_name == "t.slow":
            entered.set()
            release.wait(20)

    def sink(event: Event) -> None:
        events.append(event)
        if isinstance(event, HostCodeAbandoned):
            reported.set()

    source = (
        "import asyncio\nasync def main():\n    slow = t.slow()\n"
        "    await t.ready()\n    raise ValueError('mine')\n"
    )
    try:
        with CodeMode(authorizer=authorizer, on_event=sink) as app:

            @app.capability("t.slow", summary="Its authorizer is slow.")
            def slow() -> int:
                raise AssertionError("a call of an ended program never reaches its handler")

            @app.capability("t.ready", summary="Returns once t.slow is being authorized.")
            def ready() -> int:
                return int(entered.wait(20))

            with caplog.at_level(logging.WARNING, logger="codemode"):
                error = run_error(app, source)
                assert reported.wait(20)
    finally:
        release.set()
    assert str(error) == "invalid program: <codemode>:5:11: ValueError: mine"
    assert [(e.what, e.reason) for e in events if isinstance(e, HostCodeAbandoned)] == [
        ("a capability call", "program_ended")
    ]
    logged = [r.getMessage() for r in caplog.records if "left running" in r.getMessage()]
    assert [line.split(": ", 1)[1] for line in logged] == [
        "a capability call left running in host code after the program ended without it "
        "(1 threads abandoned now in this CodeMode, across subjects)"
    ]


def test_events_and_spans_name_a_session_by_its_digest_never_its_handle_or_contents(
    spans: InMemorySpanExporter,
) -> None:
    events: list[Event] = []
    cm = build_host()
    cm.configure(on_event=events.append)
    with cm:
        kept = f"kept = {CANARY!r}\n\ndef main():\n    return 1\n"
        handle = cm.execute(kept, subject="alice", session="new").session
        assert handle is not None
        later = cm.execute("def main():\n    return len(kept)\n", subject="alice", session=handle)
        assert later.value == len(CANARY)
        cm.execute(SOURCE, subject="alice")
    digest = hashlib.sha256(handle.encode()).hexdigest()[:12]
    ends = [e for e in events if isinstance(e, ExecutionStarted | ExecutionFinished)]
    assert Counter((e.kind, e.session) for e in ends) == {
        ("execution_started", digest): 2,
        ("execution_finished", digest): 2,
        ("execution_started", None): 1,
        ("execution_finished", None): 1,
    }
    executes = [s for s in spans.get_finished_spans() if s.name == "codemode.execute"]
    assert Counter((s.attributes or {}).get("codemode.session") for s in executes) == {
        digest: 2,
        None: 1,
    }
    written = [json.dumps(e.to_dict()) for e in events] + [
        json.dumps(dict(s.attributes or {})) for s in spans.get_finished_spans()
    ]
    assert_no_canary(*written)
    assert not [text for text in written if handle in text]
