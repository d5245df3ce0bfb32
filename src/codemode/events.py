"""Audit events: what ran, for whom, with which arguments, and how it ended.

Events are host-side records: they carry the real host exception of a failed call and the
authorizer's reason for a denial, which never reach the model. Every event carries the
execution id that the host log lines of the same execution carry.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal

from codemode.errors import bounded
from codemode.types import JSONObject
from codemode.values import is_wide_int


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every event."""

    execution_id: str
    """The execution the event belongs to, as the host log lines carry it."""
    subject: str
    """Who the execution runs for."""
    time: float
    """Seconds since the epoch."""

    @property
    def kind(self) -> str:
        """`execution_started`, `call_failed`, ...: the class name in snake case."""
        name = type(self).__name__
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON data that always serializes: bounded strings, wide ints as
        text, host exceptions as type, message and traceback."""
        data: dict[str, Any] = {"event": self.kind}
        for f in fields(self):
            data[f.name] = _render(getattr(self, f.name), 0)
        return data


MAX_AUDIT_TEXT = 64 * 1024
"""Longest string an event keeps, in UTF-8 bytes (longer ones are cut with a marker)."""
MAX_AUDIT_INT = 2**63
"""Ints at or past this size are written as strings, so every JSON reader keeps them."""
_MAX_DEPTH = 128


def _render(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        return value if -MAX_AUDIT_INT < value < MAX_AUDIT_INT else _wide(value)
    if isinstance(value, str):
        return bounded(value, MAX_AUDIT_TEXT)
    if depth > _MAX_DEPTH:
        return "..."
    if isinstance(value, BaseException):
        return _exception(value)
    if isinstance(value, list | tuple):
        return [_render(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {_key(k): _render(v, depth + 1) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return _render({f.name: getattr(value, f.name) for f in fields(value)}, depth + 1)
    return _safely(lambda: bounded(repr(value), MAX_AUDIT_TEXT))


def _wide(value: int) -> str:
    """An int past the JSON-safe range, as decimal text (hex past Python's digit limit)."""
    return bounded(str(value) if not is_wide_int(value) else hex(value), MAX_AUDIT_TEXT)


def _key(key: Any) -> str:
    return key if isinstance(key, str) else _safely(lambda: bounded(repr(key), 256))


def _exception(exc: BaseException) -> dict[str, str]:
    return {
        "type": type(exc).__name__,
        "message": _safely(lambda: bounded(str(exc))),
        "traceback": _safely(lambda: bounded("".join(traceback.format_exception(exc)), 16384)),
    }


def _safely(render: Callable[[], str]) -> str:
    """Host objects may fail to render; the event is written all the same."""
    try:
        return render()
    except BaseException:  # even an exit raised by a host object's __str__
        return "<unprintable>"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionStarted(Event):
    """A program was accepted and is about to run (recorded before it does: if this cannot
    be recorded, the execution does not run)."""

    source_sha256: str
    """The SHA-256 of the program's UTF-8 text, hex: the program itself is not recorded."""
    source_bytes: int
    """The program's size in UTF-8 bytes."""
    session: str | None = None
    """The session the program runs in, as its digest (the first 12 hex digits of the
    handle's SHA-256: the handle would let a log reader continue it); None outside one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionFinished(Event):
    """An execution ended, whichever way."""

    outcome: str
    """"ok" or the error code."""
    duration_seconds: float
    """Wall-clock time from `ExecutionStarted` to the caller's answer, so that the
    executions running at any moment can be read from the events."""
    capability_calls: tuple[str, ...] = ()
    """The names of the capabilities called, in call order."""
    result_bytes: int = 0
    """JSON size of every capability result together."""
    session: str | None = None
    """The session's digest, as `ExecutionStarted.session` gives it; None outside one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramSaved(Event):
    """A program an execution saved (`save_as`) was kept, once the execution succeeded."""

    name: str
    """The capability it is kept as, `programs.<name>`."""
    replaced: bool
    """Whether it replaced a program the subject kept under that name."""
    source_sha256: str
    """The SHA-256 of its UTF-8 text, hex (the text is on the shelf, not in the log)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallEvent(Event):
    """Base of the events of one capability call."""

    capability: str
    """The dotted name the program called."""
    capability_id: str
    """The capability's stable identity, as policies name it."""
    arguments: JSONObject | None = None
    """Canonical arguments; None before they bound."""
    resource: JSONObject | None = None
    """The entity the call acts on, `{"type", "id"}`, once its capability's `resource`
    resolver found it (its attributes stay out); None without a resolver."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallAttempted(CallEvent):
    """A program called a capability (before its arguments bound)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallAuthorized(CallEvent):
    """The authorizer allowed a call (recorded before the handler runs: if this cannot be
    recorded, the call does not run)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallDenied(CallEvent):
    """The authorizer refused a call, or failed; the handler did not run."""

    code: str
    """permission_denied or policy_failure."""
    reason: BaseException | None = field(default=None)
    """What the authorizer raised (host-side only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallCompleted(CallEvent):
    """A handler returned and its result crossed into the program."""

    duration_seconds: float
    """How long the handler and the result's projection took."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFailed(CallEvent):
    """A call bound and was authorized but failed: the handler raised, its result did not
    fit, or a limit stopped it."""

    code: str
    """The error code the program got (`capability_failed`, `resource_limit`, ...)."""
    duration_seconds: float
    error: BaseException | None = None
    """The host exception, when the handler raised one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalEvent(CallEvent):
    """Base of the events of a call a person is asked to approve."""

    message: str
    """What the authorizer asked the person (`RequireApproval.message`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAsked(ApprovalEvent):
    """The program paused at a call until a person approves it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalGranted(ApprovalEvent):
    """A person approved the call; it is authorized again, then runs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDeclined(ApprovalEvent):
    """A person declined (or dismissed) the call; it does not run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalTimedOut(ApprovalEvent):
    """No one answered within `Limits.max_approval_wait_seconds`; the call does not run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCodeAbandoned(Event):
    """A thread was left running in host code (a handler, an authorizer) when its
    execution was answered: past its deadline, or because the execution ended without it.

    The caller was answered without waiting for it; the thread finishes on its own (a call
    whose authorizer returns then never reaches its handler).
    """

    what: str
    """"the driver" (a call of a sync `main()`, on the program's own thread), "a
    capability call" (a call of an `async def main`) or "a visibility check" (a sync
    `can_see`, its `execution_id` empty for a search or a describe)."""
    abandoned: int
    """Threads abandoned and still running in this CodeMode, across subjects, this one
    included."""
    reason: Literal["deadline", "program_ended", "cancelled"]
    """Why it was left: "deadline" (its call's budget or the execution's time passed),
    "program_ended" (the program failed, or another limit stopped it, while the call ran)
    or "cancelled" (the caller or the server cancelled the execution)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancellationIgnored(Event):
    """A coroutine of host code (an async handler, authorizer or `can_see`) still ran a
    second after it was cancelled: it swallowed its cancellation. The execution was
    answered on time without it; it counts against its subject until it ends."""

    capability: str
    """The capability whose handler, authorizer or `can_see` it is."""
    unstopped: int
    """Cancelled coroutines still running in this CodeMode, across subjects, this one
    included."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventLoopBlocked(Event):
    """A step of a coroutine of host code held an event loop of the engine's for a second
    or more (`time.sleep` in an async handler, say): the coroutines of others that had
    not started yet, and all new ones, run on a fresh loop; this one ends once it is free
    and its coroutines have ended, and counts against its subject until it is free."""

    capability: str
    """The capability whose handler, authorizer or `can_see` held the loop."""
    blocked: int
    """Loops of this CodeMode held by host code now, across subjects, this one included."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VisibilityUnanswered(Event):
    """`can_see` did not answer for these capabilities within the request's time (every
    check of one request shares one deadline): they were hidden from that request (fail
    closed), and are asked about again at the subject's next request. `execution_id` is
    empty for a search or a describe."""

    capabilities: tuple[str, ...]
    """The names of the capabilities hidden for want of an answer."""
    seconds: float
    """The time the checks had."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramShared(Event):
    """The operator shared a subject's saved program with every subject (`codemode
    programs share`): a copy of it is the host's now. `subject` is the subject that
    saved it; `execution_id` is empty (no execution shared it). It runs as each caller
    from now on, never as that subject."""

    name: str
    """The capability name, `programs.<name>`."""
    replaced: bool
    """Whether the copy took the place of a host program of that name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramDeleted(Event):
    """The operator deleted a saved program (`codemode programs delete`). `subject` is
    the subject that kept it, empty for the host's; `execution_id` is empty."""

    name: str
    """The capability name, `programs.<name>`."""


EventHandler = Callable[[Event], None]


def announce(event: Event, handler: EventHandler | None = None) -> None:
    """A change of what the host keeps (a program saved, shared or deleted) in the host
    log, as one JSON line at INFO, and given to `handler` (the audit) when there is one:
    the operator reads it where the server logs, with or without an audit log. A handler
    that fails is its own to log; what it announces happened already."""
    logging.getLogger("codemode").info("%s", json.dumps(event.to_dict(), ensure_ascii=False))
    if handler is not None:
        with contextlib.suppress(Exception):
            handler(event)


class JsonLinesSink:
    """Appends each event as one JSON line; safe under concurrency (one write per line)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def __call__(self, event: Event) -> None:
        line = json.dumps(event.to_dict(), ensure_ascii=False, default=str) + "\n"
        data = line.encode("utf-8", errors="replace")
        with self._lock:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])

    def close(self) -> None:
        """Close the file; events recorded later are an error of the sink."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


__all__ = [
    "MAX_AUDIT_INT",
    "MAX_AUDIT_TEXT",
    "ApprovalAsked",
    "ApprovalDeclined",
    "ApprovalEvent",
    "ApprovalGranted",
    "ApprovalTimedOut",
    "CallAttempted",
    "CallAuthorized",
    "CallCompleted",
    "CallDenied",
    "CallEvent",
    "CallFailed",
    "CancellationIgnored",
    "Event",
    "EventHandler",
    "EventLoopBlocked",
    "ExecutionFinished",
    "ExecutionStarted",
    "HostCodeAbandoned",
    "JsonLinesSink",
    "ProgramDeleted",
    "ProgramSaved",
    "ProgramShared",
    "VisibilityUnanswered",
    "announce",
]
