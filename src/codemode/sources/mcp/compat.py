"""What the upstream MCP client needs of the `mcp` SDK that its public API does not give,
one function per gap.

The server side's gaps are `codemode.mcp.compat`, the adapter's; these are the client's,
used by `upstream` alone. Each function says what upstream would need for it to go, and
has a test (tests/sources/mcp/test_compat.py) against the SDK installed that fails when
the SDK changes the behaviour it answers, or starts to offer it publicly.
"""

from __future__ import annotations

from typing import Any


def session_ended(session: Any) -> bool:
    """Whether a `ClientSession`'s connection has ended (the SDK saw its stream close), so
    the next call opens a new session instead of failing on a dead one. Upstream: a
    public `ClientSession.closed` (today only its dispatcher's private `_closed` says it)."""
    dispatcher = getattr(session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


SDK_MADE = (
    "Not Found",
    "Session terminated",
    "Server returned an error response",
    "Unexpected content type: ",
    "Failed to parse JSON response: ",
    "Failed to parse SSE message: ",
    "SSE stream ended without a response",
    "Connection closed",
)
"""How the messages begin of the JSON-RPC errors the SDK's client makes up itself."""


def made_by_sdk(error: Any) -> bool:
    """Whether an `MCPError` a `ClientSession` raised is one the SDK's client made up (an
    HTTP error status, a body it could not read, a closed stream) rather than the
    server's own answer: the two arrive alike, and only the message tells. A server that
    answers with one of these words is taken for a transport failure, the safe side.
    Upstream: the SDK would mark the errors it makes (a subclass, or `data`)."""
    message = getattr(getattr(error, "error", None), "message", None)
    return isinstance(message, str) and message.startswith(SDK_MADE)


__all__ = ["SDK_MADE", "made_by_sdk", "session_ended"]
