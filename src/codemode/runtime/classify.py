"""Every way an execution can fail -> exactly one CodeModeError. The only classifier.

Details are built only from what the program owns: positions in its source, the
interpreter's message about its own code, and its own argument names. Host exceptions are
logged with the execution id by the caller and never read here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pydantic_monty as pm

from codemode.errors import (
    CodeModeError,
    InternalError,
    InvalidProgramError,
    ResourceLimitError,
    Where,
)
from codemode.limits import LimitKind
from codemode.runtime.program import NO_MAIN, Program

_NAME_ERROR = re.compile(r"^name '([A-Za-z_][A-Za-z0-9_]*)' is not defined$")
_OVER_BYTES = re.compile(r"> (\d+) bytes$")


@dataclass(slots=True)
class Outcome:
    """What the engine knows about an execution when it failed."""

    program: Program | None
    printed_cap: int
    killed_for: CodeModeError | None = None
    """Set when the engine stopped the worker on purpose (deadline, cancel, print flood)."""
    injected: dict[tuple[str, str], CodeModeError] = field(default_factory=dict)
    """Failures raised inside the program, by (exception type, message)."""


def classify(exc: BaseException, outcome: Outcome) -> CodeModeError:
    """The one CodeModeError for a failure of the interpreter or its worker."""
    if isinstance(exc, CodeModeError):
        return exc
    if outcome.killed_for is not None:
        return outcome.killed_for
    if isinstance(exc, pm.MontyCrashedError):
        if exc.timed_out:
            return ResourceLimitError(LimitKind.INTERPRETER_TIME)
        return InternalError()
    program = outcome.program
    if program is None or not isinstance(exc, pm.MontySyntaxError | pm.MontyRuntimeError):
        return InternalError()
    if isinstance(exc, pm.MontySyntaxError):
        return _program_error(exc.display("type-msg"), _innermost(exc.traceback(), program))
    inner = exc.exception()
    kind = type(inner).__name__
    message = str(inner)
    frames = exc.traceback()
    limit = _limit(kind, message, frames, outcome.printed_cap)
    if limit is not None:
        return ResourceLimitError(limit)
    stack = _program_frames(frames, program)
    where = stack[-1] if stack else None
    injected = outcome.injected.get((kind, message))
    if injected is not None:
        return type(injected)(injected.detail, where=where, traceback=stack)
    name = _NAME_ERROR.match(message) if kind == "NameError" else None
    if name and name.group(1) in program.roots and _runs_at_load(frames, program):
        return _program_error(
            "capabilities can only be called while main() runs, not when the module loads",
            where,
            stack,
        )
    if where is None:
        return _entry_point_error(kind, message)
    text = f"{kind}: {message}" if message else kind
    return _program_error(text, where, stack)


def _limit(kind: str, message: str, frames: list[pm.Frame], printed_cap: int) -> LimitKind | None:
    """The limit an interpreter error reports, if it is one (limit trips carry no frames)."""
    if kind == "TimeoutError" and not frames:
        return LimitKind.INTERPRETER_TIME
    if kind == "MemoryError" and "memory limit" in message:
        over = _OVER_BYTES.search(message)
        if over and int(over.group(1)) == printed_cap:
            return LimitKind.PRINTED_OUTPUT
        return LimitKind.MEMORY
    if kind == "RecursionError":
        return LimitKind.RECURSION_DEPTH
    if kind == "RuntimeError" and message.startswith("suspension limit"):
        return LimitKind.CAPABILITY_CALLS
    return None


def _innermost(frames: list[pm.Frame], program: Program) -> Where | None:
    """The innermost frame inside the submitted program (trailer frames are dropped)."""
    stack = _program_frames(frames, program)
    return stack[-1] if stack else None


def _program_frames(frames: list[pm.Frame], program: Program) -> tuple[Where, ...]:
    """The frames inside the submitted program, outermost first."""
    stack = (
        program.where(f.line, f.column, f.end_line, f.end_column, f.function_name) for f in frames
    )
    return tuple(where for where in stack if where is not None)


def _runs_at_load(frames: list[pm.Frame], program: Program) -> bool:
    """Whether the failing code runs while the module body loads (not under main())."""
    return any(f.function_name == "<module>" and 1 <= f.line <= len(program.lines) for f in frames)


def _program_error(
    text: str, where: Where | None, stack: tuple[Where, ...] = ()
) -> InvalidProgramError:
    detail = text if where is None else f"{where.render()}: {text}"
    return InvalidProgramError(detail, where=where, traceback=stack)


def _entry_point_error(kind: str, message: str) -> InvalidProgramError:
    """A failure in the trailer that calls main(): the entry point itself is wrong."""
    if kind == "NameError":
        return InvalidProgramError(NO_MAIN)
    if kind == "TypeError" and "argument" in message:
        return InvalidProgramError("main() must take no parameters")
    if kind == "TypeError":
        return InvalidProgramError("main must be a function defined with def main():")
    return InvalidProgramError(f"{kind}: {message}" if message else kind)


__all__ = ["Outcome", "classify"]
