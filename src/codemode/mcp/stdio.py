"""The MCP server over stdio: the client's lines, checked, into the SDK's transport.

Host code runs in this process, and may read stdin; the protocol's bytes must not be what
it reads. So the SDK's transport reads the client's stdin on a private descriptor, while
fd 0 reads the null device, and every line is checked (`compat.checked_lines`) before the
SDK sees it: one that is not a message gets its fixed error, never the SDK's silence.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any, BinaryIO, cast

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError

from codemode.app import CodeMode
from codemode.mcp import compat
from codemode.mcp.compat import JSON
from codemode.mcp.server import build_server
from codemode.tasks import Tasks


async def serve_stdio(cm: CodeMode, *, subject: str = "local", tasks: bool = True) -> None:
    """Serve over stdin/stdout until the client closes the stream (with `tasks=False`,
    execute is never a task: each runs within the execution time)."""
    running = Tasks(cm) if tasks else None
    server = build_server(cm, subject=subject, tasks=running)
    send_answers, answers = anyio.create_memory_object_stream[SessionMessage](16)

    async def answer(reply: dict[str, JSON]) -> None:
        await send_answers.send(SessionMessage(JSONRPCError.model_validate(reply)))

    with private_stdin() as wire:
        # bytes that are not UTF-8 stay visible to `checked_lines`, which refuses the line
        reader = io.TextIOWrapper(wire, encoding="utf-8", errors="surrogateescape")
        text = anyio.wrap_file(reader)
        lines = compat.checked_lines(text, answer)
        async with (
            stdio_server(stdin=cast(Any, lines)) as (read, write),
            running.running() if running is not None else contextlib.nullcontext(),
            anyio.create_task_group() as group,
        ):
            group.start_soon(_forward, answers, write)
            await server.run(read, write, server.create_initialization_options())
            group.cancel_scope.cancel()


async def _forward(answers: AsyncIterator[SessionMessage], write: Any) -> None:
    """The answers to unreadable lines into the SDK's writer, until the session ends."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async for reply in answers:
            await write.send(reply)


@contextlib.contextmanager
def private_stdin() -> Iterator[BinaryIO]:
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


__all__ = ["private_stdin", "serve_stdio"]
