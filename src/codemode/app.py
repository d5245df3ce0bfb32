"""CodeMode: the host's front door. Register capabilities, then search, describe, execute."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from codemode.authz import Authorizer
from codemode.capabilities import (
    CHECKED_AFTER,
    CapabilityInfo,
    Catalog,
    Resolver,
    SearchResult,
    View,
    build_capability,
)
from codemode.clock import Clock
from codemode.continuations import Approver, Paused, ReplayGuard, Store
from codemode.discovery import Discovery
from codemode.engine_slot import EngineSlot
from codemode.errors import CodeModeError
from codemode.events import EventHandler
from codemode.limits import Limits
from codemode.options import (
    Configured,
    Options,
    checked_direct_tools,
    checked_disabled,
    checked_guard,
    checked_limits,
    checked_store,
)
from codemode.programs import SaveAs, kept_programs
from codemode.running import Runner, last_resort
from codemode.runtime import ExecutionResult, Sandbox
from codemode.sessions import Sessions
from codemode.shaping import Shapes
from codemode.sources import Source
from codemode.sourcing import Sources, SourceShortcuts

F = TypeVar("F", bound=Callable[..., Any])


class CodeMode(SourceShortcuts, Configured):
    """A set of capabilities that programs can call, under an authorizer and limits.

    **Parameters:**

    - `authorizer`: decides every capability call; required (use `AllowAll()` explicitly).
    - `limits`: what one execution may use (`Limits()` defaults when omitted).
    - `disabled`: ids of registered capabilities no program, search or describe sees.
    - `name`: the server name shown to MCP clients.
    - `on_event`: receives every audit event (`codemode.events`), e.g. a `JsonLinesSink`.
    - `hide_forbidden`: search and describe show a subject only the capabilities its
      authorizer (a `codemode.authz.VisibilityPolicy`) could allow; a hidden one looks
      exactly like one that does not exist, to discovery and to programs alike
      (docs/guides/authorization.md).
    - `trace_arguments`: record argument values on call spans (they may be sensitive).
    - `worker_binary`: what starts a sandbox worker, e.g. a wrapper that confines it
      before it execs the real `monty` (docs/reference/security.md).
    - `sandbox`: where programs run (tests pass a `codemode.testing.ScriptedSandbox`).
    - `disclose_limits`: a limit error names the bound and the amount reached
      (`capability calls (limit 100)`); False names only the kind of limit.
    - `host_loop`: the event loop async handlers, async authorizers and an async
      `can_see` run on (the engine's own by default); call `execute_async` from it, and
      assign it before the engine starts (docs/guides/capabilities.md).
    - `clock`: what deadlines and sleeps go by (tests pass a `codemode.testing.ManualClock`).
    - `store`, `replay_guard`, `request_state_key`: what replicas share (a Redis URL or
      a `codemode.approvals.Store`), the guard that resumes a paused program once,
      and the secret (`CODEMODE_REQUEST_STATE_KEY` if omitted) sealing paused programs
      and sessions; this process's own unless given (docs/guides/deployment.md).
    - `sessions`: whether programs may run in sessions (`execute(session=...)`).
    - `shapes`, `shapes_checked_after`: learn the result shapes of capabilities that
      declare none (True, in memory and the store; False: off), or keep them in this
      file too; how many results a shape needs before a key it lacks is refused.
    - `programs`: saved programs (`add_program`, `execute(save_as=...)`) are on, each
      subject's kept in `store` (True: this process's memory, or the store replicas
      share), on and kept in this folder, which a restarted server reads again (a path),
      or off (False); the `programs` namespace is theirs while on.
    - `direct_tools`: name patterns (`records.*`) of capabilities an MCP server also
      lists as plain tools beside its three, each call run as a program of one call.
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
        store: Store | str | None = None,
        sessions: bool = True,
        shapes: bool | str | os.PathLike[str] = True,
        shapes_checked_after: int = CHECKED_AFTER,
        programs: bool | str | os.PathLike[str] = True,
        direct_tools: Iterable[str] = (),
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
        self.store, self.sessions = checked_store(store, clock, request_state_key), sessions
        self.replay_guard: ReplayGuard = checked_guard(replay_guard, clock, self.store)
        self.request_state_key = request_state_key
        self.direct_tools = checked_direct_tools(direct_tools)
        self._frozen = False  # from the first use on, the options are what it was built with
        self.catalog = Catalog(disabled)
        self._shapes = Shapes(
            shapes,
            checked_after=shapes_checked_after,
            store=lambda: self.store,
            key=request_state_key,
            clock=clock,
            catalog=self.catalog,
        )
        self.saved_programs = kept_programs(
            programs,
            self.catalog,
            lambda: self.limits,
            lambda: self.store,
            request_state_key,
            lambda: self._options.on_event,
        )
        """The saved programs: the host's, and each subject's own (`SavedPrograms`)."""
        saved = self.saved_programs
        self._engines = EngineSlot(self, self._shapes.book)
        self._discovery = Discovery(
            self.catalog, self._engines.engine, lambda: self.clock, saved.overlay
        )
        self._runner = Runner(
            self,
            lambda: self._options,
            self._engines,
            self._discovery,
            programs=saved,
            reading=saved.going_on,
        )
        self._sources = Sources(  # functions, each source
            self.catalog, companion=self._shapes, reserved=lambda: saved.reserved
        )
        self._sessions = Sessions(self, self._runner)

    def __repr__(self) -> str:
        return f"CodeMode(name={self.name!r}, capabilities={len(self.catalog.enabled)})"

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
        shapes: bool | str | os.PathLike[str] | None = None,
        programs: str | os.PathLike[str] | None = None,
    ) -> None:
        """Change options given at construction (None keeps one), as a command line does
        after loading an app (`programs`: the folder subjects' saved programs are kept in).
        Refused with RuntimeError once the CodeMode has searched, described, run or
        served anything: caches built from the old options would go stale."""
        if self._frozen:
            raise RuntimeError("configure() is refused once the CodeMode has been used")
        self._options = self._options.configured(
            authorizer=authorizer,
            hide_forbidden=hide_forbidden,
            on_event=on_event,
            trace_arguments=trace_arguments,
            disclose_limits=disclose_limits,
        )
        if shapes is not None:
            self._shapes.adopt(shapes)
            self._engines.shapes = self._shapes.book
        if programs is not None:
            self.saved_programs.keep_in(programs)

    def _freeze(self) -> None:
        """Fix the options, check `disabled` names (a likely typo) and the policy once."""
        if not self._frozen:
            self.catalog.check_disabled()
            self.saved_programs.adopt(self._options.policy_for)  # it may name programs.save
            self._frozen = True

    def prepare(self) -> None:
        """Fix the configuration and build what discovery reads (the search index, each
        capability's description and schemas), as serving does before its first request,
        so that no request pays for it on an event loop. Raises what the first use does:
        a `disabled` id that names nothing, or a policy that does not fit."""
        self._freeze()
        self._discovery.prepare()

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
        resource: Resolver | None = None,
    ) -> Callable[[F], F]:
        """Register a sync or async function; the program calls it by keyword as `name(...)`.

        `max_calls_per_execution` and `timeout` (seconds) override the `Limits` defaults.
        `example` is a call `describe` shows, checked against the signature. `annotations`
        are MCP's tool hints (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
        `openWorldHint`; the rest presumed as MCP does): policies read them, and error reports
        say effects stand, none for read-only, or "may have had" with no hint. `resource`
        finds the `Entity` a call acts on for policies (`codemode.capabilities.entities`).
        Raises `RegistrationError` when decorating for a bad name, a duplicate, an example or
        resource that does not fit, or hints that cannot cross the boundary.
        """

        def register(handler: F) -> F:
            capability = build_capability(
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
                resource=resource,
            )
            self._sources.functions.add(capability)
            return handler

        return register

    def add_source(self, source: Source) -> tuple[str, ...]:
        """Register a source of capabilities (`codemode.sources.Source`): it is opened now,
        what it offers joins the catalog (all of it, or none), its changes are followed,
        and it is closed with the CodeMode. At any time: once the `CodeMode` is in use, the
        policy checks the new capabilities before any program can see them. Returns their
        names; raises `RegistrationError` (its name taken, it cannot be opened, or the
        policy refuses it), and nothing of it stays."""
        added = tuple(c.name for c in self._sources.add(source))
        if self._frozen:  # in use: index them now, not in the next search on an event loop
            self.prepare()
        return added

    def add_program(self, name: str, source: str, *, summary: str) -> str:
        """Keep a program as the capability `programs.<name>`, shared with every subject:
        checked as `execute` checks one, its main's keyword-only parameters its signature,
        its return annotation its result (`Any` without one). Returns the capability
        name; raises `RegistrationError` (`program <name>: ...`)."""
        return self.saved_programs.add(name, source, summary=summary)

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
        return self._shapes.described(self.visible(subject), name, subject)

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
            return self._shapes.described(view[1], name, subject)

    def visible(self, subject: str | None = None) -> View:
        """The capabilities `subject` can see: all enabled ones unless `hide_forbidden`."""
        self._freeze()
        return self._discovery.visible(self._options, subject)[1]

    def execute(
        self,
        source: str,
        *,
        subject: str,
        session: str | None = None,
        save_as: SaveAs | None = None,
    ) -> ExecutionResult:
        """Run a program that defines main(); raises a CodeModeError on any failure.
        In a `session` ("new", or an earlier result's `session`) it starts from what the
        session's last program left at top level and, if it succeeds, leaves its own.

        Nothing else leaves it: whatever the program, handlers, authorizer or audit sink
        do, an unexpected failure is logged and raised as `InternalError`. The one
        exception is the first use's check of the configuration, raised as it is: a
        `disabled` id that names nothing, or a policy that does not fit the capabilities.
        `save_as`: once it succeeded, keep it as `programs.<name>` for `subject`
        (authorized as the call `programs.save`; `saved_programs.saved(execution_id)`).
        """
        self._freeze()
        return self._sessions.execute(source, subject, session, save_as)

    async def execute_async(
        self,
        source: str,
        *,
        subject: str,
        approve: Approver | None = None,
        unavailable: str = "",
        session: str | None = None,
        save_as: SaveAs | None = None,
    ) -> ExecutionResult:
        """As `execute`, awaiting. Async handlers and authorizers run on the engine's own
        event loop (or on `host_loop`), never on the calling one.

        `approve` asks a person about each call the authorizer answers
        `RequireApproval` for (True runs it); the program pauses meanwhile, holding no
        worker, each answer within `Limits.max_approval_wait_seconds`. Without it such a
        call fails with `approval unavailable` (fail closed), saying `unavailable` if given;
        the session (if any) stays busy for others meanwhile."""
        self._freeze()
        return await self._sessions.execute_async(
            source, subject, session, approve, unavailable, save_as
        )

    async def start_async(
        self,
        source: str,
        *,
        subject: str,
        pausable: bool = True,
        session: str | None = None,
        save_as: SaveAs | None = None,
    ) -> ExecutionResult | Paused:
        """As `execute_async`, for a caller that asks a person itself: a program that
        reaches a call needing approval pauses and is answered `Paused`, for
        `resume_async` (here or on another replica) once the person has answered."""
        self._freeze()
        return await self._sessions.start(source, subject, session, pausable, save_as)

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
        return await self._sessions.resume(state, subject, answers, pausable)

    def check(self, source: str, *, subject: str | None = None) -> list[CodeModeError]:
        """What the static preflight finds in a program, without running anything: each
        mistake as an error of its own with its `where`, in source order (`str()` of each
        names `<codemode>:LINE:COL`, as `execute` does); empty when there is nothing to
        report. With `subject`, against the capabilities that subject sees."""
        self._freeze()
        return self._runner.check(source, subject)

    def close(self) -> None:
        """Cancel running executions, stop the worker processes and close every source
        (an upstream MCP server's sessions end, a REST API's pools close; never waits on
        host code: a handler still running is left to finish on its own). A closed
        CodeMode starts nothing more: executions end `canceled`."""
        self._engines.close(then=self._sources.close)

    def __enter__(self) -> CodeMode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CodeMode"]
