"""One capability call: bind -> authorize -> invoke -> project.

Failures the program may handle (denied, policy failure, handler failure) are raised
inside the program with only their fixed text; failures of the program itself (arguments
that do not bind, limits) stop the execution. Host exceptions, whatever they are
(`SystemExit` from a handler included), go to the host log only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import inspect
import itertools
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from codemode.authz import AuthorizationRequest, Authorizer, Denied
from codemode.binding import ValidatorError, bind
from codemode.capabilities import Capability
from codemode.capabilities.results import Projected
from codemode.context import CallContext
from codemode.errors import (
    AgentError,
    CodeModeError,
    ExecutionCanceledError,
    ExpectedError,
    InternalError,
    ResourceLimitError,
    Where,
)
from codemode.events import (
    CallAttempted,
    CallAuthorized,
    CallCompleted,
    CallDenied,
    CallEvent,
    CallFailed,
    Event,
)
from codemode.limits import LimitKind, Limits, exceeded, seconds, size
from codemode.runtime.classify import (
    InjectedError,
    StopError,
    authorizer_decision,
    authorizer_failure,
    handler_failure,
)
from codemode.tracing import Span, call_span

log = logging.getLogger("codemode")
T = TypeVar("T")


class HostExit(Exception):
    """A `BaseException` that host code raised (SystemExit, KeyboardInterrupt, ...),
    carried as an ordinary failure so that it ends the call, never the server."""


def _nowhere() -> Where | None:
    return None


Locate = Callable[[], "Where | None"]
"""Finds the call site of a capability call (positions are built only when needed)."""


class HostClock:
    """Deadlines of the host code running now for one execution.

    Whoever waits on the execution (the caller, or the loop of an async program) reads
    the earliest deadline and the error it means, so a handler that never returns is
    answered on time without a thread of its own. Starting a deadline wakes nobody (that
    would cost every call a thread switch): the waiter sleeps at most the shortest handler
    budget at a time, so it still sees any deadline before it passes.
    """

    def __init__(self, deadline: float, error: CodeModeError) -> None:
        self.deadline = deadline
        """The execution's own deadline (monotonic seconds)."""
        self.error = error
        """What passing the execution's own deadline means."""
        self._running: dict[int, tuple[float, CodeModeError, Locate]] = {}
        self._expired: tuple[float, CodeModeError, Locate] | None = None
        """The last host code that left past its deadline: the caller may look a moment
        after it left, and must still name its call site."""
        self._lock = threading.Lock()
        self._tokens = itertools.count()

    def enter(self, deadline: float, error: CodeModeError, locate: Locate = _nowhere) -> int:
        """Host code runs until `deadline`; past it the execution fails with `error`, at
        the call site `locate` finds. Returns the token to `leave` with."""
        token = next(self._tokens)
        with self._lock:
            self._running[token] = (deadline, error, locate)
        return token

    def leave(self, token: int) -> None:
        with self._lock:
            entry = self._running.pop(token)
            if time.monotonic() >= entry[0]:  # it ran out: its call site still explains it
                self._expired = entry

    def next_deadline(self) -> float:
        """The earliest deadline now in force (monotonic seconds)."""
        with self._lock:
            return min((entry[0] for entry in self._running.values()), default=self.deadline)

    def overdue(self) -> CodeModeError:
        """The error of the earliest deadline, placed at its call site."""
        earliest: tuple[float, CodeModeError, Locate] = (self.deadline, self.error, _nowhere)
        with self._lock:
            entries = [*self._running.values(), *([self._expired] if self._expired else [])]
            for entry in entries:
                if entry[0] <= earliest[0]:  # a call's own site, where it has one
                    earliest = entry
        _, error, locate = earliest
        return error.replace(where=locate())


class Bridge:
    """Runs coroutines (async handlers and authorizers) on an event loop from a thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: set[concurrent.futures.Future[Any]] = set()
        self.closed = False
        self.lock = threading.Lock()

    def run(
        self, awaitable: Awaitable[T], timeout: float, on_timeout: Callable[[], CodeModeError]
    ) -> T:
        """The coroutine's value; past `timeout` it is cancelled and `on_timeout()` raised
        (built then, so it says what the waiting caller would say at that moment)."""
        future = asyncio.run_coroutine_threadsafe(_guarded(awaitable), self.loop)
        with self.lock:
            if self.closed:
                future.cancel()
            self.pending.add(future)
        try:
            return future.result(timeout=max(timeout, 0.0))
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise StopError(on_timeout()) from None
        except concurrent.futures.CancelledError:  # the execution was stopped meanwhile
            raise StopError(ExecutionCanceledError()) from None
        finally:
            with self.lock:
                self.pending.discard(future)

    def cancel_all(self) -> None:
        """Cancel every coroutine still running for this execution, and any started later."""
        with self.lock:
            self.closed = True
            pending = list(self.pending)
        for future in pending:
            future.cancel()


async def _guarded(awaitable: Awaitable[T]) -> T:
    """Await host code; an exit it raises must not stop the event loop it runs on."""
    try:
        return await awaitable
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:
        raise HostExit(type(exc).__name__) from exc


@dataclass(kw_only=True)
class Dispatcher:
    """Everything one execution needs to run capability calls."""

    execution_id: str
    subject: str
    authorizer: Authorizer
    limits: Limits
    bridge: Bridge
    clock: HostClock
    stopped: Callable[[], CodeModeError | None]
    """Why the execution was stopped, if it was (checked after host code returns)."""
    emit: Callable[[Event], None] | None
    """Where audit events go; None builds none at all. A failure to record an event before
    a handler runs means the call does not run."""
    trace_arguments: bool = False
    """Whether call spans record argument values (off: they may be sensitive)."""

    def __post_init__(self) -> None:
        self.result_bytes = 0
        self._spans: list[tuple[float, float]] = []
        """When each call ran (monotonic start, end)."""
        self.lock = threading.Lock()
        self.span = Span()
        """The execution's span, parent of every call span."""

    def remaining(self) -> float:
        return self.clock.deadline - time.monotonic()

    def call(
        self,
        capability: Capability,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        locate: Locate = _nowhere,
    ) -> Projected:
        """Run one call and return what the program receives (or raise StopError/InjectedError)."""
        started = time.monotonic()
        try:
            if self.span.span is None:
                return self._call(capability, args, kwargs, self.span, locate, started)
            with call_span(self.span, capability.name, capability.id) as span:
                try:
                    value = self._call(capability, args, kwargs, span, locate, started)
                except (StopError, InjectedError) as failure:
                    span.outcome(failure.error.code.value)
                    raise
                span.outcome("ok")
                return value
        finally:  # bound, authorized, run or refused: the program waited for it
            ended = time.monotonic()
            with self.lock:
                self._spans.append((started, ended))

    def _call(
        self,
        capability: Capability,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        span: Span,
        locate: Locate,
        started: float,
    ) -> Projected:
        base: dict[str, Any] = (
            {}
            if self.emit is None
            else {
                "execution_id": self.execution_id,
                "subject": self.subject,
                "capability": capability.name,
                "capability_id": capability.id,
            }
        )
        try:
            bound = bind(capability, args, kwargs, self.limits)
        except ValidatorError as wrapped:  # a host validator failed in its own way
            exc = wrapped.__cause__ or wrapped
            self._log("an argument validator failed on", capability, exc)
            self._event(CallAttempted, **base)
            failure = handler_failure(exc)
            self._event(
                CallFailed, **base, code=failure.error.code.value, duration_seconds=0, error=exc
            )
            raise failure from None
        except CodeModeError as error:  # binding's own: names only what the program wrote
            self._event(CallAttempted, **base)
            self._event(CallFailed, **base, code=error.code.value, duration_seconds=0)
            raise StopError(error) from None
        base["arguments"] = bound.arguments
        if self.trace_arguments:
            span.arguments(bound.arguments)
        if self.emit is not None:
            self._event(CallAttempted, required=True, **base)
        self._authorize(capability, bound.arguments, base)
        if self.emit is not None:
            self._event(CallAuthorized, required=True, **base)
        handler_kwargs = bound.handler_kwargs
        if capability.context_parameter is not None:
            handler_kwargs = dict(handler_kwargs)
            handler_kwargs[capability.context_parameter] = CallContext(
                self.subject, capability.name, capability.id, self.execution_id
            )
        try:
            projected = self._invoke(capability, handler_kwargs, locate)
        except (StopError, InjectedError) as failure:
            cause = failure.__cause__
            self._event(
                CallFailed,
                **base,
                code=failure.error.code.value,
                duration_seconds=time.monotonic() - started,
                error=cause if isinstance(cause, BaseException) else None,
            )
            raise
        elapsed = time.monotonic() - started
        if self.emit is not None:
            self._event(CallCompleted, **base, duration_seconds=elapsed)
        stopped = self.stopped()
        if stopped is not None:
            raise StopError(stopped)
        self._count(projected.size)
        return projected

    def _authorize(self, capability: Capability, arguments: Any, base: dict[str, Any]) -> None:
        request = AuthorizationRequest(
            self.subject,
            capability.id,
            capability.name,
            dict(arguments) if capability.flat else copy.deepcopy(arguments),
            self.execution_id,
            capability.annotations,
        )
        try:  # bounded by the execution deadline, which the waiting caller watches
            decision = self.authorizer(request)
            if inspect.isawaitable(decision):
                decision = self.bridge.run(decision, self.remaining(), self.clock.overdue)
        except StopError:
            raise
        except BaseException as exc:
            failure = authorizer_failure(exc)
            if isinstance(exc, Denied):  # an expected event: one line, no traceback
                log.info("execution %s: denied %s", self.execution_id, capability.name)
            elif isinstance(exc, ExpectedError):
                log.warning(
                    "execution %s: the policy failed on %s: %s",
                    self.execution_id,
                    capability.name,
                    exc,
                )
            else:
                self._log("authorizer failed on", capability, exc)
            self._event(CallDenied, **base, code=failure.error.code.value, reason=exc)
            raise failure from None
        refused = authorizer_decision(decision)
        if refused is not None:
            if inspect.iscoroutine(decision):
                decision.close()  # a coroutine returned from a coroutine: never run
            log.info(
                "execution %s: the authorizer returned %s for %s",
                self.execution_id,
                type(decision).__name__,
                capability.name,
            )
            self._event(CallDenied, **base, code=refused.error.code.value)
            raise refused

    def _invoke(self, capability: Capability, kwargs: dict[str, Any], locate: Locate) -> Projected:
        """Run the handler and project its result, within its time budget.

        A sync handler runs on this thread; past its deadline whoever waits on the
        execution answers for it and abandons this thread, so nothing here waits on a pool.
        """
        budget = capability.timeout or self.limits.max_capability_seconds
        remaining = self.remaining()
        on_timeout = capability_time(budget) if budget < remaining else self.clock.error
        try:
            deadline = min(time.monotonic() + budget, self.clock.deadline)
            token = self.clock.enter(deadline, on_timeout, locate)
            try:
                if capability.is_async:
                    coroutine = capability.handler(**kwargs)
                    value = self.bridge.run(coroutine, min(budget, remaining), self.clock.overdue)
                else:
                    value = capability.handler(**kwargs)
                projected = capability.projection.project(value, self.limits.max_result_bytes)
                if time.monotonic() >= deadline:  # past it, whether or not a waiter saw it
                    raise StopError(self.clock.overdue())
                return projected
            finally:
                self.clock.leave(token)
        except (StopError, InjectedError):
            raise
        except BaseException as exc:
            if isinstance(exc, AgentError):
                log.info("execution %s: %s raised AgentError", self.execution_id, capability.name)
            elif isinstance(exc, ExpectedError):
                log.warning("execution %s: %s failed: %s", self.execution_id, capability.name, exc)
            else:
                self._log("handler or its result failed:", capability, exc)
            raise handler_failure(exc) from exc

    def _count(self, result: int) -> None:
        if result > self.limits.max_result_bytes:
            raise StopError(exceeded(LimitKind.RESULT_SIZE, self.limits, amount=size(result)))
        with self.lock:
            self.result_bytes += result
            total = self.result_bytes
        if total > self.limits.max_total_result_bytes:
            raise StopError(exceeded(LimitKind.TOTAL_RESULT_SIZE, self.limits, amount=size(total)))

    def _event(self, kind: type[CallEvent], *, required: bool = False, **fields: Any) -> None:
        """Build and deliver an event, only when someone listens.

        A `required` event is one recorded before the handler runs: if it cannot be
        recorded, the call does not run (fail closed).
        """
        if self.emit is None:
            return
        try:
            self.emit(kind(time=time.time(), **fields))
        except BaseException as exc:
            log.error(
                "execution %s: the audit sink failed on %s%s",
                self.execution_id,
                kind.__name__,
                "; the call does not run" if required else "",
                exc_info=exc,
            )
            if required:
                raise StopError(InternalError()) from None

    @property
    def host_seconds(self) -> float:
        """The time at least one call was running: gathered calls overlap, and the program
        waits for them once, so their times are not added up."""
        with self.lock:
            spans = sorted(self._spans)
        total, reach = 0.0, -math.inf
        for start, end in spans:
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total

    def _log(self, what: str, capability: Capability, exc: BaseException) -> None:
        log.warning(
            "execution %s: %s capability %s (%s)",
            self.execution_id,
            what,
            capability.name,
            capability.id,
            exc_info=exc,
        )


@functools.cache
def capability_time(budget: float) -> ResourceLimitError:
    """The error for a handler past its budget (one per budget: never mutated, copied when
    raised)."""
    return ResourceLimitError(LimitKind.CAPABILITY_TIME, bound=seconds(budget))


__all__ = ["Bridge", "Dispatcher", "HostClock", "HostExit", "capability_time"]
