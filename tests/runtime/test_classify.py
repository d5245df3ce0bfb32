"""The one classifier: every interpreter error type and every limit has exactly one code."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode import CodeMode
from codemode.errors import (
    CapabilityFailedError,
    ErrorCode,
    ExecutionCanceledError,
    ResourceLimitError,
)
from codemode.limits import LimitKind, Limits, exceeded
from codemode.runtime.appendix import Appendix, Region
from codemode.runtime.classify import FailureContext, StopError, classify
from codemode.runtime.program import Programs
from codemode.runtime.sandbox import FailureKind, Frame, SandboxFailure
from tests.conftest import CANARY, run_error

PROGRAMS = Programs({})
PROGRAM = PROGRAMS.prepare("def main():\n    x = 1\n    return x\n")
INSIDE = (Frame(3, 12, 3, 13, "main"),)
"""A frame inside the program (line 3)."""
TRAILER = (Frame(4, 1, 4, 7, "<module>"),)
"""A frame of the trailer that calls main() (past the program's last line)."""


def failure_context() -> FailureContext:
    return FailureContext(Limits(), PROGRAMS, PROGRAM)


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (
            SandboxFailure(FailureKind.SYNTAX, "SyntaxError", "bad", INSIDE),
            ErrorCode.INVALID_PROGRAM,
        ),
        (SandboxFailure(FailureKind.RAISED, "KeyError", "'x'", INSIDE), ErrorCode.INVALID_PROGRAM),
        (SandboxFailure(FailureKind.CRASHED), ErrorCode.INTERNAL),
        (SandboxFailure(FailureKind.TIMED_OUT), ErrorCode.RESOURCE_LIMIT),
        (SandboxFailure(FailureKind.INTERRUPTED), ErrorCode.CANCELED),
        (SandboxFailure(FailureKind.HOST, "TypeError", CANARY), ErrorCode.INTERNAL),
    ],
)
def test_each_kind_has_one_code(failure: SandboxFailure, code: ErrorCode) -> None:
    assert classify(failure, failure_context()).code is code


def test_the_kinds_above_are_all_the_kinds() -> None:
    assert set(FailureKind) == {
        FailureKind.SYNTAX,
        FailureKind.RAISED,
        FailureKind.CRASHED,
        FailureKind.INTERRUPTED,
        FailureKind.TIMED_OUT,
        FailureKind.HOST,
    }


def test_every_limit_kind_is_a_resource_limit_with_a_bound_and_documented() -> None:
    errors_md = (Path(__file__).parents[2] / "docs" / "reference" / "errors.md").read_text()
    for kind in LimitKind:
        error = exceeded(kind, Limits())
        assert error.code is ErrorCode.RESOURCE_LIMIT
        assert str(error) == f"resource limit exceeded: {kind.value} (limit {error.bound})"
        assert str(error.opaque()) == f"resource limit exceeded: {kind.value}"
        assert f"`{kind.value}`" in errors_md, kind


@pytest.mark.parametrize(
    ("exc_type", "message", "frames", "detail"),
    [
        ("TimeoutError", "", (), "interpreter time (limit 5 s)"),
        (
            "MemoryError",
            "memory limit exceeded: 300000000 bytes > 5 bytes",
            INSIDE,
            "memory (limit 256 MiB, reached 286.1 MiB) at <codemode>:3:12",
        ),
        (
            "RecursionError",
            "maximum recursion depth exceeded",
            INSIDE,
            "recursion depth (limit 200) at <codemode>:3:12",
        ),
        ("RuntimeError", "suspension limit exceeded", (), "host calls (limit 4496)"),
    ],
)
def test_limit_trips_are_read_from_the_interpreters_report(
    exc_type: str, message: str, frames: tuple[Frame, ...], detail: str
) -> None:
    failure = SandboxFailure(FailureKind.RAISED, exc_type, message, frames)
    assert str(classify(failure, failure_context())) == f"resource limit exceeded: {detail}"


def test_a_time_trip_is_placed_at_the_innermost_loop_the_program_was_in() -> None:
    programs = Programs({})
    program = programs.prepare(
        "def main():\n    while True:\n        for i in range(9):\n            pass\n"
    )
    context = FailureContext(Limits(), programs, program)
    failure = SandboxFailure(FailureKind.RAISED, "TimeoutError", "", (), loops=(2, 3))
    error = classify(failure, context)
    assert str(error) == "resource limit exceeded: interpreter time (limit 5 s) at <codemode>:3:9"
    assert error.where is not None
    assert error.where.excerpt() == "    for i in range(9):\n    ^^^^^^^^^^^^^^^^^^"
    assert error.where.func == "main"


def test_text_outside_the_program_is_never_echoed() -> None:
    """A failure with no frame in the program is not the program's text to show."""
    failure = SandboxFailure(FailureKind.RAISED, "RuntimeError", f"lazy load {CANARY}", ())
    error = classify(failure, failure_context())
    assert str(error) == "internal failure"
    failure = SandboxFailure(FailureKind.RAISED, "ValueError", CANARY, TRAILER)
    assert str(classify(failure, failure_context())) == "internal failure"


def test_anything_else_is_internal_and_a_stop_carries_its_error() -> None:
    assert str(classify(ValueError(CANARY), failure_context())) == "internal failure"
    assert str(classify(KeyboardInterrupt(), failure_context())) == "internal failure"
    stop = StopError(ResourceLimitError(LimitKind.RESULT_SIZE))
    assert str(classify(stop, failure_context())) == "resource limit exceeded: result size"


def test_a_deliberate_stop_wins_over_what_the_worker_reported() -> None:
    stopped = failure_context()
    stopped.killed_for = ExecutionCanceledError()
    assert classify(SandboxFailure(FailureKind.CRASHED), stopped) is stopped.killed_for


def test_an_injected_error_is_recognised_only_at_its_call_site() -> None:
    seen = failure_context()
    call = PROGRAM.where(3, 12, 3, 13, "main")
    assert call is not None
    seen.injected.append((call, "RuntimeError", "capability failed", CapabilityFailedError()))
    at_call = SandboxFailure(FailureKind.RAISED, "RuntimeError", "capability failed", INSIDE)
    assert isinstance(classify(at_call, seen), CapabilityFailedError)
    elsewhere = (Frame(2, 5, 2, 10, "main"),)
    own = SandboxFailure(FailureKind.RAISED, "RuntimeError", "capability failed", elsewhere)
    assert str(classify(own, seen)) == (
        "invalid program: <codemode>:2:5: RuntimeError: capability failed"
    )


def test_entry_point_errors_are_named() -> None:
    missing = SandboxFailure(FailureKind.RAISED, "NameError", "name 'main' is not defined", TRAILER)
    assert str(classify(missing, failure_context())) == (
        "invalid program: the program must define main(): add def main(): at top level"
    )
    not_callable = SandboxFailure(
        FailureKind.RAISED, "TypeError", "'int' object is not callable", TRAILER
    )
    assert str(classify(not_callable, failure_context())) == (
        "invalid program: main must be a function defined with def main():"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "def main():\n    try:\n        return records.flaky()\n"
            "    except PermissionError:\n        return 'denied'\n",
            "authorization policy failure",
        ),
        (
            "def main():\n    try:\n        x = records.fail()\n"
            "    except KeyError:\n        return 1\n    return x\n",
            "capability failed",
        ),
    ],
)
def test_a_failure_that_passes_an_except_that_does_not_match_is_still_the_calls(
    cm: CodeMode, source: str, message: str
) -> None:
    error = run_error(cm, source)
    assert str(error) == message
    assert error.where is not None and error.where.line == 3


def test_a_failure_the_program_re_raises_is_its_own(cm: CodeMode) -> None:
    source = (
        "def main():\n    try:\n        return records.fail()\n"
        "    except RuntimeError:\n        raise\n"
    )
    error = run_error(cm, source)
    assert str(error) == "invalid program: <codemode>:4:12: RuntimeError: capability failed"


def test_an_error_raised_in_appended_text_is_placed_at_the_program_and_told_by_its_line() -> None:
    appendix = Appendix(
        "def helper():\n    return {}['k']\n", regions=(Region("programs.p", 1, 2, 5),)
    )
    program = PROGRAMS.prepare("def main():\n    return helper()\n", appendix=appendix)
    frames = (Frame(2, 12, 2, 20, "main"), Frame(4, 12, 4, 20, "helper"))
    failure = SandboxFailure(FailureKind.RAISED, "KeyError", "'k'", frames)
    error = classify(failure, FailureContext(Limits(), PROGRAMS, program))
    assert str(error) == "invalid program: <codemode>:2:12: KeyError: 'k'; in programs.p line 6"
    assert error.where is not None and error.where.line == 2
