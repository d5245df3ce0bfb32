"""Sessions: what programs leave at top level, kept behind a handle any replica continues.

A program run with `session="new"` or a handle a result gave starts from the globals the
session's last successful program left and, only when it succeeds, leaves its own. The
state is sealed (`codemode.continuations.Sealer`) under a key derived from the subject and
the handle, so the store holds neither, another subject's lookup finds nothing, and a
made-up, expired or evicted handle reads exactly as another subject's: `session not
found`, with no way to tell which. One program runs in a session at a time: it holds the
session's lease (`session busy` for another meanwhile), and writes its state fenced by it,
so a run that outlived its lease cannot overwrite the next holder's state.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import inspect
import logging
import re
import secrets
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, cast

import anyio
from cryptography.exceptions import InvalidTag

from codemode.clock import Clock, wall
from codemode.continuations import (
    INFLATION,
    ApprovalRequest,
    Approver,
    MemoryStore,
    Paused,
    PausedState,
    Sealer,
    SessionRecord,
    SessionSlot,
    Store,
    claim_seconds,
    given_key,
    session_digest,
)
from codemode.errors import (
    InvalidRequestError,
    ResumeRefusedError,
    SessionBusyError,
    SessionNotFoundError,
    UnauthenticatedError,
)
from codemode.limits import Limits
from codemode.programs import SaveAs
from codemode.running import Runner, last_resort
from codemode.runtime import ExecutionResult, KeptState, bound_seconds, current_watch

log = logging.getLogger("codemode")
T = TypeVar("T")

NEW = "new"
"""The `session` that starts one."""
HANDLE = re.compile(r"s-[A-Za-z0-9_-]{22}")
"""A handle: `s-` and 16 random bytes in unpadded base64url."""
LEASE_GRACE_SECONDS = 5.0
"""How long a session's lease outlasts the longest its program may run."""
SESSIONS_OFF = "sessions are off on this server; send the program without a session"


class SessionSettings(Protocol):
    """What sessions read of their CodeMode at each use."""

    @property
    def limits(self) -> Limits: ...

    @property
    def sessions(self) -> bool: ...

    @property
    def store(self) -> Store: ...

    @property
    def request_state_key(self) -> str | bytes | None: ...

    @property
    def clock(self) -> Clock | None: ...


@dataclass(slots=True)
class _Held:
    """A session as one program holds it: its handle, store keys, lease token and slot."""

    handle: str
    key: str
    group: str
    token: str | None
    """The lease's token; None for a new session, which no one else can name yet."""
    slot: SessionSlot

    @property
    def lease(self) -> str:
        return self.key + ":lease"


class Sessions:
    """Runs programs in sessions over a CodeMode's store, sealed under its key."""

    def __init__(self, settings: SessionSettings, runner: Runner) -> None:
        self._settings = settings
        self._runner = runner
        self._sealer: Sealer | None = None

    def execute(
        self, source: str, subject: str, session: str | None, save_as: SaveAs | None = None
    ) -> ExecutionResult:
        """`CodeMode.execute`: a new program to its end, in `session` if given, kept as
        `save_as` says once it succeeded."""
        with last_resort("execute"):
            runner = self._runner.saving(save_as)
            return self.run_sync(
                subject, session, lambda slot: runner.in_session(slot).execute(source, subject)
            )

    async def execute_async(
        self,
        source: str,
        subject: str,
        session: str | None,
        approve: Approver | None,
        unavailable: str,
        save_as: SaveAs | None = None,
    ) -> ExecutionResult:
        """`CodeMode.execute_async`: to its end, asking `approve` about calls that need a
        person, in `session` if given (busy for others meanwhile)."""
        with last_resort("execute_async"):
            runner = self._runner.saving(save_as)
            if session is None:
                resumer = runner.resumer
                return await resumer.execute(source, subject, approve, unavailable or None)
            held = await self._hold(subject, session)
            try:
                outcome = await runner.in_session(held.slot).resumer.execute(
                    source, subject, self._holding(held, approve), unavailable or None
                )
            except BaseException:
                await self._let_go(held)
                raise
            return await self._kept(held, outcome)

    async def start(
        self,
        source: str,
        subject: str,
        session: str | None,
        pausable: bool,
        save_as: SaveAs | None = None,
    ) -> ExecutionResult | Paused:
        """`CodeMode.start_async`: to its end or its first pause, in `session` if given. A
        paused program holds its session (busy for others) until it resumes or expires,
        and its state names the session its resume writes. It never waits for a person
        (it pauses instead), so its lease lasts its run alone."""
        with last_resort("execute_async"):
            runner = self._runner.saving(save_as)
            if session is None:
                return await runner.resumer.start(source, subject, pausable)
            held = await self._hold(subject, session)
            try:
                outcome = await runner.in_session(held.slot).resumer.start(
                    source, subject, pausable
                )
            except BaseException:
                await self._let_go(held)
                raise
            return await self._ended(held, outcome)

    async def resume(
        self, state: bytes, subject: str, answers: Mapping[str, bool], pausable: bool
    ) -> ExecutionResult | Paused:
        """`CodeMode.resume_async`: a paused program goes on; one paused in a session
        writes its state there when it succeeds, fenced by the lease its pause holds."""
        with last_resort("resume_async"):
            resumer = self._runner.resumer
            paused = await resumer.read(state)
            if not paused.session:
                return await resumer.resume(state, subject, answers, pausable)
            held = self._held(subject, paused.session, paused.id)
            try:
                outcome = await self._runner.in_session(held.slot).resumer.resume(
                    state, subject, answers, pausable
                )
            except ResumeRefusedError:
                raise  # nothing ran: the lease stays its own resume's (or lapses)
            except BaseException:
                await self._let_go(held)
                raise
            return await self._ended(held, outcome)

    def _holding(self, held: _Held, approve: Approver | None) -> Approver | None:
        """`approve`, which holds the session's lease on for the person's wait, and the
        run after it, each time a person is asked: a lease taken for every wait at the
        start would keep the session busy that long after a replica that stopped."""
        if approve is None or held.token is None:
            return approve
        token = held.token
        limits, store = self._settings.limits, self._settings.store
        seconds = limits.max_approval_wait_seconds + _lease_seconds(limits)
        on_a_thread = not inspect.iscoroutinefunction(approve)

        async def asking(request: ApprovalRequest) -> object:
            with contextlib.suppress(Exception):  # a store that fails: the lease as it was
                await store.put(held.lease, token.encode(), seconds, holder=(held.lease, token))
            if on_a_thread:  # as `ask_each` runs it; its answer passes untouched
                answer = await anyio.to_thread.run_sync(approve, request, abandon_on_cancel=True)
            else:
                answer = approve(request)
            return await answer if inspect.isawaitable(answer) else answer

        return cast(Approver, asking)

    def run_sync(
        self,
        subject: str,
        session: str | None,
        execute: Callable[[SessionSlot | None], ExecutionResult],
    ) -> ExecutionResult:
        """A program in `session` (None: in none) on the caller's thread, as
        `execute_async` runs one: the store is asked on one loop of its own,
        made once per program and bare (`asyncio.run` would make one per exchange and,
        on the main thread, swap the SIGINT handler each time, which formats the repr of
        every result, a session's whole state among them)."""
        if session is None:
            return execute(None)
        loop = asyncio.new_event_loop()
        try:
            held = _asked(loop, self._hold(subject, session))
            try:
                outcome = execute(held.slot)
            except BaseException:
                _asked(loop, self._let_go(held))
                raise
            return _asked(loop, self._kept(held, outcome))
        finally:
            loop.close()

    async def _hold(self, subject: str, session: str) -> _Held:
        """The session, its lease held: a new one, or the stored one's state; refused
        (nothing run) as `session not found`, `session busy` or `resume refused`."""
        settings = self._settings
        if not isinstance(session, str):
            raise InvalidRequestError('the session must be "new" or a handle a result gave')
        if not settings.sessions:
            raise InvalidRequestError(SESSIONS_OFF)
        if not isinstance(subject, str) or not subject.strip():
            raise UnauthenticatedError()
        if session == NEW:
            handle = "s-" + base64.urlsafe_b64encode(secrets.token_bytes(16)).decode()[:22]
            return self._held(subject, handle, None)
        if HANDLE.fullmatch(session) is None:
            raise SessionNotFoundError()
        held = self._held(subject, session, uuid.uuid4().hex)
        assert held.token is not None
        store, limits = settings.store, settings.limits
        if not await store.claim(held.lease, held.token, _lease_seconds(limits)):
            raise SessionBusyError()
        try:
            blob = await store.get(held.key)
            if blob is None:
                raise SessionNotFoundError()
            try:
                encoded = self._sealed().open(blob, held.key)
            except InvalidTag:
                raise SessionNotFoundError() from None
            held.slot.state = SessionRecord.decode(encoded, limits).dump
        except BaseException:
            await self._let_go(held)
            raise
        return held

    async def _ended(
        self, held: _Held, outcome: ExecutionResult | Paused
    ) -> ExecutionResult | Paused:
        """A paused program keeps the session held; an answer lets it go, and so does a
        pause whose lease the store would not hand on (its program is answered an error)."""
        if isinstance(outcome, Paused):
            try:
                return await self._paused(held, outcome)
            except BaseException:
                await self._let_go(held)
                raise
        return await self._kept(held, outcome)

    async def _kept(self, held: _Held, outcome: ExecutionResult) -> ExecutionResult:
        try:
            return await self._keep(held, outcome)
        finally:
            await self._let_go(held)

    async def _paused(self, held: _Held, outcome: Paused) -> Paused:
        """The paused program's state, naming its session, whose lease passes to the
        state's id until the state expires (a pause left unanswered lets it lapse, the
        session as it was)."""
        settings = self._settings
        limit = settings.limits.max_paused_bytes
        state = PausedState.decode(outcome.state, limit, INFLATION * limit)
        now = wall(settings.clock)
        seconds = claim_seconds(state.expires_at, now)
        store = settings.store
        if held.token is None:
            taken = await store.claim(held.lease, state.id, seconds)
        else:
            taken = await store.put(
                held.lease, state.id.encode(), seconds, holder=(held.lease, held.token)
            )
        if not taken:
            raise SessionBusyError()
        stamped_state = replace(state, session=held.handle).encode()
        return Paused(outcome.requests, stamped_state)

    async def _keep(self, held: _Held, outcome: ExecutionResult) -> ExecutionResult:
        """Store what a program that succeeded left, fenced by its lease, and count the
        session used now (the subject's least recently used past its bound is let go); the
        result names the session and says what it holds."""
        kept = held.slot.kept
        if kept is None:
            return outcome
        settings = self._settings
        store, limits = settings.store, settings.limits
        now = wall(settings.clock)
        record = SessionRecord.kept(kept, limits, now)
        encoded = record.encode(compress=not isinstance(store, MemoryStore))
        blob = self._sealed().seal(encoded, held.key)
        idle = limits.session_idle_seconds
        holder = None if held.token is None else (held.lease, held.token)
        try:
            # Counted first: a session whose state is stored is always one the bound
            # counts (a count whose state never came lapses on its own).
            await store.admit(held.group, held.key, limits.max_sessions_per_subject, idle)
            stored = await store.put(held.key, blob, idle, holder=holder)
        except Exception:
            log.warning("the store failed while keeping a session's state", exc_info=True)
            stored = False
        if not stored:
            log.warning("a session's state was not kept; the result is answered without it")
            return outcome
        names = dict(held.slot.names or {})
        return replace(outcome, session=held.handle, kept=KeptState(names, len(kept)))

    async def _let_go(self, held: _Held) -> None:
        """Release the lease, even for a caller that gave up (an MCP client's cancel):
        shielded, since its cancel scope would cancel the release too, and the session
        would stay busy as long as the lease lasts (a run with a person to ask: every
        approval's wait)."""
        if held.token is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self._settings.store.release(held.lease, held.token)

    def _held(self, subject: str, handle: str, token: str | None) -> _Held:
        """`handle` of `subject` as a program holds it: its store keys, named by digests
        under the server's key, the lease's token and an empty slot."""
        sealer = self._sealed()
        key = "codemode:session:" + sealer.index(subject, handle)
        group = "codemode:sessions:" + sealer.index(subject, "")
        return _Held(handle, key, group, token, _slot(handle))

    def _sealed(self) -> Sealer:
        """The sealer, made on first use from the key the CodeMode holds then."""
        if self._sealer is None:
            self._sealer = Sealer(given_key(self._settings.request_state_key))
        return self._sealer


def _asked(loop: asyncio.AbstractEventLoop, exchange: Coroutine[Any, Any, T]) -> T:
    """What `exchange` with the store gives, run on `loop`: on this thread, or on a thread
    of its own when a loop runs on this one already (a notebook's, whose cells call
    `execute`), as a thread runs one loop at a time."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return loop.run_until_complete(exchange)
    with concurrent.futures.ThreadPoolExecutor(1, "codemode-session") as thread:
        return thread.submit(loop.run_until_complete, exchange).result()


def _slot(handle: str) -> SessionSlot:
    """An empty slot for the session `handle`, named in the audit by its digest only."""
    return SessionSlot(digest=session_digest(handle))


def _lease_seconds(limits: Limits) -> float:
    """How long a program may hold its session at a time: its run (and, once a person is
    asked, the wait as well: `Sessions._holding`). A task's run is bound longer, so its
    lease is too, or another program could take its session while it still runs."""
    return bound_seconds(limits, current_watch()) + LEASE_GRACE_SECONDS


__all__ = ["HANDLE", "LEASE_GRACE_SECONDS", "NEW", "SESSIONS_OFF", "SessionSettings", "Sessions"]
