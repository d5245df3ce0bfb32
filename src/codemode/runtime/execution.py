"""One execution of one program, as an explicit state machine.

An execution is in one `State` at a time, and only the methods here change it, under one
lock. Its program advances in jobs on the engine's thread pool: a job runs interpreter
steps, and the sync host code of a sync `main()`'s calls inline (no thread switch), until
the program ends or must wait. Waiting holds no thread: a sleep is a timer of the clock,
a coroutine of host code is a task of the engine's loop, and each call of an
`async def main` is a job of its own; whichever finishes what the program waits for
submits its next job. The `Deadline` decides when time is up and answers the caller at
once, whatever runs; host code still running then is left to finish, counted against its
subject. Every failure, whatever raised it, ends the execution as exactly one
CodeModeError.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from codemode.approvals import ApprovalRequest, Paused, Verdict, state_seconds
from codemode.authz import Authorizer
from codemode.capabilities import Capability
from codemode.errors import (
    CallRecord,
    CodeModeError,
    ExecutionCanceledError,
    InternalError,
    ResourceLimitError,
    Where,
)
from codemode.events import (
    Event,
    EventHandler,
    ExecutionFinished,
    ExecutionStarted,
    HostCodeAbandoned,
)
from codemode.limits import LimitKind, Limits, exceeded, seconds, size
from codemode.questions import arguments_text
from codemode.runtime.classify import FailureContext, InjectedError, StopError, classify
from codemode.runtime.clock import Clock, Timer
from codemode.runtime.crossing import returned
from codemode.runtime.deadline import Deadline
from codemode.runtime.dispatch import (
    Approval,
    Asked,
    Awaiting,
    Completed,
    Dispatcher,
    Plan,
    abandon,
    written,
)
from codemode.runtime.guest import sleep_problem, undefined, vars_of
from codemode.runtime.loop import EngineLoop
from codemode.runtime.notices import Notices
from codemode.runtime.outcome import ExecutionResult, Usage
from codemode.runtime.paused import (
    VERSIONS,
    Ask,
    CatalogDigest,
    PausedState,
    freeze,
    new_id,
    thaw,
)
from codemode.runtime.paused import Injected as Raised
from codemode.runtime.pool import Job, WorkPool
from codemode.runtime.program import Program, Programs
from codemode.runtime.sandbox import (
    Answer,
    Call,
    Done,
    Injected,
    Returned,
    Run,
    Sandbox,
    SandboxFailure,
    Sleep,
    Step,
    Wait,
)
from codemode.runtime.watchdog import Owner
from codemode.tracing import Span, execution_span

log = logging.getLogger("codemode")


class State(StrEnum):
    """Where an execution is; one at a time."""

    QUEUED = "queued"
    """Admitted, waiting for a slot: holds nothing."""
    RUNNING = "running"
    """Its job is on the pool: the interpreter runs a step, or is about to."""
    IN_HOST = "in host code"
    """Its job runs sync host code (a call of a sync `main()`, the audit sink)."""
    AWAITING = "awaiting"
    """Holds its worker and no thread: waits for calls and sleeps (tasks and timers)."""
    SETTLED = "settled"
    """The caller has its answer; only host code left running may still run."""


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
    overdue: ResourceLimitError
    """The error for an execution past its own deadline (built once; copied when raised)."""
    digest: CatalogDigest
    """What a paused program names its capabilities by (`codemode.runtime.paused`)."""


@dataclass(frozen=True, slots=True)
class Services:
    """What the engine lends its executions."""

    clock: Clock
    pool: WorkPool
    loop: EngineLoop
    notices: Notices
    settled: Callable[[Execution], None]
    """Told once an execution's caller has its answer (its slot is free)."""


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


class _Pause:
    """A call waits for a person: the program pauses once nothing else is in flight."""


PAUSE = _Pause()


class _Answered(Exception):
    """The caller was answered while a job worked: the job stops where it is."""


class _Failed(Exception):
    """Ends a run that failed, so its worker is never reused."""


Pending = Answer | BaseException
"""What a call or sleep the program waits for ended with."""
Resume = Callable[[], Step]
_SLEEP = -1
"""The key of a sleep that blocks the program (no call id: nothing else runs meanwhile)."""


class Execution:
    """One run of one program: its state, and the jobs that advance it."""

    def __init__(
        self,
        *,
        source: str,
        subject: str,
        setup: Setup,
        authorizer: Authorizer,
        services: Services,
        emit: EventHandler | None = None,
        trace_arguments: bool = False,
        disclose_limits: bool = True,
        execution_id: str | None = None,
        pausable: bool = False,
        restored: PausedState | None = None,
        verdicts: Mapping[str, Verdict] | None = None,
        spent: float = 0.0,
    ) -> None:
        """`spent`: the time its request took before it (asking `can_see`), which counts
        against its execution time."""
        self.source = source
        self.subject = subject
        self.setup = setup
        self.services = services
        self.emit = emit
        self.disclose_limits = disclose_limits
        """Whether a limit error names the bound and the amount (else only the kind)."""
        self.pausable = pausable
        """Whether a call that needs a person's approval pauses the program (else it
        fails: no one can be asked)."""
        self.restored = restored
        """The paused program this execution goes on from, if it resumes one."""
        if restored is not None:
            execution_id = restored.execution_id
        self.execution_id = execution_id or uuid.uuid4().hex
        limits = setup.limits
        clock = services.clock
        self.state = State.QUEUED
        self.queued = False
        """Whether it waits in the admission queue (kept by `Admission`)."""
        self.stuck = False
        """Whether host code was left running when it was answered (nothing waits on it)."""
        self.lock = threading.Lock()
        self.answer: concurrent.futures.Future[ExecutionResult | Paused] = (
            concurrent.futures.Future()
        )
        """What the caller waits for: set once, by the program's end (or its pause for a
        person) or by `fail`."""
        self.created = clock.now() - spent
        self.began: float | None = None
        """When interpreter work started (`ExecutionStarted`), from which its end counts."""
        self.answered_at: float | None = None
        left = limits.max_execution_seconds if restored is None else restored.seconds_left
        left -= spent
        self.deadline = Deadline(clock, left, setup.overdue, self.fail)
        self.failure_context = FailureContext(limits, setup.programs)
        self.printer = _Printer(limits.max_printed_bytes, self._on_flood)
        self.calls: list[str] = []
        self.calls_by_name: dict[str, int] = {}
        self.ended_calls: list[tuple[str, tuple[int, int], str, Completed | None]] = []
        """(capability, call span, outcome) of every call that ended, in that order."""
        self.ended = threading.Event()
        """Set once the execution's run is over and its last event delivered."""
        self.run: Run | None = None
        self._program: Program | None = None
        self._exit = contextlib.ExitStack()
        self._answers: dict[int, Pending] = {}
        """Calls and sleeps that ended and the program has not yet taken, by call id."""
        self._pending: set[int] = set()
        """Calls of an `async def main` started and not yet ended (the program ends only
        after them)."""
        self._sleeping: set[int] = set()
        """Sleeps of an `async def main` not yet ended (nothing to wait for at its end)."""
        self._awaits: Callable[[], bool] | None = None
        self._resume: Resume | None = None
        """While AWAITING: whether what it waits for is there, and the step that goes on."""
        self._step_job: Job | None = None
        self._host_jobs: dict[int, Job] = {}
        """The job running each call of an `async def main` now, by call id."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: list[Timer] = []
        self._sandbox_seconds = 0.0
        self._finished = False
        self._span = Span()
        self._asks: dict[int, Ask] = {}
        """Calls waiting for a person's answer, by call id."""
        self._answered: dict[int, tuple[Ask, Asked]] = {}
        """On resume: the calls a person answered for, with the answer, by call id."""
        self._waits_for: tuple[int, ...] | None = None
        """The calls the program is blocked on now (an `async def main` at a Wait, or a
        sync `main()` at a call that awaits host code)."""
        self._approvals = 0
        self._paused = False
        self.dispatcher = Dispatcher(
            execution_id=self.execution_id,
            subject=subject,
            authorizer=authorizer,
            limits=limits,
            deadline=self.deadline,
            stopped=lambda: self.failure_context.killed_for,
            emit=emit,
            trace_arguments=trace_arguments,
        )
        if restored is not None:
            self._restore(restored, verdicts or {})

    def _restore(self, state: PausedState, verdicts: Mapping[str, Verdict]) -> None:
        """Go on where a paused program stopped: its calls, budgets, output and errors."""
        self.printer.parts.append(state.printed)
        self.printer.size = len(state.printed.encode("utf-8", errors="surrogatepass"))
        self.calls = list(state.calls)
        self.calls_by_name = dict(Counter(state.calls))
        self.dispatcher.result_bytes = state.result_bytes
        self._sandbox_seconds = state.sandbox_seconds
        self._approvals = state.approvals
        self.failure_context.injected.extend(
            (item.where, item.exc_type, item.message, item.error()) for item in state.injected
        )
        for ask in state.asks:
            verdict = verdicts.get(ask.key, Verdict.DECLINED)
            answer = Asked(verdict, ask.message, seconds(ask.wait_seconds), ask.arguments)
            self._answered[ask.call_id] = (ask, answer)

    # -- state ---------------------------------------------------------------------------

    def begin(self) -> bool:
        """A slot is free: start the program (False if the caller was answered already,
        or its time ran out as it waited: then the deadline answers it now)."""
        if self.deadline.check(self.services.clock.now()) is not None:
            return False
        with self.lock:
            if self.state is not State.QUEUED:
                return False
            self.state = State.RUNNING
        self._submit(self._start)
        return True

    def fail(self, error: CodeModeError, *, span: bool = False) -> None:
        """Answer the caller with `error` now, whatever runs: the deadline, a stop, a flood
        or a cancelled caller. The interpreter is killed, coroutines and timers cancelled;
        sync host code cannot be stopped and is left to finish, counted against the subject
        before the caller is answered. `span`: the program's own job ends the span too."""
        here = threading.get_ident()
        with self.lock:
            if self.state is State.SETTLED:
                return
            previous, self.state = self.state, State.SETTLED
            self.failure_context.killed_for = error
            run = self.run
            jobs = [(job, "a capability call") for job in self._host_jobs.values()]
            step = self._step_job
            if step is not None and previous is State.IN_HOST:
                jobs.append((step, "the driver"))  # a sync main()'s own thread
            # A job not started never starts; one running here is returning now.
            stuck = [(j, w) for j, w in jobs if not j.future.cancel() and j.thread != here]
            unstarted = previous is State.RUNNING and step is not None and step.future.cancel()
            self.answered_at = self.services.clock.now()
        for job, _ in stuck:
            self.services.pool.abandon(job)
        self.stuck = bool(stuck)
        reason = _abandoned_because(error)
        if isinstance(error, ResourceLimitError) and not self.disclose_limits:
            error = error.opaque()
        if span:
            with contextlib.suppress(BaseException):  # a tracing hook is host code too
                self._end_span(error.code.value)
        self.answer.set_exception(error.replace(printed=self.printer.text, calls=self._records()))
        if run is not None:
            run.kill()
        self.deadline.cancel()
        self._cancel_waits()
        self.services.settled(self)
        for job, what in stuck:
            if job.abandoned:
                self._report_abandoned(what, reason)
        if previous is State.QUEUED:
            self.ended.set()  # nothing of it ever ran
        elif previous is State.AWAITING or unstarted:  # no job of its program runs now
            self._submit(self._finish, exempt=True)

    def _end_span(self, outcome: str) -> None:
        """End the execution's span, once (before the answer where the program's own job
        gives it, so a caller that reads its spans finds it)."""
        span, self._span = self._span, Span()
        span.outcome(outcome)
        span.end()

    def _succeed(self, result: ExecutionResult) -> None:
        with self.lock:
            if self.state is State.SETTLED:
                return
            self.state = State.SETTLED
            self.answered_at = self.services.clock.now()
        with contextlib.suppress(BaseException):  # a tracing hook is host code too
            self._end_span("ok")
        self.answer.set_result(result)
        self.services.settled(self)

    def _enter(self, state: State) -> None:
        """Move between the states of a running program (never out of SETTLED)."""
        with self.lock:
            if self.state is State.SETTLED:
                raise _Answered()
            self.state = state

    def _await(self, ready: Callable[[], bool], resume: Resume) -> Step | None:
        """Wait, holding no thread, until `ready()`; then `resume` is the next step. The
        next step at once if it is ready already; None when this job's work is done."""
        with self.lock:
            if self.state is State.SETTLED:
                raise _Answered()
            if not ready():
                self.state, self._awaits, self._resume = State.AWAITING, ready, resume
                waiting = True
            else:
                waiting = False
        if waiting:
            self._check_pause()
            return None
        self._waits_for = None
        return self._step(resume)

    def _complete(self, key: int, outcome: Pending | None) -> None:
        """A call or sleep ended (on any thread), or (None) a call now waits for a person:
        the program goes on if it waited for that, or pauses if a person is all it waits
        for."""
        with self.lock:
            if outcome is not None:
                self._answers[key] = outcome
                self._pending.discard(key)
            self._sleeping.discard(key)
            self._host_jobs.pop(key, None)
            resume, awaits = self._resume, self._awaits
            if self.state is not State.AWAITING or resume is None or awaits is None:
                return
            ready = awaits()
            if ready:
                self.state, self._awaits, self._resume = State.RUNNING, None, None
                self._waits_for = None
        if not ready:
            self._check_pause()
            return
        self._submit(lambda: self._advance(resume))

    def _check_pause(self) -> None:
        """Pause an `async def main` once all it waits for is a person: every other call
        and sleep has ended and the program has taken their answers (so the dump holds
        them, and no host coroutine is left behind)."""
        with self.lock:
            if (
                self.state is not State.AWAITING
                or not self._asks
                or self._waits_for is None
                or self._sleeping
                or not self._pending <= self._asks.keys()
                or any(key in self._answers for key in self._waits_for)
            ):
                return
            self.state, self._awaits, self._resume = State.RUNNING, None, None
        self._submit(self._pause)

    def _pause(self) -> None:
        """Dump the program where it waits and answer the caller with what a person is
        asked; the worker is let go and nothing of the execution stays behind."""
        run, program = self._current()
        limits = self.setup.limits
        clock = self.services.clock
        where = program.where_at(*next(iter(self._asks.values())).span)
        overdue = self.deadline.check(clock.now())
        if overdue is not None:  # no time left to go on with: no one is asked
            raise StopError(overdue)
        snapshot = self._dump(run, where)
        state = PausedState(
            id=new_id(),
            execution_id=self.execution_id,
            subject=self.subject,
            source=self.source,
            snapshot=snapshot,
            catalog=self.setup.digest(),
            asks=tuple(self._asks.values()),
            calls=tuple(self.calls),
            records=self._records(),
            injected=tuple(
                Raised(where, exc_type, message, error.code.value, error.detail)
                for where, exc_type, message, error in self.failure_context.injected
            ),
            printed=self.printer.text,
            seconds_left=self.deadline.remaining(),
            elapsed=self._elapsed(),
            sandbox_seconds=self._sandbox_seconds,
            capability_seconds=self._capability_seconds(),
            result_bytes=self.dispatcher.result_bytes,
            approvals=self._approvals,
            versions=dict(VERSIONS),
            expires_at=time.time() + state_seconds(limits),
        )
        encoded = state.encode()
        if len(encoded) > limits.max_paused_bytes:  # held within the bound, sent past it
            amount = size(len(encoded))
            del state, encoded
            raise StopError(exceeded(LimitKind.PAUSED_SIZE, limits, amount=amount, where=where))
        requests = tuple(
            ApprovalRequest(
                ask.key,
                self.subject,
                self.execution_id,
                ask.capability,
                ask.capability_id,
                ask.arguments,
                ask.message,
            )
            for ask in state.asks
        )
        with self.lock:
            if self.state is State.SETTLED:
                raise _Answered()
            self.state, self._paused = State.SETTLED, True
            self.answered_at = clock.now()
        with contextlib.suppress(BaseException):  # a tracing hook is host code too
            self._end_span("paused")
        self.answer.set_result(Paused(requests, encoded))
        self.services.settled(self)

    def _dump(self, run: Run, where: Where | None) -> bytes:
        """The interpreter's dump, measured as soon as it is in hand (with the printed
        output, as `PausedState.size` counts it): one past `Limits.max_paused_bytes` is
        let go before anything more is made of it (compressed, encoded), so a program
        that holds much costs no more than its dump, and only for an instant."""
        limits = self.setup.limits
        try:
            snapshot = run.dump()
        except SandboxFailure:  # the worker could not write out all it holds
            log.warning("execution %s: the program could not be dumped", self.execution_id)
            raise StopError(exceeded(LimitKind.PAUSED_SIZE, limits, where=where)) from None
        held = len(snapshot) + self.printer.size
        if held > limits.max_paused_bytes:
            del snapshot  # not kept alive by the traceback of the error below
            raise StopError(exceeded(LimitKind.PAUSED_SIZE, limits, amount=size(held), where=where))
        return snapshot

    # -- jobs ----------------------------------------------------------------------------

    def _submit(self, work: Callable[[], None], *, exempt: bool = False) -> None:
        job = self.services.pool.submit(self.subject, lambda: self._job(work), exempt=exempt)
        self._step_job = job
        if job.future.cancelled():  # the engine is closing: nothing will run it
            self.fail(ExecutionCanceledError())
            self.ended.set()

    def _job(self, work: Callable[[], None]) -> None:
        """The one last-resort net of every job of the program: whatever raises here (the
        program, handlers, an audit sink, a tracing hook) ends as one CodeModeError."""
        try:
            work()
        except _Answered:
            pass
        except BaseException as exc:
            error = classify(exc, self.failure_context)
            if isinstance(error, InternalError) and error is not self.failure_context.killed_for:
                _log(logging.ERROR, "execution %s: internal failure", self.execution_id, exc=exc)
            self.fail(error, span=True)
        if self.state is State.SETTLED:
            self._finish()

    def _start(self) -> None:
        limits = self.setup.limits
        self._enter(State.IN_HOST)
        self._started()
        self._enter(State.RUNNING)
        source_bytes = len(self.source.encode("utf-8", errors="surrogatepass"))
        if source_bytes > limits.max_source_bytes:
            raise StopError(exceeded(LimitKind.SOURCE_SIZE, limits, amount=size(source_bytes)))
        try:
            program = self.setup.programs.prepare(self.source)
        except CodeModeError as error:  # the preflight's own verdict (it runs no host code)
            raise StopError(error) from None
        self.failure_context.program = self._program = program
        run = self._exit.enter_context(
            self.setup.sandbox.run(
                modules=self.setup.modules,
                roots=program.roots,
                limits=limits,
                printer=self.printer,
            )
        )
        with self.lock:
            if self.state is State.SETTLED:
                raise _Answered()
            self.run = run
        restored = self.restored
        if restored is None:
            self._advance(lambda: run.start(program.code))
            return
        if program.is_async:  # the calls a person answered for run as they would have
            for ask, _ in list(self._answered.values()):
                self._start_call(self._resumed_call(ask), program, run)
        self._advance(lambda: run.load(restored.snapshot))

    def _advance(self, resume: Resume) -> None:
        """Run the program until it ends or must wait."""
        step: Step | None = self._step(resume)
        while step is not None:
            if isinstance(step, Call):
                step = self._on_call(step)
            elif isinstance(step, Sleep):
                step = self._on_sleep(step)
            elif isinstance(step, Wait):
                step = self._on_wait(step)
            else:
                step = self._on_done(step)

    def _step(self, resume: Resume) -> Step:
        """One step of the interpreter, within the deadline."""
        self._enter(State.RUNNING)
        now = self.services.clock.now
        started = now()
        overdue = self.deadline.check(started)
        if overdue is not None:
            raise StopError(overdue)
        try:
            return resume()
        finally:
            self._sandbox_seconds += now() - started

    def _finish(self) -> None:
        """End the run and deliver the last event, once, after the caller's answer."""
        with self.lock:
            if self._finished:
                return
            self._finished = True
        try:
            self.deadline.cancel()
            self._cancel_waits()
            error = self.answer.exception()
            outcome = "ok" if not isinstance(error, CodeModeError) else error.code.value
            with contextlib.suppress(BaseException):  # a tracing hook is host code too
                self._end_span(outcome)
            if self.began is not None and not self._paused:  # it goes on when resumed
                self._deliver(
                    ExecutionFinished(
                        execution_id=self.execution_id,
                        subject=self.subject,
                        time=time.time(),
                        outcome=outcome,
                        duration_seconds=(self.answered_at or self.services.clock.now())
                        - self.began
                        + (0.0 if self.restored is None else self.restored.elapsed),
                        capability_calls=tuple(self.calls),
                        result_bytes=self.dispatcher.result_bytes,
                    )
                )
            with contextlib.suppress(BaseException):  # a worker that failed is never reused
                if error is not None:
                    self._exit.__exit__(_Failed, _Failed(), None)
                else:
                    self._exit.close()
        finally:
            self.ended.set()

    # -- what the program does ---------------------------------------------------------

    def _on_call(self, call: Call) -> Step | None:
        run, program = self._current()
        answered = self._answered.get(call.call_id)
        if answered is not None:  # a sync main() resumed at the call a person answered
            return self._run_sync(self._resumed_call(answered[0]), program, run)
        capability = self.setup.capabilities.get(call.name)
        if capability is None:
            found = (
                vars_of(call, self.setup.limits) if call.name == "vars" else undefined(call.name)
            )
            return self._step(lambda: run.answer(found))
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
        if program.is_async:  # a job of its own, so gathered calls run at once
            self._start_call(call, program, run)
            return self._step(run.defer)
        return self._run_sync(call, program, run)

    def _plan(self, call: Call, program: Program) -> Plan:
        """The plan of a call; of a call a person answered for, the plan of the one they
        were asked about (its canonical arguments, bound again)."""
        capability = self.setup.capabilities[call.name]
        answered = self._answered.pop(call.call_id, None)
        return self.dispatcher.call(
            capability,
            call.args,
            call.kwargs,
            lambda: program.where_at(*call.span),
            None if answered is None else answered[1],
        )

    def _start_call(self, call: Call, program: Program, run: Run) -> None:
        """A call of an `async def main`: a job of its own."""
        plan = self._plan(call, program)
        with self.lock:
            self._pending.add(call.call_id)
            self._host_jobs[call.call_id] = self.services.pool.submit(
                self.subject, lambda: self._plan_job(call, call.name, plan, None, None)
            )

    def _run_sync(self, call: Call, program: Program, run: Run) -> Step | None:
        """A call of a sync `main()`, driven here until it ends, awaits or pauses."""
        plan = self._plan(call, program)
        key = call.call_id
        self._enter(State.IN_HOST)
        outcome = self._drive(call, call.name, plan, None, None)
        if outcome is PAUSE:
            self._pause()
            return None
        if isinstance(outcome, Awaiting):  # an async authorizer or handler: it may pause too
            self._hand_off(call, call.name, plan, outcome)
            self._waits_for = (key,)
            return self._await(lambda: key in self._answers, lambda: run.answer(self._take(key)))
        assert not isinstance(outcome, _Pause)
        return self._step(lambda: run.answer(outcome))

    def _resumed_call(self, ask: Ask) -> Call:
        """The call a person answered for, as the program made it (bound again, it must
        give the arguments they saw)."""
        args, kwargs = thaw(ask.written)
        return Call(ask.capability, tuple(args), kwargs, ask.call_id, ask.span)

    def _on_sleep(self, sleep: Sleep) -> Step | None:
        """`time.sleep` and `asyncio.sleep`: wait, within the execution time; an awaited
        `asyncio.sleep` lets the program's other calls and sleeps go on meanwhile. A sleep
        that would end past the deadline fails at once rather than waste the wait."""
        run, program = self._current()
        problem = sleep_problem(sleep.seconds)
        if problem is not None:
            return self._step(lambda: run.answer(problem))
        seconds = float(sleep.seconds)  # type: ignore[arg-type]
        if seconds >= self.deadline.remaining():
            where = program.where_at(*sleep.span)
            raise StopError(exceeded(LimitKind.EXECUTION_TIME, self.setup.limits, where=where))
        if sleep.call_id is not None and program.is_async:
            self._sleep(sleep.call_id, seconds)
            return self._step(run.defer)
        self._sleep(_SLEEP, seconds)
        return self._await(lambda: _SLEEP in self._answers, lambda: run.answer(self._take(_SLEEP)))

    def _on_wait(self, wait: Wait) -> Step | None:
        run, _ = self._current()
        ids = wait.call_ids
        self._waits_for = ids
        return self._await(
            lambda: any(key in self._answers for key in ids),
            lambda: run.settle(self._take_ready(ids)),
        )

    def _on_done(self, done: Done) -> Step | None:
        if not self._pending <= self._asks.keys():
            # calls never awaited still run: the execution ends after them (but those
            # waiting for a person: no one needs their answer, so they never run)
            return self._await(lambda: self._pending <= self._asks.keys(), lambda: done)
        run, program = self._current()
        limits = self.setup.limits
        value, written = returned(done.value, program, run, self.setup.capabilities, limits)
        usage = Usage(
            duration_seconds=self._elapsed(),
            capability_calls=tuple(self.calls),
            capability_seconds=self._capability_seconds(),
            sandbox_seconds=self._sandbox_seconds,
            result_bytes=self.dispatcher.result_bytes,
            return_bytes=written,
        )
        self._succeed(ExecutionResult(value, self.printer.text, usage, self.execution_id))
        return None

    # -- calls and sleeps ----------------------------------------------------------------

    def _plan_job(
        self, call: Call, name: str, plan: Plan, value: Any, exc: BaseException | None
    ) -> None:
        """A job: drive one call of an `async def main` until it ends or awaits."""
        if self.state is State.SETTLED:
            abandon(plan)
            return
        try:
            outcome: Pending | Awaiting | _Pause = self._drive(call, name, plan, value, exc)
        except BaseException as failure:  # taken by the program when it awaits the call
            outcome = failure
        if isinstance(outcome, Awaiting):
            self._hand_off(call, name, plan, outcome)
        elif isinstance(outcome, _Pause):  # it stays pending: a program at its end is done
            self._complete(call.call_id, None)
        else:
            self._complete(call.call_id, outcome)

    def _drive(
        self, call: Call, name: str, plan: Plan, value: Any, exc: BaseException | None
    ) -> Answer | Awaiting | _Pause:
        """Run the plan's sync steps here, until it ends (its answer), awaits, or waits
        for a person (PAUSE)."""
        try:
            item = plan.send(value) if exc is None else plan.throw(exc)
        except StopIteration as stop:
            completed: Completed = stop.value
            self.ended_calls.append((name, call.span, "ok", completed))
            self.failure_context.results[name] = completed.projected.value
            return Returned(completed.projected.value, completed.projected.has_records)
        except InjectedError as failure:
            self.ended_calls.append((name, call.span, failure.error.code.value, None))
            return self._inject(failure, call)
        except StopError as stop:
            error = stop.error
            self.ended_calls.append((name, call.span, error.code.value, None))
            if error.where is not None or _overdue(error):
                raise  # the deadline placed it, as the caller was told
            raise StopError(error.replace(where=self._where(call))) from None
        if isinstance(item, Approval):
            return self._ask(call, name, plan, item)
        return item

    def _ask(
        self, call: Call, name: str, plan: Plan, approval: Approval
    ) -> Answer | Awaiting | _Pause:
        """The authorizer asks a person about this call: it waits for their answer (the
        plan ends here; the call runs again on resume), or, when no one can be asked, it
        fails (fail closed): no one is asked about arguments too large to show them
        faithfully (`codemode.questions`) either."""
        if not self.pausable:
            return self._drive(call, name, plan, Verdict.UNAVAILABLE, None)
        if arguments_text(approval.arguments) is None:
            log.warning(
                "execution %s: %s needs approval, but its arguments are too large to show a "
                "person faithfully, so no one is asked",
                self.execution_id,
                name,
            )
            return self._drive(call, name, plan, Verdict.UNAVAILABLE, None)
        approval.span.approval("asked")
        abandon(plan)
        limits = self.setup.limits
        self._approvals += 1
        if self._approvals > limits.max_approvals:
            raise StopError(exceeded(LimitKind.APPROVALS, limits, where=self._where(call)))
        capability = self.setup.capabilities[name]
        try:
            written = freeze([list(call.args), call.kwargs])
        except TypeError:
            log.warning("execution %s: a call of %s cannot pause", self.execution_id, name)
            raise StopError(InternalError()) from None
        ask = Ask(
            key=f"approval-{call.call_id}",
            call_id=call.call_id,
            capability=name,
            capability_id=capability.id,
            written=written,
            arguments=approval.arguments,
            span=call.span,
            message=approval.message,
            asked_at=time.time(),
            wait_seconds=self.setup.limits.max_approval_wait_seconds,
        )
        with self.lock:
            self._asks[call.call_id] = ask
        return PAUSE

    def _hand_off(self, call: Call, name: str, plan: Plan, item: Awaiting) -> None:
        """The plan awaits host code: the engine's loop awaits it, holding no thread, and
        the plan goes on in a job of the pool."""

        async def await_host() -> None:
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            value: Any = None
            failure: BaseException | None = None
            if self.state is State.SETTLED:  # answered before it began: nothing ran
                self._tasks.discard(task)
                _close(item, plan)
                return
            try:
                with item.span.active():
                    value = await self.services.loop.host(item.awaitable)
            except asyncio.CancelledError as cancelled:
                if self._settled() or task.cancelling():  # cancelled with its execution
                    abandon(plan)
                    return
                failure = cancelled  # host code raised it itself: a failure of its own
            except BaseException as exc:
                failure = exc
            finally:
                self._tasks.discard(task)
            with self.lock:  # held, so the job cannot end before it is known
                self._host_jobs[call.call_id] = self.services.pool.submit(
                    self.subject, lambda: self._plan_job(call, name, plan, value, failure)
                )

        self.services.loop.spawn(
            await_host, Owner(self.subject, name, self.execution_id, self.emit)
        )

    def _sleep(self, key: int, seconds: float) -> None:
        clock = self.services.clock
        with self.lock:
            if key != _SLEEP:
                self._sleeping.add(key)
            self._timers.append(
                clock.call_at(clock.now() + seconds, lambda: self._complete(key, _SLEPT))
            )

    def _take(self, key: int) -> Answer:
        with self.lock:
            outcome = self._answers.pop(key)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _take_ready(self, ids: tuple[int, ...]) -> dict[int, Answer]:
        with self.lock:
            ready = [key for key in ids if key in self._answers]
        return {key: self._take(key) for key in ready}

    def _cancel_waits(self) -> None:
        with self.lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
        self.services.loop.cancel(self._tasks)

    def _inject(self, failure: InjectedError, call: Call) -> Injected:
        """Raise a failure inside the program, remembering which call raised it."""
        message = str(failure.error)
        where = self._where(call)
        if where is not None:
            self.failure_context.injected.append((where, failure.exc_type, message, failure.error))
        return Injected(failure.exc_type, message)

    # -- helpers -------------------------------------------------------------------------

    def _settled(self) -> bool:
        return self.state is State.SETTLED

    def _current(self) -> tuple[Run, Program]:
        run, program = self.run, self._program
        assert run is not None and program is not None
        return run, program

    def _where(self, call: Call) -> Any:
        program = self._program
        return None if program is None else program.where_at(*call.span)

    def _elapsed(self) -> float:
        """Seconds the execution has run, before any pause too (waits for a person not
        counted)."""
        before = 0.0 if self.restored is None else self.restored.elapsed
        return before + self.services.clock.now() - self.created

    def _capability_seconds(self) -> float:
        before = 0.0 if self.restored is None else self.restored.capability_seconds
        return before + self.dispatcher.capability_seconds

    def _records(self) -> tuple[CallRecord, ...]:
        """The calls that ended, with their lines (built only for an error)."""
        program = self._program
        records = [] if self.restored is None else list(self.restored.records)
        for name, span, result, completed in list(self.ended_calls):
            where = None if program is None else program.where_at(*span)
            line = None if where is None else where.line
            if completed is None:
                records.append(CallRecord(name, line, result))
                continue
            text, digest = written(completed.kwargs)
            records.append(CallRecord(name, line, result, text, digest, completed.changes))
        return tuple(records)

    def _started(self) -> None:
        self._span = execution_span(self.execution_id, self.subject)
        self.dispatcher.span = self._span
        self.began = self.services.clock.now()
        if self.emit is None or self.restored is not None:  # it started before it paused
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

    def _report_abandoned(self, what: str, reason: AbandonReason) -> None:
        count = self.services.pool.abandoned()
        _log(
            logging.WARNING,
            "execution %s: %s left running in host code %s (%d threads abandoned now in "
            "this CodeMode, across subjects)",
            self.execution_id,
            what,
            _ABANDONED[reason],
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
            reason=reason,
        )
        # The sink is host code and this may be the clock's thread: deliver it elsewhere.
        self.services.notices.send(lambda: self._deliver(event))

    def _on_flood(self) -> None:
        self.fail(exceeded(LimitKind.PRINTED_OUTPUT, self.setup.limits))


def _close(item: Awaiting, plan: Plan) -> None:
    """End a plan whose execution was answered before its host coroutine began."""
    abandon(plan)
    awaitable = item.awaitable
    if asyncio.iscoroutine(awaitable):
        awaitable.close()


def _log(level: int, message: str, *args: object, exc: BaseException | None = None) -> None:
    """Log from the last-resort paths: a logging handler or filter is host code, and one
    that fails must not stop the caller from being answered."""
    with contextlib.suppress(BaseException):
        log.log(level, message, *args, exc_info=exc)


_SLEPT = Returned(None)
AbandonReason = Literal["deadline", "program_ended", "cancelled"]
_ABANDONED: dict[AbandonReason, str] = {
    "deadline": "past its deadline",
    "program_ended": "after the program ended without it",
    "cancelled": "after the execution was cancelled",
}
"""Each `HostCodeAbandoned.reason`, as the host log says it."""
_TIME_LIMITS = frozenset({LimitKind.EXECUTION_TIME, LimitKind.CAPABILITY_TIME})


def _abandoned_because(error: CodeModeError) -> AbandonReason:
    """Why host code still running was left when the execution was answered with `error`:
    its time ran out, it was cancelled, or else the program ended without it."""
    if isinstance(error, ResourceLimitError) and error.kind in _TIME_LIMITS:
        return "deadline"
    if isinstance(error, ExecutionCanceledError):
        return "cancelled"
    return "program_ended"


def _overdue(error: CodeModeError) -> bool:
    """Whether the error is the execution's own time running out (no call's budget)."""
    return isinstance(error, ResourceLimitError) and error.kind == LimitKind.EXECUTION_TIME


__all__ = ["Execution", "Services", "Setup", "State"]
