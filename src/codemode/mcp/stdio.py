"""MCP over stdio: the SDK's transport, with every line read through `messages` first.

The SDK drops a line it cannot read without a word, and takes one with `"id": null` for
a notification. Here such a line is answered (-32700 or -32600, fixed texts), and a batch
from a client that negotiated 2025-03-26 is served one message at a time (the replies come
one per line, as every stdio client reads them).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from typing import Any, BinaryIO, cast

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError

from codemode.mcp.compat import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE
from codemode.mcp.messages import JSON, Rejected, check, check_batch, decode


async def serve_lines(server: Server[Any]) -> None:
    """Serve `server` on this process's stdin and stdout until the client closes stdin."""
    send_replies, replies = anyio.create_memory_object_stream[SessionMessage](16)
    with _wire_stdin() as wire:
        text = anyio.wrap_file(io.TextIOWrapper(wire, encoding="utf-8", errors="replace"))
        lines = CheckedLines(text, send_replies)
        async with (
            stdio_server(stdin=cast(Any, lines)) as (read, write),
            anyio.create_task_group() as group,
        ):
            group.start_soon(_forward, replies, write)
            await server.run(read, write, server.create_initialization_options())
            group.cancel_scope.cancel()


class CheckedLines:
    """The client's lines, each one JSON-RPC message; any other line is answered on
    `replies` and not passed on."""

    def __init__(
        self, lines: AsyncIterable[str], replies: MemoryObjectSendStream[SessionMessage]
    ) -> None:
        self._source = lines
        self._replies = replies
        self._version: str | None = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            try:
                decoded = decode(line)
                batch = isinstance(decoded, list)
                items = check_batch(decoded, self._version) if batch else [decoded]
            except Rejected as rejected:
                await self._replies.send(_error(rejected))
                continue
            for item in items:
                try:
                    message = self._seen(check(item))
                except Rejected as rejected:
                    await self._replies.send(_error(rejected))
                    continue
                yield json.dumps(message)

    def _seen(self, message: dict[str, JSON]) -> dict[str, JSON]:
        """Note the version an `initialize` negotiates (the SDK's rule), for batches."""
        params = message.get("params")
        if message.get("method") == "initialize" and isinstance(params, dict):
            asked = params.get("protocolVersion")
            known = asked in HANDSHAKE_VERSIONS
            self._version = asked if known and isinstance(asked, str) else LATEST_HANDSHAKE
        return message


def _error(rejected: Rejected) -> SessionMessage:
    return SessionMessage(JSONRPCError.model_validate(rejected.reply()))


async def _forward(replies: MemoryObjectReceiveStream[SessionMessage], write: Any) -> None:
    """Our replies into the SDK's writer, until the session ends and closes it."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async for reply in replies:
            await write.send(reply)


@contextlib.contextmanager
def _wire_stdin() -> Iterator[BinaryIO]:
    """The client's stdin on a private descriptor. While serving, fd 0 reads the null
    device, so host code that reads stdin cannot take the protocol's bytes."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        # Never closed: a reader thread may still block on it after the server ends.
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


__all__ = ["CheckedLines", "serve_lines"]
