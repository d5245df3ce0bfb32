"""The replay guards: each paused state resumes at most once, in this process or across
replicas sharing Redis, and a claim lasts as long as the state could be taken anywhere."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest
import redis.asyncio

from codemode import Limits
from codemode.approvals import (
    CLOCK_SKEW_SECONDS,
    InProcessReplayGuard,
    RedisReplayGuard,
    ReplayGuard,
    claim_seconds,
)
from codemode.continuations import MemoryStore, RedisStore, StoreReplayGuard
from codemode.errors import ResumeRefusedError
from codemode.runtime import ExecutionResult
from tests.approvals.host import build, paused, ran


def test_both_guards_are_replay_guards() -> None:
    assert isinstance(InProcessReplayGuard(), ReplayGuard)
    assert isinstance(RedisReplayGuard("redis://127.0.0.1:1/0"), ReplayGuard)
    assert repr(RedisReplayGuard("redis://user:secret@127.0.0.1:1/0")) == "RedisReplayGuard()"


def test_a_replay_guard_remembers_a_state_until_it_expires() -> None:
    now = [0.0]
    guard = InProcessReplayGuard(clock=lambda: now[0])
    scope = asyncio.run(guard.scope())
    assert asyncio.run(guard.claim("a", scope, 10)) is True
    assert asyncio.run(guard.claim("a", scope, 10)) is False
    now[0] = 10.0
    assert asyncio.run(guard.claim("a", scope, 10)) is True
    asyncio.run(guard.release("a"))
    assert asyncio.run(guard.claim("a", scope, 10)) is True
    assert asyncio.run(guard.claim("b", "process:other:1", 10)) is None


def test_a_guard_over_a_store_claims_there_under_its_epoch() -> None:
    """Replicas that share a store share its guard; a store of this process gives the
    same guarantees as this process's own guard."""
    now = [0.0]
    store = MemoryStore(clock=lambda: now[0])
    guard, beside = StoreReplayGuard(store), StoreReplayGuard(store)
    assert (
        isinstance(guard, ReplayGuard)
        and repr(guard) == "StoreReplayGuard(MemoryStore(max_bytes=268435456))"
    )
    scope = asyncio.run(guard.scope())
    assert scope == asyncio.run(beside.scope()) == asyncio.run(store.epoch())
    assert asyncio.run(guard.claim("a", scope, 10)) is True
    assert asyncio.run(beside.claim("a", scope, 10)) is False
    assert asyncio.run(store.get(StoreReplayGuard.PREFIX + "a")) == b"1"
    now[0] = 10.0
    assert asyncio.run(beside.claim("a", scope, 10)) is True
    asyncio.run(guard.release("a"))
    assert asyncio.run(guard.claim("a", scope, 10)) is True
    assert asyncio.run(guard.claim("b", "process:other:1", 10)) is None
    assert asyncio.run(guard.claim("b", "redis:other", 10)) is None


def test_the_redis_guard_keeps_its_keys_in_the_store(redis_url: str) -> None:
    """Deployments that name only a replay guard keep it where they always had it: the
    epoch at `codemode:guard:epoch`, each claim at `codemode:resumed:<state id>`, and a
    guard over a `RedisStore` of the same server is the very same guard."""

    async def claims() -> tuple[list[bool | None], str, int, bytes | None]:
        guard = RedisReplayGuard.from_url(redis_url)
        over_store = StoreReplayGuard(RedisStore(redis_url))
        scope = await guard.scope()
        won = [await guard.claim("kept-1", scope, 30), await over_store.claim("kept-1", scope, 30)]
        async with redis.asyncio.Redis.from_url(redis_url) as client:
            epoch = await client.get("codemode:guard:epoch")
            held = await client.pttl("codemode:resumed:kept-1")
            value = await client.get("codemode:resumed:kept-1")
        return won, f"redis:{epoch.decode()}" if epoch else "", held, value

    won, epoch, held, value = asyncio.run(claims())
    assert won == [True, False]
    assert epoch == asyncio.run(RedisReplayGuard(redis_url).scope())
    assert 29_000 < held <= 30_000 and value == b"1"
    assert isinstance(RedisReplayGuard(redis_url), StoreReplayGuard)
    assert (RedisReplayGuard.PREFIX, RedisReplayGuard.EPOCH) == (
        "codemode:resumed:",
        "codemode:guard:epoch",
    )


def test_a_worker_forked_after_the_guard_is_another_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fork copies the guard's memory, not its claims from then on: the worker's scope
    is its own process id, so it never vouches for the parent's states."""
    guard = InProcessReplayGuard()
    scope = asyncio.run(guard.scope())
    monkeypatch.setattr(os, "getpid", lambda: os.getppid())  # as in the forked child
    assert asyncio.run(guard.scope()) != scope
    assert asyncio.run(guard.claim("s", scope, 10)) is None


def test_the_redis_guard_lets_one_replica_alone_claim_a_state(redis_url: str) -> None:
    async def claims() -> list[bool | None]:
        first, second = RedisReplayGuard.from_url(redis_url), RedisReplayGuard.from_url(redis_url)
        other_db = RedisReplayGuard.from_url(redis_url.replace("/0", "/1"))
        scope = await first.scope()
        assert await second.scope() == scope != await other_db.scope()
        won = [await first.claim("s-1", scope, 5), await second.claim("s-1", scope, 5)]
        await second.release("s-1")
        again = await second.claim("s-1", scope, 5)
        async with redis.asyncio.Redis.from_url(redis_url) as client:
            await client.flushdb()  # Redis forgot: what was paused before is refused
        forgot = await first.claim("s-2", scope, 5)
        return [*won, again, forgot, await other_db.claim("s-3", scope, 5)]

    assert asyncio.run(claims()) == [True, False, True, None, None]
    assert RedisReplayGuard.unreachable(redis_url) is None
    assert RedisReplayGuard.unreachable("redis://127.0.0.1:1/0") == "ConnectionError"
    with pytest.raises(ValueError, match="must be a Redis URL"):
        RedisReplayGuard.check_url("localhost:6379")


def test_a_state_paused_by_another_process_is_refused_without_a_shared_guard(
    calls: Path,
) -> None:
    with build() as first, build() as second:  # two processes' own guards
        state = paused(first).state
        with pytest.raises(ResumeRefusedError) as raised:
            asyncio.run(second.resume_async(state, subject="alice", answers={"approval-2": True}))
    assert str(raised.value) == (
        "resume refused: the program was paused where this server cannot tell whether it "
        "resumed already (another server process, or before its replay guard was reset); "
        "run it again"
    )
    shared = InProcessReplayGuard()  # as replicas share one in Redis
    with build() as first, build() as second:
        first.replay_guard = second.replay_guard = shared
        state = paused(first).state
        done = asyncio.run(
            second.resume_async(state, subject="alice", answers={"approval-2": True})
        )
        assert isinstance(done, ExecutionResult) and done.value is True
        with pytest.raises(ResumeRefusedError):
            asyncio.run(first.resume_async(state, subject="alice", answers={"approval-2": True}))
    assert ran(calls) == ["list", "list", "delete 2"]


def test_a_redis_that_never_answers_refuses_the_state(
    calls: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    monkeypatch.setattr(RedisReplayGuard, "TIMEOUT_SECONDS", 0.2)
    url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
    try:
        with build() as cm:
            cm.replay_guard = RedisReplayGuard.from_url(redis_url)
            state = paused(cm).state  # paused under the shared guard's epoch
            cm.replay_guard = RedisReplayGuard.from_url(url)  # which now never answers
            with pytest.raises(ResumeRefusedError) as raised:
                asyncio.run(cm.resume_async(state, subject="alice", answers={"approval-2": True}))
    finally:
        silent.close()
    assert str(raised.value) == (
        "resume refused: the server cannot tell whether this paused program resumed already; "
        "run it again"
    )
    assert ran(calls) == ["list"]


async def _flush(url: str) -> None:
    async with redis.asyncio.Redis.from_url(url) as client:
        await client.flushdb()


def test_after_redis_forgets_the_states_paused_since_resume(calls: Path, redis_url: str) -> None:
    with build() as first, build() as second:
        first.replay_guard = RedisReplayGuard.from_url(redis_url)
        second.replay_guard = RedisReplayGuard.from_url(redis_url)
        before = paused(first).state
        asyncio.run(_flush(redis_url))
        yes = {"approval-2": True}
        with pytest.raises(ResumeRefusedError):  # what was paused before the loss: refused
            asyncio.run(second.resume_async(before, subject="alice", answers=yes))
        after = paused(first).state  # the pausing replica reads the new epoch at once
        done = asyncio.run(second.resume_async(after, subject="alice", answers=yes))
        assert isinstance(done, ExecutionResult) and done.value is True
    assert ran(calls) == ["list", "list", "delete 2"]


def test_a_claim_lasts_as_long_as_the_state_can_be_taken_anywhere(calls: Path) -> None:
    """Two replicas of different approval waits: the state paused by the one of the
    longer wait, resumed by the other, stays claimed for the whole life the pausing one
    gave it (and the clock skew margin), not for the resuming one's own wait."""
    now = [0.0]
    shared = InProcessReplayGuard(clock=lambda: now[0])
    with build() as long_wait, build() as short_wait:
        long_wait.replay_guard = short_wait.replay_guard = shared
        short_wait.limits = Limits(max_approval_wait_seconds=5)
        state = paused(long_wait).state
        yes = {"approval-2": True}
        done = asyncio.run(short_wait.resume_async(state, subject="alice", answers=yes))
        assert isinstance(done, ExecutionResult) and done.value is True
        now[0] += 11  # past the short wait's whole state life, within the long one's
        with pytest.raises(ResumeRefusedError) as raised:
            asyncio.run(long_wait.resume_async(state, subject="alice", answers=yes))
        assert str(raised.value) == "resume refused: this paused program was resumed already"
        now[0] += 660 + CLOCK_SKEW_SECONDS - 11 - 1  # and even a skewed clock's
        with pytest.raises(ResumeRefusedError):
            asyncio.run(long_wait.resume_async(state, subject="alice", answers=yes))
    assert ran(calls) == ["list", "delete 2"]
    assert claim_seconds(1000.0, 400.0) == 600 + CLOCK_SKEW_SECONDS
    assert claim_seconds(1000.0, 2000.0) == CLOCK_SKEW_SECONDS
