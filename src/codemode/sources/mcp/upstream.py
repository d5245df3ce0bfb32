"""One upstream MCP server: its session, kept open and shared, reopened when it dies.

Every upstream lives on the sources' own event loop (an anyio blocking portal), so a
session outlives the executions and event loops that call through it. A session is
opened and held by a task of the upstream's own, in its source's task group, never by
the call that needed it: there is at most one start in flight, every call that needs a
session waits for that one, and a call that gives up waiting (it timed out or was
cancelled) leaves the start to become the shared session. `close` ends every session,
a start in flight included, so no process outlives it.

Calls from any number of executions share the one session, and one call's failure never
ends another call in flight. The rule: a call that fails without an answer from the
upstream retires the session if its connection is gone - the SDK saw it end, or a ping
got no answer within 2 s (an answer of any kind, even an error, keeps it). A retired
session is shared no more, so the next call opens a new one, but it ends only once no
call is in flight on it: the calls in flight still get their own answers or time out.
(Had the connection ended, the SDK has already ended them.) Cancelling a call (the
execution was cancelled or ran out of time) cancels its request, which sends
`notifications/cancelled` upstream.

A stdio upstream's answer the SDK cannot parse (too deeply nested) is mended on its way
in (`codemode.sources.mcp.unreadable`), so no request waits for an answer that was dropped.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeGuard

import anyio
import httpx2
import mcp_types as mt
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from codemode.errors import ExpectedError
from codemode.sources.mcp.compat import made_by_sdk, session_ended
from codemode.sources.mcp.unreadable import Mended

log = logging.getLogger("codemode.upstream")

CONNECT_SECONDS = 30.0
"""How long starting an upstream and listing its tools may take."""
_STDERR_LINES_KEPT = 20
_STDERR_LINE_CHARS = 8192
MAX_LIST_PAGES = 100
"""Pages of one listing (`nextCursor` after `nextCursor`) read before it is refused."""
MAX_TOOLS = 10_000
"""Tools one upstream may list."""
_PING_SECONDS = 2.0
"""How long a failed call waits for a ping before it takes the connection for dead."""
_NO_LIMIT = contextlib.nullcontext()
"""What a call without a timeout runs in: not a cancel scope, whose entering and leaving
cost more than the rest of `Upstream.call`'s own code (gathered calls pay it each)."""


Spawn = Callable[..., None]
"""Starts a task in its source's own task group: `spawn(function, *args)`."""


class UpstreamError(ExpectedError):
    """An upstream could not be reached or answered out of turn. The message is for the
    host (it may quote the upstream); a program only ever sees `capability failed`."""


class UpstreamRefused(UpstreamError):
    """The upstream answered a call with a JSON-RPC error; `said` is its message, the
    upstream's own words (for the model only with `expose_errors="all"`)."""

    def __init__(self, message: str, said: str) -> None:
        super().__init__(message)
        self.said = said


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


@dataclass(eq=False)
class _Held:
    """One session's task: its start, then the session it holds until it is retired."""

    scope: anyio.CancelScope
    """The task's: its deadline bounds the start, cancelling it ends the session."""
    ready: anyio.Event = field(default_factory=anyio.Event)
    """Set once the session is open or the start failed."""
    ended: anyio.Event = field(default_factory=anyio.Event)
    """Set when the task has ended: the session is closed, its process gone."""
    session: ClientSession | None = None
    failure: str = ""
    """Why the start failed, for the host."""
    calls: int = 0
    """Requests in flight on the session: a retired session ends when none is left."""
    retired: bool = False


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
        self._held: _Held | None = None
        """The shared session, or the start in flight that becomes it."""
        self._tasks: list[_Held] = []
        """Every session task that may not have ended yet; `close` ends them all."""
        self._opened = 0
        """How many sessions have opened: each after the first is told as a change."""
        self._status: int | None = None
        """The last HTTP error status the upstream answered with."""
        self._stderr: StderrLog | None = None

    # -- session ---------------------------------------------------------------------

    async def session(self) -> ClientSession:
        """The open session, opened (again) if there is none or its connection ended."""
        return (await self._ready())[1]

    async def _ready(self) -> tuple[_Held, ClientSession]:
        held = self._held
        if held is not None and held.session is not None:
            if not session_ended(held.session):
                return held, held.session  # nothing awaits between the check and the use
            self._retire(held)
            held = None
        if held is None:
            held = self._start()
        await held.ready.wait()  # a call that gives up here leaves the start to go on
        if held.session is None or held.retired:
            raise UpstreamError(held.failure or f'MCP server "{self.name}" was closed')
        return held, held.session

    def _start(self) -> _Held:
        """Start a session in a task of the upstream's own, which no caller can abandon."""
        held = _Held(anyio.CancelScope(deadline=anyio.current_time() + CONNECT_SECONDS))
        self._held = held
        self._tasks = [*(task for task in self._tasks if not task.ended.is_set()), held]
        self._status = None
        try:
            self._spawn(self._hold, held)
        except RuntimeError:  # its source's task group has ended (it is closed)
            self._held = None
            held.failure = f'MCP server "{self.name}": the gateway is closed'
            held.ready.set()
            held.ended.set()
        return held

    async def _hold(self, held: _Held) -> None:
        """Open the session and keep it until it is retired (it must close in this task)."""
        failure: Exception | None = None
        try:
            with held.scope:
                async with self._connected() as session:
                    held.session = session
                    held.scope.deadline = math.inf  # the deadline was the start's
                    self._opened += 1
                    if self._opened > 1 and self.on_tools_changed is not None:
                        self.on_tools_changed()  # a new process may serve other tools
                    held.ready.set()
                    await anyio.sleep_forever()
        except Exception as exc:  # reported to whoever waits, or logged
            failure = exc
        finally:
            if self._held is held:
                self._held = None
            if not held.ready.is_set():
                held.failure = self._failed_start(held, failure)
                held.ready.set()
            elif failure is not None:
                log.warning("upstream %s: the connection ended (%s)", self.name, _reason(failure))
            held.ended.set()

    def _failed_start(self, held: _Held, failure: Exception | None) -> str:
        if held.retired:
            return f'MCP server "{self.name}" was closed while it started'
        if held.scope.cancelled_caught:
            return f'MCP server "{self.name}" did not answer within {CONNECT_SECONDS:g} s'
        return self._explain(failure)

    def _retire(self, held: _Held) -> None:
        """Share a session no more (the next call opens a new one) and end it once no
        call is in flight on it, so that no call ends another."""
        held.retired = True
        if self._held is held:
            self._held = None
        if held.calls == 0 or held.session is None or session_ended(held.session):
            held.scope.cancel()

    def _done(self, held: _Held) -> None:
        """A request on the session ended: a retired session ends with its last one."""
        held.calls -= 1
        if held.retired and held.calls == 0:
            held.scope.cancel()

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[ClientSession]:
        async with contextlib.AsyncExitStack() as stack:
            if self.target.command is not None:
                if self._stderr is None:
                    self._stderr = StderrLog(self.name)
                params = StdioServerParameters(
                    command=self.target.command,
                    args=list(self.target.args),
                    env=dict(self.target.env) if self.target.env else None,
                    cwd=self.target.cwd,
                )
                read, write = await stack.enter_async_context(
                    stdio_client(params, errlog=self._stderr.file)
                )
                read = Mended(read, self.name)
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
                _Session(read, write, message_handler=self._on_message)
            )
            await session.initialize()  # within the start's deadline
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
        """End every session and any start in flight (their processes stop), and wait
        until they have; the next call opens a new session."""
        self._held = None
        for held in self._tasks:
            held.retired = True
            held.scope.cancel()
        with anyio.move_on_after(CONNECT_SECONDS):
            for held in self._tasks:
                await held.ended.wait()
        self._tasks = [held for held in self._tasks if not held.ended.is_set()]

    def release(self) -> None:
        """Stop logging the upstream's stderr (after `close`)."""
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- calls -------------------------------------------------------------------------

    async def tools(self) -> list[mt.Tool]:
        """Every tool the upstream lists (all pages); UpstreamError when it cannot."""
        held, session = await self._ready()
        held.calls += 1
        found: list[mt.Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(CONNECT_SECONDS):
                for _ in range(MAX_LIST_PAGES):
                    params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    found.extend(page.tools)
                    if len(found) > MAX_TOOLS:
                        raise UpstreamError(f"it lists more than {MAX_TOOLS} tools")
                    cursor = page.next_cursor
                    if not cursor:
                        return found
                raise UpstreamError(f"its listing goes on past {MAX_LIST_PAGES} pages")
        except Exception as exc:
            raise UpstreamError(
                f'MCP server "{self.name}" could not list its tools: {_reason(exc)}'
            ) from exc
        finally:
            self._done(held)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float | None,
        admit: Callable[[], Awaitable[None]] | None = None,
    ) -> mt.CallToolResult:
        """One `tools/call`, within `timeout` seconds (waiting for a session included).

        `admit`, awaited once the session is open and before the request goes out, may
        refuse the call by raising an UpstreamError. UpstreamTimeout when it did not
        answer in time; UpstreamError when the call failed, after which a connection
        that no longer answers is retired, so the next call opens a new one (an
        upstream's own error leaves the session as it is).
        """
        held: _Held | None = None
        try:
            with anyio.fail_after(timeout) if timeout is not None else _NO_LIMIT:
                held, session = await self._ready()
                if admit is not None:
                    await admit()
                held.calls += 1
                try:
                    return await session.call_tool(tool, arguments)
                finally:
                    self._done(held)
        except TimeoutError:
            raise UpstreamTimeout(timeout or 0.0) from None
        except UpstreamError:
            raise
        except Exception as exc:
            failed = _reason(exc)  # the host log line names the capability
            if _answered(exc):
                raise UpstreamRefused(failed, exc.error.message) from exc
            alive = held is not None and await _responds(session)
            if isinstance(exc, MCPError) and alive and not made_by_sdk(exc):  # -32000 too
                raise UpstreamRefused(failed, exc.error.message) from exc
            if held is not None and not alive:
                self._retire(held)
            raise UpstreamError(failed) from exc


class _Session(ClientSession):
    """A session that leaves the check of a result's structured content to its caller.

    The SDK's `call_tool` checks it against the tool's `outputSchema` with `jsonschema`
    as it is, on the loop every upstream shares: with Python's `re`, whose backtracking
    holds the GIL, so one hostile pattern stops every thread of the process. The
    capability checks it instead, bounded and on a worker thread
    (`codemode.sources.schema`)."""

    async def validate_tool_result(self, name: str, result: mt.CallToolResult) -> None:
        return None


async def _responds(session: ClientSession) -> bool:
    """Whether a session's connection still answers: a ping answered within 2 s, with
    anything (an error or an answer the SDK cannot read proves the connection too)."""
    if session_ended(session):
        return False
    try:
        with anyio.fail_after(_PING_SECONDS):
            await session.send_ping()
    except TimeoutError:
        return False
    except MCPError as exc:  # the server's own error proves it; one the SDK made does not
        return exc.error.code != mt.CONNECTION_CLOSED and not made_by_sdk(exc)
    except Exception:
        return True
    return True


def _answered(exc: BaseException) -> TypeGuard[MCPError]:
    """Whether the upstream answered with an error of its own: the connection is good.
    -32000 is also what the SDK says of a closed connection (only a ping tells), and the
    SDK's HTTP client makes up errors of other codes (`made_by_sdk`)."""
    return (
        isinstance(exc, MCPError)
        and exc.error.code != mt.CONNECTION_CLOSED
        and not made_by_sdk(exc)
    )


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside nested exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    leaf = _leaf(exc)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


class StderrLog:
    """A pipe the upstream writes its stderr to, read line by line into the host log."""

    def __init__(self, name: str) -> None:
        self.name = name
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w")
        self._lines: deque[str] = deque(maxlen=_STDERR_LINES_KEPT)
        self.thread = threading.Thread(
            target=self._pump, args=(read_fd,), name=f"codemode-upstream-{name}", daemon=True
        )
        self.thread.start()

    def _pump(self, read_fd: int) -> None:
        """Log each line, cut at `_STDERR_LINE_CHARS`: the rest of a longer one (an
        upstream that writes without line breaks) is read and dropped, never held."""
        cut = False
        with os.fdopen(read_fd, encoding="utf-8", errors="replace") as pipe:
            for chunk in iter(lambda: pipe.readline(_STDERR_LINE_CHARS), ""):
                ends = chunk.endswith("\n")
                if not cut:
                    text = chunk.rstrip("\n") + ("" if ends else " ...")
                    self._lines.append(text)
                    log.info("upstream %s: %s", self.name, text)
                cut = not ends

    def tail(self) -> str:
        return " | ".join(list(self._lines)[-3:])

    def close(self) -> None:
        self.file.close()


__all__ = [
    "CONNECT_SECONDS",
    "Target",
    "Upstream",
    "UpstreamError",
    "UpstreamRefused",
    "UpstreamTimeout",
]
