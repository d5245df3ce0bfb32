"""Progress over MCP, with the SDK's own in-memory client in both eras: a request that
carries a `progressToken` gets `notifications/progress` as its program runs, rising, the
last one (the final count) before the reply; a request without one gets none.

The 2026-era in-memory client hands progress to its callback out of band and puts no
`progressToken` in `_meta`, unlike every wire transport (stdio, HTTP): its calls here
send the token themselves, as a client on the wire does."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import Server

from codemode import CodeMode
from codemode.mcp.server import build_server
from codemode.mcp.tools import EXECUTE_DESCRIPTION
from tests.conftest import CANARY, assert_no_canary, build_host

pytestmark = pytest.mark.anyio
MODES = ["legacy", "auto"]
P = "def main():\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def host() -> Iterator[CodeMode]:
    with build_host() as cm:
        yield cm


@pytest.fixture
def server(host: CodeMode) -> Server[Any]:
    return build_server(host, subject="alice")


class Watcher:
    """What one call's client saw, in order: each note as (progress, total, message), and
    `"reply"` when the call returned."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None] | str] = []

    async def note(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))

    @property
    def notes(self) -> list[tuple[float, float | None, str | None]]:
        return [entry for entry in self.seen if not isinstance(entry, str)]


async def watched(client: Client, mode: str, source: str, watcher: Watcher) -> dict[str, Any]:
    """Run `source` with a progress token; the reply's structured content."""
    meta: Any = {"progress_token": "run-1"} if mode == "auto" else None
    result = await client.call_tool(
        "execute", {"source": source}, progress_callback=watcher.note, meta=meta
    )
    watcher.seen.append("reply")
    structured: dict[str, Any] | None = result.structured_content
    assert structured is not None
    return structured


@pytest.mark.parametrize("mode", MODES)
async def test_the_counts_rise_to_the_last_call_and_the_last_note_comes_before_the_reply(
    server: Server[Any], mode: str
) -> None:
    """Twelve calls of 60 ms: the first note a quarter second in, then at most 4 a second,
    each a higher count, the last one the final count. (The SDK's client drops a note that
    comes after its reply, so the last count arriving at all means it came first.)"""
    watcher = Watcher()
    source = P + "    for i in range(12):\n        clock.wait(ms=60)\n    return 'done'"
    async with Client(server, mode=mode) as client:
        reply = await watched(client, mode, source, watcher)
    assert reply["result"] == "done"
    notes = watcher.notes
    assert watcher.seen[-1] == "reply" and len(watcher.seen) == len(notes) + 1
    counts = [progress for progress, _, _ in notes]
    assert counts == sorted(set(counts)) and 1 <= counts[0] < 12 and counts[-1] == 12
    assert 2 <= len(notes) < 12  # rate-limited: 0.72 s of calls, at most 4 notes a second
    assert all(total is None for _, total, _ in notes)
    first = notes[0][2]
    assert first is not None and first.startswith(f"{counts[0]:.0f} call")
    last = notes[-1][2]
    assert last is not None
    words = last.split(" · ")
    assert (words[0], words[2]) == ("12 calls", "clock.wait")
    assert words[1].endswith(" s") and float(words[1][:-2]) >= 0.7


@pytest.mark.parametrize("mode", MODES)
async def test_the_programs_own_progress_arrives_and_drives_the_notes(
    server: Server[Any], mode: str
) -> None:
    watcher = Watcher()
    source = (
        P + '    progress("half", done=10, total=20)\n'
        "    clock.wait(ms=600)\n"
        '    progress("all", done=20, total=20)\n'
        "    return 1"
    )
    async with Client(server, mode=mode) as client:
        await watched(client, mode, source, watcher)
    assert watcher.seen == [(10, 20, "half"), (20, 20, "all"), "reply"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_request_without_a_token_gets_no_note(server: Server[Any], mode: str) -> None:
    """In the 2025 era every notification the client receives is seen; in the 2026 era
    (in memory) the callback is given but the request carries no token."""
    notifications: list[str] = []

    async def received(message: Any) -> None:
        notifications.append(type(message).__name__)

    watcher = Watcher()
    source = P + "    for i in range(3):\n        clock.wait(ms=150)\n    return 1"
    async with Client(server, mode=mode, message_handler=received) as client:
        if mode == "auto":
            await client.call_tool("execute", {"source": source}, progress_callback=watcher.note)
        else:
            await client.call_tool("execute", {"source": source})
            assert notifications == []
            await client.call_tool("execute", {"source": source}, progress_callback=watcher.note)
            assert notifications != []  # the same client sees the notes of a call that asks
            watcher.seen.clear()
    assert watcher.seen == []


@pytest.mark.parametrize("mode", MODES)
async def test_no_note_tells_what_a_handler_an_authorizer_or_a_result_said(
    server: Server[Any], mode: str
) -> None:
    """A handler's exception, a denial's reason, a failed policy and a result off its type
    each hold the canary: the notes name the calls, and nothing they said."""
    watcher = Watcher()
    source = P + (
        "    for call in (records.fail, records.secret, records.flaky, records.badresult):\n"
        "        try:\n"
        "            call()\n"
        "        except Exception as e:\n"
        "            progress(str(e)[:20])\n"
        "        clock.wait(ms=400)\n"
        "    return 1"
    )
    async with Client(server, mode=mode) as client:
        await watched(client, mode, source, watcher)
    assert_no_canary(json.dumps(watcher.notes))
    texts = [message or "" for _, _, message in watcher.notes]
    own = ["capability failed", "permission denied", "authorization policy", "capability failed"]
    assert [text for text in texts if " · " not in text] == own  # the program's own words
    for text in texts:
        if " · " in text:
            assert re.fullmatch(r"\d+ calls? · \d+\.\d s · (records\.\w+|clock\.wait)", text)
    assert texts[-1].startswith("8 calls · ")
    assert CANARY not in json.dumps(watcher.seen)


async def test_a_call_its_client_gives_up_on_sends_nothing_after_and_the_next_one_runs(
    server: Server[Any],
) -> None:
    watcher, noted = Watcher(), anyio.Event()

    async def note(progress: float, total: float | None, message: str | None) -> None:
        await watcher.note(progress, total, message)
        noted.set()

    source = P + "    for i in range(40):\n        clock.wait(ms=50)\n    return 1"
    async with Client(server, mode="legacy") as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("execute", {"source": source}, progress_callback=note)

            group.start_soon(call)
            await noted.wait()  # given up on once its first note came
            group.cancel_scope.cancel()
        before = len(watcher.seen)
        assert before >= 1
        await anyio.sleep(0.5)
        assert len(watcher.seen) == before  # its run was cancelled: no note of it after
        again = Watcher()
        quick = P + "    clock.wait(ms=1)\n    return 2"
        reply = await watched(client, "legacy", quick, again)
    assert reply["result"] == 2
    assert again.seen == ["reply"]  # answered within its first quarter second: no note


async def test_a_slow_client_gets_the_latest_note_and_never_slows_the_program() -> None:
    """The 2026-era in-memory client awaits its callback as the note is sent: its first
    one is held until the program has made its last call, so the program ran to its end
    while the client sat on a note; the notes of the calls after it replace one another
    in the one-slot mailbox, so once it lets go the client gets at most the latest and
    the last count, before the reply."""
    finished = threading.Event()
    watcher = Watcher()

    async def slow(progress: float, total: float | None, message: str | None) -> None:
        if not watcher.seen:  # held until the program is past its last call
            with anyio.fail_after(60):  # a guard against a hang, not a measure
                await anyio.to_thread.run_sync(finished.wait)
        await watcher.note(progress, total, message)

    with build_host() as cm:

        @cm.capability("marks.finish", summary="Marks the program's last call.")
        def finish() -> int:
            finished.set()
            return 0

        source = P + "    for i in range(12):\n        clock.wait(ms=60)\n    return marks.finish()"
        async with Client(build_server(cm, subject="alice"), mode="auto") as client:
            result = await client.call_tool(
                "execute", {"source": source}, progress_callback=slow, meta={"progress_token": "t"}
            )
    assert result.structured_content is not None and result.structured_content["result"] == 0
    assert finished.is_set()  # the program reached its end while its first note was held
    counts = [progress for progress, _, _ in watcher.notes]
    assert 2 <= len(counts) <= 3 and counts == sorted(set(counts)) and counts[-1] == 13


def test_the_execute_description_tells_how_to_report_progress() -> None:
    assert (
        '\nCall progress("message", done=3, total=20) to tell the client how far the program '
        "is; done and total are optional numbers and it returns None.\n"
    ) in EXECUTE_DESCRIPTION
