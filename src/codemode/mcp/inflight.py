"""Tool calls in flight over HTTP, so that a cancel notification can find the one it names.

A stateless server gets `notifications/cancelled` on a request of its own, which the SDK
answers and drops. Here every call runs in a cancel scope filed under its subject and
JSON-RPC id, and a notification from the same subject cancels the call it names, in
either protocol era and whichever request carried it, as long as it reaches this process.
Ids compare as the SDK's dispatcher compares them: `"7"` and `7` are one id.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Literal

import anyio
from mcp.shared.dispatcher import coerce_request_id

from codemode.mcp.messages import is_request_id

log = logging.getLogger("codemode")

OnDisconnect = Literal["cancel", "finish"]
"""What a dropped connection does to its call: end it (`canceled`), or let it run to its
end and drop the answer. An explicit cancel ends it either way."""

_Key = tuple[str, str | int]


class InFlight:
    """The calls running now, by subject and request id."""

    def __init__(self, on_disconnect: OnDisconnect = "cancel") -> None:
        if on_disconnect not in ("cancel", "finish"):
            raise ValueError(f'on_disconnect must be "cancel" or "finish", not {on_disconnect!r}')
        self.on_disconnect = on_disconnect
        self._calls: dict[_Key, list[anyio.CancelScope]] = {}
        self._closed = False

    @contextlib.contextmanager
    def running(self, subject: str, request_id: str | int | None) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one call, filed while it runs. With `finish` it is shielded,
        so a dropped connection does not reach the call; a cancel notification does. Once
        the server stops, it comes cancelled: the call must not start."""
        scope = anyio.CancelScope(shield=self.on_disconnect == "finish")
        if self._closed:
            scope.cancel()
        if request_id is None:
            with scope:
                yield scope
            return
        key = (subject, coerce_request_id(request_id))
        self._calls.setdefault(key, []).append(scope)
        try:
            with scope:
                yield scope
        finally:
            scopes = self._calls[key]
            scopes.remove(scope)
            if not scopes:
                del self._calls[key]

    def cancel(self, subject: str, request_id: object) -> bool:
        """Cancel `subject`'s call with this id; True when exactly one matched. Two calls
        under one id (two clients of one subject) are both left alone: neither is known
        to be the one meant."""
        if not is_request_id(request_id):
            return False
        scopes = self._calls.get((subject, coerce_request_id(request_id)), [])
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


__all__ = ["InFlight", "OnDisconnect"]
