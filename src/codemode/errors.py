"""Every failure a program or a caller can see, as data with a stable code.

    CodeModeError                  str(e) is the exact model-facing text
    ├── InvalidProgramError        the program's own mistake
    ├── InvalidArgumentsError      a capability call's keywords did not bind
    ├── PermissionDeniedError      the authorizer raised Denied
    ├── PolicyFailureError         the authorizer failed
    ├── CapabilityFailedError      the handler raised
    ├── ResourceLimitError         a limit was hit (its kind, bound and where it tripped)
    ├── InternalError              a host-side bug or a worker crash
    ├── NotFoundError              describe of an unknown or hidden name
    ├── UnauthenticatedError       no subject
    ├── ExecutionCanceledError     the caller cancelled
    ├── InvalidRequestError        a tool call's own arguments are malformed
    ├── ApprovalDeclinedError      a person declined a call that needed approval
    ├── ApprovalUnavailableError   a call needed approval and no one could be asked
    ├── ApprovalTimedOutError      no one answered an approval within its bound
    ├── ResumeRefusedError         a paused program cannot resume here
    ├── SessionNotFoundError       no session of the caller's has the handle
    └── SessionBusyError           another program holds the session

Only `detail` built from what the program owns ever reaches the model; host text stays in
the host log. `report()` is the whole text a model is shown: the message, the failing line
with a caret, the program's traceback, the calls that completed and what it printed.
`AgentError` is the one way a handler can say something to the model, and
`RegistrationError` is a host-side mistake at decoration time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from codemode.facts import DENIALS, MAX_FIELDS_BYTES, Facts, bounded_fields, is_kind
from codemode.reports import CallRecord, progress
from codemode.types import JSONObject

AGENT_MESSAGE_MAX_BYTES = 256
"""Longest `AgentError` message passed to the model, in UTF-8 bytes."""

PROGRAM_FILE = "<codemode>"
"""The file name every position in a submitted program carries."""

MAX_MESSAGE_BYTES = 4096
"""Longest detail (and source line) an error carries, in UTF-8 bytes, before it is cut."""

MAX_TRACEBACK_FRAMES = 32
"""Innermost program frames an error keeps."""

MAX_REPORTED_PRINT_BYTES = 4096
"""Longest printed output an error's text carries (the structured form keeps it all)."""


def bounded(text: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """`text` in at most `limit` UTF-8 bytes, cut with a visible `... (N more bytes)` marker.

    The marker fits inside the limit, so bounding a bounded text changes nothing.
    """
    if len(text) * 4 <= limit:
        return text
    encoded = text.encode("utf-8", errors="surrogatepass")
    if len(encoded) <= limit:
        return text
    kept = encoded[: limit - 32].decode("utf-8", errors="ignore")
    return f"{kept}... ({len(encoded) - len(kept.encode('utf-8'))} more bytes)"


def printable(text: str) -> str:
    """`text` with each character that is not printable written as its Python escape
    (`\\n`, `\\x1b`, `\\u202e`): a name taken from a schema (a key, a field) stays one
    line of codemode's own text, which it can neither end nor reorder."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class ErrorCode(StrEnum):
    """Stable identifiers of every failure; never renamed once released."""

    INVALID_PROGRAM = "invalid_program"
    INVALID_ARGUMENTS = "invalid_arguments"
    PERMISSION_DENIED = "permission_denied"
    POLICY_FAILURE = "policy_failure"
    CAPABILITY_FAILED = "capability_failed"
    RESOURCE_LIMIT = "resource_limit"
    INTERNAL = "internal"
    NOT_FOUND = "not_found"
    UNAUTHENTICATED = "unauthenticated"
    CANCELED = "canceled"
    INVALID_REQUEST = "invalid_request"
    APPROVAL_DECLINED = "approval_declined"
    APPROVAL_UNAVAILABLE = "approval_unavailable"
    APPROVAL_TIMED_OUT = "approval_timed_out"
    RESUME_REFUSED = "resume_refused"
    SESSION_NOT_FOUND = "session_not_found"
    SESSION_BUSY = "session_busy"
    TASK_NOT_FOUND = "task_not_found"


@dataclass(frozen=True, slots=True)
class Where:
    """A span in the submitted program; every field comes from the program itself."""

    file: str
    """Always "<codemode>"."""
    line: int
    """1-based line of the failing expression."""
    column: int
    """1-based column where the failing expression starts."""
    end_line: int
    """1-based line where the failing expression ends."""
    end_column: int
    """1-based column just past the failing expression."""
    func: str | None
    """The enclosing function of the program ("main", "<module>", ...), when known."""
    source: str
    """The program's own text of `line`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", bounded(self.source))

    def to_dict(self) -> JSONObject:
        """The position as the `where` of an error payload."""
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "func": self.func,
            "source": self.source,
        }

    def render(self) -> str:
        """The position prefix of a detail, `<codemode>:LINE:COL`."""
        return f"{self.file}:{self.line}:{self.column}"

    def excerpt(self) -> str:
        """The source line and a caret under the span, as Python's tracebacks show it."""
        text = self.source.rstrip()
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        start = max(self.column - 1 - indent, 0)
        end = self.end_column - 1 - indent if self.end_line == self.line else len(stripped)
        width = max(min(end, len(stripped)) - start, 1)
        return f"    {stripped}\n    {' ' * start}{'^' * width}"


UNCAUGHT_CALL = (
    "A program cannot catch this error: except catches a call that failed, was denied or "
    "was not approved, not one whose arguments do not bind. Fix the call."
)
"""The report's word on a call whose arguments did not bind inside a `try` body."""

UNCAUGHT_CHECK = (
    "The program did not run: its calls are checked before it starts, so a program cannot "
    "catch this error. Fix the call."
)
"""The report's word on a refused call inside a `try` body, found before the program ran."""


class CodeModeError(Exception):
    """Base of every failure; `str(error)` is the exact model-facing text."""

    code: ClassVar[ErrorCode]
    sentinel: ClassVar[str]
    note: str | None = None
    """A line the report adds after the failing line, such as `UNCAUGHT_CALL`."""
    facts: Facts | None = None
    """What a failed call said of itself as data (`capability_failed` only)."""

    def __init__(
        self,
        detail: str | None = None,
        *,
        where: Where | None = None,
        printed: str = "",
        traceback: tuple[Where, ...] = (),
        calls: tuple[CallRecord, ...] = (),
    ) -> None:
        self.detail = None if detail is None else bounded(detail)
        self.where = where
        self.printed = printed
        """What the program printed before it failed (bounded); never host text."""
        self.traceback = (traceback or ((where,) if where is not None else ()))[
            -MAX_TRACEBACK_FRAMES:
        ]
        """Frames of the submitted program only, innermost last (never a host frame)."""
        self.calls = calls
        """The capability calls the program made before it failed, in the order they ended."""
        super().__init__(str(self))

    def replace(self, **changes: object) -> CodeModeError:
        """A copy with some attributes changed (`where`, `traceback`, `printed`, `calls`)."""
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        if "where" in changes and "traceback" not in changes:
            copy.traceback = (copy.where,) if copy.where is not None else ()
        copy.args = (str(copy),)
        return copy

    def __str__(self) -> str:
        return self.sentinel if self.detail is None else f"{self.sentinel}: {self.detail}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def data(self) -> JSONObject:
        """The error as `error_data(e)` gives it to a program that caught it: its code (an
        `AgentError`'s kind when it has one), a REST call's status, the declared fields."""
        facts = self.facts or Facts()
        return {
            "code": facts.kind or self.code.value,
            "status": facts.status,
            "fields": dict(facts.fields or {}),
        }

    def to_payload(self) -> JSONObject:
        """The one structured form that MCP, the CLI and the web page all render."""
        where = None if self.where is None else self.where.to_dict()
        payload: JSONObject = {"code": self.code.value, "message": str(self), "where": where}
        if self.calls:
            payload["calls"] = [call.to_dict() for call in self.calls]
        return payload

    def report(self) -> str:
        """The whole text a model is shown, complete for clients that show only text.

        The message; the failing line with a caret under the span; the program's own
        traceback when it has more than one frame; the calls that completed before the
        failure; and what the program printed (the last 4 KiB).
        """
        parts = [str(self)]
        if self.where is not None:
            parts.append(self.where.excerpt())
        if len(self.traceback) > 1:
            frames = [
                f"  {w.render()} in {w.func or '<module>'}: {w.source.strip()}"
                for w in self.traceback
            ]
            parts.append("Traceback (innermost last):\n" + "\n".join(frames))
        if self.note is not None:
            parts.append(self.note)
        line = progress(self.calls)
        if line is not None:
            parts.append(line[0].upper() + line[1:] + ".")
        if self.printed:
            parts.append("Printed before the failure:\n" + _tail(self.printed))
        return "\n".join(parts)


class InvalidProgramError(CodeModeError):
    """The program is not valid, or raised an error of its own making."""

    code = ErrorCode.INVALID_PROGRAM
    sentinel = "invalid program"


class InvalidArgumentsError(CodeModeError):
    """A capability call's keyword arguments did not bind."""

    code = ErrorCode.INVALID_ARGUMENTS
    sentinel = "invalid capability arguments"


class PermissionDeniedError(CodeModeError):
    """The authorizer denied a capability call."""

    code = ErrorCode.PERMISSION_DENIED
    sentinel = "permission denied"


class PolicyFailureError(CodeModeError):
    """The authorizer failed while deciding; the call did not run."""

    code = ErrorCode.POLICY_FAILURE
    sentinel = "authorization policy failure"


class CapabilityFailedError(CodeModeError):
    """The handler raised; only an `AgentError` message is passed on."""

    code = ErrorCode.CAPABILITY_FAILED
    sentinel = "capability failed"


class ResourceLimitError(CodeModeError):
    """A limit was exceeded: `capability calls (limit 100) at <codemode>:5:9`.

    A limit is the program's own budget, so its bound (and the amount reached, where it
    is known) is named; `opaque()` is the form for hosts that keep bounds to themselves.
    """

    code = ErrorCode.RESOURCE_LIMIT
    sentinel = "resource limit exceeded"

    def __init__(
        self,
        kind: str,
        *,
        bound: str | None = None,
        amount: str | None = None,
        where: Where | None = None,
        printed: str = "",
        traceback: tuple[Where, ...] = (),
        calls: tuple[CallRecord, ...] = (),
    ) -> None:
        self.kind = kind
        """The kind of limit, e.g. `capability calls` or `calls to records.lookup`."""
        self.bound = bound
        self.amount = amount
        super().__init__(kind, where=where, printed=printed, traceback=traceback, calls=calls)

    def __str__(self) -> str:
        text = f"{self.sentinel}: {self.kind}"
        if self.bound is not None:
            reached = "" if self.amount is None else f", reached {self.amount}"
            text += f" (limit {self.bound}{reached})"
        if self.where is not None:
            text += f" at {self.where.render()}"
        return text

    def opaque(self) -> ResourceLimitError:
        """The same error without the bound and the amount."""
        copy = self.replace(bound=None, amount=None)
        assert isinstance(copy, ResourceLimitError)
        return copy


class InternalError(CodeModeError):
    """A host-side failure: a bug, a crashed worker. Details are in the host log."""

    code = ErrorCode.INTERNAL
    sentinel = "internal failure"


class NotFoundError(CodeModeError):
    """No enabled capability has that exact name."""

    code = ErrorCode.NOT_FOUND
    sentinel = "capability not found"


class UnauthenticatedError(CodeModeError):
    """The caller has no subject."""

    code = ErrorCode.UNAUTHENTICATED
    sentinel = "unauthenticated"


class ExecutionCanceledError(CodeModeError):
    """The caller cancelled the execution."""

    code = ErrorCode.CANCELED
    sentinel = "execution canceled"


class InvalidRequestError(CodeModeError):
    """A tool call's own arguments are malformed (missing, mistyped or unknown)."""

    code = ErrorCode.INVALID_REQUEST
    sentinel = "invalid request"


class ApprovalDeclinedError(CodeModeError):
    """A person declined (or dismissed) a call that the authorizer sent for approval."""

    code = ErrorCode.APPROVAL_DECLINED
    sentinel = "approval declined"

    def __init__(
        self, detail: str | None = "a person declined this call; do not retry it", **kwargs: Any
    ) -> None:
        super().__init__(detail, **kwargs)


class ApprovalUnavailableError(CodeModeError):
    """A call needed a person's approval and the client cannot ask one (fail closed)."""

    code = ErrorCode.APPROVAL_UNAVAILABLE
    sentinel = "approval unavailable"

    def __init__(
        self,
        detail: str
        | None = "this call needs a person's approval, and no one can be asked for it here",
        **kwargs: Any,
    ) -> None:
        super().__init__(detail, **kwargs)


class ApprovalTimedOutError(CodeModeError):
    """No one answered an approval within `Limits.max_approval_wait_seconds`."""

    code = ErrorCode.APPROVAL_TIMED_OUT
    sentinel = "approval timed out"


class ResumeRefusedError(CodeModeError):
    """A paused program cannot resume here: another version, another catalog, or a state
    that resumed once already. Nothing of it ran."""

    code = ErrorCode.RESUME_REFUSED
    sentinel = "resume refused"


class SessionNotFoundError(CodeModeError):
    """No session of the caller's has the handle: made up, expired, evicted or another
    caller's all read the same, so the answer tells nothing of whose handles exist."""

    code = ErrorCode.SESSION_NOT_FOUND
    sentinel = "session not found"

    def __init__(
        self,
        detail: str | None = (
            "no session of yours has this handle (it may have expired); "
            'start one with session "new"'
        ),
        **kwargs: Any,
    ) -> None:
        super().__init__(detail, **kwargs)


class SessionBusyError(CodeModeError):
    """Another program runs in the session, or waits there for a person's approval: one
    program at a time, so no two write the same state."""

    code = ErrorCode.SESSION_BUSY
    sentinel = "session busy"

    def __init__(
        self,
        detail: str | None = (
            "another program is running (or waiting for an approval) in this session; "
            "send this one when it has ended"
        ),
        **kwargs: Any,
    ) -> None:
        super().__init__(detail, **kwargs)


class TaskNotFoundError(CodeModeError):
    """No task of the caller's has the id: made up, expired, evicted or another caller's
    all read the same, so the answer tells nothing of whose tasks exist."""

    code = ErrorCode.TASK_NOT_FOUND
    sentinel = "task not found"


ERROR_CLASSES: dict[ErrorCode, type[CodeModeError]] = {
    cls.code: cls
    for cls in (
        InvalidProgramError,
        InvalidArgumentsError,
        PermissionDeniedError,
        PolicyFailureError,
        CapabilityFailedError,
        ResourceLimitError,
        InternalError,
        NotFoundError,
        UnauthenticatedError,
        ExecutionCanceledError,
        InvalidRequestError,
        ApprovalDeclinedError,
        ApprovalUnavailableError,
        ApprovalTimedOutError,
        ResumeRefusedError,
        SessionNotFoundError,
        SessionBusyError,
        TaskNotFoundError,
    )
}
"""One class per code; a contract test keeps this, the enum and the docs in step."""


class AgentError(Exception):
    """Raised by a handler to tell the model something, e.g. that a record does not exist.

    The message is passed on as `capability failed: <message>`, with control characters
    replaced by spaces and cut to 256 bytes, so write it for the model and keep secrets out.
    A `kind` (`AgentError("no such ticket", kind="not_found")`) is the code a program that
    catches it reads with `error_data(e)`, so it can tell failures apart without parsing.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        status: int | None = None,
        fields: JSONObject | None = None,
    ) -> None:
        if not isinstance(message, str):
            raise TypeError(f"AgentError takes a str message, not {type(message).__name__}")
        if kind is not None and not is_kind(kind):
            raise ValueError(
                "an AgentError's kind is a snake_case word such as not_found, not a code of "
                f"a call codemode refused ({', '.join(DENIALS)})"
            )
        self.message = message
        self.facts = Facts(
            kind,
            status if isinstance(status, int) and not isinstance(status, bool) else None,
            None if fields is None else bounded_fields(fields),
        )
        """What `error_data(e)` gives the program besides the code: `kind` replaces
        `capability_failed` as its code; `status` and `fields` are a REST call's (its
        HTTP status and the fields its error body declares, at most 4 KiB)."""
        super().__init__(message)


def capability_failed(exc: AgentError) -> CapabilityFailedError:
    """The error an `AgentError` raises in the program: its sanitized message, its facts."""
    error = CapabilityFailedError(sanitize_agent_message(exc.message))
    error.facts = exc.facts
    return error


class ExpectedError(Exception):
    """Raised by a handler for a failure it expects, whose message is for the host only
    (an upstream MCP tool's error, an unreachable service): the model sees `capability
    failed`, and the host log one warning line with the message, without a traceback."""


def sanitize_agent_message(message: str) -> str | None:
    """The model-safe form of an `AgentError` message, or None when nothing is left."""
    text = "".join(" " if not ch.isprintable() else ch for ch in message[:1024]).strip()
    if not text:
        return None
    encoded = text.encode("utf-8")
    if len(encoded) <= AGENT_MESSAGE_MAX_BYTES:
        return text
    cut = encoded[: AGENT_MESSAGE_MAX_BYTES - 3].decode("utf-8", errors="ignore")
    return cut + "..."


def _tail(text: str) -> str:
    """The last `MAX_REPORTED_PRINT_BYTES` of printed output, marked when cut."""
    encoded = text.encode("utf-8", errors="surrogatepass")
    if len(encoded) <= MAX_REPORTED_PRINT_BYTES:
        return text.rstrip("\n")
    kept = encoded[-MAX_REPORTED_PRINT_BYTES:].decode("utf-8", errors="ignore")
    return f"({len(encoded) - len(kept.encode('utf-8'))} earlier bytes not shown)\n" + kept.rstrip(
        "\n"
    )


class RegistrationError(ValueError):
    """A capability could not be registered; raised at decoration time, never model-facing."""


__all__ = [
    "AGENT_MESSAGE_MAX_BYTES",
    "DENIALS",
    "ERROR_CLASSES",
    "MAX_FIELDS_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_TRACEBACK_FRAMES",
    "PROGRAM_FILE",
    "UNCAUGHT_CALL",
    "UNCAUGHT_CHECK",
    "AgentError",
    "ApprovalDeclinedError",
    "ApprovalTimedOutError",
    "ApprovalUnavailableError",
    "CallRecord",
    "CapabilityFailedError",
    "CodeModeError",
    "ErrorCode",
    "ExecutionCanceledError",
    "ExpectedError",
    "Facts",
    "InternalError",
    "InvalidArgumentsError",
    "InvalidProgramError",
    "InvalidRequestError",
    "NotFoundError",
    "PermissionDeniedError",
    "PolicyFailureError",
    "RegistrationError",
    "ResourceLimitError",
    "ResumeRefusedError",
    "SessionBusyError",
    "SessionNotFoundError",
    "TaskNotFoundError",
    "UnauthenticatedError",
    "Where",
    "bounded",
    "bounded_fields",
    "capability_failed",
    "is_kind",
    "printable",
    "progress",
    "sanitize_agent_message",
]
