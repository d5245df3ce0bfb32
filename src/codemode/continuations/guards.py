"""Replay guards: a paused state goes on at most once, on whichever replica takes it.

A guard remembers each state it let resume, in this process (`InProcessReplayGuard`, the
default) or, for several replicas, in the store they share (`StoreReplayGuard`; over Redis,
`RedisReplayGuard`, the `codemode[redis]` extra). A state is stamped with the scope of the
guard it was paused under, and only a guard of that scope vouches for it; a claim is kept
as long as the state could be taken anywhere (`claim_seconds`), never just as long as the
resuming replica's own setting.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from codemode.continuations.store import RedisStore, Store

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


class StoreReplayGuard:
    """A replay guard over a store (`codemode.continuations.store`): replicas that share
    the store share the guard.

    Its scope is the store's epoch, so a store that forgot what it held (a flushed or
    restarted Redis) refuses the states paused before rather than resume them again. A
    claim is the store's `claim` under that epoch, kept at `PREFIX` and the state's id.
    """

    PREFIX = "codemode:resumed:"

    def __init__(self, store: Store) -> None:
        self.store = store
        """Where the claims are kept."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r})"

    async def scope(self) -> str:
        """The store's epoch now (made now if it has none), read for each program that
        pauses: a store that forgot has a new one at once."""
        return await self.store.epoch()

    async def claim(self, state_id: str, scope: str, seconds: float) -> bool | None:
        """True for the one replica that stored the claim, False for the others; None for
        a state of another epoch."""
        return await self.store.claim(self.PREFIX + state_id, "1", seconds, epoch=scope)

    async def release(self, state_id: str) -> None:
        """Forget a claim whose program never started."""
        await self.store.delete(self.PREFIX + state_id)


class RedisReplayGuard(StoreReplayGuard):
    """A replay guard shared by replicas, in Redis (`pip install 'codemode[redis]'`): a
    `StoreReplayGuard` over a `RedisStore`, as replicas that name only a replay guard
    have always had it.

    Its scope is an epoch kept in Redis (`codemode:guard:epoch`, made by the first
    replica): a Redis that lost what it remembered (restarted without persistence,
    flushed, or another server or database) has another epoch, so the states paused
    before are refused rather than resumed again. A claim is `SET NX` under the epoch
    check, in one script, so one replica alone wins each state. Give Redis
    `maxmemory-policy noeviction`: an evicted claim could be claimed again.
    """

    EPOCH = RedisStore.EPOCH
    TIMEOUT_SECONDS = RedisStore.TIMEOUT_SECONDS
    """How long one exchange with Redis may take (then the state is refused)."""

    def __init__(self, url: str) -> None:
        self.check_url(url)
        super().__init__(RedisStore(url, timeout=self.TIMEOUT_SECONDS))

    @classmethod
    def from_url(cls, url: str) -> RedisReplayGuard:
        """A guard over the Redis server at `url` (`redis://localhost:6379/0`). It
        connects for each exchange, on the loop that asks, and an exchange waits at most
        `TIMEOUT_SECONDS`."""
        return cls(url)

    def __repr__(self) -> str:
        return "RedisReplayGuard()"  # the URL may hold a password

    @staticmethod
    def check_url(url: str) -> None:
        """ValueError for a URL that names no Redis server, or without the extra."""
        RedisStore.check_url(url, "the replay guard")

    @staticmethod
    def unreachable(url: str) -> str | None:
        """Why the Redis server at `url` cannot be reached now (None when it answers)."""
        return RedisStore.unreachable(url)


__all__ = [
    "CLOCK_SKEW_SECONDS",
    "InProcessReplayGuard",
    "RedisReplayGuard",
    "ReplayGuard",
    "StoreReplayGuard",
    "claim_seconds",
]
