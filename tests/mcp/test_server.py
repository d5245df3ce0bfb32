"""The MCP adapter's server, in process: the registry a cancel notification finds its call
in (by subject and id, never a guess), and the paths only an in-process server reaches (no
subject at all, a crashing adapter, the budget in the execute tool's description).

The same server over stdio and streamable HTTP, as clients launch it, is in tests/e2e."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from codemode import Limits
from codemode.mcp import build_server
from codemode.mcp.server import BATCH_CONCURRENCY, InFlight
from tests.conftest import CANARY, build_host

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


# Paths only an in-process server reaches


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_no_subject_is_unauthenticated(mode: str) -> None:
    with build_host() as cm:
        async with Client(build_server(cm, subject=None), mode=mode) as client:
            result = await client.call_tool("execute", {"source": "def main():\n    return 1"})
    assert result.is_error
    assert result.structured_content == {
        "error": {"code": "unauthenticated", "message": "unauthenticated", "where": None}
    }


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_crash_in_the_adapter_is_an_internal_failure(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with build_host() as cm:

        async def explode(query: str, **options: object) -> None:
            raise RuntimeError(f"index corrupted {CANARY}")

        monkeypatch.setattr(cm, "search_async", explode)
        async with Client(build_server(cm, subject="a"), mode=mode) as client:
            result = await client.call_tool("search_api", {"query": "x"})
    assert result.is_error
    assert result.structured_content == {
        "error": {"code": "internal", "message": "internal failure", "where": None}
    }
    assert CANARY not in str(result)


@pytest.mark.parametrize("disclose", [True, False])
async def test_the_execute_description_gives_the_budget_unless_the_host_keeps_it(
    disclose: bool,
) -> None:
    with build_host(Limits(max_capability_calls=7, max_printed_bytes=2048)) as cm:
        cm.configure(disclose_limits=disclose)
        async with Client(build_server(cm, subject="a")) as client:
            listed = await client.list_tools()
    description = next(t.description for t in listed.tools if t.name == "execute") or ""
    budget = (
        "Budget per program: 7 capability calls, 10 s in all (5 s running code), 1 MiB "
        "returned, 2 KiB printed, 256 MiB of memory, session state 1 MiB, idle 1 h."
    )
    assert description.endswith(budget) is disclose
    assert "Budget" in description or not disclose


async def test_the_sdk_checks_a_call_against_the_schema_the_tools_list_gives() -> None:
    """A 2026-era call's `Mcp-Param-*` headers are checked against each tool's listed input
    schema, looked up by name rather than by listing the tools again."""
    with build_host() as cm:
        server = build_server(cm, subject="a")
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
    assert server.get_tool_input_schema is not None
    assert {tool.name: server.get_tool_input_schema(tool.name) for tool in listed} == {
        tool.name: tool.input_schema for tool in listed
    }
    assert server.get_tool_input_schema("no_such_tool") is None
