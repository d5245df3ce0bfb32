"""The store: bytes kept by key for a while, shared by the replicas that name the same one.

Everything replicas must agree on lives here: which paused states resumed (the replay
guard's claims), and what is kept between executes (a session's sealed state, its lease,
the sessions each subject holds). One protocol, two stores: `MemoryStore`, this process's
own (the default), and `RedisStore`, shared by every replica that names the same Redis
(`codemode[redis]`). A store keeps bytes and never reads them: what it holds is sealed
before it gets there (`codemode.continuations.sealing`), and a caller names keys and group
members by digests, so the store never holds a subject or a handle in the clear.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

MEMORY_STORE_BYTES = 256 * 1024 * 1024
"""How many bytes of values a `MemoryStore` keeps before it lets the least recently used go."""
SWEEP_SECONDS = 60.0
"""How often a `MemoryStore` forgets every entry past its time, read or not."""


@runtime_checkable
class Store(Protocol):
    """Bytes kept by key for a while, shared by the replicas that name the same store.

    Every entry has a time to live. A claim (`claim`) is an entry only its first writer
    gets, held by a token until it lapses or its holder releases it; a fenced `put`
    writes only while a claim is still held by the writer's token, so a run that outlived
    its lease cannot overwrite what the next holder wrote.
    """

    async def epoch(self) -> str:
        """What the store remembers for, as a replay guard's scope: the same on every
        replica that shares it, and another one once it forgot what it held."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The value kept under `key`, or None when there is none (or it lapsed)."""
        ...

    async def claim(
        self, key: str, token: str, seconds: float, *, epoch: str | None = None
    ) -> bool | None:
        """True when `key` was free and is now held by `token` for `seconds`, False when
        it is held already (by any token); with `epoch`, None when the store is no
        longer that epoch (it forgot what it held), and nothing is written."""
        ...

    async def release(self, key: str, token: str) -> None:
        """Free `key` if `token` still holds it (a claim that lapsed and was taken by
        another token is left alone)."""
        ...

    async def put(
        self,
        key: str,
        value: bytes,
        seconds: float,
        *,
        holder: tuple[str, str] | None = None,
        pinned: bool = False,
    ) -> bool:
        """Keep `value` under `key` for `seconds`; True once written. With `holder`
        (a claim's key and token) it is written only while that token holds that claim,
        else False and nothing changes; a holder's own key may be written this way, which
        hands a claim on to another token and time. A `pinned` value is never let go to
        make room for others (as a claim is not): work still going on needs it, until it
        lapses or is written again unpinned."""
        ...

    async def delete(self, key: str) -> None:
        """Forget `key`, whatever it holds."""
        ...

    async def admit(self, group: str, member: str, limit: int, seconds: float) -> str | None:
        """Count `member` (a key of this store) as used now in `group`, for `seconds`;
        when the group then holds more than `limit` members not lapsed, the least recently
        used ones leave it and their keys are deleted. The first of them, or None."""
        ...


# -- in this process ----------------------------------------------------------------------


@dataclass(slots=True)
class _Entry:
    value: bytes
    until: float
    evictable: bool
    """A value written by `put`; a claim (and a claim handed on), or a pinned value,
    never makes room."""


class MemoryStore:
    """A store of this process (the default): what one server keeps between executes.

    Its epoch is this process as it runs now, so a replay guard over it vouches only for
    the states this process paused. Values (not claims: a claim let go early could let a
    state resume twice; nor pinned values: work still going on needs them) are kept up to
    `max_bytes`, the least recently used let go first; entries past their time are
    forgotten when read, and all of them every `SWEEP_SECONDS`. Time is `clock`'s (a
    `ManualClock`'s `now` in tests).
    """

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, max_bytes: int = MEMORY_STORE_BYTES
    ) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError("max_bytes must be a positive number of bytes")
        self._clock = clock
        self._max_bytes = max_bytes
        self._boot = uuid.uuid4().hex
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._groups: dict[str, dict[str, float]] = {}
        self._bytes = 0
        self._swept = clock()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryStore(max_bytes={self._max_bytes})"

    async def epoch(self) -> str:
        """This process, as it runs now (a forked worker is another process)."""
        return f"memory:{self._boot}:{os.getpid()}"

    async def get(self, key: str) -> bytes | None:
        """The value under `key`, now the most recently used."""
        with self._lock:
            entry = self._live(key, self._clock())
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry.value

    async def keys(self, prefix: str) -> list[str]:
        """The keys that start with `prefix` and have not lapsed (for an operator's
        count, never a hot path)."""
        with self._lock:
            now = self._clock()
            return [
                key
                for key in list(self._entries)
                if key.startswith(prefix) and self._live(key, now) is not None
            ]

    async def claim(
        self, key: str, token: str, seconds: float, *, epoch: str | None = None
    ) -> bool | None:
        """True for the first token to claim a free `key`; None for another epoch."""
        if epoch is not None and epoch != await self.epoch():
            return None
        with self._lock:
            now = self._now()
            if self._live(key, now) is not None:
                return False
            self._set(key, _Entry(token.encode(), now + seconds, evictable=False))
            return True

    async def release(self, key: str, token: str) -> None:
        """Free `key` if `token` holds it."""
        with self._lock:
            entry = self._live(key, self._clock())
            if entry is not None and entry.value == token.encode():
                self._drop(key)

    async def put(
        self,
        key: str,
        value: bytes,
        seconds: float,
        *,
        holder: tuple[str, str] | None = None,
        pinned: bool = False,
    ) -> bool:
        """Keep `value`, letting the least recently used values go past `max_bytes`;
        ValueError for one value larger than that. A pinned value neither counts against
        `max_bytes` nor is let go (its writer bounds how many it pins)."""
        evictable = not pinned and (holder is None or holder[0] != key)
        if evictable and len(value) > self._max_bytes:
            raise ValueError(f"a value of {len(value)} bytes is more than this store keeps")
        with self._lock:
            now = self._now()
            if holder is not None:
                held = self._live(holder[0], now)
                if held is None or held.value != holder[1].encode():
                    return False
            self._set(key, _Entry(bytes(value), now + seconds, evictable))
            while self._bytes > self._max_bytes:
                oldest = next(k for k, e in self._entries.items() if e.evictable and k != key)
                self._drop(oldest)
            return True

    async def delete(self, key: str) -> None:
        """Forget `key`."""
        with self._lock:
            self._drop(key)

    async def admit(self, group: str, member: str, limit: int, seconds: float) -> str | None:
        """Count `member` used now; the least recently used past `limit` leave (a tie goes
        to the one admitted first), their keys deleted."""
        with self._lock:
            now = self._now()
            members = self._groups.setdefault(group, {})
            for lapsed in [m for m, until in members.items() if until <= now]:
                del members[lapsed]
            members.pop(member, None)
            members[member] = now + seconds
            evicted = []
            while len(members) > limit:
                victim = min(members, key=members.__getitem__)
                del members[victim]
                self._drop(victim)
                evicted.append(victim)
            if not members:
                del self._groups[group]
            return evicted[0] if evicted else None

    def _now(self) -> float:
        """The time now, after forgetting everything lapsed if a sweep is due."""
        now = self._clock()
        if now - self._swept >= SWEEP_SECONDS:
            self._swept = now
            for key in [k for k, e in self._entries.items() if e.until <= now]:
                self._drop(key)
            for group, members in list(self._groups.items()):
                if all(until <= now for until in members.values()):
                    del self._groups[group]
        return now

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and entry.until <= now:
            self._drop(key)
            return None
        return entry

    def _set(self, key: str, entry: _Entry) -> None:
        self._drop(key)
        self._entries[key] = entry
        self._bytes += len(entry.value) if entry.evictable else 0

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and entry.evictable:
            self._bytes -= len(entry.value)


# -- in Redis -----------------------------------------------------------------------------

_SCHEMES = ("redis", "rediss", "unix")
_EPOCH = """
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
"""
"""The epoch, made by the first replica to ask (one exchange)."""
_CLAIM = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return 1 end
return 0
"""
"""A claim under an epoch, atomic: refused (-1) unless the epoch is the caller's, then won
(1) by the first replica alone, lost (0) by the others."""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""
_FENCED_PUT = """
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
"""
_ADMIT = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(last[2]) - now, 1))
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if over <= 0 then return false end
local evicted = redis.call('ZRANGE', KEYS[1], 0, over - 1)
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
redis.call('DEL', unpack(evicted))
return evicted[1]
"""
"""A group's members by the time each lapses, read on Redis's own clock (replicas' clocks
may differ): the lapsed leave, the member is counted, the least recently used past the
limit leave and their keys go; the group lasts as long as its last member."""


def _glob(prefix: str) -> str:
    """`prefix` with the characters a Redis pattern reads escaped."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", prefix)


def _milliseconds(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


class RedisStore:
    """A store shared by replicas, in Redis (`pip install 'codemode[redis]'`).

    Its epoch is kept in Redis (`EPOCH`, made by the first replica that asks): a Redis
    that lost what it held (restarted without persistence, flushed, or another server or
    database) has another one. Each change is one command or one script, so replicas
    never race inside it, and time in a script is Redis's own. Give Redis
    `maxmemory-policy noeviction`: an evicted claim could be claimed again. One Redis
    server (not a cluster): a script touches keys of several slots.
    """

    EPOCH = "codemode:guard:epoch"
    """Where the epoch is kept (the name the replay guard has always used)."""
    TIMEOUT_SECONDS = 5.0
    """How long one exchange with Redis may take, by default."""

    def __init__(self, url: str, *, timeout: float | None = None) -> None:
        self.check_url(url)
        self._url = url
        self._timeout = self.TIMEOUT_SECONDS if timeout is None else timeout

    @classmethod
    def from_url(cls, url: str) -> RedisStore:
        """A store over the Redis server at `url` (`redis://localhost:6379/0`). It
        connects for each exchange, on the loop that asks (a pool would belong to one
        event loop, and a synchronous execute runs its own), and an exchange waits at
        most `TIMEOUT_SECONDS`."""
        return cls(url)

    def __repr__(self) -> str:
        return "RedisStore()"  # the URL may hold a password

    @staticmethod
    def check_url(url: str, what: str = "the store") -> None:
        """ValueError for a URL that names no Redis server, or without the extra; `what`
        names the option in the message."""
        if not isinstance(url, str) or url.split("://", 1)[0] not in _SCHEMES:
            raise ValueError(
                f"{what} must be a Redis URL: redis://host:6379/0 (or rediss://, unix://)"
            )
        try:
            import redis  # noqa: F401
        except ImportError:
            raise ValueError(
                f"a Redis {what.removeprefix('the ')} needs the redis extra: "
                "pip install 'codemode[redis]'"
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

    @contextlib.asynccontextmanager
    async def _client(self) -> AsyncIterator[Any]:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(
            self._url, socket_timeout=self._timeout, socket_connect_timeout=self._timeout
        )
        try:
            yield client
        finally:
            await client.aclose()

    async def epoch(self) -> str:
        """`redis:` and the epoch Redis keeps (made now if it has none)."""
        async with self._client() as client:
            epoch = await client.eval(_EPOCH, 1, self.EPOCH, uuid.uuid4().hex)
        return f"redis:{epoch.decode() if isinstance(epoch, bytes) else epoch}"

    async def get(self, key: str) -> bytes | None:
        """The value under `key`."""
        async with self._client() as client:
            value = await client.get(key)
        return None if value is None else bytes(value)

    async def claim(
        self, key: str, token: str, seconds: float, *, epoch: str | None = None
    ) -> bool | None:
        """`SET NX PX`; with `epoch`, under the check that Redis is still that epoch."""
        ms = _milliseconds(seconds)
        if epoch is None:
            async with self._client() as client:
                return bool(await client.set(key, token, nx=True, px=ms))
        kind, _, current = epoch.partition(":")
        if kind != "redis":
            return None
        async with self._client() as client:
            won = await client.eval(_CLAIM, 2, self.EPOCH, key, current, token, ms)
        return None if won == -1 else bool(won == 1)

    async def release(self, key: str, token: str) -> None:
        """Compare and delete, in one script."""
        async with self._client() as client:
            await client.eval(_RELEASE, 1, key, token)

    async def put(
        self,
        key: str,
        value: bytes,
        seconds: float,
        *,
        holder: tuple[str, str] | None = None,
        pinned: bool = False,
    ) -> bool:
        """`SET PX`; fenced, in one script that first reads the holder's claim. Redis
        lets nothing go (`noeviction`), so every value is pinned."""
        ms = _milliseconds(seconds)
        async with self._client() as client:
            if holder is None:
                return bool(await client.set(key, value, px=ms))
            lease, token = holder
            return bool(await client.eval(_FENCED_PUT, 2, key, lease, value, token, ms) == 1)

    async def keys(self, prefix: str) -> list[str]:
        """The keys that start with `prefix`, by `SCAN` (for an operator's count, never
        a hot path)."""
        async with self._client() as client:
            found = [key async for key in client.scan_iter(match=_glob(prefix) + "*")]
        return [key.decode() if isinstance(key, bytes) else str(key) for key in found]

    async def delete(self, key: str) -> None:
        """`DEL`."""
        async with self._client() as client:
            await client.delete(key)

    async def admit(self, group: str, member: str, limit: int, seconds: float) -> str | None:
        """One script over the group's sorted set (score: when the member lapses)."""
        async with self._client() as client:
            evicted = await client.eval(_ADMIT, 1, group, member, limit, _milliseconds(seconds))
        if evicted is None:
            return None
        return evicted.decode() if isinstance(evicted, bytes) else str(evicted)


__all__ = ["MEMORY_STORE_BYTES", "SWEEP_SECONDS", "MemoryStore", "RedisStore", "Store"]
