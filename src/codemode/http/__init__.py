"""What every HTTP route shares, whichever adapter serves it: one security layer, bearer
tokens and the loopback rule, and the uvicorn settings serving starts a server with.

The uvicorn settings are imported on first use, so that an adapter that only builds routes
loads no server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode.http.disconnect import OnDisconnect, check_on_disconnect
from codemode.http.security import (
    MAX_BODY_BYTES,
    SUBJECT_KEY,
    SecurityMiddleware,
    host_names,
    is_loopback,
    route_path,
    subject_of,
)
from codemode.http.tokens import StaticTokens, load_token_file

if TYPE_CHECKING:
    from codemode.http.server import server_config, server_options

_SERVER = frozenset({"server_config", "server_options"})


def __getattr__(name: str) -> Any:
    if name in _SERVER:
        from codemode.http import server

        return getattr(server, name)
    raise AttributeError(f"module 'codemode.http' has no attribute {name!r}")


__all__ = [
    "MAX_BODY_BYTES",
    "SUBJECT_KEY",
    "OnDisconnect",
    "SecurityMiddleware",
    "StaticTokens",
    "check_on_disconnect",
    "host_names",
    "is_loopback",
    "load_token_file",
    "route_path",
    "server_config",
    "server_options",
    "subject_of",
]
