"""One capability call: bind -> resolve its resource -> authorize -> invoke -> project.

A call is a generator that runs its sync steps (binding, a sync authorizer or handler,
the projection) where it is driven, on a thread of the engine's pool, and yields each
coroutine of host code (an async authorizer or handler) as `Awaiting`, which the engine's
loop awaits before the plan goes on with its value. So one definition of a call serves a
sync `main()` (driven inline, no thread switch) and an `async def main` (a task).

Failures the program may handle (denied, policy failure, handler failure) are raised
inside the program with only their fixed text; failures of the program itself (arguments
that do not bind, limits) stop the execution. Host exceptions, whatever they are
(`SystemExit` from a handler included), go to the host log only.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from codemode.authz import AllowAll, AuthorizationRequest, Authorizer, Denied, RequireApproval
from codemode.binding import ValidatorError, bind
from codemode.capabilities import Capability, Entity, Projected
from codemode.context import CallContext
from codemode.continuations import Verdict
from codemode.errors import (
    AgentError,
    ApprovalDeclinedError,
    ApprovalTimedOutError,
    ApprovalUnavailableError,
    CodeModeError,
    ErrorCode,
    ExpectedError,
    InternalError,
    ResourceLimitError,
)
from codemode.events import (
    ApprovalDeclined,
    ApprovalEvent,
    ApprovalGranted,
    ApprovalTimedOut,
    CallAttempted,
    CallAuthorized,
    CallCompleted,
    CallDenied,
    CallEvent,
    CallFailed,
    Event,
)
from codemode.limits import LimitKind, Limits, seconds
from codemode.runtime.calllog import CallLog, Completed
from codemode.runtime.classify import (
    InjectedError,
    StopError,
    authorizer_decision,
    authorizer_failure,
    handler_failure,
)
from codemode.runtime.deadline import Deadline, Locate, nowhere
from codemode.tracing import NO_SPAN, Span, call_span
from codemode.types import JSONObject

log = logging.getLogger("codemode")
T = TypeVar("T")


class HostExit(Exception):
    """A `BaseException` that host code raised (SystemExit, KeyboardInterrupt, ...),
    carried as an ordinary failure so that it ends the call, never the server."""


@dataclass(frozen=True, slots=True)
class Awaiting:
    """A coroutine of host code, for the engine's loop to await; the plan goes on with
    its value (or its exception)."""

    awaitable: Awaitable[Any]
    span: Span
    """The call's span, current while the coroutine runs."""


@dataclass(frozen=True, slots=True)
class Approval:
    """The authorizer asks a person about this call. The execution pauses the program
    at it (and ends the plan), or, where no one can be asked, sends
    `Verdict.UNAVAILABLE` back into the plan, which then fails the call (fail closed)."""

    arguments: JSONObject
    """The canonical arguments the authorizer saw (a copy)."""
    message: str
    span: Span


@dataclass(frozen=True, slots=True)
class Asked:
    """How a person answered for a call they were asked about, for its plan on resume."""

    verdict: Verdict
    message: str
    waited: str
    """The approval wait, as the timed-out error names it (`600 s`)."""
    arguments: JSONObject
    """The canonical arguments the person was shown: the call runs only with exactly
    these."""


_VERDICT_EVENTS: dict[Verdict, type[ApprovalEvent]] = {
    Verdict.APPROVED: ApprovalGranted,
    Verdict.DECLINED: ApprovalDeclined,
    Verdict.TIMED_OUT: ApprovalTimedOut,
}


Plan = Generator[Awaiting | Approval, Any, Completed]
"""One call: yields what must be awaited, returns the completed call (what the program
receives, and what its record keeps)."""


class Abandon(BaseException):
    """Thrown into a plan whose execution was answered while it awaited host code: it
    ends there (its spans and budgets closed), never mistaken for host code's own."""


def _json(arguments: JSONObject) -> str:
    """Arguments as canonical JSON text, to compare (a state keeps them as JSON)."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=repr)


def _one_line(exc: BaseException) -> str:
    """An expected failure's message for one line of the host log: it may quote an
    upstream or a policy engine, whose line breaks would start lines of their own."""
    return str(exc).replace("\r", "\\r").replace("\n", "\\n")


def abandon(plan: Plan) -> None:
    """End a plan early, whatever state it is in."""
    try:
        plan.throw(Abandon())
    except BaseException:  # Abandon itself, or the plan already ended
        return


async def guarded(awaitable: Awaitable[T]) -> T:
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
    deadline: Deadline
    calls: CallLog
    """Where each call's time and result size are counted (and their limits kept)."""
    stopped: Callable[[], CodeModeError | None]
    """What the execution was answered with early, if it was (checked around host code)."""
    emit: Callable[[Event], None] | None
    """Where audit events go; None builds none at all. A failure to record an event before
    a handler runs means the call does not run."""
    trace_arguments: bool = False
    """Whether call spans record argument values (off: they may be sensitive)."""
    unavailable: str | None = None
    """Why no one can be asked here, as the caller knows it (`approval unavailable` says
    it); None for the general words."""
    observe: Callable[[Capability, Any, str], None] | None = None
    """Learns the shape of what a capability that declares none returned, from the
    value the program receives and who it was for (`ShapeBook.observe`: it never
    raises); None when learning is off."""

    def __post_init__(self) -> None:
        self.span = NO_SPAN
        """The execution's span, parent of every call span."""
        self._allows_all = type(self.authorizer) is AllowAll
        """`AllowAll` allows every call without reading it: no request is built for it."""

    def call(
        self,
        capability: Capability,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        locate: Locate = nowhere,
        asked: Asked | None = None,
    ) -> Plan:
        """One call, as a plan: returns what the program receives, or raises
        StopError/InjectedError. `asked`: a person answered for it (on resume)."""
        clock = self.deadline.clock
        started = clock.now()
        span = call_span(self.span, capability.name, capability.id)
        try:
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
                arguments, handler_kwargs = bind(
                    capability, args, kwargs, self.limits, self._answered
                )
            except (ValidatorError, CodeModeError) as problem:
                raise self._unbound(capability, problem, base) from None
            if self.emit is not None:
                base["arguments"] = arguments
            if self.trace_arguments:
                span.arguments(arguments)
            if self.emit is not None and asked is None:  # on resume, it was attempted before
                self._event(CallAttempted, required=True, **base)
            if asked is not None or not self._allows_all:  # AllowAll needs no request
                resource: Entity | None = None
                if capability.resource is not None:
                    resource = yield from self._resolve(capability, handler_kwargs, base, span)
                yield from self._authorize(capability, arguments, base, span, asked, resource)
            stopped = self.stopped()
            if stopped is not None:  # answered while it was authorized: the handler never runs
                self._event(CallFailed, **base, code=stopped.code.value, duration_seconds=0)
                raise StopError(stopped)
            if self.emit is not None:
                self._event(CallAuthorized, required=True, **base)
            if capability.context_parameter is not None:
                handler_kwargs = dict(handler_kwargs)
                handler_kwargs[capability.context_parameter] = CallContext(
                    self.subject, capability.name, capability.id, self.execution_id
                )
            try:
                if capability.is_async:
                    projected = yield from self._invoke_async(
                        capability, handler_kwargs, locate, span
                    )
                else:
                    projected = self._invoke(capability, handler_kwargs, locate, span)
            except (StopError, InjectedError) as failure:
                cause = failure.__cause__
                self._event(
                    CallFailed,
                    **base,
                    code=failure.error.code.value,
                    duration_seconds=clock.now() - started,
                    error=cause if isinstance(cause, BaseException) else None,
                )
                raise
            if self.emit is not None:
                self._event(CallCompleted, **base, duration_seconds=clock.now() - started)
            stopped = self.stopped()
            if stopped is not None:  # answered meanwhile: what the caller was told stands
                raise StopError(stopped)
            self.calls.received(projected.size)
            if self.observe is not None and capability.json_results:  # host functions: never
                self.observe(capability, projected.value, self.subject)
            span.outcome("ok")
        except (StopError, InjectedError) as failure:
            span.outcome(failure.error.code.value)
            raise
        finally:  # bound, authorized, run or refused: the program waited for it
            span.end()
            self.calls.took(started, clock.now())
        hints = capability.annotations
        return Completed(projected, kwargs, hints.get("readOnlyHint") is not True, bool(hints))

    def _unbound(
        self, capability: Capability, problem: ValidatorError | CodeModeError, base: dict[str, Any]
    ) -> StopError | InjectedError:
        """A call whose arguments did not bind: binding's own error is the program's
        (StopError), a host validator's own failure is the call's (InjectedError)."""
        if isinstance(problem, ValidatorError):  # a host validator failed in its own way
            exc = problem.__cause__ or problem
            self._log("an argument validator failed on", capability, exc)
            self._event(CallAttempted, **base)
            failure = handler_failure(exc)
            self._event(
                CallFailed, **base, code=failure.error.code.value, duration_seconds=0, error=exc
            )
            return failure
        error = self.stopped() or problem  # answered meanwhile (a check stopped): it stands
        self._event(CallAttempted, **base)
        self._event(CallFailed, **base, code=error.code.value, duration_seconds=0)
        return StopError(error)

    def _authorize(
        self,
        capability: Capability,
        arguments: Any,
        base: dict[str, Any],
        span: Span,
        asked: Asked | None,
        resource: Entity | None,
    ) -> Generator[Awaiting | Approval, Any, None]:
        if asked is not None:  # a person answered: a call they did not approve never runs
            span.approval(asked.verdict.value)
            if asked.verdict in _VERDICT_EVENTS:
                self._event(
                    _VERDICT_EVENTS[asked.verdict], required=True, **base, message=asked.message
                )
            if asked.verdict is Verdict.DECLINED:
                raise InjectedError(ApprovalDeclinedError(), "PermissionError")
            if asked.verdict is Verdict.TIMED_OUT:
                error = ApprovalTimedOutError(f"no one answered within {asked.waited}")
                raise InjectedError(error, "PermissionError")
            if asked.verdict is Verdict.UNAVAILABLE:
                raise self._unavailable(capability, base)
            if _json(arguments) != _json(asked.arguments):
                # A validator whose value changes: what would run is not what was approved.
                log.warning(
                    "execution %s: %s bound other arguments on resume than the person saw; "
                    "the call does not run",
                    self.execution_id,
                    capability.name,
                )
                self._event(CallFailed, **base, code=ErrorCode.INTERNAL.value, duration_seconds=0)
                raise StopError(InternalError())
        request = AuthorizationRequest(
            self.subject,
            capability.id,
            capability.name,
            dict(arguments) if capability.flat else copy.deepcopy(arguments),
            self.execution_id,
            capability.annotations,
            resource,
        )
        try:  # bounded by the execution's deadline, which cancels an awaited decision
            with span.active():
                decision = self.authorizer(request)
            if inspect.isawaitable(decision):
                decision = yield Awaiting(decision, span)
        except StopError:
            raise
        except BaseException as exc:
            if isinstance(exc, Abandon):
                raise  # the execution was answered while the decision was awaited
            failure = authorizer_failure(exc)
            if isinstance(exc, Denied):  # an expected event: one line, no traceback
                log.info("execution %s: denied %s", self.execution_id, capability.name)
            elif isinstance(exc, ExpectedError):
                log.warning(
                    "execution %s: the policy failed on %s: %s",
                    self.execution_id,
                    capability.name,
                    _one_line(exc),
                )
            else:
                self._log("authorizer failed on", capability, exc)
            self._event(CallDenied, **base, code=failure.error.code.value, reason=exc)
            raise failure from None
        if isinstance(decision, RequireApproval):
            if asked is not None:  # approved, and authorized again: it runs
                return
            answer = yield Approval(request.arguments, decision.message, span)
            assert answer is Verdict.UNAVAILABLE  # else the execution paused, ending the plan
            raise self._unavailable(capability, base)
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

    def _resolve(
        self, capability: Capability, kwargs: dict[str, Any], base: dict[str, Any], span: Span
    ) -> Generator[Awaiting, Any, Entity]:
        """The entity the call acts on, from its resolver, once per authorization and
        bounded as an authorizer is (by the execution's deadline); anything but an Entity,
        and anything the resolver raises, denies the call with nothing more said."""
        assert capability.resource is not None
        try:
            taken = {name: kwargs[name] for name in capability.resource_parameters}
            if not capability.flat:  # the resolver cannot change what was authorized and runs
                taken = copy.deepcopy(taken)
            with span.active():
                found = capability.resource(**taken)
            if inspect.isawaitable(found):
                found = yield Awaiting(found, span)
            if not isinstance(found, Entity):
                raise TypeError(f"the resolver returned {type(found).__name__}, not an Entity")
        except StopError:
            raise
        except BaseException as exc:
            if isinstance(exc, Abandon):
                raise
            self._log("could not resolve the resource of", capability, exc)
            failure = authorizer_failure(Denied())
            self._event(CallDenied, **base, code=failure.error.code.value, reason=exc)
            raise failure from None
        if self.emit is not None:  # the audit names it; its attributes stay out
            base["resource"] = found.uid
        return found

    def _unavailable(self, capability: Capability, base: dict[str, Any]) -> InjectedError:
        """The failure of a call that needs approval where no one can be asked."""
        log.info(
            "execution %s: %s needs approval, and no one can be asked",
            self.execution_id,
            capability.name,
        )
        why = self.unavailable
        error = ApprovalUnavailableError() if why is None else ApprovalUnavailableError(why)
        failure = InjectedError(error, "PermissionError")
        self._event(CallDenied, **base, code=failure.error.code.value)
        return failure

    def _invoke(
        self, capability: Capability, kwargs: dict[str, Any], locate: Locate, span: Span
    ) -> Projected:
        """Run a sync handler and project its result, within its time budget.

        Past the budget the deadline answers the caller (the handler's thread is left to
        finish, counted as abandoned); a handler that returns late fails at its own call
        site.
        """
        budget = capability.timeout or self.limits.max_capability_seconds
        token = self.deadline.enter(budget, capability_time(budget), locate)
        try:
            try:
                if span.context is None:  # untraced: no span to make current
                    value = capability.handler(**kwargs)
                else:
                    with span.active():
                        value = capability.handler(**kwargs)
                projected = capability.projection.project(value, self.limits.max_result_bytes)
            finally:
                late = self.deadline.leave(token)
        except (StopError, InjectedError, Abandon):
            raise
        except BaseException as exc:
            raise self._failed(capability, exc) from exc
        if late is not None:  # past its deadline, whether or not the timer rang first
            raise StopError(late)
        return projected

    def _invoke_async(
        self, capability: Capability, kwargs: dict[str, Any], locate: Locate, span: Span
    ) -> Generator[Awaiting, Any, Projected]:
        """As `_invoke`, for a coroutine handler, which the engine's loop awaits (past the
        budget it is cancelled)."""
        budget = capability.timeout or self.limits.max_capability_seconds
        token = self.deadline.enter(budget, capability_time(budget), locate)
        try:
            try:
                value = yield Awaiting(capability.handler(**kwargs), span)
                projected = capability.projection.project(value, self.limits.max_result_bytes)
            finally:
                late = self.deadline.leave(token)
        except (StopError, InjectedError, Abandon):
            raise
        except BaseException as exc:
            raise self._failed(capability, exc) from exc
        if late is not None:  # past its deadline, whether or not the timer rang first
            raise StopError(late)
        return projected

    def _failed(self, capability: Capability, exc: BaseException) -> InjectedError:
        """A handler, or the projection of its result, failed: logged, and classified."""
        if isinstance(exc, AgentError) and isinstance(exc.__cause__, ExpectedError):
            # an upstream's failure told the model in fixed words: the detail is here
            log.warning(
                "execution %s: %s failed: %s",
                self.execution_id,
                capability.name,
                _one_line(exc.__cause__),
            )
        elif isinstance(exc, AgentError):
            log.info("execution %s: %s raised AgentError", self.execution_id, capability.name)
        elif isinstance(exc, ExpectedError):
            log.warning(
                "execution %s: %s failed: %s",
                self.execution_id,
                capability.name,
                _one_line(exc),
            )
        else:
            self._log("handler or its result failed:", capability, exc)
        return handler_failure(exc)

    def _answered(self) -> bool:
        """Whether the execution was answered early: binding's schema check then stops."""
        return self.stopped() is not None

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


__all__ = [
    "Abandon",
    "Approval",
    "Asked",
    "Awaiting",
    "Dispatcher",
    "HostExit",
    "Plan",
    "abandon",
    "capability_time",
    "guarded",
]
