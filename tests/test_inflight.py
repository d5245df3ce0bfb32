"""The registry a cancel notification finds its call in: by subject and id, never a guess."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from codemode.mcp.server import BATCH_CONCURRENCY, InFlight

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_cancel_ends_only_the_named_call_of_its_subject() -> None:
    calls = InFlight()
    ended: list[str] = []

    async def run(subject: str, request_id: str | int) -> None:
        with calls.running(subject, request_id) as scope:
            await anyio.sleep(5)
        ended.append(f"{subject}:{request_id}:{'canceled' if scope.cancelled_caught else 'ok'}")

    async with anyio.create_task_group() as group:
        group.start_soon(run, "alice", 1)
        group.start_soon(run, "bob", 1)
        group.start_soon(run, "alice", "one")
        await anyio.wait_all_tasks_blocked()
        for subject, request_id in (("carol", 1), ("alice", 2), ("alice", None), ("alice", 1.0)):
            assert not calls.cancel(subject, request_id)
        assert calls.cancel("alice", "1")  # one id, as the SDK compares them
        await anyio.wait_all_tasks_blocked()
        assert ended == ["alice:1:canceled"]
        group.cancel_scope.cancel()


async def test_two_calls_under_one_id_are_both_left_running() -> None:
    calls = InFlight()
    async with anyio.create_task_group() as group:
        for _ in range(2):
            group.start_soon(_hold, calls, "alice", 7)
        await anyio.wait_all_tasks_blocked()
        assert not calls.cancel("alice", 7)
        group.cancel_scope.cancel()
    assert calls.cancel("alice", 7) is False  # and nothing is left filed


async def test_finish_shields_a_call_from_its_caller_but_not_from_a_cancel() -> None:
    calls = InFlight("finish")
    finished = anyio.Event()

    async def run() -> None:
        with calls.running("alice", 1):
            await anyio.sleep(0.2)
            finished.set()

    with anyio.move_on_after(0.05):  # the caller goes away
        await run()
    assert finished.is_set()  # the call ran to its end

    with anyio.fail_after(1):  # not the 5 s the call would take
        async with anyio.create_task_group() as group:
            group.start_soon(_hold, calls, "alice", 2)
            await anyio.wait_all_tasks_blocked()
            calls.cancel_all()  # the server stops: shielded calls end too


async def test_no_call_starts_once_the_server_stops() -> None:
    calls = InFlight("finish")
    calls.cancel_all()
    with calls.running("alice", 1) as scope:
        assert scope.cancel_called
        await anyio.sleep(5)  # cancelled at once
    assert scope.cancelled_caught


async def _hold(calls: InFlight, subject: str, request_id: int) -> None:
    with calls.running(subject, request_id):
        await anyio.sleep(5)


def test_a_misspelt_choice_is_refused() -> None:
    with pytest.raises(ValueError, match='on_disconnect must be "cancel" or "finish", not'):
        InFlight("finsh")  # type: ignore[arg-type]


async def test_a_dropped_connection_ends_the_calls_of_every_copy_of_its_request() -> None:
    """A batch's messages are served on copies of the request's scope: the drop of its
    connection reaches them all, and the mark the log line reads is seen through each."""
    calls = InFlight()
    request: dict[str, Any] = {"type": "http"}
    calls.connect(request)
    copies = [{**request}, {**request}]
    ended: list[bool] = []

    async def run(copy: dict[str, Any]) -> None:
        with calls.running("alice", None, copy) as scope:
            await anyio.sleep(5)
        ended.append(scope.cancelled_caught)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for copy in copies:
                group.start_soon(run, copy)
            await anyio.wait_all_tasks_blocked()
            assert not calls.dropped(copies[0])
            calls.drop(request)
    assert ended == [True, True]
    assert calls.dropped(copies[0]) and calls.dropped(copies[1])
    assert calls.cut(copies[0])  # the drop is what ended them
    assert not calls.dropped({"type": "http"})  # a request never connected
    with calls.running("alice", 1, copies[0]) as late:
        assert late.cancel_called  # its client has left: the call must not start


def test_with_finish_a_drop_is_not_what_ends_a_call() -> None:
    """The log line of a call a notification cancelled after its client left says
    `canceled`, not that the drop ended it."""
    calls = InFlight("finish")
    request: dict[str, Any] = {"type": "http"}
    calls.connect(request)
    calls.drop(request)
    assert calls.dropped(request) and not calls.cut(request)


async def test_the_calls_of_a_batch_take_turns_and_wait_cancellably() -> None:
    calls = InFlight()
    request: dict[str, Any] = {"type": "http"}
    calls.connect(request, batch=True)
    running: list[int] = []
    most = 0
    ended: dict[int, bool] = {}
    release = anyio.Event()

    async def run(request_id: int) -> None:
        nonlocal most
        with calls.running("alice", request_id, {**request}) as scope:
            async with calls.turn(request):
                running.append(request_id)
                most = max(most, len(running))
                await release.wait()
                running.remove(request_id)
        ended[request_id] = scope.cancelled_caught

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for request_id in range(6):
                group.start_soon(run, request_id)
            await anyio.wait_all_tasks_blocked()
            assert len(running) == BATCH_CONCURRENCY
            assert calls.cancel("alice", 5)  # waiting for its turn
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert most == BATCH_CONCURRENCY
    assert ended == {0: False, 1: False, 2: False, 3: False, 4: False, 5: True}
