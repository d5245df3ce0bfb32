"""CodeMode: the host's front door. Register capabilities, then search, describe, execute."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio

from codemode.authz import Authorizer
from codemode.binding import closest_name
from codemode.capabilities import Capability, Catalog, build_capability
from codemode.capabilities.search import SearchIndex, SearchResult
from codemode.errors import NotFoundError, UnauthenticatedError
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
    """

    def __init__(
        self,
        *,
        authorizer: Authorizer,
        limits: Limits | None = None,
        disabled: Iterable[str] = (),
        name: str = "codemode",
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
        self.catalog = Catalog(disabled)
        self._engine: Engine | None = None
        self._index: tuple[dict[str, Capability], SearchIndex] | None = None

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
    ) -> Callable[[F], F]:
        """Register a sync or async function; the program calls it by keyword as `name(...)`.

        Raises `RegistrationError` at decoration time for a bad name, a duplicate, or type
        hints that cannot cross the sandbox boundary.
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
                )
            )
            return handler

        return register

    # -- discovery -----------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 20) -> SearchResult:
        """Enabled capabilities ranked for a query (a blank query finds nothing)."""
        self.catalog.check_disabled()
        enabled = self.catalog.enabled
        if self._index is None or self._index[0] is not enabled:
            self._index = (enabled, SearchIndex(list(enabled.values())))
        return self._index[1].search(query, limit=limit)

    def describe(self, name: str) -> Capability:
        """The enabled capability with exactly this name, else NotFoundError.

        The lookup is exact (no trimming, no case folding); the error suggests a close
        enabled name, so a disabled name gets the same answer as one that never existed.
        """
        self.catalog.check_disabled()
        enabled = self.catalog.enabled
        capability = enabled.get(name) if isinstance(name, str) else None
        if capability is None:
            hint = closest_name(name, enabled) if isinstance(name, str) else None
            raise NotFoundError(f'did you mean "{hint}"?' if hint else None)
        return capability

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
        self, *, tokens: Mapping[str, str] | None = None, subject: str = "local"
    ) -> Starlette:
        """An ASGI app serving MCP at `/mcp`, to run with uvicorn or mount in Starlette/FastAPI.

        With `tokens` (bearer token -> subject) unauthenticated requests get 401.
        """
        from codemode.mcp import http_app

        return http_app(self, tokens=tokens, subject=subject)

    def run(
        self,
        transport: Literal["stdio", "http"] = "stdio",
        *,
        subject: str = "local",
        host: str = "127.0.0.1",
        port: int = 8000,
        tokens: Mapping[str, str] | None = None,
    ) -> None:
        """Serve over MCP until stopped: stdio as `subject`, or streamable HTTP."""
        if transport == "stdio":
            from codemode.mcp import serve_stdio

            anyio.run(lambda: serve_stdio(self, subject=subject))
        elif transport == "http":
            import uvicorn

            from codemode.mcp import http_app

            uvicorn.run(
                http_app(self, tokens=tokens, subject=subject, host=host), host=host, port=port
            )
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
        self.catalog.check_disabled()
        if self._engine is None:
            self._engine = Engine(self.limits)
        return self._engine

    def _execution(self, source: str, subject: str, engine: Engine, bridge: Bridge) -> Execution:
        if not isinstance(source, str):
            raise TypeError("source must be a string")
        return Execution(
            source=source,
            subject=subject,
            catalog=self.catalog,
            authorizer=self.authorizer,
            limits=self.limits,
            bridge=bridge,
            engine=engine,
        )


__all__ = ["CodeMode"]
