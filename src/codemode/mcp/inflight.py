"""Tool calls in flight over HTTP, so that a cancel notification can find the one it names.

A stateless server gets `notifications/cancelled` on a request of its own, which the SDK
answers and drops. Here every call runs in a cancel scope filed under its subject and
JSON-RPC id, and a notification from the same subject cancels the call it names, in
either protocol era and whichever request carried it, as long as it reaches this process.
Ids compare as the SDK's dispatcher compares them: `"7"` and `7` are one id.

A request whose client drops the connection is marked so (`watch_disconnect`), so that the
call it cancels can tell that from its other ends (`disconnected`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from starlette.types import Message, Receive, Scope

from codemode.mcp.compat import request_key
from codemode.mcp.messages import is_request_id

log = logging.getLogger("codemode")

OnDisconnect = Literal["cancel", "finish"]
"""What a dropped connection does to its call: end it (`canceled`), or let it run to its
end and drop the answer. An explicit cancel ends it either way."""

_Key = tuple[str, str | int]
_CONNECTION_KEY = "codemode.connection"


class InFlight:
    """The calls running now, by subject and request id."""

    def __init__(self, on_disconnect: OnDisconnect = "cancel") -> None:
        if on_disconnect not in ("cancel", "finish"):
            raise ValueError(f'on_disconnect must be "cancel" or "finish", not {on_disconnect!r}')
        self.on_disconnect = on_disconnect
        self._calls: dict[_Key, list[anyio.CancelScope]] = {}
        self._closed = False

    @contextlib.contextmanager
    def running(
        self,
        subject: str,
        request_id: str | int | None,
        request: Mapping[str, Any] | None = None,
    ) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one call, filed while it runs, by subject and id and by the
        connection of its `request` (its ASGI scope). With `cancel`, the connection's drop
        cancels it; a cancel notification does either way. Once the server stops, it
        comes cancelled: the call must not start."""
        scope = anyio.CancelScope(shield=self.on_disconnect == "finish")
        connection = request.get(_CONNECTION_KEY) if request is not None else None
        held = connection.calls if isinstance(connection, _Connection) else []
        if self._closed or (isinstance(connection, _Connection) and self._drops(connection)):
            scope.cancel()
        key = None if request_id is None else (subject, request_key(request_id))
        if key is not None:
            self._calls.setdefault(key, []).append(scope)
        held.append(scope)
        try:
            with scope:
                yield scope
        finally:
            held.remove(scope)
            if key is not None:
                scopes = self._calls[key]
                scopes.remove(scope)
                if not scopes:
                    del self._calls[key]

    def drop(self, request: Mapping[str, Any]) -> None:
        """The client of this request dropped its connection: with `cancel`, its calls end
        (`canceled`); with `finish`, they run on and their answers are lost."""
        connection = request.get(_CONNECTION_KEY)
        if isinstance(connection, _Connection):
            connection.dropped = True
            if self._drops(connection):
                for scope in list(connection.calls):
                    scope.cancel()

    def _drops(self, connection: _Connection) -> bool:
        return connection.dropped and self.on_disconnect == "cancel"

    def cancel(self, subject: str, request_id: object) -> bool:
        """Cancel `subject`'s call with this id; True when exactly one matched. Two calls
        under one id (two clients of one subject) are both left alone: neither is known
        to be the one meant."""
        if not is_request_id(request_id):
            return False
        scopes = self._calls.get((subject, request_key(request_id)), [])
        if len(scopes) != 1:
            if scopes:
                log.info(
                    "cancel for request %.40r of %s is ambiguous; ignored", request_id, subject
                )
            return False
        scopes[0].cancel()
        return True

    def cancel_all(self) -> None:
        """Cancel every call, and any that would start after (the server is stopping;
        shielded calls too)."""
        self._closed = True
        for scopes in self._calls.values():
            for scope in scopes:
                scope.cancel()


@dataclass(slots=True)
class _Connection:
    dropped: bool = False
    calls: list[anyio.CancelScope] = field(default_factory=list)
    """The calls its requests run now."""


def watch_disconnect(scope: Scope, receive: Receive) -> Receive:
    """`receive`, marking the request's `scope` once it brings the client's disconnect. The
    mark is one object shared by copies of the scope made after this call."""
    connection = scope.setdefault(_CONNECTION_KEY, _Connection())

    async def watched() -> Message:
        message = await receive()
        if message["type"] == "http.disconnect":
            connection.dropped = True
        return message

    return watched


def disconnected(scope: Mapping[str, Any]) -> bool:
    """Whether the client of this request has dropped its connection."""
    connection = scope.get(_CONNECTION_KEY)
    return isinstance(connection, _Connection) and connection.dropped


__all__ = ["InFlight", "OnDisconnect", "disconnected", "watch_disconnect"]
