"""One execution of one program: its state, its answer, and its life from start to end.

An execution is in one `State` at a time, changed only under its one lock. Its program
advances in jobs on the engine's thread pool (`Driver`); waiting holds no thread
(`Waits`). The `Deadline` decides when time is up and answers the caller at once,
whatever runs; host code still running then is left to finish, counted against its
subject. Every failure, whatever raised it, ends the execution as exactly one
CodeModeError: every job of the program runs under one last-resort net, here.

The execution is made of parts with one job each, which it builds and lends each other:
the call log (one record per call, limits, usage), the audit (span and events), the
printed output, the waits, the pausing for a person (the only part that knows of
approvals: the execution asks it to restore and it asks to be answered), and the driver.
The parts call back to it through one `_Link`, let go once its run is over: an execution
and its parts then hold no reference cycle, and are freed as soon as no one holds them,
without a pass of the cycle collector (which every execution would otherwise cost).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from codemode.authz import Authorizer
from codemode.clock import Clock
from codemode.continuations import Paused, PausedState, SessionSlot, Verdict
from codemode.errors import (
    CodeModeError,
    ExecutionCanceledError,
    InternalError,
    ResourceLimitError,
)
from codemode.events import EventHandler
from codemode.limits import LimitKind, Limits, duration, exceeded
from codemode.runtime.appendix import Appendix
from codemode.runtime.audit import Audit, abandoned_because, quietly
from codemode.runtime.calllog import CallLog
from codemode.runtime.classify import FailureContext, classify
from codemode.runtime.deadline import Deadline
from codemode.runtime.dispatch import Dispatcher
from codemode.runtime.driver import Driver
from codemode.runtime.loop import EngineLoop
from codemode.runtime.notices import Notices
from codemode.runtime.outcome import ExecutionResult
from codemode.runtime.pausing import Pausing
from codemode.runtime.pool import Job, WorkPool
from codemode.runtime.printed import Printed
from codemode.runtime.progress import Progress, RunWatch
from codemode.runtime.setup import Setup
from codemode.runtime.state import Answered, State, Status
from codemode.runtime.waits import Waits
from codemode.tracing import enabled as tracing_enabled


@dataclass(frozen=True, slots=True)
class Services:
    """What the engine lends its executions."""

    clock: Clock
    pool: WorkPool
    loop: EngineLoop
    notices: Notices
    settled: Callable[[Execution], None]
    """Told once an execution's caller has its answer (its slot is free)."""


class Execution:
    """One run of one program: its state, its answer, and the parts that advance it."""

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
        session: SessionSlot | None = None,
        watch: RunWatch | None = None,
        appendix: Appendix | None = None,
    ) -> None:
        """`spent`: the time its request took before it (asking `can_see`), which counts
        against its execution time. `restored`, `verdicts`: the paused program it goes
        on from, and how a person answered for each call they were asked about.
        `session`: the session it runs in (its state in; out, the state it leaves).
        `watch`: who watches it (its progress notes, its stop), and a task's longer
        bound. `appendix`: guest code fed with the program (saved programs it calls)."""
        self.source = source
        self.subject = subject
        self.setup = setup
        self.services = services
        self.emit = emit
        self.disclose_limits = disclose_limits
        """Whether a limit error names the bound and the amount (else only the kind)."""
        self.restored = restored
        """The paused program this execution goes on from, if it resumes one."""
        self.session = session
        """The session it runs in, if any (`SessionSlot.kept` is set when it succeeds)."""
        if restored is not None:
            execution_id = restored.execution_id
        self.execution_id = execution_id or new_execution_id()
        limits = setup.limits
        clock = services.clock
        self.status = Status()
        self.queued = False
        """Whether it waits in the admission queue (kept by `Admission`)."""
        self.stuck = False
        """Whether host code was left running when it was answered (nothing waits on it)."""
        self.answer: concurrent.futures.Future[ExecutionResult | Paused] = (
            concurrent.futures.Future()
        )
        """What the caller waits for: set once, by the program's end (or its pause for a
        person) or by `fail`."""
        self.created = clock.now() - spent
        self.answered_at: float | None = None
        self.goes_on = False
        """Whether its answer is a pause: it goes on when resumed (no end is recorded)."""
        self._ended: threading.Event | None = None
        self._over = False
        """Whether its run is over (`ended`, made only when someone waits for it)."""
        self._finished = False
        self._caller: int | None = None
        """The thread of a caller that starts the program itself (`start_here`)."""
        self._start_here = False
        self._link = link = _Link(self)
        elapsed = functools.partial(_elapsed, clock, self.created, restored)
        left = bound_seconds(limits, watch) if restored is None else restored.seconds_left
        overdue = _overdue(setup, watch)
        self.deadline = Deadline(clock, left - spent, overdue, link.fail, armed=False)
        self.failures = FailureContext(limits, setup.programs)
        self.printed = Printed(limits.max_printed_bytes, link.flood)
        sink = None if watch is None else watch.sink
        began = self.created - (0.0 if restored is None else restored.elapsed)
        self.progress = None if sink is None else Progress(sink, clock, began)
        """The notes its watcher gets, if one asked for them (flushed before its answer)."""
        self.stop = None if watch is None else watch.stop
        """Its watcher's way to stop it with its answer (the engine attaches it once it is
        admitted)."""
        self.calls = CallLog(limits, None if self.progress is None else self.progress.call_ended)
        self.audit = Audit(
            execution_id=self.execution_id,
            subject=subject,
            emit=emit,
            clock=clock,
            pool=services.pool,
            notices=services.notices,
            session=session.digest if session is not None and session.digest else None,
        )
        self.waits = Waits(
            self.status,
            subject=subject,
            execution_id=self.execution_id,
            emit=emit,
            clock=clock,
            pool=services.pool,
            loop=services.loop,
        )
        self.dispatcher = Dispatcher(
            execution_id=self.execution_id,
            subject=subject,
            authorizer=authorizer,
            limits=limits,
            deadline=self.deadline,
            calls=self.calls,
            stopped=functools.partial(_killed_for, self.failures),
            emit=emit,
            trace_arguments=trace_arguments,
            observe=None if setup.shapes is None else setup.shapes.observe,
        )
        self.pausing = Pausing(
            self.status,
            self.waits,
            pausable=pausable,
            restored=restored,
            setup=setup,
            source=source,
            subject=subject,
            execution_id=self.execution_id,
            deadline=self.deadline,
            printed=self.printed,
            calls=self.calls,
            failures=self.failures,
            elapsed=elapsed,
            settle=link.paused,
        )
        self.driver = Driver(
            self.status,
            source=source,
            execution_id=self.execution_id,
            setup=setup,
            deadline=self.deadline,
            failures=self.failures,
            printed=self.printed,
            calls=self.calls,
            dispatcher=self.dispatcher,
            waits=self.waits,
            pausing=self.pausing,
            audit=self.audit,
            submit=link.submit,
            settle=link.settle,
            elapsed=elapsed,
            session=session,
            progress=self.progress,
            appendix=appendix,
        )
        if restored is not None:
            self.pausing.restore(verdicts or {})
        self.deadline.arm()  # only now can it answer the caller when it passes

    @property
    def ended(self) -> threading.Event:
        """Set once the execution's run is over and its last event delivered (made when
        first asked for: most executions are never waited for this way)."""
        with self.status.lock:
            if self._ended is None:
                self._ended = threading.Event()
                if self._over:
                    self._ended.set()
            return self._ended

    @property
    def state(self) -> State:
        """Where the execution is now."""
        return self.status.state

    @property
    def began(self) -> float | None:
        """When interpreter work started (`ExecutionStarted`); None if it never did."""
        return self.audit.began

    # -- its life ---------------------------------------------------------------------------

    def begin(self) -> bool:
        """A slot is free: start the program (False if the caller was answered already,
        or its time ran out as it waited: then the deadline answers it now)."""
        if self.deadline.check(self.services.clock.now()) is not None:
            return False
        with self.status.lock:
            if self.status.state is not State.QUEUED:
                return False
            self.status.state = State.RUNNING
        if self._caller == threading.get_ident():
            self._start_here = True  # its caller, admitting it, starts it (`start_here`)
            return True
        self._submit(self.driver.start)
        return True

    def offer_start(self) -> None:
        """The caller waits on its own thread: it may start the program itself when it is
        admitted at once, as far as no host code runs, which saves two thread switches.
        Only with nothing of the host's to run there (no audit sink, no tracer)."""
        if self.emit is None and self.restored is None and not tracing_enabled():
            self._caller = threading.get_ident()

    def start_here(self) -> None:
        """Start the program on this thread if `begin` left it to the caller: it runs until
        its first call of host code, or its end, and the pool goes on from there."""
        if not self._start_here:
            return
        self._start_here = False
        self._job(functools.partial(self.driver.start, here=True), here=True)

    def fail(self, error: CodeModeError, *, span: bool = False) -> None:
        """Answer the caller with `error` now, whatever runs: the deadline, a stop, a flood
        or a cancelled caller. The interpreter is killed, coroutines and timers cancelled;
        sync host code cannot be stopped and is left to finish, counted against the subject
        before the caller is answered. `span`: the program's own job ends the span too."""
        here = threading.get_ident()
        status = self.status
        with status.lock:
            if status.state is State.SETTLED:
                return
            previous, status.state = status.state, State.SETTLED
            self.failures.killed_for = error
            run = self.driver.run
            stuck, unstarted = self.waits.let_go(previous, here)
            self.answered_at = self.services.clock.now()
        for job, _ in stuck:
            self.services.pool.abandon(job)
        self.stuck = bool(stuck)
        reason = abandoned_because(error)
        if isinstance(error, ResourceLimitError) and not self.disclose_limits:
            error = error.opaque()
        if span:
            self.audit.end_span(error.code.value)
        records = self.calls.records(self.driver.program)
        if self.progress is not None:
            self.progress.flush()
        self.answer.set_exception(error.replace(printed=self.printed.text, calls=records))
        if run is not None:
            run.kill()
        self.deadline.cancel()
        self.waits.cancel()
        self.services.settled(self)
        for job, what in stuck:
            if job.abandoned:
                self.audit.abandoned(what, reason)
        if previous is State.QUEUED:
            self._end()  # nothing of it ever ran
        elif previous is State.AWAITING or unstarted:  # no job of its program runs now
            self._finish_later()

    def _settle(
        self, answer: ExecutionResult | Paused, outcome: str = "ok", *, goes_on: bool = False
    ) -> None:
        """Answer the caller with the program's own outcome (`Answered` if it was answered
        already: the job stops). `goes_on`: the program goes on later (it paused)."""
        with self.status.lock:
            self.status.check()
            self.status.state = State.SETTLED
            self.goes_on = goes_on
            self.answered_at = self.services.clock.now()
        self.audit.end_span(outcome)
        if self.progress is not None:
            self.progress.flush()
        self.answer.set_result(answer)
        self.services.settled(self)

    def _paused(self, answer: Paused) -> None:
        """The program paused for a person: the caller is answered, and it goes on when
        resumed."""
        self._settle(answer, "paused", goes_on=True)

    def _finish(self) -> None:
        """End the run and deliver the last event, once, after the caller's answer."""
        with self.status.lock:
            if self._finished:
                return
            self._finished = True
        try:
            self.deadline.cancel()
            self.waits.cancel()
            error = self.answer.exception()
            outcome = "ok" if not isinstance(error, CodeModeError) else error.code.value
            self.audit.end_span(outcome)
            began = self.audit.began
            if began is not None and not self.goes_on:  # it goes on when resumed
                before = 0.0 if self.restored is None else self.restored.elapsed
                ended = self.answered_at or self.services.clock.now()
                calls = self.calls
                self.audit.finished(
                    outcome, ended - began + before, tuple(calls.names), calls.result_bytes
                )
            self.driver.close(failed=error is not None)
        finally:
            self._end()

    # -- its jobs ---------------------------------------------------------------------------

    def _submit(self, work: Callable[[], None], *, exempt: bool = False) -> Job:
        """Run `work` as the program's next job, under the last-resort net."""
        job = self.services.pool.submit(self.subject, lambda: self._job(work), exempt=exempt)
        self.waits.stepping(job)
        if job.future.cancelled():  # the engine is closing: nothing will run it
            self.fail(ExecutionCanceledError())
            self._end()
        return job

    def _finish_later(self) -> None:
        """`_finish` in a job of its own; one the closing engine cancels runs at once, on
        the closing thread, so no worker is left behind."""
        job = self._submit(self._finish, exempt=True)
        job.future.add_done_callback(self._finish_if_cancelled)

    def _finish_if_cancelled(self, future: concurrent.futures.Future[object]) -> None:
        if future.cancelled():
            self._finish()

    def _job(self, work: Callable[[], None], *, here: bool = False) -> None:
        """The one last-resort net of every job of the program: whatever raises here (the
        program, handlers, an audit sink, a tracing hook) ends as one CodeModeError.
        `here`: on its caller's thread, whose own Ctrl-C cancels it and goes on up."""
        try:
            work()
        except Answered:
            pass
        except BaseException as exc:
            if here and isinstance(exc, KeyboardInterrupt) and _on_main_thread():
                self.fail(ExecutionCanceledError())  # the caller's Ctrl-C, as `Engine.execute`
                self._finish()
                raise
            error = classify(exc, self.failures)
            if isinstance(error, InternalError) and error is not self.failures.killed_for:
                quietly(logging.ERROR, "execution %s: internal failure", self.execution_id, exc=exc)
            self.fail(error, span=True)
        if self.status.settled:
            if here:  # its worker goes back, and its end is recorded, off the caller's time
                self._finish_later()
            else:
                self._finish()

    # -- helpers ----------------------------------------------------------------------------

    def _end(self) -> None:
        """Its run is over: whoever waits on `ended` goes on, and its parts let go of it
        (no job of its program runs any more, and none will)."""
        with self.status.lock:
            self._over = True
            ended = self._ended
            self._link.execution = None
        self.waits.stepping(None)
        if ended is not None:
            ended.set()

    def _on_flood(self) -> None:
        self.fail(exceeded(LimitKind.PRINTED_OUTPUT, self.setup.limits))


class _Link:
    """An execution as its parts call back to it, until its run is over: then each call
    does what the execution, settled by then, would (nothing, or `Answered`)."""

    __slots__ = ("execution",)

    def __init__(self, execution: Execution) -> None:
        self.execution: Execution | None = execution

    def fail(self, error: CodeModeError) -> None:
        if (execution := self.execution) is not None:
            execution.fail(error)

    def flood(self) -> None:
        if (execution := self.execution) is not None:
            execution._on_flood()

    def submit(self, work: Callable[[], None]) -> None:
        if (execution := self.execution) is not None:
            execution._submit(work)

    def settle(self, answer: ExecutionResult) -> None:
        if (execution := self.execution) is None:
            raise Answered()
        execution._settle(answer)

    def paused(self, answer: Paused) -> None:
        if (execution := self.execution) is None:
            raise Answered()
        execution._paused(answer)


def bound_seconds(limits: Limits, watch: RunWatch | None) -> float:
    """How long a new execution may run: its watcher's bound (a task's, at most
    `max_task_seconds`), else `max_execution_seconds`. Only an adapter sets a watch: a
    program cannot lengthen its own time."""
    if watch is None or watch.seconds is None:
        return limits.max_execution_seconds
    return min(watch.seconds, limits.max_task_seconds)


def _overdue(setup: Setup, watch: RunWatch | None) -> ResourceLimitError:
    """What running out of time says: the bound this run had, so a task names its own
    (`execution time (limit 10 min)`), and an ordinary run the execution time as ever."""
    if watch is None or watch.seconds is None:
        return setup.overdue
    bound = duration(bound_seconds(setup.limits, watch))
    return ResourceLimitError(LimitKind.EXECUTION_TIME, bound=bound)


def _elapsed(clock: Clock, created: float, restored: PausedState | None) -> float:
    """Seconds an execution created at `created` has run, before any pause too (waits for
    a person not counted)."""
    before = 0.0 if restored is None else restored.elapsed
    return before + clock.now() - created


def _killed_for(failures: FailureContext) -> CodeModeError | None:
    return failures.killed_for


def _on_main_thread() -> bool:
    """Whether this is the thread Python delivers a Ctrl-C to (as KeyboardInterrupt)."""
    return threading.current_thread() is threading.main_thread()


def new_execution_id() -> str:
    """A random id, as `uuid.uuid4().hex` writes one (the same randomness and version
    bits), without building a `UUID` on the way: every execution has one."""
    data = bytearray(os.urandom(16))
    data[6] = data[6] & 0x0F | 0x40  # version 4
    data[8] = data[8] & 0x3F | 0x80  # the RFC 4122 variant
    return data.hex()


__all__ = ["Execution", "Services", "bound_seconds", "new_execution_id"]
