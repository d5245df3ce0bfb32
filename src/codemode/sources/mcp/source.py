"""An upstream MCP server as a source: its tools as capabilities, kept in step as they change.

`McpServer` is what `CodeMode.add_mcp_server` adds: it lists the tools when it opens,
offers a new listing whenever the upstream says its tools changed (or a new session of
it opened), and ends its sessions when it closes. Its sessions and calls live on the
sources' loop, like every source's I/O (`codemode.sources.Source`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import functools
import logging
import os
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as mt

from codemode.capabilities import Capability
from codemode.errors import RegistrationError
from codemode.sources import remote
from codemode.sources.bulk import building
from codemode.sources.mcp.tools import ExposeErrors, ToolChanged, expose_mode, tool_capability
from codemode.sources.mcp.upstream import CONNECT_SECONDS, Target, Upstream, UpstreamError
from codemode.sources.schema import identifier
from codemode.types import JSONObject

log = logging.getLogger("codemode.upstream")


@dataclass(frozen=True)
class ServerOptions:
    """How one upstream's tools become capabilities."""

    include: Sequence[str] | None = None
    exclude: Sequence[str] = ()
    expose_errors: ExposeErrors = "tool"
    timeout: float | None = None
    connect: Literal["start", "first_use"] = "start"


class McpServer:
    """An upstream MCP server whose tools are capabilities `name.<tool>`
    (`CodeMode.add_mcp_server` adds one).

    The server is started with `command` and `args` (stdio; `env` is added to a minimal
    environment, in the folder `cwd`) or reached at `url` (streamable HTTP, with
    `headers`). `name` and the tool names are made identifiers (`my-fs` -> `my_fs`,
    `list-files` -> `list_files`); the tools are listed when it opens. `include` and
    `exclude` are patterns of the upstream's tool names (`read_*`). A tool whose schema
    cannot be read is skipped with a warning. A failed call is `capability failed: ...`
    saying which kind of failure it was; `expose_errors` chooses which of the upstream's
    own words follow: "tool" (the default) the text of an `isError` result, "all" also a
    JSON-RPC error's message, "none" neither (True is "all", False "none"). `timeout`
    bounds one call in seconds (a `capability failed` the program can catch). The session
    stays open (`connect="first_use"` closes it until the first call), is shared by every
    execution, reopens after a crash, and ends when the `CodeMode` closes. The options are
    checked here (RegistrationError), before anything starts.

    A call goes out only for the tool definition the catalog holds for it: once the
    upstream says its tools changed, calls wait for the new listing, and a call of a tool
    that changed meanwhile fails rather than run under hints that no longer describe it.
    """

    kind = "MCP server"

    def __init__(
        self,
        name: str,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        expose_errors: Literal["tool", "none", "all"] | bool = "tool",
        timeout: float | None = None,
        connect: Literal["start", "first_use"] = "start",
    ) -> None:
        self.name = name = remote.namespace(name, self.kind)
        what = f'MCP server "{name}"'
        if (command is None) == (url is None):
            raise RegistrationError(f"{what}: give either command or url")
        if connect not in ("start", "first_use"):
            raise RegistrationError(f'{what}: connect must be "start" or "first_use"')
        remote.check_options(what, timeout, args=args, include=include, exclude=exclude)
        try:
            exposed = expose_mode(expose_errors)
        except ValueError as exc:
            raise RegistrationError(f"{what}: {exc}") from None
        remote.check_folder(what, cwd)
        self.target = Target(
            command=command,
            args=tuple(args),
            env=dict(env) if env is not None else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
            url=url,
            headers=dict(headers or {}),
        )
        self.options = ServerOptions(
            include=tuple(include) if include is not None else None,
            exclude=tuple(exclude or ()),
            expose_errors=exposed,
            timeout=timeout,
            connect=connect,
        )
        self._tasks = _Tasks()
        self._upstream = Upstream(
            name, self.target, self._tasks.spawn, on_tools_changed=self._changed
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tools: dict[str, tuple[mt.Tool, Capability]] = {}
        """Each upstream tool name's definition and capability in the newest snapshot."""
        self._callable: dict[str, mt.Tool] = {}
        """The definitions calls may go out for: in the newest snapshot and not withheld."""
        self._notices = 0
        """How many `tools/list_changed` notices (or new sessions) the upstream has had."""
        self._listed = 0
        """How many notices the newest finished listing answers (it started after them)."""
        self._noticed: anyio.Event | None = None
        """Set by a notice, for the change stream that waits for one."""
        self._round: anyio.Event | None = None
        """Set when a listing ends, for calls that wait for it."""
        self._closed = False

    def __repr__(self) -> str:
        return f"McpServer({self.name!r}, {self.target!r})"

    # -- the Source protocol ---------------------------------------------------------------

    async def open(self) -> None:
        """Connect, list the tools and build their capabilities; RegistrationError when the
        upstream cannot be reached or its tools cannot be named, or it was closed (a
        failed add closes it: a new `McpServer` is added again)."""
        if self._closed:
            raise RegistrationError(
                f'MCP server "{self.name}": it was closed; add a new McpServer instead'
            )
        self._loop = asyncio.get_running_loop()
        await self._tasks.start()
        try:
            tools = await self._upstream.tools()
            found = await anyio.to_thread.run_sync(  # off the loop every upstream shares
                lambda: self._built(tools, strict=True)
            )
        except (UpstreamError, RegistrationError) as exc:
            raise RegistrationError(str(exc)) from None
        except Exception as exc:
            raise RegistrationError(
                f'MCP server "{self.name}": its tools cannot be read ({type(exc).__name__})'
            ) from exc
        self._tools = found
        self._callable = {tool.name: tool for tool, _ in found.values()}
        if self.options.connect == "first_use":
            await self._upstream.close()
        log.info("MCP server %s: %d tools as capabilities", self.name, len(found))

    def capabilities(self) -> list[Capability]:
        """The capabilities of the tools in the newest accepted listing."""
        return [capability for _, capability in self._tools.values()]

    async def changes(self) -> AsyncGenerator[list[Capability] | None, BaseException | None]:
        """A new listing whenever the upstream says its tools changed, until none is due;
        None for one that cannot be read (any tool may have changed: all are withheld),
        then tried again, less and less often. Listings never overlap, so the newest is
        the one that stays, and a storm of notices makes one listing at a pace."""
        failures = 0
        next_listing = 0.0
        while True:
            while self._listed >= self._notices and not failures:
                self._noticed = anyio.Event()
                await self._noticed.wait()
            if failures:  # nothing else would list it again: try later, less often
                await anyio.sleep(min(_RETRY_SECONDS * 2 ** (failures - 1), CONNECT_SECONDS))
            else:  # an upstream that says it changed on every listing lists at a pace
                await anyio.sleep(max(0.0, next_listing - anyio.current_time()))
            next_listing = anyio.current_time() + _LISTING_GAP_SECONDS
            seen = self._notices
            listing = await self._relist()
            if listing is None:
                failures += 1
                yield None
            else:
                failures = 0
                if listing is not _SAME:
                    refusal = yield [capability for _, capability in listing.values()]
                    self._settle(listing, refusal)
            self._listed = max(self._listed, seen)
            if self._round is not None:
                self._round.set()
                self._round = None

    async def close(self) -> None:
        """End every session (the upstream's process stops) and every task of its own."""
        self._closed = True
        with contextlib.suppress(Exception):
            await self._upstream.close()
        self._upstream.release()
        await self._tasks.close()

    # -- listings ----------------------------------------------------------------------------

    def _built(
        self, tools: Iterable[mt.Tool], *, strict: bool
    ) -> dict[str, tuple[mt.Tool, Capability]]:
        with building():  # a listing may hold thousands of tools
            return self._capabilities(tools, strict=strict)

    def _capabilities(
        self, tools: Iterable[mt.Tool], *, strict: bool
    ) -> dict[str, tuple[mt.Tool, Capability]]:
        """The chosen tools' capabilities by tool name; a tool whose definition did not
        change keeps its capability (the same object, so a running call of it goes on)."""
        name, options = self.name, self.options
        chosen = _chosen(name, list(tools), options, strict=strict)
        leaves: dict[str, list[str]] = {}
        for tool in chosen:
            leaves.setdefault(identifier(tool.name), []).append(tool.name)
        found: dict[str, tuple[mt.Tool, Capability]] = {}
        for tool in chosen:
            leaf = identifier(tool.name)
            if len(leaves[leaf]) > 1:
                clash = " and ".join(f'"{n}"' for n in leaves[leaf])
                word = "both" if len(leaves[leaf]) == 2 else "all"
                problem = f'MCP server "{name}": tools {clash} {word} become "{name}.{leaf}"'
                if strict:
                    raise RegistrationError(problem)
                log.warning("%s; none of them is used", problem)  # the rest are read
                continue
            before = self._tools.get(tool.name)
            if before is not None and before[0] == tool:
                found[tool.name] = before
                continue
            capability = remote.readable(
                functools.partial(
                    tool_capability,
                    name,
                    tool,
                    self._send,
                    expose_errors=options.expose_errors,
                    timeout=options.timeout,
                ),
                functools.partial(
                    log.warning, "MCP server %s: tool %r skipped: %s", name, tool.name
                ),
            )
            if capability is not None:
                found[tool.name] = (tool, capability)
        return found

    async def _relist(self) -> dict[str, tuple[mt.Tool, Capability]] | None:
        """The upstream's new listing as capabilities, `_SAME` when nothing changed (the
        same snapshot: a storm of notices costs no churn), or None when it cannot be read
        (no call goes out until one is)."""
        try:
            tools = await self._upstream.tools()
        except UpstreamError as exc:
            self._callable = {}
            log.warning(
                "MCP server %s: its changed tools could not be listed, so none is used: %s",
                self.name,
                exc,
            )
            return None
        found = await anyio.to_thread.run_sync(  # off the loop that serves every upstream
            lambda: self._built(tools, strict=False)
        )
        unchanged = found.keys() == self._tools.keys() and all(
            found[n] is self._tools[n] for n in found
        )
        if unchanged and self._callable.keys() == found.keys():
            return _SAME
        return found

    def _settle(
        self, listing: dict[str, tuple[mt.Tool, Capability]], refusal: BaseException | None
    ) -> None:
        """The catalog took a listing, or its policy refused it: then the changed, added
        and removed tools are withheld (the upstream already serves the new ones under
        those names) until a listing is accepted."""
        if refusal is None:
            self._tools = listing
            self._callable = {tool.name: tool for tool, _ in listing.values()}
            log.info("MCP server %s: tools changed; %d capabilities now", self.name, len(listing))
            return
        kept = {n for n, pair in self._tools.items() if listing.get(n) is pair}
        self._callable = {n: tool for n, tool in self._callable.items() if n in kept}
        log.warning(
            "MCP server %s: its changed tools are not used (%d withheld): %s",
            self.name,
            len(self._tools) - len(kept),
            refusal,
        )

    def _changed(self) -> None:
        """The upstream says its tools changed, or a new session of it opened (on the
        sources' loop): hold its calls until they are listed again."""
        self._notices += 1
        if self._noticed is not None:
            self._noticed.set()

    # -- calls -------------------------------------------------------------------------------

    async def _send(self, tool: mt.Tool, arguments: JSONObject) -> mt.CallToolResult:
        """Send one call from any loop, its I/O on the sources' loop."""
        closed = UpstreamError(f'MCP server "{self.name}": the gateway is closed')
        if self._loop is None:
            raise closed
        try:
            return await remote.on_loop(self._loop, self._call(tool, arguments))
        except remote.SourceClosed:
            raise closed from None

    async def _call(self, tool: mt.Tool, arguments: JSONObject) -> mt.CallToolResult:
        """Send one call, once its session is open and no change the upstream announced
        waits to be listed, and only when `tool` is still the definition the catalog holds
        for its name."""
        if self._closed:
            raise UpstreamError(f'MCP server "{self.name}": the gateway is closed')

        async def admit() -> None:
            wanted = self._notices  # later notices are not this call's to wait for
            with anyio.move_on_after(CONNECT_SECONDS):  # within the call's own timeout
                while self._listed < wanted:
                    if self._round is None:
                        self._round = anyio.Event()
                    await self._round.wait()
            if self._listed < wanted or self._callable.get(tool.name) is not tool:
                log.info(
                    "MCP server %s: a call of %s is not sent: the tool changed",
                    self.name,
                    tool.name,
                )
                raise ToolChanged(f"{self.name}.{tool.name} changed on the upstream")

        return await self._upstream.call(tool.name, arguments, self.options.timeout, admit)


_SAME: dict[str, tuple[mt.Tool, Capability]] = {}
"""A listing that changes nothing (told by identity)."""
_LISTING_GAP_SECONDS = 0.25
"""The least time between two listings of one upstream: notices meanwhile make one."""
_RETRY_SECONDS = 1.0
"""How long after a listing that failed it is tried again (doubling, up to 30 s)."""


class _Tasks:
    """The task group an upstream's sessions are held in, on the sources' loop: a task
    that outlives its caller, whose failure is logged so one session's end never ends
    another's."""

    def __init__(self) -> None:
        self._group: anyio.abc.TaskGroup | None = None
        self._holder: asyncio.Task[None] | None = None

    async def start(self) -> None:
        started = anyio.Event()
        self._holder = asyncio.get_running_loop().create_task(self._hold(started))
        await started.wait()

    async def _hold(self, started: anyio.Event) -> None:
        async with anyio.create_task_group() as group:
            self._group = group
            started.set()
            await anyio.sleep_forever()

    def spawn(self, function: Any, *args: Any) -> None:
        """Start `function(*args)` in the group; RuntimeError once it has ended."""
        if self._group is None:
            raise RuntimeError("the source's tasks have ended")
        self._group.start_soon(_guarded, function, *args)

    async def close(self) -> None:
        group, self._group = self._group, None
        holder, self._holder = self._holder, None
        if holder is not None and group is not None:
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder


async def _guarded(function: Any, *args: Any) -> None:
    try:
        await function(*args)
    except Exception:
        log.exception("upstream task %s failed", getattr(function, "__qualname__", function))


def _chosen(
    name: str, tools: list[mt.Tool], options: ServerOptions, *, strict: bool
) -> list[mt.Tool]:
    """The tools `include` and `exclude` leave (fnmatch patterns of upstream tool names);
    an exact name that names no tool is a registration error (a likely typo), while a
    pattern with wildcards may be meant for tools the upstream adds later."""
    if strict:
        for pattern in [*(options.include or ()), *options.exclude]:
            if any(ch in pattern for ch in "*?["):
                continue
            if not any(tool.name == pattern for tool in tools):
                raise RegistrationError(
                    f'MCP server "{name}": no tool matches "{pattern}"; it has: '
                    + ", ".join(sorted(tool.name for tool in tools))
                )
    return [
        tool
        for tool in tools
        if (
            options.include is None
            or any(fnmatch.fnmatchcase(tool.name, p) for p in options.include)
        )
        and not any(fnmatch.fnmatchcase(tool.name, p) for p in options.exclude)
    ]


__all__ = ["McpServer", "ServerOptions"]
