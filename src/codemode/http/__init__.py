"""What every HTTP route shares, whichever adapter serves it: one security layer, bearer
tokens and the loopback rule. `codemode.http.server` holds the uvicorn settings."""

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
    "subject_of",
]
