"""An upstream's session lifecycle against a hostile raw JSON-RPC server: one start at a
time whoever gives up on it, no call's failure ending another's, nothing left running,
and no listing stalled by a message nested past the SDK's parse depth."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest

from codemode import CodeMode, CodeModeError
from codemode.authz import AllowAll
from codemode.sources.mcp.upstream import Target, Upstream, UpstreamError, UpstreamTimeout
from tests.conftest import alive, eventually
from tests.sources.mcp.conftest import PYTHON

RAW = str(Path(__file__).with_name("raw_server.py"))
"""A server writing JSON-RPC by hand (see its docstring)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def raw_upstream(**env: str) -> AsyncIterator[Upstream]:
    """An upstream over the raw server, in a task group of its own (its source's role);
    closed on the way out, where any task it left behind is cancelled."""
    async with anyio.create_task_group() as group:

        def spawn(function: Any, *args: Any) -> None:
            group.start_soon(function, *args)

        upstream = Upstream("raw", Target(command=PYTHON, args=[RAW], env=env), spawn)
        try:
            yield upstream
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.close()
                upstream.release()
            group.cancel_scope.cancel()


def text(result: mt.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, mt.TextContent)
    return content.text


# -- one start at a time ------------------------------------------------------------------


@pytest.mark.anyio
async def test_calls_that_give_up_on_a_slow_start_share_it_and_leave_nothing(
    tmp_path: Path,
) -> None:
    events, hold = tmp_path / "events", tmp_path / "hold"
    hold.touch()
    async with raw_upstream(RAW_EVENTS=str(events), RAW_HOLD=str(hold)) as upstream:
        with pytest.raises(UpstreamTimeout):
            await upstream.call("pid", {}, timeout=0.5)
        with anyio.move_on_after(0.5) as cancelled:  # a cancelled call, not a timed-out one
            await upstream.call("pid", {}, timeout=None)
        assert cancelled.cancelled_caught
        with pytest.raises(UpstreamTimeout):
            await upstream.call("pid", {}, timeout=0.5)
        hold.unlink()
        answered = text(await upstream.call("pid", {}, timeout=10))
        assert _pids(events) == [int(answered)]  # one start, which became the shared session
    assert not alive(int(answered))


@pytest.mark.anyio
async def test_close_ends_a_start_in_flight_at_once(tmp_path: Path) -> None:
    events, hold = tmp_path / "events", tmp_path / "hold"
    hold.touch()
    async with raw_upstream(RAW_EVENTS=str(events), RAW_HOLD=str(hold)) as upstream:
        with pytest.raises(UpstreamTimeout):
            await upstream.call("pid", {}, timeout=0.5)
        [pid] = await anyio.to_thread.run_sync(_wait_for, events, bool)  # it has started
        # The start is held until the hold file goes, which it never does: a close that
        # waited for the start would wait out the 30 s start deadline, past this guard.
        with anyio.fail_after(20):
            await upstream.close()
        assert not alive(pid)
        assert hold.exists()


def test_a_first_use_upstream_slow_to_start_leaves_no_process_behind(tmp_path: Path) -> None:
    events, hold = tmp_path / "events", tmp_path / "hold"
    cm = CodeMode(authorizer=AllowAll())
    try:
        cm.add_mcp_server(
            "raw",
            command=PYTHON,
            args=[RAW],
            env={"RAW_EVENTS": str(events), "RAW_HOLD": str(hold)},
            include=["pid"],
            connect="first_use",
            timeout=0.5,
        )
        hold.touch()  # from now on the server is slow to start
        for _ in range(3):
            with pytest.raises(CodeModeError) as info:
                cm.execute("def main():\n    return raw.pid()", subject="alice")
            assert str(info.value) == "capability failed: the upstream did not answer within 0.5 s"
        assert len(_pids(events)) == 2  # the one that listed the tools, and one start
    finally:  # the start in flight is never answered: a close that waited for it would
        closing = threading.Thread(target=cm.close)  # stay past the guard (30 s deadline)
        closing.start()
        closing.join(20)
    assert not closing.is_alive()
    assert not any(alive(pid) for pid in _pids(events))


# -- one call's failure ends no other call --------------------------------------------------


@pytest.mark.anyio
async def test_a_failed_call_whose_ping_times_out_does_not_end_a_call_in_flight(
    tmp_path: Path,
) -> None:
    events, gate = tmp_path / "events", tmp_path / "gate"
    env = {"RAW_EVENTS": str(events), "RAW_GATE": str(gate), "RAW_NO_PING": "1"}
    async with raw_upstream(**env) as upstream:
        answers: list[str] = []

        async def slow() -> None:
            answers.append(text(await upstream.call("slow", {}, timeout=None)))

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            await anyio.to_thread.run_sync(_wait_for, events, lambda lines: "call slow" in lines)
            with pytest.raises(UpstreamError, match=r"^[A-Za-z]+Error: "):
                await upstream.call("garbled", {}, timeout=None)  # its ping goes unanswered
            gate.touch()
        assert answers == ["slept"]
        [first] = _pids(events)
        # The session that did not answer was shared no more, and ended once idle.
        assert int(text(await upstream.call("pid", {}, timeout=10))) != first
        assert await anyio.to_thread.run_sync(_ends, first)


@pytest.mark.anyio
async def test_a_failed_call_whose_ping_times_out_alone_retires_the_session(
    tmp_path: Path,
) -> None:
    events = tmp_path / "events"
    async with raw_upstream(RAW_EVENTS=str(events), RAW_NO_PING="1") as upstream:
        first = int(text(await upstream.call("pid", {}, timeout=10)))
        with pytest.raises(UpstreamError, match=r"^[A-Za-z]+Error: "):
            await upstream.call("garbled", {}, timeout=None)
        assert int(text(await upstream.call("pid", {}, timeout=10))) != first
        assert await anyio.to_thread.run_sync(_ends, first)


@pytest.mark.anyio
async def test_a_failed_call_whose_ping_is_answered_keeps_the_session(tmp_path: Path) -> None:
    async with raw_upstream() as upstream:
        first = text(await upstream.call("pid", {}, timeout=10))
        with pytest.raises(UpstreamError, match=r"^[A-Za-z]+Error: "):
            await upstream.call("garbled", {}, timeout=None)
        assert text(await upstream.call("pid", {}, timeout=10)) == first


# -- messages nested past the SDK's parse depth --------------------------------------------


@pytest.mark.anyio
async def test_a_tool_nested_past_the_parse_depth_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "codemode.upstream"):
        async with raw_upstream(RAW_DEEP="2000") as upstream:
            with anyio.fail_after(10):
                tools = await upstream.tools()
            assert [tool.name for tool in tools] == ["ok", "pid", "slow", "garbled", "deep_answer"]
            assert text(await upstream.call("ok", {}, timeout=10)) == "ok"
    [warning] = [r.getMessage() for r in caplog.records if r.name == "codemode.upstream"]
    assert warning == (
        "MCP server raw: tool 'deep' skipped: its listing is nested deeper than the MCP SDK "
        "reads (recursion limit exceeded)"
    )


@pytest.mark.anyio
async def test_a_tool_just_within_the_parse_depth_is_kept() -> None:
    async with raw_upstream(RAW_DEEP="150") as upstream:
        with anyio.fail_after(10):
            tools = await upstream.tools()
    assert [tool.name for tool in tools] == ["ok", "deep", "pid", "slow", "garbled", "deep_answer"]


@pytest.mark.anyio
async def test_an_answer_nested_past_the_parse_depth_fails_its_call_at_once() -> None:
    async with raw_upstream() as upstream:
        before = text(await upstream.call("pid", {}, timeout=10))
        with anyio.fail_after(10), pytest.raises(UpstreamError) as info:
            await upstream.call("deep_answer", {}, timeout=None)
        assert str(info.value) == (
            "MCPError: the answer is nested deeper than the MCP SDK reads (recursion limit "
            "exceeded)"
        )
        assert text(await upstream.call("pid", {}, timeout=10)) == before  # the session stays


def test_registration_skips_a_tool_nested_past_the_parse_depth() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:  # a dropped listing would be an error, late
        names = cm.add_mcp_server("raw", command=PYTHON, args=[RAW], env={"RAW_DEEP": "2000"})
        assert "raw.deep" not in names
        assert "raw.ok" in names


# -- helpers -------------------------------------------------------------------------------


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _pids(path: Path) -> list[int]:
    """Every process of the raw server that started (each notes its pid first)."""
    return [int(line.removeprefix("pid ")) for line in _lines(path) if line.startswith("pid ")]


def _wait_for(path: Path, found: Callable[[list[str]], object], timeout: float = 10) -> list[int]:
    """The events file's pids, once `found` holds for its lines (polled: it is a file)."""
    eventually(lambda: found(_lines(path)), timeout)
    return _pids(path)


def _ends(pid: int, timeout: float = 10) -> bool:
    """Whether the process ends within `timeout` seconds of polls (the SDK's grace is 2 s)."""
    return bool(eventually(lambda: not alive(pid), timeout))
