"""One upstream MCP server: its session, kept open and shared, reopened when it dies.

Every upstream lives on the gateway's own event loop (an anyio blocking portal), so a
session outlives the executions and event loops that call through it. Calls from any
number of executions share the one session; a call that fails because the connection
is gone closes it, and the next call opens a new one. Cancelling a call (the execution
was cancelled or ran out of time) cancels its request, which sends
`notifications/cancelled` upstream.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as mt
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from codemode.errors import ExpectedError

log = logging.getLogger("codemode.upstream")

CONNECT_SECONDS = 30.0
"""How long starting an upstream and listing its tools may take."""
_STDERR_LINES_KEPT = 20
_PING_SECONDS = 2.0
"""How long a failed call waits for a ping before it takes the connection for dead."""
_NO_LIMIT = contextlib.nullcontext()
"""What a call without a timeout runs in: not a cancel scope, whose entering and leaving
cost more than the rest of `Upstream.call`'s own code (gathered calls pay it each)."""


Spawn = Callable[..., None]
"""Starts a task in the gateway's own task group: `spawn(function, *args)`."""


class UpstreamError(ExpectedError):
    """An upstream could not be reached or answered out of turn. The message is for the
    host (it may quote the upstream); a program only ever sees `capability failed`."""


class UpstreamTimeout(UpstreamError):
    """A call did not answer within the upstream's timeout (codemode's own budget, which
    the program may be told)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"the upstream did not answer within {seconds:g} s")


@dataclass(frozen=True)
class Target:
    """Where an upstream is: a command to start (stdio) or a URL (streamable HTTP), one
    of the two (`CodeMode.add_mcp_server` checks it)."""

    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # headers may hold credentials
        return f"Target(url={self.url!r})" if self.url else f"Target(command={self.command!r})"


class Upstream:
    """A named upstream server and its shared session (used on the portal's loop only)."""

    def __init__(
        self,
        name: str,
        target: Target,
        spawn: Spawn,
        *,
        on_tools_changed: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.target = target
        self._spawn = spawn
        self.on_tools_changed = on_tools_changed
        self._session: ClientSession | None = None
        self._stop: anyio.Event | None = None
        """Set to end the current session's task."""
        self._ending: list[anyio.Event] = []
        """Set when a session's task has ended; `close` waits for every one."""
        self._lock = anyio.Lock()
        self._status: int | None = None
        """The last HTTP error status the upstream answered with."""
        self._stderr: _StderrLog | None = None

    # -- session ---------------------------------------------------------------------

    async def session(self) -> ClientSession:
        """The open session, opened (again) if there is none or its connection ended."""
        session = self._session
        if session is not None and not _ended(session):
            return session  # no lock to take: nothing awaits between the check and the use
        async with self._lock:
            if self._session is not None and _ended(self._session):
                self._retire(self._session)
            if self._session is None:
                await self._open()
            assert self._session is not None
            return self._session

    async def _open(self) -> None:
        ready, stop, stopped = anyio.Event(), anyio.Event(), anyio.Event()
        opened: list[ClientSession] = []
        failure: list[Exception] = []
        self._status = None

        async def hold() -> None:
            """Open the session and keep it until `stop` (it must close in this task)."""
            try:
                async with self._connected() as session:
                    opened.append(session)
                    ready.set()
                    await stop.wait()
            except Exception as exc:  # reported to whoever waits, or logged
                failure.append(exc)
                if opened:
                    log.warning("upstream %s: the connection ended (%s)", self.name, _reason(exc))
            finally:
                ready.set()
                stopped.set()

        self._ending = [*(e for e in self._ending if not e.is_set()), stopped]
        self._spawn(hold)  # outlives the call that opened it
        try:
            with anyio.fail_after(CONNECT_SECONDS):
                await ready.wait()
        except TimeoutError:
            stop.set()
            raise UpstreamError(
                f'MCP server "{self.name}" did not answer within {CONNECT_SECONDS:g} s'
            ) from None
        if not opened:
            raise UpstreamError(self._explain(failure[0] if failure else None))
        self._session, self._stop = opened[0], stop

    def _retire(self, session: ClientSession) -> None:
        """Stop using a session (its task ends it); the next call opens a new one."""
        if self._session is session and self._stop is not None:
            self._session = None
            self._stop.set()

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[ClientSession]:
        async with contextlib.AsyncExitStack() as stack:
            if self.target.command is not None:
                if self._stderr is None:
                    self._stderr = _StderrLog(self.name)
                params = StdioServerParameters(
                    command=self.target.command,
                    args=list(self.target.args),
                    env=dict(self.target.env) if self.target.env else None,
                    cwd=self.target.cwd,
                )
                read, write = await stack.enter_async_context(
                    stdio_client(params, errlog=self._stderr.file)
                )
            else:
                assert self.target.url is not None
                client = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=dict(self.target.headers),
                        event_hooks={"response": [self._note_status]},
                    )
                )
                read, write = await stack.enter_async_context(
                    streamable_http_client(self.target.url, http_client=client)
                )
            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=self._on_message)
            )
            with anyio.fail_after(CONNECT_SECONDS):
                await session.initialize()
            yield session

    async def _note_status(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self._status = response.status_code

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification) and self.on_tools_changed:
            self.on_tools_changed()  # spawns: this handler must not wait on the session

    def _explain(self, exc: BaseException | None) -> str:
        """Why the upstream could not be reached, for the host."""
        where = self.target.url or self.target.command
        found = _leaf(exc) if exc is not None else None
        if self._status is not None:
            text = f'MCP server "{self.name}" at {where} answered HTTP {self._status}'
            if self._status in (404, 405):
                text += (
                    " (an SSE server, the transport streamable HTTP replaced, answers so: "
                    "serve it over streamable HTTP or stdio)"
                )
            return text
        if isinstance(found, httpx2.ConnectError):
            return f'MCP server "{self.name}": cannot connect to {where} ({found})'
        if isinstance(found, FileNotFoundError | PermissionError):
            return f'MCP server "{self.name}": cannot start {where!r} ({found.strerror})'
        text = f'MCP server "{self.name}" ({where}) closed the connection before it was ready'
        if found is not None:
            text += f": {_reason(found)}"
        tail = self._stderr.tail() if self._stderr else ""
        return text + (f"; its stderr ended with: {tail}" if tail else "")

    async def close(self) -> None:
        """End the session (the upstream process stops) and wait until every session has."""
        if self._session is not None:
            self._retire(self._session)
        with anyio.move_on_after(CONNECT_SECONDS):
            for stopped in self._ending:
                await stopped.wait()
        self._ending.clear()

    def release(self) -> None:
        """Stop logging the upstream's stderr (after `close`)."""
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- calls -------------------------------------------------------------------------

    async def tools(self) -> list[mt.Tool]:
        """Every tool the upstream lists (all pages); UpstreamError when it cannot."""
        session = await self.session()
        found: list[mt.Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(CONNECT_SECONDS):
                while True:
                    params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    found.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return found
        except Exception as exc:
            raise UpstreamError(
                f'MCP server "{self.name}" could not list its tools: {_reason(exc)}'
            ) from exc

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout: float | None
    ) -> mt.CallToolResult:
        """One `tools/call`, within `timeout` seconds (reopening the session included).

        UpstreamTimeout when it did not answer in time; UpstreamError when the call
        failed, after which a connection that no longer answers is closed, so the next
        call opens a new one (an upstream's own error leaves the session as it is).
        """
        session: ClientSession | None = None
        try:
            with anyio.fail_after(timeout) if timeout is not None else _NO_LIMIT:
                session = await self.session()
                return await session.call_tool(tool, arguments)
        except TimeoutError:
            raise UpstreamTimeout(timeout or 0.0) from None
        except UpstreamError:
            raise
        except Exception as exc:
            if session is not None and not _answered(exc) and not await _responds(session):
                self._retire(session)
            raise UpstreamError(f"{self.name}.{tool} failed: {_reason(exc)}") from exc


async def _responds(session: ClientSession) -> bool:
    """Whether a session's connection still answers (a ping, briefly waited for)."""
    if _ended(session):
        return False
    try:
        with anyio.fail_after(_PING_SECONDS):
            await session.send_ping()
    except Exception:
        return False
    return True


def _ended(session: ClientSession) -> bool:
    """Whether the SDK saw the session's connection end (its stream closed)."""
    dispatcher = getattr(session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


def _answered(exc: BaseException) -> bool:
    """Whether the upstream answered with an error of its own: the connection is good."""
    return isinstance(exc, MCPError) and exc.error.code != mt.CONNECTION_CLOSED


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside nested exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    leaf = _leaf(exc)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


class _StderrLog:
    """A pipe the upstream writes its stderr to, read line by line into the host log."""

    def __init__(self, name: str) -> None:
        self.name = name
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w")
        self._lines: deque[str] = deque(maxlen=_STDERR_LINES_KEPT)
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd,), name=f"codemode-upstream-{name}", daemon=True
        )
        self._thread.start()

    def _pump(self, read_fd: int) -> None:
        with os.fdopen(read_fd, encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                text = line.rstrip("\n")
                self._lines.append(text)
                log.info("upstream %s: %s", self.name, text)

    def tail(self) -> str:
        return " | ".join(list(self._lines)[-3:])

    def close(self) -> None:
        self.file.close()


__all__ = ["CONNECT_SECONDS", "Target", "Upstream", "UpstreamError", "UpstreamTimeout"]
