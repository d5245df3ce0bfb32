"""Approvals, the first user of continuations: what a person is asked, and their verdict.

An authorizer answers `RequireApproval(message)`; the execution pauses at that call and
answers `Paused`, whose `requests` say what the person is asked. How each request ended
is a `Verdict`, and `decide` is the one place a verdict is made, whoever answered (an
approver in this process, a client's retry on any replica, or no one at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

import anyio

from codemode.clock import Clock
from codemode.continuations.state import PausedState
from codemode.events import ApprovalAsked, Event
from codemode.limits import Limits
from codemode.types import JSONObject

log = logging.getLogger("codemode")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a person is asked: one call, held until they answer. `message` is the
    authorizer's own text, for the person; the model never sees it."""

    key: str
    """Tells the requests of one pause apart (`approval-3`), as the answers name them."""
    subject: str
    execution_id: str
    capability_name: str
    capability_id: str
    arguments: JSONObject
    """The call's canonical arguments, as the authorizer saw them."""
    message: str


class Verdict(StrEnum):
    """How a request for approval ended (made by `decide` alone)."""

    APPROVED = "approved"
    DECLINED = "declined"
    """Declined or dismissed: the call does not run."""
    TIMED_OUT = "timed_out"
    """No one answered within `Limits.max_approval_wait_seconds`."""
    UNAVAILABLE = "unavailable"
    """No one was asked: the program paused, but its state could not be made resumable
    (the replay guard could not be reached), so it goes on at once without the call."""


def decide(answer: object, *, asked: bool = True, late: bool = False) -> Verdict:
    """The verdict of one request: unavailable when no one was asked, timed out when the
    answer came past the wait (or never), approved only for an answer that is exactly
    True, and declined for anything else (False, none, an approver that failed)."""
    if not asked:
        return Verdict.UNAVAILABLE
    if late:
        return Verdict.TIMED_OUT
    return Verdict.APPROVED if answer is True else Verdict.DECLINED


def verdicts(state: PausedState, answers: Mapping[str, object], now: float) -> dict[str, Verdict]:
    """The verdicts of a pause answered at `now` (seconds since the epoch): a request
    past the wait the pausing replica gave it timed out, whatever this replica's wait; a
    request left out of `answers` is declined."""
    return {ask.key: decide(answers.get(ask.key), late=now > ask.deadline) for ask in state.asks}


def unavailable(state: PausedState) -> dict[str, Verdict]:
    """The verdicts of a pause no one is asked about: each call fails closed."""
    return {ask.key: decide(None, asked=False) for ask in state.asks}


@dataclass(frozen=True, slots=True)
class Paused:
    """A program paused until a person answers `requests`.

    `state` is everything it needs to go on, in the clear: seal it before it leaves the
    process (the MCP server does, with the SDK's request-state boundary), and resume it
    with `CodeMode.resume_async`.
    """

    requests: tuple[ApprovalRequest, ...]
    state: bytes


def paused_as(state: PausedState, encoded: bytes) -> Paused:
    """The `Paused` answer of a program paused as `state`, `encoded`: a request for each
    call it asks about, as the person reads it."""
    requests = tuple(
        ApprovalRequest(
            ask.key,
            state.subject,
            state.execution_id,
            ask.capability,
            ask.capability_id,
            ask.arguments,
            ask.message,
        )
        for ask in state.asks
    )
    return Paused(requests, encoded)


Approver = Callable[[ApprovalRequest], Awaitable[bool] | bool]
"""Asks a person: True approves the call, False (or anything else) declines it. An async
one runs on the caller's loop; a sync one on a thread of its own, left behind if no one
answers in time."""


def record_asked(paused: Paused, emit: Callable[[Event], None] | None) -> bool:
    """Record `approval_asked` for each request of `paused`, as a person is about to be
    asked (never for a program that could not be made resumable: no one is asked then).
    False when the audit sink fails: a question that cannot be audited is not asked."""
    if emit is None:
        return True
    for request in paused.requests:
        event = ApprovalAsked(
            execution_id=request.execution_id,
            subject=request.subject,
            time=time.time(),
            capability=request.capability_name,
            capability_id=request.capability_id,
            arguments=request.arguments,
            message=request.message,
        )
        try:
            emit(event)
        except BaseException:
            log.exception(
                "execution %s: the audit sink failed on ApprovalAsked; no one is "
                "asked, the calls are unavailable",
                request.execution_id,
            )
            return False
    return True


async def ask_each(
    paused: Paused, approve: Approver, limits: Limits, clock: Clock
) -> dict[str, Verdict]:
    """Ask a person about each request in turn, each within the approval wait, as
    `clock` tells it (the engine's: the one every wait of a program reads)."""
    verdicts: dict[str, Verdict] = {}
    asking = approve if inspect.iscoroutinefunction(approve) else _on_a_thread(approve)
    for request in paused.requests:
        answer: object = None
        try:
            async with _until(clock, clock.now() + limits.max_approval_wait_seconds):
                answer = await asking(request)
        except TimeoutError:
            verdicts[request.key] = decide(None, late=True)
            continue
        except Exception:  # host code that cannot ask declines (fail closed)
            log.exception("asking for approval of %s failed", request.capability_name)
        verdicts[request.key] = decide(answer)
    return verdicts


@contextlib.asynccontextmanager
async def _until(clock: Clock, when: float) -> AsyncIterator[None]:
    """TimeoutError for the wait inside once `clock` reaches `when`: its timer, rung on
    the clock's thread, expires an `asyncio.timeout` on the loop, which cancels the wait
    and tells that cancellation from the caller's own."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(None) as timeout:
        left = False

        def expire() -> None:
            if not left:
                timeout.reschedule(0)  # a moment long past on the loop: it expires now

        def ring() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: no one waits
                loop.call_soon_threadsafe(expire)

        timer = clock.call_at(when, ring)
        try:
            yield
        finally:
            left = True
            timer.cancel()


def _on_a_thread(approve: Approver) -> Callable[[ApprovalRequest], Awaitable[object]]:
    async def asking(request: ApprovalRequest) -> object:
        answer = await anyio.to_thread.run_sync(approve, request, abandon_on_cancel=True)
        return await answer if inspect.isawaitable(answer) else answer

    return asking


__all__ = [
    "ApprovalRequest",
    "Approver",
    "Paused",
    "Verdict",
    "ask_each",
    "decide",
    "paused_as",
    "record_asked",
    "unavailable",
    "verdicts",
]
