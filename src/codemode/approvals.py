"""A person approves a call in the middle of a program.

An authorizer answers `codemode.authz.RequireApproval(message)` for a call a person must
approve. The execution then pauses at that call: once its other calls in flight have
settled, the interpreter's state is dumped and its worker let go, so a paused program
holds no worker, no thread and no clock (`Limits.max_approval_wait_seconds` bounds the
wait instead). What the person is asked is an `ApprovalRequest`; the program resumes,
on this process or another, from the `Paused` state, with each request's `Verdict`.

A paused state resumes at most once: a `ReplayGuard` records each state it resumed,
in this process (`InProcessReplayGuard`, the default) or, for several replicas, in Redis
(`RedisReplayGuard`, the `codemode[redis]` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import anyio

from codemode.events import ApprovalAsked, Event
from codemode.limits import Limits
from codemode.types import JSONObject

log = logging.getLogger("codemode")

STATE_GRACE_SECONDS = 60.0
"""How much longer than the approval wait a sealed state is accepted (at most as long as
the wait itself): a retry that comes past the wait still resumes, so the program learns
that its approval timed out."""


CLOCK_SKEW_SECONDS = 300.0
"""How far apart the clocks of the replicas may be. A claim on a paused state is kept
this much longer than the state is valid, so a replica whose clock is behind, and so
still takes the state, finds it claimed."""


def state_seconds(limits: Limits) -> float:
    """How long a state paused under `limits` is valid: the pausing replica seals its
    expiry into it, and every replica refuses it from then on."""
    wait = limits.max_approval_wait_seconds
    return wait + min(STATE_GRACE_SECONDS, wait)


def claim_seconds(expires_at: float, now: float) -> float:
    """How long the claim on a state valid until `expires_at` is kept: as long as any
    replica could take the state (its own expiry, whichever replica resumes it, and the
    clock skew between them), never the resuming replica's own approval wait."""
    return max(expires_at - now, 0.0) + CLOCK_SKEW_SECONDS


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
    """How a request for approval ended."""

    APPROVED = "approved"
    DECLINED = "declined"
    """Declined or dismissed: the call does not run."""
    TIMED_OUT = "timed_out"
    """No one answered within `Limits.max_approval_wait_seconds`."""
    UNAVAILABLE = "unavailable"
    """No one was asked: the program paused, but its state could not be made resumable
    (the replay guard could not be reached), so it goes on at once without the call."""


@dataclass(frozen=True, slots=True)
class Paused:
    """A program paused until a person answers `requests`.

    `state` is everything it needs to go on, in the clear: seal it before it leaves the
    process (the MCP server does, with the SDK's request-state boundary), and resume it
    with `CodeMode.resume_async`.
    """

    requests: tuple[ApprovalRequest, ...]
    state: bytes


Approver = Callable[[ApprovalRequest], Awaitable[bool] | bool]
"""Asks a person: True approves the call, False (or anything else) declines it. An async
one runs on the caller's loop; a sync one on a thread of its own, left behind if no one
answers in time."""


@runtime_checkable
class ReplayGuard(Protocol):
    """Remembers the paused states already resumed, so each resumes at most once."""

    async def scope(self) -> str:
        """What the guard remembers for: a state is sealed with the scope it was paused
        under, and only a guard of that very scope can vouch that it resumes once."""
        ...

    async def claim(self, state_id: str, scope: str, seconds: float) -> bool | None:
        """True the first time `state_id` is claimed within `seconds`, False after; None
        when the guard cannot vouch for `scope` (another process's, or from before the
        guard forgot what it remembered). `seconds` covers the state's whole life, on
        any replica (`claim_seconds`): a claim must outlive every chance to resume."""
        ...

    async def release(self, state_id: str) -> None:
        """Forget a claim whose program never started (it was refused a slot)."""
        ...


class InProcessReplayGuard:
    """A replay guard for one process (stdio, one HTTP server): states it has resumed,
    forgotten once they could no longer be accepted anyway. Its scope is this process
    until it restarts (a forked worker is another process): a state paused before a
    restart, or by another process, might have resumed there, so it is refused."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._boot = uuid.uuid4().hex
        self._clock = clock
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    async def scope(self) -> str:
        """This process, as it runs now."""
        return f"process:{self._boot}:{os.getpid()}"

    async def claim(self, state_id: str, scope: str, seconds: float) -> bool | None:
        """True the first time `state_id` is claimed within `seconds`, False after; None
        for a state of another process."""
        if scope != await self.scope():
            return None
        now = self._clock()
        with self._lock:
            for key in [key for key, until in self._seen.items() if until <= now]:
                del self._seen[key]
            if state_id in self._seen:
                return False
            self._seen[state_id] = now + seconds
            return True

    async def release(self, state_id: str) -> None:
        """Forget a claim whose program never started."""
        with self._lock:
            self._seen.pop(state_id, None)


_SCHEMES = ("redis", "rediss", "unix")


_EPOCH = """
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
"""
"""The epoch, made by the first replica to ask (one exchange)."""
_CLAIM = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""
"""One state's claim, atomic: refused (-1) unless the epoch is the state's, then won (1)
by the first replica alone, lost (0) by the others."""


class RedisReplayGuard:
    """A replay guard shared by replicas, in Redis (`pip install 'codemode[redis]'`).

    Its scope is an epoch kept in Redis (`codemode:guard:epoch`, made by the first
    replica): a Redis that lost what it remembered (restarted without persistence,
    flushed, or another server or database) has another epoch, so the states paused
    before are refused rather than resumed again. A claim is `SET NX` under the epoch
    check, in one script, so one replica alone wins each state. Give Redis
    `maxmemory-policy noeviction`: an evicted claim could be claimed again.
    """

    PREFIX = "codemode:resumed:"
    EPOCH = "codemode:guard:epoch"
    TIMEOUT_SECONDS = 5.0
    """How long one exchange with Redis may take (then the state is refused)."""

    def __init__(self, url: str) -> None:
        self.check_url(url)
        self._url = url

    @classmethod
    def from_url(cls, url: str) -> RedisReplayGuard:
        """A guard over the Redis server at `url` (`redis://localhost:6379/0`). It
        connects for each exchange, on the loop that asks (a pool would belong to one
        event loop), and an exchange waits at most `TIMEOUT_SECONDS`."""
        return cls(url)

    @contextlib.asynccontextmanager
    async def _client(self) -> AsyncIterator[Any]:
        import redis.asyncio

        timeout = self.TIMEOUT_SECONDS
        client = redis.asyncio.Redis.from_url(
            self._url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        try:
            yield client
        finally:
            await client.aclose()

    def __repr__(self) -> str:
        return "RedisReplayGuard()"  # the URL may hold a password

    @staticmethod
    def check_url(url: str) -> None:
        """ValueError for a URL that names no Redis server, or without the extra."""
        if not isinstance(url, str) or url.split("://", 1)[0] not in _SCHEMES:
            raise ValueError(
                "the replay guard must be a Redis URL: redis://host:6379/0 (or rediss://, unix://)"
            )
        try:
            import redis  # noqa: F401
        except ImportError:
            raise ValueError(
                "the Redis replay guard needs the redis extra: pip install 'codemode[redis]'"
            ) from None

    @staticmethod
    def unreachable(url: str) -> str | None:
        """Why the Redis server at `url` cannot be reached now (None when it answers)."""
        import redis

        try:
            with redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2) as client:
                client.ping()
        except redis.RedisError as error:
            return type(error).__name__
        return None

    async def scope(self) -> str:
        """The epoch of what Redis remembers now (made now if it has none), read for each
        program that pauses: one that forgot (flushed, restarted) has a new one at once."""
        async with self._client() as client:
            epoch = await client.eval(_EPOCH, 1, self.EPOCH, uuid.uuid4().hex)
        return f"redis:{epoch.decode() if isinstance(epoch, bytes) else epoch}"

    async def claim(self, state_id: str, scope: str, seconds: float) -> bool | None:
        """True for the one replica whose `SET NX` stored the claim, False for the others;
        None for a state of another epoch."""
        kind, _, epoch = scope.partition(":")
        if kind != "redis":
            return None
        async with self._client() as client:
            won = await client.eval(
                _CLAIM, 2, self.EPOCH, self.PREFIX + state_id, epoch, max(int(seconds * 1000), 1)
            )
        return None if won == -1 else bool(won == 1)

    async def release(self, state_id: str) -> None:
        """Forget a claim whose program never started."""
        async with self._client() as client:
            await client.delete(self.PREFIX + state_id)


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


async def ask_each(paused: Paused, approve: Approver, limits: Limits) -> Mapping[str, Verdict]:
    """Ask a person about each request in turn, each within the approval wait."""
    verdicts: dict[str, Verdict] = {}
    asking = approve if inspect.iscoroutinefunction(approve) else _on_a_thread(approve)
    for request in paused.requests:
        try:
            async with asyncio.timeout(limits.max_approval_wait_seconds):
                approved = await asking(request)
        except TimeoutError:
            verdicts[request.key] = Verdict.TIMED_OUT
            continue
        except Exception:  # host code that cannot ask declines (fail closed)
            log.exception("asking for approval of %s failed", request.capability_name)
            approved = False
        verdicts[request.key] = Verdict.APPROVED if approved is True else Verdict.DECLINED
    return verdicts


def _on_a_thread(approve: Approver) -> Callable[[ApprovalRequest], Awaitable[object]]:
    async def asking(request: ApprovalRequest) -> object:
        answer = await anyio.to_thread.run_sync(approve, request, abandon_on_cancel=True)
        return await answer if inspect.isawaitable(answer) else answer

    return asking


__all__ = [
    "CLOCK_SKEW_SECONDS",
    "STATE_GRACE_SECONDS",
    "ApprovalRequest",
    "Approver",
    "InProcessReplayGuard",
    "Paused",
    "RedisReplayGuard",
    "ReplayGuard",
    "Verdict",
    "ask_each",
    "claim_seconds",
    "record_asked",
    "state_seconds",
]
