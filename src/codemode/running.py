"""Running programs for a CodeMode: a new one to its end, or on from a paused state.

Every run reads one snapshot of the catalog, as its subject sees it, to its end. A run
that may pause goes through the resume protocol (`codemode.continuations.Resumer`), to
which the `Runner` is the engine: it admits a subject, starts a program, and opens what a
subject sees now for a paused program to go on in. `last_resort` is the one net at the
public edge of every request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Protocol

import anyio

from codemode.capabilities import Snapshot, View
from codemode.clock import Clock
from codemode.continuations import (
    Opened,
    Paused,
    PausedState,
    ReplayGuard,
    Resumer,
    SessionSlot,
    Verdict,
)
from codemode.discovery import Discovery
from codemode.engine_slot import EngineSlot, build_execution
from codemode.errors import CodeModeError, InternalError, InvalidRequestError
from codemode.events import EventHandler
from codemode.limits import LimitKind, Limits, exceeded, size
from codemode.options import Options
from codemode.programs import SaveAs, SavedPrograms
from codemode.runtime import Engine, Execution, ExecutionResult, Programs, new_execution_id

log = logging.getLogger("codemode")


class RunSettings(Protocol):
    """What a run reads of its CodeMode at the moment it starts (a host may assign
    `replay_guard` until then)."""

    @property
    def limits(self) -> Limits: ...

    @property
    def replay_guard(self) -> ReplayGuard: ...

    @property
    def on_event(self) -> EventHandler | None: ...


class Runner:
    """Runs programs on a CodeMode's engine, each over what its subject sees now.

    It is also the engine the resume protocol knows (`codemode.continuations.Engine`):
    `admit`, `start`, `open` and `last_resort`, with the settings it reads. A runner
    `in_session` runs every program it starts or goes on with in that session."""

    def __init__(
        self,
        settings: RunSettings,
        options: Callable[[], Options],
        engines: EngineSlot,
        discovery: Discovery,
        session: SessionSlot | None = None,
        programs: SavedPrograms | None = None,
        save_as: SaveAs | None = None,
        reading: Callable[[PausedState], None] | None = None,
    ) -> None:
        self._settings = settings
        self._options = options
        self._engines = engines
        self._discovery = discovery
        self._session = session
        self._programs = programs
        """The saved programs a program may call (and save itself among)."""
        self._save_as = save_as
        self._reading = reading
        """Takes back what a paused program's state carries for the saved programs (a
        save's plan), wherever it goes on."""

    def in_session(self, session: SessionSlot | None) -> Runner:
        """This runner, its programs run in `session` (its state in, the state left out)."""
        return Runner(
            self._settings,
            self._options,
            self._engines,
            self._discovery,
            session,
            self._programs,
            self._save_as,
            self._reading,
        )

    def saving(self, save_as: SaveAs | None) -> Runner:
        """This runner, each program it starts kept as `save_as` says once it succeeded."""
        if save_as is None:
            return self
        if self._programs is not None:
            self._programs.save_action()  # a policy can name it before the first save
        return Runner(
            self._settings,
            self._options,
            self._engines,
            self._discovery,
            self._session,
            self._programs,
            save_as,
            self._reading,
        )

    @property
    def limits(self) -> Limits:
        return self._settings.limits

    @property
    def replay_guard(self) -> ReplayGuard:
        return self._settings.replay_guard

    @property
    def on_event(self) -> EventHandler | None:
        return self._settings.on_event

    @property
    def resumer(self) -> Resumer[ExecutionResult]:
        """The resume protocol over this engine and the settings now."""
        return Resumer(self, self._reading)

    def execute(self, source: str, subject: str) -> ExecutionResult:
        """Run a new program to its end, on the caller's thread (it cannot pause)."""
        with last_resort("execute"):
            engine = self._engines.engine_for(subject)
            began, execution_id = engine.clock.now(), new_execution_id()
            snapshot, view = self._discovery.visible(self._options(), subject, execution_id)
            view, spent = self._saving(view, execution_id), engine.clock.now() - began
            execution = self._execution(
                source, subject, engine, snapshot, view, False, None, None, execution_id, spent
            )
            try:
                outcome = engine.execute(execution)
            except BaseException:
                self._kept(execution_id, None)
                raise
            assert isinstance(outcome, ExecutionResult)  # it cannot pause
            self._kept(execution_id, outcome)
            return outcome

    def check(self, source: str, subject: str | None) -> list[CodeModeError]:
        """What the static preflight finds in a program, against what `subject` sees."""
        if not isinstance(source, str):
            raise InvalidRequestError("the program must be a string")
        limits = self.limits
        written = len(source.encode("utf-8", errors="surrogatepass"))
        if written > limits.max_source_bytes:
            return [exceeded(LimitKind.SOURCE_SIZE, limits, amount=size(written))]
        view = self._discovery.visible(self._options(), subject)[1]
        book = self._engines.shapes
        if book is None:
            return Programs(view).check(source)
        return Programs.learning(view, book, subject).check(source)

    def admit(self, subject: str) -> Clock:
        return self._engines.engine_for(subject).clock

    async def start(
        self, source: str, subject: str, pausable: bool, unavailable: str | None = None
    ) -> ExecutionResult | Paused:
        """Run a new program on the engine: its answer, or its first pause."""
        with last_resort("execute_async"):
            engine = self._engines.engine_for(subject)
            began, execution_id = engine.clock.now(), new_execution_id()
            snapshot, view = await self._visible_async(subject, execution_id)
            spent = engine.clock.now() - began
            execution = self._execution(
                source, subject, engine, snapshot, view, pausable, None, None, execution_id, spent
            )
            execution.dispatcher.unavailable = unavailable
            return await self._ended(execution_id, engine.execute_async(execution))

    async def open(self, subject: str, execution_id: str) -> Opened[ExecutionResult]:
        engine = self._engines.engine_for(subject)
        began = engine.clock.now()
        snapshot, view = await self._visible_async(subject, execution_id)
        seen = engine.clock.now() - began  # counts against the time it has left
        return _Opened(self, engine, subject, snapshot, view, seen)

    async def _ended(
        self, execution_id: str, running: Awaitable[ExecutionResult | Paused]
    ) -> ExecutionResult | Paused:
        """What `running` answers; its save kept once it succeeded (a pause keeps it
        staged for the resume)."""
        try:
            outcome = await running
        except BaseException:
            self._kept(execution_id, None)
            raise
        if isinstance(outcome, ExecutionResult):
            self._kept(execution_id, outcome)
        return outcome

    def _kept(self, execution_id: str, outcome: ExecutionResult | None) -> None:
        if self._programs is not None:
            self._programs.commit(execution_id, outcome)

    def last_resort(self, what: str) -> contextlib.AbstractContextManager[None]:
        return last_resort(what)

    async def _visible_async(self, subject: str, execution_id: str) -> tuple[Snapshot, View]:
        found = await self._discovery.visible_async(self._options(), subject, execution_id)
        return found[0], self._saving(found[1], execution_id)

    def _saving(self, view: View, execution_id: str) -> View:
        """What a run sees: with `programs.save` when it saves (its trailer calls it), a
        paused one that saves as well when it goes on."""
        programs = self._programs
        if programs is None or (self._save_as is None and not programs.planned(execution_id)):
            return view
        return programs.saving(view)

    def _execution(
        self,
        source: str,
        subject: str,
        engine: Engine,
        snapshot: Snapshot,
        view: View,
        pausable: bool,
        restored: PausedState | None,
        verdicts: Mapping[str, Verdict] | None,
        execution_id: str | None = None,
        spent: float = 0.0,
    ) -> Execution:
        execution_id = execution_id or (None if restored is None else restored.execution_id)
        execution_id = execution_id or new_execution_id()
        appendix, authorizer, programs = None, None, self._programs
        if programs is not None:
            appendix = programs.appendix(
                source,
                subject,
                self._save_as,
                view=view,
                execution_id=execution_id,
                can_ask=pausable,
            )
            if appendix is not None:  # it calls saved programs, or saves itself
                authorizer = programs.watching(snapshot.policy, execution_id, view)
        return build_execution(
            self._options(),
            source,
            subject,
            engine,
            snapshot,
            view,
            pausable,
            restored,
            verdicts,
            execution_id=execution_id,
            spent=spent,
            session=self._session,
            appendix=appendix,
            authorizer=authorizer,
        )


class _Opened:
    """What a subject sees now, ready to run a paused program on
    (`codemode.continuations.Opened`)."""

    def __init__(
        self,
        runner: Runner,
        engine: Engine,
        subject: str,
        snapshot: Snapshot,
        view: View,
        seen: float,
    ) -> None:
        self._runner, self._engine, self._subject = runner, engine, subject
        self._snapshot, self._view, self._seen = snapshot, view, seen
        self._execution: Execution | None = None

    async def digest(self) -> str:
        return await anyio.to_thread.run_sync(self._engine.setup(self._view).digest)

    async def run(
        self, state: PausedState, verdicts: Mapping[str, Verdict], pausable: bool
    ) -> ExecutionResult | Paused:
        self._execution = self._runner._execution(
            state.source,
            self._subject,
            self._engine,
            self._snapshot,
            self._view,
            pausable,
            state,
            verdicts,
            spent=self._seen,
        )
        running = self._engine.execute_async(self._execution)
        return await self._runner._ended(self._execution.execution_id, running)

    @property
    def began(self) -> bool:
        return self._execution is not None and self._execution.began is not None


@contextlib.contextmanager
def last_resort(what: str) -> Iterator[None]:
    """The one net at the public edge: nothing but a CodeModeError (or the caller's own
    cancellation) leaves; a KeyboardInterrupt or SystemExit passes only when it was raised
    in the host's main thread, never one from host code elsewhere."""
    try:
        yield
    except (CodeModeError, asyncio.CancelledError):
        raise
    except (KeyboardInterrupt, SystemExit):
        if threading.current_thread() is threading.main_thread():
            raise
        raise InternalError() from None
    except BaseException:
        with contextlib.suppress(BaseException):  # a logging hook is host code too
            log.exception("%s failed unexpectedly", what)
        raise InternalError() from None


__all__ = ["RunSettings", "Runner", "last_resort"]
