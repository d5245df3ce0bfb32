"""Audit events, the JSON-lines sink under concurrency, and OpenTelemetry spans."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemode import CodeMode, InternalError
from codemode.authz import AllowAll
from codemode.events import (
    CallAttempted,
    CallAuthorized,
    CallCompleted,
    CallDenied,
    CallFailed,
    Event,
    ExecutionFinished,
    ExecutionStarted,
    JsonLinesSink,
)
from codemode.testing import ManualClock
from tests.conftest import CANARY, GUARD, build_host, run_error

PROGRAM = (
    "def main():\n"
    "    out = []\n"
    "    for call in (records.secret, records.fail):\n"
    "        try:\n            call()\n        except Exception as e:\n            out.append(str(e))\n"
    '    out.append(records.lookup(key="k")["key"])\n'
    "    return out"
)


def test_event_sequence_of_a_denied_a_failing_and_a_successful_call() -> None:
    events: list[Event] = []
    cm = build_host()
    cm.configure(on_event=events.append)
    with cm:
        result = cm.execute(PROGRAM, subject="alice")
    assert result.value == ["permission denied", "capability failed", "k"]
    assert [(type(e).__name__, getattr(e, "capability", None)) for e in events] == [
        ("ExecutionStarted", None),
        ("CallAttempted", "records.secret"),
        ("CallDenied", "records.secret"),
        ("CallAttempted", "records.fail"),
        ("CallAuthorized", "records.fail"),
        ("CallFailed", "records.fail"),
        ("CallAttempted", "records.lookup"),
        ("CallAuthorized", "records.lookup"),
        ("CallCompleted", "records.lookup"),
        ("ExecutionFinished", None),
    ]
    assert {e.execution_id for e in events} == {result.execution_id}
    denied = events[2]
    assert isinstance(denied, CallDenied) and denied.code == "permission_denied"
    assert CANARY in str(denied.reason)  # the host sees the real reason
    failed = events[5]
    assert isinstance(failed, CallFailed) and failed.code == "capability_failed"
    assert CANARY in str(failed.error)
    completed = events[8]
    assert isinstance(completed, CallCompleted) and completed.arguments == {"key": "k"}
    started, finished = events[0], events[-1]
    assert isinstance(started, ExecutionStarted) and started.source_bytes == len(PROGRAM)
    assert isinstance(finished, ExecutionFinished) and finished.outcome == "ok"
    assert finished.capability_calls == ("records.secret", "records.fail", "records.lookup")
    assert isinstance(events[1], CallAttempted) and isinstance(events[4], CallAuthorized)


@pytest.mark.parametrize("failing", ["ExecutionStarted", "CallAttempted", "CallAuthorized"])
def test_a_call_that_cannot_be_audited_does_not_run(
    failing: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Fail closed: if the sink cannot record what is about to run, it does not run."""
    ran: list[str] = []

    def sink(event: Event) -> None:
        if type(event).__name__ == failing:
            raise RuntimeError(f"sink down {CANARY}")

    cm = CodeMode(authorizer=AllowAll(), on_event=sink)

    @cm.capability("db.write", summary="Writes.")
    def write() -> str:
        ran.append("write")
        return "done"

    with cm, pytest.raises(InternalError) as caught:
        cm.execute("def main():\n    return db.write()", subject="a")
    assert str(caught.value) == "internal failure"
    assert ran == []
    assert f"the audit sink failed on {failing}" in caplog.text
    assert CANARY not in json.dumps(caught.value.to_payload())


def test_a_sink_failing_after_the_call_is_logged_and_the_result_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def sink(event: Event) -> None:
        if isinstance(event, CallCompleted | ExecutionFinished):
            raise RuntimeError("sink down")

    with CodeMode(authorizer=AllowAll(), on_event=sink) as cm:

        @cm.capability("db.read", summary="Reads.")
        def read() -> int:
            return 7

        assert cm.execute("def main():\n    return db.read()", subject="a").value == 7
    assert "the audit sink failed on CallCompleted" in caplog.text


def test_the_audit_file_keeps_every_line_of_200_concurrent_executions(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonLinesSink(path)
    cm = build_host()
    cm.configure(on_event=sink)
    ids: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(25):
            result = cm.execute(PROGRAM, subject="alice")
            with lock:
                ids.append(result.execution_id)

    with cm:
        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    sink.close()
    lines = path.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line is whole JSON
    assert len(ids) == 200
    per_execution = Counter(r["execution_id"] for r in records)
    assert set(per_execution) == set(ids)
    assert set(per_execution.values()) == {10}
    assert Counter(r["event"] for r in records)["call_failed"] == 200


def test_spans_cover_executions_and_calls_without_argument_values(
    spans: InMemorySpanExporter,
) -> None:
    exporter = spans
    with build_host() as cm:
        cm.execute(PROGRAM, subject="alice")
        finished = {s.name: s for s in exporter.get_finished_spans()}
        assert set(finished) == {
            "codemode.execute",
            "codemode.call records.secret",
            "codemode.call records.fail",
            "codemode.call records.lookup",
        }
        root = finished["codemode.execute"]
        assert root.attributes is not None and root.attributes["codemode.outcome"] == "ok"
        lookup = finished["codemode.call records.lookup"]
        assert lookup.parent is not None and lookup.parent.span_id == root.context.span_id
        assert lookup.attributes is not None and "codemode.arguments" not in lookup.attributes
        failed = finished["codemode.call records.fail"]
        assert (
            failed.attributes is not None
            and failed.attributes["codemode.outcome"] == "capability_failed"
        )
        assert failed.status.status_code is trace.StatusCode.ERROR
        assert failed.status.description == "capability_failed"
        assert lookup.status.status_code is trace.StatusCode.UNSET
        assert all(CANARY not in json.dumps(dict(s.attributes or {})) for s in finished.values())
        assert not any(s.events for s in finished.values())
        exporter.clear()
    with build_host() as cm:
        cm.configure(trace_arguments=True)
        cm.execute(PROGRAM, subject="alice")
        traced = {s.name: s for s in exporter.get_finished_spans()}["codemode.call records.lookup"]
        assert traced.attributes is not None
        assert json.loads(str(traced.attributes["codemode.arguments"])) == {"key": "k"}


@pytest.mark.parametrize("kind", [ExecutionStarted, CallFailed])
def test_event_kinds_are_snake_case(kind: type[Event]) -> None:
    assert kind.__name__ != ""
    names = {ExecutionStarted: "execution_started", CallFailed: "call_failed"}
    assert kind(**_fields(kind)).kind == names[kind]  # type: ignore[arg-type]


def _fields(kind: type[Event]) -> dict[str, object]:
    base: dict[str, object] = {"execution_id": "e", "subject": "s", "time": 0.0}
    if kind is ExecutionStarted:
        return {**base, "source_sha256": "x", "source_bytes": 1}
    return {
        **base,
        "capability": "a.b",
        "capability_id": "a.b",
        "code": "internal",
        "duration_seconds": 0.0,
    }


def test_a_denial_is_one_log_line_and_a_host_failure_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with build_host() as cm, caplog.at_level(logging.INFO, logger="codemode"):
        run_error(cm, "def main():\n    return records.secret()")
        denials = [r for r in caplog.records if "denied records.secret" in r.getMessage()]
        assert len(denials) == 1 and denials[0].exc_info is None
        caplog.clear()
        run_error(cm, "def main():\n    return records.flaky()")
        failures = [r for r in caplog.records if "authorizer failed on" in r.getMessage()]
        assert len(failures) == 1 and failures[0].exc_info is not None


def test_an_execution_ends_in_the_events_no_later_than_its_answer() -> None:
    """The finished event measures from the started event to the caller's answer, so the
    events tell which executions ran at once (the driver's last steps came after the
    answer, and the time before the started event was counted too). On a clock moved by
    hand: before the execution, 5 s; between its start and its answer, 2 s (in its one
    call); after the answer, 3 s more. It took 2 s."""
    clock = ManualClock()
    events: list[Event] = []
    delivered = threading.Event()

    def sink(event: Event) -> None:
        events.append(event)
        if isinstance(event, ExecutionFinished):
            delivered.set()

    with CodeMode(authorizer=AllowAll(), on_event=sink, clock=clock) as cm:

        @cm.capability("a.b", summary="x")
        def b() -> int:
            clock.advance(2)
            return 1

        clock.advance(5)
        result = cm.execute("def main():\n    return a.b()", subject="a")
        clock.advance(3)
        assert delivered.wait(GUARD)
    finished = next(e for e in events if isinstance(e, ExecutionFinished))
    assert isinstance(events[0], ExecutionStarted)
    assert finished.duration_seconds == result.usage.duration_seconds == 2


def _one() -> int:
    return 1
