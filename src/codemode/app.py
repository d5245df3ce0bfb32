"""CodeMode: the host's front door. Register capabilities, then search, describe, execute."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from codemode.authz import Authorizer
from codemode.capabilities import Catalog, View, build_capability
from codemode.capabilities.info import CapabilityInfo
from codemode.capabilities.search import SearchResult
from codemode.clock import Clock
from codemode.continuations import (
    Approver,
    Paused,
    ReplayGuard,
)
from codemode.discovery import Discovery, describe
from codemode.engine_slot import EngineSlot
from codemode.errors import (
    CodeModeError,
    InvalidRequestError,
    RegistrationError,
)
from codemode.events import EventHandler
from codemode.limits import LimitKind, Limits, exceeded, size
from codemode.options import Options, checked_disabled, checked_guard, checked_limits
from codemode.running import Runner, last_resort
from codemode.runtime import ExecutionResult
from codemode.runtime.program import Programs
from codemode.runtime.sandbox import Sandbox

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
      authorizer could allow (it must be a `codemode.authz.VisibilityPolicy`, whose
      `can_see` answers like an authorizer: None or True shows); a hidden
      capability looks exactly like one that does not exist, to discovery and to programs
      alike. What a subject sees of one state of the catalog is remembered for
      `codemode.runtime.visibility.VISIBILITY_SECONDS` (30). All the checks of one request
      share one deadline (`Limits.max_capability_seconds`, within an execution's own
      time); a capability whose check has not answered by then is hidden from it.
    - `trace_arguments`: record argument values on OpenTelemetry call spans (off by
      default: arguments may be sensitive).
    - `worker_binary`: the program that starts a sandbox worker, e.g. a wrapper that
      adds a network namespace and no-new-privileges before it execs the real `monty`
      (see docs/reference/security.md).
    - `sandbox`: where programs run; the pydantic-monty worker pool unless given (tests
      pass a `codemode.testing.ScriptedSandbox`).
    - `disclose_limits`: a limit error names the bound and the amount reached
      (`capability calls (limit 100)`), as a limit is the program's own budget; False
      names only the kind of limit.
    - `host_loop`: the event loop async handlers, async authorizers and an async
      `can_see` run on; by default the engine's own loop, on a thread of its own, never
      the caller's. Give it when host coroutines use objects bound to one loop (a client
      made in a web app's lifespan): they run there, and are still cancelled on time.
      Call `execute_async` from that loop, never the sync `execute` (it would block the
      loop the handlers need). It is read when the engine starts (the first search,
      describe or execution): in a lifespan, assign `cm.host_loop` before that.
    - `clock`: the time deadlines, budgets and sleeps go by; the system's unless given
      (tests pass a `codemode.testing.ManualClock`).
    - `replay_guard`: remembers the paused programs that resumed, so each resumes at
      most once (`codemode.approvals`): in this process unless given; replicas behind a
      load balancer share a `RedisReplayGuard`.
    - `request_state_key`: the secret (32 bytes or more) the MCP server seals a paused
      program's state with; every replica must hold the same one. The
      `CODEMODE_REQUEST_STATE_KEY` environment variable when omitted, else a key made
      at start (and a warning that paused programs then resume only on this process).
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
        sandbox: Sandbox | None = None,
        disclose_limits: bool = True,
        host_loop: asyncio.AbstractEventLoop | None = None,
        clock: Clock | None = None,
        replay_guard: ReplayGuard | None = None,
        request_state_key: str | bytes | None = None,
    ) -> None:
        disabled = checked_disabled(disabled)
        self._options = Options(
            authorizer=authorizer,
            hide_forbidden=hide_forbidden,
            on_event=on_event,
            trace_arguments=trace_arguments,
            disclose_limits=disclose_limits,
        )
        self.limits = checked_limits(limits)
        self.name = name
        self.worker_binary = worker_binary
        self.sandbox = sandbox
        self.host_loop = host_loop
        self.clock = clock
        self.replay_guard: ReplayGuard = checked_guard(replay_guard, clock)
        self.request_state_key = request_state_key
        self._frozen = False
        """Set by the first search, describe, execution or serving: from then on the
        configuration is what they were built with."""
        self.catalog = Catalog(disabled)
        self._engines = EngineSlot(self)
        self._discovery = Discovery(self.catalog, self._engines.engine, self._now)
        self._runner = Runner(self, lambda: self._options, self._engines, self._discovery)
        self._gateway: Any = None
        """The upstream MCP servers' `codemode.gateway.Gateway`, made on first use."""
        self._apis: list[Any] = []
        """The REST APIs' `codemode.openapi.client.Api`s, closed with the CodeMode."""
        self._engine_lock = threading.Lock()
        self._close_done = threading.Event()
        """Set once the first `close()` has ended everything; later ones wait for it."""

    def __repr__(self) -> str:
        return f"CodeMode(name={self.name!r}, capabilities={len(self.catalog.enabled)})"

    # -- configuration -------------------------------------------------------------------

    @property
    def authorizer(self) -> Authorizer:
        """Decides every capability call."""
        return self._options.authorizer

    @property
    def hide_forbidden(self) -> bool:
        """Whether discovery shows a subject only what it could be allowed to call."""
        return self._options.hide_forbidden

    @property
    def on_event(self) -> EventHandler | None:
        """Receives every audit event."""
        return self._options.on_event

    @property
    def trace_arguments(self) -> bool:
        """Whether call spans record argument values."""
        return self._options.trace_arguments

    @property
    def disclose_limits(self) -> bool:
        """Whether a limit error names its bound and the amount reached."""
        return self._options.disclose_limits

    @property
    def is_closed(self) -> bool:
        """Whether `close()` was called: a closed CodeMode starts nothing more."""
        return self._engines.is_closed

    def configure(
        self,
        *,
        authorizer: Authorizer | None = None,
        hide_forbidden: bool | None = None,
        on_event: EventHandler | None = None,
        trace_arguments: bool | None = None,
        disclose_limits: bool | None = None,
    ) -> None:
        """Change options given at construction (None keeps one), as a command line does
        after loading an app. Refused with RuntimeError once the CodeMode has searched,
        described, run or served anything: caches built from the old options would go
        stale."""
        if self._frozen:
            raise RuntimeError("configure() is refused once the CodeMode has been used")
        self._options = self._options.configured(
            authorizer=authorizer,
            hide_forbidden=hide_forbidden,
            on_event=on_event,
            trace_arguments=trace_arguments,
            disclose_limits=disclose_limits,
        )

    def _freeze(self) -> None:
        """Fix the configuration, check `disabled` names once (a likely typo), and have a
        policy that reads the capabilities check itself against them."""
        if not self._frozen:
            self.catalog.check_disabled()
            self.catalog.adopt(self._options.policy_for)
            self._frozen = True

    def prepare(self) -> None:
        """Fix the configuration and build what discovery reads (the search index, each
        capability's description and schemas), as serving does before its first request,
        so that no request pays for it on an event loop. Raises what the first use does:
        a `disabled` id that names nothing, or a policy that does not fit."""
        self._freeze()
        enabled = self.catalog.enabled
        self._discovery.index(enabled)
        for capability in enabled.values():
            capability.info  # noqa: B018 - built once, cached on the capability

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
        example: str | None = None,
        annotations: Mapping[str, bool] | None = None,
    ) -> Callable[[F], F]:
        """Register a sync or async function; the program calls it by keyword as `name(...)`.

        `max_calls_per_execution` and `timeout` (seconds) override the `Limits` defaults
        for this capability. `example` is a call `describe` shows, such as
        `'instances.get(sandbox="dev", name="api")'`; it is checked against the signature.
        `annotations` are MCP's tool hints (`{"readOnlyHint": True}`; also
        `destructiveHint`, `idempotentHint`, `openWorldHint`): the rest are presumed as MCP
        presumes them, and all four reach policies as an upstream tool's do; a read-only
        capability's completed calls are not reported as effects that stand.
        Raises `RegistrationError` at decoration time for a bad name, a duplicate, an
        example that does not fit, or type hints that cannot cross the sandbox boundary.
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
                    example=example,
                    annotations=annotations,
                )
            )
            return handler

        return register

    def add_mcp_server(
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
    ) -> tuple[str, ...]:
        """Register every tool of an upstream MCP server as a capability `name.<tool>`.

        The server is started with `command` and `args` (stdio; `env` is added to a minimal
        environment) or reached at `url` (streamable HTTP, with `headers`). `name` and the
        tool names are made identifiers (`my-fs` -> `my_fs`, `list-files` -> `list_files`);
        the tools are listed now. `include` and `exclude` are patterns of the upstream's
        tool names (`read_*`). A tool whose schema cannot be read is skipped with a
        warning. A failed call is `capability failed: ...` saying which kind of failure
        it was; `expose_errors` chooses which of the upstream's own words follow: "tool"
        (the default) the text of an `isError` result, "all" also a JSON-RPC error's
        message, "none" neither (True is "all", False "none"). `timeout` bounds one call in
        seconds (a `capability failed` the program can catch). The session stays open
        (`connect="first_use"` closes it until the first call), is shared by every
        execution, reopens after a crash, and ends with `close()`. It may be called at any
        time: once the `CodeMode` is in use, the policy checks the new capabilities before
        any program can see them. Returns the new capability names; raises
        `RegistrationError` (also when the policy refuses them).
        """
        from codemode.gateway import Gateway, ServerOptions, Target, namespace
        from codemode.gateway.tools import expose_mode

        name = namespace(name)
        if (command is None) == (url is None):
            raise RegistrationError(f'MCP server "{name}": give either command or url')
        if connect not in ("start", "first_use"):
            raise RegistrationError(f'MCP server "{name}": connect must be "start" or "first_use"')
        _check_source(f'MCP server "{name}"', timeout, args=args, include=include, exclude=exclude)
        try:
            exposed = expose_mode(expose_errors)
        except ValueError as exc:
            raise RegistrationError(f'MCP server "{name}": {exc}') from None
        if cwd is not None and not os.path.isdir(cwd):
            raise RegistrationError(f'MCP server "{name}": cwd {os.fspath(cwd)!r} is not a folder')
        target = Target(
            command=command,
            args=tuple(args),
            env=dict(env) if env is not None else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
            url=url,
            headers=dict(headers or {}),
        )
        options = ServerOptions(
            include=tuple(include) if include is not None else None,
            exclude=tuple(exclude or ()),
            expose_errors=exposed,
            timeout=timeout,
            connect=connect,
        )
        with self._engine_lock:
            if self._gateway is None:
                self._gateway = Gateway(self.catalog)
            gateway = self._gateway
        added = tuple(c.name for c in gateway.add(name, target, options))
        self._prepared()
        return added

    def add_openapi(
        self,
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
        capability `name.<operationId in snake_case>` (`listPets` -> `pets.list_pets`).

        `spec` is a path, an `http(s)` URL fetched once now, or a parsed dict, in JSON or
        YAML. Requests go to `base_url`, else the document's one server, else the origin
        it was fetched from. `headers` go with every request, and `auth` maps a security
        scheme of the document to its secret (a `(user, password)` pair for HTTP basic):
        neither ever reaches a program, an error or the log. `include` and `exclude` take
        operation ids, tags or `"METHOD /path"` patterns (`*` matches anything).
        `timeout` bounds one request in seconds (a `capability failed` the program can
        catch). `x-codemode-hints` in the document refine the method's hints policies read
        only when `trust_hints` (by default, for a file or a dict, not a fetched URL). A
        4xx answer fails the call with its status and the fields of the error body the
        document declares; nothing else the API writes reaches the model. Like
        `add_mcp_server`, it may be called at any time, the policy checking the new
        capabilities before any program can see them. Returns the new capability names;
        raises `RegistrationError`.
        """
        from codemode.gateway import namespace
        from codemode.openapi import openapi_source

        name = namespace(name, "REST API")
        _check_source(f'REST API "{name}"', timeout, include=include, exclude=exclude)
        taken = sorted(n for n in self.catalog.names() if n.startswith(name + "."))
        if taken:
            raise RegistrationError(
                f'REST API "{name}": its namespace holds capabilities already ({taken[0]}); '
                "give the API another name"
            )
        source = openapi_source(
            name,
            spec=spec,
            base_url=base_url,
            headers=headers,
            auth=auth,
            include=tuple(include) if include is not None else None,
            exclude=tuple(exclude or ()),
            timeout=timeout,
            max_bytes=self.limits.max_total_result_bytes,
            trust_hints=trust_hints,
        )
        try:
            self.catalog.change((), source.capabilities)  # all of them, or none
        except BaseException:
            source.api.close()
            raise
        with self._engine_lock:
            self._apis.append(source.api)
        log.info(
            "REST API %s: %d operations as capabilities (%d left out)",
            name,
            len(source.capabilities),
            source.left_out,
        )
        self._prepared()
        return tuple(c.name for c in source.capabilities)

    def _prepared(self) -> None:
        """After capabilities are added to a CodeMode in use: build what discovery reads
        now, on the caller's thread, as `prepare` does before serving, so that the first
        search after it does not index ten thousand capabilities on an event loop."""
        if self._frozen:
            self.prepare()

    # -- discovery -----------------------------------------------------------------------

    def search(
        self, query: str, *, limit: int = 20, offset: int = 0, subject: str | None = None
    ) -> SearchResult:
        """Capabilities ranked for a query, `limit` at a time from `offset`; an empty query
        (or `*`) lists them all in name order."""
        view = self.visible(subject)
        return self._discovery.index(view).search(query, limit=limit, offset=offset)

    def describe(self, name: str, *, subject: str | None = None) -> CapabilityInfo:
        """The capability with exactly this name, as the model sees it, else NotFoundError.

        The lookup is exact (no trimming, no case folding); the error suggests a close
        visible name, so a disabled or hidden name gets the same answer as one that never
        existed.
        """
        return describe(self.visible(subject), name)

    async def search_async(
        self, query: str, *, limit: int = 20, offset: int = 0, subject: str | None = None
    ) -> SearchResult:
        """As `search`, for a caller on an event loop (the MCP server, the page): a
        `can_see` hook never blocks it, and nothing but a CodeModeError leaves it."""
        with last_resort("search or describe"):
            self._freeze()
            return await self._discovery.search_async(
                self._options, subject, query, limit=limit, offset=offset
            )

    async def describe_async(self, name: str, *, subject: str | None = None) -> CapabilityInfo:
        """As `describe`, for a caller on an event loop (see `search_async`)."""
        with last_resort("search or describe"):
            self._freeze()
            view = await self._discovery.visible_async(self._options, subject)
            return describe(view[1], name)

    def visible(self, subject: str | None = None) -> View:
        """The capabilities `subject` can see: all enabled ones unless `hide_forbidden`."""
        self._freeze()
        return self._discovery.visible(self._options, subject)[1]

    def _now(self) -> float:
        """The time visibility is remembered by: the CodeMode's clock, when it has one."""
        return self.clock.now() if self.clock is not None else time.monotonic()

    # -- execution -----------------------------------------------------------------------

    def execute(self, source: str, *, subject: str) -> ExecutionResult:
        """Run a program that defines main(); raises a CodeModeError on any failure.

        Nothing else leaves it: whatever the program, handlers, authorizer or audit sink
        do, an unexpected failure is logged and raised as `InternalError`. The one
        exception is the first use's check of the configuration, raised as it is: a
        `disabled` id that names nothing, or a policy that does not fit the capabilities.
        """
        self._freeze()
        return self._runner.execute(source, subject)

    async def execute_async(
        self, source: str, *, subject: str, approve: Approver | None = None
    ) -> ExecutionResult:
        """As `execute`, awaiting. Async handlers and authorizers run on the engine's own
        event loop (or on `host_loop`), never on the calling one.

        `approve` asks a person about each call the authorizer answers
        `RequireApproval` for (True runs it); the program pauses meanwhile, holding no
        worker, each answer within `Limits.max_approval_wait_seconds`. Without it such a
        call fails with `approval unavailable` (fail closed)."""
        self._freeze()
        return await self._runner.resumer.execute(source, subject, approve)

    async def start_async(
        self, source: str, *, subject: str, pausable: bool = True
    ) -> ExecutionResult | Paused:
        """As `execute_async`, for a caller that asks a person itself: a program that
        reaches a call needing approval pauses and is answered `Paused`, for
        `resume_async` (here or on another replica) once the person has answered."""
        self._freeze()
        return await self._runner.resumer.start(source, subject, pausable)

    async def resume_async(
        self,
        state: bytes,
        *,
        subject: str,
        answers: Mapping[str, bool],
        pausable: bool = True,
    ) -> ExecutionResult | Paused:
        """Resume a `Paused` program with the person's answers (by `ApprovalRequest.key`:
        True approves; a request left out is declined). An approved call is authorized
        again, then runs; the calls made before the pause never run again. Refused with
        `ResumeRefusedError`, nothing run, for a state of another version, another
        catalog or another subject, or one that resumed already. `state` must be the
        bytes `Paused` gave, unaltered (seal them when they leave the process).
        `pausable`: whether a later call that needs approval may pause it again (else
        it fails with `approval unavailable`)."""
        self._freeze()
        return await self._runner.resumer.resume(state, subject, answers, pausable)

    def check(self, source: str, *, subject: str | None = None) -> list[CodeModeError]:
        """What the static preflight finds in a program, without running anything: each
        mistake as an error of its own with its `where`, in source order (`str()` of each
        names `<codemode>:LINE:COL`, as `execute` does); empty when there is nothing to
        report. With `subject`, against the capabilities that subject sees."""
        self._freeze()
        if not isinstance(source, str):
            raise InvalidRequestError("the program must be a string")
        written = len(source.encode("utf-8", errors="surrogatepass"))
        if written > self.limits.max_source_bytes:
            return [exceeded(LimitKind.SOURCE_SIZE, self.limits, amount=size(written))]
        return Programs(self.visible(subject)).check(source)

    def close(self) -> None:
        """Cancel running executions, stop the worker processes and end every upstream
        MCP session (never waits on host code: a handler still running is left to finish
        on its own). A closed CodeMode starts nothing more: executions end `canceled`."""
        first, engine = self._engines.close()
        if not first:  # closing already (a signal's closer, say): it ends when that does
            self._close_done.wait(CLOSE_WAIT_SECONDS)
            return
        with self._engine_lock:
            gateway, self._gateway = self._gateway, None
            apis, self._apis = self._apis, []
        try:
            for api in apis:  # on the engine's loop, while it still runs
                api.close()
            if engine is not None:
                engine.close()
            if gateway is not None:
                gateway.close()
        finally:
            self._close_done.set()

    def __enter__(self) -> CodeMode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


CLOSE_WAIT_SECONDS = 10.0
"""How long a second `close()` waits for the first to end the workers and upstreams."""


def _check_source(what: str, timeout: float | None, **lists: object) -> None:
    """RegistrationError, naming the MCP server or REST API, for a `timeout` that is not
    a positive number or a list option given as one string."""
    if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
        raise RegistrationError(f"{what}: timeout must be a positive number")
    for option, value in lists.items():
        if isinstance(value, str):
            raise RegistrationError(f"{what}: {option} must be a list of str")


__all__ = ["CodeMode"]
