"""What codemode needs of the `mcp` SDK that its public API does not give, one function
per gap. Nothing else in codemode names a private SDK attribute; each function has a test
(tests/contract/test_sdk_compat.py) that fails when the SDK changes the behaviour it
relies on, or starts to offer it publicly. It imports nothing from codemode, so the
gateway, below the adapter, may use it too.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.dispatcher import coerce_request_id
from mcp_types.version import (  # not exported by `mcp_types` itself
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

HANDSHAKE_VERSIONS: tuple[str, ...] = tuple(HANDSHAKE_PROTOCOL_VERSIONS)
"""The protocol versions a client reaches with `initialize` (the 2025 era)."""
MODERN_VERSIONS: tuple[str, ...] = tuple(MODERN_PROTOCOL_VERSIONS)
"""The versions a request may name without a handshake (2026-07-28 and later)."""
KNOWN_VERSIONS: tuple[str, ...] = tuple(KNOWN_PROTOCOL_VERSIONS)
"""Every version the SDK speaks, either way."""
LATEST_HANDSHAKE = LATEST_HANDSHAKE_VERSION
"""What `initialize` settles on when the client asks for a version the SDK does not know."""


def request_key(request_id: str | int) -> str | int:
    """A request id as the SDK's dispatcher correlates it (`"7"` and `7` are one id), so
    a cancel notification finds the call it names. Upstream: the SDK's `mcp` package
    would export it (it is `mcp.shared.dispatcher.coerce_request_id`, a module of the
    SDK's internals)."""
    return coerce_request_id(request_id)


def session_ended(session: Any) -> bool:
    """Whether a `ClientSession`'s connection has ended (the SDK saw its stream close), so
    the next call opens a new session instead of failing on a dead one. Upstream: a
    public `ClientSession.closed` (today only its dispatcher's private `_closed` says it)."""
    dispatcher = getattr(session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


__all__ = [
    "HANDSHAKE_VERSIONS",
    "KNOWN_VERSIONS",
    "LATEST_HANDSHAKE",
    "MODERN_VERSIONS",
    "request_key",
    "session_ended",
]
