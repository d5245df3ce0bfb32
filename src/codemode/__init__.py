"""codemode: let an AI agent drive a host's API by writing one small sandboxed program.

A host registers plain Python functions as capabilities on a `CodeMode`; the agent finds
them with `search`/`describe` and submits a program whose `main()` calls them. Every call
is authorized, every limit enforced, and every failure is a `CodeModeError` whose text is
safe to show the model.
"""

from importlib.metadata import PackageNotFoundError, version

from codemode.app import CodeMode
from codemode.capabilities import (
    Capability,
    CapabilityInfo,
    Catalog,
    Observed,
    Parameter,
    ParameterInfo,
    ResultInfo,
    SearchHit,
    SearchResult,
    Shape,
    Snapshot,
    View,
)
from codemode.context import CallContext
from codemode.errors import (
    AgentError,
    ApprovalDeclinedError,
    ApprovalTimedOutError,
    ApprovalUnavailableError,
    CapabilityFailedError,
    CodeModeError,
    ErrorCode,
    ExecutionCanceledError,
    InternalError,
    InvalidArgumentsError,
    InvalidProgramError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    PolicyFailureError,
    RegistrationError,
    ResourceLimitError,
    ResumeRefusedError,
    SessionBusyError,
    SessionNotFoundError,
    UnauthenticatedError,
    Where,
)
from codemode.limits import Limits
from codemode.programs import SaveAs, Saved
from codemode.runtime import ExecutionResult, KeptState, Usage

try:
    __version__ = version("codemode")
    """The installed distribution's version (pyproject.toml says it once)."""
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"

__all__ = [
    "AgentError",
    "ApprovalDeclinedError",
    "ApprovalTimedOutError",
    "ApprovalUnavailableError",
    "CallContext",
    "Capability",
    "CapabilityFailedError",
    "CapabilityInfo",
    "Catalog",
    "CodeMode",
    "CodeModeError",
    "ErrorCode",
    "ExecutionCanceledError",
    "ExecutionResult",
    "InternalError",
    "InvalidArgumentsError",
    "InvalidProgramError",
    "InvalidRequestError",
    "KeptState",
    "Limits",
    "NotFoundError",
    "Observed",
    "Parameter",
    "ParameterInfo",
    "PermissionDeniedError",
    "PolicyFailureError",
    "RegistrationError",
    "ResourceLimitError",
    "ResultInfo",
    "ResumeRefusedError",
    "SaveAs",
    "Saved",
    "SearchHit",
    "SearchResult",
    "SessionBusyError",
    "SessionNotFoundError",
    "Shape",
    "Snapshot",
    "UnauthenticatedError",
    "Usage",
    "View",
    "Where",
]
