"""OpenTelemetry spans for executions and capability calls, when opentelemetry-api is installed.

Span attributes name the execution, the subject, the capability and the outcome code;
argument values are recorded only when the host opts in (`CodeMode(trace_arguments=True)`).
Without opentelemetry-api every call here is a cheap no-op.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
except ImportError:  # the `otel` extra is not installed
    trace = None  # type: ignore[assignment]
    otel_context = None  # type: ignore[assignment]

from codemode.types import JSONObject

_NOTHING = nullcontext()


class Span:
    """A started span (or nothing), whose outcome is set before it ends."""

    def __init__(self, span: Any = None) -> None:
        self.span = span
        self.context: Any = None
        if span is not None and trace is not None:
            self.context = trace.set_span_in_context(span)

    def outcome(self, code: str) -> None:
        """Record how it ended; anything but "ok" also sets the span's status to ERROR."""
        if self.span is not None:
            self.span.set_attribute("codemode.outcome", code)
            if code != "ok" and trace is not None:
                self.span.set_status(trace.Status(trace.StatusCode.ERROR, code))

    def end(self) -> None:
        if self.span is not None:
            self.span.end()

    def active(self) -> AbstractContextManager[None]:
        """Make this span the current one on this thread (or task) while host code runs
        in it, so spans the host code starts are its children."""
        if self.context is None or otel_context is None:
            return _NOTHING  # no tracing: nothing to attach, at no cost per call
        return self._attached()

    @contextmanager
    def _attached(self) -> Iterator[None]:
        assert otel_context is not None
        token = otel_context.attach(self.context)
        try:
            yield
        finally:
            otel_context.detach(token)

    def approval(self, verdict: str) -> None:
        """Record how a person answered for this call (`asked` while the program waits)."""
        if self.span is not None:
            self.span.set_attribute("codemode.approval", verdict)

    def arguments(self, arguments: JSONObject) -> None:
        if self.span is not None:
            self.span.set_attribute("codemode.arguments", json.dumps(arguments, ensure_ascii=False))


NO_SPAN = Span()
"""The span of what is not traced: it records nothing, so every untraced call shares it."""


def enabled() -> bool:
    """Whether a tracer provider is installed (without one, spans are skipped entirely)."""
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def execution_span(execution_id: str, subject: str, session: str | None = None) -> Span:
    """A started span for one execution (ended with `Span.end`, on any thread); `session`:
    the digest of the session it runs in (`codemode.session`), never the handle."""
    if trace is None or not enabled():
        return NO_SPAN
    attributes = {"codemode.execution_id": execution_id, "codemode.subject": subject}
    if session is not None:
        attributes["codemode.session"] = session
    span = trace.get_tracer("codemode").start_span(
        "codemode.execute",
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )
    return Span(span)


def call_span(parent: Span, name: str, capability_id: str) -> Span:
    """A started span for one call, a child of its execution's."""
    if trace is None or parent.span is None:
        return NO_SPAN
    span = trace.get_tracer("codemode").start_span(
        f"codemode.call {name}",
        context=parent.context,
        attributes={"codemode.capability": name, "codemode.capability_id": capability_id},
        record_exception=False,
        set_status_on_exception=False,
    )
    return Span(span)


__all__ = ["NO_SPAN", "Span", "call_span", "enabled", "execution_span"]
