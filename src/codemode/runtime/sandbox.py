"""The seam around the interpreter: run a program, answer its calls, learn how it ended.

`Sandbox` is a small protocol with one real implementation, `MontySandbox`, the only
module that drives pydantic-monty. Every interpreter outcome is translated here into
neutral data (`Call`, `Wait`, `Done`, `SandboxFailure`), so the dispatch loop and the
classifier never see an interpreter type, and a scripted fake (`codemode.testing`) can
stand in for fast unit tests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import pydantic_monty as pm

from codemode.errors import PROGRAM_FILE
from codemode.limits import Limits, host_calls, work_threads
from codemode.runtime.kept import Kept, keep_session, load_session, silent
from codemode.runtime.loops import BIND_LENGTH, LOOPS, Marked, going_on, mark
from codemode.runtime.records import GuestRecord, record_id
from codemode.values import RecordValue

Printer = Callable[[str, str], None]
"""Receives each piece of printed output: (stream, text)."""


# -- what a run reports ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """The program called a capability and waits for its answer."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    call_id: int
    span: tuple[int, int]
    """UTF-8 byte offsets of the call expression in the fed code."""


@dataclass(frozen=True, slots=True)
class Sleep:
    """The program called `time.sleep` or `asyncio.sleep`; answer when it may go on."""

    seconds: object
    """What the program passed (not yet checked)."""
    span: tuple[int, int]
    call_id: int | None = None
    """For `asyncio.sleep`: the call an `async def main` may await later (see `Run.defer`)."""


@dataclass(frozen=True, slots=True)
class Wait:
    """An `async def main` awaits calls that were deferred."""

    call_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Done:
    """The program finished; `value` is what the fed code's last expression produced."""

    value: Any


Step = Call | Sleep | Wait | Done


@dataclass(frozen=True, slots=True)
class Returned:
    """Answer a call with a value (already projected to what may cross)."""

    value: Any
    has_records: bool = False
    """Whether `value` holds `RecordValue`s that must become objects in the program."""


@dataclass(frozen=True, slots=True)
class Injected:
    """Answer a call by raising a built-in exception with a fixed, model-safe message."""

    exc_type: str
    message: str


Answer = Returned | Injected


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of the interpreter's traceback (1-based positions in the fed code)."""

    line: int
    column: int
    end_line: int
    end_column: int
    function: str | None


class FailureKind(StrEnum):
    """How a run ended without a value."""

    SYNTAX = "syntax"
    """The interpreter could not parse the program."""
    RAISED = "raised"
    """An exception ended the program; its frames say where."""
    CRASHED = "crashed"
    """The worker process died (or was killed on purpose)."""
    INTERRUPTED = "interrupted"
    """The worker got the terminal's Ctrl-C (it shares the server's process group): the
    person running the server is stopping it."""
    TIMED_OUT = "timed_out"
    """The pool's watchdog killed a worker that overran its turn."""
    HOST = "host"
    """Something on the host side of the interpreter failed (a value that cannot cross,
    a lost connection, a shutdown): never the program's doing."""


class SandboxFailure(Exception):
    """A run that ended without a value, as neutral data the classifier reads."""

    def __init__(
        self,
        kind: FailureKind,
        exc_type: str = "",
        message: str = "",
        frames: tuple[Frame, ...] = (),
        loops: tuple[int, ...] = (),
    ) -> None:
        self.kind = kind
        self.exc_type = exc_type
        self.message = message
        """The interpreter's message (for RAISED and SYNTAX); may echo program values."""
        self.frames = frames
        self.loops = loops
        """After a time-limit trip (which has no frames): the first line of each loop the
        program was inside, innermost last (see `codemode.runtime.loops`)."""
        super().__init__(kind.value)


class Run(Protocol):
    """One program in one worker, driven step by step."""

    busy: bool
    """Whether the interpreter is running the program right now (a stop will end it)."""

    def start(self, code: str, session: bytes | None = None) -> Step:
        """Run the fed code until its first step; in a session, on the globals of
        `session` (what an earlier run's `keep` gave; empty for a new session)."""
        ...

    def keep(self) -> Kept:
        """After the program finished: its globals, for a later run's `start` (main()'s
        value and the loop markers' list let go first), and what they hold by name."""
        ...

    def answer(self, answer: Answer) -> Step:
        """Answer the current call (or sleep) and run on to the next step."""
        ...

    def defer(self) -> Step:
        """Answer the current call of an async program with a future, settled later."""
        ...

    def settle(self, answers: Mapping[int, Answer]) -> Step:
        """Settle the deferred calls a `Wait` named, by call id, and run on."""
        ...

    def dump(self) -> bytes:
        """The interpreter's state where the program waits now, for `load` to go on from
        (in this worker or any other)."""
        ...

    def load(self, state: bytes, code: str) -> Step:
        """Go on from a `dump` (in a fresh run) of a run of `code`: the step the program
        waited at."""
        ...

    def type_names(self, expressions: list[str]) -> list[str] | None:
        """After the program finished: the type name of each expression over its globals
        (None when they cannot be evaluated)."""
        ...

    def kill(self) -> None:
        """Stop the worker at once, from any thread; harmless after the run ended."""
        ...


class Sandbox(Protocol):
    """Where programs run: a pool of isolated interpreters."""

    def modules(self, names: Iterable[str]) -> object:
        """The namespaces holding these capability names, prepared once per view."""
        ...

    def run(
        self, *, modules: object, roots: Iterable[str], limits: Limits, printer: Printer
    ) -> contextlib.AbstractContextManager[Run]:
        """A run in a fresh or reused worker; a worker whose run failed is never reused."""
        ...

    def close(self) -> None:
        """Stop the workers and let their processes go."""
        ...


# -- the pydantic-monty implementation -----------------------------------------------


FAILURE_KINDS: dict[type[pm.MontyError], FailureKind] = {
    pm.MontySyntaxError: FailureKind.SYNTAX,
    pm.MontyTypingError: FailureKind.SYNTAX,
    pm.MontyRuntimeError: FailureKind.RAISED,
    pm.MontyCrashedError: FailureKind.CRASHED,
    pm.MontyConversionError: FailureKind.HOST,
    pm.MontyDisconnectError: FailureKind.HOST,
    pm.MontyShutdown: FailureKind.HOST,
}
"""Every interpreter error type -> one kind; a test checks that none is missing."""


def translate(error: pm.MontyError, marked: Marked | None = None) -> SandboxFailure:
    """The neutral form of an interpreter error (the one place that reads one), its
    positions in the code as prepared (not as `marked` fed it)."""
    kind = next((k for cls, k in FAILURE_KINDS.items() if isinstance(error, cls)), FailureKind.HOST)
    if isinstance(error, pm.MontyCrashedError) and error.timed_out:
        return SandboxFailure(FailureKind.TIMED_OUT)
    if isinstance(error, pm.MontyCrashedError) and error.exit_status in _INTERRUPTED:
        return SandboxFailure(FailureKind.INTERRUPTED)
    if not isinstance(error, pm.MontySyntaxError | pm.MontyRuntimeError):
        return SandboxFailure(kind)
    inner = error.exception()
    marked = marked or Marked("")
    frames = []
    traceback = error.traceback()
    fed = traceback[0].filename if traceback else ""  # the outermost frame: this feed's
    for f in traceback:
        if f.filename != fed:
            continue  # a function an earlier program of the session defined: not this code
        start = marked.position(f.line, f.column)
        if start is None:
            continue  # the markers' own code, never the program's
        end = marked.position(f.end_line, f.end_column) or start
        frames.append(Frame(*start, *end, f.function_name))
    return SandboxFailure(kind, type(inner).__name__, str(inner), tuple(frames))


class MontySandbox:
    """A pool of pydantic-monty worker processes, started on first use."""

    def __init__(self, limits: Limits, binary: str | os.PathLike[str] | None = None) -> None:
        self.limits = limits
        self.binary = binary
        self._pool: pm.Monty | None = None
        self._lock = threading.Lock()
        self._record_types: dict[type[Any], pm.ClassType] = {}

    def _ensure_pool(self) -> pm.Monty:
        with self._lock:
            if self._pool is None:
                longest = max(self.limits.max_execution_seconds, self.limits.max_task_seconds)
                pool = pm.Monty(
                    binary_path=None if self.binary is None else os.fspath(self.binary),
                    min_processes=1,
                    # A run whose thread is stuck in host code keeps its (killed) worker
                    # checked out until that code returns: room for one per thread of
                    # the engine, besides the executions allowed to run at once.
                    max_processes=self.limits.max_concurrent_executions + work_threads(self.limits),
                    # The longest a run may take: a task's bound, when longer.
                    checkout_timeout=longest,
                    request_timeout=longest + 5,
                )
                pool.__enter__()
                self._pool = pool
            return self._pool

    def modules(self, names: Iterable[str]) -> dict[str, pm.ExternalModule]:
        tree: dict[str, Any] = {}
        for name in names:
            *namespaces, leaf = name.split(".")
            node = tree
            for part in namespaces:
                node = node.setdefault(part, {})
            node[leaf] = _placeholder

        def build(node: dict[str, Any]) -> pm.ExternalModule:
            return pm.ExternalModule(
                {k: build(v) if isinstance(v, dict) else v for k, v in node.items()}
            )

        return {root: build(node) for root, node in tree.items()}

    @contextlib.contextmanager
    def run(
        self, *, modules: object, roots: Iterable[str], limits: Limits, printer: Printer
    ) -> Iterator[MontyRun]:
        assert isinstance(modules, dict)
        try:
            session = self._ensure_pool().checkout(
                script_name=PROGRAM_FILE,
                limits={
                    "max_feed_duration_secs": limits.max_interpreter_seconds,
                    "max_memory": limits.max_memory_bytes,
                    "max_recursion_depth": limits.max_recursion_depth,
                    "max_suspensions": host_calls(limits),
                },
                external_modules={root: modules[root] for root in roots},
            )
            with session:
                run = MontyRun(session, printer, self._record_type, frozenset(modules))
                try:
                    yield run
                except BaseException:
                    run.kill()  # a worker that failed in any way is never reused
                    raise
                finally:
                    run.close()
        except pm.MontyError as error:
            raise translate(error) from None

    def _record_type(self, cls: type[Any]) -> pm.ClassType:
        """One class identity per record type, so the program sees the declared name."""
        found = self._record_types.get(cls)
        if found is None:
            found = self._record_types.setdefault(cls, pm.ClassType(cls, id=uuid.uuid4()))
        return found

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.__exit__(None, None, None)
                self._pool = None


class MontyRun:
    """One checked-out session: translates snapshots into steps."""

    def __init__(
        self,
        session: pm.MontySession,
        printer: Printer,
        record_type: Callable[[type[Any]], pm.ClassType],
        namespaces: frozenset[str] = frozenset(),
    ) -> None:
        self.session = session
        self.namespaces = namespaces
        """The view's capability roots: modules by these names are not a session's state."""
        self.printer = printer
        self.record_type = record_type
        self.snapshot: Any = None
        self.busy = False
        self.marked = Marked("")
        self._lock = threading.Lock()
        self._pid = session.worker_pid
        self._fed = ""
        """The name the interpreter gives this program's feed, in a session (else "")."""
        self._nowhere = (0, 0)
        """A span past the program's last line: where a call made in an earlier program's
        function is placed (no line of this program is its)."""

    def start(self, code: str, session: bytes | None = None) -> Step:
        self.marked = marked = mark(code)
        fed = marked.code
        if session is not None:
            try:
                if session:
                    self._fed = load_session(self.session, session)
                else:  # a new session: the markers' `len`, before any program rebinds it
                    self.session.feed_run(BIND_LENGTH, print_callback=silent)
            except (pm.MontyError, RuntimeError):  # sealed: the host's failure, never a program's
                raise SandboxFailure(FailureKind.HOST) from None
            if session:
                self._nowhere = _past(code)
                fed = going_on(fed)
        return self._step(lambda: self.session.feed_start(fed, print_callback=self.printer))

    def keep(self) -> Kept:
        try:
            return keep_session(self.session, self.namespaces)
        except (pm.MontyError, RuntimeError):
            raise SandboxFailure(FailureKind.HOST) from None

    def answer(self, answer: Answer) -> Step:
        return self._step(self._resume, answer)

    def defer(self) -> Step:
        snapshot = self.snapshot
        return self._step(lambda: snapshot.resume({"future": ...}))

    def settle(self, answers: Mapping[int, Answer]) -> Step:
        snapshot = self.snapshot
        results = {call_id: self._external(answer) for call_id, answer in answers.items()}
        return self._step(lambda: snapshot.resume(results))

    def dump(self) -> bytes:
        """The snapshot, after the name of this program's feed (ended by a NUL, which no
        name holds): a run that goes on from it places calls as this one does."""
        try:
            state: bytes = self.snapshot.dump()
        except pm.MontyError as error:
            raise translate(error) from None
        return self._fed.encode() + b"\0" + state

    def load(self, state: bytes, code: str) -> Step:
        self.marked = mark(code)
        fed, _, snapshot = state.partition(b"\0")
        self._fed = fed.decode(errors="replace")
        if self._fed:
            self._nowhere = _past(code)
        return self._step(lambda: self.session.load_snapshot(snapshot, print_callback=self.printer))

    def type_names(self, expressions: list[str]) -> list[str] | None:
        code = "[" + ", ".join(f"type({e}).__name__" for e in expressions) + "]"
        try:
            step = self._step(lambda: self.session.feed_start(code, print_callback=silent))
        except SandboxFailure:
            return None
        names = step.value if isinstance(step, Done) else None
        return names if isinstance(names, list) else None

    def kill(self) -> None:
        with self._lock:
            if self._pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, signal.SIGKILL)

    def close(self) -> None:
        """Forget the worker before it returns to the pool: a late kill cannot reach it.
        And drop the last snapshot: it holds the print callback, which holds the execution,
        in a cycle through an interpreter object the garbage collector cannot see into."""
        with self._lock:
            self._pid = None
        self.snapshot = None

    def _resume(self, answer: Answer) -> Any:
        return self.snapshot.resume(self._external(answer))

    def _step(self, advance: Callable[..., Any], *args: Any) -> Step:
        self.busy = True
        try:
            snapshot = advance(*args)
            while True:
                if isinstance(snapshot, pm.FunctionSnapshot):
                    name = snapshot.function_name
                    if name == "import":
                        snapshot = snapshot.resume_auto()
                    elif snapshot.is_os_function:
                        if name not in _SLEEPS:
                            snapshot = snapshot.resume_not_handled()
                            continue
                        self.snapshot = snapshot
                        position = snapshot.position
                        seconds = snapshot.args[0] if snapshot.args else None
                        awaitable = name in ("system.async_sleep", "asyncio.sleep")
                        call_id = snapshot.call_id if awaitable else None
                        return Sleep(seconds, self._span(position), call_id)
                    else:
                        self.snapshot = snapshot
                        position = snapshot.position
                        return Call(
                            str(name),
                            snapshot.args,
                            snapshot.kwargs,
                            snapshot.call_id,
                            self._span(position),
                        )
                elif isinstance(snapshot, pm.MontyComplete):
                    return Done(snapshot.output)
                elif isinstance(snapshot, pm.FutureSnapshot):
                    self.snapshot = snapshot
                    return Wait(tuple(snapshot.pending_call_ids))
                else:
                    snapshot = snapshot.resume()  # an unknown name: NameError in the program
        except pm.MontyError as error:
            raise self._failure(error) from None
        finally:
            self.busy = False

    def _span(self, position: pm.SourceRange) -> tuple[int, int]:
        """The code's own span of a call or sleep: none of it for one an earlier program's
        function makes (its position is in that program's code)."""
        if self._fed and position.filename != self._fed:
            return self._nowhere
        return self.marked.span(position.start, position.end)

    def _failure(self, error: pm.MontyError) -> SandboxFailure:
        failure = translate(error, self.marked)
        if failure.exc_type == "TimeoutError" and not failure.frames and self.marked.loops:
            failure.loops = self._loops()
        return failure

    def _loops(self) -> tuple[int, ...]:
        """The loops the program was inside when its time ran out, read from its globals (a
        trip runs no marker's exit). The interpreter promises nothing of a heap it stopped,
        so only lines of marked loops are believed, and a failed read means none."""
        try:
            found = self.session.feed_run(LOOPS, print_callback=silent)
        except pm.MontyError:
            return ()
        if not isinstance(found, list):
            return ()
        return tuple(n for n in found if type(n) is int and n in self.marked.loops)

    def _external(self, answer: Answer) -> Any:
        if isinstance(answer, Injected):
            return {"exc_type": answer.exc_type, "message": answer.message}
        if not answer.has_records:
            return {"return_value": answer.value}
        return {"return_value": self._guest(answer.value)}

    def _guest(self, value: Any) -> Any:
        """Records become objects the program reads by attribute; the rest is JSON data."""
        kind = type(value)
        if kind is str or kind is int or kind is bool or kind is float or value is None:
            return value
        if isinstance(value, RecordValue):
            return GuestRecord(
                value,
                eager_attrs=value.__match_args__,
                class_type=self.record_type(kind),
                guest=self._guest,
                id=record_id(),
            )
        if isinstance(value, list):
            return [self._guest(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self._guest(item) for item in value)
        if isinstance(value, dict):
            return {key: self._guest(item) for key, item in value.items()}
        return value


def _past(code: str) -> tuple[int, int]:
    """The empty span just past `code`'s last byte."""
    end = len(code.encode("utf-8", errors="surrogatepass"))
    return (end, end)


_INTERRUPTED = (-signal.SIGINT, 128 + signal.SIGINT)
"""Exit statuses of a worker ended by SIGINT."""

_SLEEPS = frozenset({"system.sleep", "system.async_sleep", "time.sleep", "asyncio.sleep"})


def _placeholder(*args: Any, **kwargs: Any) -> Any:
    """Stands in for a capability in its module; the dispatch loop answers every call."""
    raise AssertionError("capabilities are dispatched by the execution")


__all__ = [
    "FAILURE_KINDS",
    "Answer",
    "Call",
    "Done",
    "FailureKind",
    "Frame",
    "Injected",
    "MontySandbox",
    "Printer",
    "Returned",
    "Run",
    "Sandbox",
    "SandboxFailure",
    "Sleep",
    "Step",
    "Wait",
    "translate",
]
