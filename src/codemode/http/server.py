"""Uvicorn settings for serving codemode: idle connections and header sizes bounded, and
every response sent at once."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from codemode.limits import KIB

KEEP_ALIVE_SECONDS = 5
"""An idle keep-alive connection is closed after this long."""

SHUTDOWN_SECONDS = 2
"""How long a stopping server lets requests in flight finish; then they are cancelled (a
running execution ends `canceled`)."""

MAX_HEADER_BYTES = 16 * KIB
"""How much of an incomplete request line and headers uvicorn's h11 parser buffers before
it answers 400: a client trickling headers cannot grow the server's memory past this."""


class NoDelayProtocol(H11Protocol):
    """Uvicorn's HTTP/1.1 protocol with TCP_NODELAY on every connection.

    asyncio sets it only on connections accepted by a socket made as IPPROTO_TCP, which
    uvicorn's `--reload`, `--workers` and `--fd` listeners are not: there, a response's
    last small segment waits for the client's delayed ACK, about 40 ms a request.
    """

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        connection = transport.get_extra_info("socket")
        if connection is not None and connection.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)  # type: ignore[arg-type]


def server_options(*, host: str, port: int, root_path: str = "") -> dict[str, Any]:
    """The uvicorn settings every codemode server runs with, as `uvicorn.run` takes them
    (`serve --reload` hands them to uvicorn's reloader).

    Uvicorn has no timer for a request whose headers arrive slowly; expose the server
    beyond loopback behind a proxy that has one (see docs/reference/security.md). Proxy
    headers (`X-Forwarded-For`, `-Proto`) are trusted from loopback only, uvicorn's default;
    `root_path` is the path prefix a proxy serves this under.
    """
    return {
        "host": host,
        "port": port,
        "root_path": root_path,
        "log_level": "warning",
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
        "timeout_graceful_shutdown": SHUTDOWN_SECONDS,
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
        "http": NoDelayProtocol,
    }


def server_config(app: ASGIApp, *, host: str, port: int, root_path: str = "") -> uvicorn.Config:
    """The uvicorn configuration `codemode serve` and `codemode.serving.run` serve `app` with."""
    return uvicorn.Config(app, **server_options(host=host, port=port, root_path=root_path))


__all__ = [
    "KEEP_ALIVE_SECONDS",
    "MAX_HEADER_BYTES",
    "SHUTDOWN_SECONDS",
    "NoDelayProtocol",
    "server_config",
    "server_options",
]
