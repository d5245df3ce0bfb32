"""Helpers for a host's own tests, and for testing without starting an interpreter.

`run` executes a program and gives its value or its error as data; `RecordingAuthorizer`
keeps every request it allowed; `assert_no_canary` checks that a planted secret appears
nowhere in what the model would be sent.

`ScriptedSandbox` stands where the pydantic-monty pool stands (as httpx's `MockTransport`
stands for the network): each execution runs a Python generator that plays the program,
yielding the capability calls it makes and receiving their answers. Everything else
(preflight, binding, authorization, handlers, projection, limits, classification, audit)
runs for real. In a session, a script reads the state its program starts from
(`program.session`) and sets what the session keeps if it succeeds (`program.kept`, and
`program.names` for what the result says it holds).

`ManualClock` stands for time: `CodeMode(clock=ManualClock())` makes every deadline,
budget and sleep wait until the test calls `advance()`, so a test asserts the order of
events ("answered before the handler returned"), never elapsed time. `execute` blocks
until answered, so run it on another thread and advance once the program is where the
test wants it (a handler set a `threading.Event`, or `clock.pending` counts the timers
armed). The interpreter's own `max_interpreter_seconds` is real time, not this clock's;
scripts cannot sleep (use the real sandbox to test sleeps).

    clock = ManualClock()
    cm = CodeMode(authorizer=AllowAll(), sandbox=ScriptedSandbox(script), clock=clock)
    answer = concurrent.futures.ThreadPoolExecutor(1).submit(cm.execute, source, subject="a")
    entered.wait()                  # the handler runs (and blocks)
    clock.advance(1)                # its 1 s budget passes
    assert str(answer.exception()).startswith("resource limit exceeded: capability time")

    def script(program: ScriptedProgram) -> Generator[Any, Any, Any]:
        user = yield program.call("users.get", line=2, id="u-1")
        return user.name

    cm = CodeMode(authorizer=AllowAll(), sandbox=ScriptedSandbox(script))
    cm.execute("def main():\\n    return users.get(id='u-1').name\\n", subject="alice")

`running_engine`, `started_engine` and `is_indexed` let a test look behind a `CodeMode`
at what its runtime and discovery hold (the engine's pool, admission and event loops; the
search indexes built), for tests of codemode itself rather than of a host: they are not
part of the host API (`__all__`), and what they return may change with the runtime.

The protocols these stand in for are exported here too, as their public home: `Sandbox`
and `Clock` (what `CodeMode(sandbox=..., clock=...)` takes), `Run` and `Timer`, and the
steps and answers a run exchanges (`Call`, `Sleep`, `Wait`, `Done`; `Returned`,
`Injected`; `SandboxFailure` with its `FailureKind` and `Frame`s; `Kept`, what a run in a
session leaves), so a host can write a stand-in of its own.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from codemode.app import CodeMode
from codemode.capabilities import View
from codemode.errors import CodeModeError
from codemode.limits import Limits
from codemode.runtime import (
    Answer,
    Call,
    Clock,
    Done,
    Engine,
    FailureKind,
    Frame,
    Injected,
    Kept,
    Printer,
    Returned,
    Run,
    Sandbox,
    SandboxFailure,
    Sleep,
    Step,
    Timer,
    Wait,
)
from codemode.values import RecordValue, record_fields

Script = Callable[["ScriptedProgram"], Generator[Any, Any, Any]]
"""Plays one program: yields calls (or `gather`s of calls), returns main()'s value."""


class ProgramRaised(Exception):
    """Raised inside a script where the program would see an exception from a call."""

    def __init__(self, exc_type: str, message: str) -> None:
        self.exc_type = exc_type
        self.message = message
        super().__init__(f"{exc_type}: {message}")


@dataclass(frozen=True, slots=True)
class Gather:
    """Several calls awaited together, as `asyncio.gather` in an `async def main`."""

    calls: tuple[Call, ...]


class ScriptedProgram:
    """What a script uses to act as the program: its calls, prints and failures."""

    def __init__(self, code: str, printer: Printer, session: bytes | None = None) -> None:
        self.code = code
        self.lines = code.split("\n")
        self.printer = printer
        self.session = session
        """The state of the session the program runs in (None outside one, or new)."""
        self.kept = b"" if session is None else session
        """What the session keeps if the program succeeds: the state it started from
        unless the script sets another."""
        self.names: dict[str, str] = {}
        """What the kept state holds by name, as the real sandbox lists it (`Kept.names`):
        none unless the script says."""
        self._ids = itertools.count(1)

    def call(self, name: str, *, line: int, **kwargs: Any) -> Call:
        """A call to capability `name` made on `line` of the program, with keywords."""
        return Call(name, (), dict(kwargs), next(self._ids), self.span(line))

    def gather(self, *calls: Call) -> Gather:
        """Calls made together, as `asyncio.gather` makes them; answered as a list."""
        return Gather(calls)

    def print(self, text: str) -> None:
        """What the program prints (captured as its `print()` output is)."""
        self.printer("stdout", text)

    def span(self, line: int) -> tuple[int, int]:
        """UTF-8 byte offsets of `line`'s text, indentation left out."""
        start = sum(len(text.encode("utf-8")) + 1 for text in self.lines[: line - 1])
        text = self.lines[line - 1]
        indent = len(text) - len(text.lstrip())
        return start + indent, start + len(text.encode("utf-8"))

    def raised(self, exc_type: str, message: str, line: int) -> SandboxFailure:
        """The failure of an exception the program raised on `line`, uncaught."""
        text = self.lines[line - 1]
        column = len(text) - len(text.lstrip()) + 1
        frame = Frame(line, column, line, len(text) + 1, "main")
        return SandboxFailure(FailureKind.RAISED, exc_type, message, (frame,))


class ScriptedRun:
    """One run of a script, stepping it as the dispatch loop answers its calls."""

    def __init__(self, script: Script, printer: Printer) -> None:
        self.script = script
        self.printer = printer
        self.program: ScriptedProgram | None = None
        self.generator: Generator[Any, Any, Any] | None = None
        self.current: Call | Gather | None = None
        self.busy = False
        self.deferred: dict[int, Call | Answer] = {}
        """Calls of the current gather: the call while it runs, then its answer."""
        self.killed = False

    def start(self, code: str, session: bytes | None = None) -> Step:
        """Begin the script with the program's text (and its session's state); its first
        step."""
        self.program = ScriptedProgram(code, self.printer, session or None)
        self.generator = self.script(self.program)
        return self._advance(lambda generator: next(generator))

    def answer(self, answer: Answer) -> Step:
        """Send the answer to the step the script is on; its next step."""
        if isinstance(answer, Injected):
            error = ProgramRaised(answer.exc_type, answer.message)
            return self._advance(lambda generator: generator.throw(error))
        value = answer.value
        return self._advance(lambda generator: generator.send(value))

    def defer(self) -> Step:
        """Leave the current call of a gather unanswered for now; the next one."""
        assert isinstance(self.current, Gather)
        pending = [c for c in self.current.calls if c.call_id not in self.deferred]
        self.deferred[pending[0].call_id] = pending[0]
        if len(pending) > 1:
            return pending[1]
        return Wait(tuple(c.call_id for c in self.current.calls))

    def settle(self, answers: Mapping[int, Answer]) -> Step:
        """Answer deferred calls of a gather; the script resumes once all are in."""
        assert isinstance(self.current, Gather)
        gather = self.current
        for call_id, answer in answers.items():
            self.deferred[call_id] = answer
        waiting = [c.call_id for c in gather.calls if isinstance(self.deferred[c.call_id], Call)]
        if waiting:
            return Wait(tuple(waiting))
        results = [self.deferred.pop(c.call_id) for c in gather.calls]
        failed = next((r for r in results if isinstance(r, Injected)), None)
        self.deferred.clear()
        if failed is not None:
            error = ProgramRaised(failed.exc_type, failed.message)
            return self._advance(lambda generator: generator.throw(error))
        values = [r.value for r in results if isinstance(r, Returned)]
        return self._advance(lambda generator: generator.send(values))

    def keep(self) -> Kept:
        """What the script left its session (`ScriptedProgram.kept` and `.names`)."""
        assert self.program is not None
        return Kept(self.program.kept, dict(self.program.names))

    def dump(self) -> bytes:
        """A script cannot pause (a generator has no state to carry elsewhere): test
        approvals with the real sandbox."""
        raise SandboxFailure(FailureKind.HOST)

    def load(self, state: bytes, code: str) -> Step:
        """Nothing to load: a script never paused."""
        raise SandboxFailure(FailureKind.HOST)

    def type_names(self, expressions: list[str]) -> list[str] | None:
        """The interpreter's type names of returned values (none for a script)."""
        return None  # a script's values are what it returned: no function among them

    def kill(self) -> None:
        """Mark the run killed, as a stop of the execution would kill a worker."""
        self.killed = True

    def _advance(self, step: Callable[[Generator[Any, Any, Any]], Any]) -> Step:
        if self.killed:
            raise SandboxFailure(FailureKind.CRASHED)
        assert self.generator is not None and self.program is not None
        try:
            yielded = step(self.generator)
        except StopIteration as stop:
            return Done(stop.value)
        except ProgramRaised as raised:
            line = self._line_of(self.current)
            raise self.program.raised(raised.exc_type, raised.message, line) from None
        self.current = yielded
        if isinstance(yielded, Gather):
            return yielded.calls[0]
        if not isinstance(yielded, Call):
            raise TypeError("a script yields program.call(...) or program.gather(...)")
        return yielded

    def _line_of(self, current: Call | Gather | None) -> int:
        assert self.program is not None
        call = current.calls[0] if isinstance(current, Gather) else current
        if call is None:
            return 1
        return self.program.code.encode("utf-8")[: call.span[0]].count(b"\n") + 1


class ScriptedSandbox:
    """A `Sandbox` whose programs are scripts (see the module docstring)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.runs: list[ScriptedRun] = []
        """Every run started, for tests that look at what was killed."""

    def modules(self, names: Iterable[str]) -> object:
        """The capability modules a run exposes (here, just their names)."""
        return tuple(names)

    @contextlib.contextmanager
    def run(
        self, *, modules: object, roots: Iterable[str], limits: Limits, printer: Printer
    ) -> Iterator[ScriptedRun]:
        """One execution of the script, as the interpreter's run of a program."""
        run = ScriptedRun(self.script, printer)
        self.runs.append(run)
        yield run

    def close(self) -> None:
        """Nothing to stop: the script runs in this process."""
        return None


class ManualClock:
    """A `Clock` that moves only when told; its timers ring in `advance`, in the order
    of their moments, on the thread that calls it."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._epoch = time.time() - start
        """The calendar at its start, so that `wall()` moves with it."""
        self._due: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()

    def now(self) -> float:
        """The time the clock was moved to."""
        return self._now

    def wall(self) -> float:
        """Seconds since the epoch as this clock tells them: the calendar when it was made,
        moved on as it is (what a paused program's expiry is written in)."""
        return self._epoch + self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Ring `callback` in the `advance` that reaches `when`."""
        timer = Timer(when, callback)
        with self._lock:
            heapq.heappush(self._due, (when, next(self._order), timer))
        return timer

    def skip(self, seconds: float) -> None:
        """Move time on by `seconds` without ringing the timers whose moment passes, as
        when host code returns before the clock's thread rings them; the next `advance`
        rings them."""
        with self._lock:
            self._now += seconds

    def advance(self, seconds: float) -> None:
        """Move time on by `seconds`, ringing every timer whose moment comes."""
        with self._lock:
            target = self._now + seconds
        while True:
            with self._lock:
                if not self._due or self._due[0][0] > target:
                    self._now = target
                    return
                when, _, timer = heapq.heappop(self._due)
                self._now = max(self._now, when)
            timer.ring()

    @property
    def pending(self) -> int:
        """Timers not yet rung nor cancelled."""
        with self._lock:
            return sum(1 for _, _, timer in self._due if not timer.cancelled)


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a program gave: its value, or the payload of its error (as MCP sends it)."""

    value: Any = None
    error: dict[str, Any] | None = None
    """`{"code", "message", "where", ...}` when it failed."""
    text: str = ""
    """What the model reads: the result as JSON, or the error's full report."""

    @property
    def ok(self) -> bool:
        """Whether the program returned a value."""
        return self.error is None


def run(cm: Any, source: str, *, subject: str = "test") -> RunResult:
    """Execute `source` on a `CodeMode` and give its value or its error as data."""
    from codemode.payloads import execute_payload, model_text

    try:
        result = cm.execute(source, subject=subject)
    except CodeModeError as error:
        return RunResult(error=error.to_payload(), text=error.report())
    structured = execute_payload(result)
    return RunResult(value=result.value, text=model_text(structured))


class RecordingAuthorizer:
    """Allows every call and keeps each `AuthorizationRequest`, for asserting on what a
    program asked for (capability ids, canonical arguments, annotations)."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> None:
        self.requests.append(request)


def running_engine(cm: CodeMode) -> Engine:
    """The engine `cm` runs programs on, started now if nothing has started it (refused
    with `ExecutionCanceledError` once `cm` is closed)."""
    return cm._engines.engine()


def started_engine(cm: CodeMode) -> Engine | None:
    """The engine `cm` started, or None while nothing has needed one (a `check`, a
    search without `hide_forbidden`) or once it is closed."""
    return cm._engines.started


def is_indexed(cm: CodeMode, view: View) -> bool:
    """Whether `cm` has built the search index of `view` already (serving builds the
    whole catalog's before its first request)."""
    return cm._discovery.is_indexed(view)


def assert_no_canary(canary: str, *outcomes: RunResult | CodeModeError | Any) -> None:
    """Fail when `canary` appears in anything the model would be sent for these outcomes
    or errors: messages, reports, every field of the payload."""
    import json

    from codemode.payloads import error_payload

    for outcome in outcomes:
        if isinstance(outcome, CodeModeError):
            seen = outcome.report() + json.dumps(error_payload(outcome), default=repr)
        elif isinstance(outcome, RunResult):
            seen = outcome.text + json.dumps([outcome.value, outcome.error], default=repr)
        else:
            seen = json.dumps(outcome, default=repr)
        if canary in seen:
            raise AssertionError(f"{canary!r} reached what the model is sent: {seen[:500]}")


__all__ = [
    "Call",
    "Clock",
    "Done",
    "FailureKind",
    "Frame",
    "Gather",
    "Injected",
    "Kept",
    "ManualClock",
    "ProgramRaised",
    "RecordValue",
    "RecordingAuthorizer",
    "Returned",
    "Run",
    "RunResult",
    "Sandbox",
    "SandboxFailure",
    "Script",
    "ScriptedProgram",
    "ScriptedRun",
    "ScriptedSandbox",
    "Sleep",
    "Timer",
    "Wait",
    "assert_no_canary",
    "record_fields",
    "run",
]
