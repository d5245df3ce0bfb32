"""The sources of one CodeMode: each opened on the sources' loop, what it offers kept in
step with the catalog, and all of them closed together.

`Sources.add` is what `CodeMode.add_source` (and so `add_mcp_server` and `add_openapi`)
calls: the source's namespace is checked and taken, it is opened on the sources' loop (a
thread of its own, started with the first source added), and what it offers enters the
catalog all at once, or it is closed and nothing of it stays. Its change stream is then
followed on that loop, each offer checked by the policy as it replaces the source's
capabilities (`Catalog.change`), and `close` ends every stream, then every source. A
`Companion` (the learned shapes' keeping) lives on the same loop from its start and is
closed last, after the sources.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread

from codemode.capabilities import Capability, Catalog, Snapshot, check_name
from codemode.errors import RegistrationError
from codemode.limits import Limits
from codemode.sources import ProgramFolder, Source

log = logging.getLogger("codemode.sources")


class Functions:
    """The functions `CodeMode.capability` registers, as a source.

    It is the one source without a namespace of its own (its name is empty: each function
    names its own), and the one whose capabilities join the catalog as they are
    registered (`add`, at decoration time, where a clash or a refusing policy is raised),
    so it has nothing to open, no change stream and nothing to close.
    """

    name = ""

    def __init__(
        self, catalog: Catalog, reserved: Callable[[], frozenset[str]] = frozenset
    ) -> None:
        self.catalog = catalog
        self.reserved = reserved
        """The namespaces no function may take (`programs`, while saved programs are on)."""
        self._registered: list[Capability] = []

    def add(self, capability: Capability) -> None:
        """Register one function's capability now (RegistrationError on a clash, in a
        reserved namespace, or when the policy refuses it)."""
        namespace = capability.name.split(".", 1)[0]
        if namespace in self.reserved():
            raise RegistrationError(
                f'capability "{capability.name}": the namespace "{namespace}" is kept for '
                "saved programs"
            )
        self.catalog.add(capability)
        self._registered.append(capability)

    async def open(self) -> None:
        """Nothing to open: the functions are in the catalog already."""

    def capabilities(self) -> tuple[Capability, ...]:
        """The functions registered so far."""
        return tuple(self._registered)

    def changes(self) -> AsyncIterator[Sequence[Capability] | None] | None:
        """None: a function registered later joins the catalog at once (`add`)."""
        return None

    async def close(self) -> None:
        """Nothing to close: host code is never stopped from here."""


class Companion(Protocol):
    """Work that lives beside the sources: `run` on their loop from the moment it starts
    (cancelled when it stops), `close` once the sources are closed."""

    async def run(self) -> None: ...

    def close(self) -> None: ...


CLOSE_GRACE_SECONDS = 10.0
"""How long closing waits for the sources to close, and then for their loop to stop, before
it leaves what is still running behind (and says so in the host log): a source is host
code, and closing never waits on host code without end."""


@dataclass(eq=False)
class _Added:
    """One added source and what of it the catalog holds."""

    source: Source
    name: str
    """Its namespace, as it was added (a source that renames itself keeps this one)."""
    what: str
    """How errors and the host log name it (`MCP server "fs"`)."""
    offered: list[Capability] = field(default_factory=list)
    """What it offers in the newest accepted state of the catalog."""


class Sources:
    """Adds, follows and closes the sources of one catalog (see the module docstring)."""

    def __init__(
        self,
        catalog: Catalog,
        grace: float = CLOSE_GRACE_SECONDS,
        companion: Companion | None = None,
        reserved: Callable[[], frozenset[str]] = frozenset,
    ) -> None:
        self.catalog = catalog
        self.companion = companion
        self.grace = grace
        """`CLOSE_GRACE_SECONDS`, or less in tests."""
        self.reserved = reserved
        """The namespaces no source may take (`programs`, while saved programs are on)."""
        self.functions = Functions(catalog, reserved)
        """The host's own functions, the source `CodeMode.capability` registers into."""
        self._added: dict[str, _Added] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._portal: _Portal | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The sources' loop, where every source's I/O runs (started when first needed)."""
        return self._running().loop

    def _running(self) -> _Portal:
        with self._lock:
            return self._started()

    def _started(self) -> _Portal:
        """The portal, started now (with the companion's run) if it was not; under the lock."""
        if self._portal is None:
            self._portal = _Portal()
            if self.companion is not None:
                self._portal.spawn(self.companion.run)
        return self._portal

    def add(self, source: Source) -> list[Capability]:
        """Open `source` and put what it offers in the catalog; RegistrationError (and
        nothing of it stays) when its name is taken, it cannot be opened, or the catalog
        or its policy refuses what it offers."""
        if not isinstance(source, Source):
            raise TypeError(
                "add_source needs a codemode.sources.Source: name, async open(), "
                "capabilities(), changes() and async close()"
            )
        name = source.name
        what, noun = describe(source), _noun(source)
        if not isinstance(name, str) or not name.isidentifier():
            raise RegistrationError(f"{what}: its name must be an identifier")
        own = isinstance(source, ProgramFolder)  # the host's programs: saved programs' own
        if name in self.reserved() and not own:
            raise RegistrationError(f'{what}: the namespace "{name}" is kept for saved programs')
        with self._lock:
            if self._closed:
                raise RegistrationError(f"{what}: the CodeMode is closed")
            if name in self._added:
                article = "an" if noun[0] in "AEIOUaeiou" else "a"
                raise RegistrationError(f"{what}: {article} {noun} of that name is added")
            taken = sorted(n for n in self.catalog.names() if n.startswith(name + "."))
            if taken and not own:  # a program's name taken is a clash of the catalog's
                raise RegistrationError(
                    f"{what}: its namespace holds capabilities already ({taken[0]}); "
                    f"give the {noun} another name"
                )
            added = self._added[name] = _Added(source, name, what)
            portal = self._started()
        try:
            portal.call(source.open)
            offered = list(source.capabilities())
            _check_names(what, name, offered)
            stream = source.changes()
            self.catalog.change((), offered)  # all of them, or none
        except BaseException as exc:
            with self._lock:
                self._added.pop(name, None)
                closed = self._closed
            with contextlib.suppress(Exception):
                portal.call(source.close)
            if closed:  # closed while it opened: its open was cancelled
                raise RegistrationError(f"{what}: the CodeMode is closed") from None
            if isinstance(exc, RegistrationError) or not isinstance(exc, Exception):
                raise
            raise RegistrationError(
                f"{what}: it cannot be opened ({type(exc).__name__}: {exc})"
            ) from exc
        added.offered = offered
        if stream is not None:
            portal.spawn(self._follow, added, stream)
        return offered

    async def _follow(self, added: _Added, stream: AsyncIterator[Any]) -> None:
        """Apply each offer of a source's change stream, telling it how each went."""
        send: Callable[[Any], Any] | None = getattr(stream, "asend", None)
        answer: BaseException | None = None
        try:
            while True:
                try:
                    offer = await (send(answer) if send is not None else anext(stream))
                except StopAsyncIteration:
                    return
                answer = await anyio.to_thread.run_sync(self._apply, added, offer)
        finally:
            closing = getattr(stream, "aclose", None)
            if closing is not None:
                with contextlib.suppress(Exception):
                    await closing()

    def _apply(self, added: _Added, offer: Sequence[Capability] | None) -> BaseException | None:
        """One offer into the catalog (on a worker thread: a policy may take a while):
        None when it was taken, else why not, having withheld what changed."""
        old = added.offered
        if offer is None:  # the source cannot tell what it offers: none of it is used
            self.catalog.withhold([c.id for c in old])
            return None
        new = list(offer)
        try:
            _check_names(added.what, added.name, new)
        except RegistrationError as exc:
            log.warning("%s: its new capabilities are not used: %s", added.what, exc)
            return exc
        refusal: list[BaseException] = []
        kept = {id(c) for c in new}

        def refused(snapshot: Snapshot, error: BaseException) -> list[str]:
            refusal.append(error)
            return [c.id for c in old if id(c) not in kept]

        self.catalog.change([c.name for c in old], new, refused=refused)
        if refusal:
            return refusal[0]
        added.offered = new
        return None

    def close(self) -> None:
        """End every change stream, then close every source side by side, then the
        sources' loop. Nothing can be added after."""
        with self._lock:
            self._closed = True
            added, self._added = list(self._added.values()), {}
            portal, self._portal = self._portal, None
        try:
            if portal is not None:
                self._close(portal, added)
        finally:
            if self.companion is not None:
                try:
                    self.companion.close()
                except Exception:
                    log.exception("closing beside the sources failed")

    def _close(self, portal: _Portal, added: list[_Added]) -> None:
        portal.stop_following()
        closing = portal.start(_close_all, [a.source for a in added])
        try:
            closing.result(self.grace)
        except concurrent.futures.TimeoutError:
            log.warning(
                "sources %s did not close within %s s; they are left to finish on their own",
                ", ".join(a.what for a in added),
                self.grace,
            )
        except Exception:
            log.exception("the sources did not close cleanly")
        portal.close(self.grace)


def describe(source: Source) -> str:
    """How errors name a source: its kind, when it says one, then its name."""
    kind = getattr(source, "kind", None)
    return f'{kind if isinstance(kind, str) else "source"} "{source.name}"'


def _noun(source: Source) -> str:
    """What "give the ... another name" calls a source (`server`, `API`)."""
    kind = getattr(source, "kind", None)
    word = kind.rsplit(" ", 1)[-1] if isinstance(kind, str) else "source"
    return word if word.isupper() else word.lower()


def _check_names(what: str, name: str, offered: Sequence[Capability]) -> None:
    """RegistrationError for an offer that is not capabilities under the source's name,
    each a name programs can call (not a builtin's or a standard module's)."""
    for capability in offered:
        if not isinstance(capability, Capability):
            kind = type(capability).__name__
            raise RegistrationError(f"{what}: it offers a {kind}, not a Capability")
        try:
            check_name(capability.name)
        except RegistrationError as exc:
            raise RegistrationError(f"{what}: {exc}") from None
        if not capability.name.startswith(name + "."):
            raise RegistrationError(
                f'{what}: its capability "{capability.name}" is not under its name'
            )


async def _close_all(sources: list[Source]) -> None:
    """Close sources side by side: each may take a while (an upstream's grace to exit)."""

    async def close(source: Source) -> None:
        try:
            await source.close()
        except Exception:
            log.exception("%s did not close cleanly", describe(source))

    async with anyio.create_task_group() as group:
        for source in sources:
            group.start_soon(close, source)


class _Host(Protocol):
    """What `SourceShortcuts` needs of the class that uses it."""

    @property
    def limits(self) -> Limits: ...

    def add_source(self, source: Source) -> tuple[str, ...]: ...


class SourceShortcuts:
    """`add_mcp_server` and `add_openapi` for the front door: each only builds one `Source`
    and hands it to `add_source`, so they live apart from the class that owns the sources
    (which supplies `add_source` and `limits`)."""

    def add_mcp_server(
        self: _Host,
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
    ) -> tuple[str, ...]:
        """Register every tool of an upstream MCP server as a capability `name.<tool>`:
        `add_source(McpServer(name, ...))`, whose docstring (`codemode.sources.McpServer`)
        says what each option does. Returns the new capability names; raises
        `RegistrationError`, as `add_source` does."""
        from codemode.sources.mcp import McpServer

        return self.add_source(
            McpServer(
                name,
                command=command,
                args=args,
                env=env,
                cwd=cwd,
                url=url,
                headers=headers,
                include=include,
                exclude=exclude,
                expose_errors=expose_errors,
                timeout=timeout,
                connect=connect,
            )
        )

    def add_openapi(
        self: _Host,
        name: str,
        *,
        spec: str | os.PathLike[str] | Mapping[str, Any],
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Mapping[str, str | tuple[str, str]] | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        timeout: float | None = None,
        trust_hints: bool | None = None,
    ) -> tuple[str, ...]:
        """Register every operation of a REST API's OpenAPI 3.0 or 3.1 document as a
        capability `name.<operationId in snake_case>` (`listPets` -> `pets.list_pets`):
        `add_source(OpenApi(name, ...))`, whose docstring (`codemode.sources.OpenApi`)
        says what each option does; `max_bytes` is `Limits.max_total_result_bytes`.
        Returns the new capability names; raises `RegistrationError`, as `add_source`."""
        from codemode.sources.openapi import OpenApi

        return self.add_source(
            OpenApi(
                name,
                spec=spec,
                base_url=base_url,
                headers=headers,
                auth=auth,
                include=include,
                exclude=exclude,
                timeout=timeout,
                trust_hints=trust_hints,
                max_bytes=self.limits.max_total_result_bytes,
            )
        )


class _Portal:
    """The sources' loop, on a thread of its own, with the task group their change
    streams are followed in."""

    def __init__(self) -> None:
        self._context = anyio.from_thread.start_blocking_portal(name="codemode-sources")
        self._portal = self._context.__enter__()
        self._supervisor, (self._group, loop) = self._portal.start_task(self._supervise)
        self.loop: asyncio.AbstractEventLoop = loop

    async def _supervise(self, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        async with anyio.create_task_group() as group:
            task_status.started((group, asyncio.get_running_loop()))
            await anyio.sleep_forever()

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """`await function(*args)` on the loop, from another thread."""
        return self._portal.call(function, *args)

    def start(self, function: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        """Start `function(*args)` on the loop; its outcome, to wait for as long as one will."""
        return self._portal.start_task_soon(function, *args)

    def spawn(self, function: Callable[..., Any], *args: Any) -> None:
        """Start a task in the group; whatever it raises is logged, so one source's
        failure never ends the others'."""

        def start() -> None:  # not `start_soon` itself, whose task the portal would await
            self._group.start_soon(_guarded, function, *args)

        self._portal.call(start)

    def stop_following(self) -> None:
        """Cancel every change stream (the group, so later sources' too)."""
        with contextlib.suppress(Exception):
            self._portal.call(self._group.cancel_scope.cancel)

    def close(self, grace: float) -> None:
        """Cancel every task left (an open still running, a stream that outlived its
        cancel) and stop the loop, waiting `grace` seconds at most: a task that ignores
        its cancellation keeps the loop's thread, which is then left behind."""

        def stop() -> None:
            self._supervisor.cancel()
            with contextlib.suppress(Exception):
                self._portal.call(self._portal.stop, True)
            with contextlib.suppress(Exception):
                self._context.__exit__(None, None, None)

        stopping = threading.Thread(target=stop, name="codemode-sources-stop", daemon=True)
        stopping.start()
        stopping.join(grace)
        if stopping.is_alive():
            log.warning(
                "the sources' loop did not stop within %s s: a source ignores its "
                "cancellation; its thread is left behind",
                grace,
            )


async def _guarded(function: Callable[..., Any], *args: Any) -> None:
    try:
        await function(*args)
    except Exception:
        log.exception("source task %s failed", getattr(function, "__qualname__", function))


__all__ = [
    "CLOSE_GRACE_SECONDS",
    "Companion",
    "Functions",
    "SourceShortcuts",
    "Sources",
    "describe",
]
