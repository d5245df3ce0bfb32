"""Audit events: what ran, for whom, with which arguments, and how it ended.

Events are host-side records: they carry the real host exception of a failed call and the
authorizer's reason for a denial, which never reach the model. Every event carries the
execution id that the host log lines of the same execution carry.
"""

from __future__ import annotations

import json
import os
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from codemode.types import JSONObject


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every event."""

    execution_id: str
    subject: str
    time: float
    """Seconds since the epoch."""

    @property
    def kind(self) -> str:
        """`execution_started`, `call_failed`, ...: the class name in snake case."""
        name = type(self).__name__
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"event": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, BaseException):
                value = {
                    "type": type(value).__name__,
                    "message": str(value),
                    "traceback": "".join(traceback.format_exception(value)),
                }
            elif hasattr(value, "__dataclass_fields__"):
                value = asdict(value)
            data[f.name] = value
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionStarted(Event):
    source_sha256: str
    source_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionFinished(Event):
    outcome: str
    """"ok" or the error code."""
    duration_seconds: float
    capability_calls: tuple[str, ...] = ()
    result_bytes: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CallEvent(Event):
    capability: str
    capability_id: str
    arguments: JSONObject | None = None
    """Canonical arguments; None before they bound."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallAttempted(CallEvent):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class CallAuthorized(CallEvent):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class CallDenied(CallEvent):
    code: str
    """permission_denied or policy_failure."""
    reason: BaseException | None = field(default=None)
    """What the authorizer raised (host-side only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallCompleted(CallEvent):
    duration_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFailed(CallEvent):
    code: str
    duration_seconds: float
    error: BaseException | None = None
    """The host exception, when the handler raised one."""


EventHandler = Callable[[Event], None]


class JsonLinesSink:
    """Appends each event as one JSON line; safe under concurrency (one write per line)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def __call__(self, event: Event) -> None:
        line = json.dumps(event.to_dict(), ensure_ascii=False, default=repr) + "\n"
        data = line.encode("utf-8")
        with self._lock:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


__all__ = [
    "CallAttempted",
    "CallAuthorized",
    "CallCompleted",
    "CallDenied",
    "CallEvent",
    "CallFailed",
    "Event",
    "EventHandler",
    "ExecutionFinished",
    "ExecutionStarted",
    "JsonLinesSink",
]
