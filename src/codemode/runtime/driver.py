"""The step loop of one program: start its run, answer each step, end it.

The driver runs in jobs of the engine's pool: a job runs interpreter steps, and the sync
host code of a sync `main()`'s calls inline (no thread switch), until the program ends
or must wait. Each step the interpreter reports is answered here: a capability call
(counted in the call log, then planned by the dispatcher: inline for a sync `main()`, a
job of its own for each call of an `async def main`, so gathered calls run at once), a
sleep (a timer), a wait for deferred calls, and the program's end (its value, converted
once). Waiting holds no thread (`Waits`): whichever job, task or timer ends what the
program waits for hands the next step to a new job. A call that needs a person's answer
is `Pausing`'s to decide.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from codemode.capabilities import Capability
from codemode.continuations import SESSION_FULL, SessionSlot
from codemode.errors import (
    UNCAUGHT_CALL,
    CodeModeError,
    InternalError,
    InvalidArgumentsError,
    ResourceLimitError,
    Where,
)
from codemode.limits import LimitKind, exceeded, size
from codemode.runtime.appendix import Appendix
from codemode.runtime.audit import Audit
from codemode.runtime.calllog import CallLog, Completed
from codemode.runtime.classify import FailureContext, InjectedError, StopError, saved_in
from codemode.runtime.crossing import returned
from codemode.runtime.deadline import Deadline, Locate
from codemode.runtime.dispatch import Approval, Awaiting, Dispatcher, Plan, abandon
from codemode.runtime.guest import error_data, progress_call, sleep_problem, undefined, vars_of
from codemode.runtime.outcome import ExecutionResult
from codemode.runtime.pausing import Pausing
from codemode.runtime.printed import Printed
from codemode.runtime.program import Program
from codemode.runtime.progress import Progress
from codemode.runtime.sandbox import (
    Answer,
    Call,
    Done,
    Injected,
    Returned,
    Run,
    Sleep,
    Step,
    Wait,
)
from codemode.runtime.setup import Setup
from codemode.runtime.state import Answered, State, Status
from codemode.runtime.waits import BLOCKING, SLEPT, Pending, Resume, Waits


class _Pause:
    """A call waits for a person: the program pauses once nothing else is in flight."""


PAUSE = _Pause()


class _Failed(Exception):
    """Ends a run that failed, so its worker is never reused."""


class Driver:
    """Runs one program's steps, from its start (or its resume) to its end."""

    def __init__(
        self,
        status: Status,
        *,
        source: str,
        execution_id: str,
        setup: Setup,
        deadline: Deadline,
        failures: FailureContext,
        printed: Printed,
        calls: CallLog,
        dispatcher: Dispatcher,
        waits: Waits,
        pausing: Pausing,
        audit: Audit,
        submit: Callable[[Callable[[], None]], object],
        settle: Callable[[ExecutionResult], None],
        elapsed: Callable[[], float],
        session: SessionSlot | None = None,
        progress: Progress | None = None,
        appendix: Appendix | None = None,
    ) -> None:
        self.status = status
        self.source = source
        self.execution_id = execution_id
        self.setup = setup
        self.deadline = deadline
        self.failures = failures
        self.printed = printed
        self.calls = calls
        self.dispatcher = dispatcher
        self.waits = waits
        self.pausing = pausing
        self.audit = audit
        self._submit = submit
        """Runs work as the program's next job (under the execution's last-resort net)."""
        self._settle = settle
        self._elapsed = elapsed
        self.session = session
        """The session the program runs in: its state read at the start, the state it
        leaves written when it succeeds."""
        self.progress = progress
        """Where the program's own `progress()` reports go, when someone watches the run."""
        self.appendix = appendix
        """Guest code fed with the program (`Appendix`), if any."""
        self.run: Run | None = None
        """The interpreter's run of the program, once it started."""
        self.program: Program | None = None
        """The prepared program, once it passed the preflight."""
        self._opened: contextlib.AbstractContextManager[Run] | None = None
        """The sandbox's run, entered: closed once, by `close`."""

    # -- the run ----------------------------------------------------------------------------

    def start(self, *, here: bool = False) -> None:
        """Record the start, prepare the program, start its run (or load its dump) and
        run it until it ends or must wait. `here`: on the caller's thread, as far as
        `_go_on` lets it."""
        limits = self.setup.limits
        self.status.enter(State.IN_HOST)
        announced = self.audit.start(self.source, announce=self.pausing.snapshot is None)
        self.dispatcher.span = self.audit.span
        if not announced:
            raise StopError(InternalError())  # an execution that cannot be audited does not run
        self.status.enter(State.RUNNING)
        source_bytes = len(self.source.encode("utf-8", errors="surrogatepass"))
        if source_bytes > limits.max_source_bytes:
            raise StopError(exceeded(LimitKind.SOURCE_SIZE, limits, amount=size(source_bytes)))
        try:
            program = self.setup.programs.prepare(
                self.source,
                self.dispatcher.subject,
                learned=self.pausing.snapshot is None,
                appendix=self.appendix,
            )
        except CodeModeError as error:  # the preflight's own verdict (it runs no host code)
            raise StopError(error) from None
        self.failures.program = self.program = program
        opened = self.setup.sandbox.run(
            modules=self.setup.modules, roots=program.imported, limits=limits, printer=self.printed
        )
        run = opened.__enter__()
        self._opened = opened
        with self.status.lock:
            self.status.check()
            self.run = run
        snapshot = self.pausing.snapshot
        if snapshot is None:  # a paused program's snapshot holds its session's state already
            state = None if self.session is None else self.session.state or b""
            self._advance(lambda: run.start(program.code, state), here=here)
            return
        if program.is_async:  # the calls a person answered for run as they would have
            for call in self.pausing.resumed_calls():
                self._start_call(call, program, run)
        self._advance(lambda: run.load(snapshot, program.code))

    def close(self, *, failed: bool) -> None:
        """End the run: its worker goes back to the sandbox's pool, or, after a failure,
        is never reused."""
        opened, self._opened = self._opened, None
        if opened is None:
            return
        with contextlib.suppress(BaseException):
            if failed:
                opened.__exit__(_Failed, _Failed(), None)
            else:
                opened.__exit__(None, None, None)

    def complete(self, key: int, outcome: Pending | None) -> None:
        """A call or sleep ended, or (None) a call now waits for a person: the program
        goes on in a new job if it waited for that, or pauses if a person is all it
        waits for."""
        resume = self.waits.complete(key, outcome)
        if resume is None:
            self._check_pause()
            return
        self._submit(lambda: self._advance(resume))

    # -- the step loop ----------------------------------------------------------------------

    def _advance(self, resume: Resume, *, here: bool = False) -> None:
        """Run the program until it ends or must wait."""
        self._go_on(self._step(resume), here=here)

    def _go_on(self, step: Step | None, *, here: bool = False) -> None:
        """Answer steps until the program ends or must wait; on the caller's thread
        (`here`), only until a step that runs host code or converts a value, which the
        pool takes on, so that the deadline answers the caller whatever that does."""
        while step is not None:
            if here and not _light(step, kept=self.session is not None):
                self._submit(functools.partial(self._go_on, step))
                return
            if isinstance(step, Call):
                step = self._on_call(step)
            elif isinstance(step, Sleep):
                step = self._on_sleep(step)
            elif isinstance(step, Wait):
                step = self._on_wait(step)
            else:
                step = self._on_done(step)

    def _step(self, resume: Callable[..., Step], *args: Any) -> Step:
        """One step of the interpreter, `resume(*args)`, within the deadline."""
        self.status.enter(State.RUNNING)
        now = self.deadline.clock.now
        started = now()
        overdue = self.deadline.check(started)
        if overdue is not None:
            raise StopError(overdue)
        try:
            return resume(*args)
        finally:
            self.calls.interpreted(now() - started)

    def _await(self, ready: Callable[[], bool], resume: Resume) -> Step | None:
        """Wait, holding no thread, until `ready()`; then `resume` is the next step. The
        next step at once if it is ready already; None when this job's work is done."""
        if self.waits.hold(ready, resume):
            self._check_pause()
            return None
        return self._step(resume)

    def _check_pause(self) -> None:
        """Pause an `async def main` once all it waits for is a person."""
        if self.pausing.due():
            self._submit(self._pause)

    def _pause(self) -> None:
        run, program = self._current()
        self.pausing.pause(run, program)

    # -- what the program does --------------------------------------------------------------

    def _on_call(self, call: Call) -> Step | None:
        run, program = self.run, self.program  # set before the first step
        assert run is not None and program is not None
        if self.pausing.restored is not None:  # only a resumed program has answered calls
            resumed = self.pausing.resumed(call.call_id)
            if resumed is not None:  # a sync main() resumed at the call a person answered
                return self._run_sync(resumed, program, run)
        try:
            if program.hidden(call.name, call.span[0]):
                raise KeyError(call.name)  # the appendix's alone: as if it named nothing
            capability = self.setup.capabilities[call.name]
        except KeyError:
            found = (
                vars_of(call, self.setup.limits)
                if call.name == "vars"
                else error_data(call, self.failures.injected)
                if call.name == "error_data"
                else progress_call(call, self.progress)
                if call.name == "progress"
                else undefined(call.name)
            )
            return self._step(lambda: run.answer(found))
        locate = functools.partial(program.where_at, *call.span)
        self.calls.start(capability, locate)
        if program.is_async:  # a job of its own, so gathered calls run at once
            self._start_call(call, program, run)
            return self._step(run.defer)
        return self._run_sync(call, program, run, self._plan(call, program, capability, locate))

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
            raise StopError(self.deadline.error.replace(where=where))
        if sleep.call_id is not None and program.is_async:
            self._sleep(sleep.call_id, seconds)
            return self._step(run.defer)
        self._sleep(BLOCKING, seconds)
        waits = self.waits
        return self._await(lambda: waits.has(BLOCKING), lambda: run.answer(waits.take(BLOCKING)))

    def _on_wait(self, wait: Wait) -> Step | None:
        run, _ = self._current()
        ids = wait.call_ids
        waits = self.waits
        waits.block_on(ids)
        return self._await(lambda: waits.has_any(ids), lambda: run.settle(waits.take_ready(ids)))

    def _on_done(self, done: Done) -> Step | None:
        asked, waits = self.pausing.asked(), self.waits
        if not waits.calls_ended(asked):
            # calls never awaited still run: the execution ends after them (but those
            # waiting for a person: no one needs their answer, so they never run)
            return self._await(lambda: waits.calls_ended(asked), lambda: done)
        run, program = self._current()
        limits = self.setup.limits
        value, written = returned(done.value, program, run, self.setup.capabilities, limits)
        usage = self.calls.usage(self._elapsed(), written)
        session = self.session
        if session is not None:
            session.kept, session.names = self._keep(run)
        try:
            self._settle(ExecutionResult(value, self.printed.text, usage, self.execution_id))
        except Answered:
            if session is not None:  # answered already (its time ran out): nothing is kept
                session.kept = session.names = None
            raise
        return None

    def _keep(self, run: Run) -> tuple[bytes, dict[str, str]]:
        """The session's state after the program and its names, measured the moment the
        worker hands it over: past `max_session_bytes`, the program fails and the session
        stays as it was."""
        kept = run.keep()
        limits = self.setup.limits
        if len(kept.state) > limits.max_session_bytes:
            error = exceeded(LimitKind.SESSION_SIZE, limits, amount=size(len(kept.state)))
            raise StopError(error.replace(note=SESSION_FULL))
        return kept.state, kept.names

    # -- calls and sleeps -------------------------------------------------------------------

    def _plan(
        self,
        call: Call,
        program: Program,
        capability: Capability | None = None,
        locate: Locate | None = None,
    ) -> Plan:
        """The plan of a call; of a call a person answered for, the plan of the one they
        were asked about (its canonical arguments, bound again)."""
        if capability is None:
            capability = self.setup.capabilities[call.name]
        if locate is None:
            locate = functools.partial(program.where_at, *call.span)
        pausing = self.pausing
        asked = None if pausing.restored is None else pausing.answer_for(call.call_id)
        return self.dispatcher.call(capability, call.args, call.kwargs, locate, asked)

    def _start_call(self, call: Call, program: Program, run: Run) -> None:
        """A call of an `async def main`: a job of its own."""
        plan = self._plan(call, program)
        self.waits.start(call.call_id, lambda: self._plan_job(call, call.name, plan, None, None))

    def _run_sync(
        self, call: Call, program: Program, run: Run, plan: Plan | None = None
    ) -> Step | None:
        """A call of a sync `main()`, driven here until it ends, awaits or pauses."""
        if plan is None:
            plan = self._plan(call, program)
        key = call.call_id
        self.status.enter(State.IN_HOST)
        outcome = self._drive(call, call.name, plan, None, None)
        if outcome is PAUSE:
            self._pause()
            return None
        if isinstance(outcome, Awaiting):  # an async authorizer or handler: it may pause too
            self._hand_off(call, call.name, plan, outcome)
            waits = self.waits
            waits.block_on((key,))
            return self._await(lambda: waits.has(key), lambda: run.answer(waits.take(key)))
        assert not isinstance(outcome, _Pause)
        return self._step(run.answer, outcome)

    def _plan_job(
        self, call: Call, name: str, plan: Plan, value: Any, exc: BaseException | None
    ) -> None:
        """A job: drive one call of an `async def main` until it ends or awaits."""
        if self.status.settled:
            abandon(plan)
            return
        try:
            outcome: Pending | Awaiting | _Pause = self._drive(call, name, plan, value, exc)
        except BaseException as failure:  # taken by the program when it awaits the call
            outcome = failure
        if isinstance(outcome, Awaiting):
            self._hand_off(call, name, plan, outcome)
        elif isinstance(outcome, _Pause):  # it stays pending: a program at its end is done
            self.complete(call.call_id, None)
        else:
            self.complete(call.call_id, outcome)

    def _drive(
        self, call: Call, name: str, plan: Plan, value: Any, exc: BaseException | None
    ) -> Answer | Awaiting | _Pause:
        """Run the plan's sync steps here, until it ends (its answer), awaits, or waits
        for a person (PAUSE)."""
        try:
            item = plan.send(value) if exc is None else plan.throw(exc)
        except StopIteration as stop:
            completed: Completed = stop.value
            self.calls.end(name, call.span, "ok", completed)
            self.failures.results[name] = completed.projected.value
            return Returned(completed.projected.value, completed.projected.has_records)
        except InjectedError as failure:
            self.calls.end(name, call.span, failure.error.code.value)
            return self._inject(failure, call)
        except StopError as stop:
            error = stop.error
            self.calls.end(name, call.span, error.code.value)
            if error.where is not None or _overdue(error):
                raise  # the deadline placed it, as the caller was told
            where = self._where(call)
            program = self.program
            tried = program is not None and where is not None and program.tried(where.line)
            note = UNCAUGHT_CALL if tried and isinstance(error, InvalidArgumentsError) else None
            error = error.replace(where=where, note=note)
            inside = None if program is None else program.located(program.line_at(call.span[0]))
            if inside is not None:  # a call in a saved program: placed at the caller's site
                error = saved_in(error, inside)
            raise StopError(error) from None
        if isinstance(item, Approval):
            verdict = self.pausing.ask(call, name, plan, item, lambda: self._where(call))
            if verdict is None:
                return PAUSE
            return self._drive(call, name, plan, verdict, None)
        return item

    def _hand_off(self, call: Call, name: str, plan: Plan, item: Awaiting) -> None:
        """The plan awaits host code: the engine's loop awaits it, holding no thread, and
        the plan goes on in a job of the pool."""
        self.waits.hand_off(
            call.call_id,
            name,
            item,
            plan,
            lambda value, failure: self._plan_job(call, name, plan, value, failure),
        )

    def _sleep(self, key: int, seconds: float) -> None:
        self.waits.sleep(key, seconds, lambda: self.complete(key, SLEPT))

    def _inject(self, failure: InjectedError, call: Call) -> Injected:
        """Raise a failure inside the program, remembering which call raised it."""
        message = str(failure.error)
        where = self._where(call)
        if where is not None:
            self.failures.injected.append((where, failure.exc_type, message, failure.error))
        return Injected(failure.exc_type, message)

    # -- helpers ----------------------------------------------------------------------------

    def _current(self) -> tuple[Run, Program]:
        run, program = self.run, self.program
        assert run is not None and program is not None
        return run, program

    def _where(self, call: Call) -> Where | None:
        program = self.program
        return None if program is None else program.where_at(*call.span)


def _light(step: Step, *, kept: bool = False) -> bool:
    """Whether answering the step runs no host code and no work that grows with the data:
    a sleep, a wait, or the end of a program whose value is a small scalar (and whose
    session, when `kept`, is not dumped: that grows with what the session holds)."""
    if isinstance(step, Done):
        if kept:
            return False
        value, kind = step.value, type(step.value)
        return (
            value is None
            or kind is bool
            or kind is float
            or (kind is int and -_SMALL < value < _SMALL)
            or (kind is str and len(value) <= _SMALL_TEXT)
        )
    return not isinstance(step, Call)


_SMALL = 1 << 64
_SMALL_TEXT = 4096
"""A value the caller's thread converts itself: bounded work, whatever the program."""


def _overdue(error: CodeModeError) -> bool:
    """Whether the error is the execution's own time running out (no call's budget)."""
    return isinstance(error, ResourceLimitError) and error.kind == LimitKind.EXECUTION_TIME


__all__ = ["Driver"]
