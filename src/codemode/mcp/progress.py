"""Progress notes of a running program, sent as `notifications/progress` to the MCP client
whose request asked for them with a `progressToken`.

The runtime hands a watched run's notes to a sink from whichever thread ends a call or
answers the program, one at a time, and the sink must not block; the SDK sends a
notification only from the request's own task, awaiting its transport. Between them sits a
one-slot mailbox on the request's event loop: the sink only files the note there (a newer
one replaces one not sent yet, so a slow client gets the latest count, never a backlog), and
a sender task beside the handler sends what the slot holds. The runtime flushes its last note
before it answers, and `relayed` waits for the sender to send it before the handler
returns, so the last note reaches the client before the reply. A request without a token
costs one dictionary look-up: nothing is watched, and no task starts.

A note carries only what `codemode.runtime.progress` puts in it: the count of the program's
calls, the name it called last, the time it has run, and its own `progress()` text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.server import ServerRequestContext

from codemode.runtime import ProgressNote, RunWatch, watching

log = logging.getLogger("codemode")


def asked(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request asked for progress: its `_meta` carries a `progressToken` (a
    string or an integer; MCP sends notes only then)."""
    meta = ctx.meta
    token = None if meta is None else meta.get("progress_token")
    return isinstance(token, str | int) and not isinstance(token, bool)


@contextlib.asynccontextmanager
async def relayed(ctx: ServerRequestContext[Any]) -> AsyncIterator[None]:
    """Within: a program run on this request (`cm.execute_async`, `start_async`,
    `resume_async`) sends its notes to the request's client, the last of them before the
    block ends. Nothing changes for a request that asked for none."""
    if not asked(ctx):
        yield
        return
    relay = _Relay(ctx)
    async with anyio.create_task_group() as group:
        group.start_soon(relay.run)
        try:
            with watching(RunWatch(sink=relay.offer)):
                yield
        finally:
            relay.close()  # the sender sends what the slot holds, then ends; on a cancel, not


class _Relay:
    """The one-slot mailbox between a run's notes and the request's task that sends them."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        self._loop = asyncio.get_running_loop()
        self._latest: ProgressNote | None = None
        self._filed = asyncio.Event()
        self._closed = False

    def offer(self, note: ProgressNote) -> None:
        """The run's sink (any thread, never blocking): file `note` on the request's loop.
        The runtime's last note is filed before the program's answer, so on the loop it
        comes before the handler goes on."""
        if self._closed:
            return
        try:
            self._loop.call_soon_threadsafe(self._file, note)
        except RuntimeError:  # the loop has closed: the request is long gone
            self._closed = True

    def close(self) -> None:
        """No more notes: the sender sends the one filed, if any, and ends."""
        self._closed = True
        self._filed.set()

    def _file(self, note: ProgressNote) -> None:
        self._latest = note
        self._filed.set()

    async def run(self) -> None:
        """Send the latest filed note, again and again, until closed and sent."""
        while True:
            note, self._latest = self._latest, None
            if note is not None:
                if not await self._send(note):
                    return
                continue
            if self._closed:
                return
            self._filed.clear()
            await self._filed.wait()

    async def _send(self, note: ProgressNote) -> bool:
        """Send one note; False once the client cannot be reached (no more are tried).
        A note never fails the program."""
        try:
            await self._ctx.session.report_progress(
                _number(note.progress),
                None if note.total is None else _number(note.total),
                note.message,
            )
        except Exception:
            log.debug("a progress note could not be sent", exc_info=True)
            return False
        return True


def _number(value: float) -> float:
    """A whole number as an int (`"progress": 20` on the wire, not `20.0`)."""
    return int(value) if value.is_integer() else value


__all__ = ["asked", "relayed"]
