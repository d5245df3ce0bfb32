"""The dispatch loop of one execution: one checkout of a pool worker, one feed.

Each capability call suspends the interpreter; the driver binds, authorizes and runs it,
then resumes. A worker that hit a limit, crashed or was abandoned is killed, so the pool
never hands it out again.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import logging
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic_monty as pm

from codemode.authz import Authorizer
from codemode.capabilities import Capability
from codemode.errors import (
    PROGRAM_FILE,
    CodeModeError,
    InternalError,
    InvalidProgramError,
    ResourceLimitError,
)
from codemode.events import EventHandler, ExecutionFinished, ExecutionStarted
from codemode.limits import LimitKind, Limits
from codemode.runtime.classify import Outcome, classify
from codemode.runtime.dispatch import Bridge, Dispatcher, Raise, Stop
from codemode.runtime.program import Program
from codemode.tracing import execution_span
from codemode.types import JSONObject, JSONValue
from codemode.values import TooBig, TooDeep, ValueProblem, json_size, to_json

log = logging.getLogger("codemode")

if TYPE_CHECKING:
    from codemode.runtime.engine import Engine


@dataclass(frozen=True, slots=True)
class Usage:
    """What one execution used; safe to show the model (no limit values)."""

    duration_seconds: float
    capability_calls: tuple[str, ...]
    """Names of the capabilities called, in the order the calls started."""
    host_seconds: float = 0.0
    """Time spent in capability calls (binding, authorization, handlers)."""
    result_bytes: int = 0
    """JSON bytes of all capability results together."""
    return_bytes: int = 0
    """JSON bytes of the value main() returned."""

    def to_dict(self) -> JSONObject:
        """The form the agent sees: durations in milliseconds, calls counted by name."""
        counts = Counter(self.capability_calls)
        calls: dict[str, JSONValue] = {name: counts[name] for name in counts}
        return {
            "duration_ms": round(self.duration_seconds * 1000, 3),
            "sandbox_ms": round(max(self.duration_seconds - self.host_seconds, 0.0) * 1000, 3),
            "capability_ms": round(self.host_seconds * 1000, 3),
            "calls": calls,
            "result_bytes": self.result_bytes,
            "return_bytes": self.return_bytes,
        }


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """The outcome of a successful execution."""

    value: JSONValue
    """What main() returned, as JSON-compatible data."""
    printed: str
    """Captured print() output, bounded; "" when nothing was printed."""
    usage: Usage
    execution_id: str


class _Printer:
    """Collects print() output up to a cap; a flood past it stops the worker at once."""

    def __init__(self, cap: int, on_flood: Callable[[], None]) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0
        self.flooded = False
        self.on_flood = on_flood

    def __call__(self, stream: str, text: str) -> None:
        if self.flooded:
            return
        room = self.cap - self.size
        encoded = text.encode("utf-8")
        if len(encoded) > room:
            self.parts.append(encoded[:room].decode("utf-8", errors="ignore"))
            self.size = self.cap
            self.flooded = True
            self.on_flood()
            return
        self.parts.append(text)
        self.size += len(encoded)

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(eq=False)
class Execution:
    """One run of one program: the driver's state, shared with the waiting caller."""

    source: str
    subject: str
    capabilities: Mapping[str, Capability]
    """The capabilities this execution may see and call, by name."""
    authorizer: Authorizer
    limits: Limits
    bridge: Bridge
    engine: Engine
    emit: EventHandler
    emits: bool = True
    """Whether anyone listens to call events (skipped entirely otherwise)."""
    trace_arguments: bool = False
    execution_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + self.limits.max_execution_seconds
        self.outcome = Outcome(program=None, printed_cap=self.limits.max_printed_bytes)
        self.printer = _Printer(self.limits.max_printed_bytes, self._on_flood)
        self.calls: list[str] = []
        self.calls_by_name: dict[str, int] = {}
        self.worker_pid: int | None = None
        self.lock = threading.Lock()
        self.finished = False
        self.dispatcher = Dispatcher(
            self.execution_id,
            self.subject,
            self.authorizer,
            self.limits,
            self.bridge,
            self.remaining,
            self.emit if self.emits else None,
            self.engine.calls,
            self.trace_arguments,
        )

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    # -- stopping from outside the driver ----------------------------------------------

    def stop(self, error: CodeModeError) -> None:
        """Stop the execution with `error`: the worker is killed and the driver unwinds."""
        with self.lock:
            if self.finished or self.outcome.killed_for is not None:
                return
            self.outcome.killed_for = error
            self._kill_worker()
        self.bridge.cancel_all()

    def _on_flood(self) -> None:
        self.stop(ResourceLimitError(LimitKind.PRINTED_OUTPUT))

    def _kill_worker(self) -> None:
        if self.worker_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.worker_pid, signal.SIGKILL)

    # -- the driver ----------------------------------------------------------------------

    def drive(self) -> ExecutionResult:
        """Run the program to its result; raises exactly one CodeModeError on failure."""
        if self.emits:
            encoded = self.source.encode("utf-8", errors="surrogatepass")
            self.emit(
                ExecutionStarted(
                    execution_id=self.execution_id,
                    subject=self.subject,
                    time=time.time(),
                    source_sha256=hashlib.sha256(encoded).hexdigest(),
                    source_bytes=len(encoded),
                )
            )
        with execution_span(self.execution_id, self.subject) as span:
            self.dispatcher.span = span
            try:
                result = self._drive()
            except CodeModeError as error:
                span.outcome(error.code.value)
                raise
            span.outcome("ok")
            return result

    def _drive(self) -> ExecutionResult:
        outcome = "internal"
        try:
            if not self.engine.slots.acquire(timeout=max(self.remaining(), 0)):
                raise ResourceLimitError(LimitKind.EXECUTION_TIME)
            try:
                result = self._run()
            finally:
                self.engine.slots.release()
            outcome = "ok"
            return result
        except CodeModeError as error:
            outcome = error.code.value
            error.printed = self.printer.text
            raise error from None
        finally:
            with self.lock:
                self.finished = True
            self.bridge.cancel_all()  # no async handler outlives its execution
            if self.emits:
                self.emit(
                    ExecutionFinished(
                        execution_id=self.execution_id,
                        subject=self.subject,
                        time=time.time(),
                        outcome=outcome,
                        duration_seconds=time.monotonic() - self.started,
                        capability_calls=tuple(self.calls),
                        result_bytes=self.dispatcher.result_bytes,
                    )
                )

    def _run(self) -> ExecutionResult:
        if self.outcome.killed_for is not None:
            raise self.outcome.killed_for
        if len(self.source.encode("utf-8", errors="surrogatepass")) > self.limits.max_source_bytes:
            raise ResourceLimitError(LimitKind.SOURCE_SIZE)
        program = self.engine.programs(self.capabilities).prepare(self.source)
        self.outcome.program = program
        try:
            with self.engine.pool.checkout(
                script_name=PROGRAM_FILE,
                limits={
                    "max_feed_duration_secs": self.limits.max_interpreter_seconds,
                    "max_memory": self.limits.max_memory_bytes,
                    "max_recursion_depth": self.limits.max_recursion_depth,
                    "max_suspensions": 4 * self.limits.max_capability_calls + 64,
                },
                external_modules=self.engine.modules(self.capabilities, program.roots),
            ) as session:
                with self.lock:
                    self.worker_pid = session.worker_pid
                try:
                    value = self._feed(session, program)
                except BaseException:
                    with self.lock:  # a worker that failed in any way is never reused
                        self._kill_worker()
                    raise
        except CodeModeError:
            raise
        except Stop as stop:
            raise stop.error from None
        except Exception as exc:
            error = classify(exc, self.outcome)
            if isinstance(error, InternalError):
                log.error("execution %s: internal failure", self.execution_id, exc_info=exc)
            raise error from None
        final, size = self._final(value)
        usage = Usage(
            duration_seconds=time.monotonic() - self.started,
            capability_calls=tuple(self.calls),
            host_seconds=self.dispatcher.host_seconds,
            result_bytes=self.dispatcher.result_bytes,
            return_bytes=size,
        )
        return ExecutionResult(final, self.printer.text, usage, self.execution_id)

    def _feed(self, session: pm.MontySession, program: Program) -> Any:
        snapshot = session.feed_start(program.code, print_callback=self.printer)
        tasks: dict[int, concurrent.futures.Future[Any]] = {}
        try:
            while True:
                if self.outcome.killed_for is not None:
                    raise Stop(self.outcome.killed_for)
                if self.remaining() <= 0:
                    raise Stop(ResourceLimitError(LimitKind.EXECUTION_TIME))
                if isinstance(snapshot, pm.MontyComplete):
                    return snapshot.output
                if isinstance(snapshot, pm.FunctionSnapshot):
                    snapshot = self._on_call(snapshot, program, tasks)
                elif isinstance(snapshot, pm.FutureSnapshot):
                    snapshot = snapshot.resume(self._settle(snapshot.pending_call_ids, tasks))
                else:
                    snapshot = snapshot.resume()  # an unknown name: NameError in the program
        finally:
            for task in tasks.values():
                task.cancel()

    def _on_call(
        self,
        snapshot: pm.FunctionSnapshot,
        program: Program,
        tasks: dict[int, concurrent.futures.Future[Any]],
    ) -> Any:
        name = snapshot.function_name
        if name == "import":
            return snapshot.resume_auto()
        if snapshot.is_os_function:
            return snapshot.resume_not_handled()
        capability = self.capabilities.get(str(name))
        if capability is None:
            return snapshot.resume(_undefined(str(name)))
        if len(self.calls) >= self.limits.max_capability_calls:
            raise Stop(ResourceLimitError(LimitKind.CAPABILITY_CALLS))
        count = self.calls_by_name.get(capability.name, 0) + 1
        allowed = capability.max_calls_per_execution or self.limits.max_calls_per_capability
        if count > allowed:
            where = program.where_at(snapshot.position.start, snapshot.position.end)
            raise Stop(ResourceLimitError(f"calls to {capability.name}", where=where))
        self.calls_by_name[capability.name] = count
        self.calls.append(capability.name)
        args, kwargs = snapshot.args, snapshot.kwargs
        if program.is_async:
            span = (snapshot.position.start, snapshot.position.end)
            tasks[snapshot.call_id] = self.engine.calls.submit(
                self._call, capability, args, kwargs, program, lambda: span
            )
            return snapshot.resume({"future": ...})
        try:
            value = self._call(capability, args, kwargs, program, lambda: _span(snapshot))
        except Raise as failure:
            return snapshot.resume(self._raise(failure))
        return snapshot.resume({"return_value": value})

    def _call(
        self,
        capability: Capability,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        program: Program,
        span: Callable[[], tuple[int, int]],
    ) -> Any:
        try:
            return self.dispatcher.call(capability, args, kwargs)
        except Stop as stop:
            error = stop.error
            where = error.where or program.where_at(*span())  # positions only on failure
            raise Stop(type(error)(error.detail, where=where)) from None

    def _settle(
        self, pending: list[int], tasks: dict[int, concurrent.futures.Future[Any]]
    ) -> dict[int, Any]:
        waiting = [tasks[call_id] for call_id in pending if call_id in tasks]
        done, _ = concurrent.futures.wait(
            waiting, timeout=max(self.remaining(), 0), return_when="FIRST_COMPLETED"
        )
        if not done:
            raise Stop(ResourceLimitError(LimitKind.EXECUTION_TIME))
        results: dict[int, Any] = {}
        for call_id in pending:
            task = tasks.get(call_id)
            if task is None or not task.done():
                continue
            del tasks[call_id]
            try:
                results[call_id] = {"return_value": task.result()}
            except Raise as failure:
                results[call_id] = self._raise(failure)
        return results

    def _raise(self, failure: Raise) -> pm.ExternalExceptionData:
        """Raise a failure inside the program, remembering where the safe text came from."""
        message = str(failure.error)
        self.outcome.injected[(failure.exc_type, message)] = failure.error
        return {"exc_type": failure.exc_type, "message": message}

    def _final(self, value: Any) -> tuple[JSONValue, int]:
        try:
            result = to_json(
                value,
                max_depth=self.limits.max_value_depth,
                root="result",
                max_bytes=self.limits.max_return_bytes,
            )
        except TooDeep:
            raise ResourceLimitError(LimitKind.VALUE_DEPTH) from None
        except TooBig:
            raise ResourceLimitError(LimitKind.RETURN_VALUE_SIZE) from None
        except ValueProblem as problem:
            raise InvalidProgramError(
                f"main() returned a value that is not JSON: {problem.path} {problem.reason}"
            ) from None
        size = json_size(result)
        if size > self.limits.max_return_bytes:
            raise ResourceLimitError(LimitKind.RETURN_VALUE_SIZE)
        return result, size


def _span(snapshot: pm.FunctionSnapshot) -> tuple[int, int]:
    """The byte span of the call a snapshot stopped at."""
    position = snapshot.position
    return position.start, position.end


def _undefined(name: str) -> pm.ExternalExceptionData:
    """The error for a call to a name the program never defined (the name is its own)."""
    module, _, attribute = name.rpartition(".")
    if module:
        return {
            "exc_type": "AttributeError",
            "message": f"module '{module}' has no attribute '{attribute}'",
        }
    return {"exc_type": "NameError", "message": f"name '{name}' is not defined"}


__all__ = ["Execution", "ExecutionResult", "Usage"]
