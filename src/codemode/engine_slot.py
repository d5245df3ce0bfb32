"""The engine a CodeMode runs programs on: started at first use, refused once closed.

A CodeMode starts no worker, thread or loop until something needs one (an execution, or
a `can_see` check), so that a host can build, configure and check an app (`cm.check`,
`codemode check`) without starting anything. The slot holds that one engine; once the
CodeMode is closed it starts nothing more, and every later request ends `canceled`.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from codemode.authz import Authorizer
from codemode.capabilities import ShapeBook, Snapshot, View
from codemode.continuations import PausedState, SessionSlot, Verdict
from codemode.errors import ExecutionCanceledError, InvalidRequestError, UnauthenticatedError
from codemode.limits import Limits
from codemode.options import Options
from codemode.runtime import (
    Appendix,
    Clock,
    Engine,
    Execution,
    MontySandbox,
    Sandbox,
    current_watch,
)


class EngineSettings(Protocol):
    """What an engine is started with, read when it starts (a host may set them on the
    CodeMode until then: `cm.host_loop` in a web app's lifespan)."""

    @property
    def limits(self) -> Limits: ...

    @property
    def sandbox(self) -> Sandbox | None: ...

    @property
    def worker_binary(self) -> str | os.PathLike[str] | None: ...

    @property
    def clock(self) -> Clock | None: ...

    @property
    def host_loop(self) -> asyncio.AbstractEventLoop | None: ...


class EngineSlot:
    """At most one engine, started from `settings` when first needed, until `close()`."""

    def __init__(self, settings: EngineSettings, shapes: ShapeBook | None = None) -> None:
        self._settings = settings
        self.shapes = shapes
        """The book the engine's calls learn result shapes into (None: learning is off)."""
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self._closed = False
        self._closed_all = threading.Event()
        """Set once the first `close()` has ended everything; later ones wait for it."""

    @property
    def started(self) -> Engine | None:
        """The engine, or None while nothing has needed one (a check, a plain search)."""
        with self._lock:
            return self._engine

    @property
    def is_closed(self) -> bool:
        """Whether `close()` was called: nothing starts any more."""
        with self._lock:
            return self._closed

    def engine(self) -> Engine:
        """The running engine, started now when it was not; `ExecutionCanceledError`
        once closed."""
        with self._lock:
            if self._closed:
                raise ExecutionCanceledError()
            if self._engine is None:
                settings = self._settings
                sandbox = settings.sandbox or MontySandbox(settings.limits, settings.worker_binary)
                self._engine = Engine(
                    settings.limits,
                    sandbox,
                    clock=settings.clock,
                    host_loop=settings.host_loop,
                    shapes=self.shapes,
                )
            return self._engine

    def engine_for(self, subject: str) -> Engine:
        """The running engine for a request of `subject`; `UnauthenticatedError` when
        there is no subject to run as."""
        if not isinstance(subject, str) or not subject.strip():
            raise UnauthenticatedError()
        return self.engine()

    def close(self, then: Callable[[], None] = lambda: None) -> None:
        """Start nothing more, stop the engine, then `then` (the sources' close). A
        second close (a signal's closer, say) waits for the first to end, for at most
        `CLOSE_WAIT_SECONDS`."""
        with self._lock:
            first, self._closed = not self._closed, True
            engine, self._engine = self._engine, None
        if not first:
            self._closed_all.wait(CLOSE_WAIT_SECONDS)
            return
        try:
            if engine is not None:
                engine.close()
        finally:
            try:
                then()
            finally:
                self._closed_all.set()


CLOSE_WAIT_SECONDS = 10.0
"""How long a second `close()` waits for the first to end the workers and upstreams."""


def build_execution(
    options: Options,
    source: str,
    subject: str,
    engine: Engine,
    snapshot: Snapshot,
    view: View,
    pausable: bool = False,
    restored: PausedState | None = None,
    verdicts: Mapping[str, Verdict] | None = None,
    *,
    execution_id: str | None = None,
    spent: float = 0.0,
    session: SessionSlot | None = None,
    appendix: Appendix | None = None,
    authorizer: Authorizer | None = None,
) -> Execution:
    """An execution that reads one snapshot to its end: its capabilities, their hints
    and the authorizer built for them. `spent`: the time its request took already;
    `session`: the session it runs in; `appendix`: guest code fed with it (the saved
    programs it calls); `authorizer`: in place of the snapshot's (which it wraps)."""
    if not isinstance(source, str):
        raise InvalidRequestError("the program must be a string")
    return Execution(
        source=source,
        subject=subject,
        setup=engine.setup(view),
        authorizer=snapshot.policy if authorizer is None else authorizer,
        services=engine.services,
        emit=options.on_event,
        trace_arguments=options.trace_arguments,
        disclose_limits=options.disclose_limits,
        pausable=pausable,
        restored=restored,
        verdicts=verdicts,
        execution_id=execution_id,
        spent=spent,
        session=session,
        watch=current_watch(),
        appendix=appendix,
    )


__all__ = ["CLOSE_WAIT_SECONDS", "EngineSettings", "EngineSlot", "build_execution"]
