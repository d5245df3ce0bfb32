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
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

log = logging.getLogger("codemode.upstream")

CONNECT_SECONDS = 30.0
"""How long starting an upstream and listing its tools may take."""
_STDERR_LINES_KEPT = 20


Spawn = Callable[..., None]
"""Starts a task in the gateway's own task group: `spawn(function, *args)`."""


class UpstreamError(Exception):
    """An upstream could not be reached or answered out of turn. The message is for the
    host (it may quote the upstream); a program only ever sees `capability failed`."""


@dataclass(frozen=True)
class Target:
    """Where an upstream is: a command to start (stdio) or a URL (streamable HTTP)."""

    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")

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
        self._stopped: anyio.Event | None = None
        self._lock = anyio.Lock()
        self._status: int | None = None
        """The last HTTP error status the upstream answered with."""
        self._stderr: _StderrLog | None = None

    # -- session ---------------------------------------------------------------------

    async def session(self) -> ClientSession:
        """The open session, opened (again) if there is none."""
        async with self._lock:
            if self._session is None:
                await self._open()
            assert self._session is not None
            return self._session

    async def _open(self) -> None:
        ready = anyio.Event()
        failure: list[BaseException] = []
        self._stop, self._stopped = anyio.Event(), anyio.Event()
        self._status = None

        async def hold(stop: anyio.Event, stopped: anyio.Event) -> None:
            try:
                async with self._connected() as session:
                    self._session = session
                    ready.set()
                    await stop.wait()
            except BaseException as exc:  # reported to whoever waits, or logged below
                failure.append(exc)
                if ready.is_set():
                    log.warning("upstream %s: the connection ended (%s)", self.name, _reason(exc))
            finally:
                self._session = None
                ready.set()
                stopped.set()

        self._spawn(hold, self._stop, self._stopped)  # outlives the call that opened it
        with anyio.fail_after(CONNECT_SECONDS):
            await ready.wait()
        if self._session is None:
            raise UpstreamError(self._explain(failure[0] if failure else None)) from None

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
        if self._status is not None:
            return f'MCP server "{self.name}" at {where} answered HTTP {self._status}'
        found = _leaf(exc) if exc is not None else None
        if isinstance(found, FileNotFoundError | PermissionError):
            return f'MCP server "{self.name}": cannot start {where!r} ({found.strerror})'
        if isinstance(found, TimeoutError):
            return f'MCP server "{self.name}" did not answer within {CONNECT_SECONDS:g} s'
        text = f'MCP server "{self.name}" ({where}) closed the connection before it was ready'
        if found is not None:
            text += f": {_reason(found)}"
        tail = self._stderr.tail() if self._stderr else ""
        return text + (f"; its stderr ended with: {tail}" if tail else "")

    async def close(self) -> None:
        """End the session (the upstream process stops) and wait until it has."""
        if self._stop is not None and self._stopped is not None:
            self._stop.set()
            with anyio.move_on_after(CONNECT_SECONDS):
                await self._stopped.wait()

    def release(self) -> None:
        """Stop logging the upstream's stderr (after `close`)."""
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- calls -------------------------------------------------------------------------

    async def tools(self) -> list[mt.Tool]:
        """Every tool the upstream lists (all pages)."""
        session = await self.session()
        found: list[mt.Tool] = []
        cursor: str | None = None
        with anyio.fail_after(CONNECT_SECONDS):
            while True:
                params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                found.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return found

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout: float | None
    ) -> mt.CallToolResult:
        """One `tools/call`; UpstreamError when the connection failed (it is reopened on
        the next call) or the upstream did not answer within `timeout` seconds."""
        session = await self.session()
        try:
            with anyio.fail_after(timeout):
                return await session.call_tool(tool, arguments)
        except TimeoutError:
            raise UpstreamError(f"{self.name}.{tool} did not answer within {timeout:g} s") from None
        except Exception as exc:
            if self._session is session and not _answered(exc):
                await self._drop(session)
            raise UpstreamError(f"{self.name}.{tool} failed: {_reason(exc)}") from exc

    async def _drop(self, session: ClientSession) -> None:
        """Close a session that failed, so the next call opens a new one."""
        async with self._lock:
            if self._session is session and self._stop is not None:
                self._session = None
                self._stop.set()


def _answered(exc: BaseException) -> bool:
    """Whether the upstream answered (a JSON-RPC error): the connection is still good."""
    from mcp import MCPError

    return isinstance(exc, MCPError) and exc.error.code not in (mt.CONNECTION_CLOSED,)


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


__all__ = ["CONNECT_SECONDS", "Target", "Upstream", "UpstreamError"]
