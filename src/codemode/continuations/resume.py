"""The resume protocol: a paused program is stamped, asked about, and goes on at most once.

A program that pauses answers `Paused`, whose state the replay guard's scope heads (the
guard that must vouch it resumes once) and for which `approval_asked` is recorded as a
person is asked. When no guard can vouch for it, or the question cannot be audited, no
one is asked: it goes on at once, its calls failing closed. A state that comes back
(here or on another replica) is read within this server's bound, refused to another
caller, another catalog, past its expiry or once resumed, claimed for as long as it could
be taken anywhere, and run on from where it stopped with its verdicts.

The protocol knows the engine only through `Engine` (which `CodeMode` gives it), so the
runtime below can use this package to pause and restore.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Generic, Protocol, TypeVar

import anyio

from codemode.clock import Clock, wall
from codemode.continuations.approvals import (
    Approver,
    Paused,
    Verdict,
    ask_each,
    record_asked,
    unavailable,
    verdicts,
)
from codemode.continuations.guards import ReplayGuard, claim_seconds
from codemode.continuations.state import INFLATION, PausedState, stamped
from codemode.errors import CodeModeError, InvalidRequestError, ResumeRefusedError
from codemode.events import EventHandler
from codemode.limits import Limits

log = logging.getLogger("codemode")

R = TypeVar("R")
"""What a program that ran to its end answers (`ExecutionResult`)."""
R_co = TypeVar("R_co", covariant=True)
"""The same, as the protocols below give it."""

GUARD_SECONDS = 10.0
"""How long the replay guard may take to answer (then a paused program is refused)."""

OTHER_CATALOG = "the capabilities changed while the program was paused; run it again"
RESUMED = "this paused program was resumed already"
OTHER_PROCESS = (
    "the program was paused where this server cannot tell whether it resumed already "
    "(another server process, or before its replay guard was reset); run it again"
)
UNGUARDED = "the server cannot tell whether this paused program resumed already; run it again"
EXPIRED = "the paused program expired; run it again"
NOT_YOURS = "the paused program belongs to another caller"


class Opened(Protocol[R_co]):
    """What a subject sees now, ready to run a paused program on from its state."""

    async def digest(self) -> str:
        """The `catalog_digest` of what the subject sees (off the event loop)."""
        ...

    async def run(
        self, state: PausedState, verdicts: Mapping[str, Verdict], pausable: bool
    ) -> R_co | Paused:
        """Go on from `state` with the person's verdicts: the answer, or the next pause."""
        ...

    @property
    def began(self) -> bool:
        """Whether the run got a slot (one refused a slot ran nothing)."""
        ...


class Engine(Protocol[R_co]):
    """What the protocol needs of the engine and of the host's settings, read each time
    (a host may change them between requests)."""

    @property
    def limits(self) -> Limits: ...

    @property
    def replay_guard(self) -> ReplayGuard: ...

    @property
    def on_event(self) -> EventHandler | None: ...

    def admit(self, subject: str) -> Clock:
        """The clock programs go by, once `subject` may run one here (raises as a new
        execution would: no subject, a closed CodeMode)."""
        ...

    async def start(
        self, source: str, subject: str, pausable: bool, why_unavailable: str | None = None
    ) -> R_co | Paused:
        """Run a new program: its answer, or its first pause (when not `pausable`, a call
        that needs approval fails, in the words of `why_unavailable` when given)."""
        ...

    async def open(self, subject: str, execution_id: str) -> Opened[R_co]:
        """What `subject` sees now, for the execution `execution_id` goes on with."""
        ...

    def last_resort(self, what: str) -> AbstractContextManager[None]:
        """The public edge's one net: nothing but a CodeModeError leaves it."""
        ...


class Resumer(Generic[R]):
    """Takes programs past their pauses: starts them, stamps and asks, resumes once.

    `reading`, when given, is handed each state that goes on, once it is its subject's and
    before what they see is opened: what guest code fed with the program carried in it
    (`PausedState.carried`) is taken back there, on whichever replica it goes on."""

    def __init__(
        self, engine: Engine[R], reading: Callable[[PausedState], None] | None = None
    ) -> None:
        self.engine = engine
        self.reading = reading

    async def execute(
        self,
        source: str,
        subject: str,
        approve: Approver | None,
        why_unavailable: str | None = None,
    ) -> R:
        """Run a program to its end, asking `approve` about each call that needs a
        person (without one, such a call fails closed, in the words of `why_unavailable`
        when given). The state never leaves the process, so nothing can replay it: no guard is
        asked."""
        engine = self.engine
        with engine.last_resort("execute_async"):
            outcome = await engine.start(source, subject, approve is not None, why_unavailable)
            while isinstance(outcome, Paused):
                assert approve is not None
                state = await self._decode(outcome.state)
                clock = engine.admit(subject)
                answered = unavailable(state)
                if await self._asked(outcome):
                    answered = await ask_each(outcome, approve, engine.limits, clock)
                opened = await self._open(state, subject)
                outcome = await self._run(opened, state, answered, True, claimed=False)
            return outcome

    async def start(self, source: str, subject: str, pausable: bool) -> R | Paused:
        """Run a program until its end or its first pause, stamped for `resume`."""
        with self.engine.last_resort("execute_async"):
            outcome = await self.engine.start(source, subject, pausable)
            return await self._resumable(outcome, subject)

    async def resume(
        self, state: bytes, subject: str, answers: Mapping[str, object], pausable: bool
    ) -> R | Paused:
        """Go on with a stamped state and the person's answers (by request key), at most
        once on any replica; `ResumeRefusedError` (nothing run) for a state that cannot.

        In this order: the state is read within this server's bound; the caller is
        admitted; the verdicts are decided as the answers arrive; the state is refused to
        another caller and to another catalog; it is refused past its expiry and claimed;
        then it runs."""
        engine = self.engine
        with engine.last_resort("resume_async"):
            paused = await self._decode(state)
            clock = engine.admit(subject)
            answered = verdicts(paused, answers, wall(clock))
            opened = await self._open(paused, subject)
            await self._claim(paused, clock)
            outcome = await self._run(opened, paused, answered, pausable, claimed=True)
            return await self._resumable(outcome, subject)

    async def _resumable(self, outcome: R | Paused, subject: str) -> R | Paused:
        """A paused program's state headed by the replay guard's scope now, which must
        vouch that it resumes once. When the guard cannot give one, no state could be
        resumed, so no one is asked (and `approval_asked` is not recorded): the program
        goes on at once, each call it paused at failing `approval unavailable`."""
        while isinstance(outcome, Paused):
            scope = await self._scope()
            if scope is not None and await self._asked(outcome):
                return Paused(outcome.requests, stamped(outcome.state, scope))
            state = await self._decode(outcome.state)
            self.engine.admit(subject)
            opened = await self._open(state, subject)
            outcome = await self._run(opened, state, unavailable(state), True, claimed=False)
        return outcome

    async def _open(self, state: PausedState, subject: str) -> Opened[R]:
        """What `subject` (admitted) sees now, once the state is theirs and of it."""
        if state.subject != subject:
            raise ResumeRefusedError(NOT_YOURS)
        if self.reading is not None:
            self.reading(state)
        opened = await self.engine.open(subject, state.execution_id)
        if await opened.digest() != state.catalog:
            raise ResumeRefusedError(OTHER_CATALOG)
        return opened

    async def _run(
        self,
        opened: Opened[R],
        state: PausedState,
        answered: Mapping[str, Verdict],
        pausable: bool,
        *,
        claimed: bool,
    ) -> R | Paused:
        """Run the state on; a claim whose run was refused a slot (nothing ran) is let
        go, so the same state can be sent again."""
        try:
            return await opened.run(state, answered, pausable)
        except CodeModeError:
            if claimed and not opened.began:
                with contextlib.suppress(Exception):
                    await self.engine.replay_guard.release(state.id)
            raise

    async def _claim(self, state: PausedState, clock: Clock) -> None:
        """The replay guard's word that this state resumes for the first time, or
        `ResumeRefusedError`. A state past its own expiry is refused on any replica,
        whatever its wait; a guard that cannot vouch for the state's scope refuses it, and
        so does one that cannot tell (Redis unreachable or silent): it might have resumed.
        The claim is kept as long as the state could be taken anywhere, as the state
        itself says, never for this replica's own approval wait (another's may be
        longer)."""
        now = wall(clock)
        if now >= state.expires_at:
            raise ResumeRefusedError(EXPIRED)
        try:
            async with asyncio.timeout(GUARD_SECONDS):
                seconds = claim_seconds(state.expires_at, now)
                claimed = await self.engine.replay_guard.claim(state.id, state.guard, seconds)
        except Exception:
            log.exception("the replay guard failed; the paused program does not resume")
            raise ResumeRefusedError(UNGUARDED) from None
        if claimed is None:
            raise ResumeRefusedError(OTHER_PROCESS)
        if not claimed:
            raise ResumeRefusedError(RESUMED)

    async def _scope(self) -> str | None:
        """The replay guard's scope now, for a state paused now (None when it cannot tell)."""
        try:
            async with asyncio.timeout(GUARD_SECONDS):
                return await self.engine.replay_guard.scope()
        except Exception:
            log.exception("the replay guard failed; no one is asked, the calls are unavailable")
            return None

    async def _asked(self, paused: Paused) -> bool:
        """`approval_asked` recorded for each request, now that a person will be asked
        (False when the audit sink failed: then no one is)."""
        return await anyio.to_thread.run_sync(record_asked, paused, self.engine.on_event)

    async def read(self, state: bytes) -> PausedState:
        """A paused program's state as `resume` reads it first (refused as it would be)."""
        with self.engine.last_resort("resume_async"):
            return await self._decode(state)

    async def _decode(self, state: bytes) -> PausedState:
        """The state read off the event loop (its dump may inflate to megabytes)."""
        if not isinstance(state, bytes):
            raise InvalidRequestError("a paused program's state must be bytes")
        limit = self.engine.limits.max_paused_bytes
        return await anyio.to_thread.run_sync(PausedState.decode, state, limit, INFLATION * limit)


__all__ = [
    "EXPIRED",
    "GUARD_SECONDS",
    "NOT_YOURS",
    "OTHER_CATALOG",
    "OTHER_PROCESS",
    "RESUMED",
    "UNGUARDED",
    "Engine",
    "Opened",
    "Resumer",
]
