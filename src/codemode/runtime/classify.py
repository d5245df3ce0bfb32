"""Every way an execution can fail -> exactly one CodeModeError. The only classifier.

Details are built only from what the program owns: positions in its source, the
interpreter's message about its own code, and its own names. Host exceptions are never
read here: what is not recognised is `internal failure`, and the caller logs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from codemode.authz import Denied
from codemode.errors import (
    AgentError,
    CapabilityFailedError,
    CodeModeError,
    ExecutionCanceledError,
    InternalError,
    InvalidProgramError,
    PermissionDeniedError,
    PolicyFailureError,
    ResourceLimitError,
    Where,
    capability_failed,
)
from codemode.limits import LimitKind, Limits, exceeded, size
from codemode.preflight import MAIN_PARAMETERS, load_message
from codemode.runtime.hints import explain
from codemode.runtime.program import NO_MAIN, Located, Program, Programs
from codemode.runtime.sandbox import FailureKind, Frame, SandboxFailure


class StopError(Exception):
    """Ends the execution with `error`; raised on the host side, the program cannot catch it."""

    def __init__(self, error: CodeModeError) -> None:
        self.error = error
        super().__init__(error.code.value)


class InjectedError(Exception):
    """Raises `error` inside the program as `exc_type`, carrying only its fixed text."""

    def __init__(self, error: CodeModeError, exc_type: str) -> None:
        self.error = error
        self.exc_type = exc_type
        super().__init__(error.code.value)


def handler_failure(exc: BaseException) -> InjectedError:
    """A handler, its result or an argument validator failed, in any way at all.

    The program sees `capability failed`, with an `AgentError`'s sanitized message and
    nothing else; the exception itself is never read for text.
    """
    if isinstance(exc, AgentError):
        return InjectedError(capability_failed(exc), "RuntimeError")
    return InjectedError(CapabilityFailedError(), "RuntimeError")


def authorizer_decision(decision: object) -> InjectedError | None:
    """What an authorizer's return value means: None or True allow, False denies, and
    anything else (a truthy object, a coroutine nobody awaited) is a policy failure."""
    if decision is None or decision is True:
        return None
    if decision is False:
        return InjectedError(PermissionDeniedError(), "PermissionError")
    return InjectedError(PolicyFailureError(), "RuntimeError")


def authorizer_failure(exc: BaseException) -> InjectedError:
    """`Denied` is a denial; anything else the authorizer raises is a policy failure."""
    if isinstance(exc, Denied):
        return InjectedError(PermissionDeniedError(), "PermissionError")
    return InjectedError(PolicyFailureError(), "RuntimeError")


@dataclass(slots=True)
class FailureContext:
    """What the execution knows when it fails: the program, and what it did to it."""

    limits: Limits
    programs: Programs | None = None
    """The prepared programs of the capabilities this execution sees (for hints)."""
    program: Program | None = None
    killed_for: CodeModeError | None = None
    """Set when the execution was stopped on purpose (deadline, cancel, print flood)."""
    injected: list[tuple[Where, str, str, CodeModeError]] = field(default_factory=list)
    """Errors raised inside the program: (the call that raised it, exception type, message,
    error), in the order they were raised."""
    results: dict[str, Any] = field(default_factory=dict)
    """What each capability's last completed call gave the program, by name (for hints)."""


def classify(failure: BaseException, context: FailureContext) -> CodeModeError:
    """The one CodeModeError for any failure of an execution."""
    if context.killed_for is not None:
        return context.killed_for
    if isinstance(failure, StopError):
        return failure.error
    if isinstance(failure, CodeModeError):
        # Never trusted by its type: codemode's own verdicts arrive wrapped in StopError, so a
        # bare one was raised by host code (a handler's library, a tracing hook, ...).
        return InternalError()
    if not isinstance(failure, SandboxFailure):
        return InternalError()
    if failure.kind is FailureKind.TIMED_OUT:
        return exceeded(LimitKind.INTERPRETER_TIME, context.limits)
    if failure.kind is FailureKind.INTERRUPTED:
        return ExecutionCanceledError()
    program = context.program
    if program is None or failure.kind not in (FailureKind.SYNTAX, FailureKind.RAISED):
        return InternalError()
    stack = _program_frames(failure.frames, program)
    where = stack[-1] if stack else None
    if failure.kind is FailureKind.SYNTAX:
        return _program_error(_text(failure), where)
    limit = _limit(failure, context.limits, where or _loop(failure, program))
    if limit is not None:
        return limit
    injected = _injected(failure, where, context)
    if injected is not None:
        inside = program.located(failure.frames[-1].line) if failure.frames else None
        if inside is not None:  # a saved program's call failed: placed at the caller's
            injected = saved_in(injected, inside)
        return injected.replace(traceback=stack)
    if failure.exc_type == "NameError" and any(
        f.function == "<module>" and f.line <= len(program.lines) for f in failure.frames
    ):
        root = _namespace(failure, program)
        if root is not None:
            return _program_error(load_message(f"{root}.*"), where, stack)
    if where is None:
        return _entry_point_error(failure)
    text = _text(failure)
    inside = program.located(failure.frames[-1].line) if failure.frames else None
    if inside is not None:  # raised in appended text: told by its own line, at the caller's
        return _program_error(f"{text}; {saved_line(inside)}", where, stack)
    if context.programs is not None:
        known = context.programs.known(program, context.results)
        text = explain(failure.exc_type, failure.message, known, where)
    return _program_error(text, where, stack)


def saved_line(located: Located) -> str:
    """What a failure inside appended text adds to its detail: that text's name and own
    line (never its source), since `where` is the program's line that entered it."""
    return f"in {located.name} line {located.line}"


def saved_in(error: CodeModeError, located: Located) -> CodeModeError:
    """`error` raised inside appended text, its detail naming that text's line (a limit's
    text is its kind and bound alone: it is left as it is)."""
    if isinstance(error, ResourceLimitError):
        return error
    said = saved_line(located)
    return error.replace(detail=said if error.detail is None else f"{error.detail}; {said}")


def _loop(failure: SandboxFailure, program: Program) -> Where | None:
    """The first line of the innermost loop the program was in when its time ran out."""
    if not failure.loops:
        return None
    line = failure.loops[-1]
    text = program.lines[line - 1] if line <= len(program.lines) else ""
    column = len(text) - len(text.lstrip()) + 1
    return program.where(line, column, line, len(text.rstrip()) + 1, program.function_at(line))


def _limit(failure: SandboxFailure, limits: Limits, where: Where | None) -> CodeModeError | None:
    """The limit an interpreter error reports, if it is one.

    The interpreter reports a trip as an exception: a frameless TimeoutError, a
    MemoryError with its own fixed text, a RecursionError, or the suspension-limit
    RuntimeError. (A program that raises such an error itself is told the same.) A time
    trip is placed at the innermost loop the program was in, when it was in one.
    """
    kind, said = failure.exc_type, interpreter_said(failure.exc_type, failure.message)
    if kind == "TimeoutError" and not failure.frames:
        return exceeded(LimitKind.INTERPRETER_TIME, limits, where=where)
    if said is not None and said.kind == "memory_limit":
        return exceeded(LimitKind.MEMORY, limits, amount=size(int(said.detail)), where=where)
    if kind == "RecursionError":
        return exceeded(LimitKind.RECURSION_DEPTH, limits, where=where)
    if said is not None and said.kind == "suspension_limit":
        return exceeded(LimitKind.HOST_CALLS, limits, where=where)
    return None


@dataclass(frozen=True, slots=True)
class Said:
    """What an interpreter error's message says, where codemode acts on it."""

    kind: Literal["memory_limit", "suspension_limit", "not_defined", "arguments"]
    """A `max_memory` trip; a `max_suspensions` trip; a name the program never defined; a
    call with arguments its function does not take."""
    detail: str = ""
    """The bytes the heap reached (`memory_limit`), or the name (`not_defined`)."""


_MEMORY_TRIP = re.compile(r"^memory limit exceeded: (\d+) bytes > \d+ bytes$")
_NOT_DEFINED = re.compile(r"name '(.+)' is not defined")


def interpreter_said(exc_type: str, message: str) -> Said | None:
    """What an interpreter error says that its type alone does not, or None.

    pydantic-monty reports the limits it enforces and the program's mistakes as the
    exception the program would see, with no code beside it: only the message tells a
    suspension-limit `RuntimeError` from the program's own, or which name a `NameError`
    means. So this is the one function that reads the interpreter's messages to tell
    errors apart; tests/contract/test_library_errors.py drives the installed interpreter
    to each of them, so a release that rewords one fails there, not in production.
    """
    if exc_type == "MemoryError" and (trip := _MEMORY_TRIP.match(message)):
        return Said("memory_limit", trip[1])
    if exc_type == "RuntimeError" and message.startswith("suspension limit"):
        return Said("suspension_limit")
    if exc_type == "NameError" and (name := _NOT_DEFINED.fullmatch(message)):
        return Said("not_defined", name[1])
    if exc_type == "TypeError" and "argument" in message:
        return Said("arguments")
    return None


def _injected(
    failure: SandboxFailure, where: Where | None, context: FailureContext
) -> CodeModeError | None:
    """The error a capability call raised in the program, if this is it, uncaught, placed.

    Recognised by the call that raised it: the innermost frame is that call expression, or
    (in an `async def main`, where a call may be awaited apart from where it was made) an
    `await`, or an `except` that did not match it (then it is placed at the call); and type
    and message are the ones raised there. A program that raises its own exception with
    the same text anywhere else gets its own error back.
    """
    if where is None:
        return None
    awaited = where.source[where.column - 1 :].startswith("await")
    passed = _passed_except(where, context.program)
    for call, exc_type, message, error in reversed(context.injected):
        if (exc_type, message) != (failure.exc_type, failure.message):
            continue
        if awaited or _within(call, where):
            return error.replace(where=where)
        if call.line in passed:
            return error.replace(where=call)
    return None


def _passed_except(where: Where, program: Program | None) -> set[int]:
    """The lines of `try` bodies whose exception, passing an `except` that did not match
    it, the interpreter reports at `where` (a line of that `except`'s body, not a `raise`:
    a re-raise is the program's own)."""
    if program is None or where.source.lstrip().startswith("raise"):
        return set()
    return {
        line
        for first, last, body_first, body_last in program.tries
        if body_first <= where.line <= body_last
        for line in range(first, last + 1)
    }


def _within(inner: Where, outer: Where) -> bool:
    """Whether the span `inner` lies inside the span `outer`."""
    return (outer.line, outer.column) <= (inner.line, inner.column) and (
        inner.end_line,
        inner.end_column,
    ) <= (outer.end_line, outer.end_column)


def _namespace(failure: SandboxFailure, program: Program) -> str | None:
    """The capability namespace a NameError names, if it names one (a name the program
    is fed in place of one, `Appendix.renames`, as the program wrote it)."""
    said = interpreter_said(failure.exc_type, failure.message)
    if said is None or said.kind != "not_defined":
        return None
    renames = () if program.appendix is None else program.appendix.renames
    for rename in renames:
        if rename.name == said.detail:  # bound only once the module loaded
            line = program.lines[rename.line - 1]
            return line[rename.column - 1 : rename.column - 1 + len(rename.name)]
    return next((root for root in program.roots if root == said.detail), None)


def _text(failure: SandboxFailure) -> str:
    return f"{failure.exc_type}: {failure.message}" if failure.message else failure.exc_type


def _program_frames(frames: tuple[Frame, ...], program: Program) -> tuple[Where, ...]:
    """The frames inside the submitted program, outermost first (trailer frames dropped)."""
    stack = (program.where(f.line, f.column, f.end_line, f.end_column, f.function) for f in frames)
    return tuple(where for where in stack if where is not None)


def _program_error(
    text: str, where: Where | None, stack: tuple[Where, ...] = ()
) -> InvalidProgramError:
    detail = text if where is None else f"{where.render()}: {text}"
    return InvalidProgramError(detail, where=where, traceback=stack)


def _entry_point_error(failure: SandboxFailure) -> CodeModeError:
    """A failure in the trailer that calls main(): the entry point itself is wrong.

    Only shapes the program certainly caused are named; anything else raised outside the
    program's own frames is not the program's text to echo.
    """
    said = interpreter_said(failure.exc_type, failure.message)
    if said == Said("not_defined", "main"):
        return InvalidProgramError(NO_MAIN)
    if said == Said("arguments"):
        return InvalidProgramError(MAIN_PARAMETERS)
    if failure.exc_type == "TypeError":
        return InvalidProgramError("main must be a function defined with def main():")
    return InternalError()


__all__ = [
    "FailureContext",
    "InjectedError",
    "Said",
    "StopError",
    "authorizer_decision",
    "authorizer_failure",
    "classify",
    "handler_failure",
    "interpreter_said",
    "saved_in",
    "saved_line",
]
