"""The stores: bytes kept by key for a while, claims only one token gets, writes fenced by a
claim, and groups that keep their most recently used members; the same table for the store
of this process (on a ManualClock) and for Redis (the real server)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
import redis

from codemode.continuations import MemoryStore, RedisStore, Store
from codemode.continuations.store import SWEEP_SECONDS
from codemode.testing import ManualClock


@pytest.fixture
def key() -> str:
    """A key no other test uses (the Redis server is shared by the session)."""
    return f"test:{uuid.uuid4().hex}:"


T = TypeVar("T")


def run(step: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(step)


def test_both_stores_are_stores(redis_url: str) -> None:
    assert isinstance(MemoryStore(), Store)
    assert isinstance(RedisStore(redis_url), Store)
    assert repr(RedisStore("redis://user:secret@127.0.0.1:1/0")) == "RedisStore()"
    assert repr(MemoryStore(max_bytes=10)) == "MemoryStore(max_bytes=10)"


def test_a_value_is_kept_replaced_and_deleted(store: Store, key: str) -> None:
    async def steps() -> list[object]:
        seen: list[object] = [await store.get(key + "a")]
        seen.append(await store.put(key + "a", b"\x00one", 60))
        seen.append(await store.get(key + "a"))
        await store.put(key + "a", b"two", 60)
        seen.append(await store.get(key + "a"))
        await store.delete(key + "a")
        seen.append(await store.get(key + "a"))
        return seen

    assert run(steps()) == [None, True, b"\x00one", b"two", None]


def test_one_token_alone_holds_a_claim_until_it_releases_it(store: Store, key: str) -> None:
    async def steps() -> list[object]:
        lease = key + "lease"
        seen: list[object] = [await store.claim(lease, "t1", 60)]
        seen.append(await store.claim(lease, "t2", 60))
        seen.append(await store.claim(lease, "t1", 60))  # its own holder too: not re-entrant
        await store.release(lease, "t2")  # not its holder: nothing changes
        seen.append(await store.get(lease))
        await store.release(lease, "t1")
        seen.append(await store.claim(lease, "t2", 60))
        return seen

    assert run(steps()) == [True, False, False, b"t1", True]


def test_a_fenced_put_writes_only_while_its_token_holds_the_claim(store: Store, key: str) -> None:
    async def steps() -> list[object]:
        lease, state = key + "lease", key + "state"
        seen: list[object] = [await store.put(state, b"x", 60, holder=(lease, "t1"))]
        await store.claim(lease, "t1", 60)
        seen.append(await store.put(state, b"by t2", 60, holder=(lease, "t2")))
        seen.append(await store.put(state, b"by t1", 60, holder=(lease, "t1")))
        await store.release(lease, "t1")
        await store.claim(lease, "t2", 60)  # the next run holds it now
        seen.append(await store.put(state, b"late t1", 60, holder=(lease, "t1")))
        seen.append(await store.get(state))
        return seen

    assert run(steps()) == [False, False, True, False, b"by t1"]


def test_a_claim_is_handed_on_by_a_put_its_holder_fences(store: Store, key: str) -> None:
    """How a run that pauses keeps its session busy under the paused state's id: a
    compare-and-set of the lease, with the new time."""

    async def steps() -> list[object]:
        lease = key + "lease"
        await store.claim(lease, "run", 10)
        handed = await store.put(lease, b"paused", 600, holder=(lease, "run"))
        stale = await store.put(lease, b"other", 600, holder=(lease, "run"))
        old = await store.claim(lease, "next", 10)
        await store.release(lease, "run")
        kept = await store.get(lease)
        await store.release(lease, "paused")
        return [handed, stale, old, kept, await store.claim(lease, "next", 10)]

    assert run(steps()) == [True, False, False, b"paused", True]


def test_a_group_keeps_its_most_recently_used_members(store: Store, key: str) -> None:
    """Past the limit the least recently used member leaves, and its key goes with it;
    a member admitted again is used anew. (Later admits lapse later, on any clock.)"""
    a, b, c, d = (key + name for name in "abcd")
    group = key + "group"

    async def steps() -> list[object]:
        for member in (a, b, c, d):
            await store.put(member, member.encode(), 600)
        seen: list[object] = [
            await store.admit(group, a, 3, 100),
            await store.admit(group, b, 3, 200),
            await store.admit(group, c, 3, 300),
            await store.admit(group, a, 3, 400),  # a used again: b is now the oldest
            await store.admit(group, d, 3, 500),
        ]
        seen += [await store.get(member) for member in (a, b, c, d)]
        return seen

    assert run(steps()) == [None, None, None, None, b, a.encode(), None, c.encode(), d.encode()]


def test_a_lowered_limit_lets_every_member_past_it_go(store: Store, key: str) -> None:
    group = key + "group"

    async def steps() -> list[object]:
        for rank, member in enumerate("abcd", 1):
            await store.put(key + member, b"v", 600)
            await store.admit(group, key + member, 10, 100 * rank)
        first = await store.admit(group, key + "e", 2, 500)
        return [first, *[await store.get(key + member) for member in "abcde"]]

    assert run(steps()) == [key + "a", None, None, None, b"v", None]


def test_the_epoch_is_the_same_for_every_replica_of_one_store(redis_url: str) -> None:
    async def epochs() -> list[str]:
        first, second = RedisStore(redis_url), RedisStore(redis_url)
        return [await first.epoch(), await second.epoch(), await MemoryStore().epoch()]

    first, second, memory = run(epochs())
    assert first == second and first.startswith("redis:")
    assert memory.startswith("memory:") and memory != run(MemoryStore().epoch())


def test_a_claim_under_another_epoch_is_refused_and_writes_nothing(store: Store, key: str) -> None:
    async def steps() -> list[object]:
        epoch = await store.epoch()
        seen: list[object] = [
            await store.claim(key + "a", "1", 60, epoch="memory:other:1"),
            await store.claim(key + "a", "1", 60, epoch="redis:other"),
            await store.get(key + "a"),
            await store.claim(key + "a", "1", 60, epoch=epoch),
            await store.claim(key + "a", "1", 60, epoch=epoch),
        ]
        return seen

    assert run(steps()) == [None, None, None, True, False]


def test_a_redis_that_forgot_has_another_epoch(redis_url: str) -> None:
    url = redis_url.replace("/0", "/4")
    store = RedisStore(url)
    before = run(store.epoch())
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    assert run(store.claim("test:forgot", "1", 60, epoch=before)) is None
    assert run(store.epoch()) != before


def test_redis_keeps_each_entry_for_its_time(redis_url: str, key: str) -> None:
    """Redis counts the time itself; what is asked of it is read back, not waited for."""
    store = RedisStore(redis_url)

    async def steps() -> None:
        await store.put(key + "v", b"x", 30)
        await store.claim(key + "c", "t", 20)
        await store.claim(key + "l", "t", 5)
        await store.put(key + "l", b"u", 40, holder=(key + "l", "t"))
        await store.put(key + "f", b"y", 50, holder=(key + "l", "u"))
        await store.admit(key + "g", key + "v", 3, 60)
        await store.admit(key + "g", key + "c", 3, 10)  # the group lasts as its last member

    run(steps())
    with redis.Redis.from_url(redis_url) as client:
        left = {name: client.pttl(key + name) / 1000 for name in "vclfg"}
    assert 29 < left["v"] <= 30 and 19 < left["c"] <= 20 and 39 < left["l"] <= 40
    assert 49 < left["f"] <= 50 and 59 < left["g"] <= 60


# -- the store of this process, on a clock the test moves ----------------------------------


def test_an_entry_lapses_at_its_time_and_a_claim_is_free_again() -> None:
    clock = ManualClock()
    store = MemoryStore(clock.now)

    async def at(seconds: float) -> list[object]:
        clock.skip(seconds)
        return [await store.get("v"), await store.claim("c", "t2", 10)]

    run(store.put("v", b"x", 10))
    run(store.claim("c", "t1", 10))
    assert run(at(9.5)) == [b"x", False]
    assert run(at(0.5)) == [None, True]  # lapsed at its very time


def test_a_group_member_lapses_and_no_longer_counts() -> None:
    clock = ManualClock()
    store = MemoryStore(clock.now)
    run(store.admit("g", "a", 2, 10))
    clock.skip(5)
    run(store.admit("g", "b", 2, 10))
    clock.skip(5)  # a lapsed: c makes two, nobody leaves
    assert run(store.admit("g", "c", 2, 10)) is None
    assert run(store.admit("g", "d", 2, 10)) == "b"


def test_a_tie_leaves_the_member_admitted_first() -> None:
    store = MemoryStore(ManualClock().now)
    for member in "abc":
        run(store.admit("g", member, 2, 10))
    assert run(store.admit("g", "b", 2, 10)) is None
    assert run(store.admit("g", "d", 2, 10)) == "c"


def test_values_past_the_bytes_bound_let_the_least_recently_used_go() -> None:
    """Values alone count and go: a claim (or a claim handed on) is never let go early,
    since that could let a paused state resume twice."""
    store = MemoryStore(ManualClock().now, max_bytes=10)

    async def steps() -> list[object]:
        await store.claim("lease", "t", 60)
        await store.put("lease", b"held-by-paused", 60, holder=("lease", "t"))
        await store.put("a", b"aaaa", 60)
        await store.put("b", b"bbbb", 60)
        await store.get("a")  # a used: b is the least recently used
        await store.put("c", b"cccc", 60)
        seen = [await store.get(name) for name in ("a", "b", "c", "lease")]
        await store.put("a", b"A", 60)  # smaller now: d fits beside a and c
        await store.put("d", b"dddd", 60)
        return [*seen, *[await store.get(name) for name in ("a", "c", "d")]]

    assert run(steps()) == [b"aaaa", None, b"cccc", b"held-by-paused", b"A", b"cccc", b"dddd"]
    with pytest.raises(ValueError, match="a value of 11 bytes is more than this store keeps"):
        run(store.put("e", b"x" * 11, 60))
    with pytest.raises(ValueError, match="max_bytes must be a positive number of bytes"):
        MemoryStore(max_bytes=0)


def test_a_pinned_value_is_never_let_go_to_make_room_until_written_unpinned() -> None:
    """Work still going on (a task not ended) pins its value: others' values, however
    many, never push it out; written again unpinned, it goes as any value does."""
    store = MemoryStore(ManualClock().now, max_bytes=10)

    async def steps() -> list[object]:
        await store.put("task", b"working!", 60, pinned=True)
        for name in ("a", "b", "c"):
            await store.put(name, b"xxxxxxxx", 60)
        seen = [await store.get(name) for name in ("task", "a", "b", "c")]
        await store.put("task", b"ended", 60)
        await store.put("d", b"dddddddd", 60)
        return [*seen, await store.get("task"), await store.get("d")]

    assert run(steps()) == [b"working!", None, None, b"xxxxxxxx", None, b"dddddddd"]


def test_what_lapsed_is_forgotten_even_unread() -> None:
    """Every `SWEEP_SECONDS`, what lapsed goes, so keys never read again (claims of
    programs long resumed, sessions abandoned) do not pile up and hold no bytes."""
    clock = ManualClock()
    store = MemoryStore(clock.now, max_bytes=8)
    run(store.put("kept", b"kkkk", 600))
    run(store.put("lapsed", b"llll", 1))  # more recently used than "kept"
    clock.skip(SWEEP_SECONDS)
    run(store.put("new", b"nnnn", 600))  # the sweep freed "lapsed": "kept" need not go
    assert [run(store.get(name)) for name in ("kept", "lapsed", "new")] == [
        b"kkkk",
        None,
        b"nnnn",
    ]


def test_a_forked_worker_is_another_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    epoch = run(store.epoch())
    monkeypatch.setattr(os, "getpid", lambda: os.getppid())  # as in the forked child
    assert run(store.epoch()) != epoch
    assert run(store.claim("s", "1", 10, epoch=epoch)) is None


def test_a_store_url_names_a_redis_server() -> None:
    with pytest.raises(ValueError, match=r"^the store must be a Redis URL: redis://host"):
        RedisStore("localhost:6379")
    assert RedisStore.unreachable("redis://127.0.0.1:1/0") == "ConnectionError"
