"""The dispatch loop of one execution: one run in the sandbox, one feed.

Each capability call suspends the program; the driver binds, authorizes and runs it,
then answers. Everything this loop learns of the run goes through the `Sandbox` seam,
and every failure, whatever raised it, leaves `drive()` as exactly one CodeModeError.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import logging
import math
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codemode.authz import Authorizer
from codemode.capabilities import Capability
from codemode.capabilities.results import Projected
from codemode.errors import (
    CallRecord,
    CodeModeError,
    ExecutionCanceledError,
    InternalError,
    InvalidProgramError,
    ResourceLimitError,
)
from codemode.events import (
    Event,
    EventHandler,
    ExecutionFinished,
    ExecutionStarted,
    HostCodeAbandoned,
)
from codemode.limits import LimitKind, Limits, exceeded, size, subject_share
from codemode.runtime.classify import FailureContext, InjectedError, StopError, classify
from codemode.runtime.dispatch import Bridge, Dispatcher, HostClock
from codemode.runtime.program import RETURNED, Program, Programs
from codemode.runtime.sandbox import (
    Answer,
    Call,
    Done,
    Injected,
    Returned,
    Run,
    Sandbox,
    Sleep,
    Step,
)
from codemode.runtime.timers import Timers
from codemode.tracing import execution_span
from codemode.types import JSONObject, JSONValue
from codemode.values import (
    FUNCTION_TEXT,
    VALUE_TEXT,
    CrossingError,
    TooBigError,
    TooDeepError,
    json_size,
    kind_of,
    object_fields,
    to_json,
)

log = logging.getLogger("codemode")

CALL_THREADS = 64
"""Threads one `async def main` may run capability calls on at once (started as needed);
more calls queue."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What one execution used: the program's own doing, safe to show the model."""

    duration_seconds: float
    capability_calls: tuple[str, ...]
    """Names of the capabilities called, in the order the calls started."""
    host_seconds: float = 0.0
    """Time spent in capability calls (binding, authorization, handlers); calls that ran
    at once (gathered) count once."""
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


class Abandoned:
    """Threads left running in host code past their deadline, counted engine-wide and
    per subject.

    A thread stuck in a handler cannot be stopped; it is left to finish on its own,
    holding no slot. Past `limit` of them the engine refuses new executions, and past
    its share (`subject_share`) a subject's own, so one subject cannot exhaust what the
    others need.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.share = subject_share(limit)
        self.count = 0
        self.by_subject: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, future: concurrent.futures.Future[Any], subject: str) -> int:
        with self._lock:
            self.count += 1
            self.by_subject[subject] += 1
            count = self.count
        future.add_done_callback(lambda _: self._done(subject))
        return count

    def _done(self, subject: str) -> None:
        with self._lock:
            self.count -= 1
            self.by_subject[subject] -= 1
            if not self.by_subject[subject]:
                del self.by_subject[subject]

    @property
    def full(self) -> bool:
        return self.count >= self.limit

    def share_used(self, subject: str) -> bool:
        """Whether `subject` holds its whole share."""
        with self._lock:
            return self.by_subject[subject] >= self.share


@dataclass(frozen=True, slots=True)
class Setup:
    """What every execution over one set of capabilities shares (built by the engine)."""

    capabilities: Mapping[str, Capability]
    """The capabilities executions may see and call, by name."""
    programs: Programs
    modules: object
    """The sandbox's namespaces for these capabilities."""
    sandbox: Sandbox
    limits: Limits
    slots: threading.BoundedSemaphore
    """One per execution allowed to run at once."""
    abandoned: Abandoned
    """Drivers left stuck in host code (each holds a worker checkout)."""
    abandoned_calls: Abandoned
    """Capability-call threads of `async def main` programs left stuck in host code."""
    timers: Timers
    """Where the sleeps of `async def main` wait."""
    shortest_budget: float
    """The shortest time any of these capabilities' handlers may run: how long the caller
    may sleep without missing a handler's deadline."""
    overdue: ResourceLimitError
    """The error for an execution past its own deadline (built once; copied when raised)."""


class _Printer:
    """Collects print() output up to a cap; a flood past it stops the execution at once."""

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
        encoded = text.encode("utf-8", errors="surrogatepass")
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


@dataclass(eq=False, kw_only=True)
class Execution:
    """One run of one program: the driver's state, shared with the waiting caller."""

    source: str
    subject: str
    setup: Setup
    authorizer: Authorizer
    bridge: Bridge
    emit: EventHandler | None = None
    """Where audit events go; None when nobody listens."""
    trace_arguments: bool = False
    disclose_limits: bool = True
    """Whether a limit error names the bound and the amount (else only the kind)."""
    execution_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        limits = self.setup.limits
        self.started = time.monotonic()
        self.began = self.started
        """When the `ExecutionStarted` event was made, from which its end is measured."""
        self.answered_at: float | None = None
        """When the caller was given its answer (by the driver or by a stop)."""
        self.clock = HostClock(self.started + limits.max_execution_seconds, self.setup.overdue)
        self.failure_context = FailureContext(limits, self.setup.programs)
        self.printer = _Printer(limits.max_printed_bytes, self._on_flood)
        self.calls: list[str] = []
        self.calls_by_name: dict[str, int] = {}
        self.ended: list[tuple[str, tuple[int, int], str]] = []
        """(capability, call span, outcome) of every call that ended, in that order."""
        self.lock = threading.Lock()
        self.halted: concurrent.futures.Future[None] = concurrent.futures.Future()
        """Done when the execution is stopped: ends the driver's waits (a sleep, a slot,
        the program's calls) at once."""
        self.waiting = False
        """Whether the driver waits where `halted` ends the wait."""
        self.finished = False
        self.caller_done = False
        self.holds_slot = False
        self.run: Run | None = None
        self.answer: concurrent.futures.Future[ExecutionResult] = concurrent.futures.Future()
        """What the caller waits for: set once, by the driver or by a stop."""
        self.call_threads: concurrent.futures.ThreadPoolExecutor | None = None
        self.tasks: dict[int, tuple[concurrent.futures.Future[Any], Call]] = {}
        """Calls of an `async def main` not yet answered, by call id."""
        self.dispatcher = Dispatcher(
            execution_id=self.execution_id,
            subject=self.subject,
            authorizer=self.authorizer,
            limits=limits,
            bridge=self.bridge,
            clock=self.clock,
            stopped=lambda: self.failure_context.killed_for,
            emit=self.emit,
            trace_arguments=self.trace_arguments,
        )

    def remaining(self) -> float:
        return self.clock.deadline - time.monotonic()

    # -- from the caller's side ---------------------------------------------------------

    def stop(self, error: CodeModeError) -> None:
        """Stop the execution with `error`: the worker is killed and the driver unwinds."""
        with self.lock:
            if self.finished or self.failure_context.killed_for is not None:
                return
            self.failure_context.killed_for = error
            run = self.run
            if run is not None:
                run.kill()
        self.bridge.cancel_all()
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            self.halted.set_result(None)
        if run is None or not run.busy:  # the driver may be in host code: answer now
            self.settle(error)

    def settle(self, outcome: ExecutionResult | CodeModeError) -> None:
        """Give the caller its answer, once: the first of the driver and a stop wins.

        An error is answered as a fresh copy carrying what the program printed so far and
        the calls it made.
        """
        with self.lock:
            if self.answer.done():
                return
            self.answered_at = time.monotonic()
            if isinstance(outcome, ExecutionResult):
                self.answer.set_result(outcome)
                return
            if isinstance(outcome, ResourceLimitError) and not self.disclose_limits:
                outcome = outcome.opaque()
            self.answer.set_exception(
                outcome.replace(printed=self.printer.text, calls=self._call_records())
            )

    def _call_records(self) -> tuple[CallRecord, ...]:
        """The calls that ended, with their lines (built only for an error)."""
        program = self.failure_context.program
        records = []
        for name, span, result in list(self.ended):
            where = None if program is None else program.where_at(*span)
            records.append(CallRecord(name, None if where is None else where.line, result))
        return tuple(records)

    def stoppable(self) -> bool:
        """Whether the driver is where a stop ends it at once: in the interpreter, or in one
        of its own waits (else it may be in host code, which nothing can end)."""
        run = self.run
        return self.waiting or (run is not None and run.busy)

    def next_wake(self) -> float:
        """Seconds the caller may sleep before it must look at the deadlines again."""
        now = time.monotonic()
        return min(self.clock.next_deadline(), now + self.setup.shortest_budget) - now

    def overdue(self) -> CodeModeError | None:
        """Why the caller should stop waiting now: a stop, or the earliest deadline passed."""
        if self.failure_context.killed_for is not None:
            return self.failure_context.killed_for
        if time.monotonic() >= self.clock.next_deadline():
            return self.clock.overdue()
        return None

    def caller_answered(self) -> None:
        """The caller has its answer: its concurrency slot is free from now on."""
        with self.lock:
            self.caller_done = True
            if self.holds_slot:
                self.holds_slot = False
                self.setup.slots.release()

    def report_abandoned(self, what: str, count: int) -> None:
        _log(
            logging.WARNING,
            "execution %s: %s left running in host code past its deadline (%d abandoned now)",
            self.execution_id,
            what,
            count,
        )
        if self.emit is None:
            return
        event = HostCodeAbandoned(
            execution_id=self.execution_id,
            subject=self.subject,
            time=time.time(),
            what=what,
            abandoned=count,
        )
        # The sink is host code and the caller may be an event loop: deliver it elsewhere.
        threading.Thread(target=self._deliver, args=(event,), daemon=True).start()

    def _on_flood(self) -> None:
        self.stop(exceeded(LimitKind.PRINTED_OUTPUT, self.setup.limits))

    # -- the driver ----------------------------------------------------------------------

    def drive(self) -> None:
        """Run the program and settle the answer: its result, or exactly one CodeModeError.

        The one last-resort net: whatever raises here (the program, handlers, an audit
        sink, a tracing hook) ends as one CodeModeError, and the caller is answered before
        the execution's last event is delivered.
        """
        outcome: ExecutionResult | CodeModeError = InternalError()
        try:
            with execution_span(self.execution_id, self.subject) as span:
                self.dispatcher.span = span
                outcome = self._outcome()
                span.outcome("ok" if isinstance(outcome, ExecutionResult) else outcome.code.value)
        except BaseException as exc:  # a tracing hook is host code too
            _log(logging.ERROR, "execution %s: internal failure", self.execution_id, exc=exc)
            if isinstance(outcome, ExecutionResult):
                outcome = InternalError()
        self._close()
        self.settle(outcome)
        self._deliver(
            ExecutionFinished(
                execution_id=self.execution_id,
                subject=self.subject,
                time=time.time(),
                outcome="ok" if isinstance(outcome, ExecutionResult) else outcome.code.value,
                duration_seconds=(self.answered_at or time.monotonic()) - self.began,
                capability_calls=tuple(self.calls),
                result_bytes=self.dispatcher.result_bytes,
            )
        )

    def _outcome(self) -> ExecutionResult | CodeModeError:
        try:
            self._started()
            if not self._take_slot():
                raise StopError(self.clock.overdue())
            return self._run()
        except BaseException as exc:
            error = classify(exc, self.failure_context)
            if isinstance(error, InternalError) and error is not self.failure_context.killed_for:
                _log(logging.ERROR, "execution %s: internal failure", self.execution_id, exc=exc)
            return error

    def _started(self) -> None:
        self.began = time.monotonic()
        if self.emit is None:
            return
        encoded = self.source.encode("utf-8", errors="surrogatepass")
        event = ExecutionStarted(
            execution_id=self.execution_id,
            subject=self.subject,
            time=time.time(),
            source_sha256=hashlib.sha256(encoded).hexdigest(),
            source_bytes=len(encoded),
        )
        if not self._deliver(event):
            raise StopError(InternalError())  # an execution that cannot be audited does not run

    def _take_slot(self) -> bool:
        """Wait for a concurrency slot, within the deadline; a stop ends the wait."""
        self.waiting = True
        try:
            while not self.setup.slots.acquire(timeout=min(max(self.remaining(), 0), 0.05)):
                if self.halted.done() or self.caller_done or self.remaining() <= 0:
                    return False
        finally:
            self.waiting = False
        with self.lock:
            if self.caller_done:  # the caller gave up while this driver waited
                self.setup.slots.release()
                return False
            self.holds_slot = True
        return True

    def _close(self) -> None:
        with self.lock:
            self.finished = True
        self.bridge.cancel_all()  # no async handler outlives its execution
        pending = [(future, call) for future, call in self.tasks.values() if not future.done()]
        self.setup.timers.cancel(future for future, call in pending if call.name == _SLEEP)
        if self.call_threads is not None:
            # Calls not started never start; a call still running is left to finish.
            self.call_threads.shutdown(wait=False, cancel_futures=True)
            for future, call in pending:
                if not future.done() and call.name != _SLEEP:  # a timer is no host code
                    count = self.setup.abandoned_calls.add(future, self.subject)
                    self.report_abandoned("a capability call", count)

    def _deliver(self, event: Event) -> bool:
        """Hand an event to the sink; a failing sink is logged, and reported as False."""
        if self.emit is None:
            return True
        try:
            self.emit(event)
        except BaseException as exc:
            _log(
                logging.ERROR,
                "execution %s: the audit sink failed on %s",
                self.execution_id,
                type(event).__name__,
                exc=exc,
            )
            return False
        return True

    def _run(self) -> ExecutionResult:
        limits = self.setup.limits
        source_bytes = len(self.source.encode("utf-8", errors="surrogatepass"))
        if source_bytes > limits.max_source_bytes:
            raise StopError(exceeded(LimitKind.SOURCE_SIZE, limits, amount=size(source_bytes)))
        try:
            program = self.setup.programs.prepare(self.source)
        except CodeModeError as error:  # the preflight's own verdict (it runs no host code)
            raise StopError(error) from None
        self.failure_context.program = program
        with self.setup.sandbox.run(
            modules=self.setup.modules, roots=program.roots, limits=limits, printer=self.printer
        ) as run:
            with self.lock:
                if self.failure_context.killed_for is not None:
                    raise StopError(self.failure_context.killed_for)
                self.run = run
            try:
                value = self._feed(run, program)
                final, returned = self._final(value, program, run)
            finally:
                with self.lock:
                    self.run = None
        usage = Usage(
            duration_seconds=time.monotonic() - self.started,
            capability_calls=tuple(self.calls),
            host_seconds=self.dispatcher.host_seconds,
            result_bytes=self.dispatcher.result_bytes,
            return_bytes=returned,
        )
        return ExecutionResult(final, self.printer.text, usage, self.execution_id)

    def _feed(self, run: Run, program: Program) -> Any:
        step: Step = run.start(program.code)
        while True:
            if self.failure_context.killed_for is not None:
                raise StopError(self.failure_context.killed_for)
            if self.remaining() <= 0:
                raise StopError(self.clock.overdue())
            if isinstance(step, Done):
                self._drain()
                return step.value
            if isinstance(step, Call):
                step = self._on_call(run, step, program)
            elif isinstance(step, Sleep):
                step = self._on_sleep(run, step, program)
            else:
                step = run.settle(self._settle(step.call_ids, program))

    def _on_call(self, run: Run, call: Call, program: Program) -> Step:
        capability = self.setup.capabilities.get(call.name)
        if capability is None:
            if call.name == "vars":
                return run.answer(self._vars(call))
            return run.answer(_undefined(call.name))
        limits = self.setup.limits
        if len(self.calls) >= limits.max_capability_calls:
            where = program.where_at(*call.span)
            raise StopError(exceeded(LimitKind.CAPABILITY_CALLS, limits, where=where))
        count = self.calls_by_name.get(capability.name, 0) + 1
        allowed = capability.max_calls_per_execution or limits.max_calls_per_capability
        if count > allowed:
            where = program.where_at(*call.span)
            raise StopError(
                ResourceLimitError(f"calls to {capability.name}", bound=str(allowed), where=where)
            )
        self.calls_by_name[capability.name] = count
        self.calls.append(capability.name)
        if program.is_async:
            future = self._threads().submit(self._call, capability, call, program)
            self.tasks[call.call_id] = (future, call)
            return run.defer()
        try:
            projected = self._call(capability, call, program)
        except InjectedError as failure:
            return run.answer(self._inject(failure, call, program))
        return run.answer(Returned(projected.value, projected.has_records))

    def _call(self, capability: Capability, call: Call, program: Program) -> Any:
        try:
            projected = self.dispatcher.call(
                capability, call.args, call.kwargs, lambda: program.where_at(*call.span)
            )
        except InjectedError as failure:
            self.ended.append((capability.name, call.span, failure.error.code.value))
            raise
        except StopError as stop:
            error = stop.error
            self.ended.append((capability.name, call.span, error.code.value))
            if error.where is not None or _overdue(error):
                raise  # the clock placed an overdue execution, as the waiting caller does
            where = program.where_at(*call.span)  # positions only on failure
            raise StopError(error.replace(where=where)) from None
        self.ended.append((capability.name, call.span, "ok"))
        return projected

    def _vars(self, call: Call) -> Answer:
        """`vars(obj)`: a result object (or a dataclass the program built) as the dict that
        returning it gives, nested objects included."""
        if len(call.args) != 1 or call.kwargs:
            return Injected("TypeError", "vars() takes one object: a result object or a dataclass")
        if object_fields(call.args[0]) is None:
            return Injected("TypeError", _not_an_object(call.args[0]))
        limits = self.setup.limits
        try:
            value = to_json(
                call.args[0],
                max_depth=limits.max_value_depth,
                root="vars()",
                max_bytes=limits.max_result_bytes,
            )
        except (TooDeepError, TooBigError):
            return Injected("ValueError", "vars() of an object this large is not supported")
        except CrossingError as problem:
            return Injected("TypeError", f"{problem.path} {problem.reason}")
        return Returned(value)

    def _threads(self) -> concurrent.futures.ThreadPoolExecutor:
        """The threads an `async def main` runs its calls and sleeps on (started once)."""
        if self.call_threads is None:
            self.call_threads = concurrent.futures.ThreadPoolExecutor(CALL_THREADS, "codemode-call")
        return self.call_threads

    def _on_sleep(self, run: Run, sleep: Sleep, program: Program) -> Step:
        """`time.sleep` and `asyncio.sleep`: wait, within the execution time; an awaited
        `asyncio.sleep` lets the program's other calls and sleeps go on meanwhile. A sleep
        that would end past the deadline fails at once rather than waste the wait."""
        seconds = sleep.seconds
        if not (isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0):
            return run.answer(Injected("ValueError", "sleep length must be a non-negative number"))
        if seconds >= self.remaining():
            where = program.where_at(*sleep.span)
            raise StopError(exceeded(LimitKind.EXECUTION_TIME, self.setup.limits, where=where))
        if sleep.call_id is not None and program.is_async:
            call = Call(_SLEEP, (), {}, sleep.call_id, sleep.span)
            self.tasks[sleep.call_id] = (
                self.setup.timers.at(time.monotonic() + seconds, _SLEPT),
                call,
            )
            return run.defer()
        self.waiting = True
        try:
            self._nap(seconds)
        finally:
            self.waiting = False
        return run.answer(Returned(None))

    def _nap(self, seconds: float) -> Projected:
        """Sleep, ended at once by a stop of the execution."""
        with contextlib.suppress(concurrent.futures.TimeoutError):
            self.halted.result(timeout=seconds)
            raise StopError(self.failure_context.killed_for or ExecutionCanceledError())
        return _SLEPT

    def _settle(self, pending: tuple[int, ...], program: Program) -> dict[int, Answer]:
        tasks = self.tasks
        self._wait([tasks[call_id][0] for call_id in pending if call_id in tasks], every=False)
        answers: dict[int, Answer] = {}
        for call_id in pending:
            task = tasks.get(call_id)
            if task is None or not task[0].done():
                continue
            del tasks[call_id]
            future, call = task
            try:
                projected = future.result()
            except InjectedError as failure:
                answers[call_id] = self._inject(failure, call, program)
            else:
                answers[call_id] = Returned(projected.value, projected.has_records)
        return answers

    def _drain(self) -> None:
        """Calls that `async def main` started and never awaited still run: the execution
        ends when they have, within its deadline, so no call outlives it unowned."""
        self._wait([future for future, _ in self.tasks.values()], every=True)

    def _wait(self, futures: list[concurrent.futures.Future[Any]], *, every: bool) -> None:
        """Wait for the first of these calls (or `every` one) to finish, within the earliest
        deadline in force: past it, or once the execution is stopped, it ends at once."""
        waiting = set(futures)
        while waiting:
            deadline = self.clock.next_deadline()
            self.waiting = True
            try:
                done, _ = concurrent.futures.wait(
                    [*waiting, self.halted],
                    timeout=max(deadline - time.monotonic(), 0),
                    return_when="FIRST_COMPLETED",
                )
            finally:
                self.waiting = False
            if self.failure_context.killed_for is not None or self.halted.done():
                raise StopError(self.failure_context.killed_for or ExecutionCanceledError())
            waiting -= done
            if (done and not every) or not waiting:
                return
            if time.monotonic() >= deadline:
                raise StopError(self.clock.overdue())

    def _inject(self, failure: InjectedError, call: Call, program: Program) -> Injected:
        """Raise a failure inside the program, remembering which call raised it."""
        message = str(failure.error)
        where = program.where_at(*call.span)
        if where is not None:
            self.failure_context.injected.append((where, failure.exc_type, message, failure.error))
        return Injected(failure.exc_type, message)

    def _final(self, value: Any, program: Program, run: Run) -> tuple[JSONValue, int]:
        limits = self.setup.limits
        where = program.returned
        texts: list[tuple[str, str]] = []
        capabilities = self.setup.capabilities
        try:
            result = to_json(
                value,
                max_depth=limits.max_value_depth,
                root="result",
                max_bytes=limits.max_return_bytes,
                suspect=lambda text: (
                    text in capabilities
                    or (text.startswith("<") and bool(VALUE_TEXT.fullmatch(text)))
                ),
                suspects=texts,
            )
            if "type" not in program.names:  # the check asks the program's own `type`
                _check_texts(run, texts)
            if self.failure_context.killed_for is not None:  # stopped while the check ran
                raise StopError(self.failure_context.killed_for)
        except TooDeepError:
            raise StopError(exceeded(LimitKind.VALUE_DEPTH, limits, where=where)) from None
        except TooBigError:
            raise StopError(exceeded(LimitKind.RETURN_VALUE_SIZE, limits, where=where)) from None
        except CrossingError as problem:
            text = f"main() returned a value that is not JSON: {problem.path} {problem.reason}"
            if where is not None:
                text = f"{where.render()}: {text}"
            raise StopError(InvalidProgramError(text, where=where)) from None
        returned = json_size(result)
        if returned > limits.max_return_bytes:
            raise StopError(
                exceeded(LimitKind.RETURN_VALUE_SIZE, limits, amount=size(returned), where=where)
            )
        return result, returned


def _log(level: int, message: str, *args: object, exc: BaseException | None = None) -> None:
    """Log from the last-resort paths: a logging handler or filter is host code, and one
    that fails must not stop the caller from being answered."""
    with contextlib.suppress(BaseException):
        log.log(level, message, *args, exc_info=exc)


_SLEPT = Projected(None, 0, has_records=False)
_SLEEP = "sleep"
"""The name a sleep of `async def main` is kept under among its calls (no capability's:
those all have a namespace)."""


def _overdue(error: CodeModeError) -> bool:
    """Whether the error is the execution's own time running out (see `HostClock.overdue`)."""
    return isinstance(error, ResourceLimitError) and error.kind == LimitKind.EXECUTION_TIME


def _not_an_object(value: object) -> str:
    """What vars() says of a value it cannot turn into a dict (named by its kind only)."""
    if isinstance(value, dict):
        return "vars() got a dict, which is already one: use it as it is"
    if isinstance(value, list | tuple):
        return "vars() got a list: turn each item, [vars(x) for x in items]"
    return f"vars() takes a result object or a dataclass, not {kind_of(value)}"


def _check_texts(run: Run, texts: list[tuple[str, str]]) -> None:
    """The interpreter hands some values main() returned over as text (a function, a call
    never awaited, a capability itself): of the strings at `texts` (path, text) that read
    so, those that were such values in the program are not JSON (CrossingError)."""
    if not texts:
        return
    names = run.type_names([RETURNED + path[len("result") :] for path, _ in texts])
    for (path, text), name in zip(texts, names or (), strict=False):
        if name == "str":
            continue
        if name == "coroutine":
            what = "a capability call that was never awaited (await it)"
        elif (found := FUNCTION_TEXT.fullmatch(text)) is not None:
            what = f"the {found[1]} function"
        else:
            what = f"the capability {text} itself, not called"
        raise CrossingError(path, f"is {what}, which JSON cannot hold")


def _undefined(name: str) -> Injected:
    """The error for a call to a name the program never defined (the name is its own)."""
    module, _, attribute = name.rpartition(".")
    if module:
        return Injected("AttributeError", f"module '{module}' has no attribute '{attribute}'")
    return Injected("NameError", f"name '{name}' is not defined")


__all__ = ["CALL_THREADS", "Abandoned", "Execution", "ExecutionResult", "Setup", "Usage"]
