"""Kept programs: the record's format, the store's shelf (in memory and in a real Redis),
sealed and named by digests, its owners apart, its version, and its bound."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import secrets
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, TypeVar

import pytest
import redis

from codemode.continuations import MemoryStore, RedisStore, Sealer, Store
from codemode.continuations.programs import (
    PREFIX,
    ProgramRecord,
    ProgramShelf,
    StoreShelf,
    store_shelf,
)
from codemode.errors import ErrorCode, InvalidRequestError
from codemode.limits import Limits
from tests.conftest import CANARY, redis_kept

T = TypeVar("T")
OWNER = f"alice-{CANARY}"
NAME = "canary_weekly_hunter2"
SOURCE = f'"""Weekly report."""\ndef main(*, week: int = 48):\n    return "{CANARY}"\n'
SUMMARY = f"the weekly report {CANARY}"


def run(step: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(step)


def a_record(**changes: Any) -> ProgramRecord:
    record = ProgramRecord(NAME, SUMMARY, SOURCE, OWNER, 1_764_000_000.5)
    return replace(record, **changes)


@pytest.fixture
def secret() -> str:
    """A key no other test uses, so its digests name keys of its own in the shared Redis."""
    return secrets.token_hex(32)


# -- the record ---------------------------------------------------------------------------


def test_a_record_round_trips_byte_for_byte() -> None:
    record = a_record(owner=None, source="def main():\n    return '\u2028é\ud800'\n")
    encoded = record.encode()
    assert ProgramRecord.decode(encoded) == record
    assert ProgramRecord.decode(encoded).encode() == encoded
    assert json.loads(encoded.decode("utf-8", "surrogatepass"))["format"] == 1
    assert record.digest != replace(record, source="def main():\n    return 1\n").digest


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"format": 2}, "the record's format is not 1"),
        ({"name": "Weekly"}, 'the record\'s "name" is not a name'),
        ({"source": None}, 'the record\'s "summary" or "source" is not text'),
        ({"owner": 7}, 'the record\'s "owner" is not a subject'),
        ({"saved_at": True}, 'the record\'s "saved_at" is not a time'),
        ({"replaced": 1}, 'the record\'s "replaced" is not true or false'),
    ],
)
def test_a_record_of_another_format_or_shape_is_refused(change: dict[str, Any], why: str) -> None:
    document = json.loads(a_record().encode()) | change
    with pytest.raises(ValueError, match=f"^{why}$"):
        ProgramRecord.decode(json.dumps(document).encode())
    with pytest.raises(ValueError, match=r"^the record is not JSON$"):
        ProgramRecord.decode(b"\xff")


# -- the store's shelf --------------------------------------------------------------------


def test_a_shelf_keeps_gets_lists_and_deletes_by_owner(store: Store, secret: str) -> None:
    shelf = store_shelf(store, Sealer(secret))
    assert isinstance(shelf, ProgramShelf)

    async def scenario() -> None:
        assert await shelf.names(OWNER) == () and await shelf.get(OWNER, NAME) is None
        assert await shelf.put(a_record()) is False
        assert await shelf.put(a_record(name="another")) is False
        assert await shelf.get(OWNER, NAME) == a_record()
        assert await shelf.names(OWNER) == ("another", NAME)
        # the host's programs, another subject's, and a subject named "host" are apart
        for owner in (None, "bob", "host", ""):
            assert await shelf.names(owner) == () and await shelf.get(owner, NAME) is None
        assert await shelf.put(a_record(owner=None, summary="the host's")) is False
        assert (await shelf.get(None, NAME)) == a_record(owner=None, summary="the host's")
        assert await shelf.put(a_record(source="def main():\n    return 2\n")) is True
        assert (await shelf.get(OWNER, NAME)) == a_record(source="def main():\n    return 2\n")
        assert await shelf.delete(OWNER, NAME) is True
        assert await shelf.delete(OWNER, NAME) is False
        assert await shelf.get(OWNER, NAME) is None and await shelf.names(OWNER) == ("another",)
        assert await shelf.names(None) == (NAME,)
        assert await shelf.get(OWNER, "Not A Name") is None
        assert await shelf.delete(OWNER, "../x") is False

    run(scenario())


def test_a_replica_reads_what_another_kept(store: Store, secret: str) -> None:
    one, two = store_shelf(store, Sealer(secret)), store_shelf(store, Sealer(secret))

    async def scenario() -> None:
        await one.put(a_record())
        assert await two.get(OWNER, NAME) == a_record()
        assert await two.names(OWNER) == (NAME,)
        assert await two.version(OWNER) == await one.version(OWNER)

    run(scenario())


def test_the_version_changes_on_put_replace_and_delete_and_only_for_that_owner(
    store: Store, secret: str
) -> None:
    shelf = store_shelf(store, Sealer(secret))

    async def scenario() -> None:
        seen = [await shelf.version(OWNER)]
        bob = await shelf.version("bob")
        await shelf.put(a_record())
        seen.append(await shelf.version(OWNER))
        assert await shelf.version(OWNER) == seen[-1]  # nothing changed, nor does it
        await shelf.put(a_record(summary="another summary"))
        seen.append(await shelf.version(OWNER))
        await shelf.put(a_record(name="second"))
        seen.append(await shelf.version(OWNER))
        await shelf.delete(OWNER, "second")
        seen.append(await shelf.version(OWNER))
        await shelf.delete(OWNER, NAME)
        seen.append(await shelf.version(OWNER))
        assert all(before != after for before, after in itertools.pairwise(seen))
        # the version is of what is kept: the same set, the same version
        assert (seen[4], seen[5]) == (seen[2], seen[0])
        assert await shelf.version("bob") == bob
        for version in seen:
            assert len(version) == 32 and CANARY not in version

    run(scenario())


def test_a_record_sealed_under_another_key_is_ignored_and_logged(
    store: Store, secret: str, caplog: pytest.LogCaptureFixture
) -> None:
    mine = store_shelf(store, Sealer(secret))
    theirs = StoreShelf(store, Sealer(secrets.token_hex(32)))

    async def scenario() -> None:
        await theirs.put(a_record())
        # the other key names other keys: nothing of theirs is found here
        assert await mine.get(OWNER, NAME) is None and await mine.names(OWNER) == ()
        # a record they sealed, put where this key looks for it, does not open
        blob = await store.get(theirs.record_key(OWNER, NAME))
        assert blob is not None
        await store.put(mine.record_key(OWNER, NAME), blob, 60)
        index = await store.get(theirs.index_key(OWNER))
        assert index is not None
        await store.put(mine.index_key(OWNER), index, 60)
        with caplog.at_level(logging.WARNING, logger="codemode"):
            assert await mine.get(OWNER, NAME) is None
            assert await mine.names(OWNER) == ()
        # and the next write replaces that index with its own
        assert await mine.put(a_record(name="mine")) is False
        assert await mine.names(OWNER) == ("mine",)

    run(scenario())
    assert [r.getMessage() for r in caplog.records] == [
        "a saved program in the store cannot be opened here; ignored",
        "an index of saved programs in the store cannot be opened here; ignored",
        "an index of saved programs in the store cannot be opened here; ignored",  # the put's
    ]


def test_a_record_of_another_format_or_under_another_name_is_ignored(
    store: Store, secret: str, caplog: pytest.LogCaptureFixture
) -> None:
    sealer = Sealer(secret)
    shelf = StoreShelf(store, sealer)

    async def scenario() -> None:
        key = shelf.record_key(OWNER, NAME)
        document = json.loads(a_record().encode()) | {"format": 2}
        await store.put(key, sealer.seal(json.dumps(document).encode(), key), 60)
        with caplog.at_level(logging.WARNING, logger="codemode"):
            assert await shelf.get(OWNER, NAME) is None
            # bob's record, sealed for the key of alice's: not the program it names
            bobs = a_record(owner="bob").encode()
            await store.put(key, sealer.seal(bobs, key), 60)
            assert await shelf.get(OWNER, NAME) is None
            # a blob copied from bob's key to alice's does not open
            await shelf.put(a_record(owner="bob"))
            copied = await store.get(shelf.record_key("bob", NAME))
            assert copied is not None
            await store.put(key, copied, 60)
            assert await shelf.get(OWNER, NAME) is None

    run(scenario())
    assert [r.getMessage() for r in caplog.records] == [
        "a saved program in the store cannot be opened here; ignored",
        "a saved program in the store is not the one its key names; ignored",
        "a saved program in the store cannot be opened here; ignored",
    ]


def test_a_subject_keeps_at_most_its_bound_and_the_host_is_not_bounded(
    store: Store, secret: str
) -> None:
    assert Limits().max_saved_programs_per_subject == 100
    shelf = store_shelf(store, Sealer(secret), limit=2)

    async def scenario() -> None:
        await shelf.put(a_record(name="one"))
        await shelf.put(a_record(name="two"))
        with pytest.raises(InvalidRequestError) as refused:
            await shelf.put(a_record(name="three"))
        assert refused.value.code is ErrorCode.INVALID_REQUEST
        assert str(refused.value) == (
            "invalid request: you keep 2 saved programs; replace or ask the operator to delete one"
        )
        assert await shelf.get(OWNER, "three") is None
        assert await shelf.put(a_record(name="two", summary="replaced")) is True
        assert await shelf.names(OWNER) == ("one", "two")
        await shelf.delete(OWNER, "one")
        assert await shelf.put(a_record(name="three")) is False
        assert await shelf.names("bob") == ()
        for name in ("a", "b", "c"):  # another subject has a bound of its own, the host none
            await shelf.put(a_record(owner=None, name=name))
        assert await shelf.names(None) == ("a", "b", "c")

    run(scenario())


def test_writers_of_one_owner_at_once_lose_no_name(store: Store, secret: str) -> None:
    shelves = [store_shelf(store, Sealer(secret)) for _ in range(3)]
    names = [f"program_{n}" for n in range(12)]

    async def scenario() -> None:
        await asyncio.gather(
            *(shelves[n % 3].put(a_record(name=name)) for n, name in enumerate(names))
        )
        assert await shelves[0].names(OWNER) == tuple(sorted(names))
        for name in names:
            assert await shelves[1].get(OWNER, name) == a_record(name=name)

    run(scenario())


def test_a_bad_name_is_refused_before_anything_is_kept(secret: str) -> None:
    shelf = store_shelf(MemoryStore(), Sealer(secret))
    for name in ("Weekly", "", "a" * 65, "9lives", "a-b", "../x"):
        with pytest.raises(ValueError, match="must be a lowercase identifier"):
            run(shelf.put(a_record(name=name)))


def test_a_shared_store_needs_the_servers_key(redis_url: str) -> None:
    message = "saved programs in a shared store need the server's key"
    for sealer in (None, Sealer(None)):
        with pytest.raises(ValueError, match=message):
            store_shelf(RedisStore(redis_url), sealer)
    shelf = store_shelf()  # memory, a secret of its own
    run(shelf.put(a_record()))
    assert run(shelf.get(OWNER, NAME)) == a_record()
    with pytest.raises(ValueError, match="a shelf's limit must be a positive number"):
        store_shelf(limit=0)


def test_redis_holds_no_owner_name_summary_or_source_in_the_clear(
    redis_url: str, secret: str
) -> None:
    with redis.Redis.from_url(redis_url) as client:
        for key in client.scan_iter(f"{PREFIX}*"):
            client.delete(key)
    shelf = store_shelf(RedisStore(redis_url), Sealer(secret))

    async def scenario() -> None:
        await shelf.put(a_record())
        await shelf.put(a_record(owner=None, name="host_canary_program"))
        await shelf.put(a_record(name="second_canary"))
        await shelf.delete(OWNER, "second_canary")

    run(scenario())
    with redis.Redis.from_url(redis_url) as client:
        kept = {key: redis_kept(client, key) for key in client.scan_iter("*")}
    ours = [key for key in kept if key.startswith(PREFIX.encode())]
    assert len(ours) == 4  # two records and two indexes (the claims were released)
    unique = [OWNER, NAME, SUMMARY, SOURCE, "host_canary_program", "second_canary"]
    for key, value in kept.items():  # every key Redis holds, whoever wrote it
        assert value is not None
        for word in unique:
            assert word.encode() not in key and word.encode() not in value, (key, word)
    for key in ours:
        held = kept[key]
        assert held is not None
        for word in [CANARY, "alice", "weekly", "canary", "hunter2", "def main", "report"]:
            assert word.encode() not in key and word.encode() not in held, (key, word)
