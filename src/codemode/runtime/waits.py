"""What one execution's program waits for, holding no thread: calls, sleeps, host tasks.

A program that must wait is parked here with the test of what it waits for and the step
that goes on (`hold`); whatever ends what it waits for (a job of the pool that ran a
call, a task of the engine's loop that awaited host code, a timer of the clock that ends
a sleep) records its outcome here (`complete`), and the one that finds the program ready
takes the step to go on with. The jobs, tasks and timers of the execution are kept here
too, so that answering its caller early cancels every one that has not started and
knows which were left running in host code.

Everything here is read and changed under the execution's one lock (`Status.lock`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Set
from typing import Any

from codemode.clock import Clock, Timer
from codemode.events import EventHandler
from codemode.runtime.dispatch import Awaiting, Plan, abandon
from codemode.runtime.loop import EngineLoop
from codemode.runtime.pool import Job, WorkPool
from codemode.runtime.sandbox import Answer, Returned, Step
from codemode.runtime.state import State, Status
from codemode.runtime.watchdog import Owner

Pending = Answer | BaseException
"""What a call or sleep the program waits for ended with."""
Resume = Callable[[], Step]
"""The interpreter step that goes on once what the program waits for is there."""
BLOCKING = -1
"""The key of a sleep that blocks the program (no call id: nothing else runs meanwhile)."""
SLEPT = Returned(None)
"""What a sleep ends with."""


class Waits:
    """The calls, sleeps, jobs, tasks and timers one execution waits on."""

    def __init__(
        self,
        status: Status,
        *,
        subject: str,
        execution_id: str,
        emit: EventHandler | None,
        clock: Clock,
        pool: WorkPool,
        loop: EngineLoop,
    ) -> None:
        self.status = status
        self.subject = subject
        self.execution_id = execution_id
        self.emit = emit
        self.clock = clock
        self.pool = pool
        self.loop = loop
        self._answers: dict[int, Pending] = {}
        """Calls and sleeps that ended and the program has not yet taken, by call id."""
        self._pending: set[int] = set()
        """Calls of an `async def main` started and not yet ended (the program ends only
        after them)."""
        self._sleeping: set[int] = set()
        """Sleeps of an `async def main` not yet ended (nothing to wait for at its end)."""
        self._ready: Callable[[], bool] | None = None
        self._resume: Resume | None = None
        """While AWAITING: whether what it waits for is there, and the step that goes on."""
        self._waits_for: tuple[int, ...] | None = None
        """The calls the program is blocked on now (an `async def main` at a Wait, or a
        sync `main()` at a call that awaits host code)."""
        self._step_job: Job | None = None
        """The job that advances the program (or ends its run), the latest one."""
        self._host_jobs: dict[int, Job] = {}
        """The job running each call of an `async def main` now, by call id."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: list[Timer] = []

    # -- the program waits ------------------------------------------------------------------

    def hold(self, ready: Callable[[], bool], resume: Resume) -> bool:
        """Park the program until `ready()` (True: it waits, holding no thread, and
        `complete` hands `resume` on); False when it is ready already (go on with
        `resume` now). `Answered` if the caller has its answer."""
        with self.status.lock:
            self.status.check()
            if not ready():
                self.status.state, self._ready, self._resume = State.AWAITING, ready, resume
                return True
        self._waits_for = None
        return False

    def block_on(self, call_ids: tuple[int, ...]) -> None:
        """The program is blocked on these calls (it may pause if a person is all it
        waits for)."""
        self._waits_for = call_ids

    def complete(self, key: int, outcome: Pending | None) -> Resume | None:
        """A call or sleep ended (on any thread), or (None) a call now waits for a person:
        the step that goes on if the program waited for this and may now go on (it is
        RUNNING again); else None."""
        with self.status.lock:
            if outcome is not None:
                self._answers[key] = outcome
                self._pending.discard(key)
            self._sleeping.discard(key)
            self._host_jobs.pop(key, None)
            resume, ready = self._resume, self._ready
            if self.status.state is not State.AWAITING or resume is None or ready is None:
                return None
            if not ready():
                return None
            self.status.state, self._ready, self._resume = State.RUNNING, None, None
            self._waits_for = None
        return resume

    def only_for(self, asked: Set[int]) -> bool:
        """(The lock held.) If all the program waits for is the calls in `asked` (a
        person's answer): every other call and sleep has ended and the program has taken
        their answers. Then it waits no more (RUNNING: the caller pauses it) and True."""
        waits_for = self._waits_for
        if (
            self.status.state is not State.AWAITING
            or waits_for is None
            or self._sleeping
            or not self._pending <= asked
            or any(key in self._answers for key in waits_for)
        ):
            return False
        self.status.state, self._ready, self._resume = State.RUNNING, None, None
        return True

    def calls_ended(self, asked: Set[int]) -> bool:
        """Whether every call the program started has ended, but those in `asked` (waiting
        for a person: no one needs their answer, so they never run). A ready test."""
        return self._pending <= asked

    def has(self, key: int) -> bool:
        """Whether the call or sleep `key` ended and the program has not taken it. A
        ready test."""
        return key in self._answers

    def has_any(self, keys: tuple[int, ...]) -> bool:
        """Whether any of these calls ended and the program has not taken it. A ready
        test."""
        return any(key in self._answers for key in keys)

    def take(self, key: int) -> Answer:
        """The outcome of a call or sleep that ended, for the program (raised if it
        failed)."""
        with self.status.lock:
            outcome = self._answers.pop(key)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def take_ready(self, ids: tuple[int, ...]) -> dict[int, Answer]:
        """The outcomes of those of these calls that ended."""
        with self.status.lock:
            ready = [key for key in ids if key in self._answers]
        return {key: self.take(key) for key in ready}

    # -- what it waits on -------------------------------------------------------------------

    def sleep(self, key: int, seconds: float, ring: Callable[[], None]) -> None:
        """A sleep of `seconds`: a timer of the clock rings `ring` when it ends (`key`:
        the call an `async def main` awaits later, or BLOCKING)."""
        clock = self.clock
        with self.status.lock:
            if key != BLOCKING:
                self._sleeping.add(key)
            self._timers.append(clock.call_at(clock.now() + seconds, ring))

    def stepping(self, job: Job | None) -> None:
        """`job` advances the program now (or ends its run); None once its run is over."""
        self._step_job = job

    def start(self, key: int, work: Callable[[], None]) -> None:
        """A call of an `async def main`: a job of its own, which the program's end waits
        for."""
        with self.status.lock:
            self._pending.add(key)
            self._host_jobs[key] = self.pool.submit(self.subject, work)

    def hand_off(
        self,
        key: int,
        capability: str,
        item: Awaiting,
        plan: Plan,
        then: Callable[[Any, BaseException | None], None],
    ) -> None:
        """A call's plan awaits host code: the engine's loop awaits it, holding no thread,
        and `then(value, failure)` goes on with its outcome in a job of the pool."""
        status = self.status
        with status.lock:  # the call's own job only returns now: it runs no host code
            self._host_jobs.pop(key, None)

        async def await_host() -> None:
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            value: Any = None
            failure: BaseException | None = None
            if status.settled:  # answered before it began: nothing ran
                self._tasks.discard(task)
                _close(item, plan)
                return
            try:
                with item.span.active():
                    value = await self.loop.host(item.awaitable)
            except asyncio.CancelledError as cancelled:
                if status.settled or task.cancelling():  # cancelled with its execution
                    abandon(plan)
                    return
                failure = cancelled  # host code raised it itself: a failure of its own
            except BaseException as exc:
                failure = exc
            finally:
                self._tasks.discard(task)
            with status.lock:  # held, so the job cannot end before it is known
                self._host_jobs[key] = self.pool.submit(self.subject, lambda: then(value, failure))

        self.loop.spawn(await_host, Owner(self.subject, capability, self.execution_id, self.emit))

    # -- the caller was answered ------------------------------------------------------------

    def let_go(self, previous: State, here: int) -> tuple[list[tuple[Job, str]], bool]:
        """(The lock held; the caller was answered in state `previous`, on thread
        `here`.) Cancel every job not started; the jobs running host code elsewhere (left
        to finish), with what each runs, and whether the program's own job never
        started."""
        jobs = [(job, "a capability call") for job in self._host_jobs.values()]
        step = self._step_job
        if step is not None and previous is State.IN_HOST:
            jobs.append((step, "the driver"))  # a sync main()'s own thread
        # A job not started never starts; one running here is returning now.
        stuck = [(j, w) for j, w in jobs if not j.future.cancel() and j.thread != here]
        unstarted = previous is State.RUNNING and step is not None and step.future.cancel()
        return stuck, unstarted

    def cancel(self) -> None:
        """Cancel every timer and host task (from any thread)."""
        with self.status.lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
        self.loop.cancel(self._tasks)


def _close(item: Awaiting, plan: Plan) -> None:
    """End a plan whose execution was answered before its host coroutine began."""
    abandon(plan)
    awaitable = item.awaitable
    if asyncio.iscoroutine(awaitable):
        awaitable.close()


__all__ = ["BLOCKING", "SLEPT", "Pending", "Resume", "Waits"]
