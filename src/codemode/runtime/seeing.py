"""Asking `can_see` about a snapshot's capabilities for one request, under one deadline.

With `hide_forbidden`, what a subject may see is asked of the policy per capability. A
`can_see` that hangs must not make its subject's request wait for as many timeouts as
there are capabilities, nor hold threads that other subjects' requests need. So:

- every check of one request shares one deadline, `visibility_seconds` (the time one
  host call may take, and within an execution its own time, which counts from the
  request's arrival);
- async checks run at once, side by side, as coroutines of the subject's own loop; sync
  ones run one after another in one job of the engine's pool, on the subject's share of
  its threads, never on a thread other subjects' requests wait for;
- a check that has not answered by the deadline hides its capability (fail closed): its
  coroutine is cancelled, its thread left running and counted against its subject, and
  the capabilities left unanswered go to the host log and a `visibility_unanswered`
  audit event;
- a subject whose host code left running holds its share already is not asked at all:
  it sees nothing until that code returns, rather than leave more of it running.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import threading
import time
import types
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from codemode.authz import RequireApproval
from codemode.capabilities import Capability
from codemode.clock import Timer
from codemode.events import Event, HostCodeAbandoned, VisibilityUnanswered
from codemode.limits import Limits
from codemode.runtime.classify import StopError
from codemode.runtime.engine import Engine
from codemode.runtime.pool import Job
from codemode.runtime.visibility import Ask, Asked
from codemode.runtime.watchdog import Owner

log = logging.getLogger("codemode")

CanSee = Callable[[str, str, str], object]


def visibility_seconds(limits: Limits) -> float:
    """The time all the `can_see` checks of one request share."""
    return min(limits.max_capability_seconds, limits.max_execution_seconds)


def shows(decision: object) -> bool:
    """Only None, True or `RequireApproval` shows a capability (as they allow a call);
    False, any other value and any failure hide it. Read by its type, never by asking the
    value (whose `__class__` is host code that may raise)."""
    return decision is None or decision is True or issubclass(type(decision), RequireApproval)


class Checks:
    """The `can_see` checks of one request of one subject."""

    def __init__(
        self,
        engine: Engine,
        can_see: CanSee,
        subject: str,
        capabilities: Sequence[Capability],
        *,
        execution_id: str = "",
        emit: Callable[[Event], None] | None = None,
    ) -> None:
        self._engine = engine
        self._can_see = can_see
        self.subject = subject
        self.execution_id = execution_id
        self._emit = emit
        self.seconds = visibility_seconds(engine.limits)
        self._pending = {c.id: c for c in capabilities}
        self._visible: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._job: Job | None = None
        self._timer: Timer | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.answer: concurrent.futures.Future[Asked] = concurrent.futures.Future()
        """What the subject may see, set once: every check answered, or time is up."""

    def start(self) -> concurrent.futures.Future[Asked]:
        """Ask every check; the answer comes by the deadline whatever they do."""
        engine = self._engine
        if not self._pending:
            self._finish(True)
        elif engine.left_running(self.subject) >= engine.pool.share:
            self._deliver(
                lambda: log.warning(
                    "%s sees no capability: its host code left running past its deadline "
                    "holds its share of the engine's, so can_see is not asked",
                    self.subject,
                )
            )
            self._finish(False)
        else:
            clock = engine.clock
            self._timer = clock.call_at(clock.now() + self.seconds, self._expire)
            if inspect.iscoroutinefunction(self._can_see):  # calling it runs no host code
                self._ask_each()
            else:
                job = engine.pool.submit(self.subject, self._ask_each)
                with self._lock:
                    self._job = job
                job.future.add_done_callback(self._unstarted)
        return self.answer

    def _unstarted(self, done: concurrent.futures.Future[Any]) -> None:
        """The job ended: one the closing engine cancelled before it ran ends the checks
        (nothing shown) rather than leave them to a clock that is closing too."""
        if done.cancelled():
            self._expire(quietly=True)

    def _ask_each(self) -> None:
        """Ask about each capability in turn while there is time; an awaitable answer is
        awaited on the engine's loop, side by side with the others."""
        for capability in list(self._pending.values()):
            if self._closed:
                return
            try:
                decision = self._can_see(self.subject, capability.id, capability.name)
                awaited = inspect.isawaitable(decision)  # asks the value: host code too
            except BaseException as exc:
                self._failed(capability, exc)
                continue
            if awaited:
                self._spawn(capability, cast("Awaitable[object]", decision))
            else:
                self._decide(capability, shows(decision))

    def _spawn(self, capability: Capability, awaitable: Awaitable[object]) -> None:
        loop = self._engine.loop

        async def check() -> None:
            task = asyncio.current_task()
            assert task is not None
            with self._lock:
                late = self._closed
                if not late:
                    self._tasks.add(task)
            if late:  # out of time before it began: nothing ran
                _close(awaitable)
                return
            try:
                decision = await loop.host(awaitable)
            except asyncio.CancelledError:
                if task.cancelling():  # out of time, or the engine is closing
                    self._expire(quietly=True)
                    return
                decision = False  # raised by can_see itself: a failure
            except StopError:  # its host code left running holds its share: not asked
                self._decide(capability, False)
                return
            except BaseException as exc:
                self._failed(capability, exc)
                return
            finally:
                with self._lock:
                    self._tasks.discard(task)
            _close(decision)
            self._decide(capability, shows(decision))

        owner = Owner(self.subject, capability.name, self.execution_id, self._emit)
        if not loop.spawn(check, owner):  # the engine is closing: it never runs
            _close(awaitable)
            self._expire(quietly=True)

    def _failed(self, capability: Capability, exc: BaseException) -> None:
        with contextlib.suppress(BaseException):  # a logging hook is host code too
            log.warning("can_see failed for %s", capability.name, exc_info=exc)
        self._decide(capability, False)

    def _decide(self, capability: Capability, visible: bool) -> None:
        with self._lock:
            if self._closed or self._pending.pop(capability.id, None) is None:
                return
            if visible:
                self._visible.add(capability.id)
            done = not self._pending
        if done:
            self._finish(True)

    def _finish(self, complete: bool) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            answer = (frozenset(self._visible), complete)
            timer = self._timer
        if timer is not None:
            timer.cancel()
        self.answer.set_result(answer)

    def _expire(self, *, quietly: bool = False) -> None:
        """On the clock's thread: time is up; what has not answered stays hidden.
        `quietly`: the engine is closing, which is no failure of the checks."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            unanswered = tuple(c.name for c in self._pending.values())
            answer = (frozenset(self._visible), False)
            job, tasks = self._job, set(self._tasks)
        engine = self._engine
        abandoned = False
        if job is not None and not job.future.cancel():
            engine.pool.abandon(job)  # a sync can_see holds its thread: counted
            abandoned = job.abandoned
        engine.loop.cancel(tasks)
        self.answer.set_result(answer)
        if not quietly:
            self._deliver(lambda: self._report(unanswered, abandoned))

    def _report(self, unanswered: tuple[str, ...], abandoned: bool) -> None:
        """Off the clock's thread: the log line and the audit events of a late check."""
        log.warning(
            "%scan_see did not answer for %s within %g s (or was not asked in time, behind a "
            "slower check): %s hidden from this request",
            f"execution {self.execution_id}: " if self.execution_id else "",
            self.subject,
            self.seconds,
            ", ".join(unanswered),
        )
        now = time.time()
        events: list[Event] = [
            VisibilityUnanswered(
                execution_id=self.execution_id,
                subject=self.subject,
                time=now,
                capabilities=unanswered,
                seconds=self.seconds,
            )
        ]
        if abandoned:
            count = self._engine.pool.abandoned()
            log.warning(
                "a visibility check of %s left running in host code past its deadline "
                "(%d threads abandoned now in this CodeMode, across subjects)",
                self.subject,
                count,
            )
            events.append(
                HostCodeAbandoned(
                    execution_id=self.execution_id,
                    subject=self.subject,
                    time=now,
                    what="a visibility check",
                    abandoned=count,
                    reason="deadline",
                )
            )
        for event in events:
            if self._emit is not None:
                try:
                    self._emit(event)
                except BaseException as exc:
                    log.error("the audit sink failed on %s", type(event).__name__, exc_info=exc)

    def _deliver(self, work: Callable[[], object]) -> None:
        self._engine.services.notices.send(work)


def asking(
    engine: Engine,
    can_see: CanSee,
    subject: str,
    execution_id: str,
    emit: Callable[[Event], None] | None,
) -> Ask:
    """How one request of `subject` asks `can_see` about the capabilities it is given:
    every check under one deadline (`Checks`)."""

    def ask(capabilities: list[Capability]) -> concurrent.futures.Future[Asked]:
        checks = Checks(
            engine, can_see, subject, capabilities, execution_id=execution_id, emit=emit
        )
        return checks.start()

    return ask


def _close(value: object) -> None:
    """A coroutine that will never be awaited, closed (no warning that it was not)."""
    if type(value) is types.CoroutineType:  # by its type: the value's own code may raise
        value.close()


__all__ = ["CanSee", "Checks", "asking", "shows", "visibility_seconds"]
