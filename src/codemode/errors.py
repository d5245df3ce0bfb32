"""Every failure a program or a caller can see, as data with a stable code.

    CodeModeError                  str(e) is the exact model-facing text
    ├── InvalidProgramError        the program's own mistake
    ├── InvalidArgumentsError      a capability call's keywords did not bind
    ├── PermissionDeniedError      the authorizer raised Denied
    ├── PolicyFailureError         the authorizer failed
    ├── CapabilityFailedError      the handler raised
    ├── ResourceLimitError         a limit was hit (the kind is named, never the value)
    ├── InternalError              a host-side bug or a worker crash
    ├── NotFoundError              describe of an unknown or hidden name
    ├── UnauthenticatedError       no subject
    ├── ExecutionCanceledError     the caller cancelled
    └── InvalidRequestError        a tool call's own arguments are malformed

Only `detail` built from what the program owns ever reaches the model; host text stays in
the host log. `AgentError` is the one way a handler can say something to the model, and
`RegistrationError` is a host-side mistake at decoration time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from codemode.types import JSONObject

AGENT_MESSAGE_MAX_BYTES = 256
"""Longest `AgentError` message passed to the model, in UTF-8 bytes."""

PROGRAM_FILE = "<codemode>"
"""The file name every position in a submitted program carries."""

MAX_MESSAGE_BYTES = 4096
"""Longest detail (and source line) an error carries, in UTF-8 bytes, before it is cut."""

MAX_TRACEBACK_FRAMES = 32
"""Innermost program frames an error keeps."""


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


class CodeModeError(Exception):
    """Base of every failure; `str(error)` is the exact model-facing text."""

    code: ClassVar[ErrorCode]
    sentinel: ClassVar[str]

    def __init__(
        self,
        detail: str | None = None,
        *,
        where: Where | None = None,
        printed: str = "",
        traceback: tuple[Where, ...] = (),
    ) -> None:
        self.detail = None if detail is None else bounded(detail)
        self.where = where
        self.printed = printed
        """What the program printed before it failed (bounded); never host text."""
        self.traceback = (traceback or ((where,) if where is not None else ()))[
            -MAX_TRACEBACK_FRAMES:
        ]
        """Frames of the submitted program only, innermost last (never a host frame)."""
        super().__init__(str(self))

    def __str__(self) -> str:
        return self.sentinel if self.detail is None else f"{self.sentinel}: {self.detail}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def to_payload(self) -> JSONObject:
        """The one structured form that MCP, the CLI and the web page all render."""
        where = None if self.where is None else self.where.to_dict()
        return {"code": self.code.value, "message": str(self), "where": where}


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
    """A limit was exceeded; the detail names the kind of limit, never its value."""

    code = ErrorCode.RESOURCE_LIMIT
    sentinel = "resource limit exceeded"


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
    )
}
"""One class per code; a contract test keeps this, the enum and the docs in step."""


class AgentError(Exception):
    """Raised by a handler to tell the model something, e.g. that a record does not exist.

    The message is passed on as `capability failed: <message>`, with control characters
    replaced by spaces and cut to 256 bytes, so write it for the model and keep secrets out.
    """

    def __init__(self, message: str) -> None:
        if not isinstance(message, str):
            raise TypeError(f"AgentError takes a str message, not {type(message).__name__}")
        self.message = message
        super().__init__(message)


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


class RegistrationError(ValueError):
    """A capability could not be registered; raised at decoration time, never model-facing."""


__all__ = [
    "AGENT_MESSAGE_MAX_BYTES",
    "ERROR_CLASSES",
    "MAX_MESSAGE_BYTES",
    "MAX_TRACEBACK_FRAMES",
    "PROGRAM_FILE",
    "AgentError",
    "CapabilityFailedError",
    "CodeModeError",
    "ErrorCode",
    "ExecutionCanceledError",
    "InternalError",
    "InvalidArgumentsError",
    "InvalidProgramError",
    "InvalidRequestError",
    "NotFoundError",
    "PermissionDeniedError",
    "PolicyFailureError",
    "RegistrationError",
    "ResourceLimitError",
    "UnauthenticatedError",
    "Where",
    "bounded",
    "sanitize_agent_message",
]
