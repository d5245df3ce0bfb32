"""The upstream MCP servers of one `CodeMode`, on one event loop thread of their own."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import functools
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread
import mcp_types as mt

from codemode.capabilities import Capability, Catalog, Snapshot
from codemode.capabilities.naming import RESERVED_ROOTS
from codemode.errors import RegistrationError
from codemode.gateway.schema import identifier, readable
from codemode.gateway.tools import ExposeErrors, Send, ToolChanged, tool_capability
from codemode.gateway.upstream import CONNECT_SECONDS, Target, Upstream, UpstreamError
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


@dataclass(eq=False)
class _Served:
    """One upstream, and which of its tools the catalog holds (on the gateway's loop)."""

    upstream: Upstream
    options: ServerOptions
    tools: dict[str, tuple[mt.Tool, Capability]] = field(default_factory=dict)
    """Each upstream tool name's definition and capability in the newest snapshot."""
    callable: dict[str, mt.Tool] = field(default_factory=dict)
    """The definitions calls may go out for: in the newest snapshot and not withheld."""
    changes: int = 0
    """How many `tools/list_changed` notices the upstream has sent."""
    added: bool = False
    """Whether its first listing is in the catalog (a notice before that waits for it)."""
    listed: int = 0
    """How many notices the newest finished listing answers (it started after them)."""
    listing: bool = False
    """Whether a refresh is running (one at a time: the newest listing wins)."""
    round: anyio.Event | None = None
    """Set when a listing ends, for calls that wait for it (made on the loop)."""
    next_listing: float = 0.0
    """When the next listing may start, on the loop's clock."""


class Gateway:
    """Connects upstream servers and keeps their capabilities in the catalog in step.

    A call goes out only for the tool definition the catalog holds for it: once the
    upstream says its tools changed, calls wait for the new listing, and a call of a tool
    that changed meanwhile fails (`ToolChanged`) rather than run under hints that no
    longer describe it.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._served: dict[str, _Served] = {}
        self._adding = threading.Lock()
        self._portal_context = anyio.from_thread.start_blocking_portal(name="codemode-gateway")
        self._portal = self._portal_context.__enter__()
        self._supervisor, (self._group, loop) = self._portal.start_task(self._supervise)
        self.loop: asyncio.AbstractEventLoop = loop
        """The gateway's own event loop, the portal's: every upstream session lives on it."""

    async def _supervise(self, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        """Hold the task group that upstream sessions and refreshes run in."""
        async with anyio.create_task_group() as group:
            task_status.started((group, asyncio.get_running_loop()))
            await anyio.sleep_forever()

    def _spawn(self, function: Any, *args: Any) -> None:
        """Start a task that outlives its caller; whatever it raises is logged, so one
        upstream's failure never ends the group every upstream runs in."""
        self._group.start_soon(_guarded, function, *args)

    # -- registration --------------------------------------------------------------------

    def add(self, name: str, target: Target, options: ServerOptions) -> list[Capability]:
        """Connect, list the tools and register them as `name.<tool>`; RegistrationError
        when the upstream cannot be reached, its tools cannot be named or the policy
        refuses them."""
        upstream = Upstream(name, target, self._spawn, on_tools_changed=lambda: self._changed(name))
        served = _Served(upstream, options)
        with self._adding:  # the name is checked and taken at once
            if name in self._served:
                raise RegistrationError(f'MCP server "{name}": a server of that name is added')
            taken = sorted(n for n in self.catalog.names() if n.startswith(name + "."))
            if taken:
                raise RegistrationError(
                    f'MCP server "{name}": its namespace holds capabilities already '
                    f"({taken[0]}); give the server another name"
                )
            self._served[name] = served  # a change noticed while it lists is listed after
        try:
            tools = self._portal.call(upstream.tools)
            found = self._capabilities(name, served, tools, strict=True)
            capabilities = [capability for _, capability in found.values()]
            self.catalog.change((), capabilities)  # all of them, or none
        except Exception as exc:  # whatever it was, nothing of the server stays
            del self._served[name]
            self._portal.call(upstream.close)
            upstream.release()
            if isinstance(exc, UpstreamError | RegistrationError):
                raise RegistrationError(str(exc)) from None
            raise RegistrationError(
                f'MCP server "{name}": its tools cannot be read ({type(exc).__name__})'
            ) from exc
        served.tools = found
        served.callable = {tool.name: tool for tool, _ in found.values()}
        served.added = True
        if served.changes:  # it changed while it was first listed
            self._portal.call(self._start_refresh, served)
        if options.connect == "first_use":
            self._portal.call(upstream.close)
        log.info("MCP server %s: %d tools as capabilities", name, len(capabilities))
        return capabilities

    def _capabilities(
        self, name: str, served: _Served, tools: Iterable[mt.Tool], *, strict: bool
    ) -> dict[str, tuple[mt.Tool, Capability]]:
        """The chosen tools' capabilities by tool name; a tool whose definition did not
        change keeps its capability (the same object, so a running call of it goes on)."""
        options = served.options
        chosen = _chosen(name, list(tools), options, strict=strict)
        leaves: dict[str, list[str]] = {}
        for tool in chosen:
            leaves.setdefault(identifier(tool.name), []).append(tool.name)
        found: dict[str, tuple[mt.Tool, Capability]] = {}
        send = self._sender(name, options.timeout)
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
            before = served.tools.get(tool.name)
            if before is not None and before[0] == tool:
                found[tool.name] = before
                continue
            capability = readable(
                functools.partial(
                    tool_capability,
                    name,
                    tool,
                    send,
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

    def _sender(self, name: str, timeout: float | None) -> Send:
        loop = self.loop

        async def send(tool: mt.Tool, arguments: JSONObject) -> mt.CallToolResult:
            call = self._call(name, tool, arguments, timeout)
            if asyncio.get_running_loop() is loop:  # called on the gateway's loop: no hop
                return await call
            # Not the portal's `start_task_soon`, which blocks this loop's thread until the
            # gateway's loop has started the task: gathered calls would start one by one.
            # Cancelling the awaited future cancels the task, and so the request.
            try:
                future = asyncio.run_coroutine_threadsafe(call, loop)
            except RuntimeError:  # the gateway's loop is closed
                call.close()
                raise UpstreamError(f'MCP server "{name}": the gateway is closed') from None
            return await asyncio.wrap_future(future)

        return send

    async def _call(
        self, name: str, tool: mt.Tool, arguments: JSONObject, timeout: float | None
    ) -> mt.CallToolResult:
        """Send one call, once its session is open and no change the upstream announced
        waits to be listed, and only when `tool` is still the definition the catalog holds
        for its name."""
        served = self._served.get(name)
        if served is None:
            raise UpstreamError(f'MCP server "{name}": the gateway is closed')

        async def admit() -> None:
            wanted = served.changes  # later notices are not this call's to wait for
            with anyio.move_on_after(CONNECT_SECONDS):  # within the call's own timeout
                while served.listed < wanted:
                    if served.round is None:
                        served.round = anyio.Event()
                    await served.round.wait()
            if served.listed < wanted or served.callable.get(tool.name) is not tool:
                log.info(
                    "MCP server %s: a call of %s is not sent: the tool changed", name, tool.name
                )
                raise ToolChanged(f"{name}.{tool.name} changed on the upstream")

        return await served.upstream.call(tool.name, arguments, timeout, admit)

    # -- changes -------------------------------------------------------------------------

    def _changed(self, name: str) -> None:
        """The upstream says its tools changed, or a new session of it opened (on the
        gateway's loop): hold its calls until they are listed again."""
        served = self._served.get(name)
        if served is not None:
            served.changes += 1
            if served.added:
                self._start_refresh(served)

    def _start_refresh(self, served: _Served) -> None:
        if not served.listing:
            served.listing = True
            self._spawn(self._refresh, served)

    async def _refresh(self, served: _Served) -> None:
        """List the tools again until no newer notice arrived meanwhile (refreshes of one
        upstream never overlap, so the newest listing is the one that stays)."""
        failures = 0
        try:
            while served.listed < served.changes or failures:
                if failures:  # nothing else would list it again: try later, less often
                    await anyio.sleep(min(_RETRY_SECONDS * 2 ** (failures - 1), CONNECT_SECONDS))
                else:  # an upstream that says it changed on every listing lists at a pace
                    await anyio.sleep(max(0.0, served.next_listing - anyio.current_time()))
                served.next_listing = anyio.current_time() + _LISTING_GAP_SECONDS
                seen = served.changes
                failures = 0 if await self._relist(served) else failures + 1
                served.listed = max(served.listed, seen)
                if served.round is not None:
                    served.round.set()
                    served.round = None
        finally:
            served.listing = False

    async def _relist(self, served: _Served) -> bool:
        """Replace the upstream's capabilities by its new listing, once the policy accepts
        them; when it refuses, its changed, added and removed tools are withheld (it
        already serves the new ones under those names) until a listing is accepted. A
        listing that cannot be read withholds all of its tools (any may have changed):
        False then, and it is tried again."""
        name = served.upstream.name
        try:
            tools = await served.upstream.tools()
        except UpstreamError as exc:
            served.callable = {}
            ids = [capability.id for _, capability in served.tools.values()]
            await anyio.to_thread.run_sync(lambda: self.catalog.withhold(ids))
            log.warning(
                "MCP server %s: its changed tools could not be listed, so none is used: %s",
                name,
                exc,
            )
            return False
        found = await anyio.to_thread.run_sync(  # off the loop that serves every upstream
            lambda: self._capabilities(name, served, tools, strict=False)
        )
        unchanged = found.keys() == served.tools.keys() and all(
            found[n] is served.tools[n] for n in found
        )
        if unchanged and served.callable.keys() == found.keys():
            return True  # the same tools: the same snapshot (a storm of notices costs no churn)
        old = [capability.name for _, capability in served.tools.values()]
        new = [capability for _, capability in found.values()]
        kept = {n for n, pair in served.tools.items() if found.get(n) is pair}
        refusal: list[BaseException] = []

        def refused(snapshot: Snapshot, error: BaseException) -> list[str]:
            refusal.append(error)
            return [c.id for n, (_, c) in served.tools.items() if n not in kept]

        await anyio.to_thread.run_sync(lambda: self.catalog.change(old, new, refused=refused))
        if refusal:
            served.callable = {n: tool for n, tool in served.callable.items() if n in kept}
            log.warning(
                "MCP server %s: its changed tools are not used (%d withheld): %s",
                name,
                len(served.tools) - len(kept),
                refusal[0],
            )
            return True
        served.tools = found
        served.callable = {tool.name: tool for tool, _ in found.values()}
        log.info("MCP server %s: tools changed; %d capabilities now", name, len(new))
        return True

    # -- shutdown ----------------------------------------------------------------------

    def close(self) -> None:
        """End every upstream session (their processes stop) and the gateway's thread."""
        upstreams = [served.upstream for served in self._served.values()]
        self._served.clear()
        with contextlib.suppress(Exception):
            self._portal.call(_close_all, upstreams)
        for upstream in upstreams:
            upstream.release()
        self._supervisor.cancel()
        with contextlib.suppress(Exception):
            self._portal_context.__exit__(None, None, None)


_LISTING_GAP_SECONDS = 0.25
"""The least time between two listings of one upstream: notices meanwhile make one."""
_RETRY_SECONDS = 1.0
"""How long after a listing that failed it is tried again (doubling, up to 30 s)."""


async def _guarded(function: Any, *args: Any) -> None:
    try:
        await function(*args)
    except Exception:
        log.exception("upstream task %s failed", getattr(function, "__qualname__", function))


async def _close_all(upstreams: list[Upstream]) -> None:
    """Close upstreams side by side: each may take the SDK's grace period to exit."""
    async with anyio.create_task_group() as group:
        for upstream in upstreams:
            group.start_soon(upstream.close)


def namespace(name: object, kind: str = "MCP server") -> str:
    """A server's (or REST API's) name as the namespace of its capabilities: an
    identifier (`my-fs` -> `my_fs`), or RegistrationError for one programs already use (a
    builtin or standard module)."""
    if not isinstance(name, str) or not name.strip():
        raise RegistrationError(f"an {kind} name must be a non-empty string, not {name!r}")
    noun = "server" if kind == "MCP server" else "API"
    converted = identifier(name, lead=f"{noun.lower()}_")
    if converted in RESERVED_ROOTS:
        raise RegistrationError(
            f'{kind} "{name}": "{converted}" is a name programs use for a builtin or '
            f'module; name the {noun} otherwise, e.g. "{converted}_{noun.lower()}"'
        )
    return converted


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


__all__ = ["Gateway", "ServerOptions", "ToolChanged", "namespace"]
