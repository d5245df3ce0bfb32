"""The audit of one execution: its span and its events, delivered off the hot path.

An execution records that it started (`ExecutionStarted`, before any of its program
runs: one that cannot be recorded does not run), that host code was left running when it
was answered (`HostCodeAbandoned`, sent from the notices' thread, since the clock's
thread may be the one that answers), and how it finished (`ExecutionFinished`, once,
after the caller has its answer). With no event handler none of them is even built. The
sink, a tracing hook and a logging handler are host code: whatever they raise is logged,
never let out into the execution's last-resort paths.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from typing import Literal

from codemode.clock import Clock
from codemode.errors import CodeModeError, ExecutionCanceledError, ResourceLimitError
from codemode.events import (
    Event,
    EventHandler,
    ExecutionFinished,
    ExecutionStarted,
    HostCodeAbandoned,
)
from codemode.limits import LimitKind
from codemode.runtime.notices import Notices
from codemode.runtime.pool import WorkPool
from codemode.tracing import NO_SPAN, execution_span

log = logging.getLogger("codemode")

AbandonReason = Literal["deadline", "program_ended", "cancelled"]
_ABANDONED: dict[AbandonReason, str] = {
    "deadline": "past its deadline",
    "program_ended": "after the program ended without it",
    "cancelled": "after the execution was cancelled",
}
"""Each `HostCodeAbandoned.reason`, as the host log says it."""
_TIME_LIMITS = frozenset({LimitKind.EXECUTION_TIME, LimitKind.CAPABILITY_TIME})


class Audit:
    """The span and the audit events of one execution."""

    def __init__(
        self,
        *,
        execution_id: str,
        subject: str,
        emit: EventHandler | None,
        clock: Clock,
        pool: WorkPool,
        notices: Notices,
        session: str | None = None,
    ) -> None:
        self.execution_id = execution_id
        self.session = session
        """The session's digest (never its handle), or None outside one."""
        self.subject = subject
        self.emit = emit
        self.span = NO_SPAN
        """The execution's span (a started one from `start` until `end_span`)."""
        self.began: float | None = None
        """When interpreter work started (`ExecutionStarted`), from which its end counts."""
        self._clock = clock
        self._pool = pool
        self._notices = notices

    def start(self, source: str, *, announce: bool = True) -> bool:
        """Open the execution's span and record that it started; False when the sink
        failed (an execution that cannot be audited does not run). `announce`: False for
        a program that goes on from a pause (it started before it paused)."""
        self.span = execution_span(self.execution_id, self.subject, self.session)
        self.began = self._clock.now()
        if self.emit is None or not announce:
            return True
        encoded = source.encode("utf-8", errors="surrogatepass")
        event = ExecutionStarted(
            execution_id=self.execution_id,
            subject=self.subject,
            time=time.time(),
            source_sha256=hashlib.sha256(encoded).hexdigest(),
            source_bytes=len(encoded),
            session=self.session,
        )
        return self.deliver(event)

    def end_span(self, outcome: str) -> None:
        """End the execution's span, once (before the answer where the program's own job
        gives it, so a caller that reads its spans finds it)."""
        with contextlib.suppress(BaseException):  # a tracing hook is host code too
            span, self.span = self.span, NO_SPAN
            span.outcome(outcome)
            span.end()

    def finished(
        self, outcome: str, duration: float, calls: tuple[str, ...], result_bytes: int
    ) -> None:
        """Record how the execution ended (`outcome`: "ok" or the error's code)."""
        if self.emit is None:
            return
        self.deliver(
            ExecutionFinished(
                execution_id=self.execution_id,
                subject=self.subject,
                time=time.time(),
                outcome=outcome,
                duration_seconds=duration,
                capability_calls=calls,
                result_bytes=result_bytes,
                session=self.session,
            )
        )

    def abandoned(self, what: str, reason: AbandonReason) -> None:
        """Host code (`what`) was left running when the execution was answered."""
        count = self._pool.abandoned()
        quietly(
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
        self._notices.send(lambda: self.deliver(event))

    def deliver(self, event: Event) -> bool:
        """Hand an event to the sink; a failing sink is logged, and reported as False."""
        if self.emit is None:
            return True
        try:
            self.emit(event)
        except BaseException as exc:
            quietly(
                logging.ERROR,
                "execution %s: the audit sink failed on %s",
                self.execution_id,
                type(event).__name__,
                exc=exc,
            )
            return False
        return True


def abandoned_because(error: CodeModeError) -> AbandonReason:
    """Why host code still running was left when the execution was answered with `error`:
    its time ran out, it was cancelled, or else the program ended without it."""
    if isinstance(error, ResourceLimitError) and error.kind in _TIME_LIMITS:
        return "deadline"
    if isinstance(error, ExecutionCanceledError):
        return "cancelled"
    return "program_ended"


def quietly(level: int, message: str, *args: object, exc: BaseException | None = None) -> None:
    """Log from the last-resort paths: a logging handler or filter is host code, and one
    that fails must not stop the caller from being answered."""
    with contextlib.suppress(BaseException):
        log.log(level, message, *args, exc_info=exc)


__all__ = ["AbandonReason", "Audit", "abandoned_because", "quietly"]
