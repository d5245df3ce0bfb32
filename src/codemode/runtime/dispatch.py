"""One capability call: bind -> authorize -> invoke -> convert.

Failures the program may handle (denied, policy failure, handler failure) are raised
inside the program with only their safe text; failures of the program itself (arguments
that do not bind, limits) stop the execution. Host exceptions go to the host log only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
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
from codemode.limits import LimitKind, Limits
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

    def run(self, awaitable: Awaitable[T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), self.loop)
        try:
            return future.result(timeout=max(timeout, 0.0))
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise Stop(ResourceLimitError(LimitKind.EXECUTION_TIME)) from None


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

    def __post_init__(self) -> None:
        self.result_bytes = 0
        self.lock = threading.Lock()

    def call(self, capability: Capability, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run one call and return the value the program receives (or raise Stop/Raise)."""
        try:
            bound = bind(capability, args, kwargs, self.limits)
        except CodeModeError as error:
            raise Stop(error) from None
        request = AuthorizationRequest(
            self.subject, capability.id, capability.name, dict(bound.arguments)
        )
        try:
            self._await(self.authorizer(request))
        except Stop:
            raise
        except Denied as exc:
            self._log("denied", capability, exc)
            raise Raise(PermissionDeniedError(), "PermissionError") from None
        except Exception as exc:
            self._log("authorizer failed on", capability, exc)
            raise Raise(PolicyFailureError(), "RuntimeError") from None
        kwargs = dict(bound.handler_kwargs)
        if capability.context_parameter is not None:
            kwargs[capability.context_parameter] = CallContext(
                self.subject, capability.name, capability.id, self.execution_id
            )
        try:
            value = self._await(capability.handler(**kwargs))
        except Stop:
            raise
        except AgentError as exc:
            log.info(
                "execution %s: capability %s raised AgentError", self.execution_id, capability.name
            )
            detail = sanitize_agent_message(exc.message)
            raise Raise(CapabilityFailedError(detail), "RuntimeError") from None
        except Exception as exc:
            self._log("handler failed:", capability, exc)
            raise Raise(CapabilityFailedError(), "RuntimeError") from None
        return self._convert(capability, value)

    def _await(self, value: Any) -> Any:
        """The value, or what it resolves to when a handler or authorizer is async."""
        if inspect.isawaitable(value):
            return self.bridge.run(value, self.remaining())
        return value

    def _convert(self, capability: Capability, value: Any) -> Any:
        """Check the result against its declared type and size, and shape it for the program."""
        try:
            size = len(capability.result_adapter.dump_json(value, warnings="error"))
        except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
            self._log("result does not match its declared type from", capability, exc)
            raise Raise(CapabilityFailedError(), "RuntimeError") from None
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


__all__ = ["Bridge", "Dispatcher", "Raise", "Stop"]
