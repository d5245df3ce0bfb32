"""One capability call: bind -> authorize -> invoke -> convert.

Failures the program may handle (denied, policy failure, handler failure) are raised
inside the program with only their safe text; failures of the program itself (arguments
that do not bind, limits) stop the execution. Host exceptions go to the host log only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic_core
import pydantic_monty as pm

from codemode.authz import AuthorizationRequest, Authorizer, Denied
from codemode.binding import bind
from codemode.capabilities import Capability
from codemode.context import CallContext
from codemode.errors import (
    AgentError,
    CapabilityFailedError,
    CodeModeError,
    PermissionDeniedError,
    PolicyFailureError,
    ResourceLimitError,
    sanitize_agent_message,
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
from codemode.limits import LimitKind, Limits
from codemode.tracing import Span, call_span
from codemode.values import to_guest

log = logging.getLogger("codemode")
T = TypeVar("T")


class Stop(Exception):
    """Ends the execution with `error`; the program cannot catch it."""

    def __init__(self, error: CodeModeError) -> None:
        self.error = error
        super().__init__(str(error))


class Raise(Exception):
    """Raises `error` inside the program as `exc_type`, carrying only the safe text."""

    def __init__(self, error: CodeModeError, exc_type: pm.ExcType) -> None:
        self.error = error
        self.exc_type = exc_type
        super().__init__(str(error))


class Bridge:
    """Runs coroutines (async handlers and authorizers) on an event loop from the driver."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: set[concurrent.futures.Future[Any]] = set()
        self.closed = False
        self.lock = threading.Lock()

    def run(self, awaitable: Awaitable[T], timeout: float, on_timeout: CodeModeError) -> T:
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), self.loop)
        with self.lock:
            if self.closed:
                future.cancel()
            self.pending.add(future)
        try:
            return future.result(timeout=max(timeout, 0.0))
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise Stop(on_timeout) from None
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


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


@dataclass
class Dispatcher:
    """Everything one execution needs to run capability calls."""

    execution_id: str
    subject: str
    authorizer: Authorizer
    limits: Limits
    bridge: Bridge
    remaining: Callable[[], float]
    """Seconds left before the execution deadline."""
    emit: Callable[[Event], None] | None
    """Where audit events go; None builds none at all."""
    threads: concurrent.futures.Executor
    """Where sync handlers with a timeout shorter than the deadline run."""
    trace_arguments: bool = False
    """Whether call spans record argument values (off: they may be sensitive)."""

    def __post_init__(self) -> None:
        self.result_bytes = 0
        self.host_seconds = 0.0
        self.lock = threading.Lock()
        self.span = Span()
        """The execution's span, parent of every call span."""

    def call(self, capability: Capability, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run one call and return the value the program receives (or raise Stop/Raise)."""
        if self.span.span is None:
            return self._call(capability, args, kwargs, self.span)
        with call_span(self.span, capability.name, capability.id) as span:
            try:
                value = self._call(capability, args, kwargs, span)
            except (Stop, Raise) as failure:
                span.outcome(failure.error.code.value)
                raise
            span.outcome("ok")
            return value

    def _call(
        self, capability: Capability, args: tuple[Any, ...], kwargs: dict[str, Any], span: Span
    ) -> Any:
        started = time.monotonic()
        base: dict[str, Any] = {
            "execution_id": self.execution_id,
            "subject": self.subject,
            "capability": capability.name,
            "capability_id": capability.id,
        }
        try:
            bound = bind(capability, args, kwargs, self.limits)
        except CodeModeError as error:
            self._event(CallAttempted, **base)
            self._event(CallFailed, **base, code=error.code.value, duration_seconds=0)
            raise Stop(error) from None
        base["arguments"] = bound.arguments
        if self.trace_arguments:
            span.arguments(bound.arguments)
        self._event(CallAttempted, **base)
        request = AuthorizationRequest(
            self.subject,
            capability.id,
            capability.name,
            dict(bound.arguments) if capability.flat else copy.deepcopy(bound.arguments),
            self.execution_id,
        )
        try:
            self._await(self.authorizer(request), self.remaining(), _EXECUTION_TIME)
        except Stop:
            raise
        except Denied as exc:
            self._log("denied", capability, exc)
            self._event(CallDenied, **base, code="permission_denied", reason=exc)
            raise Raise(PermissionDeniedError(), "PermissionError") from None
        except Exception as exc:
            self._log("authorizer failed on", capability, exc)
            self._event(CallDenied, **base, code="policy_failure", reason=exc)
            raise Raise(PolicyFailureError(), "RuntimeError") from None
        self._event(CallAuthorized, **base)
        handler_kwargs = dict(bound.handler_kwargs)
        if capability.context_parameter is not None:
            handler_kwargs[capability.context_parameter] = CallContext(
                self.subject, capability.name, capability.id, self.execution_id
            )
        try:
            value = self._invoke(capability, handler_kwargs)
            result = self._convert(capability, value)
        except (Stop, Raise) as failure:
            cause = failure.__cause__ or failure.__context__
            self._event(
                CallFailed,
                **base,
                code=failure.error.code.value,
                duration_seconds=self._finished(started),
                error=cause if isinstance(cause, Exception) else None,
            )
            raise
        self._event(CallCompleted, **base, duration_seconds=self._finished(started))
        return result

    def _event(self, kind: type[CallEvent], **fields: Any) -> None:
        """Build and deliver an event, only when someone listens."""
        if self.emit is not None:
            self.emit(kind(time=time.time(), **fields))

    def _finished(self, started: float) -> float:
        elapsed = time.monotonic() - started
        with self.lock:
            self.host_seconds += elapsed
        return elapsed

    def _invoke(self, capability: Capability, kwargs: dict[str, Any]) -> Any:
        """Run the handler within its time budget; failures become Raise or Stop."""
        budget = capability.timeout or self.limits.max_capability_seconds
        remaining = self.remaining()
        on_timeout = _CAPABILITY_TIME if budget < remaining else _EXECUTION_TIME
        try:
            if capability.is_async:
                coroutine = capability.handler(**kwargs)
                return self.bridge.run(coroutine, min(budget, remaining), on_timeout)
            if budget >= remaining:
                return capability.handler(**kwargs)  # the execution deadline bounds it
            future = self.threads.submit(capability.handler, **kwargs)
            try:
                return future.result(timeout=budget)
            except concurrent.futures.TimeoutError:
                log.warning(
                    "execution %s: abandoned capability %s after its timeout",
                    self.execution_id,
                    capability.name,
                )
                raise Stop(on_timeout) from None
        except (Stop, Raise):
            raise
        except AgentError as exc:
            log.info(
                "execution %s: capability %s raised AgentError", self.execution_id, capability.name
            )
            detail = sanitize_agent_message(exc.message)
            raise Raise(CapabilityFailedError(detail), "RuntimeError") from exc
        except Exception as exc:
            self._log("handler failed:", capability, exc)
            raise Raise(CapabilityFailedError(), "RuntimeError") from exc

    def _await(self, value: Any, timeout: float, on_timeout: CodeModeError) -> Any:
        """The value, or what it resolves to when the authorizer is async."""
        if inspect.isawaitable(value):
            return self.bridge.run(value, timeout, on_timeout)
        return value

    def _convert(self, capability: Capability, value: Any) -> Any:
        """Check the result against its declared type and size, and shape it for the program."""
        try:
            size = len(capability.result_adapter.dump_json(value, warnings="error"))
        except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
            self._log("result does not match its declared type from", capability, exc)
            raise Raise(CapabilityFailedError(), "RuntimeError") from exc
        if size > self.limits.max_result_bytes:
            raise Stop(ResourceLimitError(LimitKind.RESULT_SIZE))
        with self.lock:
            self.result_bytes += size
            if self.result_bytes > self.limits.max_total_result_bytes:
                raise Stop(ResourceLimitError(LimitKind.TOTAL_RESULT_SIZE))
        return to_guest(value) if capability.converts_result else value

    def _log(self, what: str, capability: Capability, exc: BaseException) -> None:
        log.warning(
            "execution %s: %s capability %s (%s)",
            self.execution_id,
            what,
            capability.name,
            capability.id,
            exc_info=exc,
        )


_EXECUTION_TIME = ResourceLimitError(LimitKind.EXECUTION_TIME)
_CAPABILITY_TIME = ResourceLimitError(LimitKind.CAPABILITY_TIME)


__all__ = ["Bridge", "Dispatcher", "Raise", "Stop"]
