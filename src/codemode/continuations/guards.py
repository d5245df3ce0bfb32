"""Replay guards: a paused state goes on at most once, on whichever replica takes it.

A guard remembers each state it let resume, in this process (`InProcessReplayGuard`, the
default) or, for several replicas, in Redis (`RedisReplayGuard`, the `codemode[redis]`
extra). A state is stamped with the scope of the guard it was paused under, and only a
guard of that scope vouches for it; a claim is kept as long as the state could be taken
anywhere (`claim_seconds`), never just as long as the resuming replica's own setting.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable

CLOCK_SKEW_SECONDS = 300.0
"""How far apart the clocks of the replicas may be. A claim on a paused state is kept
this much longer than the state is valid, so a replica whose clock is behind, and so
still takes the state, finds it claimed."""


def claim_seconds(expires_at: float, now: float) -> float:
    """How long the claim on a state valid until `expires_at` is kept: as long as any
    replica could take the state (its own expiry, whichever replica resumes it, and the
    clock skew between them), never the resuming replica's own approval wait."""
    return max(expires_at - now, 0.0) + CLOCK_SKEW_SECONDS


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


__all__ = [
    "CLOCK_SKEW_SECONDS",
    "InProcessReplayGuard",
    "RedisReplayGuard",
    "ReplayGuard",
    "claim_seconds",
]
