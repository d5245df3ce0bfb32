"""Uvicorn settings for serving codemode: idle connections and header sizes bounded."""

from __future__ import annotations

import uvicorn
from starlette.types import ASGIApp

from codemode.limits import KIB

KEEP_ALIVE_SECONDS = 5
"""An idle keep-alive connection is closed after this long."""

SHUTDOWN_SECONDS = 2
"""How long a stopping server lets requests in flight finish; then they are cancelled (a
running execution ends `canceled`)."""

MAX_HEADER_BYTES = 16 * KIB
"""How much of an incomplete request line and headers uvicorn's h11 parser buffers before
it answers 400: a client trickling headers cannot grow the server's memory past this."""


def server_config(app: ASGIApp, *, host: str, port: int, root_path: str = "") -> uvicorn.Config:
    """The uvicorn configuration both `codemode serve` and `CodeMode.run` serve with.

    Uvicorn has no timer for a request whose headers arrive slowly; expose the server
    beyond loopback behind a proxy that has one (see docs/reference/security.md). Proxy
    headers (`X-Forwarded-For`, `-Proto`) are trusted from loopback only, uvicorn's default;
    `root_path` is the path prefix a proxy serves this under.
    """
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        root_path=root_path,
        log_level="warning",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )


__all__ = ["KEEP_ALIVE_SECONDS", "MAX_HEADER_BYTES", "SHUTDOWN_SECONDS", "server_config"]
