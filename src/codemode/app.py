"""CodeMode: the host's front door. Register capabilities, then search, describe, execute."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio

from codemode.authz import Authorizer
from codemode.binding import closest_name
from codemode.capabilities import Capability, Catalog, build_capability
from codemode.capabilities.search import SearchIndex, SearchResult
from codemode.errors import NotFoundError, UnauthenticatedError
from codemode.events import Event, EventHandler
from codemode.limits import Limits
from codemode.runtime import Engine, Execution, ExecutionResult
from codemode.runtime.dispatch import Bridge

if TYPE_CHECKING:
    from starlette.applications import Starlette

log = logging.getLogger("codemode")
F = TypeVar("F", bound=Callable[..., Any])


class CodeMode:
    """A set of capabilities that programs can call, under an authorizer and limits.

    **Parameters:**

    - `authorizer`: decides every capability call; required (use `AllowAll()` explicitly).
    - `limits`: what one execution may use (`Limits()` defaults when omitted).
    - `disabled`: ids of registered capabilities that programs, search and describe
      must not see (for example per deployment).
    - `name`: the server name shown to MCP clients.
    - `on_event`: receives every audit event (`codemode.events`), e.g. a `JsonLinesSink`.
    - `hide_forbidden`: search and describe show a subject only the capabilities its
      authorizer could allow (the authorizer's optional `can_see(subject, capability_id,
      capability_name)`); a hidden capability looks exactly like one that does not exist,
      to discovery and to programs alike.
    - `trace_arguments`: record argument values on OpenTelemetry call spans (off by
      default: arguments may be sensitive).
    - `worker_binary`: the program that starts a sandbox worker, e.g. a wrapper that
      adds a network namespace and no-new-privileges before it execs the real `monty`
      (see docs/reference/security.md).
    """

    def __init__(
        self,
        *,
        authorizer: Authorizer,
        limits: Limits | None = None,
        disabled: Iterable[str] = (),
        name: str = "codemode",
        on_event: EventHandler | None = None,
        hide_forbidden: bool = False,
        trace_arguments: bool = False,
        worker_binary: str | os.PathLike[str] | None = None,
    ) -> None:
        if authorizer is None or not callable(authorizer):
            raise TypeError(
                "CodeMode needs an authorizer; use codemode.authz.AllowAll() to allow all"
            )
        if isinstance(disabled, str):
            raise TypeError("disabled must be a collection of capability ids, not a string")
        self.authorizer = authorizer
        self.limits = limits if limits is not None else Limits()
        if not isinstance(self.limits, Limits):
            raise TypeError("limits must be a codemode.Limits")
        self.name = name
        self.on_event = on_event
        self.hide_forbidden = hide_forbidden
        self.trace_arguments = trace_arguments
        self.worker_binary = worker_binary
        self.catalog = Catalog(disabled)
        self._engine: Engine | None = None
        self._indexes: dict[int, tuple[Mapping[str, Capability], SearchIndex]] = {}
        self._views: dict[str, Mapping[str, Capability]] = {}
        self._views_of: Mapping[str, Capability] | None = None

    def __repr__(self) -> str:
        return f"CodeMode(name={self.name!r}, capabilities={len(self.catalog.enabled)})"

    # -- registration ------------------------------------------------------------------

    def capability(
        self,
        name: str,
        *,
        id: str | None = None,
        summary: str,
        description: str | None = None,
        search_terms: Iterable[str] = (),
        max_calls_per_execution: int | None = None,
        timeout: float | None = None,
    ) -> Callable[[F], F]:
        """Register a sync or async function; the program calls it by keyword as `name(...)`.

        `max_calls_per_execution` and `timeout` (seconds) override the `Limits` defaults
        for this capability. Raises `RegistrationError` at decoration time for a bad name,
        a duplicate, or type hints that cannot cross the sandbox boundary.
        """

        def register(handler: F) -> F:
            self.catalog.add(
                build_capability(
                    handler,
                    name,
                    id=id,
                    summary=summary,
                    description=description,
                    search_terms=search_terms,
                    max_calls_per_execution=max_calls_per_execution,
                    timeout=timeout,
                )
            )
            return handler

        return register

    # -- discovery -----------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 20, subject: str | None = None) -> SearchResult:
        """Capabilities ranked for a query (a blank query finds nothing)."""
        visible = self.visible(subject)
        found = self._indexes.get(id(visible))
        if found is None or found[0] is not visible:
            found = (visible, SearchIndex(list(visible.values())))
            self._indexes[id(visible)] = found
            while len(self._indexes) > _VIEWS_KEPT:
                self._indexes.pop(next(iter(self._indexes)))
        return found[1].search(query, limit=limit)

    def describe(self, name: str, *, subject: str | None = None) -> Capability:
        """The capability with exactly this name, else NotFoundError.

        The lookup is exact (no trimming, no case folding); the error suggests a close
        visible name, so a disabled or hidden name gets the same answer as one that never
        existed.
        """
        enabled = self.visible(subject)
        capability = enabled.get(name) if isinstance(name, str) else None
        if capability is None:
            hint = closest_name(name, enabled) if isinstance(name, str) else None
            raise NotFoundError(f'did you mean "{hint}"?' if hint else None)
        return capability

    def visible(self, subject: str | None = None) -> Mapping[str, Capability]:
        """The capabilities `subject` can see: all enabled ones unless `hide_forbidden`."""
        self.catalog.check_disabled()
        enabled = self.catalog.enabled
        can_see = getattr(self.authorizer, "can_see", None)
        if not self.hide_forbidden or subject is None or can_see is None:
            return enabled
        if self._views_of is not enabled:
            self._views, self._views_of = {}, enabled
        view = self._views.get(subject)
        if view is None:
            view = {n: c for n, c in enabled.items() if _sees(can_see, subject, c)}
            self._views[subject] = view
            while len(self._views) > _SUBJECTS_KEPT:
                self._views.pop(next(iter(self._views)))
        return view

    # -- execution -----------------------------------------------------------------------

    def execute(self, source: str, *, subject: str) -> ExecutionResult:
        """Run a program that defines main(); raises a CodeModeError on any failure."""
        engine = self._prepare(subject)
        execution = self._execution(source, subject, engine, engine.private_bridge())
        return engine.execute(execution)

    async def execute_async(self, source: str, *, subject: str) -> ExecutionResult:
        """As `execute`; async handlers and authorizers run on the calling event loop."""
        engine = self._prepare(subject)
        bridge = Bridge(asyncio.get_running_loop())
        return await engine.execute_async(self._execution(source, subject, engine, bridge))

    # -- serving -------------------------------------------------------------------------

    def http_app(
        self,
        *,
        tokens: Mapping[str, str] | None = None,
        subject: str = "local",
        host: str = "127.0.0.1",
        web: bool = False,
    ) -> Starlette:
        """An ASGI app serving MCP at `/mcp`, to run with uvicorn or mount in Starlette/FastAPI.

        With `tokens` (bearer token -> subject) unauthenticated requests get 401; `host` is
        the address it will be served on (loopback names are the only Host headers accepted
        there); with `web` the playground is served at `/`.
        """
        from codemode.mcp import http_app

        routes = None
        if web:
            from codemode.web import web_routes

            routes = web_routes(self, tokens=tokens, subject=subject)
        return http_app(self, tokens=tokens, subject=subject, host=host, routes=routes)

    def run(
        self,
        transport: Literal["stdio", "http"] = "stdio",
        *,
        subject: str = "local",
        host: str = "127.0.0.1",
        port: int = 8000,
        tokens: Mapping[str, str] | None = None,
        web: bool = False,
    ) -> None:
        """Serve over MCP until stopped: stdio as `subject`, or streamable HTTP."""
        if transport == "stdio":
            from codemode.mcp import serve_stdio

            anyio.run(lambda: serve_stdio(self, subject=subject))
        elif transport == "http":
            import uvicorn

            app = self.http_app(tokens=tokens, subject=subject, host=host, web=web)
            uvicorn.run(app, host=host, port=port)
        else:
            raise ValueError(f"unknown transport {transport!r}")

    def close(self) -> None:
        """Cancel running executions and stop the worker processes."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def __enter__(self) -> CodeMode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _prepare(self, subject: str) -> Engine:
        if not isinstance(subject, str) or not subject.strip():
            raise UnauthenticatedError()
        if self._engine is None:
            self._engine = Engine(self.limits, self.worker_binary)
        return self._engine

    def _execution(self, source: str, subject: str, engine: Engine, bridge: Bridge) -> Execution:
        if not isinstance(source, str):
            raise TypeError("source must be a string")
        return Execution(
            source=source,
            subject=subject,
            capabilities=self.visible(subject),
            authorizer=self.authorizer,
            limits=self.limits,
            bridge=bridge,
            engine=engine,
            emit=self._emit,
            emits=self.on_event is not None,
            trace_arguments=self.trace_arguments,
        )

    def _emit(self, event: Event) -> None:
        """Deliver an audit event; a failing handler is logged, never fatal."""
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:
            log.exception("the on_event handler failed on %s", event.kind)


_VIEWS_KEPT = 64
_SUBJECTS_KEPT = 4096


def _sees(can_see: Callable[[str, str, str], bool], subject: str, capability: Capability) -> bool:
    """Whether a subject may see a capability; a failing hook hides it (fail closed)."""
    try:
        return bool(can_see(subject, capability.id, capability.name))
    except Exception:
        log.exception("can_see failed for %s", capability.name)
        return False


__all__ = ["CodeMode"]
