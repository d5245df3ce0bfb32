"""The upstream MCP servers of one `CodeMode`, on one event loop thread of their own."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.from_thread
import mcp_types as mt

from codemode.capabilities import Capability, Catalog
from codemode.capabilities import typehints as t
from codemode.capabilities.naming import RESERVED_ROOTS
from codemode.errors import RegistrationError
from codemode.gateway.schema import SchemaError, identifier
from codemode.gateway.tools import tool_capability
from codemode.gateway.upstream import Target, Upstream, UpstreamError

log = logging.getLogger("codemode.upstream")


@dataclass(frozen=True)
class ServerOptions:
    """How one upstream's tools become capabilities."""

    include: Sequence[str] | None = None
    exclude: Sequence[str] = ()
    expose_errors: bool = False
    timeout: float | None = None
    connect: Literal["start", "first_use"] = "start"


class Gateway:
    """Connects upstream servers and keeps their capabilities in the catalog in step."""

    def __init__(
        self, catalog: Catalog, on_change: Callable[[Iterable[Capability]], None] | None = None
    ) -> None:
        self.catalog = catalog
        self.on_change = on_change
        """Sees every capability a refresh would leave, and refuses them by raising."""
        self._upstreams: dict[str, tuple[Upstream, ServerOptions]] = {}
        self._names: dict[str, list[str]] = {}
        """The capability names each upstream's tools have now."""
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
        when the upstream cannot be reached or its tools cannot be named."""
        if name in self._upstreams:
            raise RegistrationError(f'MCP server "{name}": a server of that name is added')
        taken = sorted(n for n in self.catalog.names() if n.startswith(name + "."))
        if taken:
            raise RegistrationError(
                f'MCP server "{name}": its namespace holds capabilities already ({taken[0]}); '
                "give the server another name"
            )
        upstream = Upstream(
            name, target, self._spawn, on_tools_changed=lambda: self._spawn(self._refresh, name)
        )
        try:
            tools = self._portal.call(upstream.tools)
            capabilities = self._capabilities(name, upstream, tools, options, strict=True)
            self.catalog.replace((), capabilities)  # all of them, or none on a collision
        except (UpstreamError, RegistrationError) as exc:
            self._portal.call(upstream.close)
            upstream.release()
            raise RegistrationError(str(exc)) from None
        self._upstreams[name] = (upstream, options)
        self._names[name] = [c.name for c in capabilities]
        if options.connect == "first_use":
            self._portal.call(upstream.close)
        log.info("MCP server %s: %d tools as capabilities", name, len(capabilities))
        return capabilities

    def _capabilities(
        self,
        name: str,
        upstream: Upstream,
        tools: Iterable[mt.Tool],
        options: ServerOptions,
        *,
        strict: bool,
    ) -> list[Capability]:
        tools = list(tools)
        chosen = _chosen(name, tools, options, strict=strict)
        by_name: dict[str, str] = {}
        capabilities = []
        send = self._sender(upstream, options.timeout)
        for tool in chosen:
            leaf = identifier(tool.name)
            if leaf in by_name:
                raise RegistrationError(
                    f'MCP server "{name}": tools "{by_name[leaf]}" and "{tool.name}" '
                    f'both become "{name}.{leaf}"'
                )
            by_name[leaf] = tool.name
            try:
                capabilities.append(
                    tool_capability(
                        name,
                        tool,
                        send,
                        expose_errors=options.expose_errors,
                        timeout=options.timeout,
                    )
                )
            except (SchemaError, t.UnsupportedTypeError) as exc:
                log.warning("MCP server %s: tool %r skipped: %s", name, tool.name, exc)
        return capabilities

    def _sender(self, upstream: Upstream, timeout: float | None) -> Any:
        loop = self.loop

        async def send(tool: str, arguments: dict[str, Any]) -> mt.CallToolResult:
            call = upstream.call(tool, arguments, timeout)
            if asyncio.get_running_loop() is loop:  # called on the gateway's loop: no hop
                return await call
            # Not the portal's `start_task_soon`, which blocks this loop's thread until the
            # gateway's loop has started the task: gathered calls would start one by one.
            # Cancelling the awaited future cancels the task, and so the request.
            try:
                future = asyncio.run_coroutine_threadsafe(call, loop)
            except RuntimeError:  # the gateway's loop is closed
                call.close()
                raise UpstreamError(
                    f'MCP server "{upstream.name}": the gateway is closed'
                ) from None
            return await asyncio.wrap_future(future)

        return send

    async def _refresh(self, name: str) -> None:
        """The upstream's tools changed: list them again and replace its capabilities,
        once `on_change` accepts them (a policy checks them); else the old ones stay."""
        if name not in self._upstreams:  # it changed while it was being added
            return
        upstream, options = self._upstreams[name]
        try:
            tools = await upstream.tools()
            capabilities = self._capabilities(name, upstream, tools, options, strict=False)
            self.catalog.replace(self._names[name], capabilities, check=self.on_change)
            self._names[name] = [c.name for c in capabilities]
        except Exception as exc:
            log.warning("MCP server %s: its changed tools are not used: %s", name, exc)
            return
        log.info("MCP server %s: tools changed; %d capabilities now", name, len(capabilities))

    # -- shutdown ----------------------------------------------------------------------

    def close(self) -> None:
        """End every upstream session (their processes stop) and the gateway's thread."""
        upstreams = [upstream for upstream, _ in self._upstreams.values()]
        self._upstreams.clear()
        with contextlib.suppress(Exception):
            self._portal.call(_close_all, upstreams)
        for upstream in upstreams:
            upstream.release()
        self._supervisor.cancel()
        with contextlib.suppress(Exception):
            self._portal_context.__exit__(None, None, None)


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


def namespace(name: object) -> str:
    """A server's name as the namespace of its tools: an identifier (`my-fs` -> `my_fs`),
    or RegistrationError for one programs already use (a builtin or standard module)."""
    if not isinstance(name, str) or not name.strip():
        raise RegistrationError(f"an MCP server name must be a non-empty string, not {name!r}")
    converted = identifier(name, lead="server_")
    if converted in RESERVED_ROOTS:
        raise RegistrationError(
            f'MCP server "{name}": "{converted}" is a name programs use for a builtin or '
            f'module; name the server otherwise, e.g. "{converted}_server"'
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


__all__ = ["Gateway", "ServerOptions", "namespace"]
