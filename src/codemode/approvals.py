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
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import anyio

from codemode.limits import Limits
from codemode.types import JSONObject

log = logging.getLogger("codemode")

STATE_GRACE_SECONDS = 60.0
"""How much longer than the approval wait a sealed state is accepted (at most as long as
the wait itself): a retry that comes past the wait still resumes, so the program learns
that its approval timed out."""


def state_seconds(limits: Limits) -> float:
    """How long a paused state is valid (and remembered by the replay guard)."""
    wait = limits.max_approval_wait_seconds
    return wait + min(STATE_GRACE_SECONDS, wait)


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

    scope: str
    """Which servers share what it remembers: the same on every replica that shares it.
    A state paused under another scope is refused (no guard could vouch for it)."""

    async def claim(self, state_id: str, seconds: float) -> bool:
        """True the first time `state_id` is claimed within `seconds`, else False."""
        ...


class InProcessReplayGuard:
    """A replay guard for one process (stdio, one HTTP server): states it has resumed,
    forgotten once they could no longer be accepted anyway."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.scope = f"process:{uuid.uuid4().hex}"
        """This process only, until it restarts: a state paused before a restart, or on
        another replica, might have resumed already, so it is refused."""
        self._clock = clock
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    async def claim(self, state_id: str, seconds: float) -> bool:
        """True the first time `state_id` is claimed within `seconds`, else False."""
        now = self._clock()
        with self._lock:
            for key in [key for key, until in self._seen.items() if until <= now]:
                del self._seen[key]
            if state_id in self._seen:
                return False
            self._seen[state_id] = now + seconds
            return True


_SCHEMES = ("redis", "rediss", "unix")


class RedisReplayGuard:
    """A replay guard shared by replicas, in Redis (`pip install 'codemode[redis]'`):
    `SET key 1 NX EX seconds`, so one replica alone wins each state."""

    PREFIX = "codemode:resumed:"

    def __init__(self, client: Any) -> None:
        self.client = client
        """A `redis.asyncio.Redis`."""
        self.scope = "redis"
        """Every replica that records states in Redis."""

    @classmethod
    def from_url(cls, url: str) -> RedisReplayGuard:
        """A guard over the Redis server at `url` (`redis://localhost:6379/0`); it
        connects when first used."""
        cls.check_url(url)
        import redis.asyncio

        return cls(redis.asyncio.Redis.from_url(url))

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

    async def claim(self, state_id: str, seconds: float) -> bool:
        """True for the one replica whose `SET NX` stored the key, else False."""
        stored = await self.client.set(
            self.PREFIX + state_id, b"1", nx=True, px=max(int(seconds * 1000), 1)
        )
        return bool(stored)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


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
    "STATE_GRACE_SECONDS",
    "ApprovalRequest",
    "Approver",
    "InProcessReplayGuard",
    "Paused",
    "RedisReplayGuard",
    "ReplayGuard",
    "Verdict",
    "ask_each",
    "state_seconds",
]
