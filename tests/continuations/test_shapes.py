"""Keeping learned shapes: the file (written whole or not at all, read back or refused with
a clear reason) and the store replicas share (each result counted once, nothing in the
clear), over the store of this process and over a real Redis."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as mt
import pytest
import redis

from codemode.capabilities import Capability, Learned, ShapeBook, to_schema
from codemode.continuations import MemoryStore, RedisStore, Sealer, Store
from codemode.continuations.shapes import (
    PREFIX,
    SHAPES_FORMAT,
    SYNC_SECONDS,
    WRITE_SECONDS,
    ShapeFile,
    ShapeSync,
    read_shapes,
    write_shapes,
)
from codemode.sources.mcp.tools import tool_capability
from codemode.testing import ManualClock

CANARY = "canary-5be0c1"
KEY = "s" * 32
T = TypeVar("T")


def run(step: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(step)


async def send(*_: object) -> Any:
    raise AssertionError("not called")


def undeclared(name: str = "get_file_info") -> Capability:
    tool = mt.Tool(name=name, input_schema={"type": "object"})
    return tool_capability("fs", tool, send, expose_errors="none", timeout=None)


def result(size: int = 1) -> dict[str, Any]:
    """A result whose values, and whose map's keys, are data that must never be kept."""
    return {"kind": CANARY, "size": size, "owners": {f"{CANARY}-{n}": n for n in range(30)}}


def same(a: Learned | None, b: Learned | None) -> bool:
    assert a is not None and b is not None
    return (a.capability_id, a.name, a.digest, a.results) == (
        b.capability_id,
        b.name,
        b.digest,
        b.results,
    ) and to_schema(a.node, stats=True) == to_schema(b.node, stats=True)


# -- the file ------------------------------------------------------------------------------


def test_the_file_reads_back_what_was_written(tmp_path: Path) -> None:
    book = ShapeBook()
    info = undeclared()
    for size in range(3):
        book.observe(info, result(size), "alice")
    path = tmp_path / "shapes.json"
    write_shapes(path, book.snapshot())
    document = json.loads(path.read_text())
    assert document["format"] == SHAPES_FORMAT and list(document["shapes"]) == ["fs.get_file_info"]
    assert CANARY not in path.read_text()
    [read] = read_shapes(path)
    assert same(read, book.learned(info))
    assert [p.name for p in tmp_path.iterdir()] == ["shapes.json"]  # no temporary left


def test_no_file_yet_is_no_shapes(tmp_path: Path) -> None:
    assert read_shapes(tmp_path / "shapes.json") == []


def test_a_failure_before_the_move_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "shapes.json"
    write_shapes(path, [])
    old = path.read_bytes()
    book = ShapeBook()
    book.observe(undeclared(), result(), "alice")
    blocked = tmp_path / f"shapes.json.{os.getpid()}.{threading.get_ident()}.tmp"
    blocked.mkdir()  # the temporary file cannot be made: the write fails before the move
    with pytest.raises(IsADirectoryError):
        write_shapes(path, book.snapshot())
    assert path.read_bytes() == old and read_shapes(path) == []


def test_two_writers_of_one_file_in_one_process_each_write_it_whole(tmp_path: Path) -> None:
    """Two apps given one shapes file share a process: each write is moved over the file
    whole (they wrote one temporary file, so one's move took the other's, half written)."""
    path = tmp_path / "shapes.json"
    book = ShapeBook()
    book.observe(undeclared(), result(), "alice")
    shapes = book.snapshot() * 40
    failed: list[BaseException] = []

    def write() -> None:
        for _ in range(50):
            try:
                write_shapes(path, shapes)
            except OSError as error:
                failed.append(error)

    writers = [threading.Thread(target=write) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert failed == [] and read_shapes(path) != []
    assert [p.name for p in tmp_path.iterdir()] == ["shapes.json"]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "it is not JSON"),
        ('{"format": "codemode-shapes/1", "shapes": ' + "[" * 100_000, "it is nested too deeply"),
        (
            '{"format": "codemode-shapes/2", "shapes": {}}',
            'its "format" is not "codemode-shapes/1"',
        ),
        ('{"format": "codemode-shapes/1", "shapes": []}', 'its "shapes" is not an object'),
        (
            '{"format": "codemode-shapes/1", "shapes": {"fs.a": {"digest": "x", "name": "fs.a",'
            ' "results": 1, "schema": {}}}}',
            "the shape of 'fs.a': its \"digest\" is not 16 hex digits",
        ),
        (
            '{"format": "codemode-shapes/1", "shapes": {"fs.a": {"digest": "0123456789abcdef",'
            ' "name": "fs.a", "results": -1, "schema": {}}}}',
            "the shape of 'fs.a': its \"results\" is not a count",
        ),
        (
            '{"format": "codemode-shapes/1", "shapes": {"fs.a": {"digest": "0123456789abcdef",'
            ' "name": "fs.a", "results": 1, "schema": {"type": "object", "properties": '
            '{"canary-x": {"x-codemode-seen": 1, "x-codemode-present": 1}},'
            ' "x-codemode-seen": 1, "x-codemode-objects": 1}}}}',
            "the shape of 'fs.a': a shape's names are identifiers of 32 characters at most: "
            "'canary-x'",
        ),
    ],
)
def test_a_file_that_cannot_be_read_is_refused_saying_why(
    tmp_path: Path, text: str, why: str
) -> None:
    path = tmp_path / "shapes.json"
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        read_shapes(path)
    assert str(refused.value) == f"the shapes file {path} cannot be read: {why}"


def test_a_folder_is_not_a_shapes_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as refused:
        read_shapes(tmp_path)
    assert str(refused.value) == (
        f"the shapes file {tmp_path} cannot be read: it cannot be opened (IsADirectoryError)"
    )


def test_the_file_is_written_at_most_every_few_seconds_and_at_close(tmp_path: Path) -> None:
    clock = ManualClock()
    book = ShapeBook()
    path = tmp_path / "shapes.json"
    kept = ShapeFile(path, book, clock.now)
    kept.load()
    info = undeclared()
    book.observe(info, result(), "alice")
    assert (kept.due(), kept.tick(), path.exists()) == (False, False, False)
    clock.advance(WRITE_SECONDS)
    assert kept.tick() and len(read_shapes(path)) == 1
    assert not kept.tick() and not kept.close()  # nothing changed since
    book.observe(info, result(), "alice")
    clock.advance(WRITE_SECONDS - 1)
    assert not kept.tick()
    assert kept.close()
    restarted = ShapeBook()
    ShapeFile(path, restarted, clock.now).load()
    assert same(restarted.learned(info), book.learned(info))


def test_a_file_that_cannot_be_written_is_logged_and_kept_for_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    book = ShapeBook()
    path = tmp_path / "missing" / "shapes.json"
    kept = ShapeFile(path, book, clock.now)
    book.observe(undeclared(), result(), "alice")
    clock.advance(WRITE_SECONDS)
    with caplog.at_level(logging.WARNING, logger="codemode"):
        assert not kept.tick()
    assert [r.getMessage() for r in caplog.records] == [
        f"the shapes file {path} could not be written"
    ]
    path.parent.mkdir()
    assert kept.tick() and len(read_shapes(path)) == 1


# -- the store -----------------------------------------------------------------------------


def replica(store: Store, clock: ManualClock | None = None) -> tuple[ShapeBook, ShapeSync]:
    book = ShapeBook(subject_key=KEY.encode())
    clock = clock or ManualClock()
    return book, ShapeSync(book, store, Sealer(KEY, purpose="shapes"), clock.now)


def results_of(book: ShapeBook, capability: Capability) -> int:
    learned = book.learned(capability)
    return 0 if learned is None else learned.results


def counted_once(store: Store) -> None:
    """Two replicas, then a restarted one: every result counted once, everywhere."""
    info = undeclared()
    (a, sync_a), (b, sync_b) = replica(store), replica(store)
    for size in range(3):
        a.observe(info, result(size), "alice")
    for size in range(2):
        b.observe(info, result(size), "bob")
    assert run(sync_a.sync()) and run(sync_b.sync()) and run(sync_a.sync())
    assert (results_of(a, info), results_of(b, info)) == (5, 5)
    assert run(sync_b.sync()) and run(sync_a.sync())  # nothing new: still five
    assert (results_of(a, info), results_of(b, info)) == (5, 5)
    learned = a.learned(info)
    assert learned is not None and learned.node.fields is not None
    assert {name: len(field.subjects) for name, field in learned.node.fields} == {
        "kind": 2,
        "size": 2,
        "owners": 2,
    }

    c, sync_c = replica(store)  # a restart: a new process, the store remembers
    assert c.learns(info)
    assert run(sync_c.sync()) and results_of(c, info) == 5
    c.observe(info, result(), "carol")
    assert run(sync_c.sync()) and run(sync_a.sync())
    assert (results_of(a, info), results_of(c, info)) == (6, 6)


def test_an_index_sealed_under_another_key_is_replaced_not_a_block() -> None:
    """After the key changed (or another deployment shares the Redis), the index the old
    key sealed cannot be opened: the replicas start a new one rather than share nothing."""
    store = MemoryStore(ManualClock().now)
    info = undeclared()
    old = ShapeBook()
    old_sync = ShapeSync(old, store, Sealer("o" * 32, purpose="shapes"), ManualClock().now)
    old.observe(info, result(), "alice")
    assert run(old_sync.sync())
    (a, sync_a), (b, sync_b) = replica(store), replica(store)
    a.observe(info, result(), "alice")
    assert run(sync_a.sync())
    assert b.learns(info) and run(sync_b.sync()) and results_of(b, info) == 1


def test_replicas_through_one_memory_store_count_each_result_once() -> None:
    counted_once(MemoryStore(ManualClock().now))


@pytest.fixture
def redis_store(redis_url: str) -> RedisStore:
    with redis.Redis.from_url(redis_url) as client:
        for key in client.scan_iter(f"{PREFIX}*"):
            client.delete(key)
    return RedisStore(redis_url)


def test_replicas_through_redis_count_each_result_once_and_keep_nothing_in_the_clear(
    redis_url: str, redis_store: RedisStore
) -> None:
    counted_once(redis_store)
    with redis.Redis.from_url(redis_url) as client:
        kept = {key: client.get(key) for key in client.scan_iter(f"{PREFIX}*")}
    assert len(kept) == 2  # the index and one shape (the claim was released)
    forbidden = [CANARY, "fs.get_file_info", "get_file_info", "kind", "size", "owners"]
    forbidden += ["alice", "bob", "carol", ShapeBook(subject_key=KEY.encode()).digest("alice")]
    for key, value in kept.items():
        assert value is not None
        for word in forbidden:
            assert word.encode() not in key and word.encode() not in value, (key, word)


def test_a_file_seeds_the_store_only_where_it_lacks_the_shape(tmp_path: Path) -> None:
    path = tmp_path / "shapes.json"
    info = undeclared()
    first = ShapeBook()
    for _ in range(4):
        first.observe(info, result(), "alice")
    write_shapes(path, first.snapshot())
    store = MemoryStore(ManualClock().now)
    a, sync_a = replica(store)
    b, sync_b = replica(store)
    for book in (a, b):  # two replicas started from one file
        book.load(read_shapes(path))
        book.learns(info)
    assert run(sync_a.sync()) and run(sync_b.sync())
    b.observe(info, result(), "bob")
    assert run(sync_b.sync()) and run(sync_a.sync())
    assert (results_of(a, info), results_of(b, info)) == (5, 5)


def test_a_sync_waits_its_turn_on_the_clock() -> None:
    clock = ManualClock()
    book, sync = replica(MemoryStore(clock.now), clock)
    info = undeclared()
    book.observe(info, result(), "alice")
    assert run(sync.tick())
    book.observe(info, result(), "alice")
    clock.advance(SYNC_SECONDS - 1)
    assert not run(sync.tick()) and set(book.pending()) == {"fs.get_file_info"}
    clock.advance(1)
    assert run(sync.tick()) and book.pending() == {}


def test_a_store_that_fails_leaves_learning_local_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gone = RedisStore("redis://127.0.0.1:9/0", timeout=1)  # nothing listens there
    book, sync = replica(gone)
    info = undeclared()
    book.observe(info, result(), "alice")
    with caplog.at_level(logging.WARNING, logger="codemode"):
        assert not run(sync.sync())
        book.observe(info, result(), "alice")
        assert not run(sync.sync())
    assert [r.getMessage() for r in caplog.records] == [
        "learned shapes could not be shared; kept here"
    ]
    assert results_of(book, info) == 2
    assert {k: v.results for k, v in book.pending().items()} == {"fs.get_file_info": 2}


def test_a_replica_that_does_not_get_the_claim_keeps_its_results_for_next_time() -> None:
    store = MemoryStore(ManualClock().now)
    book, sync = replica(store)
    info = undeclared()
    book.observe(info, result(), "alice")
    assert run(store.claim("codemode:shapes:v1:lock", "another replica", 10))
    assert run(sync.sync())
    assert {k: v.results for k, v in book.pending().items()} == {"fs.get_file_info": 1}
    run(store.release("codemode:shapes:v1:lock", "another replica"))
    other, other_sync = replica(store)
    other.learns(info)
    assert run(sync.sync()) and run(other_sync.sync())
    assert results_of(other, info) == 1
