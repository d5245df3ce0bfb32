"""The playground's live replies: a run's progress notes as NDJSON lines while it runs, then
its answer as the last line.

A page that asks for progress gets `application/x-ndjson` instead of one JSON body, so it
can show "12 calls · 3.1 s · records.lookup" (or the program's own `progress()` text)
while the program runs, rather than a spinner until its end. A note line is
`{"progress": {"progress": ..., "total": ..., "message": ...}}`, exactly what an MCP
client's `notifications/progress` carries and nothing else: the notes come from
`codemode.runtime.progress`, which builds them from the program's calls and its own text
only. The last line is byte for byte the body the JSON endpoint gives, so the page reads
one answer either way. The run is cancelled as soon as the page goes away (its Cancel
button aborts the request), as it is for a JSON reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from codemode.runtime import ProgressNote, RunWatch, watching

NDJSON = "application/x-ndjson"
HEADERS = {
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",  # nginx passes each line on as it is written
}


def line(content: dict[str, Any]) -> bytes:
    """One NDJSON line, encoded as Starlette's `JSONResponse` encodes a body."""
    text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def note_line(note: ProgressNote) -> bytes:
    """A note as the page reads it: the fields of an MCP progress notification."""
    fields = {"progress": note.progress, "total": note.total, "message": note.message}
    return line({"progress": fields})


class ProgressReply(Response):
    """Streams the notes of the run `answer` awaits, then the reply it gives (`answer`
    never raises: it turns a failure into the reply the JSON endpoint would give)."""

    media_type = NDJSON

    def __init__(self, answer: Callable[[], Awaitable[bytes]]) -> None:
        # As Starlette's StreamingResponse: no body, so no Content-Length.
        self.status_code = 200
        self.background = None
        self.init_headers(HEADERS)
        self._answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        inbox, outbox = anyio.create_memory_object_stream[bytes](math.inf)

        def sink(note: ProgressNote) -> None:
            # Called off the loop (the driver's thread, the clock's): only hands the line
            # over, in order. The answer is set after the run's last note, so it queues
            # behind it, and the page never reads a note after the answer.
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens
                loop.call_soon_threadsafe(_offer, inbox, note_line(note))

        async def run() -> None:
            with inbox:
                with watching(RunWatch(sink=sink)):
                    reply = await self._answer()
                inbox.send_nowait(reply)

        async def write() -> None:
            with contextlib.suppress(OSError):  # a server may say so when the page is gone
                async with outbox:
                    async for chunk in outbox:
                        body = {"type": "http.response.body", "body": chunk, "more_body": True}
                        await send(body)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            group.cancel_scope.cancel()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()  # the page went away: the run ends `canceled`

        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            group.start_soon(write)
            group.start_soon(run)


def _offer(inbox: MemoryObjectSendStream[bytes], chunk: bytes) -> None:
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        inbox.send_nowait(chunk)


__all__ = ["NDJSON", "ProgressReply", "line", "note_line"]
