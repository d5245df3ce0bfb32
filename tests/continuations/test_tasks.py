"""Task records: written and read back exactly, bound to their subject, sealed in the store,
written only by the lease's holder, bounded per subject, and cancelled across replicas; the
same table for the store of this process (on a ManualClock) and for Redis (the real server)."""

from __future__ import annotations

import asyncio
import json
import secrets
import zlib
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, TypeVar

import pytest
import redis

from codemode.continuations import (
    TASK_ID,
    TASK_LOST,
    VERSIONS,
    ApprovalRequest,
    MemoryStore,
    RedisStore,
    Sealer,
    Store,
    TaskBook,
    TaskRecord,
    new_task_id,
    record_bound,
)
from codemode.continuations.tasks import ENDED_KEY, HEADER_BYTES
from codemode.errors import ErrorCode, TaskNotFoundError
from codemode.limits import KIB, Limits
from codemode.testing import ManualClock
from tests.conftest import redis_kept

T = TypeVar("T")
LIMITS = Limits(max_return_bytes=16 * KIB, max_paused_bytes=16 * KIB)
BOUND = record_bound(LIMITS)
LEASE = 5.0
KEEP = 3600.0
REQUEST = ApprovalRequest(
    key="approval-2",
    subject="alice",
    execution_id="execution-1",
    capability_name="tickets.delete",
    capability_id="tickets.delete",
    arguments={"id": 2, "why": "é\u2028"},
    message="Delete ticket 2?",
)
WORKING = TaskRecord("working", 1000.0, 1000.0)


def run(step: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(step)


@pytest.fixture
def secret() -> str:
    """A sealing key no other test uses, so its digests name keys of its own in the
    Redis server the session shares."""
    return secrets.token_hex(32)


def a_record(**changes: Any) -> TaskRecord:
    record = TaskRecord(
        "input_required",
        1000.0,
        1002.5,
        message="waiting for a person to approve 1 call",
        progress=3.0,
        total=20.0,
        reply=b'{"content":[]}',
        state=b"MONTY\0" + bytes(range(256)) * 8,
        requests=(REQUEST,),
        slot=("codemode:task-slot:digest", "token"),
    )
    return replace(record, **changes)


# -- the record ---------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize(
    "record",
    [
        a_record(),
        a_record(reply=None, state=None, requests=(), progress=None, total=None, slot=None),
        a_record(status="completed", reply=b"", state=None, requests=()),
        a_record(status="working", reply=None),
    ],
)
def test_a_record_reads_back_exactly(record: TaskRecord, compress: bool) -> None:
    assert TaskRecord.decode(record.encode(compress=compress), BOUND) == record


def test_only_ended_statuses_are_terminal() -> None:
    terminal = {s: a_record(status=s).terminal for s in ("completed", "failed", "cancelled")}
    assert terminal == {"completed": True, "failed": True, "cancelled": True}
    assert not a_record(status="working").terminal
    assert not a_record(status="input_required").terminal


def header_and_body(record: TaskRecord) -> tuple[dict[str, Any], bytes]:
    head, _, body = record.encode(compress=False).partition(b"\n")
    return json.loads(head), body


def encoded(header: dict[str, Any], body: bytes) -> bytes:
    return json.dumps(header).encode() + b"\n" + body


def unreadable() -> list[bytes]:
    header, body = header_and_body(a_record())
    cases = [
        b"",
        b"no header",
        b"[]\n",
        encoded({**header, "format": 2}, body),
        encoded({**header, "versions": {**VERSIONS, "codemode": "0.0.1"}}, body),
        encoded({**header, "status": "done"}, body),
        encoded({**header, "compressed": 1}, body),
        encoded({**header, "slot": ["only the key"]}, body),
        encoded(header, body[:-1]),  # cut short
        encoded({**header, "reply": -1}, body),
        encoded({**header, "created_at": "now"}, body),
        encoded({**header, "message": None}, body),
        encoded({**header, "requests": [{"key": "approval-2"}]}, body),
        encoded({**header, "compressed": True}, zlib.compress(body)[:-3]),
        encoded(
            {**header, "compressed": True, "reply": 0, "state": BOUND + 1},
            zlib.compress(bytes(BOUND + 1)),
        ),
    ]
    return cases


@pytest.mark.parametrize("blob", unreadable())
def test_a_record_that_cannot_be_read_is_refused(blob: bytes) -> None:
    with pytest.raises(ValueError):
        TaskRecord.decode(blob, BOUND)


def test_a_record_past_its_bound_is_refused_before_it_is_read() -> None:
    """The bound holds a rendered reply of the largest value and output a program may
    give (four times them), a paused state and a header."""
    assert record_bound(LIMITS) == 4 * (16 * KIB + 64 * KIB) + 16 * KIB + HEADER_BYTES
    big = a_record(reply=bytes(BOUND - HEADER_BYTES - 4096), state=bytes(4096))
    assert TaskRecord.decode(big.encode(compress=False), BOUND) == big
    with pytest.raises(ValueError):
        TaskRecord.decode(big.encode(compress=False), BOUND - HEADER_BYTES)
    with pytest.raises(ValueError):  # small once compressed, too large once inflated
        TaskRecord.decode(big.encode(compress=True), BOUND - HEADER_BYTES - 1)


def test_task_ids_are_128_random_bits() -> None:
    ids = {new_task_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(TASK_ID.fullmatch(task_id) for task_id in ids)


def test_a_missing_task_says_so_and_nothing_more() -> None:
    assert str(TaskNotFoundError()) == "task not found"
    assert TaskNotFoundError().code is ErrorCode.TASK_NOT_FOUND
    assert ErrorCode.TASK_NOT_FOUND.value == "task_not_found"
    assert TaskNotFoundError().to_payload() == {
        "code": "task_not_found",
        "message": "task not found",
        "where": None,
    }


# -- the book over a store ----------------------------------------------------------------


def missing(book: TaskBook, subject: str, task_id: str) -> str:
    with pytest.raises(TaskNotFoundError) as raised:
        run(book.read(subject, task_id))
    return str(raised.value)


def test_a_task_is_written_before_anyone_is_answered_and_read_by_any_replica(
    store: Store, secret: str
) -> None:
    owner, other = TaskBook(store, Sealer(secret), BOUND), TaskBook(store, Sealer(secret), BOUND)

    async def steps() -> list[object]:
        hold = await owner.open("alice", WORKING, limit=4, lease_seconds=LEASE, seconds=KEEP)
        assert hold is not None
        seen: list[object] = [await other.read("alice", hold.task_id)]
        assert await owner.write(hold, a_record(), KEEP)
        seen.append(await other.read("alice", hold.task_id))
        return seen

    assert run(steps()) == [WORKING, a_record()]


def test_another_subjects_a_made_up_and_a_malformed_id_read_the_same(
    store: Store, secret: str
) -> None:
    book = TaskBook(store, Sealer(secret), BOUND)
    hold = run(book.open("alice", WORKING, limit=4, lease_seconds=LEASE, seconds=KEEP))
    assert hold is not None
    answers = {
        missing(book, "bob", hold.task_id),
        missing(book, "alice", new_task_id()),
        missing(book, "alice", "t-short"),
        missing(book, "alice", 7),  # type: ignore[arg-type]
        missing(TaskBook(store, Sealer(secrets.token_hex(32)), BOUND), "alice", hold.task_id),
    }
    assert answers == {"task not found"}


def test_a_record_copied_under_another_subjects_key_does_not_open(
    store: Store, secret: str
) -> None:
    book = TaskBook(store, Sealer(secret), BOUND)

    async def steps() -> str:
        hold = await book.open("alice", a_record(), limit=4, lease_seconds=LEASE, seconds=KEEP)
        assert hold is not None
        blob = await store.get(hold.key)
        assert blob is not None
        await store.put(book.key("bob", hold.task_id), blob, KEEP)
        return hold.task_id

    assert missing(book, "bob", run(steps())) == "task not found"


def test_the_store_holds_neither_the_subject_nor_the_id_nor_the_record(redis_url: str) -> None:
    secret = secrets.token_hex(32)
    book = TaskBook(RedisStore(redis_url), Sealer(secret), BOUND)
    subject = "canary-" + secrets.token_hex(8)
    record = a_record(message="canary-message", reply=b"canary-reply")
    hold = run(book.open(subject, record, limit=4, lease_seconds=LEASE, seconds=KEEP))
    assert hold is not None
    run(book.write(hold, replace(record, status="completed"), KEEP))  # joins the ended ones
    with redis.Redis.from_url(redis_url) as client:
        held = {key: redis_kept(client, key) for key in client.keys("codemode:task*")}
    assert any(key.startswith(ENDED_KEY.encode()) for key in held)
    mine = {key: value for key, value in held.items() if key.decode().startswith(hold.key)}
    assert set(mine) == {hold.key.encode(), hold.lease.encode()}
    everything = b" ".join(key + b"=" + (value or b"") for key, value in held.items())
    for canary in (subject, hold.task_id, "canary-message", "canary-reply", "tickets.delete"):
        assert canary.encode() not in everything


def test_each_subject_runs_at_most_its_bound_of_tasks(store: Store, secret: str) -> None:
    book = TaskBook(store, Sealer(secret), BOUND)

    async def steps() -> list[bool]:
        def opening(subject: str) -> Coroutine[Any, Any, Any]:
            return book.open(subject, WORKING, limit=2, lease_seconds=LEASE, seconds=KEEP)

        first, second, third = (
            await opening("alice"),
            await opening("alice"),
            await opening("alice"),
        )
        bobs = await opening("bob")
        assert first is not None
        await book.close(first)
        again = await opening("alice")
        return [x is not None for x in (first, second, third, bobs, again)]

    assert run(steps()) == [True, True, False, True, True]


def test_each_subject_keeps_at_most_its_bound_of_ended_tasks_its_oldest_dropped(
    store: Store, secret: str
) -> None:
    """Three ended records kept of alice's four, her first dropped as her fourth ended;
    bob's ended one and alice's running one are no part of her count."""
    book = TaskBook(store, Sealer(secret), BOUND, ended=3)

    async def steps() -> list[str]:
        holds = []
        for subject in ("bob", "alice", "alice", "alice", "alice", "alice"):
            hold = await book.open(subject, WORKING, limit=8, lease_seconds=LEASE, seconds=KEEP)
            assert hold is not None
            holds.append((subject, hold))
        for _, hold in holds[:-1]:
            assert await book.write(hold, replace(WORKING, status="completed"), KEEP)
        seen: list[str] = []
        for subject, hold in holds:
            try:
                seen.append((await book.read(subject, hold.task_id)).status)
            except TaskNotFoundError:
                seen.append("dropped")
        return seen

    assert run(steps()) == ["completed", "dropped", *["completed"] * 3, "working"]


def test_a_paused_task_keeps_its_slot_for_whoever_goes_on_with_it(
    store: Store, secret: str
) -> None:
    """A pause keeps its run's slot (the subject's bound counts it) and names it in its
    record; the run that goes on with it takes that slot over, and its end frees it."""
    book = TaskBook(store, Sealer(secret), BOUND)

    async def steps() -> list[bool]:
        hold = await book.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=KEEP)
        assert hold is not None
        kept = await book.keep_slot(hold, KEEP)
        assert kept == (hold.slot, hold.token)
        await book.write(hold, replace(WORKING, status="input_required", slot=kept), KEEP)
        await book.close(replace(hold, slot=None))  # its lease only
        full = await book.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=KEEP)
        taken = await book.take("alice", hold.task_id, LEASE)
        assert taken is not None
        record = await book.read("alice", hold.task_id)
        resumed = await book.adopt_slot(taken, record.slot, LEASE)
        stale = await book.adopt_slot(taken, kept, LEASE)  # handed on already
        still = await book.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=KEEP)
        await book.close(resumed)
        freed = await book.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=KEEP)
        return [
            full is None,
            resumed.slot == hold.slot,
            stale.slot is None,
            still is None,
            freed is not None,
        ]

    assert run(steps()) == [True] * 5


def test_a_replica_asks_the_owner_to_cancel_through_the_store(store: Store, secret: str) -> None:
    owner, other = TaskBook(store, Sealer(secret), BOUND), TaskBook(store, Sealer(secret), BOUND)

    async def steps() -> list[bool]:
        hold = await owner.open("alice", WORKING, limit=4, lease_seconds=LEASE, seconds=KEEP)
        assert hold is not None
        seen = [await owner.cancel_asked(hold)]
        await other.ask_cancel("bob", hold.task_id, LEASE)  # another subject's: not this one
        seen.append(await owner.cancel_asked(hold))
        await other.ask_cancel("alice", hold.task_id, LEASE)
        seen.append(await owner.cancel_asked(hold))
        return seen

    assert run(steps()) == [False, False, True]


def test_only_the_leases_holder_writes_and_a_reader_can_take_no_live_lease(
    store: Store, secret: str
) -> None:
    owner, reader = TaskBook(store, Sealer(secret), BOUND), TaskBook(store, Sealer(secret), BOUND)

    async def steps() -> list[object]:
        hold = await owner.open("alice", WORKING, limit=4, lease_seconds=LEASE, seconds=KEEP)
        assert hold is not None
        seen: list[object] = [await reader.take("alice", hold.task_id, LEASE)]
        await owner.close(hold)  # the run ended: its lease is free
        taken = await reader.take("alice", hold.task_id, LEASE)
        assert taken is not None
        seen.append(await owner.write(hold, a_record(status="completed"), KEEP))
        seen.append(await owner.renew(hold, LEASE))
        seen.append(await reader.write(taken, a_record(status="failed", message=TASK_LOST), KEEP))
        seen.append((await owner.read("alice", hold.task_id)).status)
        return seen

    assert run(steps()) == [None, False, False, True, "failed"]


# -- time, on the store of this process ---------------------------------------------------


def test_a_renewed_lease_outlives_its_first_term_and_a_lapsed_one_is_taken() -> None:
    clock = ManualClock()
    store = MemoryStore(clock.now)
    sealer = Sealer(secrets.token_hex(32))
    owner, reader = TaskBook(store, sealer, BOUND), TaskBook(store, sealer, BOUND)

    async def steps() -> list[object]:
        hold = await owner.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=KEEP)
        assert hold is not None
        clock.skip(4)
        seen: list[object] = [await owner.renew(hold, LEASE)]
        clock.skip(4)  # 8 s after it opened, 4 s after its renewal
        seen.append(await reader.take("alice", hold.task_id, LEASE))
        seen.append(await owner.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=KEEP))
        clock.skip(LEASE)  # the owner stopped renewing: its lease and its slot lapse
        taken = await reader.take("alice", hold.task_id, LEASE)
        assert taken is not None
        seen.append(await reader.write(taken, replace(WORKING, status="failed"), KEEP))
        seen.append(await owner.write(hold, replace(WORKING, status="completed"), KEEP))
        seen.append(await owner.renew(hold, LEASE))
        seen.append((await reader.read("alice", hold.task_id)).status)
        fresh = await owner.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=KEEP)
        seen.append(fresh is not None)
        return seen

    assert run(steps()) == [True, None, None, True, False, False, "failed", True]


def test_a_record_past_its_time_reads_as_not_found() -> None:
    clock = ManualClock()
    book = TaskBook(MemoryStore(clock.now), Sealer(None), BOUND)
    hold = run(book.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=60))
    assert hold is not None
    assert run(book.read("alice", hold.task_id)) == WORKING
    clock.skip(60)
    assert missing(book, "alice", hold.task_id) == "task not found"


def test_a_record_past_the_bound_is_never_written() -> None:
    """A record the book could not read back is refused as it is written, so its owner
    can write another (a failure) rather than leave a task that reads as not found."""
    book = TaskBook(MemoryStore(), Sealer(None), BOUND)
    hold = run(book.open("alice", WORKING, limit=1, lease_seconds=LEASE, seconds=KEEP))
    assert hold is not None
    with pytest.raises(ValueError, match=f"is more than {BOUND}$"):
        run(book.write(hold, a_record(status="completed", reply=bytes(BOUND)), KEEP))
    assert run(book.read("alice", hold.task_id)) == WORKING


def test_a_record_this_server_cannot_read_reads_as_not_found() -> None:
    """Written where the bound is larger (another server's limits): not found, as for
    every other cause, never an error that tells a task exists."""
    store = MemoryStore()
    sealer = Sealer(None)
    large, small = TaskBook(store, sealer, BOUND), TaskBook(store, sealer, BOUND // 2)
    big = a_record(reply=bytes(BOUND // 2))
    hold = run(large.open("alice", big, limit=1, lease_seconds=LEASE, seconds=KEEP))
    assert hold is not None
    assert run(large.read("alice", hold.task_id)) == big
    assert missing(small, "alice", hold.task_id) == "task not found"
